"""Keeping a model served (issue 17, serve_until): the rules that need no AWS call (capacity.succession) and
the request's new fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from capacity.errors import InvalidRequest
from capacity.identity import IDENTITY
from capacity.request import DEFAULT_ROLLOVER_LEAD_HOURS, parse_request, require_not_a_successor
from capacity.succession import (
    NoSuccessorError,
    approval_deadline,
    covered,
    extension_hours,
    successor_id,
    successor_request,
    successor_window,
)

from tests.unit.unit_fakes import NOW, request_body

END = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)


def test_an_end_covers_serve_until_only_with_the_release_margin_before_it() -> None:
    assert covered(END, HOUR, END - HOUR)
    assert not covered(END, HOUR, END - HOUR + timedelta(minutes=1))


def test_the_extension_reaches_serve_until_plus_the_margin_in_whole_days() -> None:
    until = END + timedelta(days=2) - HOUR  # 10:30 two days later: exactly two more days
    assert extension_hours(END, HOUR, until, platform="sagemaker", max_hours=4368) == 48
    assert (
        extension_hours(END, HOUR, until + timedelta(minutes=1), platform="sagemaker", max_hours=4368) == 72
    )
    # capacity blocks past 14 days extend by whole weeks; and never above the longest extension
    assert extension_hours(END, HOUR, END + timedelta(days=15), platform="ec2", max_hours=4368) == 21 * 24
    assert extension_hours(END, HOUR, END + timedelta(days=300), platform="sagemaker", max_hours=4368) == 4368


def test_successor_ids_are_deterministic_and_fit_64_characters() -> None:
    assert successor_id("eval-week-49", 2) == "eval-week-49-r2"
    long_id = "x" * 64
    named = successor_id(long_id, 12)
    assert len(named) == 64
    assert named.endswith("-r12")
    assert named == successor_id(long_id, 12) != successor_id("y" * 64, 12)


def test_the_successor_window_holds_exactly_the_starts_that_serve_in_time() -> None:
    now = END - timedelta(hours=48)
    until = END + timedelta(days=2) - HOUR
    window = successor_window(end=END, margin=HOUR, serve_until=until, now=now, platform="sagemaker")
    assert window.latest_start == END - 3 * HOUR  # in service 2 h later, before the release at END - 1 h
    assert window.duration_hours == 72  # from the latest start to serve_until + margin, in whole days
    assert window.earliest_start == until + HOUR - timedelta(hours=72)  # a start before it would end too soon
    assert window.latest_end == window.latest_start + timedelta(hours=72)
    assert window.covers
    # the 11:30 boundary of the day before the end is in the window: a capacity block or plan can start there
    assert window.earliest_start <= END - timedelta(days=1) <= window.latest_start
    longer = successor_window(
        end=END, margin=HOUR, serve_until=until, now=now, platform="sagemaker", extra_days=1
    )
    assert longer.duration_hours == 96
    assert longer.earliest_start == window.latest_start - timedelta(days=1)  # one day of starts at most


def test_too_late_or_already_covered_gives_no_successor_and_says_why() -> None:
    with pytest.raises(NoSuccessorError, match=r"too late to roll over.*rollover_lead_hours"):
        successor_window(
            end=END,
            margin=HOUR,
            serve_until=END + timedelta(days=1),
            now=END - 2 * HOUR,
            platform="sagemaker",
        )
    with pytest.raises(NoSuccessorError, match="already serves"):
        successor_window(end=END, margin=HOUR, serve_until=END - HOUR, now=NOW, platform="sagemaker")


def test_the_successor_request_spends_only_what_the_chain_has_left() -> None:
    predecessor = parse_request(
        request_body(
            serve_until="2026-12-14T10:30:00Z", approval_above_usd="6000", search_until="2026-12-05T00:00:00Z"
        ),
        now=NOW,
    )
    now = END - timedelta(hours=48)
    window = successor_window(
        end=END, margin=HOUR, serve_until=predecessor.serve_until or END, now=now, platform="sagemaker"
    )
    body = successor_request(
        predecessor,
        request_id="demo-1-r2",
        window=window,
        budget_left_usd=Decimal("4000.50"),
        serve_until=predecessor.serve_until or END,
        lead_hours=48,
        now=now,
    )
    successor = parse_request(body, now=now)  # a valid request at the lead time
    assert successor.max_upfront_fee_usd == Decimal("4000.50")
    assert successor.approval_above_usd is None  # 6000 is above what is left: it could never apply
    assert successor.rollover_of == predecessor.id
    assert successor.strategy == "reserved"
    assert successor.serve_until is None  # its window covers serve_until: nothing more to keep
    assert (successor.earliest_start, successor.duration_hours) == (
        window.earliest_start,
        window.duration_hours,
    )
    assert successor.models == predecessor.models
    assert successor.search_until is None  # bought now or never: it does not keep looking
    assert successor.approval_timeout_hours == 24  # the latest start is 45 h away
    with pytest.raises(NoSuccessorError, match="whole budget"):
        successor_request(
            predecessor,
            request_id="demo-1-r2",
            window=window,
            budget_left_usd=Decimal(0),
            serve_until=END + timedelta(days=3),
            lead_hours=48,
            now=now,
        )


def test_an_automatic_extension_waits_for_an_approver_six_hours_at_most() -> None:
    assert approval_deadline(END, 48) == END + timedelta(hours=6)
    assert approval_deadline(END, 8) == END + timedelta(hours=2)


def test_serve_until_must_reach_past_the_reservation_itself() -> None:
    body = request_body(serve_until="2026-12-05T00:00:00Z")  # the 72 h from the earliest start end later
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body, now=NOW)
    (error,) = caught.value.errors
    assert error.field == "serve_until"
    assert "serves until then anyway" in error.message
    with pytest.raises(InvalidRequest, match="365 days"):
        parse_request(request_body(serve_until="2028-01-01T00:00:00Z"), now=NOW)
    with pytest.raises(InvalidRequest, match="rollover_lead_hours"):
        parse_request(request_body(serve_until="2026-12-14T00:00:00Z", rollover_lead_hours=1), now=NOW)


def test_a_caller_cannot_name_a_successor() -> None:
    request = parse_request(request_body(rollover_of="someone-else"), now=NOW)
    with pytest.raises(InvalidRequest) as caught:
        require_not_a_successor(request)
    assert caught.value.errors[0].field == "rollover_of"


def test_the_new_fields_leave_the_ids_of_requests_without_them_unchanged() -> None:
    assert IDENTITY["ReservationRequest"]["rollover_lead_hours"].default == DEFAULT_ROLLOVER_LEAD_HOURS
    body = request_body()
    del body["request_id"]
    plain = parse_request(body, now=NOW).id
    assert parse_request({**body, "rollover_lead_hours": DEFAULT_ROLLOVER_LEAD_HOURS}, now=NOW).id == plain
    kept = parse_request({**body, "serve_until": "2026-12-20T00:00:00Z"}, now=NOW).id
    assert kept != plain
