"""The costs rollup rebuilt from the ledger (issue 31): what every reservation's entries say it should hold,
against what it holds (``scripts/reconcile_costs.py``; the soak checks the same on every lifecycle).

This is the one O(history) read of the costs: every reservation's ledger (one query each), as ``GET /costs``
read it before the rollup. A reservation counts from its ``PURCHASED`` entry (the month it was recorded in;
on demand, which has none, from its deployment or release, in the month it started); its money is the sum of
its entries'; a released one's figures are ``reservation_spend`` now (fixed once it was released: hours in
service end at ``RELEASING``).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from capacity import cost_rollup
from capacity.ledger import history_of
from capacity.logic.governance.costs import reservation_spend
from capacity.logic.steps.common import first_entry
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE, REQUEST
from capacity.records import State

_IGNORED = frozenset({"as_of", "version"})


def expected_rollup(ports: Ports) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """``(lines, totals)``: the rollup items the ledger's entries make (keyed ``pk|sk``), built with the same
    arithmetic the ledger applies (:func:`capacity.cost_rollup.apply`)."""
    lines: dict[str, dict[str, Any]] = {}
    totals: dict[str, dict[str, Any]] = {}
    start: Mapping[str, Any] | None = None
    while True:
        page, last = ports.ledger.list_requests(limit=100, start_key=start)
        for listed in page:
            request_id = str(listed["request_id"])
            items = ports.ledger.items(request_id)
            history = history_of(items)
            bought = next((i for i in items if i["sk"] == PURCHASE), None)
            if bought is None or not any(e.state in cost_rollup.OPENING_STATES for e in history):
                continue
            purchased = first_entry(history, State.PURCHASED)
            month = purchased.at.strftime("%Y-%m") if purchased else str(bought["start_time"])[:7]
            body = next((i for i in items if i["sk"] == REQUEST), {}).get("request") or {}
            reservation = cost_rollup.Reservation(
                team=body.get("team"),
                instance_type=body.get("instance_type"),
                region=bought.get("region"),
                market=str(bought.get("market") or "reserved"),
                brought=bool(bought.get("brought")),
            )
            money = sum((e.money_usd for e in history if e.money_usd is not None), Decimal(0))
            released = first_entry(history, State.RELEASED) is not None
            final = reservation_spend(ports, request_id, items=items) if released else None
            change = cost_rollup.Change(request_id, month, money, True, final)
            pk = cost_rollup.partition(reservation.team, month)
            line = cost_rollup.new_line(change, reservation)
            total = totals.get(pk) or cost_rollup.new_total(reservation.team, month)
            line, totals[pk] = cost_rollup.apply(change, line, total)
            lines[f"{pk}|{line['sk']}"] = line
        if last is None:
            return lines, totals
        start = last


def reconcile(ports: Ports, *, fix: bool = False) -> dict[str, Any]:
    """Compare the rollup with :func:`expected_rollup`; with ``fix``, replace every item that differs (each
    on the version it was read at: a reservation whose money moved meanwhile is reported, not overwritten).

    Returns:
        ``{"reservations", "team_months", "differences": [text], "fixed"}``: no differences when the rollup
        equals the ledger's sums.
    """
    store = ports.ledger.rollup
    lines, totals = expected_rollup(ports)
    differences: list[str] = []
    fixes: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
    for pk, want in sorted(totals.items()):
        have = store.get(pk, cost_rollup.TOTAL)
        if _normal(have) != _normal(want):
            differences.append(f"{pk}: the rollup has {_normal(have)}, the ledger {_normal(want)}")
            fixes.append((want, have))
        for request_id in store.line_keys(pk):
            if f"{pk}|{cost_rollup.LINE}{request_id}" not in lines:
                differences.append(f"{pk}: {request_id} is in the rollup, not in the ledger's sums")
    for key, want in sorted(lines.items()):
        pk, sk = key.split("|", 1)
        have = store.get(pk, sk)
        if _normal(have) != _normal(want):
            differences.append(
                f"{pk} {want['reservation']}: the rollup has {_normal(have)}, the ledger {_normal(want)}"
            )
            fixes.append((want, have))
    listed = set(store.team_months())
    missing = sorted(
        {(str(t["team"] or cost_rollup.NO_TEAM), str(t["month"])) for t in totals.values()} - listed
    )
    differences.extend(f"the index lacks {team} {month}" for team, month in missing)
    fixed = 0
    if fix:
        for want, have in fixes:
            fixed += store.replace(want, have)
            if want["sk"].startswith(cost_rollup.LINE):
                ports.ledger.put_once(
                    str(want["reservation"]), cost_rollup.POINTER, {"rollup": want["request_id"]}
                )
        if missing:
            fixed += store.add_to_index(missing)
    return {
        "reservations": len(lines),
        "team_months": len(totals),
        "differences": differences,
        "fixed": fixed,
    }


def _normal(item: Mapping[str, Any] | None) -> Any:
    """An item compared by value: decimal strings as Decimals, without versions and ``as_of``."""
    if item is None:
        return None
    return _value({k: v for k, v in item.items() if k not in _IGNORED})


def _value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _value(v) for k, v in value.items() if k not in _IGNORED}
    if isinstance(value, list):
        return [_value(v) for v in value]
    if isinstance(value, str):
        try:
            return Decimal(value).normalize()
        except ArithmeticError:
            return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Decimal(str(value)).normalize()
    return value
