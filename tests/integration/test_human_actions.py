"""A person's cancel or approval is never lost to a transient fault (issue 13, defects 6 and 7; issue 28,
point 5: "a recorded decision always takes effect").

Measured before the outbox:

- a cancel recorded ``CANCELLED`` while the ``ReleaseRequested`` put after it failed on both of the client's
  tries: GET said ``CANCELLED`` and the on-demand endpoint billed 71 hours more;
- an approval recorded while its ``SendTaskSuccess`` was throttled on both tries: the reservation ended
  ``REJECTED`` "no approval arrived".

The record is now the trigger of its effect (``capacity.logic.steps.outbox``: the ledger's stream hands the
decision to ``OutboxFunction``, which retries until the effect is done): both tries answer success, and the
release happens, or the purchase is made, once. A stream batch delivered twice takes effect once.
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
OUTAGE = timedelta(minutes=2)
"""Long enough for both of a person's tries (and every attempt and back-off of the door's one call)."""
OUTBOX = "capacity-orchestrator-OutboxFunction"


def _failing(cloud: LocalCloud, service: str, operation: str) -> FaultRule:
    """``operation`` throttled, every attempt, for :data:`OUTAGE` from now."""
    now = cloud.now()
    return FaultRule(
        service=service, operation=operation, kind=FaultKind.THROTTLE, not_before=now, not_after=now + OUTAGE
    )


def _retry_later(cloud: LocalCloud) -> None:
    """The person tries again half a minute later (the outage goes on)."""
    cloud.run(until=cloud.now() + timedelta(seconds=30))


def _slack(cloud: LocalCloud, path: str, body: str, offset: int = 0) -> dict[str, Any]:
    stamp = int(cloud.now().timestamp()) + offset
    return cloud.api_request(proxy_event(path, body, secret=local_secret(), timestamp=stamp))


def _cancel(cloud: LocalCloud, door: str, attempt: int) -> int:
    if door == "api":
        answer = cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))
        return int(answer["statusCode"])
    answer = _slack(cloud, "/slack/commands", command_body(f"cancel {RID}", user_id="U0APPROVER"), attempt)
    assert answer["statusCode"] == 200
    text = json.loads(answer["body"])["text"]
    return 503 if "send the same command again" in text else 202


def _outbox_done(cloud: LocalCloud, sk: str) -> dict[str, Any]:
    (done,) = [item for item in ledger_items(cloud, RID) if item["sk"] == sk]
    return done


def _release_requests(cloud: LocalCloud) -> list[Any]:
    """The ``ReleaseRequested`` events put on the bus for the reservation."""
    return [
        entry
        for entry in cloud.timeline.entries("event")
        if entry.detail.get("detail_type") == "ReleaseRequested"
        and (entry.detail.get("event") or {}).get("detail", {}).get("request_id") == RID
    ]


@pytest.mark.parametrize("door", ["api", "slack"])
def test_a_cancel_whose_release_request_failed_on_both_tries_releases_the_endpoint(door: str) -> None:
    faults = FaultInjector()
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())  # on demand: an endpoint billing by the hour
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        assert cloud.billable_resources() != []
        faults.add(_failing(cloud, "eventbridge", "PutEvents"))

        assert _cancel(cloud, door, 0) == 202  # CANCELLED recorded; the door's ReleaseRequested refused
        _retry_later(cloud)
        assert _cancel(cloud, door, 1) == 202  # the client's retry: refused again
        assert _release_requests(cloud) == []
        cloud.run(until=cloud.now() + timedelta(hours=2))

        assert states(cloud, RID)[-2:] == ["RELEASING", "RELEASED"]
        assert cloud.billable_resources() == []
        done = _outbox_done(cloud, "OUTBOX#CANCELLED")
        assert (done["by"], done["outcome"]) == (OUTBOX, "release requested")
        assert _release_requests(cloud)[0].at >= cloud.faults.rules[0].not_after


def _approve_by_api(cloud: LocalCloud) -> tuple[int, dict[str, Any]]:
    event = api_event({"approved": True}, path=f"/reservations/{RID}/approval", caller=APPROVER)
    answer = cloud.api_request(event)
    return int(answer["statusCode"]), json.loads(answer["body"])


@pytest.mark.parametrize("door", ["api", "slack"])
def test_an_approval_whose_hand_back_was_throttled_on_both_tries_buys_once(door: str) -> None:
    faults = FaultInjector()
    body = {**base_request(), "approval_above_usd": "1000", "request_id": RID}
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        faults.add(_failing(cloud, "sfn", "SendTaskSuccess"))
        if door == "api":
            first = _approve_by_api(cloud)
            _retry_later(cloud)
            second = _approve_by_api(cloud)
            answers = [(status, answer["status"]) for status, answer in (first, second)]
            assert answers == [(200, "APPROVED"), (200, "APPROVED")]
        else:
            press = interaction_body(RID, approve=True, user_id="U0APPROVER")
            assert _slack(cloud, "/slack/interactions", press)["statusCode"] == 200
            _retry_later(cloud)
            again = interaction_body(RID, approve=True, user_id="U0APPROVER", message_ts="1.000002")
            assert _slack(cloud, "/slack/interactions", again, 1)["statusCode"] == 200
        assert "APPROVAL_DELIVERED" not in [i["sk"] for i in ledger_items(cloud, RID)]

        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))

        seen = states(cloud, RID)
        assert "PURCHASED" in seen
        assert "REJECTED" not in seen
        assert len(training_plans(cloud)) == 1
        assert _outbox_done(cloud, "OUTBOX#APPROVAL_DECISION")["by"] == OUTBOX
        assert "APPROVAL_DELIVERED" in [i["sk"] for i in ledger_items(cloud, RID)]


def test_a_cancel_s_stream_batch_delivered_twice_requests_the_release_once() -> None:
    faults = FaultInjector()
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        # The door's own try fails (its two attempts), so the stream carries the cancel out; its batch twice.
        faults.add(FaultRule(service="eventbridge", operation="PutEvents", kind=FaultKind.THROTTLE, times=2))
        faults.add(FaultRule(service="dynamodb-streams", kind=FaultKind.DUPLICATE_DELIVERY, times=1))
        batches_before = len(cloud.streams.batches)

        assert _cancel(cloud, "api", 0) == 202
        cloud.run(until=cloud.now() + timedelta(hours=2))

        delivered = [b for b in cloud.streams.batches[batches_before:] if b.error is None]
        first = delivered[0].sequences
        assert sum(1 for b in delivered if b.sequences == first) == 2  # the same batch, twice
        assert len(_release_requests(cloud)) == 1
        releases = [e for e in cloud.executions() if "ReleaseCapacity" in e.state_machine]
        assert len(releases) == 1
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
