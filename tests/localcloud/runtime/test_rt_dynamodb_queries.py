"""moto's DynamoDB ``Query`` read by partition (:mod:`localcloud.dynamodb_queries`): the same answers as
moto's own, in the same order and pages, on the table's key and on an index; and the table-wide sort gone."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from localcloud import dynamodb_queries


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName="ledger",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
                {"AttributeName": "state", "AttributeType": "S"},
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": "by-state",
                    "KeySchema": [
                        {"AttributeName": "state", "KeyType": "HASH"},
                        {"AttributeName": "sk", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.create_table(
            TableName="flat",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        for r in range(6):
            for s in (5, 1, 9, 3):
                dynamodb.put_item(
                    TableName="ledger",
                    Item={
                        "pk": {"S": f"r{r}"},
                        "sk": {"S": f"s{s}"},
                        "state": {"S": "READY" if s > 2 else "X"},
                    },
                )
            dynamodb.put_item(TableName="flat", Item={"pk": {"S": f"r{r}"}})
        yield dynamodb
        dynamodb_queries.uninstall()


QUERIES: list[dict[str, Any]] = [
    {
        "TableName": "ledger",
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "r3"}},
    },
    {
        "TableName": "ledger",
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": {"S": "r3"}, ":s": {"S": "s"}},
        "ScanIndexForward": False,
    },
    {
        "TableName": "ledger",
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "nope"}},
    },
    {
        "TableName": "ledger",
        "IndexName": "by-state",
        "KeyConditionExpression": "#s = :v",
        "ExpressionAttributeNames": {"#s": "state"},
        "ExpressionAttributeValues": {":v": {"S": "READY"}},
    },
    {
        "TableName": "flat",
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "r2"}},
    },
]


def _pages(client: Any, query: dict[str, Any], limit: int) -> list[list[dict[str, Any]]]:
    pages, start = [], None
    while True:
        answer = client.query(**query, Limit=limit, **({"ExclusiveStartKey": start} if start else {}))
        pages.append(answer["Items"])
        start = answer.get("LastEvaluatedKey")
        if not start:
            return pages


@pytest.mark.parametrize("query", QUERIES)
def test_answers_pages_and_order_are_motos_own(client: Any, query: dict[str, Any]) -> None:
    expected = [client.query(**query)["Items"], _pages(client, query, 2)]
    dynamodb_queries.install()
    assert [client.query(**query)["Items"], _pages(client, query, 2)] == expected
    assert expected[0] or query["ExpressionAttributeValues"].get(":p") == {"S": "nope"}


def test_a_query_on_the_key_no_longer_lists_the_whole_table(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    dynamodb_queries.install()
    listed: list[int] = []
    patched = Table.all_items

    def counting(self: Table) -> list[Any]:
        items = patched(self)
        listed.append(len(items))
        return items

    monkeypatch.setattr(Table, "all_items", counting)
    client.query(**QUERIES[0])
    assert listed == [4]  # the partition's 4 items, not the table's 24
