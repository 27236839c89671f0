"""DynamoDB stream delivery to Lambda (localcloud/streams.py) on a running LocalCloud: the fixture stack
``streams.yaml`` (a table with a NEW_IMAGE stream, SAM's ``DynamoDB`` event with a filter, bisect, two
retries and an SQS on-failure destination)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.streams import LAG_SECONDS, STREAM_SHARDS, MappingError, StreamMapping

TEMPLATE = Path(__file__).parent / "fixtures" / "streams.yaml"
START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
FUNCTION = "streams-ConsumerFunction"


def make_cloud(*rules: FaultRule) -> LocalCloud:
    return LocalCloud(TEMPLATE, start=START, stack_name="streams", faults=FaultInjector(list(rules), seed=3))


@pytest.fixture
def cloud() -> Iterator[LocalCloud]:
    with make_cloud() as running:
        yield running


def put(cloud: LocalCloud, pk: str, sk: str, kind: str = "decision", **extra: str) -> None:
    item = {"pk": {"S": pk}, "sk": {"S": sk}, "kind": {"S": kind}} | {k: {"S": v} for k, v in extra.items()}
    cloud.client("dynamodb").put_item(TableName="streams-ItemsTable", Item=item)


def invocations(cloud: LocalCloud) -> list[Any]:
    return [r for r in cloud.lambdas.records if r.function == FUNCTION]


def seen(cloud: LocalCloud) -> list[str]:
    """The sort keys the consumer handled, in the order it handled them (successful invocations only)."""
    return [key for r in invocations(cloud) if r.error_type is None for key in json.loads(r.payload)["keys"]]


def failures_queue(cloud: LocalCloud) -> list[dict[str, Any]]:
    sqs = cloud.client("sqs")
    url = sqs.get_queue_url(QueueName="streams-FailuresQueue")["QueueUrl"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"]) for m in messages]


def test_the_template_s_dynamodb_event_becomes_a_stream_mapping(cloud: LocalCloud) -> None:
    (mapping,) = cloud.stack.stream_mappings
    assert mapping.function == FUNCTION
    assert mapping.table == "streams-ItemsTable"
    assert mapping.stream_arn.startswith(
        "arn:aws:dynamodb:us-east-1:123456789012:table/streams-ItemsTable/stream/"
    )
    assert (mapping.batch_size, mapping.bisect, mapping.max_retries) == (4, True, 2)
    assert mapping.on_failure == "arn:aws:sqs:us-east-1:123456789012:streams-FailuresQueue"
    assert mapping.filters == (
        {"eventName": ["INSERT"], "dynamodb": {"NewImage": {"kind": {"S": ["decision"]}}}},
    )
    assert not any("EventSourceMapping" in warning for warning in cloud.stack.warnings)


def test_a_record_reaches_the_function_a_little_late_in_lambda_s_shape(cloud: LocalCloud) -> None:
    put(cloud, "r1", "CANCEL")
    written = cloud.now()

    cloud.run_until_idle()

    (batch,) = cloud.streams.batches
    (invocation,) = invocations(cloud)
    lag = (invocation.start - written).total_seconds()
    assert LAG_SECONDS[0] <= lag <= LAG_SECONDS[1]
    assert batch.error is None
    assert seen(cloud) == ["CANCEL"]
    event = json.loads(batch.payload)
    (record,) = event["Records"]
    assert record["eventName"] == "INSERT"
    assert record["eventSource"] == "aws:dynamodb"
    assert record["eventSourceARN"] == cloud.stack.stream_mappings[0].stream_arn
    assert record["dynamodb"]["Keys"] == {"pk": {"S": "r1"}, "sk": {"S": "CANCEL"}}
    assert record["dynamodb"]["NewImage"]["kind"] == {"S": "decision"}
    assert record["dynamodb"]["ApproximateCreationDateTime"] == int(written.timestamp())
    assert record["dynamodb"]["StreamViewType"] == "NEW_IMAGE"


def test_only_records_matching_a_filter_reach_the_function(cloud: LocalCloud) -> None:
    put(cloud, "r1", "NOTE", kind="note")
    put(cloud, "r1", "DECIDED")
    put(cloud, "r1", "DECIDED", kind="decision", changed="yes")  # a MODIFY: not an INSERT

    cloud.run_until_idle()

    assert seen(cloud) == ["DECIDED"]


def test_records_of_one_key_arrive_in_write_order_in_batches_of_at_most_batch_size(cloud: LocalCloud) -> None:
    for n in range(7):
        put(cloud, "a", f"a{n}")
        put(cloud, "b", f"b{n}")

    cloud.run_until_idle()

    handled = seen(cloud)
    assert [k for k in handled if k.startswith("a")] == [f"a{n}" for n in range(7)]
    assert [k for k in handled if k.startswith("b")] == [f"b{n}" for n in range(7)]
    assert all(len(batch.sequences) <= 4 for batch in cloud.streams.batches)
    assert STREAM_SHARDS > 1


def test_a_failed_batch_is_retried_whole_and_holds_its_shard_until_it_succeeds(cloud: LocalCloud) -> None:
    # Tries at lag (1-3 s), then 1 s and 2 s later: a0 fails once or twice, within MaximumRetryAttempts (2).
    until = cloud.now() + timedelta(seconds=3.5)
    put(cloud, "a", "a0", fail_until=until.isoformat())
    cloud.run(until=cloud.now() + timedelta(seconds=1.5))
    put(cloud, "a", "a1")

    cloud.run_until_idle()

    assert seen(cloud) == ["a0", "a1"]  # a1 waited for a0, however late it was written
    failed = [b for b in cloud.streams.batches if b.error is not None]
    assert failed
    assert all(b.error == "NotYetError" for b in failed)
    assert cloud.streams.discarded == []
    success = next(r for r in invocations(cloud) if r.error_type is None)
    assert success.start >= until


def test_a_poisoned_record_is_isolated_by_bisect_then_discarded_to_the_on_failure_queue(
    cloud: LocalCloud,
) -> None:
    for key in ("a0", "a1", "a2"):
        put(cloud, "a", key)
    put(cloud, "a", "a3", poison="yes")

    cloud.run_until_idle()

    assert seen(cloud) == ["a0", "a1", "a2"]
    poisoned = [b for b in cloud.streams.batches if b.error == "PoisonRecordError" and len(b.sequences) == 1]
    assert len(poisoned) == 3  # the first try and MaximumRetryAttempts (2) retries
    ((_, _, sequences, condition),) = cloud.streams.discarded
    assert condition == "RetryAttemptsExhausted"
    (message,) = failures_queue(cloud)
    info = message["DDBStreamBatchInfo"]
    assert message["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert message["requestContext"]["functionArn"].endswith(f":function:{FUNCTION}")
    assert (info["batchSize"], info["startSequenceNumber"]) == (1, sequences[0])
    assert info["streamArn"] == cloud.stack.stream_mappings[0].stream_arn
    assert "Records" not in message  # metadata only: the records stay in the stream


def test_a_batch_may_be_delivered_twice() -> None:
    with make_cloud(
        FaultRule(service="dynamodb-streams", kind=FaultKind.DUPLICATE_DELIVERY, times=1)
    ) as cloud:
        put(cloud, "a", "a0")
        cloud.run_until_idle()

        assert seen(cloud) == ["a0", "a0"]


def test_a_delayed_batch_holds_its_shard() -> None:
    rule = FaultRule(service="dynamodb-streams", kind=FaultKind.DELAYED_DELIVERY, delay_seconds=600, times=1)
    with make_cloud(rule) as cloud:
        put(cloud, "a", "a0")
        written = cloud.now()
        cloud.run(until=cloud.now() + timedelta(seconds=30))
        put(cloud, "a", "a1")
        cloud.run_until_idle()

        assert seen(cloud) == ["a0", "a1"]
        first = invocations(cloud)[0]
        assert first.start >= written + timedelta(seconds=600)


def test_a_throttled_invocation_is_retried_without_spending_the_retry_quota() -> None:
    rule = FaultRule(service="dynamodb-streams", kind=FaultKind.DELIVERY_FAILURE, times=5)
    with make_cloud(rule) as cloud:
        put(cloud, "a", "a0")
        cloud.run_until_idle()

        assert seen(cloud) == ["a0"]  # 5 refusals, more than MaximumRetryAttempts (2): not discarded
        assert [b.error is not None for b in cloud.streams.batches] == [True] * 5 + [False]
        assert cloud.streams.discarded == []


def test_a_cancelled_transaction_streams_nothing(cloud: LocalCloud) -> None:
    client = cloud.client("dynamodb")
    put(cloud, "a", "exists", kind="note")
    item = {"pk": {"S": "a"}, "sk": {"S": "NEW"}, "kind": {"S": "decision"}}
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "streams-ItemsTable", "Item": item}},
                {
                    "ConditionCheck": {
                        "TableName": "streams-ItemsTable",
                        "Key": {"pk": {"S": "a"}, "sk": {"S": "exists"}},
                        "ConditionExpression": "attribute_not_exists(sk)",
                    }
                },
            ]
        )

    cloud.run_until_idle()

    assert seen(cloud) == []
    assert "Item" not in client.get_item(
        TableName="streams-ItemsTable", Key={"pk": {"S": "a"}, "sk": {"S": "NEW"}}
    )


def test_a_role_that_cannot_read_the_stream_fails_the_mapping_at_start() -> None:
    cloud = make_cloud()
    role = cloud.stack.resources["ConsumerFunctionRole"]
    role.properties["ManagedPolicyArns"] = [
        arn for arn in role.properties["ManagedPolicyArns"] if "DynamoDBExecutionRole" not in arn
    ]
    with pytest.raises(MappingError, match=r"dynamodb:DescribeStream"):
        cloud.start()
    cloud.stop()


def test_what_the_local_cloud_cannot_deliver_is_refused_at_load() -> None:
    props = {
        "EventSourceArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2020",
        "FunctionName": "f",
        "StartingPosition": "LATEST",
        "FunctionResponseTypes": ["ReportBatchItemFailures"],
    }
    with pytest.raises(MappingError, match="FunctionResponseTypes"):
        StreamMapping.from_resource("M", props, where="Resources.M.Properties")
    queue = {"EventSourceArn": "arn:aws:sqs:us-east-1:123456789012:q", "FunctionName": "f"}
    assert StreamMapping.from_resource("Q", queue, where="Resources.Q.Properties") is None


def test_a_record_older_than_the_maximum_age_is_discarded_with_its_condition() -> None:
    cloud = make_cloud()
    (mapping,) = cloud.streams.mappings
    cloud.streams.mappings = [dataclasses.replace(mapping, max_retries=-1, max_age_seconds=60)]
    with cloud:
        put(cloud, "a", "a0", fail_until=(cloud.now() + timedelta(hours=1)).isoformat())
        put(cloud, "b", "b0")
        cloud.run_until_idle()

        assert seen(cloud) == ["b0"]
        ((_, _, _, condition),) = cloud.streams.discarded
        assert condition == "RecordAgeExceeded"
        (message,) = failures_queue(cloud)
        assert message["requestContext"]["condition"] == "RecordAgeExceeded"
        tries = [b for b in cloud.streams.batches if b.error == "NotYetError"]
        assert 3 <= len(tries) <= 8  # retried (1, 2, 4, 8, 16, 32 s...) for a minute, no longer
        assert tries[-1].at - tries[0].at <= timedelta(seconds=60)
