"""``python -m localcloud run``: event detection, the printed story, exit statuses."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from localcloud.cli import ProgressLine, event_kind, event_time, format_timeline, main, merge_siblings
from localcloud.clock import RunProgress
from localcloud.timeline import Kind, TimelineEntry

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
RETRY_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:fixture-RetryStateMachine"


def write(tmp_path: Path, document: object, name: str = "event.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def run(*args: str) -> int:
    return main(["run", *args, "--template", str(TEMPLATE), "--stack-name", "fixture"])


def test_event_kinds_are_detected() -> None:
    assert event_kind({"httpMethod": "POST", "path": "/items"}) == "api"
    assert event_kind({"source": "a", "detail-type": "b", "detail": {}}) == "eventbridge"
    assert event_kind({"Source": "a", "DetailType": "b", "Detail": "{}"}) == "put_events"
    assert event_kind({"Entries": []}) == "put_events"
    assert event_kind({"ScheduleExpression": "at(2026-12-01T09:00:00)", "Target": {}}) == "schedule"
    assert event_kind({"kind": "failure"}) == "unknown"


def test_the_virtual_start_is_the_events_own_time() -> None:
    assert event_time({"requestContext": {"requestTimeEpoch": 1795953600000}}) == datetime(
        2026, 11, 29, 12, 0, tzinfo=UTC
    )
    assert event_time({"time": "2026-12-01T08:00:00Z"}) == datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    assert event_time({"detail": {}}) is None


def test_an_api_event_runs_to_completion_and_prints_the_story(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    event = {
        "httpMethod": "POST",
        "path": "/items",
        "body": json.dumps({"n": 3}),
        "requestContext": {"requestTimeEpoch": 1795953600000},
    }

    status = run(str(write(tmp_path, event)))
    out = capsys.readouterr().out

    assert status == 0
    assert "virtual start 2026-11-29T12:00:00Z" in out
    assert "2026-11-29T12:00:00Z  api        POST /items -> 202" in out
    assert "2026-12-29T12:00:00Z  execution  PipelineStateMachine: execution" in out
    assert "PipelineStateMachine  " in out.split("== Executions", 1)[1]
    assert "SUCCEEDED" in out.split("== Executions", 1)[1]
    assert "== Billable resources left\n  none" in out
    assert out.rstrip().splitlines()[-2] == "  ok"


def test_a_failed_execution_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schedule = {
        "Name": "once",
        "ScheduleExpression": "at(2026-12-01T09:00:00)",
        "Target": {
            "Arn": RETRY_MACHINE,
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps({"mode": "datetime"}),
        },
    }

    status = run(str(write(tmp_path, schedule)), "--start", "2026-12-01T08:00:00Z")
    out = capsys.readouterr().out

    assert status == 1
    assert "schedule default/once (at(2026-12-01T09:00:00)) fired -> state machine RetryStateMachine" in out
    assert "DatetimeFunction -> failed: Runtime.MarshalError" in out
    assert "FAILED: execution" in out
    assert "MarshalFailed" in out


def test_a_function_can_be_invoked_directly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = run(str(write(tmp_path, {"text": "hi there"})), "--function", "NotifyFunction")
    out = capsys.readouterr().out

    assert status == 0
    assert "== Slack messages: 1 (in the timeline above)" in out
    assert "2026-12-01T08:00:00Z  slack      [chat.postMessage #capacity] FIXTURE\n" in out
    assert "\n                                 *hi there*\n" in out


def test_usage_errors_exit_2_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(str(write(tmp_path, {"kind": "failure"}))) == 2
    assert "pass --function NAME" in capsys.readouterr().err

    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "Resources:\n  P:\n    Type: AWS::SSM::Parameter\n    Properties:\n      Type: String\n"
        "      Value: !GetAtt Nope.Arn\n",
        encoding="utf-8",
    )
    event = write(tmp_path, {"httpMethod": "GET", "path": "/"})
    assert main(["run", str(event), "--template", str(broken)]) == 2
    assert "Resources.P.Properties.Value" in capsys.readouterr().err


def test_a_market_file_that_is_not_market_settings_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    market = tmp_path / "market.json"
    market.write_text('{"sold_out": {"us-east-1/ml.p5.48xlarge": ["2026-12-10"]}}', encoding="utf-8")
    event = write(tmp_path, {"httpMethod": "GET", "path": "/"})
    assert main(["run", str(event), "--market", str(market)]) == 2
    assert "--market" in (err := capsys.readouterr().err)
    assert "sold_out" in err


def test_the_hang_limit_must_be_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    event = write(tmp_path, {"text": "hi"})
    assert run(str(event), "--function", "NotifyFunction", "--stall-seconds", "0") == 2
    assert "--stall-seconds must be positive" in capsys.readouterr().err


def test_the_progress_line_shows_virtual_time_and_the_hang_limit() -> None:
    cloud = SimpleNamespace(lambdas=SimpleNamespace(records=[object(), object(), object()]))
    stream = io.StringIO()
    line = ProgressLine(cloud, mode="always", stream=stream)  # type: ignore[arg-type]
    at = datetime(2026, 12, 8, 11, 41, tzinfo=UTC)
    line(RunProgress(now=at, steps=3, wall_seconds=4.0, still_seconds=0.0, stall_seconds=600))
    assert stream.getvalue() == ""  # not a terminal: one line every 10 s
    line(RunProgress(now=at, steps=9, wall_seconds=12.0, still_seconds=7.0, stall_seconds=600))
    assert stream.getvalue() == (
        "   .. virtual 2026-12-08T11:41:00Z, 3 invocation(s), 12 s; no progress for 7 s (limit 600 s)\n"
    )
    quiet = io.StringIO()
    ProgressLine(cloud, mode="never", stream=quiet)(  # type: ignore[arg-type]
        RunProgress(now=at, steps=9, wall_seconds=60.0, still_seconds=0.0, stall_seconds=600)
    )
    assert quiet.getvalue() == ""


def test_a_repeated_block_of_lines_is_printed_once_with_its_count() -> None:
    start = datetime(2026, 12, 8, 11, 42, tzinfo=UTC)
    alarm = "CloudWatch Alarm State Change [alarmName=x/idle, state=ALARM] -> ScaleComponents"
    ok = "CloudWatch Alarm State Change [alarmName=x/idle, state=OK] -> ScaleComponents"
    entries = [TimelineEntry(start, Kind.NOTE, "stack deployed")]
    for minute in range(15):
        at = start + timedelta(minutes=minute)
        entries += [TimelineEntry(at, Kind.EVENT, alarm), TimelineEntry(at, Kind.EVENT, ok)]
    entries += [TimelineEntry(start + timedelta(hours=1), Kind.NOTE, "done")] * 2

    text = format_timeline(entries, verbose=False)

    assert text.splitlines() == [
        "2026-12-08T11:42:00Z  note       stack deployed",
        f"2026-12-08T11:42:00Z  event      {alarm}",
        f"2026-12-08T11:42:00Z  event      {ok}",
        " " * 24 + "...        the 2 lines above repeated 14 more time(s), until 2026-12-08T11:56:00Z",
        "2026-12-08T12:42:00Z  note       done",  # twice is not a run
        "2026-12-08T12:42:00Z  note       done",
    ]
    assert len(format_timeline(entries, verbose=True).splitlines()) == len(entries)


def test_lines_of_one_second_that_differ_in_one_word_are_one_line_naming_the_variants() -> None:
    at = datetime(2026, 12, 8, 11, 56, tzinfo=UTC)
    alarm = "Alarm State Change [alarmName=co/llama-3-8b-{}/idle, state={}] -> ScaleComponents"
    schedule = "schedule release/co-idle-{} (at(2026-12-08T11:56:00)) fired -> bus"
    due = "IdleAlarmDue on bus [request_id=r] -> ScaleComponentsIdleAlarmDue"
    entries = [
        TimelineEntry(at, Kind.SCHEDULE, schedule.format("0da2265435")),
        TimelineEntry(at, Kind.EVENT, due),
        TimelineEntry(at, Kind.SCHEDULE, schedule.format("678a9a4738")),
        TimelineEntry(at, Kind.EVENT, due),
        TimelineEntry(at, Kind.EVENT, alarm.format("eu", "ALARM")),
        TimelineEntry(at, Kind.EVENT, alarm.format("us", "ALARM")),
        TimelineEntry(at, Kind.EVENT, alarm.format("eu", "OK")),  # a status that differs is a change
        TimelineEntry(at, Kind.API, "POST /reservations -> 202"),
        TimelineEntry(at, Kind.API, "POST /reservations -> 409"),  # only events and schedules merge
        TimelineEntry(at + timedelta(seconds=1), Kind.EVENT, alarm.format("us", "OK")),  # another second
    ]

    texts = [entry.text for entry in merge_siblings(entries)]

    assert texts == [
        schedule.format("{0da2265435, 678a9a4738}"),
        due + " (x2)",
        alarm.format("{eu, us}", "ALARM"),
        alarm.format("eu", "OK"),
        "POST /reservations -> 202",
        "POST /reservations -> 409",
        alarm.format("us", "OK"),
    ]
    assert format_timeline(entries, verbose=True).count("\n") == len(entries) - 1  # verbose shows them all
