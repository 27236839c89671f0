"""The invariants a finished lifecycle is checked for (:func:`check`): the money rules, approvals, what is
left billable, final states, notified failures; and how a lifecycle is summed up (:func:`route`,
:func:`outcome`).

Over 400 lines: one small function per invariant; one module, so the report's list of checks is this
module."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity.lifecycle import replay
from capacity.records import State

from localcloud_soak.facts import ExtensionFact, Facts, PlanFact
from localcloud_soak.scenario import FINAL_STATES, START, _ts, starts_soon


def check_double_purchase(facts: Facts) -> list[str]:
    """More than one reservation (training plan or capacity block) bought, or ``PURCHASED`` recorded more
    than once."""
    problems = []
    live = facts.live_plans()
    if len(live) > 1:
        listed = "; ".join(f"{p.name} in {p.region} ${p.upfront_fee_usd}" for p in live)
        kinds = {p.kind for p in live}
        noun = {
            frozenset({"training-plan"}): "training plans",
            frozenset({"capacity-block"}): "capacity blocks",
        }.get(frozenset(kinds), "reservations (training plans and capacity blocks)")
        problems.append(f"double purchase: {len(live)} {noun} bought ({listed})")
    purchased = [i for i in facts.history() if i["state"] == "PURCHASED"]
    if len(purchased) > 1:
        problems.append(f"double purchase: PURCHASED recorded {len(purchased)} times in the ledger")
    return problems


def check_extensions(facts: Facts) -> list[str]:
    """The money rules of extensions (issue 17): an extension offering bought more than once, a paid
    extension with no ``EXTENDED`` of its fee in the ledger (every dollar recorded), or an ``EXTENDED``
    recorded twice for one extension (the budget over them all: :func:`check_total_spend`)."""
    problems = []
    bought = [e.offering_id for e in facts.extensions]
    for offering_id in sorted({o for o in bought if bought.count(o) > 1}):
        problems.append(f"double extension: offering {offering_id} bought {bought.count(offering_id)} times")
    recorded = [i for i in facts.history() if i["state"] == "EXTENDED" and isinstance(i.get("detail"), dict)]
    ids = [str(i["detail"].get("extension_id")) for i in recorded]
    for extension_id in sorted({x for x in ids if ids.count(x) > 1}):
        problems.append(
            f"double extension: EXTENDED recorded {ids.count(extension_id)} times for {extension_id}"
        )
    # What was bought is the detail's offering_id (a stale requested offering is replaced by a fresh one).
    fees = {str(i["detail"].get("offering_id")): Decimal(str(i.get("money_usd") or "0")) for i in recorded}
    for paid in (e for e in facts.extensions if e.payment == "succeeded"):
        if fees.get(paid.offering_id) != paid.upfront_fee_usd:
            problems.append(
                f"extension not recorded: {paid.offering_id} of {paid.reservation} paid "
                f"${paid.upfront_fee_usd}, ledger says {fees.get(paid.offering_id, 'nothing')}"
            )
    return problems


def extension_spend(facts: Facts) -> Decimal:
    """What the extensions cost (USD): the paid ones and those still being paid (a failed payment charged
    nothing)."""
    return sum((e.upfront_fee_usd for e in facts.extensions if e.payment != "failed"), Decimal(0))


def on_demand_spend(facts: Facts) -> tuple[str, Decimal] | None:
    """What the instances (or endpoint) launched on demand or on spot cost until the end the application
    set for them (USD, at the on-demand rate its ``PURCHASE`` item records for the region launched in), with
    a description; None when nothing ran on demand."""
    purchase = facts.item("PURCHASE")
    if purchase is None or purchase.get("market") not in ("on-demand", "spot"):
        return None
    rate = Decimal(str(purchase.get("on_demand_usd_per_hour") or "0"))
    start = datetime.fromisoformat(str(purchase["start_time"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(purchase["end_time"]).replace("Z", "+00:00"))
    hours = Decimal(max(0, int((end - start).total_seconds()))) / Decimal(3600)
    cost = (rate * int(purchase.get("instance_count") or 0) * hours).quantize(Decimal("0.01"))
    what = (
        f"{purchase.get('instance_count')} x {purchase.get('instance_type')} on {purchase['market']} in "
        f"{purchase.get('region')} at ${rate}/h from {purchase['start_time']} to {purchase['end_time']}"
    )
    return what, cost


def check_budget(facts: Facts) -> list[str]:
    """A plan or capacity block, a ``PURCHASED`` amount, or capacity launched on demand until its end,
    above ``max_upfront_fee_usd``."""
    budget = facts.max_upfront_fee_usd
    spend = on_demand_spend(facts)
    on_demand = (
        [f"on demand above budget: {spend[0]} costs ${spend[1]} > max_upfront_fee_usd ${budget}"]
        if spend is not None and spend[1] > budget
        else []
    )
    problems = [
        f"purchase above budget: {p.name} costs ${p.upfront_fee_usd} > max_upfront_fee_usd ${budget}"
        for p in facts.live_plans()
        if p.upfront_fee_usd > budget
    ]
    problems.extend(
        f"purchase above budget: PURCHASED records ${i['money_usd']} > max_upfront_fee_usd ${budget}"
        for i in facts.history()
        if i["state"] == "PURCHASED"
        and i.get("money_usd") is not None
        and Decimal(str(i["money_usd"])) > budget
    )
    return problems + on_demand


def _bought_at(facts: Facts) -> str | None:
    """When the purchase was decided: the newest purchase intent put before AWS is called (else PURCHASED).
    A request that keeps looking writes one per attempt (``PURCHASE_INTENT``, then ``PURCHASE_INTENT#<n>``
    after its look's offering was taken): the last is the attempt that bought."""
    intents = [i for i in facts.items if str(i["sk"]).startswith("PURCHASE_INTENT")]
    if intents:
        newest = max(intents, key=lambda i: int(str(i["sk"]).partition("#")[2] or 0))
        return str(newest.get("written_at") or "")
    purchased = next((i for i in facts.history() if i["state"] == "PURCHASED"), None)
    return str(purchased["at"]) if purchased else None


def check_approval(facts: Facts) -> list[str]:
    """A purchase above ``approval_above_usd`` without an ``APPROVAL_DECISION`` approve before it; a purchase
    in a dry run; a purchase after the reservation was rejected."""
    problems = []
    spend = on_demand_spend(facts)
    if spend is not None:  # no approval is asked on demand: the application must reserve instead
        if facts.dry_run:
            problems.append(f"launched on demand in a dry run: {spend[0]}")
        if facts.approval_above_usd is not None and spend[1] > facts.approval_above_usd:
            problems.append(
                f"on demand without approval: {spend[0]} costs ${spend[1]} > approval_above_usd "
                f"${facts.approval_above_usd} (on demand asks no approval: it must reserve instead)"
            )
    live = facts.live_plans()
    if not live:
        return problems
    if facts.dry_run:
        problems.append(f"purchase in a dry run: {', '.join(p.name for p in live)}")
    bought_at = _bought_at(facts) or ""
    threshold = facts.approval_above_usd
    if threshold is not None and any(p.upfront_fee_usd > threshold for p in live):
        fee = max(p.upfront_fee_usd for p in live)
        decision = facts.item("APPROVAL_DECISION")
        if decision is None or decision.get("approved") is not True:
            verdict = "no APPROVAL_DECISION" if decision is None else "the APPROVAL_DECISION is a rejection"
            problems.append(
                f"purchase without approval: ${fee} > approval_above_usd ${threshold} and {verdict}"
            )
        elif not bought_at or str(decision.get("written_at", "")) > bought_at:
            problems.append(
                f"purchase without approval: the approval ({decision.get('written_at')}) came after the "
                f"purchase ({bought_at or 'no PURCHASE_INTENT'})"
            )
    rejected = next((i for i in facts.history() if i["state"] == "REJECTED"), None)
    if rejected is not None and bought_at and str(rejected["at"]) < bought_at:
        problems.append(f"purchase after rejection: REJECTED at {rejected['at']}, bought at {bought_at}")
    return problems


def check_billable(facts: Facts) -> list[str]:
    """Billable resources left when the lifecycle is idle (nothing more will delete them)."""
    if not facts.billable:
        return []
    reported = any(f"{facts.request_id} RELEASE FAILED" in text for text in facts.slack)
    if facts.stuck_fired and reported:
        return []  # AWS never finished a deletion (injected); a person was told what still bills
    ends = ", ".join(sorted({_ts(p.end_time) for p in facts.live_plans()})) or "no plan"
    why = "" if facts.stuck_fired else " (no stuck fault fired)"
    return [
        f"billable resource left after its reservation's end (plan end {ends}, now {_ts(facts.now)}, "
        f"release failure {'reported' if reported else 'not reported'}{why}): {'; '.join(facts.billable)}"
    ]


def check_final_state(facts: Facts) -> list[str]:
    """The lifecycle must end in RELEASED/REJECTED/FAILED/CANCELLED (a dry run may end PLANNED), and a
    purchase must end released (RELEASED) or with its release failure recorded (FAILED, phase release)."""
    if not facts.finished:
        return [f"lifecycle did not finish: {facts.unfinished_reason}"]
    history = facts.history()
    if not history:
        if not facts.accepted:
            return []  # never accepted (every POST answered 4xx/5xx): no lifecycle, and the client knows
        return ["lifecycle ends without a final ledger state: the request was accepted, nothing recorded"]
    last = history[-1]
    problems = []
    dry_run_done = (
        facts.dry_run
        and last["state"] == "PLANNED"
        and (last.get("detail") or {}).get("decision") == "DRY_RUN"
    )
    if last["state"] not in FINAL_STATES and not dry_run_done:
        problems.append(
            f"lifecycle ends without a final ledger state: {' -> '.join(str(i['state']) for i in history)}"
        )
    if facts.live_plans():
        released = any(i["state"] == "RELEASED" for i in history)
        release_failed = any(
            i["state"] == "FAILED" and (i.get("detail") or {}).get("phase") == "release" for i in history
        )
        if not released and not release_failed:
            problems.append(
                "a purchase that never ended released: " + " -> ".join(str(i["state"]) for i in history)
            )
    return problems


def check_lifecycle_path(facts: Facts) -> list[str]:
    """Every recorded history is a path of the lifecycle's table (:func:`capacity.lifecycle.replay`): no
    state recorded where the table forbids it (nothing after RELEASED, no fee after the release began, no
    second outcome, nothing forward after an outcome but money in flight landing and the release)."""
    entries = [(State(str(i["state"])), dict(i.get("detail") or {})) for i in facts.history()]
    return [f"history outside the lifecycle's table: {problem}" for problem in replay(entries)]


def check_failures_notified(facts: Facts) -> list[str]:
    """Every FAILED in the ledger has its Slack message (``<id> FAILED``, ``<id> RELEASE FAILED`` or the
    ``NO_OFFERING`` decision)."""
    rid = facts.request_id
    problems = []
    for entry in facts.history():
        if entry["state"] != "FAILED":
            continue
        detail = entry.get("detail") or {}
        if detail.get("phase") == "release":
            marks = [f"{rid} RELEASE FAILED"]
        else:
            marks = [f"{rid} FAILED", f"Decision for {rid}: NO_OFFERING"]
        if not any(mark in text for text in facts.slack for mark in marks):
            problems.append(
                f"failure without a notification: FAILED at {entry['at']} ({detail.get('error')}) and no "
                f"Slack message containing {' or '.join(repr(m) for m in marks)}"
            )
    return problems


def check_total_spend(facts: Facts) -> list[str]:
    """Everything the request paid (reservations bought, their extensions, capacity run on demand) above
    its budget."""
    spend = on_demand_spend(facts)
    total = (
        sum((p.upfront_fee_usd for p in facts.live_plans()), Decimal(0))
        + extension_spend(facts)
        + (spend[1] if spend else 0)
    )
    if total > facts.max_upfront_fee_usd:
        return [f"total spend ${total} > max_upfront_fee_usd ${facts.max_upfront_fee_usd}"]
    return []


def check_money_recorded(facts: Facts) -> list[str]:
    """The ledger's money must equal what AWS charged, and every reservation bought must have its
    ``PURCHASE`` record and its release schedule (even when a Lambda died right after the purchase)."""
    live = facts.live_plans()
    recorded = sum(
        (Decimal(str(i["money_usd"])) for i in facts.history() if i.get("money_usd") is not None), Decimal(0)
    )
    charged = sum((p.upfront_fee_usd for p in live), Decimal(0)) + sum(
        (e.upfront_fee_usd for e in facts.extensions if e.payment == "succeeded"), Decimal(0)
    )
    problems = []
    if recorded != charged:
        problems.append(f"ledger money ${recorded} != what AWS charged ${charged} ({len(live)} bought)")
    if live and facts.item("PURCHASE") is None:
        problems.append(f"bought without a PURCHASE record: {', '.join(p.name for p in live)}")
    if live and not facts.release_scheduled:
        problems.append(f"bought without a release schedule: {', '.join(p.name for p in live)}")
    return problems


_ROLLUP_OPENS = frozenset({"PURCHASED", "DEPLOYING", "RELEASING", "RELEASED"})
"""The entries that open a reservation's costs rollup once it has a ``PURCHASE`` (capacity.cost_rollup)."""


def check_cost_rollup(facts: Facts) -> list[str]:
    """The costs rollup equals the ledger's sums (issue 31): each reservation bought by the chain has its
    rollup item, whose money is the sum of its entries' money and, once ``RELEASED``, whose final pay is that
    money (a training plan or capacity block) or the cost summary's on-demand cost of what ran (on demand);
    each team-month's cells sum its reservations' items; the index lists every team-month. (A reservation
    with a ``PURCHASE`` counts once ``PURCHASED``, or for capacity run on demand once it deploys or is
    released.)"""
    if not facts.rollup_read:  # facts made by hand, without a table
        return []
    problems: list[str] = []
    lines = {str(i["reservation"]): i for i in facts.rollup if str(i["sk"]).startswith("R#")}
    chain = {facts.request_id: facts.items, **facts.successors}
    for rid, items in chain.items():
        history = [i for i in items if str(i["sk"]).startswith("STATE#")]
        bought = any(i["sk"] == "PURCHASE" for i in items)
        if not bought or not any(i.get("state") in _ROLLUP_OPENS for i in history):
            continue
        money = sum(
            (Decimal(str(i["money_usd"])) for i in history if i.get("money_usd") is not None), Decimal(0)
        )
        line = lines.get(rid)
        if line is None:
            problems.append(f"costs rollup: {rid} was bought but has no rollup item")
            continue
        if Decimal(str(line["money_usd"])) != money:
            problems.append(f"costs rollup: {rid} has ${line['money_usd']}, its entries ${money}")
        released = next((i for i in history if i.get("state") == "RELEASED"), None)
        if released is not None and not line.get("final"):
            problems.append(f"costs rollup: {rid} is released but its rollup item is still open")
        if released is not None and line.get("final"):
            summary = (released.get("detail") or {}).get("summary") or {}
            on_demand = line.get("market") in ("on-demand", "spot")
            want = Decimal(str(summary.get("on_demand_equivalent_served_usd") or 0)) if on_demand else money
            if Decimal(str(line["final"]["paid_usd"])) != want:
                problems.append(
                    f"costs rollup: {rid} was paid ${line['final']['paid_usd']}, its ledger says ${want}"
                )
    problems += _rollup_totals(facts.rollup, lines)
    return problems


def _rollup_totals(rollup: list[dict[str, Any]], lines: dict[str, dict[str, Any]]) -> list[str]:
    """Each team-month's cells against the sum of its reservations' items, and the index."""
    problems: list[str] = []
    index = next((i for i in rollup if i["sk"] == "INDEX"), {})
    listed = {tuple(p) for p in index.get("team_months") or []}
    for total in (i for i in rollup if i["sk"] == "#TOTAL"):
        pk = str(total["request_id"])
        own = [line for line in lines.values() if line["request_id"] == pk]
        cells = list((total.get("cells") or {}).values())
        paid = sum((Decimal(str(c["paid_usd"])) for c in cells), Decimal(0))
        want = sum(
            (Decimal(str((line.get("final") or {}).get("paid_usd", line["money_usd"]))) for line in own),
            Decimal(0),
        )
        count = sum(int(c["reservations"]) for c in cells)
        if (count, paid) != (len(own), want):
            problems.append(
                f"costs rollup: {pk} counts {count} reservations, ${paid}; its items {len(own)}, ${want}"
            )
        still_open = sorted(str(line["reservation"]) for line in own if not line.get("final"))
        if sorted(total.get("open") or {}) != still_open:
            problems.append(
                f"costs rollup: {pk} has {sorted(total.get('open') or {})} open, not {still_open}"
            )
        if (str(total.get("team") or "(none)"), str(total["month"])) not in listed:
            problems.append(f"costs rollup: the index does not list {pk}")
    return problems


TRANSIENT_ERRORS = frozenset(
    {"RetryableAwsError", "Sandbox.Timedout", "States.Timeout", "Lambda.Unknown", "PurchaseUnconfirmed"}
)
"""Errors that are a fault of the moment, never a reason to give up a reservation that was paid for."""


def check_paid_kept(facts: Facts) -> list[str]:
    """A reservation that was paid must not end ``REJECTED``, or ``FAILED`` on a transient fault, or with its
    reserve workflow aborted, without ever serving (``READY``)."""
    if not facts.live_plans():
        return []
    history = facts.history()
    if any(i["state"] == "READY" for i in history):
        return []
    problems = []
    for entry in history:
        detail = entry.get("detail") or {}
        if entry["state"] == "REJECTED":
            problems.append(f"paid, then REJECTED at {entry['at']} without serving")
        if (
            entry["state"] == "FAILED"
            and detail.get("phase") != "release"
            and detail.get("error") in TRANSIENT_ERRORS
        ):
            problems.append(f"paid, then FAILED on a transient fault ({detail.get('error')}) without serving")
    if any(
        machine == "ReserveCapacityStateMachine" and status == "ABORTED"
        for machine, status in facts.executions
    ):
        cancelled = any(i["state"] == "CANCELLED" for i in history)
        # A stopped workflow that was resumed (RESUME#: capacity.logic.steps.stopped) was not thrown away; how
        # the resumed one ended is judged by the other rules.
        resumed = any(str(i.get("sk", "")).startswith("RESUME#") for i in facts.items)
        if not cancelled and not resumed:
            problems.append("paid, then the reserve workflow was aborted and the reservation never served")
    return problems


CANCEL_TO_RELEASED = timedelta(hours=6)
"""A cancel accepted must leave nothing billing within this much virtual time (a stuck deletion excepted)."""


def check_cancel_honoured(facts: Facts) -> list[str]:
    """A cancel answered 202 is not lost: the reservation ends cancelled (or was already over), and what it
    bought is released within :data:`CANCEL_TO_RELEASED` (unless AWS never finished a deletion)."""
    if not facts.cancels_accepted or not facts.finished:
        return []
    first = min(facts.cancels_accepted)
    history = facts.history()
    finals_before = [i for i in history if i["state"] in FINAL_STATES and _utc(i["at"]) <= first]
    problems = []
    if not finals_before and not any(i["state"] == "CANCELLED" for i in history):
        problems.append(f"cancel accepted at {_ts(first)} but the reservation never ended CANCELLED")
    bought = facts.live_plans() or on_demand_spend(facts) is not None
    released = next((i for i in history if i["state"] == "RELEASED" and _utc(i["at"]) >= first), None)
    if bought and not finals_before and not facts.stuck_fired:
        if released is None:
            problems.append(f"cancel accepted at {_ts(first)}: what was bought was never released")
        elif _utc(released["at"]) - first > CANCEL_TO_RELEASED:
            problems.append(
                f"cancel accepted at {_ts(first)}: released only at {released['at']} "
                f"(more than {CANCEL_TO_RELEASED} later)"
            )
    return problems


def cancel_to_released_hours(facts: Facts) -> float | None:
    """Virtual hours from the first accepted cancel to the ``RELEASED`` after it (None when not both)."""
    if not facts.cancels_accepted:
        return None
    first = min(facts.cancels_accepted)
    released = next((i for i in facts.history() if i["state"] == "RELEASED" and _utc(i["at"]) >= first), None)
    return None if released is None else (_utc(released["at"]) - first) / timedelta(hours=1)


def check_approval_decision(facts: Facts) -> list[str]:
    """The approver is not the requester; an approval accepted is not lost (the reservation does not end
    ``REJECTED`` for want of one); what was bought costs no more than the offering that was approved."""
    decision = facts.item("APPROVAL_DECISION")
    problems = []
    if decision is not None and decision.get("approved") is True:
        approver = str(decision.get("approver") or decision.get("actor") or "")
        if approver and approver == facts.requester:
            problems.append(f"approved by its own requester {approver}")
        approval = facts.item("APPROVAL") or {}
        offering = ((approval.get("plan") or {}).get("offering")) or {}
        approved_fee = offering.get("upfront_fee_usd")
        bought = [p.upfront_fee_usd for p in facts.live_plans()]
        if approved_fee is not None and bought and max(bought) > Decimal(str(approved_fee)):
            problems.append(f"bought ${max(bought)}, more than the ${approved_fee} that was approved")
    if facts.approvals_accepted:
        rejected = next((i for i in facts.history() if i["state"] == "REJECTED"), None)
        reason = str(((rejected or {}).get("detail") or {}).get("error") or "")
        if (
            rejected is not None
            and reason == "States.Timeout"
            and _utc(rejected["at"]) > min(facts.approvals_accepted)
        ):
            problems.append(
                f"approval accepted at {_ts(min(facts.approvals_accepted))} and lost: REJECTED for want of it"
            )
    return problems


def check_copies_recorded(facts: Facts) -> list[str]:
    """Every copy count the application set (an inference component's ``CopyCount``) is in the ledger: a
    ``SCALE#`` item with that component and ``to_copies``, or the deployment that created it (a successor's
    components in the successor's ledger)."""
    chain_items = [*facts.items, *(i for items in facts.successors.values() for i in items)]
    recorded = {
        (str(i.get("inference_component_name") or ""), int(i["to_copies"]))
        for i in chain_items
        if str(i["sk"]).startswith("SCALE#") and i.get("to_copies") is not None
    }
    missing = sorted({change for change in facts.copy_changes if change not in recorded})
    return [f"copy count changed without a ledger record: {name} -> {copies}" for name, copies in missing]


def check_window(facts: Facts) -> list[str]:
    """A reservation the request bought that starts before ``earliest_start`` or ends after ``latest_end``,
    as bought: the hours its paid extensions added since are the requester's later choice (issue 17)."""
    if facts.window is None:
        return []
    start, end = facts.window
    problems = []
    for plan in facts.live_plans():
        added = sum(
            e.hours for e in facts.extensions if e.reservation == plan.name and e.payment == "succeeded"
        )
        bought_end = plan.end_time - timedelta(hours=added)
        if plan.start_time is not None and (plan.start_time < start or bought_end > end):
            problems.append(
                f"bought outside the window: {plan.name} runs {_ts(plan.start_time)} to {_ts(bought_end)}"
                + (f" (then extended by {added} h)" if added else "")
                + f", the request's window is {_ts(start)} to {_ts(end)}"
            )
    return problems


LOOK_TOLERANCE = timedelta(minutes=1)
"""How far around ``search_until`` the last look (and what it records) may land."""


def check_keep_looking(facts: Facts) -> list[str]:
    """A request that keeps looking (``search_until``, issue 17) looks only until its deadline and never after
    its outcome, and does not give up before the deadline: no ``OfferingNotFound``, and no
    ``SearchDeadlinePassed`` or over-budget ``REJECTED`` before ``search_until`` (the requester is told at the
    deadline). Buying once, within the window, budget and approval rules is the other checks'."""
    deadline = facts.search_until
    if deadline is None or facts.dry_run:
        return []
    problems = []
    ended: dict[str, Any] | None = None
    for entry in facts.history():
        state, at = str(entry["state"]), _utc(entry["at"])
        detail = entry.get("detail") or {}
        if state == "SEARCHING":
            if at > deadline + LOOK_TOLERANCE:
                problems.append(
                    f"looked after the deadline: SEARCHING at {entry['at']}, search_until {_ts(deadline)}"
                )
            if ended is not None:
                problems.append(
                    f"looked after the outcome: SEARCHING at {entry['at']} after {ended['state']}"
                )
        if state in FINAL_STATES and ended is None:
            ended = entry
        early = at < deadline - LOOK_TOLERANCE
        if state == "FAILED" and detail.get("error") == "OfferingNotFound":
            problems.append(
                f"gave up looking: FAILED OfferingNotFound at {entry['at']} (search_until {_ts(deadline)})"
            )
        if state == "FAILED" and detail.get("error") == "SearchDeadlinePassed" and early:
            problems.append(
                f"told before the deadline: FAILED SearchDeadlinePassed at {entry['at']}, search_until "
                f"{_ts(deadline)}"
            )
        if state == "REJECTED" and detail.get("error") == "BudgetExceeded" and early:
            problems.append(
                f"gave up looking: REJECTED over budget at {entry['at']}, search_until {_ts(deadline)}"
            )
    return problems


def check_brought(facts: Facts) -> list[str]:
    """A request that brings its own reservation (issue 17) buys nothing (no ``CreateTrainingPlan`` or
    ``PurchaseCapacityBlock`` call at all), records it as not paid by the request (``PURCHASE`` ``brought``
    with a fee of 0, ``PURCHASED`` of $0) and says so in its cost summary; what it ran is released (the other
    checks: nothing billable, a final state)."""
    if facts.brought is None:
        return []
    problems = []
    if facts.purchase_calls:
        problems.append(
            f"brought {facts.brought}, yet the application called to buy {facts.purchase_calls} times"
        )
    purchase = facts.item("PURCHASE")
    if purchase is not None and (
        purchase.get("brought") is not True or Decimal(str(purchase.get("upfront_fee_usd"))) != 0
    ):
        problems.append(
            f"brought {facts.brought}, but PURCHASE records brought={purchase.get('brought')} and a fee of "
            f"${purchase.get('upfront_fee_usd')}"
        )
    for entry in facts.history():
        detail = entry.get("detail") or {}
        if entry["state"] == "PURCHASED" and Decimal(str(entry.get("money_usd") or "0")) != 0:
            problems.append(f"brought {facts.brought}, but PURCHASED records ${entry['money_usd']}")
        summary = detail.get("summary") if entry["state"] == "RELEASED" else None
        if isinstance(summary, dict) and (
            summary.get("brought") is not True or Decimal(str(summary.get("upfront_fee_usd"))) != 0
        ):
            problems.append(
                f"brought {facts.brought}, but the cost summary says brought={summary.get('brought')}, paid "
                f"${summary.get('upfront_fee_usd')}"
            )
    return problems


def check_rollovers(facts: Facts) -> list[str]:
    """The money rules of keeping serving (issue 17 item 2): every reservation of the chain (the request and
    the successors requested for it) bought at most once, each one's ``PURCHASED`` money what AWS charged
    for it, nothing bought for a request outside the chain, the chain's spend within the request's budget,
    every successor ended (a final state once the lifecycle is idle), and a reservation released because it
    rolled over only after its successor served."""
    problems: list[str] = []
    chain = [facts.request_id, *facts.successors]
    paid = facts.chain_plans()
    strangers = sorted({p.owner for p in paid if p.owner and p.owner not in chain})
    if strangers:
        problems.append(
            f"roll-over: reservations bought for requests outside the chain: {', '.join(strangers)}"
        )
    for successor, items in facts.successors.items():
        own = [p for p in paid if p.owner == successor]
        if len(own) > 1:
            problems.append(f"roll-over: {len(own)} reservations bought for {successor}")
        states = [i for i in items if str(i["sk"]).startswith("STATE#")]
        money = sum(
            (Decimal(str(i["money_usd"])) for i in states if i.get("money_usd") is not None), Decimal(0)
        )
        charged = sum((p.upfront_fee_usd for p in own), Decimal(0))
        if money != charged:
            problems.append(f"roll-over: {successor}'s ledger money ${money} != what AWS charged ${charged}")
        if facts.finished and not any(i["state"] in FINAL_STATES for i in states):
            problems.append(
                f"roll-over: {successor} has no final state ({states[-1]['state'] if states else 'none'})"
            )
    spent = sum((p.upfront_fee_usd for p in paid if p.owner in ("", *chain)), Decimal(0)) + sum(
        (e.upfront_fee_usd for e in facts.chain_extensions if e.payment != "failed"), Decimal(0)
    )
    if facts.successors and spent > facts.max_upfront_fee_usd:
        problems.append(
            f"roll-over: the chain spent ${spent} > max_upfront_fee_usd ${facts.max_upfront_fee_usd}"
        )
    problems.extend(_released_after_the_successor_served(facts))
    return problems


def _released_after_the_successor_served(facts: Facts) -> list[str]:
    """A reservation released ``rolled-over`` must have a successor that recorded ``READY`` first."""
    chain = {facts.request_id: facts.items, **facts.successors}
    order = list(chain)
    problems = []
    for index, request_id in enumerate(order):
        states = sorted(
            (i for i in chain[request_id] if str(i["sk"]).startswith("STATE#")), key=lambda i: str(i["sk"])
        )
        releasing = next((i for i in states if i["state"] == "RELEASING"), None)
        if releasing is None or (releasing.get("detail") or {}).get("reason") != "rolled-over":
            continue
        following = chain[order[index + 1]] if index + 1 < len(order) else []
        ready = [i for i in following if i.get("state") == "READY"]
        if not ready or min(str(i["at"]) for i in ready) > str(releasing["at"]):
            problems.append(f"roll-over: {request_id} released rolled-over before a successor served")
    return problems


SERVE_UNTIL_ACTOR = "capacity-orchestrator:serve-until"
"""The requester the orchestrator names when it extends on the request's behalf (``serve_until``)."""
HAND_OVER = timedelta(hours=2)
"""A successor is ``InService`` at the latest this long before its predecessor's release (docs/api.md)."""
MARKET_STEP = timedelta(days=1)
"""Reservations start at 11:30 UTC: a successor bought without an extension may start up to a day early."""
BLOCK_RECLAIM = timedelta(minutes=40)
"""A capacity block's instances go from 30 minutes before its end (released at its expiry warning, 40
minutes before it): those minutes serve nothing whatever the application does."""
IDLE_TOLERANCE = timedelta(minutes=15)
"""Scheduling and polling slack on either side of a release or hand-over."""
EXEMPT_RELEASES = frozenset({"cancelled", "failed", "idle", "not-needed"})
"""Release reasons someone asked for (a cancel, the request's idle rule) or AWS caused (a failure): the
hours after them were paid before anyone knew."""


def _chain_members(facts: Facts) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(request id, ledger items)`` of the request and each successor requested for it, first to last."""
    return [(facts.request_id, facts.items), *facts.successors.items()]


def _margin(facts: Facts, request_id: str, items: list[dict[str, Any]]) -> timedelta:
    """The release margin of a chain member (its ``REQUEST``'s ``release_margin_minutes``, default 60)."""
    if request_id == facts.request_id:
        return timedelta(minutes=facts.release_margin_minutes)
    request = next((i.get("request") for i in items if i["sk"] == "REQUEST"), None) or {}
    return timedelta(minutes=int(request.get("release_margin_minutes") or 60))


def _person_asked(items: list[dict[str, Any]], offering_id: str) -> bool:
    """An extension bought from ``offering_id`` was asked for by a person (the requester, a member or an
    approver through the API), not by the orchestrator keeping the reservation serving: its
    ``EXTENSION_INTENT``'s ``requester``, found through the ``EXTENSION_CALL`` that named the offering."""
    extension_ids = {
        str(i["sk"]).split("#")[1]
        for i in items
        if str(i["sk"]).startswith("EXTENSION_CALL#")
        and str(((i.get("offering") or {}).get("offering_id")) or "") == offering_id
    } or {offering_id}
    for item in items:
        key = str(item["sk"])
        if key.startswith("EXTENSION_INTENT#") and key.partition("#")[2] in extension_ids:
            return str(item.get("requester") or SERVE_UNTIL_ACTOR) != SERVE_UNTIL_ACTOR
    return False


def _overlap(a: tuple[datetime, datetime], b: tuple[datetime, datetime]) -> timedelta:
    return max(timedelta(0), min(a[1], b[1]) - max(a[0], b[0]))


Span = tuple[str, datetime, datetime, bool]
"""A reservation of the chain: (request id, start, end as paid now, extended)."""


def check_no_idle_money(facts: Facts) -> list[str]:
    """No money paid for hours nothing could serve (issue 28): across the chain (the request and its
    successors), no fee, or part of one, pays for hours

    - after its reservation's release began, beyond the release margin (the release is scheduled that long
      before the end; 40 minutes for a capacity block, whose instances go 30 minutes before it), unless the
      release was asked for (a cancel, the request's idle rule) or caused by AWS (a failure); when the
      reservation was released because a successor took over, beyond the hand-over (the margin plus 2
      hours, and plus the day a reservation starting at 11:30 UTC may need when nothing was extended);
    - that another reservation of the chain paid for, beyond that hand-over: a successor starting earlier
      than it, or an extension and a successor both paying for one hour (one continuity decision per lead
      time), unless a person asked for that extension (recorded in its ``EXTENSION_INTENT``).
    """
    spans: list[Span] = []
    problems: list[str] = []
    for request_id, items in _chain_members(facts):
        for plan in _owned(facts, request_id):
            if plan.start_time is None:
                continue
            paid = _paid_extensions(facts, plan.name)
            spans.append((request_id, plan.start_time, plan.end_time, bool(paid)))
            problems.extend(_after_release(facts, request_id, items, plan, paid))
    return problems + _paid_twice(facts, spans) + _extended_and_succeeded(facts, spans)


def _owned(facts: Facts, request_id: str) -> list[PlanFact]:
    """The reservations a chain member paid for (an untagged one counts as the request's own)."""
    return [
        p
        for p in facts.chain_plans()
        if p.owner == request_id or (p.owner == "" and request_id == facts.request_id)
    ]


def _paid_extensions(facts: Facts, reservation: str) -> list[ExtensionFact]:
    return [e for e in facts.chain_extensions if e.reservation == reservation and e.payment == "succeeded"]


def _after_release(
    facts: Facts,
    request_id: str,
    items: list[dict[str, Any]],
    plan: PlanFact,
    paid: list[ExtensionFact],
) -> list[str]:
    """Hours of ``plan`` (with its paid extensions) after its release began, beyond what is allowed."""
    history = sorted((i for i in items if str(i["sk"]).startswith("STATE#")), key=lambda i: str(i["sk"]))
    releasing = next((i for i in history if i["state"] == "RELEASING"), None)
    if releasing is None:
        return []
    began = _utc(releasing["at"])
    reason = str((releasing.get("detail") or {}).get("reason") or "")
    if reason in EXEMPT_RELEASES or any(
        i["state"] == "CANCELLED" and _utc(i["at"]) <= began for i in history
    ):
        return []
    allowed = max(
        _margin(facts, request_id, items), BLOCK_RECLAIM if plan.kind == "capacity-block" else timedelta(0)
    )
    if reason == "rolled-over":
        allowed += HAND_OVER + (timedelta(0) if paid else MARKET_STEP)
    idle = plan.end_time - began
    if idle <= allowed + IDLE_TOLERANCE:
        return []
    extended = f" (extended by {', '.join(f'{e.hours} h' for e in paid)})" if paid else ""
    return [
        f"money for hours nothing served: {plan.name}{extended} of {request_id} paid until "
        f"{_ts(plan.end_time)}, its release ({reason or 'no reason'}) began at {_ts(began)}: {idle} after "
        f"it, {allowed} allowed"
    ]


def _paid_twice(facts: Facts, spans: list[Span]) -> list[str]:
    """Two reservations of the chain paying for the same hours beyond the hand-over."""
    members = dict(_chain_members(facts))
    problems = []
    for index, (earlier, start, end, extended) in enumerate(spans):
        for later, later_start, later_end, _ in spans[index + 1 :]:
            if later == earlier:
                continue
            allowed = _margin(facts, earlier, members[earlier]) + HAND_OVER
            if not extended:
                allowed += MARKET_STEP
            both = _overlap((start, end), (later_start, later_end))
            if both > allowed + IDLE_TOLERANCE:
                problems.append(
                    f"money for hours paid twice: {later} runs {_ts(later_start)} to {_ts(later_end)}, "
                    f"{earlier} was paid until {_ts(end)}"
                    + (" (extended)" if extended else "")
                    + f": {both} of both, {allowed} allowed for the hand-over"
                )
    return problems


def _extended_and_succeeded(facts: Facts, spans: list[Span]) -> list[str]:
    """An extension the orchestrator bought paying for hours another reservation of the chain pays for."""
    problems = []
    for request_id, items in _chain_members(facts):
        owned = {p.name for p in _owned(facts, request_id)}
        for extension in facts.chain_extensions:
            if (
                extension.reservation not in owned
                or extension.payment != "succeeded"
                or extension.start is None
                or extension.end is None
                or _person_asked(items, extension.offering_id)
            ):
                continue
            allowed = _margin(facts, request_id, items) + HAND_OVER
            for other, other_start, other_end, _ in spans:
                both = _overlap((extension.start, extension.end), (other_start, other_end))
                if other != request_id and both > allowed + IDLE_TOLERANCE:
                    problems.append(
                        f"extend and succeed both: extension {extension.offering_id} of {request_id} pays "
                        f"{_ts(extension.start)} to {_ts(extension.end)}, {other} runs {_ts(other_start)} "
                        f"to {_ts(other_end)}: {both} of both, {allowed} allowed"
                    )
    return problems


def check_causers_do_not_approve(facts: Facts) -> list[str]:
    """Whoever caused spend is one of its requesters (issue 28): an approver who changed ``serve_until`` of
    the chain never decides a purchase or extension of the chain recorded after that change (nor does the
    requester of a predecessor), and the API never answered such an approval 200."""
    problems = [
        f"approval by a causer accepted: {path} answered 200 to the approver who changed serve_until"
        for path in facts.causer_approvals_accepted
    ]
    causers: list[tuple[str, str, str]] = []  # (identity, since when, what)
    for request_id, items in _chain_members(facts):
        causers.extend(
            (str(item["actor"]), str(item.get("written_at") or ""), f"changed serve_until of {request_id}")
            for item in items
            if str(item["sk"]).startswith("SERVE_UNTIL#") and item.get("actor")
        )
        for item in items:
            key = str(item["sk"])
            approver = str(item.get("approver") or "")
            if not approver or not (key == "APPROVAL_DECISION" or key.startswith("EXTENSION_DECISION#")):
                continue
            problems.extend(
                f"{key} of {request_id} decided by {approver}, who {what}: whoever causes spend may not "
                "approve it"
                for identity, since, what in causers
                if identity == approver and str(item.get("written_at") or "") > since
            )
        request = next((i.get("request") for i in items if i["sk"] == "REQUEST"), None) or {}
        if request.get("requester"):
            causers.append((str(request["requester"]), "", f"requested {request_id}, which the chain serves"))
    return problems


def check_invalid_deliveries(facts: Facts) -> list[str]:
    """An invalid or conflicting ``ReservationRequested`` about a request (issue 28) changes nothing: the
    request recorded is the one accepted (its budget), and no entry records its refusal
    (``InvalidRequest``) against the request."""
    if not facts.invalid_deliveries:
        return []
    problems = []
    request = (facts.item("REQUEST") or {}).get("request") or {}
    recorded = request.get("max_upfront_fee_usd")
    if recorded is not None and Decimal(str(recorded)) != facts.max_upfront_fee_usd:
        problems.append(
            f"an invalid delivery changed the request: its budget reads ${recorded}, "
            f"${facts.max_upfront_fee_usd} was accepted"
        )
    for entry in facts.history():
        if ((entry.get("detail") or {}).get("error")) == "InvalidRequest":
            problems.append(
                f"an invalid delivery ({', '.join(facts.invalid_deliveries)}) ended the request: "
                f"{entry['state']} InvalidRequest at {entry['at']}"
            )
    return problems


def keep_serving(facts: Facts) -> str:
    """What ``serve_until`` led to in a lifecycle, for the soak's figures: ``rolled-over`` (a successor
    served), ``successor`` (one was requested, never served), either after an extension (``extended, then
    ...``), ``extended`` (an extension in place was paid for it), ``told`` (a person was told it stops at
    its end), ``asked`` (an extension tried, nothing more), or empty when nothing was due (no
    ``serve_until``, or it ended first)."""
    items = [i for i in facts.items if not str(i["sk"]).startswith("STATE#")]
    tried = [i for i in items if str(i["sk"]).startswith("ROLLOVER_EXTENSION#")]
    extended = {
        str((i.get("detail") or {}).get("extension_id")) for i in facts.history() if i["state"] == "EXTENDED"
    }
    was_extended = any(i.get("extension_id") in extended for i in tried)
    if any(i["sk"] == "ROLLED_OVER" for i in items):
        return "extended, then rolled-over" if was_extended else "rolled-over"
    if facts.successors:
        return "extended, then successor" if was_extended else "successor"
    if any(str(i["sk"]).startswith("ROLLOVER_TOLD#") for i in items):
        return "told"
    if was_extended:
        return "extended"
    return "asked" if tried else ""


def _utc(text: Any) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).astimezone(UTC)


CHECKS: tuple[Callable[[Facts], list[str]], ...] = (
    check_cost_rollup,
    check_double_purchase,
    check_budget,
    check_extensions,
    check_total_spend,
    check_money_recorded,
    check_approval,
    check_approval_decision,
    check_paid_kept,
    check_cancel_honoured,
    check_copies_recorded,
    check_billable,
    check_final_state,
    check_failures_notified,
    check_lifecycle_path,
    check_window,
    check_keep_looking,
    check_brought,
    check_rollovers,
    check_no_idle_money,
    check_causers_do_not_approve,
    check_invalid_deliveries,
)


def check(facts: Facts) -> list[str]:
    """Every invariant violation of a lifecycle (empty when it kept every rule)."""
    return [problem for checker in CHECKS for problem in checker(facts)]


def route(request: dict[str, Any], facts: Facts, now: datetime = START) -> str:
    """``<platform> <strategy> -> <what ran>``: the platform, the strategy asked (or its default at ``now``,
    the first POST) and what the lifecycle ran on: ``on-demand``/``spot`` (the ``PURCHASE`` item's market),
    ``training plan``, ``capacity block`` (paid for), ``brought training plan``/``brought capacity block``
    (someone else's, issue 17), or ``nothing``."""
    platform = str(request.get("platform") or "sagemaker")
    strategy = request.get("strategy") or ("on-demand-first" if starts_soon(request, now) else "reserved")
    purchase = facts.item("PURCHASE")
    if purchase is not None and purchase.get("market") in ("on-demand", "spot"):
        ran = str(purchase["market"])
    elif facts.brought is not None:
        ran = "brought " + ("capacity block" if facts.brought.startswith("cr-") else "training plan")
    elif facts.live_plans():
        ran = " + ".join(sorted({p.kind.replace("-", " ") for p in facts.live_plans()}))
    else:
        ran = "nothing"
    return f"{platform} {strategy} -> {ran}"


def looking(facts: Facts) -> str | None:
    """What a request that keeps looking (``search_until``) came to: ``bought at the first look``, ``bought
    after N looks``, ``told at the deadline``, ``cancelled while looking`` or ``ended otherwise``; None
    without ``search_until`` (or in a dry run)."""
    if facts.search_until is None or facts.dry_run:
        return None
    history = facts.history()
    looks = sum(1 for i in history if i["state"] == "SEARCHING")
    bought = facts.live_plans() or on_demand_spend(facts) is not None
    if bought:
        return "bought at the first look" if not looks else f"bought after {looks + 1} looks"
    finals = [i for i in history if i["state"] in FINAL_STATES]
    first = finals[0] if finals else None
    if first is not None and first["state"] == "CANCELLED" and looks:
        return "cancelled while looking"
    error = ((first or {}).get("detail") or {}).get("error")
    if first is not None and error in ("SearchDeadlinePassed", "BudgetExceeded") and looks:
        return "told at the deadline"
    return "ended otherwise"


def outcome(facts: Facts) -> str:
    """The lifecycle's outcome: its final states in order (``CANCELLED+RELEASED``), ``DRY_RUN``, or why
    there is none (``NOT_ACCEPTED``, ``UNFINISHED``, ``NO_FINAL(<last state>)``)."""
    if not facts.finished:
        return "UNFINISHED"
    history = facts.history()
    finals: list[str] = []
    for entry in history:
        state = str(entry["state"])
        if state in FINAL_STATES and state not in finals:
            finals.append(state)
    if finals:
        return "+".join(finals)
    if facts.dry_run and history and history[-1]["state"] == "PLANNED":
        return "DRY_RUN"
    if not history and not facts.accepted:
        return "NOT_ACCEPTED"
    return f"NO_FINAL({history[-1]['state'] if history else 'nothing'})"
