"""Exactly-once PurchaseCapacityBlock with a fake EC2 port (issue 6): intent first, tag, adopt first."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.adapters.ec2 import LaunchTemplateVersion
from capacity.contracts.activation import ActivationInput
from capacity.contracts.common import StepError
from capacity.contracts.notify import NotifyInput
from capacity.contracts.purchase import CapacityBlockOutput, PurchaseInput
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.errors import BudgetExceeded, OfferingExpired, PlanFailed, RetryableAwsError
from capacity.lifecycle import Event
from capacity.logic.doors.api import get_reservation
from capacity.logic.steps.activation import wait_for_activation
from capacity.logic.steps.common import load_purchase
from capacity.logic.steps.notify import notify
from capacity.logic.steps.purchase import purchase_capacity
from capacity.logic.steps.release import release_capacity
from capacity.offerings import OfferingSummary
from capacity.ports import Ports
from capacity.purchases import OnDemandInstancesPurchase
from capacity.record_kinds import PURCHASE, PURCHASE_INTENT, PURCHASE_VOIDED
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from capacity.resources import CapacityReservation, Extension, Instance

from tests.unit.conftest import Harness
from tests.unit.test_unit_ec2_requests import ec2_body
from tests.unit.unit_fakes import NOW

START = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)
END = datetime(2026, 12, 12, 11, 30, tzinfo=UTC)


class FakeEc2:
    """Capacity blocks in one region; ``timeout_after_commit`` makes the next purchase commit, then fail."""

    region = "us-east-1"

    def __init__(self) -> None:
        self.reservations: list[CapacityReservation] = []
        self.purchases: list[str] = []
        self.timeout_after_commit = False

    def purchase_capacity_block(
        self, *, offering_id: str, tags: Sequence[Mapping[str, str]], platform: str = "Linux/UNIX"
    ) -> CapacityReservation:
        self.purchases.append(offering_id)
        reservation = CapacityReservation(
            reservation_id=f"cr-{len(self.purchases):017d}",
            arn=f"arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-{len(self.purchases):017d}",
            state="payment-pending",
            instance_type="p5.48xlarge",
            availability_zone="us-east-1a",
            total_instance_count=2,
            available_instance_count=0,
            start_time=START,
            end_time=END,
            tags={tag["Key"]: tag["Value"] for tag in tags},
        )
        self.reservations.append(reservation)
        if self.timeout_after_commit:
            self.timeout_after_commit = False
            raise RetryableAwsError("EC2 PurchaseCapacityBlock (us-east-1): ReadTimeoutError after retries")
        return reservation

    def find_capacity_reservations(self, request_id: str) -> list[CapacityReservation]:
        return [r for r in self.reservations if r.tags.get("capacity-orchestrator:request-id") == request_id]

    def describe_capacity_reservation(self, reservation_id: str) -> CapacityReservation | None:
        return next((r for r in self.reservations if r.reservation_id == reservation_id), None)

    def describe_block_extension_offerings(self, reservation_id: str, hours: int) -> list[Extension]:
        return []  # extensions are tested on the local cloud (tests/integration/test_extensions.py)

    def purchase_block_extension(self, *, offering_id: str, reservation_id: str) -> Extension:
        raise OfferingExpired(f"no extension offering {offering_id} in the fake")

    def block_extension_history(self, reservation_id: str) -> list[Extension]:
        return []

    def describe_capacity_block_offerings(self, **kwargs: Any) -> list[dict[str, Any]]:
        return []

    def run_instances(self, **kwargs: Any) -> list[str]:
        return []

    def find_instances(self, request_id: str) -> list[Instance]:
        return []

    def terminate_instances(self, instance_ids: Sequence[str]) -> None:
        return None

    def launch_template_version(self, launch_template: Mapping[str, str]) -> LaunchTemplateVersion | None:
        return LaunchTemplateVersion("lt-0123456789abcdef0", "gpu-workers", 1, None)

    def tagged_capacity_reservations(self) -> list[CapacityReservation]:
        return [r for r in self.reservations if "capacity-orchestrator:request-id" in r.tags]


def ports_with(h: Harness, ec2: FakeEc2) -> Ports:
    return Ports(
        h.ports.settings,
        ledger=h.ledger,
        offerings=h.ports.offerings,
        events=h.events,
        scheduler=h.scheduler,
        tasks=h.tasks,
        slack=h.slack,
        clock=h.clock,
        ec2=lambda region: ec2,
    )


def record(h: Harness) -> ReservationRequest:
    request = parse_request(ec2_body(), now=NOW)
    h.ledger.record_request(request, actor="test")
    return request


def offering(fee: str = "4983.55") -> OfferingSummary:
    return OfferingSummary(
        offering_id="cb-0123456789abcdef0",
        region="us-east-1",
        availability_zone="us-east-1a",
        instance_type="p5.48xlarge",
        instance_count=2,
        start_time=START,
        end_time=END,
        duration_hours=72,
        upfront_fee_usd=Decimal(fee),
    )


def test_a_purchase_tags_the_block_records_the_money_and_schedules_the_release(harness: Harness) -> None:
    ec2 = FakeEc2()
    request = record(harness)
    out = purchase_capacity(
        PurchaseInput(request_id=request.id, offering=offering()), ports_with(harness, ec2)
    )
    assert ec2.purchases == ["cb-0123456789abcdef0"]
    assert ec2.reservations[0].tags == {"capacity-orchestrator:request-id": "demo-1"}
    assert isinstance(out, CapacityBlockOutput)
    assert out.capacity_reservation_id == "cr-00000000000000001"
    item = harness.ledger.get(request.id, PURCHASE)
    assert item is not None
    # The block in its own names, never in a training plan's
    assert (item["kind"], item["platform"], item["market"]) == ("capacity-block", "ec2", "reserved")
    assert item["capacity_reservation_id"] == "cr-00000000000000001"
    assert item["capacity_reservation_arn"] == ec2.reservations[0].arn
    assert item["availability_zone"] == "us-east-1a"
    assert not {"training_plan_arn", "training_plan_name"} & set(item)
    (purchased,) = [e for e in harness.ledger.history(request.id) if e.state is State.PURCHASED]
    assert purchased.money_usd == Decimal("4983.55")
    # 60 minutes before the end (the margin is above the 35-minute floor)
    assert harness.scheduler.schedules["co-demo-1-release"]["at"] == datetime(
        2026, 12, 12, 10, 30, tzinfo=UTC
    )


def test_a_timeout_after_the_commit_adopts_the_tagged_block_instead_of_buying_again(harness: Harness) -> None:
    ec2 = FakeEc2()
    ec2.timeout_after_commit = True
    request = record(harness)
    out = purchase_capacity(
        PurchaseInput(request_id=request.id, offering=offering()), ports_with(harness, ec2)
    )
    assert len(ec2.purchases) == 1
    assert isinstance(out, CapacityBlockOutput)
    assert out.capacity_reservation_id == ec2.reservations[0].reservation_id


def test_a_retry_after_a_crash_between_purchase_and_record_adopts_the_block(harness: Harness) -> None:
    ec2 = FakeEc2()
    request = record(harness)
    # An earlier attempt recorded its intent and bought the block, then died before recording PURCHASE.
    harness.ledger.put_once(request.id, PURCHASE_INTENT, {"actor": "earlier", "region": "us-east-1"})
    ec2.purchase_capacity_block(
        offering_id="cb-0123456789abcdef0",
        tags=[{"Key": "capacity-orchestrator:request-id", "Value": request.id}],
    )
    purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports_with(harness, ec2))
    assert len(ec2.purchases) == 1  # only the earlier attempt's
    assert harness.ledger.get(request.id, PURCHASE) is not None


def test_an_offering_above_the_budget_is_never_bought(harness: Harness) -> None:
    ec2 = FakeEc2()
    request = record(harness)
    with pytest.raises(BudgetExceeded):
        purchase_capacity(
            PurchaseInput(request_id=request.id, offering=offering("30001")), ports_with(harness, ec2)
        )
    assert ec2.purchases == []
    assert harness.ledger.get(request.id, PURCHASE_INTENT) is None


def test_the_block_is_named_in_its_own_words_on_the_bus_and_polled_by_its_id(harness: Harness) -> None:
    # Given a capacity block bought
    ec2 = FakeEc2()
    ports = ports_with(harness, ec2)
    request = record(harness)
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)

    # Then ReservationPurchased (version 2) names the block as EC2 does, never as a training plan
    (detail,) = [detail for kind, detail in harness.events.puts if kind == "ReservationPurchased"]
    assert detail == {
        "schema_version": 2,
        "request_id": request.id,
        "platform": "ec2",
        "capacity_reservation_arn": ec2.reservations[0].arn,
        "capacity_reservation_id": "cr-00000000000000001",
        "availability_zone": "us-east-1a",
        "region": "us-east-1",
        "start_time": "2026-12-09T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "upfront_fee_usd": "4983.55",
    }

    # When the workflow polls it with the purchase's output (CheckPayment: $.purchase)
    step = ActivationInput.model_validate(
        {"request_id": request.id, "platform": "ec2", "purchase": out.to_json()}
    )
    polled = wait_for_activation(step, ports)

    # Then the block is read by its id (payment-pending reads as the plan's Pending)
    assert polled.status == "Pending"
    assert step.capacity_block().capacity_reservation_id == "cr-00000000000000001"


def test_an_activation_input_from_before_issue_28_reads_the_block_id_it_named_a_plan(
    harness: Harness,
) -> None:
    # Given an execution started on a definition that passed the block's id as training_plan_name
    ec2 = FakeEc2()
    ports = ports_with(harness, ec2)
    request = record(harness)
    purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)
    step = ActivationInput.model_validate(
        {
            "request_id": request.id,
            "platform": "ec2",
            "region": "us-east-1",
            "training_plan_name": "cr-00000000000000001",
        }
    )

    # When it polls / Then the block it named is read
    assert wait_for_activation(step, ports).status == "Pending"


def test_a_block_purchase_recorded_before_issue_28_still_reads_in_its_own_words(harness: Harness) -> None:
    # Given a PURCHASE item of a block recorded with the training plan's field names
    request = record(harness)
    arn = "arn:aws:ec2:us-east-1:123456789012:capacity-reservation/cr-00000000000000007"
    harness.ledger.put_once(
        request.id,
        PURCHASE,
        {
            "platform": "ec2",
            "training_plan_arn": arn,
            "training_plan_name": "cr-00000000000000007",
            "capacity_reservation_id": "cr-00000000000000007",
            "availability_zone": "us-east-1b",
            "region": "us-east-1",
            "start_time": "2026-12-09T11:30:00Z",
            "end_time": "2026-12-12T11:30:00Z",
            "upfront_fee_usd": "4983.55",
            "offering_id": "cb-0123456789abcdef0",
            "instance_type": "p5.48xlarge",
            "instance_count": 2,
            "re_searched": False,
        },
    )

    # When the steps and the API read it
    purchase = load_purchase(harness.ports, request.id)
    shown = get_reservation(request.id, harness.ports)["purchase"]

    # Then it is a capacity block, named as EC2 names it
    assert purchase is not None
    block = purchase.capacity_block()
    assert (block.capacity_reservation_arn, block.capacity_reservation_id) == (arn, "cr-00000000000000007")
    assert shown == {
        "kind": "capacity-block",
        "platform": "ec2",
        "market": "reserved",
        "capacity_reservation_arn": arn,
        "capacity_reservation_id": "cr-00000000000000007",
        "availability_zone": "us-east-1b",
        "region": "us-east-1",
        "start_time": "2026-12-09T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "upfront_fee_usd": "4983.55",
        "brought": False,
    }


def test_an_on_demand_purchase_recorded_before_issue_28_drops_its_empty_plan_names(harness: Harness) -> None:
    # Given an on-demand PURCHASE item of EC2 instances recorded with empty training plan fields
    request = record(harness)
    harness.ledger.put_once(
        request.id,
        PURCHASE,
        {
            "platform": "ec2",
            "market": "spot",
            "training_plan_arn": "",
            "training_plan_name": "",
            "capacity_reservation_id": "",
            "availability_zone": "",
            "region": "us-east-1",
            "start_time": "2026-12-09T11:30:00Z",
            "end_time": "2026-12-12T11:30:00Z",
            "upfront_fee_usd": "0",
            "on_demand_usd_per_hour": None,
            "instance_type": "p5.48xlarge",
            "instance_count": 2,
            "instance_ids": ["i-0123456789abcdef0"],
        },
    )

    # When it is read / Then it is spot instances, with no reservation's name
    purchase = load_purchase(harness.ports, request.id)
    assert purchase is not None
    assert isinstance(purchase.record, OnDemandInstancesPurchase)
    assert (purchase.market, purchase.instance_ids, purchase.name) == ("spot", ["i-0123456789abcdef0"], "")
    shown = get_reservation(request.id, harness.ports)["purchase"]
    assert not {"training_plan_name", "capacity_reservation_id"} & set(shown)


def test_a_block_not_listed_yet_after_its_purchase_is_waited_for_not_failed(harness: Harness) -> None:
    # Given a block just bought, which DescribeCapacityReservations does not show yet (EC2's reads are
    # eventually consistent, AWS_FACTS.md "Payments, listings, limits"; issue 29 point 1)
    ec2 = FakeEc2()
    request = record(harness)
    ports = ports_with(harness, ec2)
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)
    ec2.reservations.clear()  # the listing lags behind the purchase
    step = ActivationInput.model_validate(
        {"request_id": request.id, "platform": "ec2", "purchase": out.to_json()}
    )
    # When the payment is checked right after the purchase, then it waits: the block is paid for
    assert wait_for_activation(step, ports).status == "Pending"
    assert not [e for e in harness.ledger.history(request.id) if e.state is State.FAILED]
    # And a block still not found 12 hours after its purchase fails as a payment that never came
    harness.clock.now += timedelta(hours=12, minutes=1)
    with pytest.raises(PlanFailed, match="not visible"):
        wait_for_activation(step, ports)


def _set_state(ec2: FakeEc2, state: str) -> None:
    ec2.reservations[:] = [dataclasses.replace(r, state=state) for r in ec2.reservations]


def test_a_block_cancelled_while_its_payment_is_pending_is_released_with_what_the_payment_became(
    harness: Harness,
) -> None:
    # Given a block bought, then cancelled while EC2 still processes its payment (soak seed 601 #74)
    ec2 = FakeEc2()
    request = record(harness)
    ports = ports_with(harness, ec2)
    purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)
    harness.ledger.record(request.id, Event.CANCEL, actor="test", detail={"reason": "cancelled"})

    def release(action: str) -> ReleaseOutput:
        step = ReleaseInput.model_validate(
            {"request_id": request.id, "action": action, "reason": "cancelled"}
        )
        return release_capacity(step, ports)

    # When the release begins while the payment is pending, then it waits for it (nothing to delete yet)
    waiting = release("begin")
    assert waiting.payment_wait_seconds > 0
    assert State.RELEASING not in [e.state for e in harness.ledger.history(request.id)]
    # And once the payment failed, AWS charged nothing: the release records the fee coming back
    harness.clock.now += timedelta(minutes=10)
    _set_state(ec2, "payment-failed")
    assert release("begin").payment_wait_seconds == 0
    for action in ("delete_components", "finish"):
        release(action)
    history = harness.ledger.history(request.id)
    assert history[-1].state is State.RELEASED
    assert sum((e.money_usd or Decimal(0)) for e in history) == Decimal(0)
    assert harness.ledger.get(request.id, PURCHASE_VOIDED) is not None


def test_a_block_released_once_paid_keeps_its_fee(harness: Harness) -> None:
    ec2 = FakeEc2()
    request = record(harness)
    ports = ports_with(harness, ec2)
    purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)
    _set_state(ec2, "scheduled")
    for action in ("begin", "delete_components", "finish"):
        release_capacity(
            ReleaseInput.model_validate({"request_id": request.id, "action": action, "reason": "cancelled"}),
            ports,
        )
    history = harness.ledger.history(request.id)
    assert history[-1].state is State.RELEASED
    assert sum((e.money_usd or Decimal(0)) for e in history) == Decimal("4983.55")


@pytest.mark.parametrize("notify_dies", [True, False])
def test_a_failed_payment_is_refunded_once_whichever_records_it_first(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, notify_dies: bool
) -> None:
    # Soak seed 602 #188: the failure's notify and the release both recorded the refund (-$4,075.78 in all).
    # Whether the notify dies before its FAILED (the release's RELEASED then gives the fee back) or records
    # it first (RELEASED then gives nothing), the fee comes back once.
    ec2 = FakeEc2()
    request = record(harness)
    ports = ports_with(harness, ec2)
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=offering()), ports)
    _set_state(ec2, "payment-failed")
    step = ActivationInput.model_validate(
        {"request_id": request.id, "platform": "ec2", "purchase": out.to_json()}
    )
    with pytest.raises(PlanFailed):
        wait_for_activation(step, ports)  # records the purchase voided
    error = StepError(
        Error="PlanFailed", Cause='{"errorMessage": "payment-failed", "errorType": "PlanFailed"}'
    )
    failure = NotifyInput(kind="failure", request_id=request.id, error=error)
    recorded = harness.ledger.record

    def dies_before_failed(request_id: str, event: Event, **kwargs: Any) -> Any:
        if event is Event.FAIL:
            raise RetryableAwsError("Sandbox.Timedout")  # the notify Lambda stops here
        return recorded(request_id, event, **kwargs)

    if notify_dies:
        monkeypatch.setattr(harness.ledger, "record", dies_before_failed)
        with pytest.raises(RetryableAwsError):
            notify(failure, ports)
        monkeypatch.setattr(harness.ledger, "record", recorded)
    else:
        notify(failure, ports)
    for action in ("begin", "delete_components", "finish"):
        release_capacity(
            ReleaseInput.model_validate({"request_id": request.id, "action": action, "reason": "failed"}),
            ports,
        )
    notify(failure, ports)  # Step Functions retries the notify
    history = harness.ledger.history(request.id)
    assert history[-1].state is State.RELEASED
    assert (State.FAILED in [e.state for e in history]) is not notify_dies
    assert [e.money_usd for e in history if e.money_usd is not None and e.money_usd < 0] == [
        Decimal("-4983.55")
    ]
    assert sum((e.money_usd or Decimal(0)) for e in history) == Decimal(0)
