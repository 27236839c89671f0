"""What capacity really cost, from what ran (issue 16): instance counts over time, per-reservation spend and
``GET /costs``.

Over 400 lines: usage over time, per-reservation spend and ``GET /costs`` share one reading of the ledger's
money.

Instance count over time: every count the product makes or observes is an append-only ledger item
``USAGE#<time>`` (``instances``, ``source``): the endpoint's ``DescribeEndpoint``
``ProductionVariants[].CurrentInstanceCount`` when it is ready (``ready``) and whenever the scaler acts
(``scale``), the instances running in an EC2 capacity block when they are ready (``instances-running``), and
the training plan's ``DescribeTrainingPlan`` ``InUseInstanceCount`` when the activation poll finds it
``Active`` (``training-plan``). Hours in service run from ``READY`` (else ``DEPLOYING``) to ``RELEASING``;
an observation made before the reservation began serving (the plan's count at activation, 0 while nothing
is deployed) describes the time before it and does not set the count in service. Between two observations
the count is the earlier one (a step function); before the first one it is the first one. Without any
observation in service the reservation's instance count is assumed (``usage_observed`` false): the old
figure, flagged as such.

Money is USD (:class:`~decimal.Decimal`), hours decimal hours, times UTC; a reservation's month is the UTC
month its ``PURCHASED`` entry was recorded in (when the money was committed).
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from capacity import cost_rollup
from capacity.ledger import history_of
from capacity.logic.governance.policy import Viewer
from capacity.logic.steps.common import Purchase, first_entry, purchase_from
from capacity.ports import Ports
from capacity.pricing import (
    break_even_utilisation,
    on_demand_equivalent,
    on_demand_usd_per_hour,
    saving_percent,
    usd,
)
from capacity.record_kinds import PURCHASE_VOIDED, REQUEST, USAGE
from capacity.records import CostSummary, LedgerEntry, State
from capacity.teams import month_key
from capacity.timeutil import iso_ms, parse_utc

GroupBy = Literal["team", "instance_type", "region"]
_HOURS = Decimal("0.01")


def record_usage(ports: Ports, request_id: str, instances: int | None, *, source: str) -> None:
    """Record that ``instances`` instances of the reservation run now (best effort: a lost observation
    makes the report less exact, never a step fail). Nothing when the count is unknown."""
    if instances is None:
        return
    try:
        ports.ledger.put_once(
            request_id,
            f"{USAGE}#{iso_ms(ports.clock())}#{uuid.uuid4().hex[:6]}",
            {"instances": int(instances), "source": source, "actor": ports.actor},
        )
    except Exception:
        return


def usage_points(items: Sequence[Mapping[str, Any]]) -> list[tuple[datetime, int]]:
    """The instance-count observations among a reservation's ledger items (``USAGE#<time>#<id>``), oldest
    first: ``(UTC time, instances)``."""
    prefix = f"{USAGE}#"
    points = [
        (parse_utc(str(item["sk"]).split("#")[1]), int(item["instances"]))
        for item in items
        if str(item["sk"]).startswith(prefix)
    ]
    return sorted(points)


def read_usage(ports: Ports, request_id: str) -> list[tuple[datetime, int]]:
    """:func:`usage_points` of ``request_id`` (one ledger query of its ``USAGE#`` items)."""
    return usage_points(ports.ledger.items(request_id, f"{USAGE}#"))


def instance_hours(points: Sequence[tuple[datetime, int]], begin: datetime, end: datetime) -> Decimal:
    """The integral of the instance count over ``[begin, end]`` (decimal instance-hours) of the step function
    ``points`` (the count before the first point is the first point's)."""
    if end <= begin or not points:
        return Decimal(0)
    total = Decimal(0)
    count = points[0][1]
    at = begin
    for when, instances in points:
        if when <= begin:
            count = instances
            continue
        if when >= end:
            break
        total += Decimal(count) * Decimal((when - at).total_seconds()) / 3600
        at, count = when, instances
    total += Decimal(count) * Decimal((end - at).total_seconds()) / 3600
    return total


def served_window(history: list[LedgerEntry], purchase: Purchase, now: datetime) -> tuple[datetime, datetime]:
    """From the first ``READY`` (else ``DEPLOYING``) to the first ``RELEASING`` after it (else ``now``),
    within
    the reservation; an empty window (begin == end) when it never served."""
    serving = first_entry(history, State.READY) or first_entry(history, State.DEPLOYING)
    if serving is None:
        return purchase.start_time, purchase.start_time
    releasing = next((e for e in history if e.state is State.RELEASING and e.at >= serving.at), None)
    stop = min(releasing.at if releasing else now, purchase.end_time)
    begin = max(serving.at, purchase.start_time)
    return begin, max(begin, stop)


def used_instance_hours(
    usage: Sequence[tuple[datetime, int]], purchase: Purchase, history: list[LedgerEntry], now: datetime
) -> tuple[Decimal, Decimal, bool]:
    """``(hours served, instance-hours used, observed)`` of the reservation so far (see the module), from its
    :func:`usage_points`."""
    begin, end = served_window(history, purchase, now)
    hours = served_hours(history, purchase, now)
    serving = first_entry(history, State.READY) or first_entry(history, State.DEPLOYING)
    points = [p for p in usage if serving is not None and p[0] >= serving.at]
    if points:
        return hours, instance_hours(points, begin, end), True
    return hours, hours * (purchase.instance_count or 1), False


def served_hours(history: list[LedgerEntry], purchase: Purchase, now: datetime) -> Decimal:
    """Decimal hours of :func:`served_window` (0 when the reservation never served)."""
    begin, end = served_window(history, purchase, now)
    return Decimal((end - begin).total_seconds()) / 3600


def reserved_hours(purchase: Purchase) -> Decimal:
    """Decimal hours from the purchase's start to its end (extensions included), never negative."""
    return max(Decimal(0), Decimal((purchase.end_time - purchase.start_time).total_seconds()) / 3600)


def release_summary(
    request_id: str, purchase: Purchase, history: list[LedgerEntry], *, now: datetime, ports: Ports
) -> CostSummary:
    """The cost summary of a release: :func:`on_demand_summary` for ``market`` ``on-demand``/``spot``
    (instances or an endpoint run on demand cost their hours at the on-demand price), else
    :func:`cost_summary` (a training plan or capacity block, against on-demand)."""
    if purchase.market in ("on-demand", "spot"):
        return on_demand_summary(request_id, purchase, history, now=now, usage=read_usage(ports, request_id))
    return cost_summary(request_id, purchase, history, now=now, ports=ports)


def cost_summary(
    request_id: str, purchase: Purchase, history: list[LedgerEntry], *, now: datetime, ports: Ports
) -> CostSummary:
    """What the reservation cost against on-demand (USD; hours from the ledger's timestamps).

    The saving compares the upfront fee with the on-demand cost of the instance-hours that were in service
    (:func:`capacity.logic.governance.costs.used_instance_hours`: the recorded instance counts over the served
    window; negative when the reservation served too little to pay off: a loss; no percentage when it never
    served); a brought reservation has none (``brought``: not paid by this request). Served hours run from the
    first ``READY`` (else ``DEPLOYING``) entry to the first ``RELEASING`` entry after it (else ``now``),
    clipped to the plan's start and end.
    """
    count = purchase.instance_count or 1
    reserved = reserved_hours(purchase)
    served, used, observed = used_instance_hours(read_usage(ports, request_id), purchase, history, now)
    rate = on_demand_usd_per_hour(purchase.region, purchase.instance_type)
    fee = purchase.upfront_fee_usd + purchase.extension_fees_usd  # what was paid, extensions included
    eq_reserved = (
        on_demand_equivalent(rate, instance_count=count, hours=reserved) if rate is not None else None
    )
    # What ran, not what was reserved: the instance-hours in service at the on-demand price (issue 16).
    eq_used = on_demand_equivalent(rate, instance_count=1, hours=used) if rate is not None else None
    # A brought reservation's fee is its buyer's: this request saved nothing against on-demand (issue 17).
    paid_here = not purchase.brought
    return CostSummary(
        request_id=request_id,
        brought=purchase.brought,
        **purchase.summary_names(),
        region=purchase.region,
        instance_type=purchase.instance_type,
        instance_count=count,
        upfront_fee_usd=fee,
        hours_reserved=reserved.quantize(_HOURS),
        hours_served=served.quantize(_HOURS),
        on_demand_usd_per_instance_hour=rate,
        on_demand_equivalent_reserved_usd=eq_reserved,
        on_demand_equivalent_served_usd=eq_used,
        saving_usd=usd(eq_used - fee) if eq_used is not None and paid_here else None,
        saving_percent=saving_percent(fee, eq_used) if eq_used and paid_here else None,
        utilisation_percent=(used / (reserved * count) * 100).quantize(Decimal("0.1"))
        if reserved
        else Decimal(0),
        break_even_utilisation_percent=(
            (break_even_utilisation(fee, eq_reserved) * 100).quantize(Decimal("0.1"))
            if eq_reserved and paid_here
            else None
        ),
        effective_usd_per_served_instance_hour=usd(fee / used) if used > 0 and paid_here else None,
        instance_hours_reserved=(reserved * count).quantize(_HOURS),
        instance_hours_used=used.quantize(_HOURS),
        usage_observed=observed,
    )


def on_demand_summary(
    request_id: str,
    purchase: Purchase,
    history: list[LedgerEntry],
    *,
    now: datetime,
    usage: Sequence[tuple[datetime, int]] = (),
) -> CostSummary:
    """What on-demand (or spot) capacity cost: the on-demand price x the instance-hours that ran
    (:func:`used_instance_hours`: the recorded instance counts over ``READY`` to ``RELEASING``, else ``now``;
    every instance when none was recorded), nothing upfront; the figure ``GET /costs`` counts and the team's
    on-demand hold is settled to (:mod:`capacity.logic.governance.on_demand_spend`). Spot is billed at the
    spot price, which is lower and not known here: the on-demand figure is its upper bound. ``hours_reserved``
    is the time from the launch to ``latest_end``; ``saving`` is 0 (this *is* the on-demand price)."""
    count = purchase.instance_count or 1
    planned = reserved_hours(purchase)
    served, used, observed = used_instance_hours(usage, purchase, history, now)
    rate = on_demand_usd_per_hour(purchase.region, purchase.instance_type)
    paid = on_demand_equivalent(rate, instance_count=1, hours=used) if rate is not None else None
    return CostSummary(
        request_id=request_id,
        **purchase.summary_names(),
        region=purchase.region,
        instance_type=purchase.instance_type,
        instance_count=count,
        upfront_fee_usd=Decimal(0),
        hours_reserved=planned.quantize(_HOURS),
        hours_served=served.quantize(_HOURS),
        on_demand_usd_per_instance_hour=rate,
        on_demand_equivalent_reserved_usd=(
            on_demand_equivalent(rate, instance_count=count, hours=planned) if rate is not None else None
        ),
        on_demand_equivalent_served_usd=paid,
        saving_usd=Decimal(0) if paid is not None else None,
        saving_percent=None,
        utilisation_percent=(used / (planned * count) * 100).quantize(Decimal("0.1"))
        if planned
        else Decimal(0),
        break_even_utilisation_percent=None,
        effective_usd_per_served_instance_hour=rate if used > 0 else None,
        instance_hours_reserved=(planned * count).quantize(_HOURS),
        instance_hours_used=used.quantize(_HOURS),
        usage_observed=observed,
    )


def reservation_spend(
    ports: Ports,
    request_id: str,
    *,
    now: datetime | None = None,
    items: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """Spend so far of one reservation (``GET /reservations/{id}``'s ``spend``), None when nothing was bought.

    Returns:
        ``{"paid_usd", "reserved_instance_hours", "used_instance_hours", "utilisation_percent",
        "on_demand_equivalent_used_usd", "saving_usd", "usd_per_used_instance_hour", "usage_observed",
        "month", "as_of", "market", "brought"}`` (USD as decimal strings; ``saving_usd`` negative is a loss
        against on-demand; a brought reservation pays 0 and has no saving nor price per used hour: null).
    """
    items = ports.ledger.items(request_id) if items is None else items
    return _spend(items, now or ports.clock())


def _spend(items: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any] | None:
    """:func:`reservation_spend` from the reservation's ledger items."""
    purchase = purchase_from(items)
    if purchase is None:
        return None
    history = history_of(items)
    voided = any(item["sk"] == PURCHASE_VOIDED for item in items)
    # what was paid: the upfront fee and every extension in place paid since (their hours are reserved too)
    paid = Decimal(0) if voided or purchase.market != "reserved" else purchase.upfront_fee_usd
    paid += purchase.extension_fees_usd
    count = purchase.instance_count or 1
    reserved = Decimal((purchase.end_time - purchase.start_time).total_seconds()) / 3600 * count
    _, used, observed = used_instance_hours(usage_points(items), purchase, history, now)
    rate = on_demand_usd_per_hour(purchase.region, purchase.instance_type)
    on_demand = usd(rate * used) if rate is not None else None
    if purchase.market != "reserved" and on_demand is not None:
        paid = on_demand  # on demand pays by the hour: what ran is what it costs
    purchased = first_entry(history, State.PURCHASED)
    month_at = purchased.at if purchased else purchase.start_time
    paid_here = not purchase.brought  # a brought reservation's fee is its buyer's: nothing saved here
    return {
        "paid_usd": f"{usd(paid):f}",
        "reserved_instance_hours": f"{reserved.quantize(_HOURS):f}",
        "used_instance_hours": f"{used.quantize(_HOURS):f}",
        "utilisation_percent": f"{(used / reserved * 100).quantize(Decimal('0.1')):f}" if reserved else "0",
        "on_demand_equivalent_used_usd": f"{on_demand:f}" if on_demand is not None else None,
        "saving_usd": f"{usd(on_demand - paid):f}" if on_demand is not None and paid_here else None,
        "usd_per_used_instance_hour": f"{usd(paid / used):f}" if used > 0 and paid_here else None,
        "usage_observed": observed,
        "month": month_key(month_at.year, month_at.month),
        "as_of": iso_ms(now),
        "market": purchase.market,
        "brought": purchase.brought,
    }


REPORT_LIMIT = 100
"""Reservations per page of ``GET /costs``' ``reservations`` (``limit``; at most :data:`MAX_REPORT_LIMIT`)."""
MAX_REPORT_LIMIT = 1000


def cost_report(
    ports: Ports,
    *,
    team: str | None = None,
    month: str | None = None,
    group_by: GroupBy = "team",
    limit: int = REPORT_LIMIT,
    next_token: str | None = None,
    viewer: Viewer | None = None,
) -> dict[str, Any]:
    """``GET /costs``: paid, used and on-demand equivalent per group (``team``, ``instance_type`` or
    ``region``) and month, over every reservation with a purchase, from the costs rollup
    (:mod:`capacity.cost_rollup`): one item per team-month asked (a ``GetItem`` with ``team`` and ``month``,
    else the index and a ``BatchGetItem``), plus one ledger query per reservation not yet released (its hours
    still grow: they are read as they stand now), whatever the history.

    ``reservations`` lists at most ``limit`` reservations (team, then month, then request id order; one
    ``Query`` per team-month read); ``next_token`` pages on (null on the last page). The rows and totals
    always count every reservation asked.

    Returns:
        ``{"group_by", "team", "month", "rows": [{"group", "month", "reservations", "paid_usd",
        "used_instance_hours", "reserved_instance_hours", "on_demand_equivalent_used_usd", "saving_usd"}],
        "totals": {...the same sums}, "reservations": [{"request_id", "team", ...}], "next_token"}``; the
        totals' ``paid_usd`` is the sum of the reservations' fees.

    Only the teams ``viewer`` may see are counted (:class:`~capacity.logic.governance.policy.Viewer`: an
    administrator sees every team, a caller the teams it is a member of or approves for; None: an internal
    read, unscoped). Spend is per team: a caller's own reservations charged to a team it may not see (or to no
    team) are not counted.

    Raises:
        ValueError: ``next_token`` is not one this API gave, or ``limit`` is not 1 to 1,000.
        NotPermitted: ``team`` names a team ``viewer`` may not see (403).
    """
    if not 1 <= limit <= MAX_REPORT_LIMIT:
        raise ValueError(f"limit must be 1 to {MAX_REPORT_LIMIT}")
    if viewer is not None:
        viewer.require_team(team)
    seen = None if viewer is None else viewer.teams
    page_from = cost_rollup.decode_token(next_token) if next_token else None
    now = ports.clock()
    store = ports.ledger.rollup
    if team is not None and month is not None:
        found = store.get(cost_rollup.partition(team, month), cost_rollup.TOTAL)
        totals = [found] if found else []
    else:
        wanted = [
            (t, m)
            for t, m in store.team_months()
            if (team is None or t == team) and (month is None or m == month) and (seen is None or t in seen)
        ]
        totals = store.totals(wanted)
    live: dict[str, dict[str, Any]] = {}
    cells: list[tuple[str | None, str, dict[str, Any]]] = []
    for total in totals:
        team_of = total.get("team")
        for key, cell in _cells_now(ports, total, now, live).items():
            cells.append((team_of, str(total["month"]), cell | {"key": key}))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for team_of, month_of, cell in cells:
        value = team_of if group_by == "team" else cell.get(group_by)
        groups.setdefault((str(value or cost_rollup.NO_TEAM), month_of), []).append(cell)
    lines, token = _report_lines(store, totals, live, now, limit=limit, page_from=page_from)
    return {
        "group_by": group_by,
        "team": team,
        "month": month,
        "rows": [_row(group_cells, group=g, month=m) for (g, m), group_cells in sorted(groups.items())],
        "totals": _row([cell for _, _, cell in cells], group="total", month=month or "all"),
        "reservations": lines,
        "next_token": token,
    }


def _cells_now(
    ports: Ports, total: Mapping[str, Any], now: datetime, live: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """A team-month's cells with its open reservations as they stand ``now`` (their ledger read, their line
    kept in ``live``): the money the rollup counted for them replaced by their line's figures."""
    cells = {key: dict(cell) for key, cell in (total.get("cells") or {}).items()}
    for request_id, key in sorted((total.get("open") or {}).items()):
        items = ports.ledger.items(request_id)
        line = _line_from(request_id, items, now)
        cell = cells.get(str(key))
        if line is None or cell is None:  # pragma: no cover - an open reservation was bought
            continue
        live[request_id] = line
        money = sum((e.money_usd for e in history_of(items) if e.money_usd is not None), Decimal(0))
        on_demand = cost_rollup.dec(line.get("on_demand_equivalent_used_usd"))
        for metric, amount in (
            ("paid_usd", cost_rollup.dec(line["paid_usd"]) - money),
            ("reserved_instance_hours", cost_rollup.dec(line["reserved_instance_hours"])),
            ("used_instance_hours", cost_rollup.dec(line["used_instance_hours"])),
            ("on_demand_equivalent_used_usd", on_demand),
            ("on_demand_paid_here_usd", Decimal(0) if line.get("brought") else on_demand),
        ):
            cell[metric] = f"{cost_rollup.dec(cell.get(metric)) + amount:f}"
    return cells


def _report_lines(
    store: cost_rollup.RollupStore,
    totals: Sequence[Mapping[str, Any]],
    live: Mapping[str, dict[str, Any]],
    now: datetime,
    *,
    limit: int,
    page_from: tuple[str, str] | None,
) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the reservations' lines (at most ``limit``) and the token of the next, or None."""
    lines: list[dict[str, Any]] = []
    partitions = sorted(str(total["request_id"]) for total in totals)
    for pk in partitions:
        if page_from is not None and pk < page_from[0]:
            continue
        after = page_from[1] if page_from is not None and pk == page_from[0] else None
        if len(lines) >= limit:
            return lines, cost_rollup.encode_token(pk, after or "")
        items, more = store.lines(pk, after=after, limit=limit - len(lines))
        for item in items:
            request_id = str(item["reservation"])
            line = live.get(request_id) or _closed_line(item, now)
            if line is not None:
                lines.append(line)
        if more:
            return lines, cost_rollup.encode_token(pk, str(items[-1]["reservation"]))
    return lines, None


def _closed_line(item: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    """A released reservation's line from its rollup item (its figures at the release, as of ``now``)."""
    final = item.get("final")
    if not final:  # pragma: no cover - an open reservation's line is read live
        return None
    return {
        "request_id": item["reservation"],
        "team": item.get("team"),
        "instance_type": item.get("instance_type"),
        "region": item.get("region"),
        **final,
        "as_of": iso_ms(now),
    }


def _row(cells: Sequence[Mapping[str, Any]], *, group: str, month: str) -> dict[str, Any]:
    def total(metric: str) -> Decimal:
        return sum((cost_rollup.dec(cell.get(metric)) for cell in cells), Decimal(0))

    paid = total("paid_usd")
    # A brought reservation adds what ran, never a saving: its fee is its buyer's, not in paid_usd.
    saving = total("on_demand_paid_here_usd") - paid
    return {
        "group": group,
        "month": month,
        "reservations": sum(int(cell.get("reservations") or 0) for cell in cells),
        "paid_usd": f"{usd(paid):f}",
        "reserved_instance_hours": f"{total('reserved_instance_hours'):f}",
        "used_instance_hours": f"{total('used_instance_hours'):f}",
        "on_demand_equivalent_used_usd": f"{usd(total('on_demand_equivalent_used_usd')):f}",
        "saving_usd": f"{usd(saving):f}",
    }


def ledger_report(
    ports: Ports, *, team: str | None = None, month: str | None = None, group_by: GroupBy = "team"
) -> dict[str, Any]:
    """``GET /costs`` as it was computed before the rollup (issue 31): every reservation's ledger read (one
    query each, O(history)). The reconciliation's reference and the tests' oracle; never a route's."""
    lines: list[dict[str, Any]] = []
    start: Mapping[str, Any] | None = None
    now = ports.clock()
    while True:
        items, last = ports.ledger.list_requests(limit=100, start_key=start)
        for item in items:
            line = _line(ports, item, now)
            if line is None:
                continue
            if (team and line["team"] != team) or (month and line["month"] != month):
                continue
            lines.append(line)
        if last is None:
            break
        start = last
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in lines:
        groups.setdefault((str(line[group_by] or "(none)"), line["month"]), []).append(line)
    rows = [_sum(lines_, group=key[0], month=key[1]) for key, lines_ in sorted(groups.items())]
    return {
        "group_by": group_by,
        "team": team,
        "month": month,
        "rows": rows,
        "totals": _sum(lines, group="total", month=month or "all"),
        "reservations": sorted(lines, key=lambda line: line["request_id"]),
    }


def _line(ports: Ports, item: Mapping[str, Any], now: datetime) -> dict[str, Any] | None:
    request_id = str(item["request_id"])
    return _line_from(request_id, ports.ledger.items(request_id), now)  # one query: spend, request, purchase


def _line_from(request_id: str, items: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any] | None:
    """One reservation's line of ``GET /costs`` from its ledger items (None: nothing was bought)."""
    spend = _spend(items, now)
    if spend is None:
        return None
    request = next((i for i in items if i["sk"] == REQUEST), {})
    body = request.get("request") or {}
    purchase = purchase_from(items)
    return {
        "request_id": request_id,
        "team": body.get("team"),
        "instance_type": body.get("instance_type"),
        "region": purchase.region if purchase else None,
        **spend,
    }


def _sum(lines: Sequence[Mapping[str, Any]], *, group: str, month: str) -> dict[str, Any]:
    def total(key: str, *, brought: bool = True) -> Decimal:
        return sum(
            (
                Decimal(str(line[key]))
                for line in lines
                if line.get(key) is not None and (brought or not line.get("brought"))
            ),
            Decimal(0),
        )

    paid, on_demand = total("paid_usd"), total("on_demand_equivalent_used_usd")
    # A brought reservation adds what ran, never a saving: its fee is its buyer's, not in paid_usd.
    saving = total("on_demand_equivalent_used_usd", brought=False) - paid
    return {
        "group": group,
        "month": month,
        "reservations": len(lines),
        "paid_usd": f"{usd(paid):f}",
        "reserved_instance_hours": f"{total('reserved_instance_hours'):f}",
        "used_instance_hours": f"{total('used_instance_hours'):f}",
        "on_demand_equivalent_used_usd": f"{usd(on_demand):f}",
        "saving_usd": f"{usd(saving):f}",
    }


CSV_COLUMNS = (
    "group",
    "month",
    "reservations",
    "paid_usd",
    "reserved_instance_hours",
    "used_instance_hours",
    "on_demand_equivalent_used_usd",
    "saving_usd",
)


def report_csv(report: Mapping[str, Any]) -> str:
    """The report's rows and totals as CSV (``Accept: text/csv``), one header line, USD as decimals."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in [*report["rows"], report["totals"]]:
        writer.writerow(row)
    return out.getvalue()
