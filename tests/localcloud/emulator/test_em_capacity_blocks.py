"""EC2 Capacity Blocks: offerings, purchase, reservations and their events, with EC2's error codes."""

from __future__ import annotations

from datetime import UTC, time, timedelta
from decimal import Decimal
from typing import Any

import pytest
import time_machine

from localcloud.emulator import Emulator, MarketConfig
from localcloud.emulator.common import RecordingSink
from tests.localcloud.emulator.support import START, Call, raises_aws, run_clock


def offerings(call: Call, **overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"InstanceType": "p5.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 48}
    params.update(overrides)
    return call("ec2", "DescribeCapacityBlockOfferings", **params)


@pytest.mark.parametrize("hours", [24, 48, 14 * 24, 21 * 24, 182 * 24])
def test_durations_are_days_up_to_14_then_weeks_up_to_182(
    aws: None, clock: time_machine.Traveller, hours: int
) -> None:
    emulator = Emulator(events=RecordingSink(), market=MarketConfig(capacity={"*": 8}))
    found = emulator.call(
        "ec2",
        "DescribeCapacityBlockOfferings",
        {
            "InstanceType": "p5.48xlarge",
            "InstanceCount": 2,
            "CapacityDurationHours": hours,
        },
        region="us-east-1",
    )["CapacityBlockOfferings"]
    assert found, hours
    assert {offering["CapacityBlockDurationHours"] for offering in found} == {hours}


@pytest.mark.parametrize("hours", [36, 15 * 24, 183 * 24, 0])
def test_other_durations_are_invalid(call: Call, hours: int) -> None:
    with raises_aws("InvalidParameterValue", f"capacity duration of {hours} hours is not supported"):
        offerings(call, CapacityDurationHours=hours)


def test_blocks_start_and_end_at_1130_utc_at_most_8_weeks_ahead(call: Call) -> None:
    found = offerings(call)["CapacityBlockOfferings"]
    assert len(found) > 20
    for offering in found:
        assert offering["StartDate"].timetz() == time(11, 30, tzinfo=UTC)
        assert offering["EndDate"].timetz() == time(11, 30, tzinfo=UTC)
        assert START < offering["StartDate"] <= START + timedelta(weeks=8)
        assert offering["Tenancy"] == "default"
        assert offering["CurrencyCode"] == "USD"


def test_at_most_64_instances(call: Call) -> None:
    with raises_aws("InvalidParameterValue", "InstanceCount must be between 1 and 64"):
        offerings(call, InstanceCount=65)


@pytest.mark.parametrize("instance_type", ["ml.p5.48xlarge", "g6.12xlarge"])
def test_only_capacity_block_instance_types(call: Call, instance_type: str) -> None:
    with raises_aws("InvalidParameterValue", "is not supported for Capacity Blocks"):
        offerings(call, InstanceType=instance_type)


def test_instance_type_is_required(call: Call) -> None:
    with raises_aws("MissingParameter", "InstanceType"):
        call("ec2", "DescribeCapacityBlockOfferings", InstanceCount=1, CapacityDurationHours=24)


def test_offerings_are_paginated(call: Call) -> None:
    everything = offerings(call)["CapacityBlockOfferings"]
    pages, token = [], None
    while True:
        page = offerings(call, MaxResults=7, **({"NextToken": token} if token else {}))
        pages.append(page["CapacityBlockOfferings"])
        token = page.get("NextToken")
        if token is None:
            break
    assert all(len(page) == 7 for page in pages[:-1])
    collected = [(item["StartDate"], item["AvailabilityZone"]) for page in pages for item in page]
    assert collected == [(item["StartDate"], item["AvailabilityZone"]) for item in everything]


def test_price_is_anchored_on_34_608_per_hour_for_p5_in_us_east_1(call: Call) -> None:
    for offering in offerings(call, InstanceCount=1, CapacityDurationHours=24)["CapacityBlockOfferings"]:
        hourly = Decimal(offering["UpfrontFee"]) / 24
        assert abs(hourly - Decimal("34.608")) / Decimal("34.608") <= Decimal("0.03")


def test_purchase_lifecycle_and_events(
    emulator: Emulator, call: Call, sink: RecordingSink, clock: time_machine.Traveller
) -> None:
    offering = offerings(call)["CapacityBlockOfferings"][0]
    bought = call(
        "ec2",
        "PurchaseCapacityBlock",
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
        TagSpecifications=[
            {"ResourceType": "capacity-reservation", "Tags": [{"Key": "request-id", "Value": "r-42"}]}
        ],
    )
    reservation = bought["CapacityReservation"]
    reservation_id = reservation["CapacityReservationId"]
    assert reservation["State"] == "payment-pending"
    assert reservation["ReservationType"] == "capacity-block"
    assert (reservation["StartDate"], reservation["EndDate"]) == (offering["StartDate"], offering["EndDate"])

    def state() -> tuple[str, int]:
        found = call(
            "ec2", "DescribeCapacityReservations", Filters=[{"Name": "tag:request-id", "Values": ["r-42"]}]
        )["CapacityReservations"]
        assert [item["CapacityReservationId"] for item in found] == [reservation_id]
        return found[0]["State"], found[0]["AvailableInstanceCount"]

    clock.shift(timedelta(minutes=5))
    assert state() == ("scheduled", 0)  # before the start, 0 available is not a failure
    steps = run_clock(emulator, clock, START + timedelta(minutes=5), offering["EndDate"] + timedelta(hours=1))
    assert steps == 2  # the block's start and its expiry warning: nothing else was due
    assert state() == ("expired", 0)
    delivered, warning = (
        sink.of_type("Capacity Block Delivered"),
        sink.of_type("Capacity Block Expiration Warning"),
    )
    assert len(delivered) == len(warning) == 1
    assert delivered[0]["source"] == "aws.ec2"
    assert delivered[0]["detail"] == {
        "capacity-reservation-id": reservation_id,
        "end-date": offering["EndDate"].strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert delivered[0]["resources"] == [reservation["CapacityReservationArn"]]
    assert [event["detail-type"] for event in sink.events] == [
        "Capacity Block Delivered",
        "Capacity Block Expiration Warning",
    ]


def test_reservation_is_active_between_start_and_end(call: Call, clock: time_machine.Traveller) -> None:
    offering = offerings(call)["CapacityBlockOfferings"][0]
    reservation_id = call(
        "ec2",
        "PurchaseCapacityBlock",
        CapacityBlockOfferingId=offering["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
    )["CapacityReservation"]["CapacityReservationId"]
    clock.move_to(offering["StartDate"])
    found = call("ec2", "DescribeCapacityReservations", CapacityReservationIds=[reservation_id])
    assert found["CapacityReservations"][0]["State"] == "active"
    assert found["CapacityReservations"][0]["AvailableInstanceCount"] == 2


def test_an_expired_offering_cannot_be_bought(call: Call, clock: time_machine.Traveller) -> None:
    offering_id = offerings(call)["CapacityBlockOfferings"][0]["CapacityBlockOfferingId"]
    clock.shift(timedelta(minutes=31))
    with raises_aws("InvalidParameterValue", "has expired or is no longer available"):
        call(
            "ec2", "PurchaseCapacityBlock", CapacityBlockOfferingId=offering_id, InstancePlatform="Linux/UNIX"
        )


def test_unknown_reservation_ids_and_filters(call: Call) -> None:
    with raises_aws("InvalidCapacityReservationId.NotFound", "cr-0000"):
        call("ec2", "DescribeCapacityReservations", CapacityReservationIds=["cr-0000"])
    with raises_aws("InvalidParameterValue", "The filter 'colour' is invalid"):
        call("ec2", "DescribeCapacityReservations", Filters=[{"Name": "colour", "Values": ["red"]}])
    assert call("ec2", "DescribeCapacityReservations")["CapacityReservations"] == []


def test_dry_run(call: Call) -> None:
    with raises_aws("DryRunOperation"):
        offerings(call, DryRun=True)
