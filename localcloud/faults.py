"""Fault injection for the local cloud, configurable per service and operation.

A :class:`FaultRule` says which calls fail and how; :class:`FaultInjector` draws, deterministically from a
seed, which rules fire on a given call. The dispatcher applies the wire-level kinds (``throttle``,
``server_error``, ``latency``, ``crash_after_commit``, ``transaction_conflict``); the AWS emulator applies the
behavioural kinds (``insufficient_capacity``, ``stuck``, ``payment_failed``, ``stale_listing``), which it
receives with the call. EventBridge and Scheduler delivery (:mod:`localcloud.delivery`) apply the delivery
kinds (``duplicate_delivery``, ``delayed_delivery``, ``delivery_failure``, ``abort_execution``): they are
drawn for each delivery of an event to a target (service ``eventbridge``, operation the event's
``detail-type``), each schedule firing (service ``scheduler``, operation the schedule's name) and each
asynchronous Lambda invocation EventBridge or Scheduler makes (service ``lambda``, operation the function's
name), never for an API call.

Rules can be given in code, or as JSON (a list of rule objects) in a file named by ``LOCALCLOUD_FAULTS`` or
passed to ``python -m localcloud run --faults FILE``.
"""

from __future__ import annotations

import json
import random
import threading
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator


class FaultKind(StrEnum):
    """The kinds of fault the local cloud can inject."""

    THROTTLE = "throttle"
    """The service's throttling error (botocore retries it, as on AWS)."""
    SERVER_ERROR = "server_error"
    """An HTTP 5xx (``InternalFailure``/``ServiceUnavailable``)."""
    LATENCY = "latency"
    """The call answers after ``latency_seconds`` of virtual time; past the caller's read timeout, the call
    takes effect and the caller gets botocore's ``ReadTimeoutError`` at its read timeout instead."""
    INSUFFICIENT_CAPACITY = "insufficient_capacity"
    """The operation meets no capacity: an empty search, a failed purchase or a ``Failed`` resource."""
    STUCK = "stuck"
    """The resource the call creates, updates or deletes stays in its transitional state."""
    CRASH_AFTER_COMMIT = "crash_after_commit"
    """The call takes effect, then the caller waits its client's read timeout and sees a read timeout."""
    HANG = "hang"
    """The service never answers: the call does not take effect; the caller waits its client's read timeout
    (``read_timeout`` of its botocore ``Config``, 60 s by default) and gets ``ReadTimeoutError``."""
    KILL_CALLER = "kill_caller"
    """The call takes effect, then the Lambda invocation that made it dies there (``Sandbox.Timedout``, as
    at its timeout: out of memory, a crash): nothing after the call happens. Calls not made from a Lambda
    are not hit."""
    PAYMENT_FAILED = "payment_failed"
    """The reservation bought goes ``payment-pending`` -> ``payment-failed`` (``PurchaseCapacityBlock``)."""
    STALE_LISTING = "stale_listing"
    """Eventual consistency: a SageMaker ``List*``/``Describe*`` answers the state of ``delay_seconds`` ago
    (a component just created is not listed yet, an endpoint just deleted is still described)."""
    DUPLICATE_DELIVERY = "duplicate_delivery"
    """At-least-once delivery: the event (rule target), the firing (schedule) or the asynchronous
    invocation (Lambda) is delivered twice, with the same event (same ``id``)."""
    DELAYED_DELIVERY = "delayed_delivery"
    """The delivery happens ``delay_seconds`` of virtual time late, so later events overtake it."""
    DELIVERY_FAILURE = "delivery_failure"
    """The target refuses the delivery (throttled): the target's ``RetryPolicy`` retries it with
    back-off, then its ``DeadLetterConfig`` queue receives it (or it is dropped)."""
    TRANSACTION_CONFLICT = "transaction_conflict"
    """DynamoDB met another transaction on an item the write touches (two concurrent writers): a
    ``TransactWriteItems`` is cancelled (``TransactionCanceledException`` with ``CancellationReasons``
    ``TransactionConflict`` on one item), a ``PutItem``/``UpdateItem``/``DeleteItem`` answers
    ``TransactionConflictException``; nothing is written. Other operations ignore it."""
    ABORT_EXECUTION = "abort_execution"
    """An operator's ``StopExecution`` of the execution this delivery started, ``delay_seconds`` after it
    started (if it still runs): it ends ``ABORTED``."""


WIRE_KINDS = frozenset(
    {
        FaultKind.THROTTLE,
        FaultKind.SERVER_ERROR,
        FaultKind.LATENCY,
        FaultKind.CRASH_AFTER_COMMIT,
        FaultKind.HANG,
        FaultKind.KILL_CALLER,
        FaultKind.TRANSACTION_CONFLICT,
    }
)
EMULATOR_KINDS = frozenset(
    {FaultKind.INSUFFICIENT_CAPACITY, FaultKind.STUCK, FaultKind.PAYMENT_FAILED, FaultKind.STALE_LISTING}
)
DELIVERY_KINDS = frozenset(
    {
        FaultKind.DUPLICATE_DELIVERY,
        FaultKind.DELAYED_DELIVERY,
        FaultKind.DELIVERY_FAILURE,
        FaultKind.ABORT_EXECUTION,
    }
)
"""Kinds drawn by EventBridge/Scheduler delivery, never by the dispatcher for an API call."""
_NEEDS_DELAY = frozenset({FaultKind.DELAYED_DELIVERY, FaultKind.STALE_LISTING})


class FaultRule(BaseModel):
    """One fault: which calls it hits, how often, and what happens.

    ``service`` is botocore's hyphenated service id (``sagemaker``, ``ec2``, ``application-auto-scaling``,
    ``sagemaker-runtime``, ``cloudwatch``...) or ``*``; ``operation`` the API operation name
    (``CreateTrainingPlan``) or ``*``. ``match`` restricts the rule to calls whose top-level parameters
    equal the given values. ``times`` caps how many calls it hits (None: no cap). ``not_before`` and
    ``not_after`` (virtual UTC instants) restrict it to calls made in that window: an outage of an hour.
    ``delay_seconds`` is how late a ``delayed_delivery`` arrives, how old a ``stale_listing`` answer is,
    and how long after its start an ``abort_execution`` stops the execution.

    For the delivery kinds, ``match`` sees the delivery's parameters: ``source``, ``detail-type``,
    ``rule``, ``bus``, ``region``, ``target`` (ARN) and ``target_service`` (``lambda``, ``states``,
    ``events``, ``sqs``, ``sns``) for EventBridge; ``schedule``, ``group``, ``target``, ``target_service``
    for Scheduler; ``function`` for Lambda.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    service: str = "*"
    operation: str = "*"
    kind: FaultKind
    probability: float = Field(default=1.0, ge=0.0, le=1.0)
    times: int | None = Field(default=None, ge=1)
    latency_seconds: float = Field(default=0.0, ge=0.0)
    delay_seconds: float = Field(default=0.0, ge=0.0)
    match: dict[str, Any] = Field(default_factory=dict)
    not_before: AwareDatetime | None = None
    not_after: AwareDatetime | None = None

    @model_validator(mode="after")
    def _delay_given(self) -> FaultRule:
        if self.kind in _NEEDS_DELAY and self.delay_seconds <= 0:
            raise ValueError(f"a {self.kind.value} rule needs delay_seconds > 0")
        return self

    def applies_to(
        self, service: str, operation: str, params: dict[str, Any], at: datetime | None = None
    ) -> bool:
        """True if this rule targets the call made at ``at`` (before its probability is drawn)."""
        if self.service not in ("*", service) or self.operation not in ("*", operation):
            return False
        if at is not None and (
            (self.not_before is not None and at < self.not_before)
            or (self.not_after is not None and at >= self.not_after)
        ):
            return False
        return all(params.get(key) == value for key, value in self.match.items())


class FiredFault(BaseModel):
    """A record of one fault that fired (for tests and the CLI's report)."""

    at: datetime
    service: str
    operation: str
    kind: FaultKind


class FaultInjector:
    """Holds the fault rules and decides, deterministically from ``seed``, which fire on each call.

    Thread-safe: executions and Lambdas call AWS from several threads.
    """

    def __init__(self, rules: list[FaultRule] | None = None, *, seed: int = 0) -> None:
        self._rules: list[FaultRule] = list(rules or [])
        self._remaining: dict[int, int | None] = {i: r.times for i, r in enumerate(self._rules)}
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.fired: list[FiredFault] = []

    @property
    def rules(self) -> tuple[FaultRule, ...]:
        """The rules in force, in the order they were added."""
        with self._lock:
            return tuple(self._rules)

    def add(self, rule: FaultRule) -> None:
        """Add a rule; it applies to every later call."""
        with self._lock:
            self._remaining[len(self._rules)] = rule.times
            self._rules.append(rule)

    def clear(self) -> None:
        """Remove every rule (what already fired stays recorded)."""
        with self._lock:
            self._rules.clear()
            self._remaining.clear()

    def draw(
        self,
        service: str,
        operation: str,
        params: dict[str, Any],
        *,
        from_lambda: bool = True,
        kinds: frozenset[FaultKind] | None = None,
    ) -> list[FaultRule]:
        """The rules that fire on this call, each recorded in :attr:`fired`; at most one per kind.

        ``from_lambda`` False (a call of a state machine, a test) skips ``kill_caller`` rules: only a Lambda
        invocation can die. ``kinds`` limits the draw to those kinds; None (an API call) draws every kind
        but the delivery kinds (:data:`DELIVERY_KINDS`).
        """
        allowed = kinds if kinds is not None else frozenset(FaultKind) - DELIVERY_KINDS
        fired: list[FaultRule] = []
        now = datetime.now(UTC)
        with self._lock:
            seen: set[FaultKind] = set()
            for index, rule in enumerate(self._rules):
                if rule.kind in seen or rule.kind not in allowed:
                    continue
                if not rule.applies_to(service, operation, params, now):
                    continue
                if rule.kind is FaultKind.KILL_CALLER and not from_lambda:
                    continue
                left = self._remaining.get(index)
                if left is not None and left <= 0:
                    continue
                if rule.probability < 1.0 and self._random.random() >= rule.probability:
                    continue
                if left is not None:
                    self._remaining[index] = left - 1
                seen.add(rule.kind)
                fired.append(rule)
                self.fired.append(
                    FiredFault(at=datetime.now(UTC), service=service, operation=operation, kind=rule.kind)
                )
        return fired

    @classmethod
    def from_file(cls, path: Path, *, seed: int = 0) -> FaultInjector:
        """Load rules from a JSON file: a list of :class:`FaultRule` objects, or an object whose ``rules`` is
        that list (beside a ``description``: how ``events/faults_*.json`` are written).

        Raises:
            TypeError: the file holds neither a JSON list nor an object with a ``rules`` list.
            ValueError: a rule is invalid (the message names the bad rule).
        """
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("rules"), list):
            data = data["rules"]
        if not isinstance(data, list):
            raise TypeError(
                f"{path}: expected a JSON list of fault rules (or an object with a rules list), "
                f"got {type(data).__name__}"
            )
        rules = []
        for position, item in enumerate(data):
            try:
                rules.append(FaultRule.model_validate(item))
            except ValueError as exc:
                raise ValueError(f"{path}: fault rule #{position} is invalid: {exc}") from exc
        return cls(rules, seed=seed)
