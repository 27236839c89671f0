"""The in-process Lambda runtime: context, environment, JSON round trip, errors, async invocations."""

from __future__ import annotations

import base64
import importlib.machinery
import json
import os
import threading
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.clock import VirtualClock
from localcloud.contracts import AwsError
from localcloud.faults import FaultKind, FaultRule
from localcloud.lambdas import ASYNC_PAYLOAD_LIMIT_BYTES, LambdaRuntime, marshal_response
from tests.localcloud.runtime.rt_support import SECRET_ID, START, Harness, function_spec, running_harness


def test_handler_gets_a_lambda_context_and_its_own_environment(harness: Harness) -> None:
    # When
    result = harness.lambdas.invoke("rt-context_echo", b'{"x": 1}')

    # Then
    body = json.loads(result.payload)
    assert result.status_code == 200
    assert result.function_error is None
    assert body["event"] == {"x": 1}
    assert body["function_name"] == "rt-context_echo"
    assert body["function_version"] == "$LATEST"
    assert body["invoked_function_arn"] == "arn:aws:lambda:us-east-1:123456789012:function:rt-context_echo"
    assert body["memory_limit_in_mb"] == "256"  # a string, as on AWS
    assert body["log_group_name"] == "/aws/lambda/rt-context_echo"
    assert body["log_stream_name"].startswith("2026/03/02/[$LATEST]")
    assert body["aws_request_id"] == result.request_id
    assert body["remaining_ms"] == 30_000  # no virtual time has passed
    assert body["stage"] == "stage-of-context_echo"
    assert body["import_stage"] == "stage-of-context_echo"  # set during import too
    assert body["function_env"] == "rt-context_echo"
    assert body["region"] == "us-east-1"
    # and the process environment is back as it was
    assert "STAGE" not in os.environ
    assert os.environ.get("AWS_LAMBDA_FUNCTION_NAME") is None


def test_request_ids_are_reproducible_from_the_seed(harness: Harness) -> None:
    first = harness.lambdas.invoke("rt-hello", b"{}").request_id

    assert first == "6513270e-269e-4d37-b2a7-4de452e6b438"


def test_returning_a_datetime_fails_like_lambda(harness: Harness) -> None:
    result = harness.lambdas.invoke("rt-returns_datetime", b"{}")

    error = json.loads(result.payload)
    assert result.function_error == "Unhandled"
    assert error["errorType"] == "Runtime.MarshalError"
    assert (
        error["errorMessage"]
        == "Unable to marshal response: Object of type datetime is not JSON serializable"
    )
    assert harness.lambdas.records[-1].error_type == "Runtime.MarshalError"


def test_an_exception_becomes_the_runtime_error_object(harness: Harness) -> None:
    result = harness.lambdas.invoke("rt-flaky", b'{"failures": 1, "error": "TransientError"}')

    error = json.loads(result.payload)
    assert result.function_error == "Unhandled"
    assert error["errorType"] == "TransientError"
    assert error["errorMessage"] == "attempt 1 failed"
    assert error["requestId"] == result.request_id
    assert any("raise error(" in line for line in error["stackTrace"])
    assert "[ERROR] TransientError: attempt 1 failed" in result.log


def test_decimal_results_are_json_numbers_as_the_python_runtime_writes_them() -> None:
    assert (
        marshal_response({"fee": Decimal("830.590"), "count": Decimal(2)}) == b'{"fee": 830.590, "count": 2}'
    )


def test_invalid_json_input_is_an_unmarshal_error(harness: Harness) -> None:
    result = harness.lambdas.invoke("rt-hello", b"{not json")

    assert json.loads(result.payload)["errorType"] == "Runtime.UnmarshalError"


def test_handler_output_is_captured_in_the_invocation_log(
    harness: Harness, capsys: pytest.CaptureFixture[str]
) -> None:
    result = harness.lambdas.invoke("rt-printer", b'{"message": "quiet please"}')

    assert "printing quiet please" in result.log
    assert result.log.startswith(f"START RequestId: {result.request_id} Version: $LATEST")
    assert "REPORT RequestId:" in result.log
    assert "quiet please" not in capsys.readouterr().out


def test_unknown_function_is_resource_not_found(harness: Harness) -> None:
    with pytest.raises(AwsError) as caught:
        harness.lambdas.invoke("no-such-function", b"{}")

    assert caught.value.code == "ResourceNotFoundException"
    assert caught.value.status == 404


def test_async_payload_over_one_megabyte_is_rejected(harness: Harness) -> None:
    payload = json.dumps({"blob": "x" * ASYNC_PAYLOAD_LIMIT_BYTES}).encode()

    with pytest.raises(AwsError) as caught:
        harness.lambdas.invoke("rt-hello", payload, invocation_type="Event")

    assert caught.value.code == "RequestTooLargeException"
    assert caught.value.status == 413


def test_boto3_invoke_reaches_the_function_with_payload_error_and_log_tail(harness: Harness) -> None:
    client = harness.client("lambda")

    ok = client.invoke(FunctionName="rt-hello", Payload=b'{"name": "boto"}', LogType="Tail")
    failed = client.invoke(
        FunctionName=harness.arn("flaky"), Payload=json.dumps({"failures": 1, "error": "FatalError"})
    )

    assert ok["StatusCode"] == 200
    assert json.loads(ok["Payload"].read())["greeting"] == "hello boto"
    assert "FunctionError" not in ok
    assert base64.b64decode(ok["LogResult"]).decode().startswith("START RequestId:")
    assert ok["ExecutedVersion"] == "$LATEST"
    assert failed["FunctionError"] == "Unhandled"
    assert json.loads(failed["Payload"].read())["errorType"] == "FatalError"


def test_boto3_invoke_of_an_unknown_function_gets_lambdas_error(harness: Harness) -> None:
    with pytest.raises(ClientError) as caught:
        harness.client("lambda").invoke(FunctionName="rt-missing", Payload=b"{}")

    assert caught.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_event_invocation_answers_202_and_runs_on_a_worker_thread(harness: Harness) -> None:
    ran_on: list[str] = []
    harness.lambdas.add_listener(lambda record: ran_on.append(threading.current_thread().name))

    answer = harness.client("lambda").invoke(FunctionName="rt-hello", InvocationType="Event", Payload=b"{}")
    harness.clock.run_until_idle()

    assert answer["StatusCode"] == 202
    assert answer["Payload"].read() == b""
    assert len(ran_on) == 1
    assert ran_on[0].startswith("lambda-event-rt-hello-")
    assert harness.lambdas.records[0].invocation_type == "Event"


def test_failed_event_invocation_is_retried_twice_one_then_two_minutes_later(harness: Harness) -> None:
    harness.lambdas.invoke("rt-flaky", b'{"failures": 5}', invocation_type="Event")

    harness.clock.run_until_idle()

    records = harness.lambdas.records
    assert [r.attempt for r in records] == [1, 2, 3]
    assert [r.start for r in records] == [START, START + timedelta(minutes=1), START + timedelta(minutes=3)]
    assert len({r.request_id for r in records}) == 1
    assert all(r.error_type == "TransientError" for r in records)


def test_event_invocations_all_run_at_once_in_an_order_drawn_from_the_seed() -> None:
    def run(seed: int) -> list[str]:
        with running_harness(seed=seed) as h:
            for index in range(5):
                h.lambdas.invoke(
                    "rt-hello", json.dumps({"name": str(index)}).encode(), invocation_type="Event"
                )
            h.clock.run_until_idle()
            assert {r.start for r in h.lambdas.records} == {START}
            return [json.loads(r.payload)["greeting"] for r in h.lambdas.records]

    orders = {seed: run(seed) for seed in range(4)}

    # AWS promises no order: every seed runs all five, the same seed the same way, seeds differently
    assert all(sorted(order) == [f"hello {i}" for i in range(5)] for order in orders.values())
    assert run(2) == orders[2]
    assert len({tuple(order) for order in orders.values()}) > 1


def test_a_handler_sleeping_in_a_retry_backoff_lets_other_invocations_run(harness: Harness) -> None:
    # Given DescribeTrainingPlan answers after 20 virtual seconds, and a plan to describe
    harness.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Scheduled", "StartTime": START}
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.LATENCY, latency_seconds=20
        )
    )

    # When the slow function and a quick one are invoked asynchronously, slow first
    harness.lambdas.invoke("rt-aws_caller", b'{"plan": "p1"}', invocation_type="Event")
    harness.lambdas.invoke("rt-hello", b"{}", invocation_type="Event")
    harness.clock.run_until_idle()

    # Then the quick one ran at once, while the slow one waited; each with its own environment
    by_name = {r.function: r for r in harness.lambdas.records}
    assert by_name["rt-hello"].start == START
    assert by_name["rt-hello"].end == START
    assert json.loads(by_name["rt-hello"].payload)["stage"] == "stage-of-hello"
    assert by_name["rt-aws_caller"].start == START
    assert by_name["rt-aws_caller"].end == START + timedelta(seconds=20)
    assert json.loads(by_name["rt-aws_caller"].payload) == {
        "status": "Scheduled",
        "start": "2026-03-02T09:00:00Z",
        "retries": 0,
    }


def test_a_handler_running_past_its_timeout_is_reported_timed_out(harness: Harness) -> None:
    # Given a 30 s function whose AWS call takes 45 virtual seconds
    harness.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Active", "StartTime": START}
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.LATENCY, latency_seconds=45
        )
    )

    # When
    result = harness.lambdas.invoke("rt-aws_caller", b'{"plan": "p1"}')

    # Then it is stopped at 30 s, before the slow call got through
    error = json.loads(result.payload)
    assert error["errorType"] == "Sandbox.Timedout"
    assert "Task timed out after 30.00 seconds" in error["errorMessage"]
    assert harness.clock.now() == START + timedelta(seconds=30)
    assert harness.lambdas.records[0].end == START + timedelta(seconds=30)
    assert harness.emulator.calls == []


def test_a_stopped_handler_makes_no_call_after_its_timeout_whatever_it_catches(harness: Harness) -> None:
    # Given a 30 s function that swallows every Exception and calls again, and again in `finally`; each
    # call times out after its client's 20 s read timeout
    harness.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Active", "StartTime": START}
    harness.faults.add(FaultRule(service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.HANG))

    # When
    result = harness.lambdas.invoke("rt-stubborn", b'{"plan": "p1", "times": 5}')

    # Then the first hang (0-20 s) ended, the second (20-40 s) was cut at 30 s, and nothing came after
    assert json.loads(result.payload)["errorType"] == "Sandbox.Timedout"
    made = [(c.operation, c.at) for c in harness.dispatcher.calls]
    assert made == [
        ("DescribeTrainingPlan", START),
        ("DescribeTrainingPlan", START + timedelta(seconds=20)),
    ]
    assert harness.clock.now() == START + timedelta(seconds=30)


def test_a_stopped_environment_is_thrown_away_and_the_next_invocation_starts_cold(harness: Harness) -> None:
    harness.faults.add(
        FaultRule(
            service="sts", operation="GetCallerIdentity", kind=FaultKind.LATENCY, latency_seconds=40, times=1
        )
    )
    stopped = harness.lambdas.invoke("rt-probe", b"{}")
    first = harness.lambdas.invoke("rt-probe", b"{}")
    second = harness.lambdas.invoke("rt-probe", b"{}")

    assert json.loads(stopped.payload)["errorType"] == "Sandbox.Timedout"
    assert json.loads(first.payload)["invocation"] == 1  # a fresh module: its globals start over
    assert json.loads(second.payload)["invocation"] == 2  # then warm


def test_a_nested_synchronous_invocation_keeps_each_functions_environment_and_log(harness: Harness) -> None:
    result = harness.lambdas.invoke("rt-chain", b'{"target": "rt-hello"}')

    body = json.loads(result.payload)
    assert body["inner"]["greeting"] == "hello inner"
    assert body["inner"]["stage"] == "stage-of-hello"
    assert body["stage_after"] == "stage-of-chain"
    assert "outer before" in result.log
    assert "outer after" in result.log
    inner = next(r for r in harness.lambdas.records if r.function == "rt-hello")
    assert "outer" not in inner.log
    assert "STAGE" not in os.environ


def test_sys_exit_in_a_handler_is_a_runtime_exit_error(harness: Harness) -> None:
    result = harness.lambdas.invoke("rt-exits", b'{"status": 3}')

    error = json.loads(result.payload)
    assert result.function_error == "Unhandled"
    assert error["errorType"] == "Runtime.ExitError"
    assert error["errorMessage"].endswith("Runtime exited with error: exit status 3")


def test_concurrent_invocations_interleave_at_their_aws_calls_each_with_its_own_environment() -> None:
    def callers(seed: int) -> list[str | None]:
        with running_harness(seed=seed) as h:
            h.lambdas.invoke("rt-probe", b'{"calls": 3}', invocation_type="Event")
            h.lambdas.invoke("rt-probe_b", b'{"calls": 3}', invocation_type="Event")
            h.clock.run_until_idle()
            for record in h.lambdas.records:
                body = json.loads(record.payload)
                own = f"stage-of-{record.function.removeprefix('rt-')}"
                assert body["stage_before"] == own
                assert body["stage_after"] == own  # the other one ran in between, with its own variables
            return [c.caller for c in h.dispatcher.calls]

    # Each seed is reproducible; across seeds the two invocations' calls interleave (not one after the other)
    orders = {seed: callers(seed) for seed in range(6)}
    assert callers(3) == orders[3]
    assert all(sorted(map(str, order)) == ["rt-probe"] * 3 + ["rt-probe_b"] * 3 for order in orders.values())
    serial = {("rt-probe",) * 3 + ("rt-probe_b",) * 3, ("rt-probe_b",) * 3 + ("rt-probe",) * 3}
    assert any(tuple(order) not in serial for order in orders.values())


def test_the_same_function_invoked_twice_at_once_runs_in_two_environments(harness: Harness) -> None:
    harness.lambdas.invoke("rt-probe", b'{"calls": 2}', invocation_type="Event")
    harness.lambdas.invoke("rt-probe", b'{"calls": 2}', invocation_type="Event")
    harness.clock.run_until_idle()
    later = harness.lambdas.invoke("rt-probe", b"{}")

    # Each concurrent invocation saw a module of its own; the later one reused a warm one
    assert [json.loads(r.payload)["invocation"] for r in harness.lambdas.records[:2]] == [1, 1]
    assert json.loads(later.payload)["invocation"] == 2


def test_a_secret_one_function_cached_is_not_in_another_functions_cache(harness: Harness) -> None:
    harness.client("secretsmanager").create_secret(Name=SECRET_ID, SecretString="s3cr3t")

    first = harness.lambdas.invoke("rt-secret_reader", b"{}")
    again = harness.lambdas.invoke("rt-secret_reader", b"{}")
    other = harness.lambdas.invoke("rt-secret_reader_b", b"{}")

    assert [json.loads(r.payload)["value"] for r in (first, again, other)] == ["s3cr3t"] * 3
    reads = [c for c in harness.dispatcher.calls if c.operation == "GetSecretValue"]
    # The warm environment answered from its cache; the other function had to ask Secrets Manager itself
    assert len(reads) == 2


def test_a_handler_is_compiled_once_and_every_environment_runs_it_anew(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a function whose module counts, in a file beside it, how often its module-level code ran
    code_dir = tmp_path / "counter"
    code_dir.mkdir()
    handler = code_dir / "app.py"
    handler.write_text(
        "from pathlib import Path\n"
        "RUNS = Path(__file__).with_name('runs.txt')\n"
        "RUNS.write_text(RUNS.read_text() + 'x' if RUNS.exists() else 'x')\n"
        "def lambda_handler(event, context):\n"
        "    return {'version': 1, 'inits': len(RUNS.read_text())}\n"
    )
    compiled: list[str] = []
    original = importlib.machinery.SourceFileLoader.source_to_code

    def counting(self: importlib.machinery.SourceFileLoader, data: Any, path: Any, **kwargs: Any) -> Any:
        compiled.append(str(path))
        return original(self, data, path, **kwargs)

    monkeypatch.setattr(importlib.machinery.SourceFileLoader, "source_to_code", counting)
    spec = replace(function_spec("hello"), name="rt-counter", code_dir=code_dir, layer_dirs=())

    def cold_invoke() -> dict[str, Any]:
        runtime = LambdaRuntime([spec], VirtualClock(START), {}, seed=7)  # a new runtime: no warm environment
        try:
            answer: dict[str, Any] = json.loads(runtime.invoke("rt-counter", b"{}").payload)
            return answer
        finally:
            runtime.close()

    # When two environments start cold
    first, second = cold_invoke(), cold_invoke()
    # Then each ran the module anew, from one compilation
    assert (first, second) == ({"version": 1, "inits": 1}, {"version": 1, "inits": 2})
    assert compiled == [str(handler)]
    # and a changed file is compiled again: the new code runs
    handler.write_text(handler.read_text().replace("'version': 1", "'version': 2"))
    assert cold_invoke() == {"version": 2, "inits": 3}
    assert compiled == [str(handler)] * 2
