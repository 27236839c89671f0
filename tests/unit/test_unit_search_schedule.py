"""Keep looking until a deadline (issue 17 item 4, issue 31 item 4): the looks' instants (every interval at
most, the last at the deadline), the looks one execution holds before it continues as new, and the
request's keep-looking fields at the door (capacity.search_schedule)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from capacity.errors import InvalidRequest
from capacity.request import parse_request
from capacity.search_schedule import (
    DEFAULT_EVERY_MINUTES,
    HISTORY_BUDGET,
    HISTORY_LIMIT,
    events_per_look,
    look_instants,
    looks_left,
    looks_per_execution,
    next_look,
)

from tests.unit.unit_fakes import NOW, request_body

SINCE = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def _gaps(instants: list[datetime]) -> list[timedelta]:
    points = [SINCE, *instants]
    return [later - earlier for earlier, later in pairwise(points)]


def test_looks_come_every_interval_and_the_last_at_the_deadline() -> None:
    deadline = SINCE + timedelta(hours=2, minutes=10)
    assert [moment.isoformat() for moment in look_instants(SINCE, deadline, 60)] == [
        "2026-12-01T09:00:00+00:00",
        "2026-12-01T10:00:00+00:00",
        "2026-12-01T10:10:00+00:00",
    ]


@pytest.mark.parametrize(("days", "every"), [(1, 15), (10, 15), (30, 15), (30, 60), (90, 10080)])
def test_no_gap_is_longer_than_the_interval_however_long_the_search(days: int, every: int) -> None:
    deadline = SINCE + timedelta(days=days)
    instants = look_instants(SINCE, deadline, every)
    gaps = _gaps(instants)
    assert max(gaps) == timedelta(minutes=every)
    assert min(gaps) > timedelta(0)
    assert instants[-1] == deadline
    assert len(instants) == -(-days * 24 * 60 // every)  # ceil: 30 days of 15 minutes is 2,880 looks
    assert sum(gaps, timedelta()) == timedelta(days=days)


def test_the_default_interval_is_a_quarter_of_an_hour() -> None:
    assert DEFAULT_EVERY_MINUTES == 15
    assert len(look_instants(SINCE, SINCE + timedelta(days=1), DEFAULT_EVERY_MINUTES)) == 96


def test_a_regular_look_within_a_minute_of_the_deadline_is_the_deadlines_look() -> None:
    deadline = SINCE + timedelta(hours=2, seconds=30)
    assert look_instants(SINCE, deadline, 60) == [SINCE + timedelta(hours=1), deadline]


def test_a_deadline_within_one_interval_is_looked_at_once_and_a_past_one_never() -> None:
    assert look_instants(SINCE, SINCE + timedelta(minutes=20), 60) == [SINCE + timedelta(minutes=20)]
    assert look_instants(SINCE, SINCE, 60) == []
    assert look_instants(SINCE, SINCE - timedelta(hours=1), 60) == []


def test_next_look_walks_the_schedule_and_ends_at_the_deadline() -> None:
    deadline = SINCE + timedelta(days=10)
    instants = look_instants(SINCE, deadline, 60)
    assert next_look(SINCE, deadline, 60, now=SINCE) == instants[0]
    # A look made on its instant (or a few seconds late) is that look: the next one is the one after it.
    assert next_look(SINCE, deadline, 60, now=instants[2] + timedelta(seconds=5)) == instants[3]
    assert next_look(SINCE, deadline, 60, now=instants[2] - timedelta(seconds=30)) == instants[3]
    # A look made late (a slow step, a retry) is followed by the next one on the grid, never a full interval.
    assert next_look(SINCE, deadline, 60, now=instants[2] + timedelta(minutes=40)) == instants[3]
    assert looks_left(SINCE, deadline, 60, now=instants[2]) == len(instants) - 3
    assert looks_left(SINCE, deadline, 60, now=SINCE) == 240
    assert looks_left(SINCE, deadline, 60, now=instants[-2]) == 1
    assert next_look(SINCE, deadline, 60, now=deadline) is None
    assert looks_left(SINCE, deadline, 60, now=deadline) == 0


def test_an_interval_below_one_minute_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        next_look(SINCE, SINCE + timedelta(days=1), 0, now=SINCE)


@pytest.mark.parametrize("regions", [1, 3, 10])
def test_an_execution_holds_its_looks_far_below_the_history_limit(regions: int) -> None:
    per = looks_per_execution(regions)
    assert per * events_per_look(regions) <= HISTORY_BUDGET < HISTORY_LIMIT
    assert per >= 90  # about a day of 15-minute looks or more per execution, whatever the regions
    assert looks_per_execution(regions + 1) <= per


# ------------------------------------------------------------------------------ the request's fields


def _problems(**overrides: Any) -> dict[str, str]:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(request_body(**overrides), now=NOW)
    return {error.field: error.message for error in caught.value.errors}


def test_a_request_may_keep_looking_until_the_windows_latest_start() -> None:
    latest_start = "2026-12-11T11:30:00Z"  # latest_end 2026-12-14T11:30Z minus 72 h
    request = parse_request(request_body(search_until=latest_start, search_every_minutes=30), now=NOW)
    assert request.search_until == datetime(2026, 12, 11, 11, 30, tzinfo=UTC)
    assert request.search_every_minutes == 30


@pytest.mark.parametrize(
    ("overrides", "field", "phrase"),
    [
        ({"search_until": "2026-12-11T12:00:00Z"}, "search_until", "after the window's latest start"),
        ({"search_until": "2026-12-11T12:00:00Z"}, "search_until", "choose 2026-12-11T11:30:00Z or earlier"),
        ({"search_until": "2026-11-30T00:00:00Z"}, "search_until", "is not in the future"),
        ({"search_until": "2026-12-05T00:00:00"}, "search_until", "time zone"),
        ({"search_every_minutes": 30}, "search_every_minutes", "give search_until too"),
        ({"search_until": "2026-12-05T00:00:00Z", "search_every_minutes": 5}, "search_every_minutes", "15"),
        (
            {"search_until": "2026-12-05T00:00:00Z", "search_every_minutes": 20000},
            "search_every_minutes",
            "10080",
        ),
        (
            {"search_until": "2026-12-05T00:00:00Z", "instance_type": "ml.g6.12xlarge"},
            "search_until",
            "no training plan to look for",
        ),
        (
            {
                "search_until": "2026-12-05T00:00:00Z",
                "training_plan_arn": "arn:aws:sagemaker:us-east-1:123456789012:training-plan/central-p5",
            },
            "search_until",
            "brings its own reservation",
        ),
    ],
)
def test_keep_looking_fields_that_do_not_fit_are_refused_naming_the_field_and_the_fix(
    overrides: dict[str, Any], field: str, phrase: str
) -> None:
    problems = _problems(**overrides)
    assert phrase in problems.get(field, ""), problems


def test_a_deadline_more_than_ninety_days_ahead_is_refused() -> None:
    problems = _problems(
        earliest_start="2027-03-01T11:30:00Z",
        latest_end="2027-04-01T11:30:00Z",
        search_until="2027-03-15T00:00:00Z",
    )
    assert "more than 90 days after now" in problems["search_until"]


def test_the_deadline_in_the_past_is_checked_at_the_door_only() -> None:
    # Read back from the ledger (no clock) a request admitted earlier stays valid after its deadline passed.
    request = parse_request(request_body(search_until="2026-12-05T00:00:00Z"), now=None)
    assert request.search_until is not None
