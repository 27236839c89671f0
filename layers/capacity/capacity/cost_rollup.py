"""The costs rollup (issue 31): ``GET /costs`` in a constant number of reads, whatever the history.

Kept in the ledger's table, next to what it sums, and written by :meth:`capacity.ledger.Ledger.record` in the
same ``TransactWriteItems`` as the entry that carries the money (``PURCHASED``, ``EXTENDED``, a refund, the
release's ``RELEASED``), so a rollup never disagrees with the entries. Like ``CURRENT``, each rollup item is
replaced whole (a ``Put`` conditional on its ``version``): the ledger's functions keep their append-only
grants (no ``UpdateItem``), and two writers racing on one team's month never both win (the loser decides
again from what the winner wrote).

Items (USD and hours are decimal strings; a reservation's team-month is its team's and the UTC month its
``PURCHASED`` entry was recorded in, or for capacity run on demand, which has none, the month it started, as
``GET /costs`` always counted it):

- ``(COSTS#<team>#<yyyy-mm>, #TOTAL)``: the team-month. ``cells``: per ``<instance type>|<region>``,
  ``reservations``, ``paid_usd``, ``reserved_instance_hours``, ``used_instance_hours``,
  ``on_demand_equivalent_used_usd`` and ``on_demand_paid_here_usd`` (the last without brought reservations:
  what a saving is counted against); ``open``: the reservations not yet released (request id -> cell), whose
  hours (and, on demand, whose pay) are still growing and are read from their ledger by ``GET /costs``.
- ``(COSTS#<team>#<yyyy-mm>, R#<request id>)``: one reservation: ``reservation``, ``team``, ``month``,
  ``instance_type``, ``region``, ``market``, ``brought``, ``money_usd`` (the sum of its entries' money) and,
  once released, ``final``: its figures as ``GET /costs`` shows them (``reservation_spend`` at the release).
- ``(<request id>, COST)``: where the reservation's rollup lives (``rollup``: its team-month partition).
- ``(COSTS, INDEX)``: every team-month that has a rollup (``team_months``: ``[[team, month], ...]``).

A closed reservation counts ``final``; an open one its money (its hours are added at the release, when the
``paid_usd`` cell also moves from its money to ``final.paid_usd``: the same for a training plan or capacity
block, what ran for on-demand capacity). :func:`apply` is the arithmetic, :class:`RollupStore` the reads.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity import record_kinds
from capacity.adapters.clients import error_code
from capacity.adapters.dynamodb import call_dynamodb, deserialize_item, serialize_item
from capacity.records import State

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PREFIX = record_kinds.COSTS_PREFIX
TOTAL = record_kinds.COSTS_TOTAL
LINE = record_kinds.COSTS_LINE
POINTER = record_kinds.COST_POINTER
INDEX_PARTITION = record_kinds.COSTS_INDEX_PARTITION
INDEX = record_kinds.COSTS_INDEX
NO_TEAM = "(none)"
"""The team key of a reservation requested without a team (what ``GET /costs`` groups it under)."""
METRICS = (
    "paid_usd",
    "reserved_instance_hours",
    "used_instance_hours",
    "on_demand_equivalent_used_usd",
    "on_demand_paid_here_usd",
)
"""The sums of a cell besides ``reservations`` (decimal strings)."""
MAX_BATCH_GET = 100
OPENING_STATES = frozenset({State.PURCHASED, State.DEPLOYING, State.RELEASING, State.RELEASED})
"""The entries that open a reservation's rollup when it has a ``PURCHASE`` item and none yet: ``PURCHASED``
(in its month), else, for capacity run on demand (no ``PURCHASED``: nothing upfront), its deployment or its
release (in the month it started), as ``GET /costs`` always counted it."""


def partition(team: str | None, month: str) -> str:
    """``COSTS#<team>#<yyyy-mm>``: the partition of a team's month."""
    return f"{PREFIX}{team or NO_TEAM}#{month}"


def cell_key(instance_type: str | None, region: str | None) -> str:
    """``<instance type>|<region>``: one cell of a team-month (what ``group_by`` groups by)."""
    return f"{instance_type or ''}|{region or ''}"


def dec(value: Any) -> Decimal:
    """A stored decimal string (or None: 0) as a Decimal."""
    return Decimal(str(value)) if value not in (None, "") else Decimal(0)


@dataclass(frozen=True)
class Change:
    """What one ledger entry does to the rollup.

    Attributes:
        request_id: the reservation.
        month: the entry's UTC month (``yyyy-mm``): the reservation's month when it is its ``PURCHASED``.
        money_usd: the entry's money (a fee; negative: a refund), or None.
        purchased: the entry is ``PURCHASED`` (creates the reservation's rollup).
        final: the reservation's figures at its release (``RELEASED``), or None.
    """

    request_id: str
    month: str
    money_usd: Decimal | None
    purchased: bool
    final: Mapping[str, Any] | None


@dataclass(frozen=True)
class Reservation:
    """What the rollup records of a reservation when it is bought (from its ``REQUEST`` and ``PURCHASE``)."""

    team: str | None
    instance_type: str | None
    region: str | None
    market: str
    brought: bool


def new_line(change: Change, reservation: Reservation) -> dict[str, Any]:
    """A reservation's rollup item before any money."""
    return {
        "request_id": partition(reservation.team, change.month),
        "sk": LINE + change.request_id,
        "reservation": change.request_id,
        "team": reservation.team,
        "month": change.month,
        "instance_type": reservation.instance_type,
        "region": reservation.region,
        "market": reservation.market,
        "brought": reservation.brought,
        "money_usd": "0",
        "final": None,
        "version": 0,
    }


def new_total(team: str | None, month: str) -> dict[str, Any]:
    """A team-month's rollup item before any reservation."""
    return {
        "request_id": partition(team, month),
        "sk": TOTAL,
        "team": team,
        "month": month,
        "cells": {},
        "open": {},
        "version": 0,
    }


def empty_cell(instance_type: str | None, region: str | None) -> dict[str, Any]:
    """A cell with nothing in it."""
    return {
        "instance_type": instance_type,
        "region": region,
        "reservations": 0,
        **dict.fromkeys(METRICS, "0"),
    }


def apply(
    change: Change, line: dict[str, Any], total: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reservation's and its team-month's items after ``change`` (new dicts; ``version`` + 1).

    A purchase adds the reservation to its cell and to ``open``; money adds to the reservation's
    ``money_usd`` and the cell's ``paid_usd``; the release's figures (``final``) replace the reservation's
    money by its final pay in the cell, add its hours and close it. A reservation already closed adds only
    its money (nothing records money after a release today; if something did, its pay would show it).
    """
    line = {**line, "version": int(line.get("version") or 0) + 1}
    total = {
        **total,
        "cells": {k: dict(v) for k, v in (total.get("cells") or {}).items()},
        "open": dict(total.get("open") or {}),
        "version": int(total.get("version") or 0) + 1,
    }
    key = cell_key(line.get("instance_type"), line.get("region"))
    cell = total["cells"].setdefault(key, empty_cell(line.get("instance_type"), line.get("region")))
    rid = change.request_id
    if change.purchased and line["version"] == 1:
        cell["reservations"] = int(cell.get("reservations") or 0) + 1
        total["open"][rid] = key
    if change.money_usd is not None:
        line["money_usd"] = f"{dec(line.get('money_usd')) + change.money_usd:f}"
        _add(cell, "paid_usd", change.money_usd)
    if change.final is not None and rid in total["open"]:
        final = dict(change.final)
        line["final"] = final
        del total["open"][rid]
        _add(cell, "paid_usd", dec(final.get("paid_usd")) - dec(line["money_usd"]))
        _add(cell, "reserved_instance_hours", dec(final.get("reserved_instance_hours")))
        _add(cell, "used_instance_hours", dec(final.get("used_instance_hours")))
        on_demand = dec(final.get("on_demand_equivalent_used_usd"))
        _add(cell, "on_demand_equivalent_used_usd", on_demand)
        if not line.get("brought"):
            _add(cell, "on_demand_paid_here_usd", on_demand)
    return line, total


def _add(cell: dict[str, Any], metric: str, amount: Decimal) -> None:
    cell[metric] = f"{dec(cell.get(metric)) + amount:f}"


def with_team_month(index: Mapping[str, Any] | None, team: str | None, month: str) -> dict[str, Any] | None:
    """The index item with ``[team, month]`` added, or None when it lists it already."""
    pairs = [list(p) for p in (index or {}).get("team_months") or []]
    pair = [team or NO_TEAM, month]
    if pair in pairs:
        return None
    return {
        "request_id": INDEX_PARTITION,
        "sk": INDEX,
        "team_months": sorted([*pairs, pair]),
        "version": int((index or {}).get("version") or 0) + 1,
    }


def put_versioned(table: str, item: Mapping[str, Any]) -> dict[str, Any]:
    """A transaction's ``Put`` of a rollup item replacing the version it was read at (``version`` - 1; a new
    item when that is 0)."""
    version = int(item["version"]) - 1
    if version <= 0:
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(sk)"}
    else:
        condition = {
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": {":v": {"N": str(version)}},
        }
    return {"Put": {"TableName": table, "Item": serialize_item(item), **condition}}


class RollupStore:
    """Reads of the rollup (``GET /costs``, the reconciliation): each a constant number of DynamoDB calls.

    Args:
        table_name: the ledger's table (env ``LEDGER_TABLE``).
        client: a DynamoDB client.
    """

    def __init__(self, table_name: str, client: DynamoDBClient) -> None:
        self._table = table_name
        self._client = client

    def get(self, pk: str, sk: str) -> dict[str, Any] | None:
        """One rollup item (strongly consistent), or None."""
        answer = call_dynamodb(
            "GetItem",
            lambda: self._client.get_item(
                TableName=self._table,
                Key={"request_id": {"S": pk}, "sk": {"S": sk}},
                ConsistentRead=True,
            ),
        )
        item = answer.get("Item")
        return deserialize_item(item) if item else None

    def team_months(self) -> list[tuple[str, str]]:
        """Every ``(team, month)`` with a rollup (one ``GetItem`` of the index), in team then month order."""
        index = self.get(INDEX_PARTITION, INDEX) or {}
        return sorted((str(t), str(m)) for t, m in index.get("team_months") or [])

    def totals(self, keys: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
        """The team-month items of ``keys`` (``BatchGetItem``, 100 per call), in ``keys``' order; missing ones
        are left out."""
        found: dict[str, dict[str, Any]] = {}
        wanted = [partition(team, month) for team, month in keys]
        for start in range(0, len(wanted), MAX_BATCH_GET):
            batch: list[Any] = [
                {"request_id": {"S": pk}, "sk": {"S": TOTAL}}
                for pk in dict.fromkeys(wanted[start : start + 100])
            ]
            for _ in range(3):  # DynamoDB may leave keys unprocessed under load
                if not batch:
                    break
                requested: dict[str, Any] = {self._table: {"Keys": batch, "ConsistentRead": True}}
                answer = call_dynamodb(
                    "BatchGetItem", partial(self._client.batch_get_item, RequestItems=requested)
                )
                for raw in answer.get("Responses", {}).get(self._table, []):
                    item = deserialize_item(raw)
                    found[str(item["request_id"])] = item
                unprocessed: dict[str, Any] = dict(answer.get("UnprocessedKeys") or {})
                batch = list((unprocessed.get(self._table) or {}).get("Keys") or [])
            for key in batch:  # still unprocessed: one by one
                alone = self.get(str(key["request_id"]["S"]), TOTAL)
                if alone is not None:
                    found[str(alone["request_id"])] = alone
        return [found[pk] for pk in wanted if pk in found]

    def lines(self, pk: str, *, after: str | None, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` reservation items of a team-month after request id ``after`` (one ``Query``), in
        request id order; and whether more follow."""
        kwargs: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "request_id = :pk AND begins_with(sk, :line)",
            "ExpressionAttributeValues": {":pk": {"S": pk}, ":line": {"S": LINE}},
            "Limit": limit + 1,
            "ConsistentRead": True,
        }
        if after is not None:
            kwargs["ExclusiveStartKey"] = {"request_id": {"S": pk}, "sk": {"S": LINE + after}}
        page = call_dynamodb("Query", lambda: self._client.query(**kwargs))
        items = [deserialize_item(item) for item in page.get("Items", [])]
        return items[:limit], len(items) > limit

    def replace(self, item: Mapping[str, Any], stored: Mapping[str, Any] | None) -> int:
        """Put ``item`` in place of ``stored`` (the reconciliation's fix), on the version ``stored`` was read
        at: 1 when written, 0 when it moved meanwhile (a writer recorded money: reconcile again)."""
        version = int((stored or {}).get("version") or 0)
        put = put_versioned(self._table, {**item, "version": version + 1})["Put"]
        try:
            call_dynamodb("PutItem", lambda: self._client.put_item(**put))
        except ClientError as exc:
            if error_code(exc) != "ConditionalCheckFailedException":
                raise
            return 0
        return 1

    def add_to_index(self, pairs: Sequence[tuple[str, str]]) -> int:
        """Add ``(team, month)`` pairs to the index (the reconciliation's fix): 1 when written, else 0."""
        index = self.get(INDEX_PARTITION, INDEX)
        merged = dict(index or {"request_id": INDEX_PARTITION, "sk": INDEX, "team_months": []})
        merged["team_months"] = sorted({*map(tuple, merged.get("team_months") or []), *pairs})
        merged["team_months"] = [list(p) for p in merged["team_months"]]
        return self.replace(merged, index)

    def line_keys(self, pk: str) -> list[str]:
        """Every reservation of a team-month (the reconciliation's full read, not ``GET /costs``')."""
        out: list[str] = []
        after: str | None = None
        while True:
            items, more = self.lines(pk, after=after, limit=500)
            out.extend(str(i["reservation"]) for i in items)
            if not more or not items:
                return out
            after = out[-1]


def encode_token(pk: str, after: str) -> str:
    """The opaque ``next_token`` of the reservations' list: the team-month and the last request id."""
    return base64.urlsafe_b64encode(json.dumps([pk, after]).encode()).decode()


def decode_token(token: str) -> tuple[str, str]:
    """:func:`encode_token` reversed.

    Raises:
        ValueError: not a token this API gave.
    """
    try:
        pk, after = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError) as exc:
        raise ValueError("next_token is not one this API gave") from exc
    if not (isinstance(pk, str) and isinstance(after, str) and pk.startswith(PREFIX)):
        raise ValueError("next_token is not one this API gave")
    return pk, after
