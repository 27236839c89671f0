"""The dispatcher: wire round trip to the emulator, moto passthrough, listeners, and every fault kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from localcloud.dispatch import CallRecord
from localcloud.faults import FaultKind, FaultRule
from tests.localcloud.runtime.rt_support import ACCOUNT, START, Harness


def _plan(h: Harness, name: str = "plan-a") -> None:
    h.emulator.plans[name] = {
        "TrainingPlanArn": f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:training-plan/{name}",
        "TrainingPlanName": name,
        "Status": "Scheduled",
        "StartTime": datetime(2026, 3, 9, 11, 30, tzinfo=UTC),
        "UpfrontFee": "1234.56",
        "CurrencyCode": "USD",
    }


def test_emulated_json_operation_round_trips_through_botocore(harness: Harness) -> None:
    # Given the emulator answers a member outside DescribeTrainingPlan's output shape
    _plan(harness)

    # When
    answer = harness.client("sagemaker", region="us-west-2").describe_training_plan(TrainingPlanName="plan-a")

    # Then botocore parsed a real response: typed members kept, unknown member dropped
    assert answer["Status"] == "Scheduled"
    assert answer["StartTime"] == datetime(2026, 3, 9, 11, 30, tzinfo=UTC)
    assert answer["UpfrontFee"] == "1234.56"
    assert "NotInTheOutputShape" not in answer
    service, operation, params, region, faults = harness.emulator.calls[-1]
    assert (service, operation, params, region, faults) == (
        "sagemaker",
        "DescribeTrainingPlan",
        {"TrainingPlanName": "plan-a"},
        "us-west-2",
        [],
    )


def test_emulated_ec2_query_operation_gets_typed_parameters(harness: Harness) -> None:
    answer = harness.client("ec2").describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=2, CapacityDurationHours=24
    )

    params = harness.emulator.calls[-1][2]
    assert params == {"InstanceType": "p5.48xlarge", "InstanceCount": 2, "CapacityDurationHours": 24}
    offering = answer["CapacityBlockOfferings"][0]
    assert offering["StartDate"] == datetime(2026, 3, 9, 11, 30, tzinfo=UTC)
    assert offering["UpfrontFee"] == "830.59"
    assert offering["InstanceCount"] == 2


def test_emulated_rest_json_operation_carries_uri_labels_and_blobs(harness: Harness) -> None:
    answer = harness.client("sagemaker-runtime").invoke_endpoint(
        EndpointName="ep-1",
        InferenceComponentName="ic-a",
        Body=b'{"inputs": "hi"}',
        ContentType="application/json",
    )

    params = harness.emulator.calls[-1][2]
    assert params["EndpointName"] == "ep-1"
    assert params["InferenceComponentName"] == "ic-a"
    assert params["Body"] == b'{"inputs": "hi"}'
    assert answer["Body"].read() == b'{"generated_text": "hi"}'


def test_emulator_errors_become_client_errors_with_the_aws_code(harness: Harness) -> None:
    client = harness.client("sagemaker")

    with pytest.raises(ClientError) as caught:
        client.describe_training_plan(TrainingPlanName="nope")

    assert caught.value.response["Error"]["Code"] == "ResourceNotFound"
    assert caught.value.response["Error"]["Message"] == "Training plan nope not found."
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_operations_not_emulated_go_to_moto(harness: Harness) -> None:
    ddb = harness.client("dynamodb")
    ddb.create_table(
        TableName="ledger",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.put_item(TableName="ledger", Item={"pk": {"S": "r-1"}})

    assert ddb.get_item(TableName="ledger", Key={"pk": {"S": "r-1"}})["Item"] == {"pk": {"S": "r-1"}}
    assert harness.dispatcher.counts["dynamodb.PutItem"] == 1
    assert harness.dispatcher.calls[-1].route == "moto"


def test_listeners_see_put_events_entries_and_event_ids(harness: Harness) -> None:
    seen: list[CallRecord] = []
    harness.dispatcher.on("eventbridge", "PutEvents", seen.append)

    harness.client("events").put_events(
        Entries=[
            {
                "Source": "capacity.orchestrator",
                "DetailType": "ReservationRequested",
                "Detail": '{"id": "r-1"}',
            }
        ]
    )

    assert len(seen) == 1
    assert seen[0].params["Entries"][0]["DetailType"] == "ReservationRequested"
    assert seen[0].response is not None
    assert seen[0].response["FailedEntryCount"] == 0
    assert len(seen[0].response["Entries"][0]["EventId"]) > 10
    assert seen[0].at == START


def test_throttling_is_retried_by_botocore_standard_mode(harness: Harness) -> None:
    # Given the next two DescribeTrainingPlan calls are throttled
    _plan(harness)
    harness.faults.add(
        FaultRule(service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.THROTTLE, times=2)
    )

    # When
    answer = harness.client("sagemaker").describe_training_plan(TrainingPlanName="plan-a")

    # Then botocore retried twice (sleeping on the virtual clock) and the third call went through
    assert answer["Status"] == "Scheduled"
    assert answer["ResponseMetadata"]["RetryAttempts"] == 2
    assert [c.error_code for c in harness.dispatcher.calls] == [
        "ThrottlingException",
        "ThrottlingException",
        None,
    ]
    assert len(harness.emulator.calls) == 1
    assert START < harness.clock.now() <= START + timedelta(seconds=1 * 2 + 2 * 2)
    assert [f.kind for f in harness.faults.fired] == [FaultKind.THROTTLE, FaultKind.THROTTLE]


def test_ec2_throttling_is_request_limit_exceeded(harness: Harness) -> None:
    harness.faults.add(FaultRule(service="ec2", kind=FaultKind.THROTTLE, times=10))
    client = harness.client("ec2", retries={"mode": "standard", "max_attempts": 2})

    with pytest.raises(ClientError) as caught:
        client.describe_capacity_block_offerings(
            InstanceType="p5.48xlarge", InstanceCount=1, CapacityDurationHours=24
        )

    assert caught.value.response["Error"]["Code"] == "RequestLimitExceeded"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert caught.value.response["ResponseMetadata"]["RetryAttempts"] == 2  # max_attempts counts retries


def test_server_errors_are_5xx_and_retried(harness: Harness) -> None:
    _plan(harness)
    harness.faults.add(FaultRule(service="sagemaker", kind=FaultKind.SERVER_ERROR, times=1))

    answer = harness.client("sagemaker").describe_training_plan(TrainingPlanName="plan-a")

    assert answer["ResponseMetadata"]["RetryAttempts"] == 1
    assert harness.dispatcher.calls[0].error_code == "InternalFailure"
    assert harness.dispatcher.calls[0].status == 500


def test_persistent_server_errors_surface_as_internal_failure(harness: Harness) -> None:
    harness.faults.add(FaultRule(service="dynamodb", kind=FaultKind.SERVER_ERROR))
    client = harness.client("dynamodb", retries={"mode": "standard", "max_attempts": 2})

    with pytest.raises(ClientError) as caught:
        client.list_tables()

    assert caught.value.response["Error"]["Code"] == "InternalFailure"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500


def test_latency_moves_virtual_time(harness: Harness) -> None:
    _plan(harness)
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="DescribeTrainingPlan", kind=FaultKind.LATENCY, latency_seconds=45
        )
    )

    harness.client("sagemaker").describe_training_plan(TrainingPlanName="plan-a")

    assert harness.clock.now() == START + timedelta(seconds=45)


def test_latency_past_the_read_timeout_takes_effect_and_the_caller_times_out_at_its_read_timeout(
    harness: Harness,
) -> None:
    # Given CreateTrainingPlan answers 90 s late, to a client that waits 20 s and does not retry
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="CreateTrainingPlan", kind=FaultKind.LATENCY, latency_seconds=90
        )
    )
    client = harness.client(
        "sagemaker", retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=20
    )

    # When / Then botocore's read timeout, at the client's read timeout; the plan was created all the same
    with pytest.raises(ReadTimeoutError):
        client.create_training_plan(TrainingPlanName="plan-slow", TrainingPlanOfferingId="tpo-1")
    assert harness.clock.now() == START + timedelta(seconds=20)
    assert list(harness.emulator.plans) == ["plan-slow"]


def test_a_hang_waits_the_read_timeout_and_does_not_take_effect(harness: Harness) -> None:
    harness.faults.add(
        FaultRule(service="sagemaker", operation="CreateTrainingPlan", kind=FaultKind.HANG, times=1)
    )
    client = harness.client(
        "sagemaker", retries={"mode": "standard", "total_max_attempts": 1}, read_timeout=7
    )

    with pytest.raises(ReadTimeoutError):
        client.create_training_plan(TrainingPlanName="plan-hung", TrainingPlanOfferingId="tpo-1")

    assert harness.clock.now() == START + timedelta(seconds=7)
    assert harness.emulator.plans == {}
    assert harness.dispatcher.calls[0].faults == [FaultKind.HANG]


def test_crash_after_commit_takes_effect_once_and_the_caller_sees_a_timeout(harness: Harness) -> None:
    # Given CreateTrainingPlan commits and then the answer is lost, once
    harness.faults.add(
        FaultRule(
            service="sagemaker", operation="CreateTrainingPlan", kind=FaultKind.CRASH_AFTER_COMMIT, times=1
        )
    )
    client = harness.client("sagemaker")

    # When the caller (standard retries) creates the plan
    with pytest.raises(ClientError) as caught:
        client.create_training_plan(TrainingPlanName="plan-x", TrainingPlanOfferingId="tpo-1")

    # Then the first attempt took effect; botocore's retry met the plan that already exists
    assert caught.value.response["Error"]["Code"] == "ResourceInUse"
    assert list(harness.emulator.plans) == ["plan-x"]
    assert [c[1] for c in harness.emulator.calls] == ["CreateTrainingPlan", "CreateTrainingPlan"]
    assert harness.dispatcher.calls[0].faults == [FaultKind.CRASH_AFTER_COMMIT]


def test_crash_after_commit_without_retries_raises_read_timeout(harness: Harness) -> None:
    harness.faults.add(
        FaultRule(service="sagemaker", operation="CreateTrainingPlan", kind=FaultKind.CRASH_AFTER_COMMIT)
    )
    client = harness.client("sagemaker", retries={"mode": "standard", "total_max_attempts": 1})

    with pytest.raises(ReadTimeoutError):
        client.create_training_plan(TrainingPlanName="plan-y", TrainingPlanOfferingId="tpo-1")

    assert list(harness.emulator.plans) == ["plan-y"]
    assert harness.clock.now() == START + timedelta(seconds=60)  # botocore's default read timeout


def test_behavioural_faults_are_handed_to_the_emulator(harness: Harness) -> None:
    harness.faults.add(
        FaultRule(service="sagemaker", kind=FaultKind.INSUFFICIENT_CAPACITY, match={"TrainingPlanName": "p"})
    )
    harness.faults.add(FaultRule(service="sagemaker", kind=FaultKind.STUCK))

    harness.client("sagemaker").create_training_plan(TrainingPlanName="p", TrainingPlanOfferingId="tpo-1")

    assert harness.emulator.calls[-1][4] == [FaultKind.INSUFFICIENT_CAPACITY, FaultKind.STUCK]


def test_exempt_calls_get_no_faults(harness: Harness) -> None:
    harness.faults.add(FaultRule(kind=FaultKind.THROTTLE))
    client = harness.client("dynamodb", retries={"mode": "standard", "max_attempts": 1})

    with harness.dispatcher.exempt():
        tables = client.list_tables()

    assert tables["TableNames"] == []
    assert harness.faults.fired == []


def test_throttled_lambda_invoke_from_a_state_machine_is_caught_by_name(harness: Harness) -> None:
    # Lambda's own throttling error reaches ASL as Lambda.TooManyRequestsException, as on AWS
    harness.faults.add(FaultRule(service="lambda", operation="Invoke", kind=FaultKind.THROTTLE, times=1))
    definition: dict[str, Any] = {
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": harness.arn("hello"), "Payload": {}},
                "Retry": [
                    {
                        "ErrorEquals": ["Lambda.TooManyRequestsException"],
                        "IntervalSeconds": 5,
                        "MaxAttempts": 2,
                    }
                ],
                "End": True,
            }
        },
    }
    arn = harness.create_state_machine("throttled", definition)
    execution = harness.client("stepfunctions").start_execution(stateMachineArn=arn, name="t1")[
        "executionArn"
    ]

    harness.clock.run_until_idle()

    described = harness.client("stepfunctions").describe_execution(executionArn=execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"])["Payload"]["greeting"] == "hello world"
    assert harness.lambdas.records[0].start == START + timedelta(seconds=5)


@pytest.mark.parametrize(
    ("service", "call", "code", "status"),
    [
        ("cloudwatch", lambda c: c.describe_alarms(), "Throttling", 400),
        ("sns", lambda c: c.list_topics(), "Throttling", 400),
        ("s3", lambda c: c.list_buckets(), "SlowDown", 503),
        ("scheduler", lambda c: c.list_schedules(), "ThrottlingException", 400),
        (
            "lambda",
            lambda c: c.invoke(FunctionName="rt-hello", Payload=b"{}"),
            "TooManyRequestsException",
            429,
        ),
    ],
)
def test_each_protocol_answers_its_throttling_error(
    harness: Harness, service: str, call: Any, code: str, status: int
) -> None:
    harness.faults.add(FaultRule(kind=FaultKind.THROTTLE))
    client = harness.client(service, retries={"mode": "standard", "max_attempts": 0})

    with pytest.raises(ClientError) as caught:
        call(client)

    assert caught.value.response["Error"]["Code"] == code
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == status


def test_a_transaction_conflict_cancels_a_transaction_or_refuses_a_write_and_writes_nothing(
    harness: Harness,
) -> None:
    """DynamoDB cancels one of two concurrent transactions touching one item (``TransactionConflict`` in
    ``CancellationReasons``) and refuses a single write that meets an ongoing transaction (AWS_FACTS.md;
    issue 29 point 3): the ``transaction_conflict`` fault answers so, nothing is written."""
    ddb = harness.client("dynamodb")
    ddb.create_table(
        TableName="ledger",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    harness.faults.add(
        FaultRule(service="dynamodb", operation="TransactWriteItems", kind=FaultKind.TRANSACTION_CONFLICT)
    )
    harness.faults.add(
        FaultRule(service="dynamodb", operation="PutItem", kind=FaultKind.TRANSACTION_CONFLICT, times=1)
    )
    with pytest.raises(ClientError) as cancelled:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "ledger", "Item": {"pk": {"S": "a"}}}},
                {"Put": {"TableName": "ledger", "Item": {"pk": {"S": "b"}}}},
            ]
        )
    assert cancelled.value.response["Error"]["Code"] == "TransactionCanceledException"
    codes = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert sorted(codes) == ["None", "TransactionConflict"]
    with pytest.raises(ClientError) as refused:
        ddb.put_item(TableName="ledger", Item={"pk": {"S": "c"}})
    assert refused.value.response["Error"]["Code"] == "TransactionConflictException"
    assert ddb.scan(TableName="ledger")["Items"] == []
    ddb.put_item(TableName="ledger", Item={"pk": {"S": "c"}})  # the rule fired its one time
    assert ddb.scan(TableName="ledger")["Count"] == 1
