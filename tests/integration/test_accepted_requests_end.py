"""Every request accepted at a door (202) reaches an outcome someone is told about (issue 28, point 3): a
delivery that reaches the workflow after the request's window could start is recorded and failed with the
reason, and the requester hears of it; GET never shows ``state: null`` once the workflow has ended."""

from __future__ import annotations

import json

import pytest

from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import api_event, make_cloud, post_reservation, slack_texts, states
from tests.integration.test_on_demand_first import sagemaker_now_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def test_a_late_delivery_of_a_request_whose_start_has_passed_ends_failed_with_its_reason_and_told() -> None:
    # The event reaches the reserve workflow two hours late: the window started at 12:00 (15 minutes of
    # grace), so the request can no longer be served as asked.
    late = FaultRule(
        service="eventbridge",
        operation="ReservationRequested",
        kind=FaultKind.DELAYED_DELIVERY,
        delay_seconds=7200,
        match={"target_service": "states"},
        times=1,
    )
    with make_cloud(faults=FaultInjector([late])) as cloud:
        assert post_reservation(cloud, sagemaker_now_request())["statusCode"] == 202
        cloud.run_until_idle()

        got = cloud.api_request(api_event(None, method="GET", path=f"/reservations/{RID}"))
        view = json.loads(got["body"])
        assert view["state"] == "FAILED"
        failed = [h for h in view["history"] if h["state"] == "FAILED"]
        assert failed[0]["detail"]["error"] == "InvalidRequest"
        assert "too late for its window" in failed[0]["detail"]["reason"]
        assert "earliest_start" in failed[0]["detail"]["reason"]
        assert states(cloud, RID) == ["REQUESTED", "FAILED"]
        assert view["request"]["instance_type"] == "ml.p5.48xlarge"
        # The requester is told (Slack) and so is operations (ReservationFailed reaches the notice rule).
        told = slack_texts(cloud)
        assert f"{RID} FAILED" in told
        assert "too late for its window" in told
        notices = [d for d in cloud.delivery.deliveries if d.target_arn.startswith("arn:aws:sns:")]
        assert [(d.detail_type, d.error) for d in notices] == [("ReservationFailed", None)]
        assert RID in notices[0].payload


def test_a_request_its_workflow_never_recorded_ends_failed_and_told() -> None:
    # Lambda throttles every invocation of the recording step beyond the workflow's retries: the execution
    # fails before anything is recorded. The 202 stands: the request ends FAILED, and people are told.
    with make_cloud() as cloud:
        function = cloud.stack.physical_id("RecordRequestFunction")
        cloud.faults.add(
            FaultRule(
                service="lambda",
                operation="Invoke",
                kind=FaultKind.THROTTLE,
                match={"FunctionName": f"arn:aws:lambda:us-east-1:123456789012:function:{function}"},
            )
        )
        assert post_reservation(cloud, sagemaker_now_request())["statusCode"] == 202
        cloud.run_until_idle()

        reserve = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
        assert [e.status for e in reserve] == ["FAILED"]
        got = cloud.api_request(api_event(None, method="GET", path=f"/reservations/{RID}"))
        view = json.loads(got["body"])
        assert view["state"] == "FAILED"
        (failed,) = view["history"]
        assert failed["detail"]["error"] == "WorkflowStopped"
        assert "before it recorded the request" in failed["detail"]["reason"]
        assert f"{RID} FAILED" in slack_texts(cloud)
