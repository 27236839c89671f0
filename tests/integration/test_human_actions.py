"""Issue 13, defects 6 and 7: a person's cancel or approval is never lost to a transient fault.

6. A cancel whose ``ReleaseRequested`` put failed answered 503; the client's retry answered 202 ``CANCELLED``
   and put nothing, so an on-demand endpoint ran 71 hours more. A repeated cancel requests the release again
   while anything bills (API and Slack).
7. An approval recorded, then its ``SendTaskSuccess`` throttled: the approver was told to retry, the retry
   answered 409 "already approved", and the reservation ended ``REJECTED`` "no approval arrived". A recorded
   decision whose hand-back did not happen is handed back again on retry (API and Slack).
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from events.slack_signed_request import command_body, interaction_body, local_secret, proxy_event
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    APPROVER,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    states,
    training_plans,
)
from tests.integration.test_on_demand_first import sagemaker_now_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"
OUTAGE = timedelta(minutes=1)
"""Long enough for every attempt (and back-off) of the door's one call, over before the person retries."""


def _failing(cloud: LocalCloud, service: str, operation: str) -> FaultRule:
    """``operation`` throttled, every attempt, for :data:`OUTAGE` from now."""
    now = cloud.now()
    return FaultRule(
        service=service, operation=operation, kind=FaultKind.THROTTLE, not_before=now, not_after=now + OUTAGE
    )


def _later(cloud: LocalCloud) -> None:
    """The person retries a few minutes later (the outage is over)."""
    cloud.run(until=cloud.now() + 5 * OUTAGE)


def _slack(cloud: LocalCloud, path: str, body: str, offset: int = 0) -> dict[str, Any]:
    stamp = int(cloud.now().timestamp()) + offset
    return cloud.api_request(proxy_event(path, body, secret=local_secret(), timestamp=stamp))


def _cancel(cloud: LocalCloud, door: str, attempt: int) -> int:
    if door == "api":
        answer = cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))
        return int(answer["statusCode"])
    answer = _slack(cloud, "/slack/commands", command_body(f"cancel {RID}", user_id="U0APPROVER"), attempt)
    if (
        answer["statusCode"] != 200
    ):  # botocore's back-off outlasted the door's 10 s timeout: an error in Slack
        return 503
    text = json.loads(answer["body"])["text"]
    return 503 if "send the same command again" in text else 202


@pytest.mark.parametrize("door", ["api", "slack"])
def test_a_cancel_retried_after_its_release_request_failed_releases_the_endpoint(door: str) -> None:
    faults = FaultInjector()
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())  # on demand: an endpoint billing by the hour
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        assert cloud.billable_resources() != []
        faults.add(_failing(cloud, "eventbridge", "PutEvents"))
        assert _cancel(cloud, door, 0) == 503  # CANCELLED recorded, ReleaseRequested not put
        assert "CANCELLED" in states(cloud, RID)
        _later(cloud)
        assert _cancel(cloud, door, 1) == 202  # the client's retry
        cloud.run(until=cloud.now() + timedelta(hours=2))
        assert states(cloud, RID)[-1] == "RELEASED"
        assert cloud.billable_resources() == []


def test_a_repeated_cancel_after_the_release_finished_requests_nothing_more() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        assert _cancel(cloud, "api", 0) == 202
        cloud.run(until=cloud.now() + timedelta(hours=2))
        assert states(cloud, RID)[-1] == "RELEASED"
        assert _cancel(cloud, "api", 1) == 409  # already released: nothing to request


def _approve_by_api(cloud: LocalCloud, attempt: int) -> tuple[int, dict[str, Any]]:
    del attempt
    event = api_event({"approved": True}, path=f"/reservations/{RID}/approval", caller=APPROVER)
    answer = cloud.api_request(event)
    return int(answer["statusCode"]), json.loads(answer["body"])


@pytest.mark.parametrize("door", ["api", "slack"])
def test_an_approval_whose_hand_back_failed_is_handed_back_on_retry_and_buys(door: str) -> None:
    faults = FaultInjector()
    body = {**base_request(), "approval_above_usd": "1000", "request_id": RID}
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        faults.add(_failing(cloud, "sfn", "SendTaskSuccess"))
        if door == "api":
            first, _ = _approve_by_api(cloud, 0)
            assert first == 503
            _later(cloud)
            second, answer = _approve_by_api(cloud, 1)
            assert second == 200, answer
            assert answer["status"] == "APPROVED"
        else:
            press = interaction_body(RID, approve=True, user_id="U0APPROVER")
            # "press again", or an error when botocore's back-off outlasts the door's 10 s timeout
            assert _slack(cloud, "/slack/interactions", press)["statusCode"] in (200, 502)
            assert "APPROVAL_DECISION" in [i["sk"] for i in ledger_items(cloud, RID)]
            _later(cloud)
            again = interaction_body(RID, approve=True, user_id="U0APPROVER", message_ts="1.000002")
            assert _slack(cloud, "/slack/interactions", again, 1)["statusCode"] == 200
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        seen = states(cloud, RID)
        assert "PURCHASED" in seen
        assert "REJECTED" not in seen
        assert len(training_plans(cloud)) == 1
