"""Delivery faults on a running LocalCloud (fixture stack): schedules fired twice or retried, an operator's
StopExecution of a running execution, and Scheduler refusing a one-time schedule in the past."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
ROLE = "arn:aws:iam::123456789012:role/scheduler"


def make_cloud(*rules: FaultRule, **kwargs: Any) -> LocalCloud:
    return LocalCloud(
        TEMPLATE, start=START, stack_name="fixture", faults=FaultInjector(list(rules), seed=5), **kwargs
    )


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    with make_cloud() as running:
        yield running


def recorded(cloud: LocalCloud) -> list[Any]:
    return [
        json.loads(r.payload)["received"]
        for r in cloud.lambdas.records
        if r.function == "fixture-RecorderFunction" and r.error_type is None
    ]


def schedule(cloud: LocalCloud, expression: str, name: str = "once", **target: Any) -> None:
    cloud.client("scheduler").create_schedule(
        Name=name,
        ScheduleExpression=expression,
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": cloud.stack.arn("RecorderFunction"), "RoleArn": ROLE, **target},
    )


# ------------------------------------------------------------------------------------------- Scheduler


def test_scheduler_refuses_a_one_time_schedule_in_the_past(cloud: LocalCloud) -> None:
    with pytest.raises(ClientError) as refused:
        schedule(cloud, "at(2026-12-01T07:59:00)", Input="{}")

    assert refused.value.response["Error"]["Code"] == "ValidationException"
    assert "must be in the future" in refused.value.response["Error"]["Message"]
    # In another time zone the same wall clock can be in the future: 07:59 in New York is 12:59 UTC.
    client = cloud.client("scheduler")
    client.create_schedule(
        Name="ny",
        ScheduleExpression="at(2026-12-01T07:59:00)",
        ScheduleExpressionTimezone="America/New_York",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": cloud.stack.arn("RecorderFunction"), "RoleArn": ROLE, "Input": "{}"},
    )
    with pytest.raises(ClientError, match="must be in the future"):  # UpdateSchedule is checked too
        client.update_schedule(
            Name="ny",
            ScheduleExpression="at(2026-12-01T07:59:00)",
            FlexibleTimeWindow={"Mode": "OFF"},
            Target={"Arn": cloud.stack.arn("RecorderFunction"), "RoleArn": ROLE, "Input": "{}"},
        )
    assert client.get_schedule(Name="ny")["ScheduleExpressionTimezone"] == "America/New_York"


def test_a_schedule_firing_may_be_delivered_twice() -> None:
    with make_cloud(
        FaultRule(service="scheduler", operation="twice", kind=FaultKind.DUPLICATE_DELIVERY)
    ) as cloud:
        schedule(cloud, "at(2026-12-01T09:00:00)", name="twice", Input='{"n": 1}')
        cloud.run(until=START + timedelta(hours=2))

        assert recorded(cloud) == [{"n": 1}, {"n": 1}]
        assert [(f.service, f.kind) for f in cloud.faults.fired] == [
            ("scheduler", FaultKind.DUPLICATE_DELIVERY)
        ]


def test_a_refused_firing_is_retried_with_the_attempt_number() -> None:
    with make_cloud(FaultRule(service="scheduler", kind=FaultKind.DELIVERY_FAILURE, times=1)) as cloud:
        schedule(cloud, "at(2026-12-01T09:00:00)", Input='{"attempt": "<aws.scheduler.attempt-number>"}')
        cloud.run(until=START + timedelta(hours=2))

        assert recorded(cloud) == [{"attempt": "2"}]
        (late,) = [r for r in cloud.lambdas.records if r.function == "fixture-RecorderFunction"]
        assert late.start > datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


# ------------------------------------------------------------------------------------ StopExecution


def _pipeline_requested(cloud: LocalCloud) -> None:
    cloud.put_events(
        [
            {
                "EventBusName": "fixture-bus",
                "Source": "test.app",
                "DetailType": "PipelineRequested",
                "Detail": json.dumps({"n": 1}),
            }
        ]
    )


def test_an_operator_aborts_the_execution_a_delivery_started() -> None:
    abort = FaultRule(
        service="eventbridge",
        operation="PipelineRequested",
        kind=FaultKind.ABORT_EXECUTION,
        delay_seconds=3600,
    )
    with make_cloud(abort) as cloud:
        _pipeline_requested(cloud)
        cloud.run_until_idle()

        (execution,) = cloud.executions()
        assert execution.status == "ABORTED"
        assert execution.stop == START + timedelta(hours=1)  # in the thirty-day Wait
        steps = [r.function for r in cloud.lambdas.records if r.function.startswith("fixture-Step")]
        assert steps == ["fixture-StepOneFunction"]  # StepTwo never ran


def test_a_duplicate_delivery_to_a_state_machine_starts_a_second_execution() -> None:
    duplicate = FaultRule(
        service="eventbridge", operation="PipelineRequested", kind=FaultKind.DUPLICATE_DELIVERY
    )
    with make_cloud(duplicate) as cloud:
        _pipeline_requested(cloud)
        cloud.run(until=START + timedelta(hours=1))

        executions = cloud.executions()
        assert len(executions) == 2
        assert len({e.name for e in executions}) == 2  # EventBridge generates each name
        assert {e.input for e in executions} == {'{"n": 1}'}


def _start_flaky(cloud: LocalCloud) -> str:
    sfn = cloud.client("stepfunctions")
    answer = sfn.start_execution(
        stateMachineArn=cloud.stack.arn("RetryStateMachine"), name="flaky-1", input=json.dumps({"key": "k"})
    )
    return str(answer["executionArn"])


def test_stop_execution_during_a_retry_interval_ends_it_aborted_without_the_retry(cloud: LocalCloud) -> None:
    arn = _start_flaky(cloud)
    cloud.run(until=START + timedelta(seconds=30))  # the Retry waits 60 s

    cloud.client("stepfunctions").stop_execution(executionArn=arn, error="Operator", cause="stopped by hand")
    cloud.run_until_idle()

    (execution,) = cloud.executions()
    assert execution.status == "ABORTED"
    flaky = [r for r in cloud.lambdas.records if r.function == "fixture-FlakyFunction"]
    assert len(flaky) == 1  # the failed attempt was not retried after the stop


def test_stop_execution_while_its_lambda_runs_does_not_retry_that_lambda() -> None:
    slow = FaultRule(
        service="dynamodb", operation="UpdateItem", kind=FaultKind.LATENCY, latency_seconds=5, times=1
    )
    with make_cloud(slow) as cloud:
        arn = _start_flaky(cloud)
        cloud.run(until=START + timedelta(seconds=2))
        assert [r.function for r in cloud.lambdas.records] == []  # the Lambda is still in its slow call

        cloud.client("stepfunctions").stop_execution(executionArn=arn)
        cloud.run_until_idle()

        (execution,) = cloud.executions()
        assert execution.status == "ABORTED"
        flaky = [r for r in cloud.lambdas.records if r.function == "fixture-FlakyFunction"]
        assert [r.error_type for r in flaky] == ["TransientError"]  # it ran to its end, once
