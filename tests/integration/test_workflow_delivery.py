"""The rule targets of ReservationRequested and ReleaseRequested (issue 13 item 13): a StartExecution that
EventBridge cannot make is retried with back-off, and after the retry policy the event is kept in the
alarmed dead-letter queue instead of being lost (the local cloud honours the template's RetryPolicy and
DeadLetterConfig)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import base_request, make_cloud, post_reservation, states

pytestmark = pytest.mark.integration


def _dead_letters(cloud: LocalCloud) -> list[dict[str, Any]]:
    sqs = cloud.client("sqs")
    name = cloud.stack.arn("WorkflowDeliveryFailuresQueue").rsplit(":", 1)[-1]
    url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
    return list(
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]).get(
            "Messages", []
        )
    )


def _release_requested(cloud: LocalCloud) -> None:
    cloud.put_events(
        [
            {
                "EventBusName": cloud.stack.physical_id("EventBus"),
                "Source": "capacity.orchestrator",
                "DetailType": "ReleaseRequested",
                "Detail": json.dumps(
                    {"schema_version": 1, "request_id": "nothing-bought", "reason": "cancelled"}
                ),
            }
        ]
    )


def test_a_release_request_that_never_starts_its_workflow_lands_in_the_dead_letter_queue() -> None:
    refused = FaultRule(service="eventbridge", operation="ReleaseRequested", kind=FaultKind.DELIVERY_FAILURE)
    with make_cloud(faults=FaultInjector([refused], seed=2)) as cloud:
        _release_requested(cloud)
        cloud.run_until_idle()

        assert cloud.executions() == []
        (message,) = _dead_letters(cloud)
        assert json.loads(message["Body"])["detail"]["request_id"] == "nothing-bought"
        attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
        assert attributes["ERROR_CODE"] == "THROTTLING"
        assert attributes["EXHAUSTED_RETRY_CONDITION"] in ("MaximumRetryAttempts", "MaximumEventAgeInSeconds")
        assert attributes["TARGET_ARN"] == cloud.stack.arn("ReleaseCapacityStateMachine")
        assert int(attributes["RETRY_ATTEMPTS"]) > 100  # retried for about a day first


def test_a_reservation_request_refused_a_few_times_still_starts_its_workflow() -> None:
    refused = FaultRule(
        service="eventbridge", operation="ReservationRequested", kind=FaultKind.DELIVERY_FAILURE, times=3
    )
    with make_cloud(faults=FaultInjector([refused], seed=2)) as cloud:
        response = post_reservation(cloud, base_request())
        assert response["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "eval-week-49"))

        (_reserve,) = [
            e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")
        ]
        assert "PURCHASED" in states(cloud, "eval-week-49")
        assert _dead_letters(cloud) == []
        attempts = [d for d in cloud.delivery.deliveries if d.detail_type == "ReservationRequested"]
        assert [d.error is None for d in attempts] == [False, False, False, True]
