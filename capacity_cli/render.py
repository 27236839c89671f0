"""How answers are shown: Rich tables for people (``--output table``), the API's JSON or YAML for scripts.

Over 400 lines: every table the CLI shows in one place, as ``messages.py`` holds every Slack text (no
rendering in the commands).

``json`` and ``yaml`` print the API's answer as it came (money as decimal strings, times ISO-8601 UTC), so
a script sees exactly docs/api.md's shapes; ``table`` is for a person and may change between versions.
Times in tables are UTC (``2026-12-08 11:30``), money is USD (``$1,990.60``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from capacity_cli.api import CliError, spend_so_far


def as_json(data: Any) -> str:
    """Pretty JSON (decimals as strings, as the API sends money)."""
    return json.dumps(data, indent=2, default=_plain)


def as_yaml(data: Any) -> str:
    """YAML of the same document.

    Raises:
        CliError: PyYAML is not installed (it comes with the dev extra).
    """
    try:
        import yaml  # noqa: PLC0415 - only for --output yaml
    except ImportError as exc:
        raise CliError("--output yaml needs PyYAML (pip install PyYAML, or use --output json)") from exc
    plain = json.loads(as_json(data))
    text: str = yaml.safe_dump(plain, sort_keys=False, allow_unicode=True, width=110)
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def emit(console: Console, output: str, data: Any, table: RenderableType | None) -> None:
    """Print ``data`` as JSON/YAML, or ``table`` for ``--output table``."""
    if output == "json":
        console.print_json(as_json(data)) if console.is_terminal else console.out(as_json(data))
    elif output == "yaml":
        console.out(as_yaml(data).rstrip("\n"))
    elif table is not None:
        console.print(table)


# ------------------------------------------------------------------------------------------- values


def usd(value: Any) -> str:
    """``$1,990.60`` (``-`` when absent)."""
    if value in (None, ""):
        return "-"
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    sign = "-" if amount < 0 else ""
    return f"{sign}${abs(amount):,.2f}"


def percent(value: Any, *, fraction: bool = False) -> str:
    """``74.9%`` from ``"74.9"``, or ``25%`` from the fraction ``"0.2512"``."""
    if value in (None, ""):
        return "-"
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        return str(value)
    if fraction:
        return f"{amount * 100:.0f}%"
    return f"{amount:.1f}%"


def when(value: Any) -> str:
    """``2026-12-08 11:30`` from ``2026-12-08T11:30:00Z`` (UTC)."""
    if not value:
        return "-"
    text = str(value)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    return moment.strftime("%Y-%m-%d %H:%M")


def _actor(actor: Any) -> str:
    text = str(actor or "-")
    # "capacity-orchestrator-NotifyFunction" -> "NotifyFunction"; ARNs and names are kept as they are.
    if text.endswith("Function") and "-" in text and not text.startswith("arn:"):
        return text.rsplit("-", 1)[-1]
    return text


# -------------------------------------------------------------------------------------------- plans


def plan_view(plan: Mapping[str, Any]) -> RenderableType:
    """``POST /plans``: the ranked offerings and the recommendation, with why."""
    table = Table(
        box=box.SIMPLE_HEAD, title="Offerings, best first (nothing is bought)", title_justify="left"
    )
    for header, justify in (
        ("#", "right"),
        ("region / zone", "left"),
        ("start (UTC)", "left"),
        ("end (UTC)", "left"),
        ("h", "right"),
        ("fee", "right"),
        ("$/inst-h", "right"),
        ("on-demand", "right"),
        ("saving", "right"),
        ("break-even", "right"),
    ):
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    recommended = (plan.get("recommendation") or {}).get("offering_id")
    for rank, offering in enumerate(plan.get("offerings") or [], start=1):
        mark = " *" if offering.get("offering_id") == recommended else ""
        table.add_row(
            f"{rank}{mark}",
            f"{offering.get('region')} / {offering.get('availability_zone')}",
            when(offering.get("start_time")),
            when(offering.get("end_time")),
            str(offering.get("duration_hours")),
            usd(offering.get("upfront_fee_usd")),
            usd(offering.get("usd_per_instance_hour")),
            usd(offering.get("on_demand_equivalent_usd")),
            percent(offering.get("saving_percent")),
            percent(offering.get("break_even_utilisation"), fraction=True),
        )
    advice = plan.get("advice") or {}
    lines = [
        Text.assemble(("Decision ", "bold"), f"{plan.get('decision')}: {plan.get('reason')}"),
        Text.assemble(
            ("Why ", "bold"),
            f"recommended option {advice.get('option')} ({usd(advice.get('cost_usd'))}; on demand "
            f"{usd(advice.get('on_demand_cost_usd'))}): {advice.get('reason')}",
        ),
        Text.assemble(("On-demand capacity ", "bold"), str(advice.get("on_demand_check") or "-")),
    ]
    for alternative in advice.get("alternatives") or []:
        cost = usd(alternative.get("cost_usd"))
        lines.append(Text(f"  - {alternative.get('option')}: {cost}, {alternative.get('note')}"))
    if plan.get("needs_approval"):
        lines.append(
            Text("A person must approve this purchase (the fee is above approval_above_usd).", "yellow")
        )
    if plan.get("next_look_at"):
        lines.append(
            Text(f"Keeps looking: next look at {when(plan['next_look_at'])} UTC (search_until).", "bold")
        )
    for region, why in (plan.get("regions_not_searched") or {}).items():
        lines.append(Text(f"Not searched: {region}: {why}", "yellow"))
    for region, error in (plan.get("quota_errors") or {}).items():
        lines.append(Text(f"Quota: {region}: {error}", "yellow"))
    near = plan.get("alternatives") or []
    if near and not plan.get("offerings"):
        lines.append(Text("Nearest offerings that do not fit:", "bold"))
        lines.extend(
            Text(
                f"  - {o.get('region')} {when(o.get('start_time'))} {o.get('duration_hours')} h "
                f"{o.get('instance_count')} x {o.get('instance_type')}: {usd(o.get('upfront_fee_usd'))} "
                f"({o.get('infeasible_reason')})"
            )
            for o in near[:5]
        )
    lines.append(
        Text(
            f"{plan.get('offerings_considered', 0)} offerings considered in "
            f"{', '.join(plan.get('regions_searched') or []) or 'no region'}; "
            "* = what a reservation would buy",
            "dim",
        )
    )
    sizing = right_size_view(plan.get("right_size"))
    parts = [table] if plan.get("offerings") else []
    return Group(*parts, *lines, *([sizing] if sizing is not None else []))


def right_size_view(sizing: Mapping[str, Any] | None) -> RenderableType | None:
    """The plan's ``right_size`` answer (a request with ``load``, issue 33): the sentence, then one row per
    candidate instance count simulated on the load (fee, requests refused over the reservation and at the
    peak, instance-hours used, idle share, whether it meets the target). None without one."""
    if not sizing:
        return None
    table = Table(
        box=box.SIMPLE_HEAD,
        title=f"Right-size: at most {sizing.get('max_rejected_percent')}% of requests refused",
        title_justify="left",
    )
    for header in ("count", "fee", "refused", "at peak", "inst-h used", "idle", "meets"):
        table.add_column(header, justify="left" if header == "meets" else "right", no_wrap=True)
    for item in sizing.get("candidates") or []:
        table.add_row(
            str(item.get("instance_count")),
            usd(item.get("upfront_fee_usd")),
            f"{float(item.get('rejected_percent') or 0):.2f}%",
            f"{float(item.get('peak_rejected_percent') or 0):.2f}%",
            f"{float(item.get('instance_hours_used') or 0):.2f}",
            f"{float(item.get('idle_percent') or 0):.1f}%",
            "yes" if item.get("meets_target") else "no",
        )
    return Group(Text(str(sizing.get("text") or ""), "bold"), table)


def price_line(plan: Mapping[str, Any]) -> str:
    """The price a reservation would pay, in a sentence (what ``reserve`` asks to confirm)."""
    offering = plan.get("recommendation")
    if plan.get("decision") != "DRY_RUN" or not offering:
        return f"Nothing would be bought now: {plan.get('reason')}"
    approval = " (a person must approve it first)" if plan.get("needs_approval") else ""
    return (
        f"It would buy {offering.get('instance_count')} x {offering.get('instance_type')} in "
        f"{offering.get('region')} ({offering.get('availability_zone')}), "
        f"{when(offering.get('start_time'))} to {when(offering.get('end_time'))} UTC, for "
        f"{usd(offering.get('upfront_fee_usd'))} paid upfront, not refundable{approval}; "
        f"on-demand equivalent {usd(offering.get('on_demand_equivalent_usd'))}, "
        f"worth it above {percent(offering.get('break_even_utilisation'), fraction=True)} utilisation."
    )


# ------------------------------------------------------------------------------------------ extensions


def serve_until_view(result: Mapping[str, Any]) -> RenderableType:
    """``PATCH /reservations/{id}``: until when the models are kept served, when the orchestrator acts next,
    and the chain of reservations (what, where, window, fee, state)."""
    request_id = result.get("request_id")
    until = result.get("serve_until")
    if until is None:
        head = f"{request_id} is kept serving no longer than the reservations bought so far."
    else:
        check = result.get("next_check")
        after = (
            f"at {when(check)} UTC ({result.get('rollover_lead_hours')} h before the end) it is extended in "
            "place, or the next reservation is bought and the clients moved onto it"
            if check
            else "once it is bought, the orchestrator acts ahead of its end"
        )
        head = f"{request_id} is kept serving until {when(until)} UTC: {after}."
    table = Table(title="The reservations that keep it served", box=box.SIMPLE_HEAD)
    for header in ("reservation", "where", "start (UTC)", "end (UTC)", "fee", "state"):
        table.add_column(header, no_wrap=True)
    for link in result.get("chain") or []:
        table.add_row(
            str(link.get("request_id")),
            str(link.get("region") or "-"),
            when(link.get("start_time")),
            when(link.get("end_time")),
            usd(link.get("fee_usd")),
            str(link.get("state") or "-"),
        )
    return Group(Text(head), table)


def extensions_view(result: Mapping[str, Any]) -> RenderableType:
    """``POST /reservations/{id}/extensions``: the dry run's offerings (id, new end, hours, fee, on-demand
    equivalent, whether the rules allow it and why not), or the purchase requested."""
    request_id = result.get("request_id")
    if not result.get("dry_run"):
        offering = result.get("offering") or {}
        if result.get("status") == "APPROVAL_REQUIRED":
            return Text(
                f"Extension {result.get('extension_id')} of {request_id} waits for an approver "
                f"({usd(offering.get('upfront_fee_usd'))} upfront is above the approval threshold): nothing "
                f"is bought until one approves ({result.get('approval')})."
            )
        return Text(
            f"Extension {result.get('extension_id')} of {request_id} requested ({result.get('status')}): "
            f"{usd(offering.get('upfront_fee_usd'))} upfront, not refundable, to "
            f"{when(offering.get('end_time'))} UTC. The release moves to the new end once AWS takes the "
            f"payment: capacity status {request_id}"
        )
    offerings = list(result.get("offerings") or [])
    if not offerings:
        return Text(
            f"No extension offering for {request_id} now (ends {when(result.get('current_end'))} UTC)."
        )
    table = Table(
        title=f"Extensions of {request_id} (ends {when(result.get('current_end'))} UTC)", box=box.SIMPLE_HEAD
    )
    for header in ("offering id", "new end (UTC)", "h", "upfront fee", "on-demand eq.", "allowed"):
        table.add_column(header, no_wrap=header != "allowed")
    for item in offerings:
        table.add_row(
            str(item.get("offering_id")),
            when(item.get("end_time")),
            str(item.get("duration_hours")),
            usd(item.get("upfront_fee_usd")),
            usd(item.get("on_demand_equivalent_usd")),
            ("yes, once approved" if item.get("approval_required") else "yes")
            if item.get("allowed")
            else f"no: {item.get('problem')}",
        )
    return Group(
        table, Text(f"Buy one: capacity extend {request_id} --duration <d> --offering <offering id>")
    )


# ------------------------------------------------------------------------------------- reservations


def reservations_table(items: Iterable[Mapping[str, Any]]) -> RenderableType:
    """``GET /reservations``: one row per reservation, newest first."""
    table = Table(box=box.SIMPLE_HEAD)
    headers = ["request id", "state", "team", "type", "count", "start (UTC)", "h", "requester"]
    for header in [*headers, "created (UTC)"]:
        table.add_column(header, no_wrap=header != "requester")
    rows = 0
    for item in items:
        rows += 1
        table.add_row(
            str(item.get("request_id")),
            _state(item.get("state")),
            str(item.get("team") or "-"),
            str(item.get("instance_type")),
            str(item.get("instance_count")),
            when(item.get("earliest_start")),
            str(item.get("duration_hours")),
            str(item.get("requester")),
            when(item.get("created_at")),
        )
    return table if rows else Text("No reservations.")


def costs_view(report: Mapping[str, Any]) -> RenderableType:
    """``GET /costs``: one row per reservation (paid, instance-hours used of reserved, utilisation, the
    on-demand cost of what ran, saving or loss), then the total; the filters in the title."""
    filters = [f"{key} {report[key]}" for key in ("team", "month") if report.get(key)]
    title = "Costs from what ran" + (f" ({', '.join(filters)})" if filters else "")
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left", show_footer=True)
    totals = report.get("totals") or {}
    columns = (
        ("request id", "left", "total"),
        ("team", "left", ""),
        ("type", "left", ""),
        ("region", "left", ""),
        ("paid", "right", usd(totals.get("paid_usd"))),
        ("used / reserved inst-h", "right", _hours(totals)),
        ("used", "right", _utilisation(totals)),
        ("on-demand (what ran)", "right", usd(totals.get("on_demand_equivalent_used_usd"))),
        ("saving", "right", usd(totals.get("saving_usd"))),
    )
    for header, justify, footer in columns:
        table.add_column(header, justify=justify, footer=footer, no_wrap=True)  # type: ignore[arg-type]
    items = list(report.get("reservations") or [])
    for item in items:
        table.add_row(
            str(item.get("request_id")),
            str(item.get("team") or "-"),
            str(item.get("instance_type") or "-"),
            str(item.get("region") or "-"),
            usd(item.get("paid_usd")),
            _hours(item),
            _utilisation(item),
            usd(item.get("on_demand_equivalent_used_usd")),
            usd(item.get("saving_usd")),
        )
    if not items:
        return Text(f"{title}: no reservation.")
    count = totals.get("reservations", len(items))
    note = f"{count} reservation(s); a negative saving is a loss against on demand."
    return Group(table, Text(note, "dim"))


def _hours(row: Mapping[str, Any]) -> str:
    return f"{row.get('used_instance_hours', '-')} / {row.get('reserved_instance_hours', '-')}"


def _utilisation(row: Mapping[str, Any]) -> str:
    if row.get("utilisation_percent") not in (None, ""):
        return percent(row["utilisation_percent"])
    try:
        used = Decimal(str(row["used_instance_hours"]))
        reserved = Decimal(str(row["reserved_instance_hours"]))
    except (KeyError, InvalidOperation):
        return "-"
    return percent(used / reserved * 100) if reserved else "-"


def _state(state: Any) -> Text:
    colours = {"READY": "green", "RELEASED": "dim", "FAILED": "red", "REJECTED": "red", "CANCELLED": "yellow"}
    text = str(state or "-")
    return Text(text, colours.get(text, "bold" if text == "AWAITING_APPROVAL" else ""))


def approval_deadline(at: Any, detail: Any) -> datetime | None:
    """When an ``AWAITING_APPROVAL`` entry recorded at ``at`` times out: ``at`` plus its ``timeout_seconds``
    (an instant of the API's clock: on ``make serve`` its virtual one), or None when either is missing."""
    if not at or not isinstance(detail, Mapping) or not detail.get("timeout_seconds"):
        return None
    try:
        entered = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
        return entered + timedelta(seconds=int(detail["timeout_seconds"]))
    except (TypeError, ValueError):
        return None


def detail_text(state: str, detail: Any, *, at: Any = None) -> str:  # noqa: PLR0911 - one return per kind
    """What a history entry's ``detail`` says, in one line (``at``: when it was recorded, for an approval's
    deadline)."""
    if not isinstance(detail, Mapping):
        return ""
    if state == "RELEASED" and isinstance(detail.get("summary"), Mapping):
        s = detail["summary"]
        return (
            f"{detail.get('reason') or ''}: paid {usd(s.get('upfront_fee_usd'))}, served "
            f"{s.get('hours_served')} of {s.get('hours_reserved')} h reserved "
            f"({s.get('utilisation_percent')}%), "
            f"saving against on demand {usd(s.get('saving_usd'))}"
        ).lstrip(": ")
    if state == "AWAITING_APPROVAL" and isinstance(detail.get("offering"), Mapping):
        o = detail["offering"]
        hours = int(detail.get("timeout_seconds") or 0) // 3600
        deadline = approval_deadline(at, detail)
        by = f"approve by {deadline:%Y-%m-%d %H:%M} UTC" if deadline else f"approve within {hours} h"
        return (
            f"{usd(o.get('upfront_fee_usd'))} for {o.get('instance_count')} x {o.get('instance_type')} in "
            f"{o.get('region')}, {when(o.get('start_time'))} to {when(o.get('end_time'))}: {by}"
        )
    if state in ("PURCHASED", "SCHEDULED", "ACTIVE") and detail.get("training_plan_name"):
        where = f" {detail['region']}" if detail.get("region") else ""
        span = f"{when(detail.get('start_time'))} to {when(detail.get('end_time'))}"
        return f"{detail['training_plan_name']}{where} {span}"
    if state == "SEARCHING":
        return (
            f"nothing fits yet; next look at {when(detail.get('next_look_at'))}, at most "
            f"{detail.get('looks_left')} more until {when(detail.get('search_until'))}"
        )
    if state == "EXTENDED":
        return (
            f"to {when(detail.get('end_time'))} (was {when(detail.get('previous_end_time'))}); release at "
            f"{when(detail.get('release_at'))}"
        )
    if state == "READY":
        names = detail.get("inference_component_names") or detail.get("instance_ids") or []
        where = detail.get("endpoint_name") or detail.get("capacity_reservation_id") or ""
        return f"{where} {', '.join(str(n) for n in names)}".strip()
    for key in ("reason", "error", "endpoint_name", "requester"):
        if detail.get(key):
            return str(detail[key])
    return ""


def _bought_name(purchase: Mapping[str, Any]) -> str:
    """What GET's ``purchase`` names in its platform's words: a plan's name or a block's ``cr-...`` (since
    issue 28 a block is no longer named ``training_plan_name``); the market for capacity run on demand."""
    name = purchase.get("training_plan_name") or purchase.get("capacity_reservation_id")
    return str(name or purchase.get("market") or "on-demand capacity")


def reservation_view(view: Mapping[str, Any]) -> RenderableType:
    """``GET /reservations/{id}``: the request, the purchase, spend so far and the timeline."""
    request = view.get("request") or {}
    parts: list[RenderableType] = [
        Text.assemble((str(view.get("request_id")), "bold"), "  ", _state(view.get("state")))
    ]
    if request:
        approval = request.get("approval_above_usd")
        parts.append(
            Text(
                f"request   {request.get('instance_count')} x {request.get('instance_type')}, "
                f"{request.get('duration_hours')} h between {when(request.get('earliest_start'))} and "
                f"{when(request.get('latest_end'))} UTC in {', '.join(request.get('regions') or [])}; budget "
                f"{usd(request.get('max_upfront_fee_usd'))}"
                + (f", approval above {usd(approval)}" if approval not in (None, "") else "")
                + f"; requester {request.get('requester')}"
                + (f"; models {', '.join(request.get('models') or [])}" if request.get("models") else "")
            )
        )
    purchase = view.get("purchase")
    if purchase:
        parts.append(
            Text(
                f"purchase  {_bought_name(purchase)} in {purchase.get('region')}, "
                f"{when(purchase.get('start_time'))} to {when(purchase.get('end_time'))} UTC, "
                f"{usd(purchase.get('upfront_fee_usd'))} upfront"
            )
        )
    parts.append(Text(f"spend so far  {usd(spend_so_far(view))} (upfront fees recorded; not refundable)"))
    table = Table(box=box.SIMPLE_HEAD, title="Timeline", title_justify="left")
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("by")
    table.add_column("what")
    table.add_column("USD", justify="right", no_wrap=True)
    for entry in view.get("history") or []:
        state = str(entry.get("state"))
        table.add_row(
            when(entry.get("at")),
            _state(state),
            _actor(entry.get("actor")),
            detail_text(state, entry.get("detail"), at=entry.get("at")),
            usd(entry.get("money_usd")) if entry.get("money_usd") else "",
        )
    parts.append(table)
    return Group(*parts)


def history_line(entry: Mapping[str, Any]) -> str:
    """One history entry as a line (``watch``)."""
    state = str(entry.get("state"))
    money = f"  {usd(entry.get('money_usd'))}" if entry.get("money_usd") else ""
    what = detail_text(state, entry.get("detail"), at=entry.get("at"))
    return f"{entry.get('at')}  {state:<17} {what}{money}".rstrip()


# ---------------------------------------------------------------------------------------- schedules


def schedules_table(items: Sequence[Mapping[str, Any]]) -> RenderableType:
    """``GET /schedules``."""
    if not items:
        return Text("No schedules.")
    table = Table(box=box.SIMPLE_HEAD)
    for header in ("name", "state", "expression", "timezone", "request ids", "description"):
        table.add_column(header)
    for item in items:
        table.add_row(
            str(item.get("name")),
            str(item.get("state")),
            str(item.get("schedule_expression")),
            str(item.get("timezone")),
            str(item.get("request_id_pattern")),
            str(item.get("description") or ""),
        )
    return table


def schedule_view(item: Mapping[str, Any]) -> RenderableType:
    """One schedule and its request template."""
    request = item.get("request") or {}
    return Group(
        Text.assemble((str(item.get("name")), "bold"), "  ", str(item.get("state"))),
        Text(
            f"fires {item.get('schedule_expression')} ({item.get('timezone')}); each run starts "
            f"{item.get('start_after_hours')} h after firing, window {item.get('window_hours')} h; "
            f"request ids {item.get('request_id_pattern')}"
        ),
        Text(
            f"request {request.get('instance_count')} x {request.get('instance_type')}, "
            f"{request.get('duration_hours')} h, budget {usd(request.get('max_upfront_fee_usd'))}"
        ),
        Text(str(item.get("description") or ""), "dim"),
    )


# ---------------------------------------------------------------------------------------- decisions


def cancel_notice(view: Mapping[str, Any]) -> str:
    """What cancelling ``view`` loses and what it stops, in plain words (``cancel`` asks after it)."""
    state = str(view.get("state"))
    purchase = view.get("purchase") or {}
    fee = purchase.get("upfront_fee_usd")
    if state in ("RELEASING", "RELEASED"):
        return f"{view.get('request_id')} is {state}: there is nothing left to cancel."
    if purchase and fee not in (None, "", "0", "0.00"):
        return (
            f"Cancelling {view.get('request_id')} ({state}) releases its endpoint and everything deployed on "
            f"it now, but the upfront fee of {usd(fee)} for {_bought_name(purchase)} "
            f"({when(purchase.get('start_time'))} to {when(purchase.get('end_time'))} UTC) is NOT refunded: "
            "a training plan or capacity block cannot be cancelled. Nothing more is charged either way."
        )
    if purchase:
        return (
            f"Cancelling {view.get('request_id')} ({state}) releases its on-demand capacity now: billing "
            "stops when it is deleted; nothing was paid upfront."
        )
    pending = " and withdraws the pending approval" if state == "AWAITING_APPROVAL" else ""
    rid = view.get("request_id")
    return f"Cancelling {rid} ({state}) stops it before anything is bought{pending}: nothing is lost."


def pending_approval(view: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``AWAITING_APPROVAL`` entry's detail (the offering waiting for a decision), if it is the state."""
    entry = pending_entry(view)
    if entry is None:
        return None
    detail: Mapping[str, Any] = entry.get("detail") or {}
    return detail


def pending_entry(view: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``AWAITING_APPROVAL`` history entry (``at``, ``detail``), if it is the reservation's state."""
    if view.get("state") != "AWAITING_APPROVAL":
        return None
    for entry in reversed(view.get("history") or []):
        if entry.get("state") == "AWAITING_APPROVAL":
            found: Mapping[str, Any] = entry
            return found
    return None


def checks_table(checks: Sequence[Any]) -> RenderableType:
    """``capacity smoke``: one row per route."""
    table = Table(box=box.SIMPLE_HEAD, title="Every route, buying nothing", title_justify="left")
    for header in ("method", "path", "expected", "got", "", "why"):
        table.add_column(header)
    for check in checks:
        table.add_row(
            check.method,
            check.path,
            "/".join(str(s) for s in check.expected),
            str(check.status if check.status is not None else "-"),
            Text("ok", "green") if check.ok else Text("FAIL", "red"),
            check.note,
        )
    return table
