"""Exactly-once purchase with a fake SageMaker port; the release schedule created with it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from capacity.contracts.purchase import PurchaseInput, TrainingPlanOutput
from capacity.errors import (
    BudgetExceeded,
    ModelNotFound,
    MoneyInFlight,
    NameCollision,
    OfferingExpired,
    ReservationCancelled,
)
from capacity.lifecycle import Event
from capacity.logic.steps import buy_once
from capacity.logic.steps.purchase import purchase_capacity
from capacity.logic.wings import wing
from capacity.offerings import OfferingSummary
from capacity.ranking import normalise_offering
from capacity.record_kinds import PURCHASE, PURCHASE_INTENT
from capacity.records import State
from capacity.request import ReservationRequest, parse_request

from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, WINDOW_START, raw_offering, request_body

PLAN_NAME = "co-demo-1"


def record(h: Harness, **overrides: Any) -> ReservationRequest:
    request = parse_request(request_body(**overrides), now=NOW)
    h.ledger.record_request(request, actor="test")
    return request


def chosen(request: ReservationRequest, offering_id: str = "tpo-1", fee: str = "8000") -> OfferingSummary:
    raw = raw_offering(offering_id, fee=fee)
    offering = normalise_offering(
        raw, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
    )
    assert offering is not None
    return offering.summary()


def creates(h: Harness) -> list[dict[str, Any]]:
    return h.world.names("CreateTrainingPlan")


def test_first_purchase_buys_once_records_money_and_schedules_the_release(harness: Harness) -> None:
    # Given a recorded request and an offering found by the search
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    # When the purchase step runs
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    # Then one plan was bought, with the deterministic name and the request-id tag
    assert [c["name"] for c in creates(harness)] == [PLAN_NAME]
    assert isinstance(out, TrainingPlanOutput)
    arn = out.training_plan_arn
    assert harness.world.tags[arn] == {"capacity-orchestrator:request-id": "demo-1"}
    assert out.to_json() == {
        "platform": "sagemaker",
        "training_plan_arn": arn,
        "training_plan_name": PLAN_NAME,
        "region": "us-east-1",
        "start_time": "2026-12-09T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "upfront_fee_usd": "8000",
    }
    # And PURCHASED carries the money; the release is scheduled 60 minutes before the end
    (purchased,) = [e for e in harness.ledger.history(request.id) if e.state is State.PURCHASED]
    assert str(purchased.money_usd) == "8000.00"
    schedule = harness.scheduler.schedules["co-demo-1-release"]
    assert schedule["at"] == datetime(2026, 12, 12, 10, 30, tzinfo=UTC)
    assert schedule["reason"] == "reservation-end"
    assert harness.events.types() == ["ReservationPurchased"]
    assert any("Purchased training plan co-demo-1" in t for t in harness.slack.texts())


def test_running_the_step_again_buys_nothing_more(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    step = PurchaseInput(request_id=request.id, offering=chosen(request))
    first = purchase_capacity(step, harness.ports)
    second = purchase_capacity(step, harness.ports)
    assert second == first
    assert len(creates(harness)) == 1
    assert [e.state for e in harness.ledger.history(request.id)].count(State.PURCHASED) == 1
    assert len(harness.scheduler.schedules) == 1


def test_existing_intent_means_look_up_and_adopt_before_buying(harness: Harness) -> None:
    # Given an earlier attempt recorded the intent and bought the plan, then crashed before recording it
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    harness.ledger.put_once(
        request.id, PURCHASE_INTENT, {"region": "us-east-1", "training_plan_name": PLAN_NAME}
    )
    harness.world.client("us-east-1").create_training_plan(name=PLAN_NAME, offering_id="tpo-1", tags=[])
    harness.world.calls.clear()
    # When the step is retried
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    # Then the plan was looked up and adopted: no CreateTrainingPlan call
    assert creates(harness) == []
    assert harness.world.names("DescribeTrainingPlan")[0]["name"] == PLAN_NAME
    assert isinstance(out, TrainingPlanOutput)
    assert out.training_plan_name == PLAN_NAME
    assert harness.ledger.get(request.id, PURCHASE) is not None


def test_resource_in_use_is_adopted(harness: Harness) -> None:
    # Given the plan exists already (a crash after commit) but no intent was recorded by this attempt
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    harness.world.client("us-east-1").create_training_plan(name=PLAN_NAME, offering_id="tpo-1", tags=[])
    harness.world.calls.clear()
    # When the purchase runs, CreateTrainingPlan answers ResourceInUse
    out = purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    # Then the existing plan is adopted and recorded once
    assert len(creates(harness)) == 1
    assert isinstance(out, TrainingPlanOutput)
    assert out.training_plan_arn.endswith(f"training-plan/{PLAN_NAME}")
    assert [e.state for e in harness.ledger.history(request.id)].count(State.PURCHASED) == 1


def test_expired_offering_triggers_one_fresh_search_and_one_purchase(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings(
        "us-east-1",
        raw_offering("tpo-stale", fee="8000"),
        raw_offering("tpo-fresh", fee="8100", start=WINDOW_START + timedelta(days=2)),
    )
    harness.world.expired_ids.add("tpo-stale")
    out = purchase_capacity(
        PurchaseInput(request_id=request.id, offering=chosen(request, "tpo-stale")), harness.ports
    )
    assert [c["offering_id"] for c in creates(harness)] == ["tpo-stale", "tpo-fresh"]
    assert len(harness.world.names("SearchTrainingPlanOfferings")) == 1
    assert out.upfront_fee_usd == 8100
    purchase = harness.ledger.get(request.id, PURCHASE)
    assert purchase is not None
    assert purchase["re_searched"] is True


def test_expired_offering_with_nothing_within_budget_fails_clearly(harness: Harness) -> None:
    request = record(harness, max_upfront_fee_usd="9000")
    harness.world.add_offerings(
        "us-east-1", raw_offering("tpo-stale", fee="8000"), raw_offering("tpo-dear", fee="9500")
    )
    harness.world.expired_ids.add("tpo-stale")
    with pytest.raises(
        OfferingExpired, match=r"found no 2 x ml\.p5\.48xlarge offering for 72 h within the budget"
    ):
        purchase_capacity(
            PurchaseInput(request_id=request.id, offering=chosen(request, "tpo-stale")), harness.ports
        )
    assert [c["offering_id"] for c in creates(harness)] == ["tpo-stale"]
    assert harness.ledger.get(request.id, PURCHASE) is None


def test_re_searched_offering_above_the_approved_fee_is_not_bought(harness: Harness) -> None:
    # Given an approval threshold of $5,000 and an approved offering of $8,000 that expired
    request = record(harness, approval_above_usd="5000")
    harness.world.add_offerings(
        "us-east-1", raw_offering("tpo-stale", fee="8000"), raw_offering("tpo-x", fee="8500")
    )
    harness.world.expired_ids.add("tpo-stale")
    # When the purchase re-searches: the best fresh offering costs more than what was approved
    with pytest.raises(OfferingExpired):
        purchase_capacity(
            PurchaseInput(request_id=request.id, offering=chosen(request, "tpo-stale")), harness.ports
        )
    # Then nothing more was bought
    assert len(creates(harness)) == 1


def test_over_budget_is_never_bought(harness: Harness) -> None:
    request = record(harness, max_upfront_fee_usd="5000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    with pytest.raises(BudgetExceeded, match="above the budget"):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert creates(harness) == []
    assert harness.ledger.get(request.id, PURCHASE_INTENT) is None


def test_cancelled_reservation_is_not_bought(harness: Harness) -> None:
    request = record(harness)
    seed(harness.ledger, request.id, State.CANCELLED, actor="api")
    with pytest.raises(ReservationCancelled):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert creates(harness) == []


def test_ids_differing_in_case_or_punctuation_get_different_names() -> None:
    from capacity import naming

    assert naming.training_plan_name("eval-week-49") == "co-eval-week-49"
    other = naming.training_plan_name("Eval.Week_49")
    assert other.startswith("co-eval-week-49-")
    assert len(other) == len("co-eval-week-49-") + 8
    assert naming.endpoint_name("Eval.Week_49") != naming.endpoint_name("eval-week-49")
    assert naming.release_schedule_name("Eval.Week_49") != naming.release_schedule_name("eval-week-49")


def test_plan_tagged_for_another_request_is_never_adopted(harness: Harness) -> None:
    # Given a plan with this request's name that was bought for another request
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    harness.world.client("us-east-1").create_training_plan(
        name=PLAN_NAME,
        offering_id="tpo-1",
        tags=[{"Key": "capacity-orchestrator:request-id", "Value": "other-request"}],
    )
    # When the purchase answers ResourceInUse, then the plan is not adopted and nothing is recorded
    with pytest.raises(NameCollision, match="belongs to request 'other-request'"):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert harness.ledger.get(request.id, PURCHASE) is None
    # And on a retry (intent recorded) it is not adopted either
    with pytest.raises(NameCollision):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert harness.ledger.get(request.id, PURCHASE) is None


def test_a_model_missing_in_the_purchase_region_fails_before_any_money_is_spent(harness: Harness) -> None:
    # Issue 5: "/gpu reserve models=x" bought a plan, then failed at CreateInferenceComponent.
    request = record(harness)
    harness.world.models = {("us-west-2", "llama-us-v3")}  # exists, but not where the offering is
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    with pytest.raises(ModelNotFound, match=r"llama-us-v3 do not exist in us-east-1.*nothing was bought"):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert creates(harness) == []
    assert harness.ledger.get(request.id, PURCHASE_INTENT) is None
    assert [c["name"] for c in harness.world.names("DescribeModel")] == ["llama-us-v3"]


def test_models_given_by_image_need_no_describe_model(harness: Harness) -> None:
    body = request_body()
    body["models"] = [body["models"][0]]  # image + model_data_url only
    request = record(harness, models=body["models"])
    harness.world.models = set()
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    assert harness.world.names("DescribeModel") == []
    assert len(creates(harness)) == 1


def test_a_cancel_during_the_purchase_call_waits_for_its_money_before_the_release_begins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a cancel, and its release trying to begin, while the purchase call is in flight (soak seed 304
    # #16 once let the release finish first and the money land on a released reservation)
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    recorded = buy_once.record_purchase
    refused: list[str] = []

    def cancel_and_release_meanwhile(*args: Any, **kwargs: Any) -> dict[str, Any]:
        harness.ledger.record(request.id, Event.CANCEL, actor="alice", detail={"reason": "cancelled"})
        with pytest.raises(MoneyInFlight) as waited:
            harness.ledger.record(request.id, Event.START_RELEASE, actor="release")
        refused.append(str(waited.value))
        return recorded(*args, **kwargs)

    monkeypatch.setattr(buy_once, "record_purchase", cancel_and_release_meanwhile)
    # When the purchase step goes on after its call
    with pytest.raises(ReservationCancelled):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=chosen(request)), harness.ports)
    # Then the release waited for the money, which is recorded (after the cancel), and is asked again
    assert refused == ["reservation demo-1: money in flight (purchase); start-release waits for it"]
    seen = [e.state for e in harness.ledger.history(request.id)]
    assert seen == [State.REQUESTED, State.CANCELLED, State.PURCHASED], seen
    (purchased,) = [e for e in harness.ledger.history(request.id) if e.state is State.PURCHASED]
    assert str(purchased.money_usd) == "8000.00"
    assert "ReleaseRequested" in harness.events.types()
    assert harness.ledger.record(request.id, Event.START_RELEASE, actor="release") is not None


def test_adopting_a_brought_plan_after_a_cancel_records_no_purchased(harness: Harness) -> None:
    # A brought plan's PURCHASE item is recorded, then a cancel and its release finish before the step's
    # after-purchase part runs (a retry on a fault: soak seed 529 #55). Nothing was paid, so nothing is
    # recorded after the cancel: PURCHASED would follow RELEASED and stay the reservation's last state.
    paid = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    purchase_capacity(PurchaseInput(request_id=paid.id, offering=chosen(paid)), harness.ports)
    item = harness.ledger.get(paid.id, PURCHASE)
    assert item is not None
    brought = record(harness, request_id="demo-2")
    brought_item = dict(item) | {"request_id": brought.id, "brought": True, "upfront_fee_usd": "0"}
    harness.ledger.record(brought.id, Event.CANCEL, actor="test")
    with pytest.raises(ReservationCancelled):
        buy_once.after_purchase(wing("sagemaker").buyer, brought, brought_item, harness.ports, first=True)
    assert [e.state for e in harness.ledger.history(brought.id)][-1] is State.CANCELLED
    assert not any("demo-2" in text and "Purchased" in text for text in harness.slack.texts())
