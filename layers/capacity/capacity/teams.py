"""Who may spend what: teams and the account-wide cap, as administrators set them (issue 16).

The policy lives in the DynamoDB table ``POLICY_TABLE``
(:class:`~capacity.adapters.policy_store.PolicyStore`),
written through the admin routes (``PUT /admin/teams/{team}``, ``PUT /admin/account``) or a seed file
(``deploy/policy-seed.json``, loaded by ``scripts/seed_policy.py`` after ``sam deploy`` and by the local
cloud). Requesters cannot change it: a request may ask for less than its team allows, never more.

Identities are the strings the doors authenticate: an IAM principal ARN at the API
(``requestContext.identity.userArn``, e.g. ``arn:aws:sts::123456789012:assumed-role/MlPlatform/alice``),
``slack:<user id>`` at Slack. Members and approvers match by ARN pattern (``fnmatch``: ``*`` and ``?``;
``arn:aws:sts::123456789012:assumed-role/MlPlatform/*``), by IAM principal tag (``{"team": "ml-eval"}``: the
tags of the role or user behind the ARN, IAM ``ListRoleTags``/``ListUserTags``), by Slack user id or by Slack
user group id (``S0123ABC``: its users, Slack ``usergroups.users.list``, read when asked).

Money is USD (:class:`~decimal.Decimal`, whole cents); a month is a UTC calendar month (``2026-12``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints, ValidationInfo, field_validator

from capacity.base import Model
from capacity.instances import CAPACITY_BLOCK_INSTANCE_TYPES, INSTANCE_TYPES
from capacity.pricing import KNOWN_REGIONS
from capacity.wire import MAX_REQUEST_USD, MONEY_DECIMAL_PLACES, Money, StrictInt

TEAM_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
"""Team names: 1-63 lower-case letters, digits and hyphens (they appear in keys, metrics and URLs)."""
_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::(\d{12}|\*):[A-Za-z0-9+=,.@_/*?-]+$")
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{1,20}$")
_SLACK_USER_GROUP = re.compile(r"^S[A-Z0-9]{2,20}$")

ArnPattern = Annotated[str, StringConstraints(min_length=20, max_length=512)]
SlackUser = Annotated[str, StringConstraints(min_length=2, max_length=21)]
TeamUsd = Annotated[Money, Field(ge=0, le=MAX_REQUEST_USD, decimal_places=MONEY_DECIMAL_PLACES)]


def _arn_patterns(values: list[str]) -> list[str]:
    bad = [value for value in values if not _ARN_PATTERN.match(value)]
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))} is not an IAM principal ARN or pattern: use "
            "arn:aws:iam::<account>:role/<name>, arn:aws:iam::<account>:user/<name> or "
            "arn:aws:sts::<account>:assumed-role/<role>/<session>, with * or ? as wildcards"
        )
    return values


def _slack_users(values: list[str]) -> list[str]:
    bad = [value for value in values if not _SLACK_USER.match(value)]
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))} is not a Slack user id (U... or W..., as Slack shows it)"
        )
    return values


def _slack_user_groups(values: list[str]) -> list[str]:
    bad = [value for value in values if not _SLACK_USER_GROUP.match(value)]
    if bad:
        raise ValueError(
            f"{', '.join(map(repr, bad))} is not a Slack user group id (S..., as the group's URL or "
            "usergroups.list shows it; not its @handle)"
        )
    return values


def arn_matches(identity: str, pattern: str) -> bool:
    """True when the IAM principal ARN ``identity`` matches ``pattern`` (``*``/``?`` wildcards, case-sensitive
    as IAM ARNs are)."""
    return fnmatch.fnmatchcase(identity, pattern)


class Principals(Model):
    """Who belongs: IAM principal ARN patterns, IAM principal tags (every key/value must match), Slack
    users, and the users of Slack user groups."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iam_principal_arns: list[ArnPattern] = Field(default_factory=list, max_length=100)
    iam_principal_tags: dict[
        Annotated[str, StringConstraints(min_length=1, max_length=128)],
        Annotated[str, StringConstraints(max_length=256)],
    ] = Field(default_factory=dict, max_length=10)
    slack_users: list[SlackUser] = Field(default_factory=list, max_length=500)
    slack_user_groups: list[SlackUser] = Field(default_factory=list, max_length=20)

    _check_arns = field_validator("iam_principal_arns")(_arn_patterns)
    _check_slack = field_validator("slack_users")(_slack_users)
    _check_groups = field_validator("slack_user_groups")(_slack_user_groups)

    def by_arn_or_slack(self, identity: str) -> bool:
        """True when ``identity`` (an ARN or ``slack:<id>``) is named by an ARN pattern or a Slack user."""
        return _named(identity, self.iam_principal_arns, self.slack_users)

    def by_tags(self, tags: Mapping[str, str] | None) -> bool:
        """True when this set names tags and the principal carries every one of them."""
        if not self.iam_principal_tags or tags is None:
            return False
        return all(tags.get(key) == value for key, value in self.iam_principal_tags.items())

    def by_groups(self, groups: frozenset[str]) -> bool:
        """True when one of this set's Slack user groups is in ``groups`` (those the Slack user is in)."""
        return any(group in groups for group in self.slack_user_groups)


def _named(identity: str, arn_patterns: Sequence[str], slack_users: Sequence[str]) -> bool:
    if identity.startswith("slack:"):
        return identity.removeprefix("slack:") in slack_users
    return any(arn_matches(identity, pattern) for pattern in arn_patterns)


class Person(Model):
    """One person's identities (the seed's ``people``): the IAM principals (ARN patterns: an assumed role's
    sessions vary) and the Slack users that are the same human. The four-eyes rule compares people, so a
    request made at the API is never approved by its requester from Slack, nor the other way round.

    Attributes:
        name: how messages name the person.
        iam_principal_arns: ARN patterns of the person's IAM identities (``*``/``?`` wildcards).
        slack_users: the person's Slack user ids (``U...``/``W...``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    iam_principal_arns: list[ArnPattern] = Field(default_factory=list, max_length=20)
    slack_users: list[SlackUser] = Field(default_factory=list, max_length=10)

    _check_arns = field_validator("iam_principal_arns")(_arn_patterns)
    _check_slack = field_validator("slack_users")(_slack_users)

    def is_(self, identity: str) -> bool:
        """True when ``identity`` (an ARN or ``slack:<id>``) is one of this person's."""
        return _named(identity, self.iam_principal_arns, self.slack_users)


def instance_family(instance_type: str) -> str:
    """The quota family of an instance type: ``ml.p5.48xlarge`` -> ``ml.p5``, ``p5.48xlarge`` -> ``p5``."""
    return instance_type.rsplit(".", 1)[0]


def _only_known(values: list[str], known: set[str], what: str) -> list[str]:
    """``values`` if each is in ``known``; else ValueError naming the unknown ones and the known ones."""
    bad = [value for value in values if value not in known]
    if bad:
        raise ValueError(f"unknown {what}(s) {', '.join(map(repr, bad))}: use " + ", ".join(sorted(known)))
    return values


class TeamPolicy(Model):
    """One team, as an administrator sets it (``PUT /admin/teams/{name}``).

    Attributes:
        name: the team (:data:`TEAM_NAME_PATTERN`).
        members: who may request for the team.
        approvers: who may approve its purchases above ``approval_above_usd`` (never the requester).
        monthly_budget_usd: upfront fees the team may commit per UTC calendar month (USD).
        approval_above_usd: a purchase above this fee (USD) needs an approver; a request may set a lower one.
        instance_types: the instance types it may reserve (``ml.*`` for SageMaker, EC2 types for blocks).
        regions: the regions it may reserve in.
        instance_quota: instance family (:func:`instance_family`) -> most instances of that family reserved
            at once; a family not listed cannot be reserved.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=TEAM_NAME_PATTERN)
    description: str | None = Field(default=None, max_length=500)
    members: Principals
    approvers: Principals
    monthly_budget_usd: TeamUsd
    approval_above_usd: TeamUsd
    instance_types: list[str] = Field(min_length=1, max_length=50)
    regions: list[str] = Field(min_length=1, max_length=20)
    instance_quota: dict[Annotated[str, StringConstraints(min_length=2, max_length=40)], StrictInt] = Field(
        min_length=1, max_length=50
    )

    @field_validator("instance_types")
    @classmethod
    def _known_types(cls, values: list[str]) -> list[str]:
        return _only_known(values, set(INSTANCE_TYPES) | set(CAPACITY_BLOCK_INSTANCE_TYPES), "instance type")

    @field_validator("regions")
    @classmethod
    def _known_regions(cls, values: list[str]) -> list[str]:
        return _only_known(values, set(KNOWN_REGIONS), "region")

    @field_validator("instance_quota")
    @classmethod
    def _quota(cls, values: dict[str, int]) -> dict[str, int]:
        bad = [f"{family}={count}" for family, count in values.items() if not 0 <= count <= 10_000]
        if bad:
            raise ValueError(f"quotas must be 0..10000 instances: {', '.join(bad)}")
        return values

    # Field validators, not a model validator, so a 400 names the field to fix.
    @field_validator("approvers")
    @classmethod
    def _someone_approves(cls, value: Principals) -> Principals:
        if not (
            value.iam_principal_arns
            or value.slack_users
            or value.iam_principal_tags
            or value.slack_user_groups
        ):
            raise ValueError(
                "names nobody: add an IAM principal ARN pattern, a tag, a Slack user or a Slack user group"
            )
        return value

    @field_validator("approval_above_usd")
    @classmethod
    def _below_budget(cls, value: Decimal, info: ValidationInfo) -> Decimal:
        budget = info.data.get("monthly_budget_usd")  # absent when itself invalid (reported on its own)
        if budget is not None and value > budget:
            raise ValueError(
                f"approval_above_usd {value:f} is above monthly_budget_usd {budget:f}: it would never apply; "
                "lower it"
            )
        return value

    def quota_for(self, instance_type: str) -> int:
        """The most instances of ``instance_type``'s family the team may hold at once (0: not allowed)."""
        return self.instance_quota.get(instance_family(instance_type), 0)


class TeamPolicyBody(TeamPolicy):
    """The body of ``PUT /admin/teams/{team}``: a :class:`TeamPolicy` whose ``name`` may be left out (the
    path names the team; a ``name`` that differs from the path's is refused)."""

    name: str | None = Field(default=None, pattern=TEAM_NAME_PATTERN)  # type: ignore[assignment]


class AccountPolicy(Model):
    """The account-wide cap (``PUT /admin/account``): upfront fees all teams together may commit per UTC
    calendar month, USD."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    monthly_cap_usd: TeamUsd


def month_key(year: int, month: int) -> str:
    """``2026-12``: the key of a UTC calendar month."""
    return f"{year:04d}-{month:02d}"


MONTH_NAMES = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def month_name(key: str) -> str:
    """``2026-12`` -> ``December 2026``."""
    year, month = key.split("-")
    return f"{MONTH_NAMES[int(month) - 1]} {year}"


ZERO = Decimal(0)
