"""Delivery as AWS promises it: at least once, possibly late, retried per the target's RetryPolicy, then
to its dead-letter queue; one default bus per region, cross-region bus targets with their role.

Each test shows a behaviour the local cloud used to be kinder about (exactly once, in order, never
failing, one bus for every region): on the old delivery each fails.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from localcloud.delivery import BACKOFF_CAP_SECONDS, EventDelivery
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.timeline import Timeline

ACCOUNT = "123456789012"
FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:f"
T0 = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


@dataclass
class FakeLambdas:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def invoke(self, name_or_arn: str, payload: bytes, *, invocation_type: str = "RequestResponse") -> Any:
        assert invocation_type == "Event"
        self.calls.append((name_or_arn, json.loads(payload)))
        return None


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


@dataclass
class World:
    delivery: EventDelivery
    lambdas: FakeLambdas
    faults: FaultInjector
    clock: Clock
    timeline: Timeline

    def run_for(self, seconds: float) -> None:
        """Advance the fake clock, running every pending delivery on the way (as the virtual clock does)."""
        end = self.clock.now + timedelta(seconds=seconds)
        while True:
            due = self.delivery.next_due(self.clock.now)
            if due is None or due.at > end:
                break
            self.clock.now = due.at
            self.delivery.advance(self.clock.now)
        self.clock.now = end

    def notes(self) -> list[str]:
        return [entry.text for entry in self.timeline.entries("note")]


@pytest.fixture
def world(aws: None) -> Iterator[World]:
    del aws
    lambdas, faults, clock, timeline = FakeLambdas(), FaultInjector(seed=3), Clock(), Timeline()
    delivery = EventDelivery(
        account_id=ACCOUNT,
        region="us-east-1",
        lambdas=lambdas,
        timeline=timeline,
        now=clock,
        faults=faults,
    )
    delivery.install()
    try:
        yield World(delivery, lambdas, faults, clock, timeline)
    finally:
        delivery.uninstall()


def rule(target: dict[str, Any], *, region: str = "us-east-1", name: str = "r", source: str = "app") -> None:
    events: Any = boto3.client("events", region_name=region)
    events.put_rule(Name=name, EventPattern=json.dumps({"source": [source]}))
    events.put_targets(Rule=name, Targets=[{"Id": "t", **target}])


def put(detail: dict[str, Any], *, region: str = "us-east-1") -> str:
    answer = boto3.client("events", region_name=region).put_events(
        Entries=[{"Source": "app", "DetailType": "Thing", "Detail": json.dumps(detail)}]
    )
    return str(answer["Entries"][0]["EventId"])


def queue(name: str = "dlq") -> tuple[str, str]:
    sqs: Any = boto3.client("sqs", region_name="us-east-1")
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def received(url: str) -> list[dict[str, Any]]:
    sqs: Any = boto3.client("sqs", region_name="us-east-1")
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"])
    return list(messages.get("Messages", []))


# ----------------------------------------------------------------------------------- at least once


def test_a_duplicate_delivery_hands_the_same_event_to_the_target_twice(world: World) -> None:
    rule({"Arn": FUNCTION})
    world.faults.add(FaultRule(service="eventbridge", operation="Thing", kind=FaultKind.DUPLICATE_DELIVERY))

    event_id = put({"n": 1})

    assert [payload["id"] for _, payload in world.lambdas.calls] == [event_id, event_id]
    assert [f.kind for f in world.faults.fired] == [FaultKind.DUPLICATE_DELIVERY]


def test_a_delayed_delivery_is_overtaken_by_a_later_event(world: World) -> None:
    rule({"Arn": FUNCTION})
    world.faults.add(
        FaultRule(service="eventbridge", kind=FaultKind.DELAYED_DELIVERY, delay_seconds=300, times=1)
    )

    first = put({"n": 1})
    world.run_for(60)
    second = put({"n": 2})
    assert [payload["id"] for _, payload in world.lambdas.calls] == [second]

    world.run_for(600)

    assert [payload["id"] for _, payload in world.lambdas.calls] == [second, first]
    # The late event is the same event: its time is when it was put, not when it arrived.
    assert world.lambdas.calls[1][1]["time"] == "2026-12-01T08:00:00Z"


def test_duplicate_and_delay_together_redeliver_the_event_late(world: World) -> None:
    rule({"Arn": FUNCTION})
    world.faults.add(FaultRule(service="eventbridge", kind=FaultKind.DUPLICATE_DELIVERY, times=1))
    world.faults.add(
        FaultRule(service="eventbridge", kind=FaultKind.DELAYED_DELIVERY, delay_seconds=1140, times=1)
    )

    event_id = put({"n": 1})
    assert len(world.lambdas.calls) == 1
    world.run_for(1200)

    assert [payload["id"] for _, payload in world.lambdas.calls] == [event_id, event_id]


def test_lambda_may_run_one_asynchronous_invocation_twice(world: World) -> None:
    rule({"Arn": FUNCTION})
    world.faults.add(FaultRule(service="lambda", operation="f", kind=FaultKind.DUPLICATE_DELIVERY))

    event_id = put({"n": 1})

    assert [payload["id"] for _, payload in world.lambdas.calls] == [event_id, event_id]
    assert [(f.service, f.operation) for f in world.faults.fired] == [("lambda", "f")]


# ------------------------------------------------------------------------------ retries and the DLQ


def test_a_refused_delivery_is_retried_with_backoff_and_then_delivered(world: World) -> None:
    rule({"Arn": FUNCTION})
    world.faults.add(FaultRule(service="eventbridge", kind=FaultKind.DELIVERY_FAILURE, times=2))

    event_id = put({"n": 1})
    assert world.lambdas.calls == []
    world.run_for(3600)

    assert [payload["id"] for _, payload in world.lambdas.calls] == [event_id]
    attempts = [d for d in world.delivery.deliveries if d.event_id == event_id]
    assert [d.attempt for d in attempts] == [1, 2, 3]
    assert [d.error is None for d in attempts] == [False, False, True]
    waits = [(b.at - a.at).total_seconds() for a, b in itertools.pairwise(attempts)]
    assert all(0 < wait <= BACKOFF_CAP_SECONDS for wait in waits)


def test_retries_exhausted_send_the_event_to_the_dead_letter_queue(world: World) -> None:
    url, arn = queue()
    rule(
        {
            "Arn": FUNCTION,
            "RetryPolicy": {"MaximumRetryAttempts": 2, "MaximumEventAgeInSeconds": 3600},
            "DeadLetterConfig": {"Arn": arn},
        }
    )
    world.faults.add(FaultRule(service="eventbridge", kind=FaultKind.DELIVERY_FAILURE))

    event_id = put({"n": 1})
    world.run_for(7200)

    assert world.lambdas.calls == []
    assert len([d for d in world.delivery.deliveries if d.event_id == event_id]) == 3
    (message,) = received(url)
    assert json.loads(message["Body"])["id"] == event_id
    attributes = {key: value["StringValue"] for key, value in message["MessageAttributes"].items()}
    assert attributes["ERROR_CODE"] == "THROTTLING"
    assert attributes["EXHAUSTED_RETRY_CONDITION"] == "MaximumRetryAttempts"
    assert attributes["RETRY_ATTEMPTS"] == "2"
    assert attributes["RULE_ARN"] == f"arn:aws:events:us-east-1:{ACCOUNT}:rule/r"
    assert attributes["TARGET_ARN"] == FUNCTION


def test_the_event_age_limit_ends_the_retries(world: World) -> None:
    url, arn = queue()
    rule(
        {
            "Arn": FUNCTION,
            "RetryPolicy": {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 60},
            "DeadLetterConfig": {"Arn": arn},
        }
    )
    world.faults.add(FaultRule(service="eventbridge", kind=FaultKind.DELIVERY_FAILURE))

    put({"n": 1})
    world.run_for(3600)

    (message,) = received(url)
    attributes = {key: value["StringValue"] for key, value in message["MessageAttributes"].items()}
    assert attributes["EXHAUSTED_RETRY_CONDITION"] == "MaximumEventAgeInSeconds"
    assert int(attributes["RETRY_ATTEMPTS"]) < 10


def test_a_missing_target_goes_to_the_dead_letter_queue_without_retries(world: World) -> None:
    url, arn = queue()
    rule(
        {
            "Arn": f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:gone",
            "RoleArn": _role("events-to-states"),
            "DeadLetterConfig": {"Arn": arn},
        }
    )

    put({"n": 1})
    world.run_for(3600)

    (message,) = received(url)
    attributes = {key: value["StringValue"] for key, value in message["MessageAttributes"].items()}
    assert (attributes["ERROR_CODE"], attributes["RETRY_ATTEMPTS"]) == ("NO_RESOURCE", "0")
    assert "EXHAUSTED_RETRY_CONDITION" not in attributes


# ------------------------------------------------------------------------------------------ regions


def _role(name: str) -> str:
    iam: Any = boto3.client("iam", region_name="us-east-1")
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "events.amazonaws.com"}, "Action": "sts:AssumeRole"}
        ],
    }
    return str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"])


def test_aws_events_go_to_the_default_bus_of_the_region_where_the_resource_lives(world: World) -> None:
    rule({"Arn": FUNCTION}, source="aws.cloudwatch")

    world.delivery.put_aws_event(
        source="aws.cloudwatch",
        detail_type="CloudWatch Alarm State Change",
        detail={"alarmName": "a", "state": {"value": "ALARM"}},
        resources=[f"arn:aws:cloudwatch:us-east-2:{ACCOUNT}:alarm:a"],
        region="us-east-2",
    )

    assert world.lambdas.calls == []  # the rule lives on us-east-1's default bus


def test_a_cross_region_bus_target_delivers_the_same_event_there(world: World) -> None:
    home = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/app"
    boto3.client("events", region_name="us-east-1").create_event_bus(Name="app")
    events: Any = boto3.client("events", region_name="us-east-1")
    events.put_rule(Name="home", EventBusName="app", EventPattern=json.dumps({"source": ["aws.cloudwatch"]}))
    events.put_targets(Rule="home", EventBusName="app", Targets=[{"Id": "f", "Arn": FUNCTION}])
    rule({"Arn": home, "RoleArn": _role("forwarder")}, region="us-east-2", source="aws.cloudwatch")

    world.delivery.put_aws_event(
        source="aws.cloudwatch",
        detail_type="CloudWatch Alarm State Change",
        detail={"alarmName": "a"},
        resources=[],
        region="us-east-2",
    )

    ((_, event),) = world.lambdas.calls
    assert (event["region"], event["source"]) == ("us-east-2", "aws.cloudwatch")
    assert any("(us-east-2)" in entry.text for entry in world.timeline.entries("event"))


def test_a_cross_region_bus_target_without_a_role_delivers_nothing(world: World) -> None:
    boto3.client("events", region_name="us-east-1").create_event_bus(Name="app")
    events: Any = boto3.client("events", region_name="us-east-1")
    events.put_rule(Name="home", EventBusName="app", EventPattern=json.dumps({"source": ["app"]}))
    events.put_targets(Rule="home", EventBusName="app", Targets=[{"Id": "f", "Arn": FUNCTION}])
    rule({"Arn": f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/app"}, region="us-east-2")

    put({"n": 1}, region="us-east-2")

    assert world.lambdas.calls == []
    assert [error.code for _, error in world.delivery.dead_letters] == ["NO_PERMISSIONS"]


def test_a_role_that_does_not_exist_cannot_deliver(world: World) -> None:
    rule({"Arn": f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/default", "RoleArn": "arn:aws:iam::1:role/x"})

    put({"n": 1}, region="us-east-1")

    assert [error.code for _, error in world.delivery.dead_letters] == ["NO_PERMISSIONS"]


def test_no_caller_may_put_an_event_with_an_aws_source(world: World) -> None:
    rule({"Arn": FUNCTION}, source="aws.cloudwatch")

    answer = boto3.client("events", region_name="us-east-1").put_events(
        Entries=[{"Source": "aws.cloudwatch", "DetailType": "CloudWatch Alarm State Change", "Detail": "{}"}]
    )

    assert answer["FailedEntryCount"] == 1
    assert answer["Entries"][0]["ErrorCode"] == "NotAuthorizedForSourceException"
    assert world.lambdas.calls == []
