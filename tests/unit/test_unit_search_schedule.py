"""Keep looking until a deadline (issue 17 item 4): the looks' instants, their growth, the cap, the deadline
(capacity.search_schedule), and the request's keep-looking fields at the door."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from capacity.errors import InvalidRequest
from capacity.request import parse_request
from capacity.search_schedule import (
    MAX_MORE_LOOKS,
    growth_ratio,
    look_instants,
    looks_left,
    next_look,
)

from tests.unit.unit_fakes import NOW, request_body

SINCE = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def _gaps(instants: list[datetime]) -> list[timedelta]:
    points = [SINCE, *instants]
    return [later - earlier for earlier, later in pairwise(points)]


def test_the_first_look_comes_after_the_interval_and_the_last_at_the_deadline() -> None:
    deadline = SINCE + timedelta(days=1)
    instants = look_instants(SINCE, deadline, 60)
    assert instants[0] == SINCE + timedelta(hours=1)
    assert instants[-1] == deadline
    assert [moment.isoformat() for moment in instants] == [
        "2026-12-01T09:00:00+00:00",
        "2026-12-01T10:33:39+00:00",
        "2026-12-01T12:59:50+00:00",
        "2026-12-01T16:48:00+00:00",
        "2026-12-01T22:44:08+00:00",
        "2026-12-02T08:00:00+00:00",
    ]


@pytest.mark.parametrize("days", [1, 3, 10, 60])
def test_one_day_and_ten_days_of_looking_take_the_same_number_of_looks_with_growing_gaps(days: int) -> None:
    instants = look_instants(SINCE, SINCE + timedelta(days=days), 60)
    gaps = _gaps(instants)
    assert len(instants) == MAX_MORE_LOOKS
    assert gaps[0] == timedelta(hours=1)
    assert all(later > earlier for earlier, later in pairwise(gaps)), gaps
    assert sum(gaps, timedelta()) == timedelta(days=days)


def test_a_deadline_closer_than_six_intervals_gets_one_look_per_interval() -> None:
    instants = look_instants(SINCE, SINCE + timedelta(hours=3), 60)
    assert instants == [SINCE + timedelta(hours=h) for h in (1, 2, 3)]  # ratio 1: exactly room for them
    shorter = look_instants(SINCE, SINCE + timedelta(hours=3, minutes=30), 60)
    assert len(shorter) == 3
    assert shorter[0] == SINCE + timedelta(hours=1)
    assert shorter[-1] == SINCE + timedelta(hours=3, minutes=30)


def test_a_deadline_within_one_interval_is_looked_at_once_and_a_past_one_never() -> None:
    assert look_instants(SINCE, SINCE + timedelta(minutes=20), 60) == [SINCE + timedelta(minutes=20)]
    assert look_instants(SINCE, SINCE, 60) == []
    assert look_instants(SINCE, SINCE - timedelta(hours=1), 60) == []


def test_the_growth_ratio_fills_the_span_exactly() -> None:
    ratio = growth_ratio(timedelta(days=10), timedelta(hours=1), 6)
    total = sum(ratio**index for index in range(6))
    assert total == pytest.approx(240, rel=1e-9)
    assert growth_ratio(timedelta(hours=6), timedelta(hours=1), 6) == 1.0
    with pytest.raises(ValueError, match="no growth ratio"):
        growth_ratio(timedelta(hours=5), timedelta(hours=1), 6)


def test_next_look_walks_the_schedule_and_ends_at_the_deadline() -> None:
    deadline = SINCE + timedelta(days=10)
    instants = look_instants(SINCE, deadline, 60)
    assert next_look(SINCE, deadline, 60, now=SINCE) == instants[0]
    # A look made on its instant (or a few seconds late) is that look: the next one is the one after it.
    assert next_look(SINCE, deadline, 60, now=instants[2] + timedelta(seconds=5)) == instants[3]
    assert next_look(SINCE, deadline, 60, now=instants[2] - timedelta(seconds=30)) == instants[3]
    assert looks_left(SINCE, deadline, 60, now=instants[2]) == 3
    assert next_look(SINCE, deadline, 60, now=deadline) is None
    assert looks_left(SINCE, deadline, 60, now=deadline) == 0


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
