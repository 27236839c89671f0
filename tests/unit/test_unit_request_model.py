"""The reservation request is validated at every door; each rejection names the field and the fix."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from capacity.errors import InvalidRequest
from capacity.request import parse_request

from tests.unit.unit_fakes import NOW, request_body


def rejection(body: dict[str, Any], *, now: datetime = NOW) -> dict[str, str]:
    """The field -> message map of the rejection of ``body``."""
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body, now=now)
    return {error.field: error.message for error in caught.value.errors}


def test_valid_request_is_normalised_to_utc_and_json_safe() -> None:
    # Given a request with an offset timestamp and money as a string
    body = request_body(earliest_start="2026-12-08T12:30:00+01:00")
    # When it is validated
    request = parse_request(body, now=NOW)
    # Then times are UTC, money is Decimal, and the JSON form uses Z strings and decimal strings
    assert request.earliest_start == datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
    dumped = request.model_dump(mode="json")
    assert dumped["earliest_start"] == "2026-12-08T11:30:00Z"
    assert dumped["max_upfront_fee_usd"] == "30000"
    assert json.loads(json.dumps(dumped))["request_id"] == "demo-1"


@pytest.mark.parametrize(
    ("overrides", "field", "phrase"),
    [
        ({"duration_hours": 36}, "duration_hours", "multiple of 24"),
        ({"duration_hours": 4392}, "duration_hours", "between 24 and 4368"),
        ({"instance_count": 3}, "instance_count", "1, 2, 4, 8, 16, 32, 64"),
        ({"instance_count": 128}, "instance_count", "not allowed"),
        ({"regions": ["us-east-1", "mars-north-1"]}, "regions", "mars-north-1"),
        ({"regions": ["us-east-1", "us-east-1"]}, "regions", "more than once"),
        ({"instance_type": "ml.g5.48xlarge"}, "instance_type", "ml.p5.48xlarge"),
        ({"earliest_start": "2026-12-08T11:30:00"}, "earliest_start", "time zone"),
        ({"max_upfront_fee_usd": "-5"}, "max_upfront_fee_usd", "more than 0"),
        ({"max_upfront_fee_usd": "lots"}, "max_upfront_fee_usd", "US dollars"),
        ({"surprise": True}, "surprise", "not a known field"),
        ({"request_id": "bad id with spaces"}, "request_id", "not a usable request id"),
    ],
)
def test_single_field_rejections_name_the_field(overrides: dict[str, Any], field: str, phrase: str) -> None:
    # Given a request with one bad field; When validated; Then the error names the field and the fix
    errors = rejection(request_body(**overrides))
    assert phrase in errors[field]


def test_missing_budget_says_what_to_set() -> None:
    body = request_body()
    del body["max_upfront_fee_usd"]
    errors = rejection(body)
    assert errors == {"max_upfront_fee_usd": errors["max_upfront_fee_usd"]}
    assert "budget" in errors["max_upfront_fee_usd"]


def test_window_shorter_than_duration_names_latest_end_and_the_fix() -> None:
    errors = rejection(request_body(latest_end="2026-12-10T11:30:00Z"))
    assert "shorter than duration_hours 72" in errors["latest_end"]
    assert "2026-12-11T11:30:00Z or later" in errors["latest_end"]


def test_start_in_the_past_is_rejected_at_the_door_but_not_when_re_read() -> None:
    body = request_body()
    late = datetime(2026, 12, 9, tzinfo=UTC)
    assert "in the past" in rejection(body, now=late)["earliest_start"]
    # a request already accepted is re-read from the ledger without the time check
    assert parse_request(body, now=None).request_id == "demo-1"


def test_model_that_cannot_fit_on_one_instance_names_the_requirement() -> None:
    body = request_body()
    body["models"][0]["accelerators"] = 9
    body["models"][1]["memory_mb"] = 3 * 1024 * 1024
    errors = rejection(body)
    assert "needs 9 accelerator devices but ml.p5.48xlarge has 8" in errors["models.0.accelerators"]
    assert "memory" in errors["models.1.memory_mb"]


def test_initial_copies_that_exceed_all_instances_are_rejected() -> None:
    body = request_body(instance_count=1)
    body["models"][0]["copies"] = {"initial": 2, "min": 0, "max": 2}
    errors = rejection(body)
    assert "need 12 accelerator devices but 1 x ml.p5.48xlarge have 8" in errors["models"]


def test_approval_threshold_above_budget_is_rejected() -> None:
    errors = rejection(request_body(approval_above_usd="40000"))
    assert "above the budget" in errors["approval_above_usd"]


@pytest.mark.parametrize(
    ("model_patch", "field", "phrase"),
    [
        ({"model_name": "also-set"}, "models.0", "not both"),
        ({"image": None, "model_data_url": None}, "models.0", "not both and not neither"),
        ({"name": "bad_name!"}, "models.0.name", "SageMaker's name rules"),
        ({"model_data_url": "ftp://x/y"}, "models.0.model_data_url", "s3:// or https://"),
        ({"copies": {"initial": 0, "min": 0, "max": 1}}, "models.0.copies.initial", "at least 1"),
        ({"copies": {"initial": 3, "min": 0, "max": 2}}, "models.0.copies", "min <= initial <= max"),
    ],
)
def test_model_rejections_name_the_model_field(model_patch: dict[str, Any], field: str, phrase: str) -> None:
    body = request_body()
    body["models"][0] = {**body["models"][0], **model_patch}
    assert phrase in rejection(body)[field]


def test_every_problem_is_reported_at_once() -> None:
    body = request_body(instance_count=3, duration_hours=30, regions=["nowhere-1"])
    assert set(rejection(body)) == {"instance_count", "duration_hours", "regions"}


def test_request_id_is_derived_from_the_content_when_absent() -> None:
    # Given the same content twice and a different content, all without request_id
    first = request_body()
    del first["request_id"]
    again = dict(first)
    other = {**first, "duration_hours": 48}
    # When validated
    a, b, c = (parse_request(x, now=NOW).request_id for x in (first, again, other))
    # Then the id is deterministic and content-dependent
    assert a == b
    assert a != c
    assert a is not None
    assert a.startswith("req-")
    assert len(a) == 20


def test_min_instance_count_is_zero_only_when_every_model_may_scale_to_zero() -> None:
    body = request_body()
    assert parse_request(body, now=NOW).min_instance_count == 1
    body["models"][1]["copies"] = {"initial": 1, "min": 0, "max": 2}
    assert parse_request(body, now=NOW).min_instance_count == 0


def test_non_object_request_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request([1, 2], now=NOW)  # type: ignore[arg-type]
    assert caught.value.errors[0].field == "request"


@pytest.mark.parametrize(
    ("field", "value", "phrase"),
    [
        ("instance_count", True, "must be a whole number"),
        ("instance_count", "2", "must be a whole number"),
        ("duration_hours", "72", "must be a whole number"),
        ("duration_hours", False, "must be a whole number"),
        ("dry_run", "no", "must be true or false"),
        ("dry_run", 0, "must be true or false"),
        ("earliest_start", 1796000000, "must be an ISO-8601 UTC timestamp"),
        ("latest_end", 1796000000.5, "must be an ISO-8601 UTC timestamp"),
    ],
)
def test_types_are_strict_at_the_door(field: str, value: Any, phrase: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        parse_request(request_body(**{field: value}), now=NOW)
    (error,) = raised.value.errors
    assert error.field == field
    assert error.message.startswith(phrase)


@pytest.mark.parametrize("value", ["yes", "on", "true", 1, 0, "1"])
def test_approval_decision_needs_a_json_boolean(value: Any) -> None:
    from capacity.logic.doors.api import ApprovalDecision
    from capacity.validation import parse_model

    with pytest.raises(InvalidRequest) as raised:
        parse_model(ApprovalDecision, {"approved": value, "approver": "bob"})
    assert [(e.field, e.message) for e in raised.value.errors] == [
        ("approved", "must be true or false (a JSON boolean, not a string or a number)")
    ]


PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/central-p5"


@pytest.mark.parametrize(
    ("overrides", "field", "phrase"),
    [
        ({"training_plan_arn": "central-p5"}, "training_plan_arn", "is not a training plan ARN"),
        (
            {"training_plan_arn": PLAN_ARN.replace("us-east-1", "eu-west-1")},
            "training_plan_arn",
            "add eu-west-1 to regions",
        ),
        ({"training_plan_arn": PLAN_ARN, "strategy": "on-demand-first"}, "strategy", "use strategy reserved"),
        ({"training_plan_arn": PLAN_ARN, "dry_run": True}, "dry_run", "remove dry_run"),
        ({"capacity_reservation_id": "cr-0123456789abcdef0"}, "capacity_reservation_id", "platform ec2"),
        (
            {"training_plan_arn": PLAN_ARN, "capacity_reservation_id": "cr-0123456789abcdef0"},
            "capacity_reservation_id",
            "not both",
        ),
    ],
)
def test_a_brought_reservation_that_contradicts_the_request_is_refused_naming_the_field(
    overrides: dict[str, Any], field: str, phrase: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(request_body(**overrides), now=NOW)
    said = [error.message for error in caught.value.errors if error.field == field]
    assert any(phrase in message for message in said), caught.value.errors


def test_a_brought_plan_keeps_the_request_id_of_the_same_body_without_it_apart() -> None:
    # The request id is derived from the body: naming a plan makes it another request, and leaving the new
    # fields out keeps the ids of every request sent before they existed.
    plain = parse_request(request_body(request_id=None), now=NOW)
    brought = parse_request(request_body(request_id=None, training_plan_arn=PLAN_ARN), now=NOW)
    assert plain.id != brought.id
    assert brought.brought == PLAN_ARN
    assert (brought.brought_plan_region, brought.brought_plan_name, brought.strategy) == (
        "us-east-1",
        "central-p5",
        "reserved",
    )
