"""A release that cannot leak (issue 4): concurrent releases, a release while the reserve workflow still
deploys, a reserve workflow stopped mid-deployment, a stuck component, and the idle-policy release.
"Nothing left" means no billable SageMaker resource, no scalable target or policy, and no alarm."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import base_request, ledger_items, make_cloud, post_reservation, states

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _release(cloud: LocalCloud, reason: str, times: int = 1) -> None:
    bus = cloud.stack.physical_id("EventBus")
    entry = {
        "Source": "capacity.orchestrator",
        "DetailType": "ReleaseRequested",
        "Detail": json.dumps({"schema_version": 1, "request_id": RID, "reason": reason}),
        "EventBusName": bus,
    }
    cloud.put_events([entry] * times)


def _executions(cloud: LocalCloud, machine: str) -> list[Any]:
    return [e for e in cloud.executions() if e.state_machine.endswith(machine)]


def _assert_nothing_left(cloud: LocalCloud) -> None:
    assert cloud.billable_resources() == []
    alarms = cloud.client("cloudwatch").describe_alarms()["MetricAlarms"]
    assert [a["AlarmName"] for a in alarms if "co-eval-week-49" in a["AlarmName"]] == []
    assert states(cloud, RID).count("RELEASED") == 1


def test_two_releases_at_once_leave_nothing_and_one_released() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        _release(cloud, "cancelled", times=2)
        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        cloud.run(until=cloud.now() + timedelta(hours=1))
        releases = _executions(cloud, "ReleaseCapacityStateMachine")
        assert len(releases) == 2
        assert [e.status for e in releases] == ["SUCCEEDED", "SUCCEEDED"]
        _assert_nothing_left(cloud)
        assert sum(f"*{RID} RELEASED*" in m.text for m in cloud.outbox.messages) == 1
        cloud.run_until_idle()  # the end-of-reservation schedule finds it released
        _assert_nothing_left(cloud)


def test_release_while_the_endpoint_is_being_created_leaves_nothing() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "DEPLOYING" in states(cloud, RID))
        assert cloud.client("sagemaker").describe_endpoint(EndpointName="co-eval-week-49")[
            "EndpointStatus"
        ] == ("Creating")
        _release(cloud, "cancelled")
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert "READY" not in seen
        assert seen[-1] == "RELEASED"
        _assert_nothing_left(cloud)


def test_release_while_components_are_being_created_leaves_nothing() -> None:
    def components_creating() -> bool:
        listing = cloud.client("sagemaker").list_inference_components()["InferenceComponents"]
        return len(listing) == 2

    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=components_creating)
        _release(cloud, "cancelled")
        cloud.run_until_idle()
        assert states(cloud, RID)[-1] == "RELEASED"
        _assert_nothing_left(cloud)
        # SageMaker refused to delete the components while they were Creating (issue 29): retried as busy
        refused = [
            c
            for c in cloud.dispatcher.calls
            if c.operation == "DeleteInferenceComponent" and c.error_code == "ValidationException"
        ]
        assert refused


def test_reserve_workflow_stopped_mid_deployment_is_still_released_by_its_schedule() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "DEPLOYING" in states(cloud, RID))
        (reserve,) = _executions(cloud, "ReserveCapacityStateMachine")
        cloud.client("stepfunctions").stop_execution(executionArn=reserve.arn, cause="operator stopped it")
        stopped_at = cloud.now()
        cloud.run_until_idle()
        statuses = [e.status for e in _executions(cloud, "ReserveCapacityStateMachine")]
        assert statuses[:1] == ["ABORTED"]  # then resumed (capacity.logic.steps.stopped)
        released = next(i for i in ledger_items(cloud, RID) if i.get("state") == "RELEASED")
        assert released["detail"]["reason"] == "reservation-end"  # the purchase-time schedule did it
        assert cloud.now() - stopped_at > timedelta(days=2)  # at the end, not at once
        _assert_nothing_left(cloud)


def test_a_component_stuck_deleting_is_retried_then_reported_with_what_still_bills() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="DeleteInferenceComponent", kind=FaultKind.STUCK, times=1)]
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        _release(cloud, "cancelled")
        cloud.run(until=cloud.now() + timedelta(hours=4))
        # The first attempt polled until its deadline; it failed, was reported, and the next was scheduled
        # (releases retry until nothing bills: every failed attempt is an execution that fails and tells).
        release, *retries = _executions(cloud, "ReleaseCapacityStateMachine")
        assert release.status == "FAILED"
        assert release.stop is not None
        assert release.stop - release.start > timedelta(hours=1, minutes=30)  # polled until the deadline
        assert retries
        alerts = [m.text for m in cloud.outbox.messages if "RELEASE FAILED" in m.text]
        assert len(alerts) == sum(e.status == "FAILED" for e in [release, *retries])
        stuck = [b for b in cloud.billable_resources() if b.resource_type == "inference-component"]
        assert len(stuck) == 1
        assert all(f"inference component {stuck[0].name} (Deleting)" in alert for alert in alerts)
        # Scaling and alarms went first, so nothing scales the stuck component meanwhile.
        assert [b for b in cloud.billable_resources() if b.service == "application-autoscaling"] == []
        alarms = cloud.client("cloudwatch").describe_alarms(AlarmNamePrefix="capacity-orchestrator/")
        assert alarms["MetricAlarms"] == []


def test_idle_policy_release_releases_the_idle_endpoint_early() -> None:
    body = base_request()
    body["idle_policy"] = {"action": "release", "idle_hours": 2}
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        ready_at = cloud.now()
        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        released = next(i for i in ledger_items(cloud, RID) if i.get("state") == "RELEASED")
        assert released["detail"]["reason"] == "idle"
        assert timedelta(hours=2) <= cloud.now() - ready_at < timedelta(hours=4)
        idle = [i for i in ledger_items(cloud, RID) if i.get("action") == "release_requested_idle"]
        assert len(idle) == 1
        assert any("served no request for 2 hour(s)" in m.text for m in cloud.outbox.messages)
        _assert_nothing_left(cloud)
