"""How the emulator's alarms treat missing data: every row of the two tables of "How alarm state is evaluated
when data is missing" (CloudWatch user guide, "Configuring how CloudWatch alarms treat missing data"), and
what follows for an alarm created over a metric without datapoints."""

from __future__ import annotations

from datetime import timedelta

import boto3
import pytest
import time_machine

from localcloud.emulator import Emulator
from localcloud.emulator.alarms import AlarmSpec, evaluate
from localcloud.emulator.cloudwatch import Datapoint, put_metric
from tests.localcloud.emulator.support import START, run_clock

SPEC = AlarmSpec(
    name="a",
    namespace="N",
    metric_name="M",
    dimensions={},
    statistic="Maximum",
    period=60,
    evaluation_periods=3,
    datapoints_to_alarm=3,
    threshold=10.0,
    comparison="GreaterThanThreshold",
    treat_missing="missing",
    metric_id="m1",
)
KEEP = None
"""``ignore`` with too few datapoints: the alarm retains its current state."""


def row(text: str) -> list[Datapoint]:
    """The guide's notation, oldest first: ``0`` not breaching, ``X`` breaching, ``-`` missing; the last of
    the five periods ends at ``START``."""
    values = {"0": 1.0, "X": 11.0}
    first = START - timedelta(minutes=5)
    return [
        Datapoint(first + timedelta(minutes=index, seconds=5), values[mark], values[mark], values[mark], 1.0)
        for index, mark in enumerate(text.split())
        if mark != "-"
    ]


# (datapoints, MISSING, IGNORE, BREACHING, NOT BREACHING), as the guide lists them.
THREE_OF_THREE = [
    ("0 - X - X", "OK", "OK", "OK", "OK"),
    ("0 - - - -", "OK", "OK", "OK", "OK"),
    ("- - - - -", "INSUFFICIENT_DATA", KEEP, "ALARM", "OK"),
    ("0 X X - X", "ALARM", "ALARM", "ALARM", "ALARM"),
    ("- - - - X", "INSUFFICIENT_DATA", KEEP, "ALARM", "OK"),
    ("X - - - -", "ALARM", KEEP, "ALARM", "OK"),
]
TWO_OF_THREE = [
    ("0 - X - X", "ALARM", "ALARM", "ALARM", "ALARM"),
    ("0 0 X 0 X", "ALARM", "ALARM", "ALARM", "ALARM"),
    ("0 - X - -", "OK", "OK", "ALARM", "OK"),
    ("- - - - 0", "OK", "OK", "ALARM", "OK"),
    ("- - - - X", "INSUFFICIENT_DATA", KEEP, "ALARM", "OK"),
]
TREATMENTS = ("missing", "ignore", "breaching", "notBreaching")


@pytest.mark.parametrize(("wanted", "table"), [(3, THREE_OF_THREE), (2, TWO_OF_THREE)])
def test_the_user_guide_tables_row_by_row(wanted: int, table: list[tuple[str, ...]]) -> None:
    """Each row of the guide's 3-of-3 and 2-of-3 tables gives the guide's state for each
    ``TreatMissingData`` (the evaluation range holds 5 periods, as in the guide)."""
    for text, *expected in table:
        for treatment, state in zip(TREATMENTS, expected, strict=True):
            spec = AlarmSpec(**{**SPEC.__dict__, "treat_missing": treatment, "datapoints_to_alarm": wanted})
            assert evaluate(spec, row(text), START).state == state, (text, treatment)


def test_enough_real_datapoints_make_the_treatment_irrelevant_and_the_most_recent_count() -> None:
    """The guide: "If some data points in the evaluation range are missing, but the number of existing data
    points retrieved is equal to or more than the alarm's Evaluation Periods, CloudWatch evaluates the alarm
    state based on the most recent existing data points" (same guide section)."""
    evaluation = evaluate(SPEC, row("0 X X - X"), START)
    assert evaluation.present() == [11.0, 11.0, 11.0]
    assert [start for start, _value, _count in evaluation.evaluated] == [
        START - timedelta(minutes=4),
        START - timedelta(minutes=3),
        START - timedelta(minutes=1),
    ]


def put_alarm(name: str, treatment: str, *, periods: int = 15) -> None:
    boto3.client("cloudwatch", region_name="us-east-1").put_metric_alarm(
        AlarmName=name,
        Namespace="AWS/SageMaker",
        MetricName="InvocationsPerCopy",
        Dimensions=[{"Name": "InferenceComponentName", "Value": "model-a"}],
        Statistic="Sum",
        Period=60,
        EvaluationPeriods=periods,
        DatapointsToAlarm=periods,
        Threshold=4.5,
        ComparisonOperator="LessThanThreshold",
        TreatMissingData=treatment,
    )


def states(*names: str) -> dict[str, str]:
    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms(AlarmNames=list(names))
    return {alarm["AlarmName"]: alarm["StateValue"] for alarm in alarms["MetricAlarms"]}


def test_minutes_before_an_alarm_existed_are_missing_not_low(
    emulator: Emulator, clock: time_machine.Traveller
) -> None:
    """A 15-of-15 "low" alarm created over a metric without datapoints: with ``missing`` it stays
    ``INSUFFICIENT_DATA`` (no datapoint is no value, before or after its creation); only ``breaching`` turns
    the empty minutes into low ones, at once. With real low datapoints, ``missing`` needs 15 of them."""
    put_alarm("low-missing", "missing")
    put_alarm("low-breaching", "breaching")
    run_clock(emulator, clock, START, START + timedelta(minutes=2))
    assert states("low-missing", "low-breaching") == {
        "low-missing": "INSUFFICIENT_DATA",
        "low-breaching": "ALARM",
    }
    seen = []
    for minute in range(2, 18):
        put_metric(
            "123456789012",
            "us-east-1",
            namespace="AWS/SageMaker",
            name="InvocationsPerCopy",
            dimensions={"InferenceComponentName": "model-a"},
            value=1.0,
            at=START + timedelta(minutes=minute, seconds=10),
        )
        run_clock(emulator, clock, START + timedelta(minutes=minute), START + timedelta(minutes=minute + 1))
        seen.append(states("low-missing")["low-missing"])
    # One low datapoint after 14 missing ones is not 15 low ones: the data is just starting.
    assert seen[0] == "INSUFFICIENT_DATA"
    assert "OK" not in seen
    assert seen.index("ALARM") == 14  # the 15th low minute
