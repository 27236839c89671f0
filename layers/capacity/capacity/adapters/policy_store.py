"""The policy table (env ``POLICY_TABLE``): teams, the account cap, spend per month, quotas and holds.

Items (PK ``pk``, SK ``sk``, both strings; DynamoDB API reference, ``TransactWriteItems``/``UpdateItem``):

============================ ========================== ===================================================
pk                           sk                         attributes
============================ ========================== ===================================================
``POLICY``                   ``TEAM#<team>``            ``policy`` (:class:`~capacity.teams.TeamPolicy`)
``POLICY``                   ``ACCOUNT``                ``policy`` (:class:`~capacity.teams.AccountPolicy`)
``SPEND#<yyyy-mm>``          ``TEAM#<team>``/``ACCOUNT`` ``spent_usd`` (number, USD committed that month)
``QUOTA``                    ``TEAM#<team>#<family>``   ``instances`` (number reserved now)
``HOLD#<key>``               ``HOLD``                   ``team``, ``month``, ``amount_usd``, ``family``,
                                                        ``instances``, ``money_returned``, ``quota_returned``
============================ ========================== ===================================================

A hold is the money and instances one purchase takes from its team's month, the account's month and the
team's quota. It changes in one transaction with those counters, each under a condition that keeps it
within its limit, so two purchases racing for the last dollars cannot both pass (DynamoDB transactions are
serializable). Counters are DynamoDB numbers (exact decimals, 38 digits): ``ADD`` is exact for cents.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity.adapters.clients import error_code
from capacity.adapters.dynamodb import call_dynamodb, deserialize_item, query_all, serialize_item
from capacity.errors import RetryableAwsError
from capacity.resources import Hold, HoldRefused, Limit, Rooms
from capacity.teams import AccountPolicy, Person, Principals, TeamPolicy
from capacity.timeutil import iso_z

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

_HOLD_NAMES = {
    "#team": "team",
    "#month": "month",
    "#amount": "amount_usd",
    "#family": "family",
    "#instances": "instances",
    "#by": "updated_by",
    "#at": "updated_at",
    "#wid": "write_id",
}
"""Every hold attribute by name (``month`` and ``family`` are DynamoDB reserved words)."""
_HOLD_UPDATE = (
    "SET #team = :team, #month = :month, #amount = :amount, #family = :family, "
    "#instances = if_not_exists(#instances, :instances), #by = :actor, #at = :at, #wid = :wid"
)


def _key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _number(value: Decimal | int) -> dict[str, str]:
    return {"N": f"{value:f}" if isinstance(value, Decimal) else str(value)}


class PolicyStore:
    """Reads and writes of the policy table.

    Args:
        table_name: env ``POLICY_TABLE``.
        client: a DynamoDB client.
    """

    def __init__(self, table_name: str, client: DynamoDBClient) -> None:
        self._table = table_name
        self._client = client

    # ------------------------------------------------------------------------------------ the policy

    def _get(self, pk: str, sk: str) -> dict[str, Any] | None:
        answer = call_dynamodb(
            "GetItem",
            lambda: self._client.get_item(TableName=self._table, Key=_key(pk, sk), ConsistentRead=True),
        )
        item = answer.get("Item")
        return deserialize_item(item) if item else None

    def team(self, name: str) -> TeamPolicy | None:
        """The team ``name``, or None."""
        item = self._get("POLICY", f"TEAM#{name}")
        return TeamPolicy.model_validate(item["policy"]) if item else None

    def teams(self) -> list[TeamPolicy]:
        """Every team, by name."""
        items = query_all(
            self._client, table=self._table, partition=("pk", "POLICY"), sk_prefix=("sk", "TEAM#")
        )
        return [TeamPolicy.model_validate(item["policy"]) for item in items]

    def put_team(self, team: TeamPolicy, *, actor: str, now: datetime) -> None:
        """Create or replace the team (its spend and holds are kept)."""
        item = {
            "pk": "POLICY",
            "sk": f"TEAM#{team.name}",
            "policy": team.model_dump(mode="json", exclude_none=True),
            "updated_by": actor,
            "updated_at": iso_z(now),
        }
        call_dynamodb(
            "PutItem", lambda: self._client.put_item(TableName=self._table, Item=serialize_item(item))
        )

    def delete_team(self, name: str) -> bool:
        """Delete the team's policy; False when there was none. Its spend items stay (history)."""
        answer = call_dynamodb(
            "DeleteItem",
            lambda: self._client.delete_item(
                TableName=self._table, Key=_key("POLICY", f"TEAM#{name}"), ReturnValues="ALL_OLD"
            ),
        )
        return bool(answer.get("Attributes"))

    def account(self) -> AccountPolicy | None:
        """The account-wide cap, or None when none is set."""
        item = self._get("POLICY", "ACCOUNT")
        return AccountPolicy.model_validate(item["policy"]) if item else None

    def put_account(self, account: AccountPolicy, *, actor: str, now: datetime) -> None:
        """Set the account-wide cap."""
        item = {
            "pk": "POLICY",
            "sk": "ACCOUNT",
            "policy": account.model_dump(mode="json"),
            "updated_by": actor,
            "updated_at": iso_z(now),
        }
        call_dynamodb(
            "PutItem", lambda: self._client.put_item(TableName=self._table, Item=serialize_item(item))
        )

    def admins(self) -> Principals | None:
        """Who administers (sees every team's reservations and spend), or None when nobody is named."""
        item = self._get("POLICY", "ADMINS")
        return Principals.model_validate(item["policy"]) if item else None

    def put_admins(self, admins: Principals, *, actor: str, now: datetime) -> None:
        """Set who administers (the seed's ``admins``)."""
        item = {
            "pk": "POLICY",
            "sk": "ADMINS",
            "policy": admins.model_dump(mode="json"),
            "updated_by": actor,
            "updated_at": iso_z(now),
        }
        call_dynamodb(
            "PutItem", lambda: self._client.put_item(TableName=self._table, Item=serialize_item(item))
        )

    def people(self) -> list[Person]:
        """Whose identities are one person's (the seed's ``people``; empty when none are named)."""
        item = self._get("POLICY", "PEOPLE")
        return [Person.model_validate(person) for person in item["people"]] if item else []

    def put_people(self, people: Sequence[Person], *, actor: str, now: datetime) -> None:
        """Replace the list of people (the seed's ``people``)."""
        item = {
            "pk": "POLICY",
            "sk": "PEOPLE",
            "people": [person.model_dump(mode="json") for person in people],
            "updated_by": actor,
            "updated_at": iso_z(now),
        }
        call_dynamodb(
            "PutItem", lambda: self._client.put_item(TableName=self._table, Item=serialize_item(item))
        )

    # --------------------------------------------------------------------------------- the counters

    def spent(self, month: str, team: str | None) -> Decimal:
        """USD committed in ``month`` by ``team`` (None: the whole account)."""
        item = self._get(f"SPEND#{month}", f"TEAM#{team}" if team else "ACCOUNT")
        return Decimal(str(item.get("spent_usd", 0))) if item else Decimal(0)

    def reserved_instances(self, team: str, family: str) -> int:
        """Instances of ``family`` the team holds now."""
        item = self._get("QUOTA", f"TEAM#{team}#{family}")
        return int(item.get("instances", 0)) if item else 0

    def hold(self, key: str) -> Hold | None:
        """The hold ``key``, or None."""
        item = self._get(f"HOLD#{key}", "HOLD")
        if item is None:
            return None
        return Hold(
            key=key,
            team=str(item["team"]),
            month=str(item["month"]),
            amount_usd=Decimal(str(item["amount_usd"])),
            family=str(item["family"]),
            instances=int(item["instances"]),
            money_returned=bool(item.get("money_returned", False)),
            quota_returned=bool(item.get("quota_returned", False)),
        )

    def change_hold(
        self,
        *,
        key: str,
        team: str,
        month: str,
        old: Hold | None,
        amount_usd: Decimal,
        family: str,
        instances: int,
        rooms: Rooms,
        actor: str,
        now: datetime,
    ) -> None:
        """Set hold ``key`` to ``amount_usd`` (and, for a new hold, ``instances``), in one transaction with
        the
        team's and the account's month and the team's quota, each conditioned on ``rooms``.

        Raises:
            HoldRefused: a condition failed (``limit`` names which); nothing was written.
            RetryableAwsError: DynamoDB throttled or the transaction conflicted with another one.
        """
        delta = amount_usd - (old.amount_usd if old else Decimal(0))
        write_id = uuid.uuid4().hex
        items: list[tuple[Limit, dict[str, Any]]] = []
        hold_values = {
            ":team": {"S": team},
            ":month": {"S": month},
            ":amount": _number(amount_usd),
            ":family": {"S": family},
            ":instances": _number(instances),
            ":actor": {"S": actor},
            ":at": {"S": iso_z(now)},
            ":wid": {"S": write_id},
        }
        condition = "attribute_not_exists(pk)"
        if old is not None:
            condition = "#amount = :old"
            hold_values[":old"] = _number(old.amount_usd)
        items.append(
            (
                "hold",
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": _key(f"HOLD#{key}", "HOLD"),
                        "UpdateExpression": _HOLD_UPDATE,
                        "ConditionExpression": condition,
                        "ExpressionAttributeNames": _HOLD_NAMES,
                        "ExpressionAttributeValues": hold_values,
                    }
                },
            )
        )
        if delta != 0:
            items.append(
                ("team", self._add(f"SPEND#{month}", f"TEAM#{team}", "spent_usd", delta, rooms.team_usd))
            )
            items.append(
                ("account", self._add(f"SPEND#{month}", "ACCOUNT", "spent_usd", delta, rooms.account_usd))
            )
        if old is None and instances:
            items.append(
                (
                    "quota",
                    self._add(
                        "QUOTA", f"TEAM#{team}#{family}", "instances", instances, rooms.quota_instances
                    ),
                )
            )
        self._transact(items, key=key, write_id=write_id)

    def _add(
        self, pk: str, sk: str, attribute: str, delta: Decimal | int, room: Decimal | int | None
    ) -> dict[str, Any]:
        update: dict[str, Any] = {
            "TableName": self._table,
            "Key": _key(pk, sk),
            "UpdateExpression": "ADD #a :delta",
            "ExpressionAttributeNames": {"#a": attribute},
            "ExpressionAttributeValues": {":delta": _number(delta)},
        }
        if room is not None and delta > 0:
            update["ConditionExpression"] = "attribute_not_exists(#a) OR #a <= :room"
            update["ExpressionAttributeValues"][":room"] = _number(room)
        return {"Update": update}

    def _transact(self, items: Sequence[tuple[Limit, dict[str, Any]]], *, key: str, write_id: str) -> None:
        try:
            call_dynamodb(
                "TransactWriteItems",
                lambda: self._client.transact_write_items(TransactItems=[item for _, item in items]),  # type: ignore[misc]
            )
        except ClientError as exc:
            if error_code(exc) != "TransactionCanceledException":
                raise
            stored = self._get(f"HOLD#{key}", "HOLD")
            if stored is not None and stored.get("write_id") == write_id:
                return  # a botocore retry of a transaction that did commit
            reasons = exc.response.get("CancellationReasons") or []
            for (limit, _), reason in zip(items, reasons, strict=False):
                if reason.get("Code") == "ConditionalCheckFailed":
                    raise HoldRefused(limit) from exc
            raise RetryableAwsError(f"policy transaction for hold {key} was cancelled: {exc}") from exc

    def give_back(self, hold: Hold, *, money: bool, quota: bool, now: datetime) -> bool:
        """Return the hold's money (to the team's and account's month) and/or its instances (to the quota),
        each at most once (``money_returned``/``quota_returned``). False when there was nothing left to
        return.

        Raises:
            RetryableAwsError: DynamoDB throttled or the transaction conflicted.
        """
        money = money and not hold.money_returned and hold.amount_usd > 0
        quota = quota and not hold.quota_returned and hold.instances > 0
        if not money and not quota:
            return False
        sets = [  # money_returned, quota_returned, returned_at, write_id: no reserved words
            f"{flag} = :true"
            for flag, wanted in (("money_returned", money), ("quota_returned", quota))
            if wanted
        ]
        checks = [
            f"attribute_not_exists({flag})"
            for flag, wanted in (("money_returned", money), ("quota_returned", quota))
            if wanted
        ]
        write_id = uuid.uuid4().hex
        items: list[tuple[Limit, dict[str, Any]]] = [
            (
                "hold",
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": _key(f"HOLD#{hold.key}", "HOLD"),
                        "UpdateExpression": "SET "
                        + ", ".join([*sets, "returned_at = :at", "write_id = :wid"]),
                        "ConditionExpression": " AND ".join(["attribute_exists(pk)", *checks]),
                        "ExpressionAttributeValues": {
                            ":true": {"BOOL": True},
                            ":at": {"S": iso_z(now)},
                            ":wid": {"S": write_id},
                        },
                    }
                },
            )
        ]
        if money:
            items.append(
                (
                    "team",
                    self._add(
                        f"SPEND#{hold.month}", f"TEAM#{hold.team}", "spent_usd", -hold.amount_usd, None
                    ),
                )
            )
            items.append(
                ("account", self._add(f"SPEND#{hold.month}", "ACCOUNT", "spent_usd", -hold.amount_usd, None))
            )
        if quota:
            items.append(
                (
                    "quota",
                    self._add("QUOTA", f"TEAM#{hold.team}#{hold.family}", "instances", -hold.instances, None),
                )
            )
        try:
            self._transact(items, key=hold.key, write_id=write_id)
        except HoldRefused:
            return False  # another caller returned it first
        return True
