"""moto's ASL interpreter on the virtual clock, calling in-process Lambdas."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest

from localcloud.faults import FaultKind, FaultRule
from tests.localcloud.runtime.rt_support import START, Harness

THIRTY_DAYS = 30 * 86_400


def _start(h: Harness, definition: dict[str, Any], payload: dict[str, Any], name: str = "sm") -> str:
    arn = h.create_state_machine(name, definition)
    execution: str = h.client("stepfunctions").start_execution(
        stateMachineArn=arn, name=f"{name}-run", input=json.dumps(payload)
    )["executionArn"]
    return execution


def _describe(h: Harness, execution_arn: str) -> dict[str, Any]:
    described: dict[str, Any] = h.client("stepfunctions").describe_execution(executionArn=execution_arn)
    return described


def test_thirty_day_wait_between_two_lambda_tasks_jumps_the_virtual_clock(harness: Harness) -> None:
    # Given a state machine: direct Lambda ARN task, Wait 30 days, lambda:invoke integration task
    definition = {
        "StartAt": "First",
        "States": {
            "First": {"Type": "Task", "Resource": harness.arn("hello"), "Next": "Wait30Days"},
            "Wait30Days": {"Type": "Wait", "Seconds": THIRTY_DAYS, "Next": "Second"},
            "Second": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload.$": "$"},
                "OutputPath": "$.Payload",
                "End": True,
            },
        },
    }
    arn = harness.create_state_machine("thirty-days", definition)

    # When it is started and the simulation runs to quiescence
    wall_start = time.monotonic()
    execution = harness.client("stepfunctions").start_execution(stateMachineArn=arn, input='{"name": "gpu"}')[
        "executionArn"
    ]
    result = harness.clock.run_until_idle()

    # Then it succeeded, 30 virtual days later, each Lambda ran at its own virtual instant
    wall = time.monotonic() - wall_start
    described = _describe(harness, execution)
    output = json.loads(described["output"])
    assert described["status"] == "SUCCEEDED"
    assert output["greeting"] == "hello gpu"
    assert output["count"] == 2  # the second task saw the first one's output
    assert output["at"] == (START + timedelta(seconds=THIRTY_DAYS)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert output["stage"] == "stage-of-hello"
    assert [r.start for r in harness.lambdas.records] == [START, START + timedelta(seconds=THIRTY_DAYS)]
    assert result.reason == "idle"
    assert result.now == START + timedelta(seconds=THIRTY_DAYS)
    # Not a speed target (make bench prints those): a bound that sleeping through any real wait would break.
    assert wall < 60.0, f"took {wall:.2f}s of wall time: the clock waited instead of jumping"


def test_wait_until_timestamp_path_wakes_at_that_instant(harness: Harness) -> None:
    # Given a Wait with TimestampPath (the application waits for a plan's start this way)
    definition = {
        "StartAt": "WaitForStart",
        "States": {
            "WaitForStart": {"Type": "Wait", "TimestampPath": "$.start", "Next": "Go"},
            "Go": {"Type": "Task", "Resource": harness.arn("hello"), "End": True},
        },
    }
    start_at = START + timedelta(days=60, hours=2, minutes=30)
    execution = _start(harness, definition, {"start": start_at.strftime("%Y-%m-%dT%H:%M:%SZ")})

    # When
    harness.clock.run_until_idle()

    # Then the task ran exactly at the timestamp
    assert _describe(harness, execution)["status"] == "SUCCEEDED"
    assert harness.lambdas.records[-1].start == start_at


def test_retry_on_named_error_retries_with_virtual_backoff(harness: Harness) -> None:
    # Given a task that fails twice with TransientError and a Retry on that name (interval 60 s, rate 2)
    definition = {
        "StartAt": "Flaky",
        "States": {
            "Flaky": {
                "Type": "Task",
                "Resource": harness.arn("flaky"),
                "Retry": [
                    {
                        "ErrorEquals": ["TransientError"],
                        "IntervalSeconds": 60,
                        "BackoffRate": 2,
                        "MaxAttempts": 3,
                    }
                ],
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {"failures": 2, "error": "TransientError"})

    # When
    harness.clock.run_until_idle()

    # Then it succeeded on the third attempt, 60 s then 120 s apart (virtual)
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"attempts": 3}
    starts = [r.start for r in harness.lambdas.records]
    assert starts == [START, START + timedelta(seconds=60), START + timedelta(seconds=180)]
    assert [r.error_type for r in harness.lambdas.records] == ["TransientError", "TransientError", None]


def test_catch_by_exception_class_name_through_lambda_invoke_integration(harness: Harness) -> None:
    # Given lambda:invoke raising FatalError, a Retry on another name and a Catch on FatalError
    definition = {
        "StartAt": "Flaky",
        "States": {
            "Flaky": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": harness.arn("flaky"), "Payload.$": "$"},
                "Retry": [{"ErrorEquals": ["TransientError"], "MaxAttempts": 5}],
                "Catch": [{"ErrorEquals": ["FatalError"], "ResultPath": "$.error", "Next": "Handled"}],
                "End": True,
            },
            "Handled": {"Type": "Pass", "End": True},
        },
    }
    execution = _start(harness, definition, {"failures": 1, "error": "FatalError"})

    # When
    harness.clock.run_until_idle()

    # Then the error name is the class name, the Catch routed it and no retry happened
    described = _describe(harness, execution)
    output = json.loads(described["output"])
    assert described["status"] == "SUCCEEDED"
    assert output["error"]["Error"] == "FatalError"
    assert json.loads(output["error"]["Cause"])["errorMessage"] == "attempt 1 failed"
    assert len(harness.lambdas.records) == 1


def test_uncaught_lambda_error_fails_the_execution_with_the_class_name(harness: Harness) -> None:
    definition = {
        "StartAt": "T",
        "States": {"T": {"Type": "Task", "Resource": harness.arn("flaky"), "End": True}},
    }
    execution = _start(harness, definition, {"failures": 1, "error": "FatalError"})

    harness.clock.run_until_idle()

    described = _describe(harness, execution)
    assert described["status"] == "FAILED"
    assert described["error"] == "FatalError"


def test_returning_a_datetime_fails_the_task_with_runtime_marshal_error(harness: Harness) -> None:
    definition = {
        "StartAt": "T",
        "States": {"T": {"Type": "Task", "Resource": harness.arn("returns_datetime"), "End": True}},
    }
    execution = _start(harness, definition, {})

    harness.clock.run_until_idle()

    described = _describe(harness, execution)
    assert described["status"] == "FAILED"
    assert described["error"] == "Runtime.MarshalError"
    assert "Object of type datetime is not JSON serializable" in described["cause"]


def test_wait_for_task_token_resumes_on_send_task_success(harness: Harness) -> None:
    # Given a .waitForTaskToken task with a 1-hour timeout: the token goes to the Lambda
    definition = {
        "StartAt": "Approve",
        "States": {
            "Approve": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload": {"token.$": "$$.Task.Token"}},
                "TimeoutSeconds": 3600,
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {})
    harness.clock.run(until=START + timedelta(minutes=10))
    token = json.loads(harness.lambdas.records[0].payload)["token"]
    assert _describe(harness, execution)["status"] == "RUNNING"

    # When the approval arrives 10 minutes in
    harness.client("stepfunctions").send_task_success(taskToken=token, output=json.dumps({"approved": True}))
    result = harness.clock.run_until_idle()

    # Then the execution resumes with that output, without waiting for the timeout
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"approved": True}
    assert result.now == START + timedelta(minutes=10)


def test_wait_for_task_token_times_out_in_virtual_time(harness: Harness) -> None:
    # Given a token that never comes back and a Catch on States.Timeout
    definition = {
        "StartAt": "Approve",
        "States": {
            "Approve": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload": {"token.$": "$$.Task.Token"}},
                "TimeoutSeconds": 86400,
                "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "TimedOut"}],
                "End": True,
            },
            "TimedOut": {"Type": "Pass", "Result": {"answer": "none"}, "End": True},
        },
    }
    execution = _start(harness, definition, {})

    # When
    result = harness.clock.run_until_idle()

    # Then it timed out exactly one virtual day later and took the Catch
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"answer": "none"}
    assert result.now == START + timedelta(days=1)


def test_task_without_timeout_waits_for_its_token_and_the_run_ends_idle(harness: Harness) -> None:
    # Given a callback task without TimeoutSeconds (moto's 99999999 s default must not be a timer)
    definition = {
        "StartAt": "Approve",
        "States": {
            "Approve": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload": {"token.$": "$$.Task.Token"}},
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {})

    # When
    result = harness.clock.run_until_idle()

    # Then the clock did not jump ahead and the execution is still waiting
    assert result.reason == "idle"
    assert result.now == START
    assert _describe(harness, execution)["status"] == "RUNNING"
    token = json.loads(harness.lambdas.records[0].payload)["token"]
    harness.client("stepfunctions").send_task_failure(taskToken=token, error="Rejected", cause="no")
    harness.clock.run_until_idle()
    described = _describe(harness, execution)
    assert described["status"] == "FAILED"
    assert described["error"] == "Rejected"


def test_map_iterations_wait_concurrently_on_the_virtual_clock(harness: Harness) -> None:
    # Given a Map whose iterations wait different times, and a task timeout shorter than one wait
    definition = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.waits",
                "MaxConcurrency": 0,
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Sleep",
                    "States": {
                        "Sleep": {"Type": "Wait", "SecondsPath": "$.seconds", "Next": "Hello"},
                        "Hello": {"Type": "Task", "Resource": harness.arn("hello"), "End": True},
                    },
                },
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {"waits": [{"seconds": 300}, {"seconds": 60}, {"seconds": 7200}]})

    # When
    harness.clock.run_until_idle()

    # Then the iterations ran concurrently: each task at its own wait, the Map ended at the longest
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    starts = sorted(r.start for r in harness.lambdas.records)
    assert starts == [START + timedelta(seconds=s) for s in (60, 300, 7200)]


def test_execution_history_counts_transitions_independent_of_wait_length(harness: Harness) -> None:
    # Given the same machine waiting 1 day and 60 days
    def run(days: int, name: str) -> int:
        definition = {
            "StartAt": "Wait",
            "States": {
                "Wait": {"Type": "Wait", "Seconds": days * 86400, "Next": "Go"},
                "Go": {"Type": "Task", "Resource": harness.arn("hello"), "End": True},
            },
        }
        execution = _start(harness, definition, {}, name=name)
        harness.clock.run_until_idle()
        assert _describe(harness, execution)["status"] == "SUCCEEDED"
        return len(harness.history(execution))

    # Then the histories have the same length
    assert run(1, "short") == run(60, "long")


def test_heartbeat_timeout_is_virtual(harness: Harness) -> None:
    # Given a callback task expecting a heartbeat every 60 s (that never comes)
    definition = {
        "StartAt": "Approve",
        "States": {
            "Approve": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload": {"token.$": "$$.Task.Token"}},
                "TimeoutSeconds": 3600,
                "HeartbeatSeconds": 60,
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {})

    # When
    harness.clock.run_until_idle()

    # Then it timed out one virtual minute in, not at the task's one-hour timeout. (AWS names the error
    # States.HeartbeatTimeout; moto 5.2.5's interpreter reports every task timeout as States.Timeout.)
    described = _describe(harness, execution)
    assert described["status"] == "FAILED"
    assert described["error"] == "States.Timeout"
    assert described["stopDate"] == START + timedelta(seconds=60)


def test_execution_timeout_seconds_is_virtual(harness: Harness) -> None:
    # Given a machine with TimeoutSeconds 1 h that waits 2 days
    definition = {
        "TimeoutSeconds": 3600,
        "StartAt": "Wait",
        "States": {"Wait": {"Type": "Wait", "Seconds": 2 * 86400, "End": True}},
    }
    execution = _start(harness, definition, {})

    # When
    harness.clock.run_until_idle()

    # Then the execution timed out after one virtual hour (moto records no stopDate for it: use the history)
    assert _describe(harness, execution)["status"] == "TIMED_OUT"
    timed_out = [e["timestamp"] for e in harness.history(execution) if e["type"] == "ExecutionTimedOut"]
    assert timed_out == [START + timedelta(hours=1)]


def test_task_timeout_seconds_fails_a_slow_lambda_with_states_timeout(harness: Harness) -> None:
    # Given a Lambda task (TimeoutSeconds 20) whose AWS call answers after 25 virtual seconds
    harness.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Active", "StartTime": START}
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.LATENCY, latency_seconds=25
        )
    )
    definition = {
        "StartAt": "Describe",
        "States": {
            "Describe": {
                "Type": "Task",
                "Resource": harness.arn("aws_caller"),
                "TimeoutSeconds": 20,
                "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "Late"}],
                "End": True,
            },
            "Late": {"Type": "Pass", "End": True},
        },
    }
    execution = _start(harness, definition, {"plan": "p1"})

    # When
    harness.clock.run_until_idle()

    # Then the task timed out at +20 s and the Catch ran
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["error"]["Error"] == "States.Timeout"
    timed_out = [e for e in harness.history(execution) if e["type"] == "LambdaFunctionTimedOut"]
    assert [e["timestamp"] for e in timed_out] == [START + timedelta(seconds=20)]


def test_aws_sdk_integration_reaches_the_emulator(harness: Harness) -> None:
    # Given an aws-sdk task calling SageMaker DescribeTrainingPlan (an emulated operation)
    harness.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Active", "StartTime": START}
    definition = {
        "StartAt": "Describe",
        "States": {
            "Describe": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:sagemaker:describeTrainingPlan",
                "Parameters": {"TrainingPlanName.$": "$.plan"},
                "ResultSelector": {"status.$": "$.Status"},
                "End": True,
            }
        },
    }
    execution = _start(harness, definition, {"plan": "p1"})

    # When
    harness.clock.run_until_idle()

    # Then the interpreter's own client went through the dispatcher to the emulator
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"status": "Active"}
    assert harness.emulator.calls[-1][:3] == ("sagemaker", "DescribeTrainingPlan", {"TrainingPlanName": "p1"})


@pytest.mark.parametrize(
    ("resource", "parameters"),
    [
        ("direct", None),
        ("arn:aws:states:::lambda:invoke", {"Payload.$": "$"}),
        (
            "arn:aws:states:::lambda:invoke.waitForTaskToken",
            {"Payload": {"failures": 1, "error": "FatalError"}},
        ),
    ],
)
def test_the_exception_class_name_is_the_error_for_every_lambda_resource_form(
    harness: Harness, resource: str, parameters: dict[str, Any] | None
) -> None:
    # Given a task of each form whose function raises FatalError, with a Catch on that name
    task: dict[str, Any] = {
        "Type": "Task",
        "Resource": harness.arn("flaky") if resource == "direct" else resource,
        "Catch": [{"ErrorEquals": ["FatalError"], "ResultPath": "$.error", "Next": "Caught"}],
        "End": True,
    }
    if parameters is not None:
        task["Parameters"] = {"FunctionName": harness.arn("flaky"), **parameters}
    definition = {"StartAt": "T", "States": {"T": task, "Caught": {"Type": "Pass", "End": True}}}
    execution = _start(harness, definition, {"failures": 1, "error": "FatalError"})

    # When
    harness.clock.run_until_idle()

    # Then the Catch matched the class name
    described = _describe(harness, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["error"]["Error"] == "FatalError"


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (FaultKind.THROTTLE, "Lambda.TooManyRequestsException"),
        (FaultKind.SERVER_ERROR, "Lambda.ServiceException"),
    ],
)
def test_a_lambda_service_error_on_a_direct_arn_task_is_named_as_on_aws_so_retry_matches(
    harness: Harness, kind: FaultKind, error: str
) -> None:
    # Given a direct-ARN task retried only on the AWS name of the Lambda service error, and every Invoke
    # failing with that service error for a while (more than the SDK's own retries)
    definition = {
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": harness.arn("hello"),
                "Retry": [{"ErrorEquals": [error], "IntervalSeconds": 2, "MaxAttempts": 10}],
                "End": True,
            }
        },
    }
    harness.faults.add(FaultRule(service="lambda", operation="Invoke", kind=kind, times=6))
    execution = _start(harness, definition, {"name": "gpu"})

    # When
    harness.clock.run_until_idle()

    # Then Step Functions saw the error under its AWS name (moto says "Exception") and the Retry applied
    described = _describe(harness, execution)
    failed = [e for e in harness.history(execution) if e["type"] == "LambdaFunctionFailed"]
    assert failed
    assert {e["lambdaFunctionFailedEventDetails"]["error"] for e in failed} == {error}
    assert described["status"] == "SUCCEEDED"
    assert len(harness.lambdas.records) == 1  # the throttled calls never ran the function
