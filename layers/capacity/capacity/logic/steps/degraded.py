"""``notify`` kind ``degraded``: a reserve step keeps failing on transient faults while money is at stake.

Rule (DESIGN.md, "Paid means kept"): once money may be spent (a purchase intent, a purchase, an on-demand
launch), a transient fault (throttling, 5xx, timeouts, a killed Lambda, a Lambda service error) never ends
the reservation. The workflow's own retries come first (about 25 minutes per step); when they run out it
calls this step, which records the fault (``DEGRADED#<time>``), tells a person once the streak lasts
:data:`TELL_AFTER` (and every :data:`TELL_EVERY` after that), and answers what to do:

- ``wait`` (growing from 1 to 15 minutes), then the same step again;
- ``end`` when the reservation is over (its end passed) or a release, cancel or failure is recorded: the
  release workflow owns what is left;
- ``fail`` when no money is at stake: the ordinary failure path.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from capacity import messages
from capacity.contracts.common import StepError
from capacity.contracts.notify import DegradedOutput, DegradedStreak, NotifyInput
from capacity.logic.steps.common import STOP_STATES, post, states
from capacity.ports import Ports
from capacity.record_kinds import DEGRADED, ON_DEMAND_TRY_PREFIX, PURCHASE, PURCHASE_INTENT
from capacity.timeutil import iso_ms, iso_z, parse_utc

TELL_AFTER = timedelta(minutes=30)
TELL_EVERY = timedelta(hours=6)
STREAK_GAP = timedelta(hours=3)
"""A fault of the same step more than this after the last one starts a new streak (the step had recovered)."""
MAX_WAIT_SECONDS = 900


def degraded(step: NotifyInput, ports: Ports) -> DegradedOutput:
    """Record a transient fault that outlasted a step's retries and decide what the workflow does next."""
    now = ports.clock()
    state = step.state or "?"
    error = step.error or StepError(Error="States.TaskFailed")
    ledger = ports.ledger
    request_id = step.request_id
    notes = ledger.items(request_id, f"{DEGRADED}#")
    previous = DegradedStreak.model_validate(notes[-1]["streak"]) if notes else DegradedStreak()
    streak = _streak(previous, state, now)
    purchase = ledger.get(request_id, PURCHASE)
    at_stake = (
        purchase is not None
        or ledger.get(request_id, PURCHASE_INTENT) is not None
        or bool(ledger.items(request_id, ON_DEMAND_TRY_PREFIX))
    )
    action, wait = "wait", 0
    if not at_stake:
        action = "fail"
    elif states(ledger.history(request_id)) & STOP_STATES or (
        purchase is not None and now >= parse_utc(str(purchase["end_time"]))
    ):
        action = "end"
    else:
        since = parse_utc(streak.since)
        if now - since >= TELL_AFTER + streak.told * TELL_EVERY:
            streak = streak.model_copy(update={"told": streak.told + 1})
            minutes = int((now - since).total_seconds() // 60)
            post(
                ports,
                messages.degraded(request_id, state=state, error=error.Error, since=since, minutes=minutes),
            )
        wait = min(MAX_WAIT_SECONDS, 60 * 2 ** min(streak.attempt - 1, 10))
    ledger.put_once(
        request_id,
        f"{DEGRADED}#{iso_ms(now)}",
        {
            "actor": ports.actor,
            "state": state,
            "error": error.Error,
            "action": action,
            "streak": streak.model_dump(),
        },
    )
    return DegradedOutput.model_validate({"action": action, "wait_seconds": wait, **streak.model_dump()})


def _streak(previous: DegradedStreak, state: str, now: datetime) -> DegradedStreak:
    """The streak this fault belongs to: the previous one if the same step failed recently, else a new one."""
    if previous.state == state and previous.last_at and now - parse_utc(previous.last_at) <= STREAK_GAP:
        return previous.model_copy(update={"last_at": iso_z(now), "attempt": previous.attempt + 1})
    return DegradedStreak(state=state, since=iso_z(now), last_at=iso_z(now), attempt=1, told=0)
