"""DynamoDB helpers and the offerings store (OFFERINGS_TABLE).

Items are written with the low-level client and boto3's ``TypeSerializer``/``TypeDeserializer``
(DynamoDB API reference, "AttributeValue"). DynamoDB numbers cannot be Python floats, so floats are
stored as ``Decimal(str(x))``; on the way back integral numbers become ``int`` and the others ``float``,
so everything read is JSON-safe. Money is always stored as a decimal *string* (no rounding surprises).

OFFERINGS_TABLE: PK ``request_id`` (S), SK ``offering_key`` (S), TTL attribute ``ttl`` (epoch seconds).
Bulk search results live here, never in the Step Functions payload (256 KB limit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic import BaseModel

from capacity.adapters.clients import call
from capacity.errors import RetryableAwsError
from capacity.offerings import Offering
from capacity.timeutil import iso_z, utcnow

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

BATCH_SIZE = 25  # BatchWriteItem takes at most 25 put requests
MAX_BATCH_ROUNDS = 8


def to_dynamo_value(value: Any) -> Any:
    """``value`` made storable: floats to Decimal, datetimes to ISO ``Z`` strings, models to dicts."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_dynamo_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_dynamo_value(v) for v in value]
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, datetime):
        return iso_z(value)
    if isinstance(value, bool) or value is None or isinstance(value, str | int | Decimal | bytes):
        return value
    return str(value)


def from_dynamo_value(value: Any) -> Any:
    """A deserialized value made JSON-safe: Decimal to int/float, sets to sorted lists."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Mapping):
        return {k: from_dynamo_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_dynamo_value(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted(from_dynamo_value(v) for v in value)
    return value


def serialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A Python dict as a DynamoDB item (``{"attr": {"S": ...}}``)."""
    return {key: _serializer.serialize(to_dynamo_value(value)) for key, value in item.items()}


def deserialize_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """A DynamoDB item as a JSON-safe Python dict."""
    return {key: from_dynamo_value(_deserializer.deserialize(value)) for key, value in item.items()}


def call_dynamodb[T](operation: str, function: Callable[[], T]) -> T:
    """Run one DynamoDB call, turning transient failures into :class:`RetryableAwsError`.

    Other ``ClientError`` s (e.g. ``ConditionalCheckFailedException``) propagate unchanged.
    """
    return call(f"DynamoDB {operation}", function)


def query_all(
    client: DynamoDBClient,
    *,
    table: str,
    partition: tuple[str, str],
    sk_prefix: tuple[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every item of one partition (optionally with a sort-key prefix), strongly consistent, paginated."""
    pk_name, pk_value = partition
    condition = "#pk = :pk"
    names = {"#pk": pk_name}
    values: dict[str, Any] = {":pk": {"S": pk_value}}
    if sk_prefix is not None:
        condition += " AND begins_with(#sk, :prefix)"
        names["#sk"] = sk_prefix[0]
        values[":prefix"] = {"S": sk_prefix[1]}
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
        "ConsistentRead": True,
    }
    while True:
        page = call_dynamodb("Query", lambda: client.query(**kwargs))
        for item in page.get("Items", []):
            yield deserialize_item(item)
        last = page.get("LastEvaluatedKey")
        if not last:
            return
        kwargs["ExclusiveStartKey"] = last


class OfferingStore:
    """Normalised offerings of a request in OFFERINGS_TABLE (overwritable cache, expires by TTL).

    Args:
        table_name: env ``OFFERINGS_TABLE``.
        client: a DynamoDB client.
        ttl_days: days until DynamoDB's TTL removes the items.
    """

    def __init__(self, table_name: str, client: DynamoDBClient, *, ttl_days: int = 14) -> None:
        self._table = table_name
        self._client = client
        self._ttl = timedelta(days=ttl_days)

    def put_many(self, request_id: str, offerings: Sequence[Offering], *, look: int = 0) -> int:
        """Store ``offerings`` (same key = same offering, overwritten). Returns how many were written.

        Args:
            look: which search of a request that keeps looking (0: the first); each look's offerings are kept
                apart (sort key ``look#<nn>#<key>`` from the second on), so a later choice never meets an
                offering an earlier look found and the market has withdrawn since.

        Raises:
            RetryableAwsError: DynamoDB kept some items unprocessed after several rounds.
        """
        expires = int((utcnow() + self._ttl).timestamp())
        requests = [
            {
                "PutRequest": {
                    "Item": serialize_item(
                        {
                            "request_id": request_id,
                            "offering_key": _look_prefix(look) + offering.key,
                            "ttl": expires,
                            **offering.model_dump(mode="json"),
                        }
                    )
                }
            }
            for offering in offerings
        ]
        for start in range(0, len(requests), BATCH_SIZE):
            pending: list[Any] = requests[start : start + BATCH_SIZE]
            for _ in range(MAX_BATCH_ROUNDS):
                batch = pending
                answer = call_dynamodb(
                    "BatchWriteItem",
                    lambda batch=batch: self._client.batch_write_item(  # type: ignore[misc]
                        RequestItems={self._table: batch}
                    ),
                )
                pending = cast(list[Any], answer.get("UnprocessedItems", {}).get(self._table, []))
                if not pending:
                    break
            if pending:
                raise RetryableAwsError(f"DynamoDB BatchWriteItem left {len(pending)} offerings unprocessed")
        return len(requests)

    def list(self, request_id: str, *, look: int = 0) -> list[Offering]:
        """Every offering of ``request_id`` stored by search ``look`` (any order)."""
        prefix = _look_prefix(look)
        items = query_all(
            self._client,
            table=self._table,
            partition=("request_id", request_id),
            sk_prefix=("offering_key", prefix) if prefix else None,
        )
        return [
            Offering.model_validate(item)
            for item in items
            if prefix or not str(item["offering_key"]).startswith(_LOOK)
        ]


_LOOK = "look#"


def _look_prefix(look: int) -> str:
    """The sort-key prefix of look ``look``'s offerings (none for the first: keys as they always were)."""
    return f"{_LOOK}{look:02d}#" if look else ""


class SignatureLog:
    """Remembers verified Slack request signatures in the idempotency table (env ``IDEMPOTENCY_TABLE``,
    PK ``id``, TTL attribute ``expiration``): a second use of the same key is a replay.

    One conditional ``PutItem`` (``attribute_not_exists(id)``) per request; DynamoDB's TTL deletes the
    item after ``expires_at`` (the TTL may lag, which only keeps a refused key longer).

    Args:
        table_name: the idempotency table.
        client: a DynamoDB client.
    """

    def __init__(self, table_name: str, client: DynamoDBClient) -> None:
        self._table = table_name
        self._client = client

    def first_use(self, key: str, *, expires_at: datetime) -> bool:
        """True the first time ``key`` is seen, False afterwards (until the item expires).

        Raises:
            RetryableAwsError: throttling or a 5xx after botocore's retries.
        """
        item = {"id": key, "expiration": int(expires_at.timestamp()), "kind": "slack-signature"}
        try:
            call_dynamodb(
                "PutItem",
                lambda: self._client.put_item(
                    TableName=self._table,
                    Item=serialize_item(item),
                    ConditionExpression="attribute_not_exists(id)",
                ),
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True
