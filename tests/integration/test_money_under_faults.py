"""Money is never double-spent, lost from the record, or thrown away by a transient fault (issue 13, 1-3):
whole lifecycles on the local cloud with the faults AWS really produces (duplicate executions, a Lambda
stopped at its timeout right after the purchase, throttling that lasts longer than any retry)."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import DEGRADED
from capacity.timeutil import parse_utc

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    LIFECYCLE,
    REQUESTER,
    START,
    base_request,
    in_order,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_ec2_capacity_blocks import (
    ONLY_US_EAST_1,
    REQUEST_ID,
    blocks,
    create_launch_templates,
    ec2_request,
    instances,
)

pytestmark = pytest.mark.integration

SAGEMAKER_ID = "eval-week-49"


def _requested_event(cloud: LocalCloud, request: dict[str, Any]) -> str:
    """A ``ReservationRequested`` event as EventBridge hands it to the reserve workflow (fixed event id)."""
    return json.dumps(
        {
            "version": "0",
            "id": "6f1c0b2e-0000-4000-8000-000000000001",
            "detail-type": "ReservationRequested",
            "source": "capacity.orchestrator",
            "account": cloud.account_id,
            "time": "2026-11-29T12:00:00Z",
            "region": "us-east-1",
            "resources": [],
            # As the API door puts it: the caller as requester, charged to its team (issue 16).
            "detail": {
                "schema_version": 1,
                "request": {**request, "requester": REQUESTER, "team": "ml-platform"},
            },
        }
    )


def _start_twice(cloud: LocalCloud, request: dict[str, Any]) -> None:
    """One event delivered twice: EventBridge starts two executions (generated names) with the same input."""
    sfn = cloud.client("stepfunctions")
    arn = cloud.stack.physical_id("ReserveCapacityStateMachine")
    event = _requested_event(cloud, request)
    for name in ("delivery-1", "delivery-2"):
        sfn.start_execution(stateMachineArn=arn, name=name, input=event)


def _reserve_statuses(cloud: LocalCloud) -> list[str]:
    return sorted(
        e.status for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")
    )


def test_one_reservation_requested_delivered_twice_buys_one_capacity_block() -> None:
    # Given the purchase call takes a few seconds, so the two executions overlap inside it
    faults = FaultInjector(
        [
            FaultRule(
                service="ec2", operation="PurchaseCapacityBlock", kind=FaultKind.LATENCY, latency_seconds=5
            )
        ]
    )
    with make_cloud(faults=faults, market=ONLY_US_EAST_1) as cloud:
        create_launch_templates(cloud)

        # When one ReservationRequested is delivered twice (same event id)
        _start_twice(cloud, ec2_request())
        cloud.run_until_idle()

        # Then one block is bought and recorded once; the second execution stood aside quietly
        assert len(blocks(cloud)) == 1
        seen = states(cloud, REQUEST_ID)
        assert seen.count("PURCHASED") == 1
        assert in_order(seen, LIFECYCLE), seen
        assert _reserve_statuses(cloud) == ["SUCCEEDED", "SUCCEEDED"]
        assert len(instances(cloud)) == 2
        assert cloud.billable_resources() == []


def test_one_reservation_requested_delivered_twice_buys_one_training_plan() -> None:
    with make_cloud() as cloud:
        _start_twice(cloud, base_request())
        cloud.run_until_idle()

        assert len(training_plans(cloud)) == 1
        seen = states(cloud, SAGEMAKER_ID)
        assert seen.count("PURCHASED") == 1
        assert seen.count("REQUESTED") == 1
        assert in_order(seen, LIFECYCLE), seen
        assert cloud.billable_resources() == []


@pytest.mark.parametrize("operation", ["CreateTrainingPlan", "DescribeTrainingPlan"])
def test_a_purchase_lambda_stopped_right_after_create_training_plan_records_the_plan_once(
    operation: str,
) -> None:
    # Given the purchase Lambda dies right after CreateTrainingPlan took effect (or right after reading the
    # plan back), before PURCHASE is written
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation=operation, kind=FaultKind.KILL_CALLER, times=1)]
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()

        purchase_runs = [r for r in cloud.lambdas.records if r.function.endswith("PurchaseCapacityFunction")]
        assert purchase_runs[0].error_type == "Sandbox.Timedout"
        # Then the step was retried, found the plan by its name, and recorded it once, with its release
        plans = training_plans(cloud)
        assert len(plans) == 1
        creates = [c for c in cloud.dispatcher.calls if c.operation == "CreateTrainingPlan"]
        assert len(creates) == 1
        seen = states(cloud, SAGEMAKER_ID)
        assert in_order(seen, LIFECYCLE), seen
        purchased = next(i for i in ledger_items(cloud, SAGEMAKER_ID) if i.get("state") == "PURCHASED")
        assert Decimal(purchased["money_usd"]) == Decimal(plans[0]["UpfrontFee"])
        assert cloud.billable_resources() == []


def _purchase_item(cloud: LocalCloud) -> dict[str, Any] | None:
    return next((i for i in ledger_items(cloud, SAGEMAKER_ID) if i["sk"] == "PURCHASE"), None)


@pytest.mark.parametrize(
    ("operation", "minutes"),
    [("DescribeEndpoint", 30), ("DescribeTrainingPlan", 60)],
)
def test_a_throttling_outage_after_the_purchase_never_ends_the_paid_reservation(
    operation: str, minutes: int
) -> None:
    faults = FaultInjector()
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: _purchase_item(cloud) is not None)
        purchase = _purchase_item(cloud)
        assert purchase is not None

        # Given, from the plan's start, `operation` is throttled for `minutes`: longer than botocore's and
        # the state machine's retries together
        start = parse_utc(purchase["start_time"])
        faults.add(
            FaultRule(
                service="sagemaker",
                operation=operation,
                kind=FaultKind.THROTTLE,
                not_before=start,
                not_after=start + timedelta(minutes=minutes),
            )
        )
        cloud.run_until_idle()

        assert any(f.operation == operation and f.at >= start for f in faults.fired)
        # Then the reservation was kept: served, released at its end, never FAILED
        seen = states(cloud, SAGEMAKER_ID)
        assert "FAILED" not in seen
        assert in_order(seen, LIFECYCLE), seen
        degraded = [i for i in ledger_items(cloud, SAGEMAKER_ID) if i["sk"].startswith(f"{DEGRADED}#")]
        assert degraded, "the outage outlasted the step's retries and was recorded"
        assert _reserve_statuses(cloud) == ["SUCCEEDED"]
        assert cloud.billable_resources() == []
        # A person hears of it once the step has kept failing for 30 minutes past its own retries
        assert ("delayed" in slack_texts(cloud)) == (minutes >= 60)


def test_a_post_under_slow_aws_answers_503_before_api_gateway_stops_waiting_and_its_retry_202() -> None:
    # Given every AWS call answering in 3.9 s for a minute (under the API's 4 s read timeout) and one DynamoDB
    # call hanging past it (retried): the POST's calls together take longer than API Gateway's 29 s (soak
    # seed 602: 25 answers 502)
    slow = FaultRule(kind=FaultKind.LATENCY, latency_seconds=3.9, not_after=START + timedelta(minutes=1))
    hang = FaultRule(service="dynamodb", kind=FaultKind.HANG, times=1)
    with make_cloud(faults=FaultInjector([slow, hang])) as cloud:
        # When a reservation is POSTed
        answer = post_reservation(cloud, base_request())
        # Then the door answers 503 "try again" within its time, not a Lambda stopped at its timeout (502)
        assert answer["statusCode"] == 503, answer["body"]
        assert "left of the invocation" in answer["json"]["message"]
        assert answer["json"]["message"].endswith("try again in a few seconds")
        # And the same POST a few minutes later is accepted, the request recorded once
        cloud.run(until=cloud.now() + timedelta(minutes=3))
        again = post_reservation(cloud, base_request())
        assert again["statusCode"] == 202, again["body"]
        assert [i["sk"] for i in ledger_items(cloud, SAGEMAKER_ID)].count("REQUEST") == 1
