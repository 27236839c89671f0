"""The Slack messages a person follows a reservation by (pure formatting, no I/O).

These messages are the demo's timeline too, so each one is complete on its own: what happened, to which
reservation, with the money (USD) and times (UTC). Tables are fixed-width code blocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from capacity.adapters.slack import SlackMessage
from capacity.models import CostSummary, Offering, OfferingSummary, ReservationRequest
from capacity.planner import Plan, describe_offering
from capacity.pricing import format_usd
from capacity.timeutil import short

TABLE_ROWS = 10
ALTERNATIVE_ROWS = 5

_HEADER = (
    f"{'#':>2}  {'Region':<14} {'Zone':<16} {'Start (UTC)':<16}  {'End (UTC)':<16}  {'Hours':>5} "
    f"{'Upfront fee':>13} {'$/inst-h':>9} {'On-demand eq.':>14} {'Saving':>7} {'Break-even':>10}"
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
            f"{i:>2}  {o.infeasible_reason}" for i, o in enumerate(plan.alternatives[:ALTERNATIVE_ROWS], 1)
        ]
        lines.append("Nearest alternatives (not matching the request):")
        lines.append("```\n" + "\n".join([_HEADER, *rows, "", "Why not:", *notes]) + "\n```")
    if plan.quota_errors:
        lines.append(
            "Quota errors: "
            + "; ".join(f"{region}: {msg}" for region, msg in sorted(plan.quota_errors.items()))
        )
    return SlackMessage("\n".join(lines))


def decision(request: ReservationRequest, plan: Plan) -> SlackMessage:
    """The decision and why."""
    return SlackMessage(f"*Decision for {request.id}: {plan.decision.value}*\n{plan.reason}")


def approval_request(
    request: ReservationRequest, offering: OfferingSummary | None, reason: str, timeout_seconds: int
) -> SlackMessage:
    """Ask for approval, with Approve/Reject buttons (Block Kit ``actions``; value = the request id)."""
    what = f"{describe_offering_summary(offering)}" if offering else "the chosen offering"
    text = (
        f"*Approval needed for {request.id}* (requested by {request.requester}): buy {what}?\n{reason}\n"
        f"Answer within {timeout_seconds // 3600} h with the buttons or "
        f'`POST /reservations/{request.id}/approval` with {{"approved": true|false, "approver": ..., '
        f'"reason": ...}}; no answer means nothing is bought.'
    )
    blocks: list[dict[str, object]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}},
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
    return SlackMessage(text, blocks)


def describe_offering_summary(offering: OfferingSummary) -> str:
    """``$X in region (zone), start to end UTC (N h, C x type)`` for the small offering form."""
    return (
        f"{format_usd(offering.upfront_fee_usd)} in {offering.region} ({offering.availability_zone}), "
        f"{short(offering.start_time)} to {short(offering.end_time)} UTC "
        f"({offering.duration_hours} h, {offering.instance_count} x {offering.instance_type})"
    )


def approval_outcome(request_id: str, *, approved: bool, reason: str) -> SlackMessage:
    """The approval's outcome (rejected, or timed out)."""
    verdict = "approved" if approved else "not approved"
    tail = "" if approved else " Nothing was bought."
    return SlackMessage(f"*Reservation {request_id} {verdict}*: {reason}.{tail}")


def purchased(
    request_id: str, *, plan_name: str, plan_arn: str, region: str, start: str, end: str, fee: Decimal
) -> SlackMessage:
    """The purchase (money spent, cannot be cancelled) and when the release is scheduled."""
    return SlackMessage(
        f"*Purchased training plan {plan_name}* for {request_id}: {format_usd(fee)} upfront, {region}, "
        f"{start} to {end}. Training plans cannot be cancelled; the release is scheduled before the end.\n"
        f"`{plan_arn}`"
    )


def plan_status(request_id: str, *, plan_name: str, status: str, start: str, end: str) -> SlackMessage:
    """A training plan status change (``Scheduled``, ``Active``)."""
    return SlackMessage(f"*Training plan {plan_name} is {status}* ({request_id}): {start} to {end}.")


def ready(request_id: str, *, region: str, endpoint: str, components: Sequence[str]) -> SlackMessage:
    """Endpoint and inference components in service."""
    listed = "\n".join(f"  - {name}" for name in components)
    return SlackMessage(
        f"*{request_id} is READY*: endpoint `{endpoint}` in {region} serves {len(components)} inference "
        f"component(s):\n{listed}\nInvoke with InvokeEndpoint(EndpointName, InferenceComponentName)."
    )


def failure(request_id: str, *, error: str, reason: str, releasing: bool) -> SlackMessage:
    """A failure with its reason and what happens next."""
    after = " Releasing whatever was created." if releasing else " Nothing was bought."
    return SlackMessage(f"*{request_id} FAILED* ({error}): {reason}{after}")


def release_failure(request_id: str, *, error: str, reason: str) -> SlackMessage:
    """The release failed: what is still billing (in ``reason``) and that a person must act."""
    return SlackMessage(
        f"*{request_id} RELEASE FAILED* ({error}): {reason.rstrip('.')}. "
        "Resources of this reservation may still be billing: "
        "a person must delete them (SageMaker console or CLI) and check the ledger."
    )


def release_rejected(request_id: str, *, reason: str) -> SlackMessage:
    """A release request that was rejected before it identified a reservation: nothing was touched."""
    return SlackMessage(
        f"*Release request for {request_id} rejected* (InvalidRequest): {reason.rstrip('.')}. It was not "
        "acted on: nothing was deleted or checked."
    )


def released(summary: CostSummary | None, *, request_id: str, reason: str | None) -> SlackMessage:
    """The release and the cost summary (fixed-width)."""
    why = f" ({reason})" if reason else ""
    if summary is None:
        return SlackMessage(f"*{request_id} released*{why}: nothing had been bought, nothing to delete.")

    def money(value: Decimal | None) -> str:
        return format_usd(value) if value is not None else "n/a"

    rows = [
        ("Training plan", f"{summary.training_plan_name} ({summary.region})"),
        ("Capacity", f"{summary.instance_count} x {summary.instance_type}"),
        ("Upfront fee", money(summary.upfront_fee_usd)),
        ("Hours reserved", f"{summary.hours_reserved:.2f}"),
        ("Hours served", f"{summary.hours_served:.2f} ({summary.utilisation_percent:.1f}% of reserved)"),
        (
            "On-demand rate",
            f"${summary.on_demand_usd_per_instance_hour:.2f}/instance-hour"
            if summary.on_demand_usd_per_instance_hour is not None
            else "n/a",
        ),
        ("On-demand, reserved hours", money(summary.on_demand_equivalent_reserved_usd)),
        ("On-demand, served hours", money(summary.on_demand_equivalent_served_usd)),
        ("Saving vs served on-demand", _saving(summary)),
        (
            "Break-even utilisation",
            f"{summary.break_even_utilisation_percent:.1f}%"
            if summary.break_even_utilisation_percent is not None
            else "n/a",
        ),
        (
            "Effective $/served inst-h",
            f"${summary.effective_usd_per_served_instance_hour:.2f}"
            if summary.effective_usd_per_served_instance_hour is not None
            else "n/a (never served)",
        ),
    ]
    table = "\n".join(f"{label:<27}{value}" for label, value in rows)
    return SlackMessage(
        f"*{request_id} RELEASED*{why}: whatever was deployed on the plan (inference components, endpoint, "
        f"endpoint config) is deleted; nothing tagged with the reservation is left.\n```\n{table}\n```"
    )


def _saving(summary: CostSummary) -> str:
    """The saving against on-demand for the hours served, or what was lost when it never served."""
    if summary.saving_usd is None:
        return "n/a (no on-demand price for this type)"
    if summary.saving_percent is None:
        return f"{format_usd(summary.saving_usd)} (never served: the upfront fee bought no inference)"
    return f"{format_usd(summary.saving_usd)} ({summary.saving_percent:.1f}%)"


__all__ = [
    "approval_outcome",
    "approval_request",
    "decision",
    "describe_offering",
    "failure",
    "offering_row",
    "offerings_table",
    "plan_status",
    "purchased",
    "ready",
    "released",
]


def scaled_from_zero(
    request_id: str, *, model: str, component: str, copies: int, failed_requests: int
) -> SlackMessage:
    """A model at 0 copies got requests: it is starting ``copies`` copies (requests fail meanwhile)."""
    return SlackMessage(
        f"*{request_id}*: model `{model}` had 0 copies and received requests; starting {copies} "
        f"cop{'y' if copies == 1 else 'ies'} of `{component}`. {failed_requests} request(s) failed so far; "
        "requests keep failing for the few minutes a copy takes to start."
    )


def cold_start_ended(request_id: str, *, model: str, failed_requests: int, minutes: float) -> SlackMessage:
    """The cold start of a model is over: how many requests failed during it and for how long."""
    return SlackMessage(
        f"*{request_id}*: model `{model}` serves again. {failed_requests} request(s) failed during its "
        f"cold start of about {minutes:.0f} minute(s)."
    )


def scale_out_refused(request_id: str, *, model: str, ends_at: str) -> SlackMessage:
    """A model at 0 copies got requests in the last hour of the reservation: no copy is started."""
    return SlackMessage(
        f"*{request_id}*: model `{model}` has 0 copies and received requests, but the reservation ends at "
        f"{ends_at} UTC (within the hour): no copy is started and its requests fail until then."
    )


def idle_release(request_id: str, *, idle_hours: int) -> SlackMessage:
    """The endpoint served nothing for ``idle_hours``: the reservation is released (idle policy)."""
    return SlackMessage(
        f"*{request_id}*: the endpoint served no request for {idle_hours} hour(s); releasing it as the "
        "request's idle policy asks (the upfront fee is already paid and is not refunded)."
    )
