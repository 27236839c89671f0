"""Keep looking until a deadline (issue 17 item 4): when the request's next looks happen (pure, no I/O).

A request with ``search_until`` that finds nothing that fits the rules is not failed at once: the reserve
workflow searches again at the instants :func:`look_instants` gives, and tells the requester at the
deadline if nothing fitted by then. The looks are at most :data:`MAX_MORE_LOOKS` after the first one, the
last at the deadline itself, with gaps that grow geometrically from ``search_every_minutes``: the first gap is
the interval the request asks for, and each later gap is the previous one times a ratio chosen so that the
looks reach the deadline exactly. So a search of one day and one of ten days take the same number of looks
(and the same state transitions: each wait is one ``.waitForTaskToken`` task, O(1) whatever its length, as
the activation wait is); only a deadline closer than :data:`MAX_MORE_LOOKS` intervals gets fewer looks (one
per interval, the last at the deadline).

Times are UTC, whole seconds.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from capacity.timeutil import as_utc

MAX_MORE_LOOKS = 6
"""Looks after the first one, at most (the last one is at the deadline)."""
DEFAULT_EVERY_MINUTES = 60
"""The first gap when the request does not say (``search_every_minutes``)."""
MIN_EVERY_MINUTES = 15
MAX_EVERY_MINUTES = 7 * 24 * 60
"""The bounds of ``search_every_minutes`` (15 minutes to a week)."""
LOOK_TOLERANCE = timedelta(minutes=1)
"""A look due within this long of now counts as this look (a wait's timeout ends on a whole second, and a
look may run a moment before or after its instant)."""


def growth_ratio(span: timedelta, every: timedelta, looks: int) -> float:
    """The ratio ``r >= 1`` with ``every * (1 + r + ... + r**(looks - 1)) == span``.

    Args:
        span: from the first look to the deadline (positive).
        every: the first gap (positive, ``looks * every <= span``).
        looks: how many gaps (at least 1).

    Raises:
        ValueError: ``span``, ``every`` or ``looks`` outside those bounds.
    """
    if looks < 1 or every <= timedelta(0) or span < every * looks:
        raise ValueError(f"no growth ratio for {looks} gaps of at least {every} in {span}")
    target = span / every
    if math.isclose(target, looks):
        return 1.0

    def total(ratio: float) -> float:
        return float(looks) if ratio == 1.0 else (ratio**looks - 1) / (ratio - 1)

    low, high = 1.0, max(2.0, target)
    for _ in range(200):  # bisection: total() grows with the ratio
        middle = (low + high) / 2
        if total(middle) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def look_instants(since: datetime, deadline: datetime, every_minutes: int) -> list[datetime]:
    """The instants of the looks after the first one (made at ``since``), earliest first.

    At most :data:`MAX_MORE_LOOKS`, the last one at ``deadline``; the gaps start at ``every_minutes`` and
    grow (a ratio of 1 when the deadline leaves exactly room for them). A deadline closer than one
    interval gets one look, at the deadline; a deadline at or before ``since`` gets none.

    Args:
        since: the first look (UTC).
        deadline: ``search_until`` (UTC).
        every_minutes: ``search_every_minutes``, the first gap (minutes, at least 1).

    Raises:
        ValueError: a naive datetime, or ``every_minutes`` below 1.
    """
    if every_minutes < 1:
        raise ValueError(f"every_minutes must be at least 1, not {every_minutes}")
    start, end = as_utc(since).replace(microsecond=0), as_utc(deadline).replace(microsecond=0)
    span = end - start
    if span <= timedelta(0):
        return []
    every = timedelta(minutes=every_minutes)
    looks = max(1, min(MAX_MORE_LOOKS, span // every))
    if looks == 1:
        return [end]
    ratio = growth_ratio(span, every, looks)
    instants: list[datetime] = []
    offset = 0.0
    for index in range(looks - 1):
        offset += every.total_seconds() * ratio**index
        instants.append(start + timedelta(seconds=round(offset)))
    return [*instants, end]


def next_look(since: datetime, deadline: datetime, every_minutes: int, *, now: datetime) -> datetime | None:
    """The first look of :func:`look_instants` after ``now`` (beyond :data:`LOOK_TOLERANCE`), or None when
    the look made at ``now`` is the last one (the deadline has come)."""
    after = as_utc(now) + LOOK_TOLERANCE
    return next((moment for moment in look_instants(since, deadline, every_minutes) if moment > after), None)


def looks_left(since: datetime, deadline: datetime, every_minutes: int, *, now: datetime) -> int:
    """How many looks are still to come after the one made at ``now`` (0 at the deadline)."""
    after = as_utc(now) + LOOK_TOLERANCE
    return sum(1 for moment in look_instants(since, deadline, every_minutes) if moment > after)
