"""LocalCloud end to end on the fixture stack: rules, executions, Lambda semantics, schedules, API, faults."""

from __future__ import annotations

import gc
import importlib
import json
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.utils import TMP_THREADS

from localcloud import cloud as cloud_module
from localcloud import patches
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)  # a Tuesday


def make_cloud(**kwargs: Any) -> LocalCloud:
    return LocalCloud(TEMPLATE, start=START, stack_name="fixture", **kwargs)


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    with make_cloud() as running:
        yield running


def lambda_payloads(cloud: LocalCloud, function: str) -> list[tuple[datetime, Any]]:
    """(start, result) of each finished invocation of a fixture function."""
    name = f"fixture-{function}"
    return [(r.start, json.loads(r.payload)) for r in cloud.lambdas.records if r.function == name]


# ----------------------------------------------------------------------------------- Step Functions


def test_a_rule_starts_a_thirty_day_workflow_on_the_virtual_clock(cloud: LocalCloud) -> None:
    began = time.monotonic()
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
    result = cloud.run_until_idle()
    elapsed = time.monotonic() - began

    # Not a speed target (make bench prints those): a bound that sleeping through any real wait would break.
    assert elapsed < 60.0
    (execution,) = cloud.executions()
    assert execution.state_machine == "fixture-PipelineStateMachine"
    assert execution.status == "SUCCEEDED"
    assert execution.input == '{"n": 1}'  # the rule's InputPath $.detail
    assert json.loads(execution.output or "") == {
        "n": 4,
        "started_at": "2026-12-01T08:00:00Z",
        "finished_at": "2026-12-31T08:00:00Z",
    }
    assert execution.transitions == 3
    assert execution.stop == START + timedelta(days=30)
    assert result.now == START + timedelta(days=30)


def test_a_named_error_is_retried_with_backoff(cloud: LocalCloud) -> None:
    sfn = cloud.client("stepfunctions")
    machine = cloud.stack.physical_id("RetryStateMachine")

    sfn.start_execution(stateMachineArn=machine, input=json.dumps({"mode": "flaky", "key": "k1"}))
    cloud.run_until_idle()

    (execution,) = cloud.executions()
    assert execution.status == "SUCCEEDED"
    assert json.loads(execution.output or "") == {"key": "k1", "attempts": 3}
    attempts = cloud.lambdas.records
    flaky = [r for r in attempts if r.function == "fixture-FlakyFunction"]
    assert [r.error_type for r in flaky] == ["TransientError", "TransientError", None]
    # IntervalSeconds 60, BackoffRate 2: the retries run 60 s and then 120 s after the failures.
    assert [r.start - START for r in flaky] == [timedelta(0), timedelta(seconds=60), timedelta(seconds=180)]


def test_retries_exhausted_reach_the_catch() -> None:
    with make_cloud(parameter_overrides={"FailTimes": "10"}) as cloud:
        sfn = cloud.client("stepfunctions")
        sfn.start_execution(
            stateMachineArn=cloud.stack.physical_id("RetryStateMachine"),
            input=json.dumps({"mode": "flaky", "key": "k2"}),
        )
        cloud.run_until_idle()

        (execution,) = cloud.executions()
        flaky = [r for r in cloud.lambdas.records if r.function == "fixture-FlakyFunction"]

    assert (execution.status, execution.error) == ("FAILED", "GaveUp")
    assert len(flaky) == 4  # the first attempt and MaxAttempts 3 retries


def test_a_handler_returning_a_datetime_fails_like_lambda(cloud: LocalCloud) -> None:
    answer = cloud.client("lambda").invoke(FunctionName="fixture-DatetimeFunction", Payload=b"{}")
    error = json.loads(answer["Payload"].read())

    assert answer["StatusCode"] == 200
    assert answer["FunctionError"] == "Unhandled"
    assert error["errorType"] == "Runtime.MarshalError"
    assert error["errorMessage"].startswith("Unable to marshal response")

    cloud.client("stepfunctions").start_execution(
        stateMachineArn=cloud.stack.physical_id("RetryStateMachine"), input=json.dumps({"mode": "datetime"})
    )
    cloud.run_until_idle()
    (execution,) = cloud.executions()
    assert (execution.status, execution.error) == ("FAILED", "MarshalFailed")


# ------------------------------------------------------------------------------------------ schedules


def test_cron_schedule_fires_at_the_right_instants(cloud: LocalCloud) -> None:
    cloud.run(until=START + timedelta(days=7))

    weekday = [f.at for f in cloud.scheduler.firings if f.name == "default/TickFunctionWeekdayMorning"]
    # 09:00 in Paris is 08:00 UTC in December; created at Tuesday 08:00, so Wednesday is the first.
    assert weekday == [
        datetime(2026, 12, 2, 8, 0, tzinfo=UTC),
        datetime(2026, 12, 3, 8, 0, tzinfo=UTC),
        datetime(2026, 12, 4, 8, 0, tzinfo=UTC),
        datetime(2026, 12, 7, 8, 0, tzinfo=UTC),
        datetime(2026, 12, 8, 8, 0, tzinfo=UTC),
    ]
    received = [result["received"] for _, result in lambda_payloads(cloud, "TickFunction")]
    assert {"reason": "weekday-morning", "at": "2026-12-04T08:00:00Z"} in received
    rate = [f.at for f in cloud.scheduler.firings if f.name == "fixture-TickFunctionEverySixHours"]
    assert rate[:3] == [START + timedelta(hours=6 * k) for k in (1, 2, 3)]
    assert len(rate) == 28
    assert received.count({"reason": "rate"}) == 28


def test_a_one_time_schedule_keeps_the_run_going_until_it_fires(cloud: LocalCloud) -> None:
    result = cloud.run_until_idle()

    assert result.now == datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
    assert [r for _, r in lambda_payloads(cloud, "RecorderFunction")] == [
        {"received": {"reason": "one-time report"}}
    ]


def test_schedules_created_at_run_time_fire_to_an_event_bus_and_are_deleted(cloud: LocalCloud) -> None:
    scheduler = cloud.client("scheduler")
    scheduler.create_schedule(
        Name="release-r1",
        ScheduleExpression="at(2026-12-05T11:30:00)",
        FlexibleTimeWindow={"Mode": "OFF"},
        ActionAfterCompletion="DELETE",
        Target={
            "Arn": cloud.stack.arn("Bus"),
            "RoleArn": "arn:aws:iam::123456789012:role/scheduler",
            "Input": json.dumps({"id": "r1", "size": 64}),
            "EventBridgeParameters": {"DetailType": "ItemRecorded", "Source": "test.app"},
        },
    )

    cloud.run(until=datetime(2026, 12, 6, tzinfo=UTC))

    recorded = [(at, r["received"]) for at, r in lambda_payloads(cloud, "RecorderFunction")]
    assert (
        datetime(2026, 12, 5, 11, 30, tzinfo=UTC),
        {"id": "r1", "label": "item r1 is ItemRecorded", "rule": "fixture-RecorderRule"},
    ) in recorded
    names = [s["Name"] for s in scheduler.list_schedules()["Schedules"]]
    assert "release-r1" not in names


# ------------------------------------------------------------------------------------------------- API


def test_api_requests_reach_the_function_as_proxy_events(cloud: LocalCloud) -> None:
    got = cloud.api_request(
        {
            "httpMethod": "GET",
            "path": "/items/42",
            "queryStringParameters": {"verbose": "1"},
            "headers": {},
            "body": None,
        }
    )
    posted = cloud.api_request({"httpMethod": "POST", "path": "/items", "body": json.dumps({"n": 5})})
    missing = cloud.api_request({"httpMethod": "DELETE", "path": "/items/42"})
    cloud.run_until_idle()

    assert got["statusCode"] == 200
    assert json.loads(got["body"]) == {
        "id": "42",
        "query": {"verbose": "1"},
        "stage": "Prod",
        "resource": "/items/{id}",
    }
    assert posted["statusCode"] == 202
    assert missing["statusCode"] == 403
    assert [e.status for e in cloud.executions()] == ["SUCCEEDED"]
    texts = [entry.text for entry in cloud.timeline.entries("api")]
    assert texts[:2] == [
        "GET /items/42",
        'GET /items/42 -> 200 {"id": "42", "query": {"verbose": "1"}, '
        '"stage": "Prod", "resource": "/items/{id}"}',
    ]


# ------------------------------------------------------------------------------------------------ faults


def test_throttling_is_retried_by_botocore() -> None:
    faults = FaultInjector(
        [FaultRule(service="dynamodb", operation="PutItem", kind=FaultKind.THROTTLE, times=2)]
    )
    with make_cloud(faults=faults) as cloud:
        answer = cloud.client("dynamodb").put_item(
            TableName="fixture-StateTable", Item={"pk": {"S": "a"}, "sk": {"S": "b"}}
        )
        calls = cloud.dispatcher.counts["dynamodb.PutItem"]
        kinds = [entry.text for entry in cloud.timeline.entries("fault")]

    assert answer["ResponseMetadata"]["RetryAttempts"] == 2
    assert calls == 3
    assert kinds == ["throttle on dynamodb PutItem", "throttle on dynamodb PutItem"]


def test_server_errors_are_retried_then_surface() -> None:
    faults = FaultInjector([FaultRule(service="dynamodb", operation="GetItem", kind=FaultKind.SERVER_ERROR)])
    with make_cloud(faults=faults) as cloud:
        with pytest.raises(ClientError) as raised:
            cloud.client("dynamodb").get_item(
                TableName="fixture-StateTable", Key={"pk": {"S": "a"}, "sk": {"S": "b"}}
            )
        calls = cloud.dispatcher.counts["dynamodb.GetItem"]

    assert raised.value.response["Error"]["Code"] == "InternalFailure"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert calls == 6  # standard retry mode: the first attempt and max_attempts=5 retries


def test_latency_moves_virtual_time() -> None:
    faults = FaultInjector(
        [FaultRule(service="dynamodb", operation="DescribeTable", kind=FaultKind.LATENCY, latency_seconds=50)]
    )
    with make_cloud(faults=faults) as cloud:
        before = cloud.now()
        cloud.client("dynamodb").describe_table(TableName="fixture-StateTable")
        after = cloud.now()

    assert after - before == timedelta(seconds=50)  # within botocore's default 60 s read timeout


def test_crash_after_commit_takes_effect_and_the_retry_repeats_it() -> None:
    faults = FaultInjector(
        [FaultRule(service="dynamodb", operation="UpdateItem", kind=FaultKind.CRASH_AFTER_COMMIT, times=1)]
    )
    with make_cloud(faults=faults) as cloud:
        dynamodb = cloud.client("dynamodb")
        dynamodb.update_item(
            TableName="fixture-StateTable",
            Key={"pk": {"S": "counter"}, "sk": {"S": "c"}},
            UpdateExpression="ADD hits :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        item = dynamodb.get_item(
            TableName="fixture-StateTable", Key={"pk": {"S": "counter"}, "sk": {"S": "c"}}
        )

    # The first call committed although the caller saw a timeout; botocore's retry committed again.
    assert item["Item"]["hits"] == {"N": "2"}


def test_faults_reach_calls_made_inside_functions() -> None:
    faults = FaultInjector(
        [FaultRule(service="dynamodb", operation="UpdateItem", kind=FaultKind.THROTTLE, times=1)]
    )
    with make_cloud(faults=faults) as cloud:
        answer = cloud.client("lambda").invoke(FunctionName="fixture-FlakyFunction", Payload=b'{"key": "x"}')
        error = json.loads(answer["Payload"].read())

    assert error["errorType"] == "TransientError"  # the throttled call was retried, then counted attempt 1
    assert [f.kind for f in faults.fired] == [FaultKind.THROTTLE]


# ---------------------------------------------------------------------------------------- the story


def test_slack_messages_are_captured_and_in_the_timeline(cloud: LocalCloud) -> None:
    answer = cloud.client("lambda").invoke(
        FunctionName="fixture-NotifyFunction", Payload=b'{"text": "hello"}'
    )

    assert "FunctionError" not in answer
    (message,) = cloud.outbox.messages
    assert (message.kind, message.channel, message.text) == ("chat.postMessage", "#capacity", "hello")
    assert [entry.text for entry in cloud.timeline.entries("slack")] == [
        "[chat.postMessage #capacity] FIXTURE\n*hello*"
    ]


def test_the_timeline_tells_the_story_in_order(cloud: LocalCloud) -> None:
    cloud.api_request({"httpMethod": "POST", "path": "/items", "body": json.dumps({"n": 2})})
    cloud.run_until_idle()

    story = [
        (entry.kind, entry.text) for entry in cloud.timeline.entries("api", "event", "execution", "lambda")
    ]
    kinds = [kind for kind, _ in story]
    # An invocation is told when it ends: what the function did comes first.
    assert kinds[:6] == ["api", "event", "execution", "lambda", "api", "lambda"]
    assert story[0] == ("api", "POST /items")
    assert (
        story[1][1] == "PipelineRequested (test.app) on fixture-bus -> PipelineStateMachinePipelineRequested"
    )
    assert story[3] == ("lambda", "ApiFunction -> ok")
    assert story[-1][1].endswith("SUCCEEDED after 3 state transitions")
    rendered = cloud.timeline.render("api")
    assert rendered.startswith("2026-12-01T08:00:00Z  api        POST /items")


def test_teardown_restores_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    with make_cloud() as first:
        first.put_events(
            [{"EventBusName": "fixture-bus", "Source": "test.app", "DetailType": "X", "Detail": "{}"}]
        )
        assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
    assert "AWS_ACCESS_KEY_ID" not in os.environ
    assert not patches.installed()

    with make_cloud() as second:
        assert second.client("events").list_rules(EventBusName="fixture-bus")["Rules"]
        assert second.executions() == []
    assert first.executions() == []


def test_a_thread_of_a_stopped_cloud_cannot_act_on_the_next_one() -> None:
    # Given a thread started while the first cloud ran (a handler's), held until after it stopped
    go = threading.Event()
    outcome: list[str] = []

    def stray() -> None:
        go.wait()
        try:
            boto3.client("events", region_name="us-east-1").list_rules(EventBusName="fixture-bus")
            outcome.append("called the next cloud")
        except BaseException as error:  # what stopped it is the assertion
            outcome.append(type(error).__name__)

    with make_cloud():
        thread = threading.Thread(target=stray, name="stray", daemon=True)
        thread.start()

    # When it calls AWS while the next cloud runs
    with make_cloud() as second:
        go.set()
        thread.join(30)
        # Then its call is refused (moto's state is the process's: it would read or write the second cloud)
        assert outcome == ["StrayThreadError"]
        assert second.client("events").list_rules(EventBusName="fixture-bus")["Rules"]


@dataclass
class _Stopping:
    """A cloud stopping (in ``stopper``) while ``thread`` computes; once ``finish`` is set the thread makes
    its next wait, and ``resumed`` is set if it ever comes back from it."""

    cloud: LocalCloud
    thread: threading.Thread
    stopper: threading.Thread
    finish: threading.Event
    resumed: threading.Event


def _stop_while_computing(next_wait: Callable[[LocalCloud], None]) -> _Stopping:
    computing, finish, resumed = threading.Event(), threading.Event(), threading.Event()
    cloud = make_cloud()

    def handler_like() -> None:
        computing.set()
        while not finish.is_set():  # running code, not waiting on anything the clock knows
            time.sleep(0.01)
        next_wait(cloud)
        resumed.set()

    cloud.start()
    thread = threading.Thread(target=handler_like, name="handler-like", daemon=True)
    thread.start()
    computing.wait(10)
    stopper = threading.Thread(target=cloud.stop, name="stopper", daemon=True)
    stopper.start()
    return _Stopping(cloud, thread, stopper, finish, resumed)


def test_a_stopping_cloud_waits_for_a_running_thread_and_abandons_it_at_its_next_wait() -> None:
    # Given a thread of the cloud still computing (a handler on a busy machine) when the cloud stops, whose
    # next wait is the clock's (a retry's back-off, a Wait state)
    stopping = _stop_while_computing(lambda cloud: cloud.clock.sleep(1))

    # Then the stop does not return while the thread runs, and it returns once the thread reached its wait
    stopping.stopper.join(0.5)
    assert stopping.stopper.is_alive()
    stopping.finish.set()
    stopping.stopper.join(60)
    assert not stopping.stopper.is_alive()
    assert not stopping.cloud.running
    # and the thread never resumes: the finished simulation does not run on in real time
    assert not stopping.resumed.wait(1.5)
    assert stopping.thread.is_alive()


@pytest.mark.parametrize(
    "module_name",
    ["botocore.endpoint", "moto.stepfunctions.parser.asl.component.common.retry.retrier_decl"],
    ids=["botocore-retry-backoff", "step-functions-retry-interval"],
)
def test_a_thread_that_backs_off_after_the_cloud_stopped_is_abandoned_there(module_name: str) -> None:
    # Given a thread of the cloud still computing when the cloud stops, whose next wait is a retry's
    # back-off through the module's patched time.sleep
    module = importlib.import_module(module_name)
    stopping = _stop_while_computing(lambda _cloud: module.time.sleep(1))
    stopping.finish.set()
    stopping.stopper.join(60)
    # Then the back-off is where it stays: it does not sleep in real time and run on
    assert not stopping.cloud.running
    assert not stopping.resumed.wait(2.5)
    assert stopping.thread.is_alive()


def test_a_stopped_cloud_is_freed_even_with_an_execution_abandoned_mid_wait() -> None:
    # Given a cloud stopped while its thirty-day workflow waits in a Wait state (its thread is abandoned)
    stopped = make_cloud()
    with stopped:
        stopped.put_events(
            [
                {
                    "EventBusName": "fixture-bus",
                    "Source": "test.app",
                    "DetailType": "PipelineRequested",
                    "Detail": "{}",
                }
            ]
        )
        stopped.run(until=START + timedelta(days=1))
        assert [e.status for e in stopped.executions()] == ["RUNNING"]
    assert TMP_THREADS == []  # moto's list of every interpreter thread it started
    freed = weakref.ref(stopped)
    del stopped

    # When the garbage collector runs
    gc.collect()

    # Then nothing keeps the cloud (moto's thread list, the abandoned clock's hooks kept every one: the
    # process of a test suite or a soak grew by a cloud per test, and full collections took seconds)
    assert freed() is None


def test_after_deploy_steps_run_with_physical_ids_and_a_failing_one_stops_the_start(tmp_path: Path) -> None:
    # Given after-deploy scripts (what a deployer runs after sam deploy): one that lists the bus it is
    # given, one naming a resource the stack lacks, and, for a second cloud, one that fails
    lister = tmp_path / "list_rules.py"
    lister.write_text(
        "import sys, boto3\n"
        "rules = boto3.client('events').list_rules(EventBusName=sys.argv[2])['Rules']\n"
        "print(sys.argv[1], sys.argv[2], len(rules) > 0)\n"
    )
    failing = tmp_path / "fail.py"
    failing.write_text("import sys\nprint('no table')\nraise SystemExit(3)\n")
    cloud = make_cloud()
    cloud.stack.local_values["AfterDeploy"] = [
        {"script": str(lister), "args": ["--bus", "${Bus}"]},
        {"script": str(failing), "args": ["${NoSuchResource}"]},
    ]
    # When the cloud starts
    with cloud:
        notes = [entry.text for entry in cloud.timeline.entries() if "after deploy" in entry.text]
    # Then the first ran against the deployed bus (its physical name) and the second was skipped
    assert notes == ["after deploy: list_rules.py: --bus fixture-bus True"]

    broken = make_cloud()
    broken.stack.local_values["AfterDeploy"] = [{"script": str(failing), "args": []}]
    with pytest.raises(RuntimeError, match=r"after-deploy step fail.py exited 3: no table"):
        broken.start()
    assert not broken.running
    assert not patches.installed()


def test_the_second_cloud_of_a_process_freezes_what_stays_and_nothing_of_the_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a process whose first cloud stopped (other tests may have run clouds already: start afresh)
    monkeypatch.setattr(cloud_module, "_CLOUDS_STOPPED", threading.Event())
    monkeypatch.setattr(cloud_module, "_FROZEN", threading.Event())
    gc.unfreeze()
    with make_cloud() as first:
        first.put_events(
            [
                {
                    "EventBusName": "fixture-bus",
                    "Source": "test.app",
                    "DetailType": "PipelineRequested",
                    "Detail": "{}",
                }
            ]
        )
        first.run(until=START + timedelta(days=1))
    gone = weakref.ref(first)
    del first
    assert gc.get_freeze_count() == 0
    # When the next cloud starts
    with make_cloud():
        frozen = gc.get_freeze_count()
    # Then what stayed is out of the collector's way, and the first cloud was collected, not frozen
    assert frozen > 100_000
    assert gone() is None


def test_a_running_cloud_collects_garbage_less_often_and_puts_the_thresholds_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given CPython's thresholds
    before = gc.get_threshold()
    monkeypatch.delenv("LOCALCLOUD_NO_GC_FREEZE", raising=False)
    gc.set_threshold(2000, 10, 10)
    try:
        # When a cloud runs, its youngest generation is collected less often (the older ones: the same ratios)
        with make_cloud():
            assert gc.get_threshold() == (cloud_module.GC_YOUNG_THRESHOLD, 10, 10)
        # Then the thresholds are put back when it stops
        assert gc.get_threshold() == (2000, 10, 10)
        # and LOCALCLOUD_NO_GC_FREEZE=1 leaves them alone
        monkeypatch.setenv("LOCALCLOUD_NO_GC_FREEZE", "1")
        with make_cloud():
            assert gc.get_threshold() == (2000, 10, 10)
    finally:
        gc.set_threshold(*before)
