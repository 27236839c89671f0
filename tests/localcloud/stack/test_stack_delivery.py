"""EventBridge delivery: envelope, pattern matching on moto's rules, Input/InputPath/InputTransformer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest

from localcloud.delivery import EventDelivery, json_path, render_input_template, target_input
from localcloud.timeline import Timeline

EVENT: dict[str, Any] = {
    "version": "0",
    "id": "6a7e8feb-b491-4cf7-a9f1-bf3703467718",
    "detail-type": "EC2 Instance State-change Notification",
    "source": "aws.ec2",
    "account": "123456789012",
    "time": "2026-12-01T08:00:00Z",
    "region": "us-east-1",
    "resources": ["arn:aws:ec2:us-east-1:123456789012:instance/i-1"],
    "detail": {"instance-id": "i-1", "state": "running", "tags": [{"k": "a"}, {"k": "b"}], "size": 12},
}


def test_json_path_supports_eventbridge_subset() -> None:
    assert json_path(EVENT, "$.detail.instance-id") == "i-1"
    assert json_path(EVENT, "$.resources[0]") == "arn:aws:ec2:us-east-1:123456789012:instance/i-1"
    assert json_path(EVENT, "$.detail.tags[*].k") == ["a", "b"]
    assert json_path(EVENT, "$.detail.missing") is None
    assert json_path(EVENT, "$") == EVENT


def test_input_template_quotes_values_outside_strings_and_escapes_inside() -> None:
    template = (
        '{"instance": <instance>, "text": "<instance> is \\"<state>\\"", "missing": <nope>, "size": <size>}'
    )
    values = {"instance": "i-1", "state": 'run"ning', "nope": None, "size": 12}

    rendered = render_input_template(template, values)

    assert json.loads(rendered) == {
        "instance": "i-1",
        "text": 'i-1 is "run"ning"',
        "missing": None,
        "size": 12,
    }


def test_target_input_modes() -> None:
    arn, name = "arn:aws:events:us-east-1:123456789012:rule/r", "r"
    assert target_input({"Input": '{"fixed": 1}'}, EVENT, rule_arn=arn, rule_name=name) == '{"fixed": 1}'
    assert (
        json.loads(target_input({"InputPath": "$.detail"}, EVENT, rule_arn=arn, rule_name=name))
        == EVENT["detail"]
    )
    assert json.loads(target_input({}, EVENT, rule_arn=arn, rule_name=name)) == EVENT

    transformed = target_input(
        {
            "InputTransformer": {
                "InputPathsMap": {"id": "$.detail.instance-id"},
                "InputTemplate": '{"id": <id>, "rule": <aws.events.rule-name>, "event": <aws.events.event>, '
                '"whole": <aws.events.event.json>}',
            }
        },
        EVENT,
        rule_arn=arn,
        rule_name=name,
    )
    document = json.loads(transformed)
    assert document["id"] == "i-1"
    assert document["rule"] == "r"
    assert "detail" not in document["event"]
    assert document["event"]["source"] == "aws.ec2"
    assert document["whole"] == EVENT


@dataclass
class FakeLambdas:
    calls: list[tuple[str, bytes, str]] = field(default_factory=list)

    def invoke(self, name_or_arn: str, payload: bytes, *, invocation_type: str = "RequestResponse") -> Any:
        self.calls.append((name_or_arn, payload, invocation_type))
        return None


@pytest.fixture
def delivery(aws: None) -> Iterator[tuple[EventDelivery, FakeLambdas, Timeline]]:
    del aws
    lambdas = FakeLambdas()
    timeline = Timeline()
    delivery = EventDelivery(
        account_id="123456789012",
        region="us-east-1",
        lambdas=lambdas,
        timeline=timeline,
        now=lambda: datetime(2026, 12, 1, 8, 0, 5, 250_000, tzinfo=UTC),
    )
    delivery.install()
    try:
        yield delivery, lambdas, timeline
    finally:
        delivery.uninstall()


def make_rule(pattern: dict[str, Any], target: dict[str, Any], bus: str = "default", name: str = "r") -> None:
    events: Any = boto3.client("events", region_name="us-east-1")
    if bus != "default":
        events.create_event_bus(Name=bus)
    events.put_rule(Name=name, EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule=name, EventBusName=bus, Targets=[{"Id": "t", **target}])


def test_put_events_reaches_a_lambda_target_with_the_real_envelope(
    delivery: tuple[EventDelivery, FakeLambdas, Timeline],
) -> None:
    _, lambdas, timeline = delivery
    function = "arn:aws:lambda:us-east-1:123456789012:function:f"
    make_rule(
        {"source": ["app"], "detail": {"size": [{"numeric": [">", 10]}]}}, {"Arn": function}, bus="app-bus"
    )
    events = boto3.client("events", region_name="us-east-1")

    answer = events.put_events(
        Entries=[
            {"EventBusName": "app-bus", "Source": "app", "DetailType": "Big", "Detail": '{"size": 11}'},
            {"EventBusName": "app-bus", "Source": "app", "DetailType": "Small", "Detail": '{"size": 3}'},
            {"EventBusName": "app-bus", "Source": "app", "DetailType": "Broken", "Detail": "[1]"},
        ]
    )

    assert answer["FailedEntryCount"] == 1
    assert answer["Entries"][2]["ErrorCode"] == "MalformedDetail"
    assert len(lambdas.calls) == 1
    arn, payload, invocation_type = lambdas.calls[0]
    event = json.loads(payload)
    assert (arn, invocation_type) == (function, "Event")
    assert event == {
        "version": "0",
        "id": answer["Entries"][0]["EventId"],
        "detail-type": "Big",
        "source": "app",
        "account": "123456789012",
        "time": "2026-12-01T08:00:05Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"size": 11},
    }
    texts = [entry.text for entry in timeline.entries("event")]
    assert texts == ["Big (app) on app-bus -> r", "Small (app) on app-bus -> no rule matched"]


def test_disabled_rules_and_other_buses_do_not_receive(
    delivery: tuple[EventDelivery, FakeLambdas, Timeline],
) -> None:
    _, lambdas, _ = delivery
    make_rule({"source": ["app"]}, {"Arn": "arn:aws:lambda:us-east-1:123456789012:function:f"})
    events = boto3.client("events", region_name="us-east-1")
    events.create_event_bus(Name="other")

    events.put_events(Entries=[{"EventBusName": "other", "Source": "app", "DetailType": "X", "Detail": "{}"}])
    events.disable_rule(Name="r")
    events.put_events(Entries=[{"Source": "app", "DetailType": "X", "Detail": "{}"}])

    assert lambdas.calls == []


def test_aws_events_from_the_emulator_reach_the_default_bus(
    delivery: tuple[EventDelivery, FakeLambdas, Timeline],
) -> None:
    sink, lambdas, _ = delivery
    make_rule(
        {"source": ["aws.cloudwatch"], "detail-type": ["CloudWatch Alarm State Change"]},
        {
            "Arn": "arn:aws:lambda:us-east-1:123456789012:function:scale",
            "InputTransformer": {
                "InputPathsMap": {"alarm": "$.detail.alarmName", "state": "$.detail.state.value"},
                "InputTemplate": '{"alarm": <alarm>, "state": <state>}',
            },
        },
    )

    sink.put_aws_event(
        source="aws.cloudwatch",
        detail_type="CloudWatch Alarm State Change",
        detail={"alarmName": "idle", "state": {"value": "ALARM"}},
        resources=["arn:aws:cloudwatch:us-east-1:123456789012:alarm:idle"],
        region="us-east-1",
    )

    assert [json.loads(call[1]) for call in lambdas.calls] == [{"alarm": "idle", "state": "ALARM"}]


def test_a_target_that_does_not_exist_is_recorded(
    delivery: tuple[EventDelivery, FakeLambdas, Timeline],
) -> None:
    sink, _, timeline = delivery
    make_rule({"source": ["app"]}, {"Arn": "arn:aws:states:us-east-1:123456789012:stateMachine:nope"})

    boto3.client("events", region_name="us-east-1").put_events(
        Entries=[{"Source": "app", "DetailType": "X", "Detail": "{}"}]
    )

    assert len(sink.deliveries) == 1
    assert sink.deliveries[0].error is not None
    assert (
        "StartExecution on arn:aws:states:us-east-1:123456789012:stateMachine:nope failed"
        in sink.deliveries[0].error
    )
    # A target that does not exist is not retried (EventBridge user guide); with no DLQ the event is dropped.
    assert [error.code for _, error in sink.dead_letters] == ["NO_RESOURCE"]
    assert sink.next_due(datetime(2026, 12, 1, 8, 0, 5, tzinfo=UTC)) is None
    assert any("dropped (NO_RESOURCE" in entry.text for entry in timeline.entries("note"))
