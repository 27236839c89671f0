"""IAM policy documents, parsed once and evaluated as AWS does for a request in one account.

Follows the IAM User Guide: "Policy evaluation logic" (an explicit ``Deny`` in any applicable policy
wins; otherwise an ``Allow`` is needed; within one account an identity-based *or* a resource-based
``Allow`` suffices), "IAM JSON policy elements" (``Action``/``NotAction``, ``Resource``/``NotResource``,
``Principal``/``NotPrincipal``, ``Condition``) and "IAM JSON policy elements: Condition operators".

Wildcards: ``*`` matches any run of characters (none included), ``?`` one character; actions compare
case-insensitively, resources case-sensitively. Condition keys compare case-insensitively; a request
context value is a string, a list of strings (a multivalued key) or a zero-argument callable computing
either lazily (resource tags are read only when a condition asks for them).

Condition operators: ``String(Not)Equals(IgnoreCase)``, ``String(Not)Like``, ``Arn(Not)Equals``,
``Arn(Not)Like``, ``Numeric*``, ``Bool``, ``Null``, each with the ``ForAnyValue:``/``ForAllValues:`` set
prefixes and the ``IfExists`` suffix. A key missing from the request makes a condition false, except for
the negated operators (``StringNotEquals``, ``ArnNotLike``...), which are then true, ``...IfExists``
(true) and ``Null``. An operator the evaluator does not know raises :class:`PolicyError` (never a silent
allow).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any

ContextValue = str | list[str] | Callable[[], str | list[str] | None] | None
"""A request context value (see the module docstring)."""


class RequestContext:
    """The request context keys of one authorization (names lower-case).

    ``values`` holds the keys the request carries; ``aws:ResourceTag/<k>`` is answered from
    ``resource_tags`` (called at most once, only if a condition asks), ``aws:PrincipalTag`` is never set.
    """

    def __init__(
        self,
        values: Mapping[str, ContextValue],
        resource_tags: Callable[[], dict[str, str] | None] | None = None,
    ) -> None:
        self.values = {key.lower(): value for key, value in values.items()}
        self._resource_tags = resource_tags

    def get(self, key: str) -> str | list[str] | None:
        """The value of ``key`` (lower-case), computed if lazy; None when the request lacks it."""
        if key.startswith("aws:resourcetag/") and key not in self.values:
            tags = self._resource_tags() if self._resource_tags is not None else None
            lowered = {k.lower(): v for k, v in (tags or {}).items()}
            return lowered.get(key[len("aws:resourcetag/") :])
        value = self.values.get(key)
        if callable(value):
            value = value()
        return value


class PolicyError(ValueError):
    """A policy the evaluator cannot read (unknown operator, malformed statement); names what is wrong."""


class Effect(Enum):
    """A statement's ``Effect``."""

    ALLOW = "Allow"
    DENY = "Deny"


@lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(f"^{regex}$", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM wildcard matching: ``*`` any characters, ``?`` one character, nothing else special."""
    if pattern == "*":
        return True
    if "*" not in pattern and "?" not in pattern:
        return pattern.lower() == value.lower() if ignore_case else pattern == value
    return _glob(pattern, ignore_case).match(value) is not None


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, bool):
        return ("true" if value else "false",)
    if isinstance(value, (int, float)):
        return (str(value),)
    if isinstance(value, list) and all(isinstance(v, (str, bool, int, float)) for v in value):
        return tuple(s for v in value for s in _strings(v, where))
    raise PolicyError(f"{where}: expected a string or a list of strings, got {value!r}")


@dataclass(frozen=True)
class Condition:
    """One ``operator: {key: values}`` entry of a ``Condition`` block, parsed."""

    operator: str  # the base operator, e.g. StringLike
    set_op: str | None  # ForAnyValue / ForAllValues
    if_exists: bool
    key: str  # lower-case condition key
    values: tuple[str, ...]

    def holds(self, context: RequestContext) -> bool:
        """True if the condition holds for the request context."""
        raw = context.get(self.key)
        present = raw is not None and raw != []
        if self.operator == "Null":
            return (not present) is (self.values[0].lower() == "true")
        match, negated = _MATCHERS[self.operator]
        if not present:
            # ForAllValues holds over an empty set; ForAnyValue needs a value; a negated operator (and
            # ...IfExists) holds when the key is absent, every other operator fails.
            return self.set_op == "ForAllValues" or (self.set_op is None and (self.if_exists or negated))
        request = [raw] if isinstance(raw, str) else list(raw or [])
        hits = [any(match(p, value) for p in self.values) != negated for value in request]
        if self.set_op == "ForAnyValue":
            return any(hits)
        # ForAllValues, and a negated operator on a multivalued key: every value must satisfy it.
        return all(hits) if self.set_op == "ForAllValues" or negated else any(hits)


def _arn_like(pattern: str, arn: str) -> bool:
    """``ArnLike``: the six ARN parts are matched one by one (wildcards do not cross a part's ``:``)."""
    pattern_parts = pattern.split(":", 5)
    arn_parts = arn.split(":", 5)
    if len(pattern_parts) != 6 or len(arn_parts) != 6:
        return glob_match(pattern, arn)
    return all(glob_match(p, a) for p, a in zip(pattern_parts, arn_parts, strict=True))


def _numeric(compare: Callable[[float, float], bool]) -> Callable[[str, str], bool]:
    def match(policy: str, value: str) -> bool:
        try:
            return compare(float(value), float(policy))
        except ValueError:
            return False

    return match


_MATCHERS: dict[str, tuple[Callable[[str, str], bool], bool]] = {
    # operator -> (does one policy value match one request value, is the operator negated)
    "StringEquals": (lambda p, v: p == v, False),
    "StringNotEquals": (lambda p, v: p == v, True),
    "StringEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), True),
    "StringLike": (glob_match, False),
    "StringNotLike": (glob_match, True),
    "ArnEquals": (_arn_like, False),
    "ArnLike": (_arn_like, False),
    "ArnNotEquals": (_arn_like, True),
    "ArnNotLike": (_arn_like, True),
    "Bool": (lambda p, v: p.lower() == v.lower(), False),
    "NumericEquals": (_numeric(lambda v, p: v == p), False),
    "NumericNotEquals": (_numeric(lambda v, p: v == p), True),
    "NumericLessThan": (_numeric(lambda v, p: v < p), False),
    "NumericLessThanEquals": (_numeric(lambda v, p: v <= p), False),
    "NumericGreaterThan": (_numeric(lambda v, p: v > p), False),
    "NumericGreaterThanEquals": (_numeric(lambda v, p: v >= p), False),
}
_OPERATORS = frozenset({*_MATCHERS, "Null"})


def parse_conditions(block: Any, where: str) -> tuple[Condition, ...]:
    """Parse a statement's ``Condition`` block.

    Raises:
        PolicyError: an unknown operator or a malformed block.
    """
    if block in (None, {}):
        return ()
    if not isinstance(block, dict):
        raise PolicyError(f"{where}.Condition must be an object")
    parsed: list[Condition] = []
    for raw_operator, entries in block.items():
        operator = str(raw_operator)
        set_op: str | None = None
        if ":" in operator:
            set_op, _, operator = operator.partition(":")
            if set_op not in ("ForAnyValue", "ForAllValues"):
                raise PolicyError(f"{where}.Condition: unknown set operator {set_op!r}")
        if_exists = operator.endswith("IfExists") and operator != "IfExists"
        if if_exists:
            operator = operator[: -len("IfExists")]
        if operator not in _OPERATORS:
            raise PolicyError(f"{where}.Condition: operator {raw_operator!r} is not supported")
        if not isinstance(entries, dict):
            raise PolicyError(f"{where}.Condition.{raw_operator} must be an object")
        for key, values in entries.items():
            parsed.append(
                Condition(
                    operator,
                    set_op,
                    if_exists,
                    str(key).lower(),
                    _strings(values, f"{where}.Condition.{raw_operator}.{key}"),
                )
            )
    return tuple(parsed)


@dataclass(frozen=True)
class Principals:
    """A resource-based statement's ``Principal`` (or ``NotPrincipal``): AWS ARNs/accounts and services."""

    everyone: bool
    aws: tuple[str, ...]
    services: tuple[str, ...]

    def matches(
        self, *, principal_arn: str | None, role_arn: str | None, account: str | None, service: str | None
    ) -> bool:
        """True if the caller is one of these principals (a role session matches its role's ARN)."""
        if self.everyone:
            return True
        if service is not None and service in self.services:
            return True
        for entry in self.aws:
            if entry == "*":
                return True
            if entry in (principal_arn, role_arn):
                return True
            if account is not None and entry in (account, f"arn:aws:iam::{account}:root"):
                return True
        return False


def _principals(value: Any, where: str) -> Principals:
    if value == "*":
        return Principals(True, (), ())
    if not isinstance(value, dict):
        raise PolicyError(f'{where}: Principal must be "*" or an object')
    aws = _strings(value.get("AWS", []), f"{where}.AWS") if "AWS" in value else ()
    services = _strings(value.get("Service", []), f"{where}.Service") if "Service" in value else ()
    return Principals(False, aws, services)


@dataclass(frozen=True)
class Statement:
    """One statement, parsed (actions and resources as patterns; ``not_*`` for the negated elements)."""

    sid: str
    effect: Effect
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: tuple[Condition, ...]
    principals: Principals | None = None
    not_principal: bool = False

    def applies(self, action: str, resource: str, context: RequestContext) -> bool:
        """True if the statement covers ``action`` on ``resource`` and its conditions hold."""
        hit = any(glob_match(p, action, ignore_case=True) for p in self.actions)
        if hit == self.not_action:
            return False
        hit = any(glob_match(p, resource) for p in self.resources)
        if hit == self.not_resource:
            return False
        return all(condition.holds(context) for condition in self.conditions)

    def names_principal(
        self, *, principal_arn: str | None, role_arn: str | None, account: str | None, service: str | None
    ) -> bool:
        """For resource-based statements: does the ``Principal``/``NotPrincipal`` cover the caller?"""
        if self.principals is None:
            return True
        hit = self.principals.matches(
            principal_arn=principal_arn, role_arn=role_arn, account=account, service=service
        )
        return hit != self.not_principal


def parse_policy(document: Any, where: str, *, resource_based: bool = False) -> tuple[Statement, ...]:
    """Parse a policy document (``{"Version", "Statement": [...]}``, or a single statement object).

    Args:
        document: the policy as a dict (a JSON string is parsed).
        where: names the policy in errors (``role X, policy Y``).
        resource_based: statements carry ``Principal``/``NotPrincipal``.

    Raises:
        PolicyError: the document is malformed or uses an unsupported condition operator.
    """
    if isinstance(document, str):
        import json  # noqa: PLC0415 - rare path

        document = json.loads(document)
    if not isinstance(document, dict):
        raise PolicyError(f"{where}: a policy document must be an object")
    raw_statements = document.get("Statement", document if "Effect" in document else None)
    if raw_statements is None:
        raise PolicyError(f"{where}: no Statement")
    if isinstance(raw_statements, dict):
        raw_statements = [raw_statements]
    return tuple(
        _statement(raw, f"{where}.Statement[{index}]", resource_based)
        for index, raw in enumerate(raw_statements)
    )


def _statement(raw: Any, here: str, resource_based: bool) -> Statement:
    if not isinstance(raw, dict):
        raise PolicyError(f"{here} must be an object")
    try:
        effect = Effect(raw.get("Effect"))
    except ValueError as exc:
        raise PolicyError(f"{here}.Effect must be Allow or Deny") from exc
    if ("Action" in raw) == ("NotAction" in raw):
        raise PolicyError(f"{here} needs exactly one of Action and NotAction")
    both = "Resource" in raw and "NotResource" in raw
    if both or (not resource_based and "Resource" not in raw and "NotResource" not in raw):
        raise PolicyError(f"{here} needs exactly one of Resource and NotResource")
    not_action = "NotAction" in raw
    not_resource = "NotResource" in raw
    # A resource-based policy may leave Resource out: it then applies to the resource it is attached to.
    resources = _strings(raw.get("NotResource" if not_resource else "Resource", "*"), here)
    principals: Principals | None = None
    if resource_based:
        if "Principal" not in raw and "NotPrincipal" not in raw:
            raise PolicyError(f"{here}: a resource-based statement needs Principal or NotPrincipal")
        key = "Principal" if "Principal" in raw else "NotPrincipal"
        principals = _principals(raw[key], f"{here}.{key}")
    return Statement(
        sid=str(raw.get("Sid", "")),
        effect=effect,
        actions=_strings(raw["NotAction" if not_action else "Action"], here),
        not_action=not_action,
        resources=resources,
        not_resource=not_resource,
        conditions=parse_conditions(raw.get("Condition"), here),
        principals=principals,
        not_principal=resource_based and "Principal" not in raw,
    )


class Decision(Enum):
    """The outcome of evaluating a set of statements."""

    ALLOW = "allow"
    EXPLICIT_DENY = "explicit-deny"
    NO_ALLOW = "no-allow"


def decide(statements: Iterable[Statement], action: str, resource: str, context: RequestContext) -> Decision:
    """Evaluate ``statements`` for one action on one resource: a matching ``Deny`` wins, else a matching
    ``Allow`` allows, else nothing allows."""
    allowed = False
    for statement in statements:
        if statement.applies(action, resource, context):
            if statement.effect is Effect.DENY:
                return Decision.EXPLICIT_DENY
            allowed = True
    return Decision.ALLOW if allowed else Decision.NO_ALLOW
