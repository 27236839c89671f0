"""The Slack messages a person follows a reservation by (pure formatting, no I/O).

Over 400 lines: every Slack text in one place by design (no wording is written in logic).

These messages are the demo's timeline too, so each one is complete on its own: what happened, to which
reservation, with the money (USD) and times (UTC). Tables are fixed-width code blocks.

Text that comes from a request or from outside (requesters, approvers, reasons, error messages, names
AWS or a person chose) is passed through :func:`escape` wherever it is interpolated, so that a requester
called ``<!channel> <https://evil.example|Approve>`` is shown as those characters, never as a channel
mention or a link (Slack, "Formatting text for app surfaces": escape ``&``, ``<`` and ``>``).

Each message has Block Kit ``blocks`` (a header, the details as a section and fields, a context line with
the request id; Slack's "Block Kit" reference) and the same content as plain mrkdwn ``text``, which Slack
shows in notifications and clients without blocks. Each names its ``request_id`` so that
:func:`capacity.logic.steps.common.post` can put it in the requester's thread.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from capacity.offerings import Offering, OfferingSummary
from capacity.planner import Plan, describe_offering
from capacity.pricing import format_usd
from capacity.records import CostSummary
from capacity.request import ReservationRequest
from capacity.resources import CapacityReservation, SlackMessage
from capacity.timeutil import short

if TYPE_CHECKING:
    from capacity.contracts.purchase import CapacityBlockOutput

TABLE_ROWS = 10
ALTERNATIVE_ROWS = 5

_HEADER = (
    f"{'#':>2}  {'Region':<14} {'Zone':<16} {'Start (UTC)':<16}  {'End (UTC)':<16}  {'Hours':>5} "
    f"{'Upfront fee':>13} {'$/inst-h':>9} {'On-demand eq.':>14} {'Saving':>7} {'Break-even':>10}"
)


SECTION_LIMIT = 3000  # characters of text in one section block
HEADER_LIMIT = 150  # characters of plain text in a header block
FIELDS_LIMIT = 10  # fields in one section block


_SLACK_USER_ID = re.compile(r"^[A-Z0-9]{1,64}$")


def escape(text: object) -> str:
    """``text`` made inert in Slack mrkdwn: ``&``, ``<`` and ``>`` as ``&amp;``, ``&lt;`` and ``&gt;``, the
    three characters Slack's control sequences (mentions, ``<!channel>``, links) are made of (Slack,
    "Formatting text for app surfaces", "Escaping text"). Slack shows the characters themselves."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mention(requester: str) -> str:
    """``<@U123>`` for a Slack requester (``slack:U123``, a real user id), else the requester escaped."""
    user = requester.removeprefix("slack:")
    if requester.startswith("slack:") and _SLACK_USER_ID.match(user):
        return f"<@{user}>"
    return escape(requester)


def blocks(
    title: str,
    body: str = "",
    *,
    fields: Sequence[tuple[str, str]] = (),
    request_id: str | None = None,
    extra: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Block Kit for one message: ``header`` (title), ``section`` (mrkdwn body, split at 3,000 characters
    on line ends), ``section`` ``fields`` (label and value, at most 10), ``extra`` blocks, and a
    ``context`` naming the request."""
    result: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:HEADER_LIMIT], "emoji": True}}
    ]
    for chunk in _chunks(body):
        result.append({"type": "section", "text": {"type": "mrkdwn", "text": chunk}})
    if fields:
        result.append(
            {
                "type": "section",
                "fields": [
                    {"type": "mrkdwn", "text": f"*{label}*\n{value}"[:2000]}
                    for label, value in fields[:FIELDS_LIMIT]
                ],
            }
        )
    result.extend(extra)
    if request_id:
        result.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": f"Reservation `{request_id}`"}]}
        )
    return result


def _chunks(body: str) -> list[str]:
    """``body`` in pieces of at most 3,000 characters, cut at line ends (code blocks closed and reopened)."""
    if not body.strip():
        return []
    pieces: list[str] = []
    current = ""
    for line in body.split("\n"):
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) <= SECTION_LIMIT - 8:
            current = candidate
            continue
        start = line
        if current:
            if current.count("```") % 2:  # inside a code block: close it here, reopen in the next piece
                current += "\n```"
                start = "```\n" + line
            pieces.append(current)
        current = start[: SECTION_LIMIT - 8]
    if current:
        pieces.append(current)
    return pieces


def _message(text: str, title: str, *, request_id: str | None, **kwargs: Any) -> SlackMessage:
    """A message whose blocks repeat ``text`` under a header ``title`` (plus ``fields`` or ``extra``)."""
    return SlackMessage(text, blocks(title, text, request_id=request_id, **kwargs), request_id=request_id)


def thread_root(request: ReservationRequest | None, *, request_id: str, user_id: str) -> SlackMessage:
    """The first message of a Slack request's thread: who asked for what; progress follows as replies."""
    if request is None:
        what = "a reservation"
    else:
        what = (
            f"{request.instance_count} x {request.instance_type} for {request.duration_hours} h between "
            f"{short(request.earliest_start)} and {short(request.latest_end)} UTC in "
            f"{', '.join(request.regions)}, budget {format_usd(request.max_upfront_fee_usd)}"
        )
    text = f"*Reservation {request_id}* for <@{user_id}>: {what}. Progress follows in this thread."
    fields: list[tuple[str, str]] = []
    if request is not None:
        fields = [
            ("Capacity", f"{request.instance_count} x {request.instance_type}"),
            ("Duration", f"{request.duration_hours} h"),
            ("Window (UTC)", f"{short(request.earliest_start)} to {short(request.latest_end)}"),
            ("Regions", ", ".join(request.regions)),
            ("Budget", format_usd(request.max_upfront_fee_usd)),
            ("Models", ", ".join(model.name for model in request.models)),
        ]
    return SlackMessage(
        text,
        blocks(
            f"Reservation {request_id}",
            f"Requested by <@{user_id}>. Progress follows in this thread.",
            fields=fields,
            request_id=request_id,
        ),
        request_id=request_id,
    )


def _pct(value: Decimal | None, *, scale: int = 1, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value * scale:.{digits}f}%"


def offering_row(index: int, offering: Offering) -> str:
    """One fixed-width table row (see the header in :func:`offerings_table`)."""
    equivalent = (
        format_usd(offering.on_demand_equivalent_usd)
        if offering.on_demand_equivalent_usd is not None
        else "n/a"
    )
    return (
        f"{index:>2}  {offering.region:<14} {offering.availability_zone[:16]:<16} "
        f"{short(offering.start_time):<16}  {short(offering.end_time):<16}  {offering.duration_hours:>5} "
        f"{format_usd(offering.upfront_fee_usd):>13} {offering.usd_per_instance_hour:>9.2f} {equivalent:>14} "
        f"{_pct(offering.saving_percent):>7} {_pct(offering.break_even_utilisation, scale=100, digits=0):>10}"
    )


def offerings_table(request: ReservationRequest, plan: Plan, ranked: Sequence[Offering]) -> SlackMessage:
    """The offerings found for ``request``: the best feasible ones, then the nearest alternatives."""
    title = (
        f"*Offerings for {request.id}* ({request.instance_count} x {request.instance_type}, "
        f"{request.duration_hours} h, window {short(request.earliest_start)} to {short(request.latest_end)} "
        f"UTC, regions {', '.join(request.regions)})"
    )
    lines = [title, f"{plan.considered} offerings found, {len(ranked)} feasible."]
    if ranked:
        rows = [offering_row(i, o) for i, o in enumerate(ranked[:TABLE_ROWS], start=1)]
        more = f"\n... and {len(ranked) - TABLE_ROWS} more" if len(ranked) > TABLE_ROWS else ""
        lines.append("Feasible, best first (lowest fee, earliest start, preferred region):")
        lines.append("```\n" + "\n".join([_HEADER, *rows]) + more + "\n```")
    if plan.alternatives:
        rows = [offering_row(i, o) for i, o in enumerate(plan.alternatives[:ALTERNATIVE_ROWS], start=1)]
        notes = [
            f"{i:>2}  {escape(o.infeasible_reason)}"
            for i, o in enumerate(plan.alternatives[:ALTERNATIVE_ROWS], 1)
        ]
        lines.append("Nearest alternatives (not matching the request):")
        lines.append("```\n" + "\n".join([_HEADER, *rows, "", "Why not:", *notes]) + "\n```")
    if plan.quota_errors:
        lines.append(
            "Quota errors: "
            + "; ".join(f"{region}: {escape(msg)}" for region, msg in sorted(plan.quota_errors.items()))
        )
    text = "\n".join(lines)
    return _message(text, f"Offerings for {request.id}", request_id=request.id)


def decision(request: ReservationRequest, plan: Plan) -> SlackMessage:
    """The decision and why."""
    text = f"*Decision for {request.id}: {plan.decision.value}*\n{escape(plan.reason)}"
    return _message(text, f"Planned {request.id}: {plan.decision.value}", request_id=request.id)


def approval_request(
    request: ReservationRequest,
    offering: OfferingSummary | None,
    reason: str,
    timeout_seconds: int,
    *,
    threshold: Decimal | None = None,
    deadline: datetime | None = None,
) -> SlackMessage:
    """Ask for approval, with Approve/Reject buttons (Block Kit ``actions``; value = the request id).

    ``threshold`` (USD) is the one that made the approval needed: the team's when it is lower than the
    request's (:func:`capacity.logic.governance.policy.as_admitted`), not necessarily
    ``request.approval_above_usd``. ``deadline``: when the wait times out, told as an instant of the
    deployment's clock (a local cloud's virtual one runs faster than the reader's), with the timeout beside
    it.
    """
    what = f"{describe_offering_summary(offering)}" if offering else "the chosen offering"
    above = f" (above the approval threshold {format_usd(threshold)})" if threshold is not None else ""
    text = (
        f"*Approval needed for {request.id}* (requested by {mention(request.requester or 'unknown')}"
        f"{f', team {escape(request.team)}' if request.team else ''}): buy {what}{above}?\n"
        f"{escape(reason)}\n"
        + (
            f"Answer by {deadline:%Y-%m-%d %H:%M} UTC (within {timeout_seconds // 3600} h)"
            if deadline is not None
            else f"Answer within {timeout_seconds // 3600} h"
        )
        + " with the buttons or "
        f'`POST /reservations/{request.id}/approval` with {{"approved": true|false, "reason": ...}} '
        "(an approver of the team, never the requester); no answer means nothing is bought."
    )
    buttons: list[dict[str, Any]] = [
        {
            "type": "actions",
            "block_id": f"approval:{request.id}"[:255],
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve_reservation",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": request.id,
                },
                {
                    "type": "button",
                    "action_id": "reject_reservation",
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": request.id,
                },
            ],
        },
    ]
    fields = []
    if offering is not None:
        fields = [
            ("Upfront fee", format_usd(offering.upfront_fee_usd)),
            ("Region", f"{offering.region} ({offering.availability_zone})"),
            ("Window (UTC)", f"{short(offering.start_time)} to {short(offering.end_time)}"),
            ("Capacity", f"{offering.instance_count} x {offering.instance_type}"),
        ]
        if threshold is not None:
            fields.append(("Approval above", format_usd(threshold)))
    return _message(
        text, f"Approval needed: {request.id}", request_id=request.id, fields=fields, extra=buttons
    )


def approval_decided(
    request_id: str, *, approved: bool, approver: str, offering_text: str = ""
) -> SlackMessage:
    """Replaces the approval message once a person pressed a button (the buttons go away)."""
    verdict = "Approved" if approved else "Rejected"
    after = "the purchase goes ahead." if approved else "nothing is bought."
    text = f"*{verdict} by {mention(approver)}*: {request_id}, {after}" + (
        f"\n{escape(offering_text)}" if offering_text else ""
    )
    return _message(text, f"{verdict}: {request_id}", request_id=request_id)


def describe_offering_summary(offering: OfferingSummary) -> str:
    """``$X in region (zone), start to end UTC (N h, C x type)`` for the small offering form."""
    return (
        f"{format_usd(offering.upfront_fee_usd)} in {offering.region} ({offering.availability_zone}), "
        f"{short(offering.start_time)} to {short(offering.end_time)} UTC "
        f"({offering.duration_hours} h, {offering.instance_count} x {offering.instance_type})"
    )


def searching(
    request: ReservationRequest, reason: str, next_look_at: datetime, looks_left: int
) -> SlackMessage:
    """Nothing fits yet and the request keeps looking (``search_until``, issue 17): why, the next look, the
    deadline, and that it buys as soon as something fits (UTC)."""
    deadline = short(request.search_until) if request.search_until else "its deadline"
    text = (
        f"*Still looking for {request.id}*: nothing fits the request yet. {escape(reason)}\n"
        f"Next look at {short(next_look_at)} UTC, then at most {looks_left - 1} more until {deadline} UTC "
        "(search_until); it buys as soon as something fits the budget and the rules, and says so here if "
        f"nothing does by then. Cancel with `/gpu cancel {request.id}` to stop looking."
    )
    return _message(text, f"Still looking for {request.id}", request_id=request.id)


def approval_outcome(request_id: str, *, approved: bool, reason: str) -> SlackMessage:
    """The approval's outcome (rejected, or timed out)."""
    verdict = "approved" if approved else "not approved"
    tail = "" if approved else " Nothing was bought."
    text = f"*Reservation {request_id} {verdict}*: {escape(reason)}.{tail}"
    return _message(text, f"{request_id} {verdict}", request_id=request_id)


def purchased(
    request_id: str, *, plan_name: str, plan_arn: str, region: str, start: str, end: str, fee: Decimal
) -> SlackMessage:
    """The purchase (money spent, cannot be cancelled) and when the release is scheduled."""
    text = (
        f"*Purchased training plan {plan_name}* for {request_id}: {format_usd(fee)} upfront, {region}, "
        f"{start} to {end}. Training plans cannot be cancelled; the release is scheduled before the end.\n"
        f"`{plan_arn}`"
    )
    fields = [
        ("Training plan", plan_name),
        ("Upfront fee", format_usd(fee)),
        ("Region", region),
        ("Window (UTC)", f"{start} to {end}"),
    ]
    return _message(text, f"Purchased: {request_id}", request_id=request_id, fields=fields)


def plan_status(request_id: str, *, plan_name: str, status: str, start: str, end: str) -> SlackMessage:
    """A training plan status change (``Scheduled``, ``Active``)."""
    text = f"*Training plan {plan_name} is {status}* ({request_id}): {start} to {end}."
    return _message(text, f"{request_id}: training plan {status}", request_id=request_id)


def ready(request_id: str, *, region: str, endpoint: str, components: Sequence[str]) -> SlackMessage:
    """Endpoint and inference components in service."""
    listed = "\n".join(f"  - {name}" for name in components)
    text = (
        f"*{request_id} is READY*: endpoint `{endpoint}` in {region} serves {len(components)} inference "
        f"component(s):\n{listed}\nInvoke with InvokeEndpoint(EndpointName, InferenceComponentName)."
    )
    example = components[0] if components else "<component>"
    how = (
        "Invoke a component with InvokeEndpoint (EndpointName and InferenceComponentName), e.g.\n```\n"
        f"aws sagemaker-runtime invoke-endpoint --region {region} --endpoint-name {endpoint} \\\n"
        f"  --inference-component-name {example} --content-type application/json \\\n"
        """  --body '{"inputs": "Hello"}' --cli-binary-format raw-in-base64-out out.json\n```"""
    )
    fields = [("Endpoint", f"`{endpoint}`"), ("Region", region)] + [
        ("Inference component", f"`{name}`") for name in components[: FIELDS_LIMIT - 2]
    ]
    return SlackMessage(
        text,
        blocks(f"Ready: {request_id}", how, fields=fields, request_id=request_id),
        request_id=request_id,
    )


def failure(
    request_id: str, *, error: str, reason: str, releasing: bool, spent: Decimal | None = None
) -> SlackMessage:
    """A failure with its reason, the money already spent (USD, paid upfront: not refunded) and what happens
    next."""
    after = " Releasing whatever was created." if releasing else " Nothing was bought."
    if spent is not None:
        after = f" {format_usd(spent)} was already paid upfront (not refundable).{after}"
    text = f"*{request_id} FAILED* ({escape(error)}): {escape(reason)}{after}"
    return _message(text, f"Failed: {request_id}", request_id=request_id)


def resumed(request_id: str, *, why: str) -> SlackMessage:
    """A reserve workflow stopped after money was at stake (``why``) and was started again."""
    text = (
        f"*{request_id} resumed*: {escape(why)} after the purchase had begun. What was bought is kept: the "
        "workflow starts again from what is recorded and buys nothing twice."
    )
    return _message(text, f"Resumed: {request_id}", request_id=request_id)


def team_refusal(request_id: str, *, reason: str) -> SlackMessage:
    """A purchase the team's limits refused at purchase time (REJECTED; issue 16): what is left, nothing
    bought."""
    text = f"*{request_id} REJECTED* (team limits): {escape(reason)}"
    return _message(text, f"Rejected: {request_id}", request_id=request_id)


def degraded(request_id: str, *, state: str, error: str, since: datetime, minutes: int) -> SlackMessage:
    """A reserve step keeps failing on transient AWS faults; the reservation is kept and retried."""
    text = (
        f"*{request_id} delayed*: step {state} has failed on transient AWS faults ({escape(error)}) since "
        f"{short(since)} UTC ({minutes} min). The reservation is kept: the step is retried until it works or "
        "the reservation ends. Nothing to do unless this lasts; AWS Health may say more."
    )
    return _message(text, f"Delayed: {request_id}", request_id=request_id)


def release_failure(
    request_id: str,
    *,
    error: str,
    reason: str,
    leftovers: Sequence[str] = (),
    retry_at: str | None = None,
    attempt: int | None = None,
) -> SlackMessage:
    """A release attempt failed: why, every resource still there (``leftovers``), when the release is tried
    again (``retry_at``, UTC text), and that a person must act if it keeps failing."""
    left = f"\nStill there (billing until deleted): {escape(', '.join(leftovers))}." if leftovers else ""
    which = f" (attempt {attempt})" if attempt else ""
    after = (
        f"the release is tried again at {retry_at} (every attempt is reported here) until nothing is left; "
        "if it keeps failing, "
        if retry_at
        else ""
    )
    text = (
        f"*{request_id} RELEASE FAILED*{which} ({escape(error)}): {escape(reason.rstrip('.'))}.{left}\n"
        f"Resources of this reservation may still be billing: {after}a person must delete them (SageMaker "
        "or EC2 console or CLI) and check the ledger."
    )
    return _message(text, f"Release failed: {request_id}", request_id=request_id)


def release_rejected(request_id: str, *, reason: str) -> SlackMessage:
    """A release request that was rejected before it identified a reservation: nothing was touched."""
    text = (
        f"*Release request for {escape(request_id)} rejected* (InvalidRequest): "
        f"{escape(reason.rstrip('.'))}. It was not acted on: nothing was deleted or checked."
    )
    return SlackMessage(text, blocks("Release request rejected", text))  # no reservation identified


def released(summary: CostSummary | None, *, request_id: str, reason: str | None) -> SlackMessage:
    """The release and the cost summary (fixed-width)."""
    why = f" ({escape(reason)})" if reason else ""
    if summary is None:
        text = f"*{request_id} released*{why}: nothing had been bought, nothing to delete."
        return _message(text, f"Released: {request_id}", request_id=request_id)

    def money(value: Decimal | None) -> str:
        return format_usd(value) if value is not None else "n/a"

    fee = money(summary.upfront_fee_usd) + (f" ({BROUGHT_NOTE})" if summary.brought else "")
    rows = [
        ("Training plan", f"{_released_name(summary)} ({summary.region})"),
        ("Capacity", f"{summary.instance_count} x {summary.instance_type}"),
        ("Upfront fee", fee),
        ("Hours reserved", f"{summary.hours_reserved:.2f}"),
        ("Hours served", f"{summary.hours_served:.2f}"),
        ("Instance-hours used", _used(summary)),
        (
            "On-demand rate",
            f"${summary.on_demand_usd_per_instance_hour:.2f}/instance-hour"
            if summary.on_demand_usd_per_instance_hour is not None
            else "n/a",
        ),
        ("On-demand, reserved hours", money(summary.on_demand_equivalent_reserved_usd)),
        ("On-demand, what ran", money(summary.on_demand_equivalent_served_usd)),
        (_verdict(summary), _saving(summary)),
        (
            "Break-even utilisation",
            f"{summary.break_even_utilisation_percent:.1f}%"
            if summary.break_even_utilisation_percent is not None
            else "n/a",
        ),
        (
            "Effective $/used inst-h",
            f"${summary.effective_usd_per_served_instance_hour:.2f}"
            if summary.effective_usd_per_served_instance_hour is not None
            else "n/a (brought)"
            if summary.brought
            else "n/a (never served)",
        ),
    ]
    table = "\n".join(f"{label:<27}{value}" for label, value in rows)
    text = (
        f"*{request_id} RELEASED*{why}: whatever was deployed on the plan (inference components, endpoint, "
        f"endpoint config) is deleted; nothing tagged with the reservation is left.\n```\n{table}\n```"
    )
    fields = [
        ("Upfront fee", fee),
        ("Instance-hours used", _used(summary)),
        ("On-demand, what ran", money(summary.on_demand_equivalent_served_usd)),
        (_verdict(summary), _saving(summary)),
    ]
    return _message(text, f"Released: {request_id}", request_id=request_id, fields=fields)


def _released_name(summary: CostSummary) -> str:
    """What was released: the plan's name, the block's id, or ``<market> instances`` on demand."""
    return summary.training_plan_name or summary.capacity_reservation_id or f"{summary.market} instances"


def _used(summary: CostSummary) -> str:
    """``70.82 of 144.00 (49.2%)``, with a note when no instance count was recorded."""
    if summary.instance_hours_used is None or summary.instance_hours_reserved is None:
        return f"{summary.hours_served:.2f} h ({summary.utilisation_percent:.1f}% of reserved)"
    assumed = "" if summary.usage_observed else ", assumed: no instance count recorded"
    return (
        f"{summary.instance_hours_used:.2f} of {summary.instance_hours_reserved:.2f} "
        f"({summary.utilisation_percent:.1f}%{assumed})"
    )


def _verdict(summary: CostSummary) -> str:
    """``Saving vs on-demand`` or, when the reservation cost more than what ran would have, ``Loss vs
    on-demand``."""
    return (
        "Loss vs on-demand"
        if summary.saving_usd is not None and summary.saving_usd < 0
        else "Saving vs on-demand"
    )


BROUGHT_NOTE = "brought: bought outside the orchestrator, not paid by this request"
"""What the cost summary of a brought reservation (issue 17) says in place of a fee and a saving."""


def _saving(summary: CostSummary) -> str:
    """The saving against on-demand for the hours served, or what was lost when it never served (none for a
    brought reservation: its fee is its buyer's)."""
    if summary.brought:
        return f"n/a ({BROUGHT_NOTE})"
    if summary.saving_usd is None:
        return "n/a (no on-demand price for this type)"
    if summary.saving_percent is None:
        return f"{format_usd(summary.saving_usd)} (never served: the upfront fee bought no inference)"
    return f"{format_usd(summary.saving_usd)} ({summary.saving_percent:.1f}%)"


__all__ = [
    "approval_decided",
    "approval_outcome",
    "approval_request",
    "blocks",
    "decision",
    "describe_offering",
    "escape",
    "failure",
    "mention",
    "offering_row",
    "offerings_table",
    "plan_status",
    "purchased",
    "ready",
    "released",
    "scaled_from_zero",
    "thread_root",
]


def scaled_from_zero(
    request_id: str, *, model: str, component: str, copies: int, failed_requests: int
) -> SlackMessage:
    """A model at 0 copies got requests: it is starting ``copies`` copies (requests fail meanwhile)."""
    text = (
        f"*{request_id}*: model `{model}` had 0 copies and received requests; starting {copies} "
        f"cop{'y' if copies == 1 else 'ies'} of `{component}`. {failed_requests} request(s) failed so far; "
        "requests keep failing for the few minutes a copy takes to start."
    )
    return _message(text, f"{request_id}: scaled from zero", request_id=request_id)


def cold_start_ended(request_id: str, *, model: str, failed_requests: int, minutes: float) -> SlackMessage:
    """The cold start of a model is over: how many requests failed during it and for how long."""
    text = (
        f"*{request_id}*: model `{model}` serves again. {failed_requests} request(s) failed during its "
        f"cold start of about {minutes:.0f} minute(s)."
    )
    return _message(text, f"{request_id}: cold start over", request_id=request_id)


def scale_out_refused(request_id: str, *, model: str, ends_at: str) -> SlackMessage:
    """A model at 0 copies got requests in the last hour of the reservation: no copy is started."""
    text = (
        f"*{request_id}*: model `{model}` has 0 copies and received requests, but the reservation ends at "
        f"{ends_at} UTC (within the hour): no copy is started and its requests fail until then."
    )
    return _message(text, f"{request_id}: scale-out refused", request_id=request_id)


def idle_release(request_id: str, *, idle_hours: int) -> SlackMessage:
    """The endpoint served nothing for ``idle_hours``: the reservation is released (idle policy)."""
    text = (
        f"*{request_id}*: the endpoint served no request for {idle_hours} hour(s); releasing it as the "
        "request's idle policy asks (the upfront fee is already paid and is not refunded)."
    )
    return _message(text, f"{request_id}: idle, releasing", request_id=request_id)


def extended(
    request_id: str, *, hours: int, fee: Decimal, old_end: str, new_end: str, release_at: str
) -> SlackMessage:
    """An extension in place was paid: the new end and where the release moved."""
    text = (
        f"*Extended {request_id}* by {hours} h for {format_usd(fee)} upfront: it now ends at {new_end} UTC "
        f"(was {old_end} UTC); the release moved to {release_at} UTC. Extensions cannot be cancelled."
    )
    fields = [("Extension fee", format_usd(fee)), ("New end (UTC)", new_end), ("Release (UTC)", release_at)]
    return _message(text, f"Extended: {request_id}", request_id=request_id, fields=fields)


EXTEND_BUTTON = "extend_reservation"
"""``action_id`` of an extension offering's Extend button (value: JSON ``request_id``, ``offering_id``,
``duration_hours``)."""
EXTEND_BUTTONS_LIMIT = 5
"""Extend buttons shown at most (the cheapest allowed offerings first, as AWS lists them)."""


def extension_offers(request_id: str, hours: int, dry_run: dict[str, Any]) -> SlackMessage:
    """``/gpu extend``'s answer: the extension offerings of a dry run
    (:func:`capacity.logic.continuity.extend.request_extension` without ``offering_id``), each with its new
    end, upfront fee (USD), on-demand equivalent and whether the money rules allow it, and an Extend button
    per allowed one asking to confirm (Block Kit ``confirm``: the fee is paid upfront and not refunded).
    Nothing is bought until a button is pressed."""
    offerings = [item for item in dry_run.get("offerings") or [] if isinstance(item, dict)]
    lines = [
        f"*Extensions of {escape(request_id)} by {hours} h* (it ends {escape(dry_run.get('current_end'))} "
        "now); an extension is paid upfront and is not refunded."
    ]
    if not offerings:
        lines.append(f"No extension of {hours} h is offered now: try another duration, or later.")
    buttons: list[dict[str, Any]] = []
    for index, item in enumerate(offerings, start=1):
        fee = format_usd(Decimal(str(item.get("upfront_fee_usd"))))
        equivalent = item.get("on_demand_equivalent_usd")
        on_demand = f", on demand {format_usd(Decimal(str(equivalent)))}" if equivalent is not None else ""
        verdict = "allowed" if item.get("allowed") else f"not allowed: {escape(item.get('problem'))}"
        if item.get("allowed") and item.get("approval_required"):
            verdict = "allowed once an approver of the team approves it (asked when you press Extend)"
        lines.append(
            f"{index}. to {escape(item.get('end_time'))} in {escape(item.get('availability_zone'))}: "
            f"{fee} upfront{on_demand}; {verdict}"
        )
        if item.get("allowed") and len(buttons) < EXTEND_BUTTONS_LIMIT:
            value = {
                "request_id": request_id,
                "offering_id": item.get("offering_id"),
                "duration_hours": hours,
            }
            buttons.append(
                {
                    "type": "button",
                    "action_id": f"{EXTEND_BUTTON}:{index}",
                    "style": "primary",
                    "text": {"type": "plain_text", "text": f"Extend #{index} ({fee})"[:75]},
                    "value": json.dumps(value, separators=(",", ":"))[:2000],
                    "confirm": {
                        "title": {"type": "plain_text", "text": "Buy this extension?"},
                        "text": {
                            "type": "mrkdwn",
                            "text": f"{fee} upfront, not refunded; {request_id} then ends "
                            f"{item.get('end_time')}.",
                        },
                        "confirm": {"type": "plain_text", "text": "Buy it"},
                        "deny": {"type": "plain_text", "text": "Not now"},
                    },
                }
            )
    text = "\n".join(lines)
    extra = [{"type": "actions", "elements": buttons}] if buttons else []
    return _message(text, f"Extend {request_id}", request_id=request_id, extra=extra)


def extension_requested(request_id: str, offering: dict[str, Any], *, by: str) -> SlackMessage:
    """An Extend button pressed: the extension is requested (bought once by the ExtendCapacity workflow,
    then its payment confirmed; the thread hears the outcome)."""
    fee = format_usd(Decimal(str(offering.get("upfront_fee_usd"))))
    return SlackMessage(
        f"{mention(by)} asked to extend *{escape(request_id)}* to {escape(offering.get('end_time'))} for "
        f"{fee} upfront: it is bought once and its payment confirmed; the outcome follows in its thread.",
        request_id=request_id,
    )


APPROVE_EXTENSION = "approve_extension"
REJECT_EXTENSION = "reject_extension"
"""``action_id`` s of an extension approval's buttons (value: JSON ``request_id``, ``extension_id``)."""


def extension_approval_request(
    request_id: str, extension_id: str, offering: dict[str, Any], *, requester: str, reason: str
) -> SlackMessage:
    """An extension above the approval threshold waits for an approver: Approve/Reject buttons, the API route
    for those without Slack, the fee (USD, upfront, not refunded) and the new end (UTC)."""
    fee = format_usd(Decimal(str(offering.get("upfront_fee_usd"))))
    text = (
        f"*Approval needed to extend {escape(request_id)}* (asked by {mention(requester)}): "
        f"{fee} upfront, not refunded, to {escape(offering.get('end_time'))}.\n{escape(reason)}\n"
        f"Answer with the buttons or `POST /reservations/{request_id}/extensions/{extension_id}/approval` "
        'with {"approved": true|false, "reason": ...} (an approver of the team, never the requester); no '
        "answer means nothing is bought."
    )
    value = json.dumps({"request_id": request_id, "extension_id": extension_id}, separators=(",", ":"))
    buttons = [
        {
            "type": "actions",
            "block_id": f"extension-approval:{request_id}"[:255],
            "elements": [
                {
                    "type": "button",
                    "action_id": APPROVE_EXTENSION,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                    "value": value[:2000],
                },
                {
                    "type": "button",
                    "action_id": REJECT_EXTENSION,
                    "style": "danger",
                    "text": {"type": "plain_text", "text": "Reject"},
                    "value": value[:2000],
                },
            ],
        }
    ]
    fields = [("Extension fee", fee), ("New end (UTC)", str(offering.get("end_time")))]
    return _message(
        text, f"Approval needed: extend {request_id}", request_id=request_id, fields=fields, extra=buttons
    )


def extension_approval_decided(
    request_id: str, extension_id: str, *, approved: bool, approver: str
) -> SlackMessage:
    """An extension approval decided (it replaces the approval message: the buttons go away)."""
    verdict = "Approved" if approved else "Rejected"
    after = "it is bought once and its payment confirmed." if approved else "nothing is bought."
    text = (
        f"*{verdict} by {mention(approver)}*: extension {escape(extension_id)} of {escape(request_id)}, "
        f"{after}"
    )
    return _message(text, f"{verdict}: extend {request_id}", request_id=request_id)


def extension_failed(request_id: str, reason: str) -> SlackMessage:
    """An extension that did not happen (payment refused): the reservation keeps its end and release."""
    text = f"*Extension of {request_id} FAILED*: {reason}. The release is unchanged; nothing was charged."
    return _message(text, f"{request_id}: extension failed", request_id=request_id)


def extension_unconfirmed(request_id: str, extension_id: str) -> SlackMessage:
    """An extension bought whose payment AWS has not confirmed after hours of checking: a person must know
    the release still follows the old end."""
    text = (
        f"*Extension of {request_id} UNCONFIRMED*: extension {extension_id} was bought, but AWS still shows "
        "its payment processing. The release stays at the old end until it is confirmed: send the same "
        "extension again (the same offering_id) to check it, or check it in the AWS console."
    )
    return _message(text, f"{request_id}: extension unconfirmed", request_id=request_id)


# ------------------------------------------------------------------------------ keep serving (serve_until)


def serving_extension(
    request_id: str, offering: dict[str, Any], *, serve_until: str, approval: bool
) -> SlackMessage:
    """``serve_until`` asks for more time and an extension in place is offered: it is bought on the
    requester's behalf (or, above the approval threshold, an approver is asked)."""
    fee = format_usd(Decimal(str(offering.get("upfront_fee_usd"))))
    then = (
        "it waits for an approver of the team (the approval message follows); with no answer in time the "
        "next reservation is bought instead"
        if approval
        else "it is bought once and its payment confirmed"
    )
    text = (
        f"*Keeping {escape(request_id)} served until {escape(serve_until)} UTC*: extending it in place to "
        f"{escape(offering.get('end_time'))} for {fee} upfront (not refunded); {then}."
    )
    return _message(text, f"{request_id}: extending to serve until {serve_until}", request_id=request_id)


def rolling_over(
    request_id: str,
    *,
    successor: str,
    offering: OfferingSummary | None,
    serve_until: str,
    switch_by: str,
    released_at: str | None = None,
) -> SlackMessage:
    """No extension fits: the next reservation is requested (bought once by the reserve workflow, with the
    usual approval above the threshold); clients move when it serves. ``released_at``: the reservation is
    released at its own end, before the successor serves (it starts where hours already paid for end, so
    nothing is paid twice): the message says clients wait in between."""
    bought = f"{describe_offering_summary(offering)}" if offering is not None else "the best offering found"
    then = (
        f"{escape(request_id)} is released then"
        if released_at is None
        else f"{escape(request_id)} is released at its own end ({escape(released_at)} UTC): the successor "
        "starts where the hours already paid for end, so none is paid twice, and nothing serves in between"
    )
    text = (
        f"*Rolling {escape(request_id)} over* to keep serving until {escape(serve_until)} UTC: no extension "
        f"in place fits, so the next reservation {escape(successor)} is requested ({bought}). Clients move "
        f"to it (the endpoint parameter switches) once its endpoint is in service, by {escape(switch_by)} "
        f"UTC; {then}."
    )
    return _message(text, f"{request_id}: rolling over to {successor}", request_id=request_id)


def rolled_over(
    request_id: str, *, successor: str, region: str, endpoint: str, parameter: str
) -> SlackMessage:
    """The successor serves: clients were moved and the predecessor is being released."""
    text = (
        f"*Rolled over {escape(request_id)} -> {escape(successor)}*: endpoint {escape(endpoint)} in "
        f"{escape(region)} serves the models; `{escape(parameter)}` names it now. {escape(request_id)} is "
        "being released."
    )
    fields = [("Endpoint", f"{endpoint} ({region})"), ("Parameter", parameter)]
    return _message(text, f"Rolled over: {request_id} -> {successor}", request_id=request_id, fields=fields)


def serving_ends(request_id: str, *, reason: str, end: str, serve_until: str) -> SlackMessage:
    """``serve_until`` cannot be met: neither an extension nor a successor could be had. Told at the lead
    time, so a person can act before the end."""
    text = (
        f"*{escape(request_id)} cannot be kept serving until {escape(serve_until)} UTC*: {escape(reason)}. "
        f"It ends at {escape(end)} UTC as planned (released before then). To act now: extend it "
        f"(`POST /reservations/{request_id}/extensions`), raise the budget with a new request, or move "
        f"serve_until (`PATCH /reservations/{request_id}`)."
    )
    return _message(text, f"{request_id}: will stop serving at {end}", request_id=request_id)


# ------------------------------------------------------------------------------ on demand, capacity blocks


def on_demand_skipped(request_id: str, *, reason: str) -> SlackMessage:
    """On-demand capacity is not tried for the request (``strategy``, the window or the team says why)."""
    return SlackMessage(f"*{request_id}*: not trying on-demand capacity ({reason}).")


def no_on_demand_instances(request: ReservationRequest, *, tries: Sequence[str]) -> SlackMessage:
    """No EC2 instances on demand (or spot, for ``spot-ok``) in any region tried: capacity is reserved."""
    spot = " or spot" if request.strategy == "spot-ok" else ""
    return SlackMessage(
        f"*{request.id}*: no {request.instance_count} x {request.instance_type} on demand{spot} "
        f"({'; '.join(tries)}): reserving capacity instead."
    )


def no_on_demand_endpoint(request: ReservationRequest) -> SlackMessage:
    """No endpoint capacity on demand in the request's regions: a training plan is reserved."""
    return SlackMessage(
        f"*{request.id}*: no {request.instance_count} x {request.instance_type} endpoint capacity on "
        f"demand in {', '.join(request.regions)}: reserving a training plan instead."
    )


def on_demand_decision(request_id: str, *, reason: str) -> SlackMessage:
    """The request runs on demand (the planner's reason: price, window, utilisation)."""
    return SlackMessage(f"*Decision for {request_id}: ON_DEMAND*\n{reason}")


def instances_ready(
    request: ReservationRequest, *, market: str, running: Sequence[str], zones: Sequence[str]
) -> SlackMessage:
    """On-demand or spot instances are running; when they are terminated (UTC)."""
    ends = short(request.latest_end - timedelta(minutes=request.release_margin_minutes))
    return SlackMessage(
        f"*{request.id} is READY* ({market}): {len(running)} x {request.instance_type} in "
        f"{', '.join(zones)}: {', '.join(running)}. They are terminated at {ends} UTC."
    )


def block_purchased(
    request: ReservationRequest, output: CapacityBlockOutput, *, where: str, release_at: datetime
) -> SlackMessage:
    """A capacity block bought (``PurchaseCapacityBlock``: upfront, cannot be cancelled) and when its
    instances are terminated (UTC)."""
    return SlackMessage(
        f"*Purchased capacity block {output.capacity_reservation_id}* for {request.id}: "
        f"{format_usd(output.upfront_fee_usd)} upfront, {request.instance_count} x "
        f"{request.instance_type} in {where}, {short(output.start_time)} to "
        f"{short(output.end_time)} UTC. Capacity blocks cannot be cancelled; instances are "
        f"terminated at {short(release_at)} UTC or on the expiry warning, whichever comes first.\n"
        f"`{output.capacity_reservation_arn}`"
    )


def block_scheduled(request_id: str, reservation: CapacityReservation, *, window: str) -> SlackMessage:
    """A capacity block's reservation is ``scheduled``: no instance until it starts (expected)."""
    return SlackMessage(
        f"*Capacity block {reservation.reservation_id} is scheduled* ({request_id}): "
        f"{window}; 0 instances available until it starts (expected)."
    )


def block_not_listed(request_id: str, reservation_id: str) -> SlackMessage:
    """A bought capacity block that ``DescribeCapacityReservations`` does not list yet (eventual
    consistency): waited for under the payment's deadline."""
    return SlackMessage(
        f"*Capacity block {reservation_id} is not visible yet* ({request_id}): bought, not yet listed by EC2."
    )


def block_active(request_id: str, reservation: CapacityReservation, *, window: str) -> SlackMessage:
    """A capacity block's reservation is ``active``: its instances can be launched."""
    return SlackMessage(
        f"*Capacity block {reservation.reservation_id} is active* ({request_id}): "
        f"{reservation.available_instance_count} x {reservation.instance_type} available in "
        f"{reservation.availability_zone}, {window}."
    )


def block_ready(
    request_id: str, reservation_id: str, *, zone: str, region: str, launched: str, end: datetime
) -> SlackMessage:
    """Instances launched into a capacity block; they are terminated before it ends (UTC)."""
    return SlackMessage(
        f"*{request_id} is READY*: capacity block `{reservation_id}` in {zone} ({region}); "
        f"{launched}. They are terminated before the block ends ({short(end)} UTC)."
    )


def released_on_ec2(
    summary: CostSummary, *, request_id: str, reason: str | None, market: str = "reserved"
) -> SlackMessage:
    """The cost summary of :func:`released`, worded for a capacity block (or for on-demand/spot instances:
    ``market``)."""
    text = released(summary, request_id=request_id, reason=reason).text
    deployed = (
        "whatever was deployed on the plan (inference components, endpoint, endpoint config) is deleted"
    )
    if market in ("on-demand", "spot"):
        return SlackMessage(
            text.replace(
                deployed,
                f"the {market} instances are terminated; cost at on-demand prices",
            ).replace("Training plan  ", "Capacity       ")
        )
    text = text.replace(
        deployed,
        "the instances launched into the capacity block are terminated",
    ).replace("Training plan  ", "Capacity block ")
    return SlackMessage(text)
