"""moto's DynamoDB answers written straight to JSON (:mod:`localcloud.dynamodb_answers`): for every call
below, the status, headers and parsed body equal what moto's own serializer writes, and the fast path does
answer the item operations (it is not always falling back)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.responses import DynamoResult

from localcloud import dynamodb_answers


@pytest.fixture
def compared() -> Iterator[tuple[Any, Counter[str]]]:
    """A DynamoDB client whose every answer is computed both ways and compared; counts who answered."""
    seen: Counter[str] = Counter()
    original = DynamoResult.execute_result

    def both(self: DynamoResult, context: Any) -> Any:
        slow = original(self, context)
        fast = dynamodb_answers.answer_body(self.result, context)
        name = context.operation_model.name
        if fast is None:
            seen[f"{name}:serializer"] += 1
            return slow
        seen[f"{name}:fast"] += 1
        status, headers, body = slow
        assert json.loads(fast) == json.loads(body), name
        dynamodb_answers.install()
        try:
            assert DynamoResult.execute_result(self, context)[:2] == (status, headers), name
        finally:
            dynamodb_answers.uninstall()
        return slow

    with mock_aws():
        DynamoResult.execute_result = both  # type: ignore[method-assign,assignment]
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(
                TableName="ledger",
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            yield client, seen
        finally:
            DynamoResult.execute_result = original  # type: ignore[method-assign]


ITEM = {
    "pk": {"S": "r-1"},
    "sk": {"S": "STATE#0001"},
    "fee": {"N": "1990.60"},
    "active": {"BOOL": True},
    "nothing": {"NULL": True},
    "detail": {"M": {"reason": {"S": 'a <b> & "c"'}, "hours": {"L": [{"N": "1"}, {"N": "2.5"}]}}},
    "regions": {"SS": ["us-east-1", "us-west-2"]},
    "counts": {"NS": ["1", "3"]},
    "empty": {"L": []},
    "unicode": {"S": "café ✓"},
}


def test_every_item_operation_answers_as_the_serializer_does(compared: tuple[Any, Counter[str]]) -> None:
    client, seen = compared
    for index in range(5):
        client.put_item(TableName="ledger", Item={**ITEM, "sk": {"S": f"STATE#{index:04d}"}})
    client.put_item(TableName="ledger", Item=ITEM, ReturnValues="ALL_OLD", ReturnConsumedCapacity="TOTAL")
    client.get_item(TableName="ledger", Key={"pk": ITEM["pk"], "sk": ITEM["sk"]})
    client.get_item(TableName="ledger", Key={"pk": {"S": "none"}, "sk": {"S": "x"}})
    page = client.query(
        TableName="ledger",
        KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
        ExpressionAttributeValues={":p": {"S": "r-1"}, ":s": {"S": "STATE#"}},
        Limit=2,
        ReturnConsumedCapacity="TOTAL",
    )
    assert "LastEvaluatedKey" in page
    client.query(
        TableName="ledger",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "r-1"}},
        ProjectionExpression="sk, detail.hours",
        ExclusiveStartKey=page["LastEvaluatedKey"],
    )
    client.query(
        TableName="ledger",
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": "r-1"}},
        Select="COUNT",
    )
    client.update_item(
        TableName="ledger",
        Key={"pk": ITEM["pk"], "sk": ITEM["sk"]},
        UpdateExpression="SET fee = :f ADD counts :c",
        ExpressionAttributeValues={":f": {"N": "10"}, ":c": {"NS": ["7"]}},
        ReturnValues="ALL_NEW",
    )
    client.transact_write_items(
        TransactItems=[
            {"Put": {"TableName": "ledger", "Item": {**ITEM, "sk": {"S": "OUTCOME"}}}},
            {"Delete": {"TableName": "ledger", "Key": {"pk": ITEM["pk"], "sk": {"S": "STATE#0004"}}}},
        ]
    )
    client.batch_get_item(RequestItems={"ledger": {"Keys": [{"pk": ITEM["pk"], "sk": ITEM["sk"]}]}})
    client.scan(TableName="ledger", Limit=3)
    client.delete_item(TableName="ledger", Key={"pk": ITEM["pk"], "sk": ITEM["sk"]}, ReturnValues="ALL_OLD")
    client.describe_table(TableName="ledger")  # timestamps: the serializer's

    fast = {key.split(":")[0] for key, count in seen.items() if key.endswith(":fast")}
    assert fast >= {"PutItem", "GetItem", "Query", "UpdateItem", "DeleteItem", "BatchGetItem", "Scan"}
    assert seen["DescribeTable:serializer"] == 1


def test_a_failed_call_keeps_the_serializers_error(compared: tuple[Any, Counter[str]]) -> None:
    client, _ = compared
    client.put_item(TableName="ledger", Item=ITEM)
    with pytest.raises(client.exceptions.ConditionalCheckFailedException):
        client.put_item(TableName="ledger", Item=ITEM, ConditionExpression="attribute_not_exists(pk)")


def test_install_and_uninstall_put_moto_back() -> None:
    original = DynamoResult.execute_result
    dynamodb_answers.install()
    dynamodb_answers.install()  # idempotent
    assert DynamoResult.execute_result is not original
    dynamodb_answers.uninstall()
    assert DynamoResult.execute_result is original
