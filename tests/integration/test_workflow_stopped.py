"""A workflow stopped outside its own paths (an operator's StopExecution): Step Functions' status change
event reaches the application, which resumes a paid reservation, fails one that bought nothing, and
requests an aborted release again (capacity.logic.steps.stopped)."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from localcloud.cloud import LocalCloud
from tests.integration.support import (
    APPROVER,
    LIFECYCLE,
    api_event,
    base_request,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_on_demand_first import sagemaker_now_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _stop_running(cloud: LocalCloud, machine: str) -> str:
    """An operator's ``StopExecution`` of the running execution of ``machine``; its ARN."""
    (running,) = [
        e for e in cloud.executions() if e.state_machine.endswith(machine) and e.status == "RUNNING"
    ]
    cloud.client("stepfunctions").stop_execution(executionArn=running.arn, error="Operator", cause="by hand")
    return running.arn


@pytest.mark.parametrize("approval", [False, True], ids=["no-approval", "approved"])
def test_a_reserve_workflow_stopped_after_the_purchase_is_resumed_and_serves(approval: bool) -> None:
    body = {**base_request(), "approval_above_usd": "1000"} if approval else base_request()
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        if approval:
            cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
            approval_event = api_event(
                {"approved": True}, path=f"/reservations/{RID}/approval", caller=APPROVER
            )
            answer = cloud.api_request(approval_event)
            assert answer["statusCode"] == 200, answer
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        stopped = _stop_running(cloud, "ReserveCapacityStateMachine")
        cloud.run_until_idle()

        reserve = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
        assert sorted(e.status for e in reserve) == ["ABORTED", "SUCCEEDED"]  # then the resumed workflow
        resumed = [i for i in ledger_items(cloud, RID) if i["sk"] == f"RESUME#{stopped}"]
        assert len(resumed) == 1
        # Bought once, recorded once, served, then released at its end
        assert len(training_plans(cloud)) == 1
        assert [c.operation for c in cloud.dispatcher.calls].count("CreateTrainingPlan") == 1
        money = [Decimal(i["money_usd"]) for i in ledger_items(cloud, RID) if i.get("money_usd")]
        assert money == [Decimal(training_plans(cloud)[0]["UpfrontFee"])]
        seen = states(cloud, RID)
        assert in_order(seen, LIFECYCLE), seen
        assert "FAILED" not in seen
        assert seen.count("AWAITING_APPROVAL") == int(approval)  # the resumed workflow asks nobody again
        assert seen.count("PLANNED") == 1  # nor plans again: straight back to the purchase
        assert f"{RID} resumed" in slack_texts(cloud)
        assert cloud.billable_resources() == []


def test_a_reserve_workflow_stopped_before_anything_was_bought_fails_and_says_so() -> None:
    body = {**base_request(), "approval_above_usd": "1", "approval_timeout_hours": 24}
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        _stop_running(cloud, "ReserveCapacityStateMachine")
        cloud.run_until_idle()

        seen = states(cloud, RID)
        assert seen[-1] == "FAILED"
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "WorkflowStopped"
        assert "aborted" in failed["detail"]["reason"]
        assert training_plans(cloud) == []
        assert "Nothing was bought" in slack_texts(cloud)


def test_an_aborted_release_is_requested_again_and_releases() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        detail = {"schema_version": 1, "request_id": RID, "reason": "cancelled"}
        cloud.put_events(
            [
                {
                    "Source": "capacity.orchestrator",
                    "DetailType": "ReleaseRequested",
                    "Detail": json.dumps(detail),
                    "EventBusName": cloud.stack.physical_id("EventBus"),
                }
            ]
        )
        cloud.run(
            stop_when=lambda: (
                "RELEASING" in states(cloud, RID)
                and any(
                    e.state_machine.endswith("ReleaseCapacityStateMachine") and e.status == "RUNNING"
                    for e in cloud.executions()
                )
            ),
        )
        _stop_running(cloud, "ReleaseCapacityStateMachine")
        cloud.run_until_idle()

        release = [e for e in cloud.executions() if e.state_machine.endswith("ReleaseCapacityStateMachine")]
        assert sorted(e.status for e in release) == ["ABORTED", "SUCCEEDED"]
        # Released again at once for the cancel (not by the end-of-reservation schedule, days later)
        released = [i for i in ledger_items(cloud, RID) if i.get("state") == "RELEASED"]
        assert [i["detail"]["reason"] for i in released] == ["cancelled"]
        assert cloud.billable_resources() == []


def test_a_reserve_workflow_stopped_while_awaiting_approval_under_throttling_still_ends() -> None:
    # Given a reservation waiting for an approval (soak seed 411, lifecycle 11)
    from localcloud.faults import FaultInjector, FaultKind, FaultRule

    faults = FaultInjector([])
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, {**base_request(), "approval_above_usd": "1000"})
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        # When an operator stops its workflow while DynamoDB throttles every call of the first four attempts
        # to handle the stop (more than Lambda's two asynchronous retries can outlast)
        faults.add(FaultRule(service="dynamodb", kind=FaultKind.THROTTLE, times=12))
        _stop_running(cloud, "ReserveCapacityStateMachine")
        cloud.run_until_idle()

        # Then the stop is handled all the same: the reservation ends FAILED (WorkflowStopped), not waiting
        seen = states(cloud, RID)
        assert seen[-1] == "FAILED", seen
        (failed,) = [i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED"]
        assert failed["detail"]["error"] == "WorkflowStopped"
        assert len([f for f in faults.fired if f.kind is FaultKind.THROTTLE]) == 12
        assert training_plans(cloud) == []


def test_a_reserve_workflow_stopped_while_its_on_demand_endpoint_is_created_leaves_nothing_billing() -> None:
    # An operator stops the reserve workflow while its on-demand endpoint is being created: there is no
    # PURCHASE yet (it is recorded once the endpoint is InService), but the endpoint bills by the hour from
    # then on and must be released.
    with make_cloud() as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run(
            stop_when=lambda: any(i["sk"].startswith("ON_DEMAND_ENDPOINT#") for i in ledger_items(cloud, RID))
        )
        _stop_running(cloud, "ReserveCapacityStateMachine")
        cloud.run_until_idle()

        seen = states(cloud, RID)
        assert seen[-3:] == ["FAILED", "RELEASING", "RELEASED"], seen
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "WorkflowStopped"
        assert cloud.billable_resources() == []
