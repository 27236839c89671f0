"""Keep looking until a deadline (issue 17 item 4, issue 31 item 4): when the request's looks happen, and
how many fit in one workflow execution (pure, no I/O).

A request with ``search_until`` that finds nothing that fits the rules is not failed at once: the reserve
workflow searches again every ``search_every_minutes`` (the longest gap between two looks) for as long as
the deadline allows, the last look at the deadline itself, and tells the requester at the deadline if
nothing fitted by then. So capacity that appears at any instant is seen by the next look, at most one
interval later. The looks are at ``since + k * every`` (``k = 1, 2, ...``) and at the deadline; a regular
look within :data:`LOOK_TOLERANCE` of the deadline is the deadline's look.

A look that finds nothing costs a handful of state transitions (:func:`events_per_look`); a workflow
execution holds at most :func:`looks_per_execution` of them and then continues as a fresh execution
(``ContinueAsNew`` in ``statemachines/reserve_capacity.asl.json``), well before Step Functions' history
limit of :data:`HISTORY_LIMIT` events, so days or weeks of looking work.

Times are UTC, whole seconds. Every function is O(1) in the number of looks.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from capacity.timeutil import as_utc

DEFAULT_EVERY_MINUTES = 15
"""The longest gap between two looks when the request does not say (``search_every_minutes``)."""
MIN_EVERY_MINUTES = 15
MAX_EVERY_MINUTES = 7 * 24 * 60
"""The bounds of ``search_every_minutes`` (15 minutes to a week). Below 15 minutes a request of ten regions
would cost more than $0.10 a day of looking (``make bench``) and offerings rarely move faster."""
LOOK_TOLERANCE = timedelta(minutes=1)
"""A look due within this long of now counts as this look (a wait's timeout ends on a whole second, and a
look may run a moment before or after its instant)."""
HISTORY_LIMIT = 25_000
"""Step Functions' limit of events in one execution's history (AWS Step Functions quotas, "Maximum execution
history size"): an execution that would exceed it fails."""
HISTORY_BUDGET = 20_000
"""The events one execution's looks may take: the rest of :data:`HISTORY_LIMIT` is for the steps before the
first look and after the last (purchase, activation, endpoint: a few hundred events) and for retries of
transient faults (a few events each)."""


def _every(every_minutes: int) -> timedelta:
    if every_minutes < 1:
        raise ValueError(f"every_minutes must be at least 1, not {every_minutes}")
    return timedelta(minutes=every_minutes)


def _seconds(moment: datetime) -> datetime:
    return as_utc(moment).replace(microsecond=0)


def next_look(since: datetime, deadline: datetime, every_minutes: int, *, now: datetime) -> datetime | None:
    """The first look after the one made at ``now`` (beyond :data:`LOOK_TOLERANCE`), or None when the look
    made at ``now`` is the last one (the deadline has come).

    The looks are at ``since + k * every_minutes`` and at ``deadline``: the gap is never longer than
    ``every_minutes`` (the last one may be shorter).

    Args:
        since: the first look (UTC).
        deadline: ``search_until`` (UTC).
        every_minutes: ``search_every_minutes``, the longest gap (minutes, at least 1).
        now: when this look is made (UTC).

    Raises:
        ValueError: a naive datetime, or ``every_minutes`` below 1.
    """
    every = _every(every_minutes)
    start, end = _seconds(since), _seconds(deadline)
    after = as_utc(now) + LOOK_TOLERANCE
    if end <= after:
        return None
    passed = max(0, math.floor((after - start) / every))  # regular looks at or before ``after``
    regular = start + every * (passed + 1)
    return end if regular >= end - LOOK_TOLERANCE else regular


def looks_left(since: datetime, deadline: datetime, every_minutes: int, *, now: datetime) -> int:
    """How many looks are still to come after the one made at ``now`` (0 at the deadline), the deadline's
    included."""
    at = next_look(since, deadline, every_minutes, now=now)
    if at is None:
        return 0
    end = _seconds(deadline)
    every = _every(every_minutes)
    if at == end:
        return 1
    # ``at`` and the regular looks after it short of the deadline's tolerance, then the deadline's.
    return math.ceil((end - LOOK_TOLERANCE - at) / every) + 1


def look_instants(since: datetime, deadline: datetime, every_minutes: int) -> list[datetime]:
    """Every look after the first one (made at ``since``), earliest first, the last at ``deadline`` (for
    tests, docs and the bench: O(number of looks); the workflow uses :func:`next_look`)."""
    instants: list[datetime] = []
    moment: datetime | None = _seconds(since)
    while moment is not None:
        moment = next_look(since, deadline, every_minutes, now=moment - LOOK_TOLERANCE)
        if moment is not None:
            instants.append(moment)
    return instants


def events_per_look(regions: int) -> int:
    """The history events one look that finds nothing adds to its execution, with a margin: the
    ``SearchRegions`` Map and its iterations (about 7 events per region), ``ChooseOffering``,
    ``DropSearches``, ``Decide``, ``SearchLater`` (the wait and its timeout), ``NextLook`` and
    ``ContinueAsNew?``: about 46 for three regions on the local cloud, so 24 + 8 per region."""
    return 24 + 8 * max(1, regions)


def looks_per_execution(regions: int) -> int:
    """How many looks one execution makes before it continues as new: :data:`HISTORY_BUDGET` over
    :func:`events_per_look` (625 for one region, 416 for three, 192 for ten: two to six days of 15-minute
    looks)."""
    return max(1, HISTORY_BUDGET // events_per_look(regions))
