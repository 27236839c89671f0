"""Admission: the rules of a request that need the clock (the door's ``now``, UTC).

A request is admitted once, at its door, with the clock (:func:`capacity.request.parse_request` with
``now``); a request read back from the ledger is validated without one and none of these rules apply (the
clock has moved on since it was admitted). The functions take plain values so that the request schema
(:mod:`capacity.request`) calls them from its validators without an import circle.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from capacity.platforms import platform as platform_named
from capacity.timeutil import as_utc, iso_z

START_GRACE = timedelta(minutes=15)
"""How far in the past ``earliest_start`` may be at intake (delivery delays, clock skew)."""
CAPACITY_BLOCK_HORIZON = timedelta(weeks=8)
"""Capacity blocks can be bought at most 8 weeks ahead (AWS_FACTS.md)."""
ON_DEMAND_FIRST_HORIZON = timedelta(hours=1)
"""A window starting within this long of now defaults to ``on-demand-first`` (issue 6)."""


def start_problem(earliest_start: datetime, *, platform: str | None, now: datetime) -> str | None:
    """Why ``earliest_start`` (UTC) cannot be admitted at ``now``: more than :data:`START_GRACE` in the past,
    or (``platform`` ``ec2``) more than :data:`CAPACITY_BLOCK_HORIZON` ahead; None when it can."""
    start = iso_z(earliest_start)
    if earliest_start < as_utc(now) - START_GRACE:
        return f"start {start} is in the past (now {iso_z(now)}): choose a start time in the future"
    if platform_named(platform).capacity_blocks and earliest_start > as_utc(now) + CAPACITY_BLOCK_HORIZON:
        return (
            f"start {start} is more than 8 weeks after now ({iso_z(now)}): capacity blocks can "
            "be bought at most 8 weeks ahead; choose a start before "
            + iso_z(as_utc(now) + CAPACITY_BLOCK_HORIZON)
        )
    return None


def default_strategy(
    earliest_start: datetime, *, runnable_on_demand: bool, now: datetime
) -> Literal["on-demand-first", "reserved"]:
    """The strategy of a request that names none, at ``now``: ``on-demand-first`` when the window starts
    within :data:`ON_DEMAND_FIRST_HORIZON` and something can run on demand (SageMaker, or EC2 with a launch
    template), else ``reserved``."""
    soon = earliest_start <= as_utc(now) + ON_DEMAND_FIRST_HORIZON
    return "on-demand-first" if soon and runnable_on_demand else "reserved"


SEARCH_HORIZON = timedelta(days=90)
"""How far ahead ``search_until`` may be: the reserve workflow (a Standard execution, at most a year: AWS
Step Functions quotas) still has to buy, wait for the start and deploy after it."""


def search_until_problem(search_until: datetime, *, now: datetime) -> str | None:
    """Why ``search_until`` (UTC) cannot be admitted at ``now``: not after ``now``, or more than
    :data:`SEARCH_HORIZON` ahead; None when it can."""
    deadline = iso_z(search_until)
    if search_until <= as_utc(now):
        return (
            f"{deadline} is not in the future (now {iso_z(now)}): give a deadline after now, or leave "
            "search_until out to search once"
        )
    if search_until > as_utc(now) + SEARCH_HORIZON:
        return (
            f"{deadline} is more than {SEARCH_HORIZON.days} days after now ({iso_z(now)}): choose a deadline "
            f"before {iso_z(as_utc(now) + SEARCH_HORIZON)}"
        )
    return None
