"""Workflow steps with fakes: search, choose, activation, endpoint and inference components, notify."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from capacity.contracts.activation import ActivationInput
from capacity.contracts.common import StepError
from capacity.contracts.finding import ChooseInput, SearchInput, SearchOutput
from capacity.contracts.notify import NotifyInput
from capacity.contracts.on_demand import OnDemandInput
from capacity.contracts.purchase import PurchaseInput
from capacity.contracts.serving import ComponentsInput, EndpointInput
from capacity.errors import (
    ActivationTimeout,
    ComponentFailed,
    EndpointFailed,
    NameCollision,
    PlanFailed,
    ReservationCancelled,
    ResourceBusy,
    RetryableAwsError,
)
from capacity.lifecycle import Event
from capacity.logic.doors.api import cancel_reservation
from capacity.logic.sagemaker.deploy import create_endpoint, create_inference_components
from capacity.logic.steps import on_demand_record
from capacity.logic.steps.activation import wait_for_activation
from capacity.logic.steps.choose import choose_offering
from capacity.logic.steps.intake import record_request
from capacity.logic.steps.notify import notify, readable_reason
from capacity.logic.steps.on_demand import try_on_demand
from capacity.logic.steps.purchase import purchase_capacity
from capacity.logic.steps.search import search_offerings
from capacity.record_kinds import APPROVAL, USAGE
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from pydantic import ValidationError

from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, WINDOW_START, raw_offering, request_body


def record(h: Harness, **overrides: Any) -> ReservationRequest:
    request = parse_request(request_body(**overrides), now=NOW)
    h.ledger.record_request(request, actor="test")
    return request


def states(h: Harness, request_id: str = "demo-1") -> list[State]:
    return [e.state for e in h.ledger.history(request_id)]


def search_all(h: Harness, request: ReservationRequest) -> list[SearchOutput]:
    return [search_offerings(SearchInput(request_id=request.id, region=r), h.ports) for r in request.regions]


def bought(h: Harness, **overrides: Any) -> ReservationRequest:
    """A request whose plan was bought (fee $8,000, 2026-12-09 11:30 to 12-12 11:30)."""
    request = record(h, **overrides)
    h.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_all(h, request)
    plan = choose_offering(ChooseInput(request_id=request.id), h.ports)
    assert plan.offering is not None
    purchase_capacity(PurchaseInput(request_id=request.id, offering=plan.offering), h.ports)
    return request


# ----------------------------------------------------------------------------------------- search


def test_search_covers_requested_and_neighbouring_durations_and_stores_offerings(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-72", fee="8000"))
    harness.world.add_offerings("us-east-1", raw_offering("tpo-48", fee="5000", hours=48), duration=48)
    out = search_offerings(SearchInput(request_id=request.id, region="us-east-1"), harness.ports)
    assert out.to_json() == {"region": "us-east-1", "count": 2, "feasible": 1, "quota_error": None}
    searched = [(c["duration"], c["count"]) for c in harness.world.names("SearchTrainingPlanOfferings")]
    assert searched == [(72, 2), (48, 2), (96, 2)]
    assert {o.offering_id for o in harness.ports.offerings.list(request.id)} == {"tpo-72", "tpo-48"}


def test_nothing_feasible_also_searches_half_the_count(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings(
        "us-west-2", raw_offering("tpo-1x", fee="4000", count=1, zone="us-west-2b"), count=1
    )
    out = search_offerings(SearchInput(request_id=request.id, region="us-west-2"), harness.ports)
    assert out.feasible == 0
    assert out.count == 1
    assert (72, 1) in [
        (c["duration"], c["count"]) for c in harness.world.names("SearchTrainingPlanOfferings")
    ]


def test_quota_error_is_reported_not_raised(harness: Harness) -> None:
    request = record(harness)
    harness.world.quota_regions.add("us-west-2")
    out = search_offerings(SearchInput(request_id=request.id, region="us-west-2"), harness.ports)
    assert out.quota_error is not None
    assert "ResourceLimitExceeded" in out.quota_error
    assert out.count == 0


# ----------------------------------------------------------------------------------------- choose


def test_choose_purchase_records_planned_posts_table_and_event(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings(
        "us-east-1", raw_offering("tpo-1", fee="8000"), raw_offering("tpo-2", fee="9000")
    )
    searches = search_all(harness, request)
    out = choose_offering(ChooseInput(request_id=request.id, searches=searches), harness.ports)
    assert out.decision == "PURCHASE"
    assert out.approval_timeout_seconds == 86400
    assert out.to_json()["offering"] == {
        "offering_id": "tpo-1",
        "region": "us-east-1",
        "availability_zone": "us-east-1a",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 2,
        "start_time": "2026-12-09T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "duration_hours": 72,
        "upfront_fee_usd": "8000",
    }
    assert states(harness) == [State.REQUESTED, State.PLANNED]
    planned = harness.ledger.history(request.id)[-1]
    assert [o["offering_id"] for o in planned.detail["top"]] == ["tpo-1", "tpo-2"]
    table, decision = harness.slack.texts()
    assert "Upfront fee" in table
    assert "$8,000.00" in table
    assert "On-demand eq." in table
    assert decision.startswith("*Decision for demo-1: PURCHASE*")
    assert harness.events.types() == ["ReservationPlanned"]


def test_choose_is_idempotent_on_retry(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_all(harness, request)
    first = choose_offering(ChooseInput(request_id=request.id), harness.ports)
    second = choose_offering(ChooseInput(request_id=request.id), harness.ports)
    assert first == second
    assert states(harness) == [State.REQUESTED, State.PLANNED]
    assert len(harness.slack.messages) == 2


def test_no_offering_records_failed_with_alternatives(harness: Harness) -> None:
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-48", fee="5000", hours=48), duration=48)
    searches = search_all(harness, request)
    out = choose_offering(ChooseInput(request_id=request.id, searches=searches), harness.ports)
    assert out.decision == "NO_OFFERING"
    assert out.offering is None
    failed = harness.ledger.history(request.id)[-1]
    assert failed.state is State.FAILED
    assert failed.detail["alternatives"][0]["offering_id"] == "tpo-48"
    assert "Nearest alternatives" in failed.detail["reason"]
    assert harness.events.types() == ["ReservationPlanned", "ReservationFailed"]


def test_quota_only_says_quota(harness: Harness) -> None:
    request = record(harness, regions=["us-west-2"])
    harness.world.quota_regions.add("us-west-2")
    searches = search_all(harness, request)
    out = choose_offering(ChooseInput(request_id=request.id, searches=searches), harness.ports)
    assert out.decision == "NO_OFFERING"
    assert "Quota exceeded in us-west-2" in out.reason


def test_over_budget_records_planned_then_rejected(harness: Harness) -> None:
    request = record(harness, max_upfront_fee_usd="7000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    out = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    assert out.decision == "REJECTED"
    assert states(harness) == [State.REQUESTED, State.PLANNED, State.REJECTED]


def test_dry_run_records_planned_only(harness: Harness) -> None:
    request = record(harness, dry_run=True)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    out = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    assert out.decision == "DRY_RUN"
    assert states(harness) == [State.REQUESTED, State.PLANNED]


def test_choose_output_stays_small_with_500_offerings(harness: Harness) -> None:
    import json

    request = record(harness)
    items = [
        raw_offering(f"tpo-{i:03d}", fee=str(8000 + i), start=WINDOW_START + timedelta(hours=i % 72))
        for i in range(500)
    ]
    harness.world.add_offerings("us-east-1", *items)
    searches = search_all(harness, request)
    out = choose_offering(ChooseInput(request_id=request.id, searches=searches), harness.ports)
    encoded = json.dumps(out.to_json())
    assert searches[0].count == 500
    assert len(encoded) < 2_000
    assert len(json.dumps([s.to_json() for s in searches])) < 1_000


# ------------------------------------------------------------------------------------- activation


def poll_step(request_id: str) -> ActivationInput:
    """The activation poll of the plan ``co-<request_id>`` the reserve workflow makes: the purchase step's
    output at ``$.purchase``."""
    purchase = {
        "platform": "sagemaker",
        "training_plan_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/co-{request_id}",
        "training_plan_name": f"co-{request_id}",
        "region": "us-east-1",
        "start_time": "2026-12-09T11:30:00Z",
        "end_time": "2026-12-12T11:30:00Z",
        "upfront_fee_usd": "8000",
    }
    return ActivationInput.model_validate(
        {"request_id": request_id, "platform": "sagemaker", "purchase": purchase}
    )


def test_an_activation_input_from_before_issue_28_still_polls_its_plan(harness: Harness) -> None:
    # Given an execution started on a definition that passed the plan's region and name, not the purchase
    request = bought(harness)
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Scheduled")
    step = ActivationInput.model_validate(
        {"request_id": request.id, "region": "us-east-1", "training_plan_name": "co-demo-1", "attempt": 0}
    )
    # When it polls / Then the plan it names is read
    assert wait_for_activation(step, harness.ports).status == "Scheduled"
    assert step.training_plan().training_plan_name == "co-demo-1"


def test_an_activation_input_names_a_reservation() -> None:
    with pytest.raises(ValidationError, match="purchase is required"):
        ActivationInput.model_validate({"request_id": "demo-1", "attempt": 0})


def test_activation_polls_with_growing_waits_and_records_scheduled_once(harness: Harness) -> None:
    request = bought(harness)
    sm = harness.world.client("us-east-1")
    sm.set_plan_status("co-demo-1", "Scheduled")
    step = poll_step(request.id)
    waits = []
    for attempt in (0, 1, 5):
        out = wait_for_activation(step.model_copy(update={"attempt": attempt}), harness.ports)
        waits.append((out.status, out.attempt, out.next_wait_seconds))
    assert waits == [("Scheduled", 1, 60), ("Scheduled", 2, 120), ("Scheduled", 6, 900)]
    assert states(harness).count(State.SCHEDULED) == 1


def test_activation_records_active_and_puts_the_event(harness: Harness) -> None:
    request = bought(harness)
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Active")
    harness.clock.now = WINDOW_START + timedelta(days=1, minutes=1)
    step = poll_step(request.id)
    out = wait_for_activation(step, harness.ports)
    assert out.status == "Active"
    assert states(harness)[-2:] == [State.SCHEDULED, State.ACTIVE]
    assert harness.ledger.history(request.id)[-2].detail["observed"] is False
    (active,) = [detail for kind, detail in harness.events.puts if kind == "ReservationActive"]
    assert (active["schema_version"], active["platform"], active["training_plan_name"]) == (
        2,
        "sagemaker",
        "co-demo-1",
    )


def test_an_active_plans_in_use_instance_count_is_recorded_for_the_cost_report(harness: Harness) -> None:
    request = bought(harness)
    sm = harness.world.client("us-east-1")
    sm.set_plan_status("co-demo-1", "Scheduled")
    step = poll_step(request.id)
    wait_for_activation(step, harness.ports)
    assert harness.ledger.items(request.id, f"{USAGE}#") == []  # only an Active plan's count is recorded
    plan = harness.world.plans["co-demo-1"]
    harness.world.plans["co-demo-1"] = replace(plan, status="Active", in_use_instance_count=1)
    harness.clock.now = WINDOW_START + timedelta(days=1, minutes=1)
    wait_for_activation(step, harness.ports)
    (usage,) = harness.ledger.items(request.id, f"{USAGE}#")
    assert (usage["instances"], usage["source"]) == (1, "training-plan")
    assert usage["sk"].startswith("USAGE#2026-12-09T11:31:00.000Z#")


def test_failed_plan_raises_plan_failed(harness: Harness) -> None:
    request = bought(harness)
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Failed", "payment declined")
    step = poll_step(request.id)
    with pytest.raises(PlanFailed, match="co-demo-1 is Failed: payment declined"):
        wait_for_activation(step, harness.ports)


def test_payment_still_pending_twelve_hours_after_purchase_fails_the_plan(harness: Harness) -> None:
    request = bought(harness)
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Pending")
    step = poll_step(request.id)
    assert wait_for_activation(step, harness.ports).status == "Pending"
    harness.clock.now += timedelta(hours=12, minutes=1)
    with pytest.raises(PlanFailed, match=r"still Pending \(payment\).*more than 12 hours after its purchase"):
        wait_for_activation(step, harness.ports)


def test_activation_deadline_is_start_plus_two_hours(harness: Harness) -> None:
    request = bought(harness)
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Scheduled")
    harness.clock.now = WINDOW_START + timedelta(days=1, hours=2, minutes=1)
    step = poll_step(request.id)
    with pytest.raises(ActivationTimeout, match="more than 2 hours after its start"):
        wait_for_activation(step, harness.ports)


# ------------------------------------------------------------------------------- endpoint and ICs


def test_endpoint_config_targets_the_plan_without_model_name(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    out = create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    assert out.to_json() == {
        "endpoint_name": "co-demo-1",
        "status": "Creating",
        "next_wait_seconds": 30,
        "attempt": 1,
    }
    (config,) = harness.world.names("CreateEndpointConfig")
    variant = config["variant"]
    assert "ModelName" not in variant
    assert variant["CapacityReservationConfig"]["MlReservationArn"].endswith("training-plan/co-demo-1")
    assert variant["ManagedInstanceScaling"] == {
        "Status": "ENABLED",
        "MinInstanceCount": 1,
        "MaxInstanceCount": 2,
    }
    assert config["role"] == "arn:aws:iam::123456789012:role/sagemaker-endpoint"
    assert states(harness)[-1] is State.DEPLOYING
    # a retry adopts what exists
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    assert len(harness.world.names("CreateEndpoint")) == 1


def test_endpoint_status_backs_off_and_fails_with_the_reason(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    out = create_endpoint(EndpointInput(request_id=request.id, action="status", attempt=4), harness.ports)
    assert (out.status, out.next_wait_seconds, out.attempt) == ("Creating", 300, 5)
    harness.world.client("us-east-1").set_endpoint_status("co-demo-1", "Failed", "capacity not available")
    with pytest.raises(EndpointFailed, match="capacity not available"):
        create_endpoint(EndpointInput(request_id=request.id, action="status"), harness.ports)


def test_endpoint_creating_past_the_deadline_fails(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    harness.clock.advance(minutes=91)
    with pytest.raises(EndpointFailed, match="90 minutes"):
        create_endpoint(EndpointInput(request_id=request.id, action="status"), harness.ports)


def test_components_wait_for_the_endpoint_then_become_ready(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    sm = harness.world.client("us-east-1")
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    with pytest.raises(ResourceBusy):
        create_inference_components(ComponentsInput(request_id=request.id, action="create"), harness.ports)
    sm.set_endpoint_status("co-demo-1", "InService")
    out = create_inference_components(ComponentsInput(request_id=request.id, action="create"), harness.ports)
    assert out.component_names == ["co-demo-1-llama-eu", "co-demo-1-llama-us"]
    assert harness.world.component_specs["co-demo-1-llama-eu"] == {
        "ComputeResourceRequirements": {
            "MinMemoryRequiredInMb": 262144,
            "NumberOfCpuCoresRequired": 16.0,
            "NumberOfAcceleratorDevicesRequired": 4.0,
        },
        "Container": {
            "Image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-lmi11.0.0-cu124",
            "ArtifactUrl": "s3://models/llama-eu/model.tar.gz",
        },
    }
    assert harness.world.component_specs["co-demo-1-llama-us"]["ModelName"] == "llama-us-v3"
    assert [c["copy_count"] for c in harness.world.names("CreateInferenceComponent")] == [1, 1]
    status = create_inference_components(
        ComponentsInput(request_id=request.id, action="status"), harness.ports
    )
    assert status.status == "Creating"
    for name in out.component_names:
        sm.set_component_status(name, "InService")
    ready = create_inference_components(
        ComponentsInput(request_id=request.id, action="status"), harness.ports
    )
    assert ready.status == "InService"
    assert states(harness)[-1] is State.READY
    detail_type, detail = harness.events.puts[-1]
    assert detail_type == "ReservationReady"
    assert detail["inference_component_names"] == out.component_names
    assert "is READY" in harness.slack.texts()[-1]


def test_failed_component_raises_with_its_reason(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    sm = harness.world.client("us-east-1")
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    sm.set_endpoint_status("co-demo-1", "InService")
    create_inference_components(ComponentsInput(request_id=request.id, action="create"), harness.ports)
    sm.set_component_status("co-demo-1-llama-us", "Failed", "image not found")
    with pytest.raises(ComponentFailed, match="co-demo-1-llama-us failed: image not found"):
        create_inference_components(ComponentsInput(request_id=request.id, action="status"), harness.ports)


def test_no_deployment_once_release_started(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    seed(harness.ledger, request.id, State.RELEASING, actor="release")
    with pytest.raises(ReservationCancelled):
        create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    assert harness.world.names("CreateEndpointConfig") == []


# ----------------------------------------------------------------------------------------- notify


def test_approval_request_stores_the_token_and_posts_buttons(harness: Harness) -> None:
    request = record(harness, approval_above_usd="5000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    plan = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    assert plan.decision == "APPROVAL_REQUIRED"
    out = notify(
        NotifyInput(kind="approval_request", request_id=request.id, task_token="tok-1", plan=plan),
        harness.ports,
    )
    assert out.to_json() == {"notified": True, "state": "AWAITING_APPROVAL"}
    item = harness.ledger.get(request.id, APPROVAL)
    assert item is not None
    assert item["task_token"] == "tok-1"
    message = harness.slack.messages[-1]
    buttons = [e["action_id"] for b in message.blocks if b["type"] == "actions" for e in b["elements"]]
    assert buttons == ["approve_reservation", "reject_reservation"]
    assert "ApprovalRequested" in harness.events.types()


def test_approval_requested_names_the_deadline_counted_from_when_the_wait_began(harness: Harness) -> None:
    # Issue 18: the operations topic's notice quotes approval_deadline; the Step Functions timeout counts
    # from the state's entry ($$.State.EnteredTime), before this Lambda runs: never tell a later instant.
    request = record(harness, approval_above_usd="5000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    plan = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    entered = NOW - timedelta(minutes=3, seconds=30)
    step = NotifyInput(
        kind="approval_request", request_id=request.id, task_token="tok-1", plan=plan, entered_at=entered
    )
    notify(step, harness.ports)
    (detail,) = [d for kind, d in harness.events.puts if kind == "ApprovalRequested"]
    deadline = (entered + timedelta(seconds=plan.approval_timeout_seconds)).replace(second=0)
    assert detail["approval_deadline"] == deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert detail["timeout_seconds"] == 24 * 3600
    # Slack tells the same instant, in the deployment's clock: on make serve 24 h are 24 real seconds.
    assert f"Answer by {deadline:%Y-%m-%d %H:%M} UTC (within 24 h)" in harness.slack.messages[-1].text


def test_approval_request_after_a_cancellation_asks_nobody_and_records_nothing(harness: Harness) -> None:
    # Fault soak seed 2, lifecycle 28: a DELETE between PLANNED and the approval request left
    # AWAITING_APPROVAL after CANCELLED, and the approval API then accepted an approval.
    request = record(harness, approval_above_usd="5000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    plan = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    seed(harness.ledger, request.id, State.CANCELLED, actor="api")
    posted = len(harness.slack.messages)
    with pytest.raises(ReservationCancelled, match="is CANCELLED: no approval is requested"):
        notify(
            NotifyInput(kind="approval_request", request_id=request.id, task_token="tok-1", plan=plan),
            harness.ports,
        )
    assert states(harness, request.id)[-1] is State.CANCELLED
    assert harness.ledger.get(request.id, APPROVAL) is None
    assert len(harness.slack.messages) == posted
    assert "ApprovalRequested" not in harness.events.types()


def test_a_cancel_between_the_approval_check_and_its_write_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault soak seed 1, lifecycle 176: the DELETE landed after the approval step found no final state
    # and before it recorded AWAITING_APPROVAL, so the ledger ended REQUESTED, PLANNED, CANCELLED,
    # AWAITING_APPROVAL. The write is now conditional on no OUTCOME, and the DELETE fails the stored token.
    request = record(harness, approval_above_usd="5000")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    plan = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    put_once = harness.ledger.put_once

    def put_then_cancel(request_id: str, sk: str, attributes: Any, **kwargs: Any) -> Any:
        written = put_once(request_id, sk, attributes, **kwargs)
        if sk == APPROVAL:  # the token is stored; the DELETE runs before AWAITING_APPROVAL is written
            answer = cancel_reservation(request_id, harness.ports, actor="alice")
            assert answer["status"] == "CANCELLED"
        return written

    monkeypatch.setattr(harness.ledger, "put_once", put_then_cancel)
    with pytest.raises(ReservationCancelled, match="CANCELLED: AWAITING_APPROVAL is not recorded after"):
        notify(
            NotifyInput(kind="approval_request", request_id=request.id, task_token="tok-1", plan=plan),
            harness.ports,
        )
    assert states(harness, request.id) == [State.REQUESTED, State.PLANNED, State.CANCELLED]
    assert harness.tasks.calls == [
        ("failure", "tok-1", {"error": "ReservationCancelled", "cause": "cancelled by alice"})
    ]
    assert not [m for m in harness.slack.messages if "approve_reservation" in str(m.blocks)]


def test_a_cancel_between_the_choice_check_and_its_write_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault soak seed 1, lifecycle 155 (an EC2 request, DynamoDB latency): the DELETE landed after
    # choose_offering found no CANCELLED and before it recorded PLANNED, so the ledger ended REQUESTED,
    # CANCELLED, PLANNED. PLANNED is now written only while no OUTCOME exists.
    request = record(harness)
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    searches = search_all(harness, request)
    listed = harness.ports.offerings.list

    def list_then_cancel(request_id: str, *, look: int = 0) -> Any:
        found = listed(request_id, look=look)
        assert cancel_reservation(request_id, harness.ports, actor="alice")["status"] == "CANCELLED"
        return found

    monkeypatch.setattr(harness.ports.offerings, "list", list_then_cancel)
    with pytest.raises(ReservationCancelled, match="CANCELLED: PLANNED is not recorded after"):
        choose_offering(ChooseInput(request_id=request.id, searches=searches), harness.ports)
    assert states(harness, request.id) == [State.REQUESTED, State.CANCELLED]
    assert not [t for t in harness.slack.texts() if "Decision for demo-1" in t]


def test_a_cancel_while_an_on_demand_launch_records_its_plan_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found in review of the EC2 soak: after the launch's stop check (and its PURCHASE), a DELETE could
    # land before PLANNED/DEPLOYING were written, leaving them after CANCELLED.
    request = record(harness, strategy="on-demand-first", earliest_start=NOW.isoformat())
    schedule_release = harness.scheduler.schedule_release

    def cancel_then_schedule(**kwargs: Any) -> bool:  # runs between the stop check and PLANNED
        assert cancel_reservation(request.id, harness.ports, actor="alice")["status"] == "CANCELLED"
        return schedule_release(**kwargs)

    monkeypatch.setattr(harness.scheduler, "schedule_release", cancel_then_schedule)
    with pytest.raises(ReservationCancelled, match="is CANCELLED; not launching on demand"):
        on_demand_record.launched(
            request, harness.ports, market="on-demand", region="us-east-1", ids=["i-0abc"], now=NOW
        )
    assert states(harness, request.id) == [State.REQUESTED, State.CANCELLED]
    # the DELETE's release request, and one more from the launch (its PURCHASE tells what to delete)
    assert harness.events.types().count("ReleaseRequested") == 2
    assert "ReservationPlanned" not in harness.events.types()


def test_an_on_demand_launch_whose_release_schedule_failed_finishes_its_records_on_the_retry(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Soak seed 602 #128: the endpoint was InService and PURCHASE recorded, then CreateSchedule was throttled
    # past its retries; the retried step found PURCHASE and answered endpoint_ready: no release schedule, no
    # PLANNED/DEPLOYING, the endpoint billing for good.
    request = record(harness, strategy="on-demand-first", earliest_start=NOW.isoformat())
    schedule_release = harness.scheduler.schedule_release

    def throttled(**kwargs: Any) -> bool:
        raise RetryableAwsError("Scheduler CreateSchedule: ThrottlingException after retries: Rate exceeded")

    monkeypatch.setattr(harness.scheduler, "schedule_release", throttled)
    with pytest.raises(RetryableAwsError):
        on_demand_record.launched(
            request, harness.ports, market="on-demand", region="us-east-1", ids=[], now=NOW
        )
    monkeypatch.setattr(harness.scheduler, "schedule_release", schedule_release)
    # When Step Functions retries the step
    out = try_on_demand(
        OnDemandInput(request_id=request.id, platform="sagemaker", action="try"), harness.ports
    )
    # Then the release is scheduled and the launch recorded before the endpoint is said ready
    assert out.outcome == "endpoint_ready"
    assert "co-demo-1-release" in harness.scheduler.schedules
    assert states(harness, request.id) == [State.REQUESTED, State.PLANNED, State.DEPLOYING]


def test_rejected_approval_records_rejected(harness: Harness) -> None:
    request = record(harness)
    out = notify(
        NotifyInput(kind="approval_outcome", request_id=request.id, approved=False, reason="too expensive"),
        harness.ports,
    )
    assert out.state == "REJECTED"
    assert harness.ledger.history(request.id)[-1].detail["reason"] == "too expensive"


def test_failure_records_failed_and_requests_release_when_something_was_bought(harness: Harness) -> None:
    request = bought(harness)
    cause = '{"errorMessage": "training plan co-demo-1 is Failed", "errorType": "PlanFailed"}'
    out = notify(
        NotifyInput(kind="failure", request_id=request.id, error=StepError(Error="PlanFailed", Cause=cause)),
        harness.ports,
    )
    assert out.state == "FAILED"
    failed = harness.ledger.history(request.id)[-1]
    assert failed.detail["reason"] == "the training plan failed: training plan co-demo-1 is Failed"
    # announced once FAILED is recorded (its subscribers read it), after the release was requested
    assert harness.events.types()[-2:] == ["ReleaseRequested", "ReservationFailed"]
    assert "FAILED" in harness.slack.texts()[-1]


def test_failure_after_a_final_state_records_nothing(harness: Harness) -> None:
    request = record(harness)
    seed(harness.ledger, request.id, State.REJECTED, actor="test")
    out = notify(
        NotifyInput(kind="failure", request_id=request.id, error=StepError(Error="X")), harness.ports
    )
    assert out.state == "REJECTED"
    assert states(harness) == [State.REQUESTED, State.REJECTED]
    assert harness.events.puts == []


def test_readable_reason_handles_plain_and_lambda_causes() -> None:
    assert (
        readable_reason(StepError(Error="States.Timeout", Cause=None))
        == "a step took longer than its timeout"
    )
    assert readable_reason(StepError(Error="Custom", Cause="plain words")) == "plain words"
    assert readable_reason(StepError(Error="Custom", Cause="{not json")) == "{not json"


def test_approval_timeout_reason_is_readable(harness: Harness) -> None:
    request = record(harness)
    out = notify(
        NotifyInput(kind="approval_outcome", request_id=request.id, approved=False, reason="States.Timeout"),
        harness.ports,
    )
    assert out.state == "REJECTED"
    assert (
        harness.ledger.history(request.id)[-1].detail["reason"]
        == "no approval arrived within the approval timeout"
    )
    assert "Nothing was bought" in harness.slack.texts()[-1]


def test_failed_release_is_reported_without_requesting_another_release(harness: Harness) -> None:
    request = bought(harness)
    error = StepError(Error="LeftoverResources", Cause="co-demo-1-config")
    out = notify(
        NotifyInput(kind="failure", phase="release", request_id=request.id, error=error), harness.ports
    )
    assert out.state == "FAILED"
    assert "ReleaseRequested" not in harness.events.types()
    assert (
        harness.ledger.history(request.id)[-1].detail["reason"]
        == "the release left resources behind: co-demo-1-config"
    )


def test_endpoint_deleted_by_a_release_is_a_cancellation_not_a_failure(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    seed(harness.ledger, request.id, State.RELEASING, actor="release")
    del harness.world.endpoints["co-demo-1"]
    with pytest.raises(ReservationCancelled, match="RELEASING"):
        create_endpoint(EndpointInput(request_id=request.id, action="status"), harness.ports)


def test_endpoint_and_components_of_another_request_are_never_adopted(harness: Harness) -> None:
    request = bought(harness)
    sagemaker = harness.world.client("us-east-1")
    foreign = [{"Key": "capacity-orchestrator:request-id", "Value": "Demo.1"}]
    sagemaker.create_endpoint_config(
        name="co-demo-1-config", variant={}, execution_role_arn="r", tags=foreign
    )
    with pytest.raises(NameCollision, match=r"endpoint config .* belongs to request .Demo\.1."):
        create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    assert harness.world.names("CreateEndpoint") == []
    assert State.DEPLOYING not in states(harness)


def test_failed_release_after_the_reservation_failed_is_still_reported(harness: Harness) -> None:
    request = bought(harness)
    seed(harness.ledger, request.id, State.FAILED, actor="test", detail={"reason": "endpoint failed"})
    seed(harness.ledger, request.id, State.RELEASING, actor="test")
    cause = '{"errorMessage": "release of demo-1 gave up; still billing: endpoint co-demo-1 (Deleting)."}'
    error = StepError(Error="ReleaseStuck", Cause=cause)
    step = NotifyInput(kind="failure", phase="release", request_id=request.id, error=error)
    before = len(harness.events.puts)
    out = notify(step, harness.ports)
    assert out.state == "FAILED"
    last = harness.ledger.history(request.id)[-1]
    assert (last.state, last.detail["phase"]) == (State.FAILED, "release")
    assert last.detail["error"] == "ReleaseStuck"
    assert harness.events.types()[before:] == ["ReservationFailed"]
    text = harness.slack.texts()[-1]
    assert "RELEASE FAILED" in text
    assert "endpoint co-demo-1 (Deleting)" in text
    assert "a person must delete them" in text
    # a retried notify task does not record or post twice
    posted = len(harness.slack.texts())
    notify(step, harness.ports)
    assert len(harness.slack.texts()) == posted
    assert [e.detail.get("phase") for e in harness.ledger.history(request.id)].count("release") == 1
    assert harness.events.types()[before:] == ["ReservationFailed"]


def test_rejected_release_request_does_not_claim_anything_is_billing(harness: Harness) -> None:
    cause = '{"errorMessage": "request_id: Field required", "errorType": "InvalidRequest"}'
    error = StepError(Error="InvalidRequest", Cause=cause)
    out = notify(NotifyInput(kind="failure", phase="release", request_id="", error=error), harness.ports)
    assert out.state is None
    assert harness.events.puts == []
    text = harness.slack.texts()[-1]
    assert "request_id: Field required" in text
    assert "nothing was deleted or checked" in text
    assert "billing" not in text


@pytest.mark.parametrize("final", [State.CANCELLED, State.RELEASED, State.FAILED])
def test_activation_after_a_final_state_records_nothing_and_stops(harness: Harness, final: State) -> None:
    request = bought(harness)
    seed(harness.ledger, request.id, final, actor="api")
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Active")
    harness.clock.now = WINDOW_START + timedelta(days=1, minutes=1)
    step = poll_step(request.id)
    with pytest.raises(
        ReservationCancelled, match=f"is {final.value}; not recording training plan co-demo-1 status Active"
    ):
        wait_for_activation(step, harness.ports)
    assert states(harness)[-2:] == [State.PURCHASED, final]
    assert "ReservationActive" not in harness.events.types()


def test_components_in_service_after_a_failure_do_not_record_ready(harness: Harness) -> None:
    request = bought(harness)
    harness.activate(request.id)
    sm = harness.world.client("us-east-1")
    create_endpoint(EndpointInput(request_id=request.id, action="create"), harness.ports)
    sm.set_endpoint_status("co-demo-1", "InService")
    create_inference_components(ComponentsInput(request_id=request.id, action="create"), harness.ports)
    for name in ("co-demo-1-llama-eu", "co-demo-1-llama-us"):
        sm.set_component_status(name, "InService")
    seed(harness.ledger, request.id, State.FAILED, actor="notify")
    with pytest.raises(ReservationCancelled):
        create_inference_components(ComponentsInput(request_id=request.id, action="status"), harness.ports)
    assert State.READY not in states(harness)


def test_a_rejection_after_a_cancellation_records_no_second_outcome(harness: Harness) -> None:
    # Fault soak: CANCELLED then REJECTED (an approval timing out while the DELETE was recorded).
    request = record(harness)
    harness.ledger.record(request.id, Event.CANCEL, actor="api", detail={"reason": "cancelled"})
    posted = len(harness.slack.messages)
    notify(
        NotifyInput(kind="approval_outcome", request_id=request.id, approved=False, reason="States.Timeout"),
        harness.ports,
    )
    cause = '{"errorMessage": "boom", "errorType": "PlanFailed"}'
    notify(
        NotifyInput(kind="failure", request_id=request.id, error=StepError(Error="PlanFailed", Cause=cause)),
        harness.ports,
    )
    finals = [s for s in states(harness, request.id) if s in (State.CANCELLED, State.REJECTED, State.FAILED)]
    assert finals == [State.CANCELLED]
    assert len(harness.slack.messages) == posted


def test_the_first_outcome_wins_even_when_the_other_writer_did_not_see_it(harness: Harness) -> None:
    # Two steps that both read "no final state" yet: only the first outcome is appended; a retry of the
    # same outcome appends nothing more; the release's RELEASED and a release failure may still follow.
    request = record(harness)
    assert harness.ledger.record(request.id, Event.REJECT, actor="choose") is not None
    assert harness.ledger.record(request.id, Event.CANCEL, actor="api") is None
    assert harness.ledger.record(request.id, Event.REJECT, actor="choose") is None
    harness.ledger.record(request.id, Event.START_RELEASE, actor="release")
    harness.ledger.record(request.id, Event.FINISH_RELEASE, actor="release")
    assert states(harness, request.id)[-3:] == [State.REJECTED, State.RELEASING, State.RELEASED]


def test_a_cancel_between_the_request_and_its_requested_state_wins(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 13, defect 8: a DELETE landing between record_request's REQUEST item and its REQUESTED state
    # left the ledger CANCELLED -> REQUESTED (and the workflow went on to search and buy).
    ledger = harness.ledger
    put_once = ledger.put_once

    def cancel_after_the_request(request_id: str, sk: str, *args: Any, **kwargs: Any) -> Any:
        result = put_once(request_id, sk, *args, **kwargs)
        if sk == "REQUEST":
            cancel_reservation(request_id, harness.ports, actor="arn:aws:iam::123456789012:user/bob")
        return result

    monkeypatch.setattr(ledger, "put_once", cancel_after_the_request)
    event = {"id": "event-1", "detail": {"schema_version": 1, "request": request_body()}}
    out = record_request(event, harness.ports)
    assert out.duplicate is True  # the workflow ends quietly: nothing is searched or bought
    assert states(harness) == [State.CANCELLED]
    assert harness.events.types() == ["ReleaseRequested"]


def test_a_failure_after_an_on_demand_launch_requests_its_release(harness: Harness) -> None:
    # Issue 13, defect 5: on-demand instances that never ran (LaunchFailed after 20 polls) were recorded
    # FAILED but released only by the schedule at latest_end: on demand records a PURCHASE, no intent.
    request = record(harness)
    harness.ledger.put_once(
        request.id,
        "PURCHASE",
        {"market": "on-demand", "region": "us-east-1", "platform": "ec2", "upfront_fee_usd": "0"},
    )
    error = StepError(Error="LaunchFailed", Cause="1 of 2 on-demand instances running after 20 polls")
    notify(NotifyInput(kind="failure", request_id=request.id, error=error), harness.ports)
    assert harness.events.types() == ["ReleaseRequested", "ReservationFailed"]
    assert "Releasing whatever was created" in harness.slack.texts()[-1]


class _Killed(BaseException):
    """The Lambda stopped (its timeout, out of memory) right after the FAILED was written."""


def test_a_release_failure_recorded_by_a_lambda_that_died_before_posting_is_told_on_the_retry(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = bought(harness)
    seed(harness.ledger, request.id, State.RELEASING, actor="test")
    step = NotifyInput(
        kind="failure",
        phase="release",
        request_id=request.id,
        error=StepError(Error="ReleaseStuck", Cause="endpoint co-demo-1 (Deleting)"),
    )

    def killed(*_: Any) -> None:
        raise _Killed

    with monkeypatch.context() as patch:
        patch.setattr("capacity.logic.steps.notify.post", killed)
        with pytest.raises(_Killed):
            notify(step, harness.ports)
    assert harness.ledger.history(request.id)[-1].detail["phase"] == "release"  # recorded, not told
    assert not [t for t in harness.slack.texts() if "RELEASE FAILED" in t]
    notify(step, harness.ports)  # Step Functions retries the task
    notify(step, harness.ports)  # and a second delivery of it
    told = [t for t in harness.slack.texts() if "RELEASE FAILED" in t]
    assert len(told) == 1, told
    assert "endpoint co-demo-1 (Deleting)" in told[0]
    assert [e.detail.get("phase") for e in harness.ledger.history(request.id)].count("release") == 1
