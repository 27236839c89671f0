"""EC2 capacity block requests (issue 6): validation at the door, offering normalisation, durations."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import botocore.session
import pytest
from botocore.model import StringShape
from capacity.errors import InvalidRequest
from capacity.instances import INSTANCE_TYPES, TRAINING_PLAN_INSTANCE_TYPES
from capacity.logic.steps.search import block_durations
from capacity.ranking import normalise_block_offering, rank
from capacity.request import capacity_block_durations, parse_request, valid_capacity_block_hours

from tests.unit.unit_fakes import NOW, request_body


def ec2_body(**overrides: Any) -> dict[str, Any]:
    """A valid EC2 request: 2 x p5.48xlarge, 72 h, launch template by name."""
    body = request_body(
        platform="ec2", instance_type="p5.48xlarge", launch_template={"name": "gpu-workers"}, models=[]
    )
    body.pop("models")
    return {**body, **overrides}


def rejection(body: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body, now=NOW)
    return {error.field: error.message for error in caught.value.errors}


def test_a_valid_ec2_request_keeps_its_launch_template() -> None:
    request = parse_request(ec2_body(instance_count=3), now=NOW)
    assert request.platform == "ec2"
    assert request.instance_count == 3  # any count 1..64, not only powers of two
    assert request.launch_template is not None
    assert request.launch_template.as_aws() == {"LaunchTemplateName": "gpu-workers", "Version": "$Default"}


@pytest.mark.parametrize(
    ("overrides", "field", "phrase"),
    [
        ({"duration_hours": 480, "latest_end": "2026-12-30T11:30:00Z"}, "duration_hours", "480 h (20 days)"),
        ({"duration_hours": 360, "latest_end": "2026-12-30T11:30:00Z"}, "duration_hours", "360 h (15 days)"),
        ({"instance_count": 0}, "instance_count", "1 to 64"),
        ({"instance_count": 65}, "instance_count", "1 to 64"),
        (
            {"earliest_start": "2027-01-27T11:30:00Z", "latest_end": "2027-02-03T11:30:00Z"},
            "earliest_start",
            "at most 8 weeks ahead",
        ),
        (
            {"instance_type": "ml.p5.48xlarge"},
            "instance_type",
            "not an EC2 instance type sold as capacity blocks",
        ),
        ({"instance_type": "g6.12xlarge"}, "instance_type", "p5.48xlarge"),
        (
            {"launch_template": {"id": "lt-0123456789abcdef0", "name": "gpu-workers"}},
            "launch_template",
            "not both",
        ),
    ],
)
def test_invalid_ec2_requests_name_the_field_and_the_fix(
    overrides: dict[str, Any], field: str, phrase: str
) -> None:
    problems = rejection(ec2_body(**overrides))
    assert field in problems, problems
    assert phrase in problems[field]


def test_models_belong_to_sagemaker_and_launch_templates_to_ec2() -> None:
    assert "models" in rejection(ec2_body(models=request_body()["models"]))
    assert "launch_template" in rejection(request_body(launch_template={"name": "gpu-workers"}))
    assert rejection(request_body(models=[]))["models"] == "is required: list at least one model to serve"


def test_training_plan_types_are_in_botocores_enum_and_g6_is_not() -> None:
    shape = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("ReservedCapacityInstanceType")
    )
    assert isinstance(shape, StringShape)
    enum = set(shape.enum)
    assert enum >= TRAINING_PLAN_INSTANCE_TYPES
    assert not {t for t in INSTANCE_TYPES if t.startswith("ml.g6.")} & enum


def test_capacity_block_durations_are_days_to_two_weeks_then_weeks() -> None:
    assert [h for h in (24, 336, 360, 480, 504, 4368, 4392, 36) if valid_capacity_block_hours(h)] == [
        24,
        336,
        504,
        4368,
    ]
    assert capacity_block_durations(600) == [24 * d for d in range(1, 15)] + [504]


def test_block_searches_start_with_the_requested_duration_then_the_nearest() -> None:
    request = parse_request(ec2_body(), now=NOW)  # 72 h in a 6-day window
    assert block_durations(request) == [72, 48, 96, 24, 120, 144]


def test_request_ids_of_sagemaker_requests_do_not_change_with_the_new_fields() -> None:
    body = request_body()
    body.pop("request_id")
    request = parse_request(body, now=NOW)
    # the id is the hash of the fields a request had before issues 5 and 6 (no scaling, idle_policy,
    # platform, launch_template or strategy: unset or defaulted, they are left out; nor issue 17's brought
    # reservation and keep-looking fields)
    payload = request.model_dump(
        mode="json",
        exclude={
            "request_id",
            "platform",
            "launch_template",
            "strategy",
            "idle_policy",
            "team",
            "training_plan_arn",
            "capacity_reservation_id",
            "search_until",
            "search_every_minutes",
            "serve_until",
            "rollover_lead_hours",
            "rollover_of",
            "load",
            "right_size",
            "sizing",
        },
    )
    for model in payload["models"]:
        del model["scaling"]
    expected = (
        "req-"
        + hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    )
    assert request.strategy == "reserved"
    assert request.request_id == expected == "req-16afb7bd4c7140ea"


def test_a_capacity_block_offering_is_normalised_like_a_training_plan_offering() -> None:
    request = parse_request(ec2_body(), now=NOW)
    raw = {
        "CapacityBlockOfferingId": "cb-0123456789abcdef0",
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "InstanceCount": 2,
        "StartDate": datetime(2026, 12, 8, 11, 30, tzinfo=UTC),
        "EndDate": datetime(2026, 12, 11, 11, 30, tzinfo=UTC),
        "CapacityBlockDurationHours": 72,
        "UpfrontFee": "4983.55",
        "CurrencyCode": "USD",
    }
    offering = normalise_block_offering(
        raw, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
    )
    assert offering is not None
    assert offering.feasible
    assert offering.usd_per_instance_hour == Decimal("34.6080")  # the seed's capacity block price
    assert offering.on_demand_usd_per_hour == Decimal("55.0400")
    assert offering.on_demand_equivalent_usd == Decimal("7925.76")
    assert offering.saving_percent == Decimal("37.1")
    shorter = normalise_block_offering(
        {**raw, "CapacityBlockOfferingId": "cb-1", "CapacityBlockDurationHours": 48, "UpfrontFee": "3000"},
        region="us-east-1",
        request=request,
        searched_duration_hours=48,
        searched_count=2,
    )
    assert shorter is not None
    assert not shorter.feasible
    assert shorter.infeasible_reason == "48 h (requested 72 h)"
    assert [o.offering_id for o in rank([shorter, offering], request.regions)] == ["cb-0123456789abcdef0"]
    assert (
        normalise_block_offering(
            {**raw, "CurrencyCode": "EUR"},
            region="us-east-1",
            request=request,
            searched_duration_hours=72,
            searched_count=2,
        )
        is None
    )
