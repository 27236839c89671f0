"""CloudWatch alarm evaluation: state changes written to moto, the AWS event for each, and no steps when
nothing can change."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
import time_machine

from localcloud.emulator import Emulator
from localcloud.emulator.alarms import (
    LOOKBACK_PERIODS,
    STATISTICS,
    AlarmSpec,
    candidate_boundaries,
    evaluate,
    evaluation_range,
    slide,
)
from localcloud.emulator.cloudwatch import Datapoint
from localcloud.emulator.common import RecordingSink
from tests.localcloud.emulator.support import START, Call, deploy_on_plan, raises_aws, run_clock


def put_no_capacity_alarm(missing: str = "notBreaching") -> str:
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    cloudwatch.put_metric_alarm(
        AlarmName="model-a-no-capacity",
        AlarmDescription="scale model-a out from zero",
        Namespace="AWS/SageMaker",
        MetricName="NoCapacityInvocationFailures",
        Dimensions=[{"Name": "InferenceComponentName", "Value": "model-a"}],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=1,
        ComparisonOperator="GreaterThanOrEqualToThreshold",
        TreatMissingData=missing,
    )
    return "arn:aws:cloudwatch:us-east-1:123456789012:alarm:model-a-no-capacity"


def alarm_state() -> str:
    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms(
        AlarmNames=["model-a-no-capacity"]
    )
    return str(alarms["MetricAlarms"][0]["StateValue"])


def test_no_capacity_alarm_fires_and_recovers_with_aws_shaped_events(
    emulator: Emulator, call: Call, sink: RecordingSink, clock: time_machine.Traveller
) -> None:
    deployed = deploy_on_plan(emulator, clock)
    arn = put_no_capacity_alarm()
    assert alarm_state() == "OK"  # moto's initial state; AWS starts in INSUFFICIENT_DATA
    now = datetime.now(UTC)
    run_clock(emulator, clock, now, now + timedelta(minutes=2))
    call(
        "sagemaker",
        "UpdateInferenceComponentRuntimeConfig",
        InferenceComponentName="model-a",
        DesiredRuntimeConfig={"CopyCount": 0},
    )
    clock.shift(timedelta(minutes=1))
    with raises_aws("ValidationError", "no capacity"):
        call(
            "sagemaker-runtime",
            "InvokeEndpoint",
            EndpointName=deployed.endpoint,
            InferenceComponentName="model-a",
            Body=b"{}",
        )
    now = datetime.now(UTC)
    run_clock(emulator, clock, now, now + timedelta(minutes=10))
    events = sink.of_type("CloudWatch Alarm State Change")
    assert [
        (event["detail"]["previousState"]["value"], event["detail"]["state"]["value"]) for event in events
    ] == [
        ("INSUFFICIENT_DATA", "OK"),
        ("OK", "ALARM"),
        ("ALARM", "OK"),
    ]
    fired = events[1]
    assert fired["source"] == "aws.cloudwatch"
    assert fired["resources"] == [arn]
    assert fired["region"] == "us-east-1"
    detail = fired["detail"]
    assert detail["alarmName"] == "model-a-no-capacity"
    assert detail["state"]["reason"].startswith("Threshold Crossed: 1 out of the last 1 datapoints [1.0 (")
    assert json.loads(detail["state"]["reasonData"])["recentDatapoints"] == [1.0]
    assert detail["state"]["timestamp"].endswith("+0000")
    assert detail["configuration"] == {
        "description": "scale model-a out from zero",
        "metrics": [
            {
                "id": "m1",
                "metricStat": {
                    "metric": {
                        "dimensions": {"InferenceComponentName": "model-a"},
                        "name": "NoCapacityInvocationFailures",
                        "namespace": "AWS/SageMaker",
                    },
                    "period": 60,
                    "stat": "Sum",
                },
                "returnData": True,
            }
        ],
    }
    assert alarm_state() == "OK"


def test_next_due_is_none_when_nothing_can_change(
    emulator: Emulator, clock: time_machine.Traveller, sink: RecordingSink
) -> None:
    put_no_capacity_alarm()
    first = emulator.alarms.next_due(START)
    assert first is not None
    assert first.at == START + timedelta(minutes=1)  # INSUFFICIENT_DATA -> OK at the first boundary
    assert first.foreground is False
    steps = run_clock(emulator, clock, START, START + timedelta(days=30))
    assert steps == 1  # one evaluation in 30 days of idle: not 43,200 one-minute steps
    assert emulator.alarms.next_due(START + timedelta(days=30)) is None
    assert alarm_state() == "OK"
    assert len(sink.of_type("CloudWatch Alarm State Change")) == 1


def test_a_datapoint_makes_the_next_boundary_due(emulator: Emulator, clock: time_machine.Traveller) -> None:
    put_no_capacity_alarm()
    run_clock(emulator, clock, START, START + timedelta(hours=1))
    assert emulator.alarms.next_due(START + timedelta(hours=1)) is None
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
    clock.move_to(START + timedelta(hours=1, seconds=20))
    cloudwatch.put_metric_data(
        Namespace="AWS/SageMaker",
        MetricData=[
            {
                "MetricName": "NoCapacityInvocationFailures",
                "Value": 1,
                "Dimensions": [{"Name": "InferenceComponentName", "Value": "model-a"}],
            }
        ],
    )
    due = emulator.alarms.next_due(START + timedelta(hours=1, seconds=20))
    assert due is not None
    assert due.at == START + timedelta(hours=1, minutes=1)


def test_missing_data_keeps_insufficient_data_without_events(
    emulator: Emulator, clock: time_machine.Traveller, sink: RecordingSink
) -> None:
    put_no_capacity_alarm(missing="missing")
    assert emulator.alarms.next_due(START) is None
    run_clock(emulator, clock, START, START + timedelta(days=1))
    assert alarm_state() == "INSUFFICIENT_DATA"
    assert sink.events == []


SPEC = AlarmSpec(
    name="a",
    namespace="N",
    metric_name="M",
    dimensions={},
    statistic="Average",
    period=60,
    evaluation_periods=3,
    datapoints_to_alarm=2,
    threshold=10.0,
    comparison="GreaterThanThreshold",
    treat_missing="missing",
    metric_id="m1",
)


def points(*values: float | None) -> list[Datapoint]:
    return [
        Datapoint(START + timedelta(minutes=index, seconds=5), value, value, value, 1.0)
        for index, value in enumerate(values)
        if value is not None
    ]


@pytest.mark.parametrize(
    ("values", "missing", "expected"),
    [
        ((11.0, 12.0, 1.0), "missing", "ALARM"),  # 2 of 3 breach: DatapointsToAlarm 2
        ((11.0, 1.0, 1.0), "missing", "OK"),
        ((None, None, None), "missing", "INSUFFICIENT_DATA"),
        ((None, None, None), "ignore", None),  # keeps its state
        ((None, 11.0, None), "breaching", "ALARM"),
        ((None, 11.0, None), "notBreaching", "OK"),
        ((None, 11.0, 11.0), "missing", "ALARM"),
    ],
)
def test_m_out_of_n_and_treat_missing_data(
    values: tuple[float | None, ...], missing: str, expected: str | None
) -> None:
    spec = AlarmSpec(**{**SPEC.__dict__, "treat_missing": missing})
    assert evaluate(spec, points(*values), START + timedelta(minutes=3)).state == expected


@pytest.mark.parametrize(
    ("statistic", "expected"),
    [("Sum", 30.0), ("Average", 10.0), ("Maximum", 20.0), ("Minimum", 4.0), ("SampleCount", 3.0)],
)
def test_statistics_per_period(statistic: str, expected: float) -> None:
    spec = AlarmSpec(
        **{**SPEC.__dict__, "statistic": statistic, "evaluation_periods": 1, "datapoints_to_alarm": 1}
    )
    minute = [
        Datapoint(START + timedelta(seconds=second), value, value, value, 1.0)
        for second, value in ((1, 6.0), (20, 20.0), (40, 4.0))
    ]
    assert evaluate(spec, minute, START + timedelta(minutes=1)).present() == [expected]


def test_set_alarm_state_sends_its_event_and_the_next_evaluation_corrects_it(
    emulator: Emulator, clock: time_machine.Traveller, sink: RecordingSink
) -> None:
    put_no_capacity_alarm()
    run_clock(emulator, clock, START, START + timedelta(minutes=5))
    boto3.client("cloudwatch", region_name="us-east-1").set_alarm_state(
        AlarmName="model-a-no-capacity", StateValue="ALARM", StateReason="testing the scale-out path"
    )
    due = emulator.alarms.next_due(START + timedelta(minutes=5))
    assert due is not None
    assert due.foreground  # it follows from a call: deliver it now
    run_clock(emulator, clock, START + timedelta(minutes=5), START + timedelta(minutes=7))
    events = sink.of_type("CloudWatch Alarm State Change")
    assert [
        (event["detail"]["previousState"]["value"], event["detail"]["state"]["value"]) for event in events
    ] == [
        ("INSUFFICIENT_DATA", "OK"),
        ("OK", "ALARM"),
        ("ALARM", "OK"),
    ]
    assert events[1]["detail"]["state"]["reason"] == "testing the scale-out path"


def _boundaries_by_definition(
    spec: AlarmSpec, points: list[Datapoint], after: datetime, until: datetime | None
) -> list[datetime]:
    """candidate_boundaries' docstring, spelled out: the first boundary after ``after``, and for every period
    holding data the boundaries 1 to span + 1 periods after its start, within ``(after, until]``."""
    period = timedelta(seconds=spec.period)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    first = epoch + ((after - epoch) // period) * period + period
    span = spec.evaluation_periods + LOOKBACK_PERIODS
    found = {first}
    for point in points:
        start = epoch + ((point.at - epoch) // period) * period
        found.update(start + step * period for step in range(1, span + 2))
    return sorted(m for m in found if m > after and (until is None or m <= until))


@pytest.mark.parametrize("seed", range(40))
def test_candidate_boundaries_are_those_of_the_definition_in_time_order(seed: int) -> None:
    import random

    rng = random.Random(seed)  # noqa: S311 - a reproducible test series, not a secret
    period = rng.choice([60, 300])
    spec = AlarmSpec(
        name="a", namespace="n", metric_name="m", dimensions={}, statistic="Sum", period=period,
        evaluation_periods=rng.randint(1, 15), datapoints_to_alarm=1, threshold=1.0,
        comparison="GreaterThanThreshold", treat_missing="missing", metric_id="m1",
    )  # fmt: skip
    moments = sorted(START + timedelta(seconds=rng.randint(0, 6 * 3600)) for _ in range(rng.randint(0, 60)))
    points = [Datapoint(at, 1.0, 1.0, 1.0, 1.0) for at in moments]
    after = START + timedelta(seconds=rng.randint(-600, 6 * 3600))
    until = None if rng.random() < 0.3 else after + timedelta(seconds=rng.randint(0, 4 * 3600))

    assert list(candidate_boundaries(spec, points, after, until)) == _boundaries_by_definition(
        spec, points, after, until
    )


@pytest.mark.parametrize("seed", range(20))
def test_a_range_slid_boundary_by_boundary_is_the_range_computed_afresh(seed: int) -> None:
    import random

    rng = random.Random(seed)  # noqa: S311 - a reproducible test series, not a secret
    period = rng.choice([60, 300])
    evaluation_periods = rng.randint(1, 15)
    spec = AlarmSpec(
        name="a", namespace="n", metric_name="m", dimensions={}, statistic=rng.choice(sorted(STATISTICS)),
        period=period, evaluation_periods=evaluation_periods,
        datapoints_to_alarm=rng.randint(1, evaluation_periods), threshold=rng.uniform(0, 5),
        comparison="GreaterThanThreshold", treat_missing=rng.choice(["missing", "ignore", "breaching"]),
        metric_id="m1",
    )  # fmt: skip
    moments = sorted(
        START + timedelta(seconds=rng.uniform(0, 40 * period)) for _ in range(rng.randint(0, 80))
    )
    points = [Datapoint(at, value, value, value, 1.0) for at in moments for value in [rng.uniform(0, 10)]]
    at = START + timedelta(seconds=period)
    periods = evaluation_range(spec, points, at)

    for _ in range(45):
        later = at + timedelta(seconds=period)
        slid = slide(spec, points, periods, at, later)

        assert slid == evaluation_range(spec, points, later)
        assert evaluate(spec, points, later, periods=slid) == evaluate(spec, points, later)
        periods, at = slid, later
    assert slide(spec, points, periods, at, at + 2 * timedelta(seconds=period)) is None  # not the next one
