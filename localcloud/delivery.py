"""EventBridge delivery: events put on a bus reach the targets of the rules that match them.
Kept whole: one delivery loop (match, envelope, retry, dead-letter) over its pending jobs, under one lock.

moto stores rules and targets and answers ``PutEvents``, but does not deliver to Lambda or Step Functions
targets (its ``PutEvents`` raises ``NotImplementedError`` for them). While the local cloud runs,
:class:`EventDelivery` replaces moto's ``EventsBackend.put_events`` with one that validates the entries as
moto does, builds the real EventBridge envelope, and sends it to the targets of every enabled rule of the
bus whose pattern matches - the same matcher moto uses for ``TestEventPattern``-style evaluation
(``moto.events.models.EventPattern``: prefix, suffix, anything-but, numeric, exists, wildcard, cidr,
equals-ignore-case, ``$or``). AWS-originated events (``aws.ec2``, ``aws.cloudwatch``...) from the AWS
emulator arrive through :meth:`EventDelivery.put_aws_event` (the :class:`~localcloud.contracts.EventSink`).

Targets: Lambda (asynchronous invoke), Step Functions (StartExecution), another event bus, SQS, SNS; the
target input honours ``Input``, ``InputPath`` and ``InputTransformer`` as described in "Amazon
EventBridge input transformation" (EventBridge user guide), including the predefined variables
``<aws.events.rule-arn>``, ``<aws.events.rule-name>``, ``<aws.events.event.ingestion-time>``,
``<aws.events.event>`` (the event without ``detail``) and ``<aws.events.event.json>`` (the whole event).

Delivery is what AWS promises, not more ("How EventBridge retries delivering events", "Using dead-letter
queues to process undelivered events", EventBridge user guide):

- at least once, possibly late: the fault kinds ``duplicate_delivery`` (the same event, same ``id``,
  delivered twice; for a Step Functions target that is a second execution under another generated name),
  ``delayed_delivery`` (``delay_seconds`` late, so later events overtake it) and ``abort_execution`` (an
  operator's ``StopExecution`` of the execution a delivery started) are drawn once per event and target;
  asynchronous Lambda invocations draw ``duplicate_delivery``/``delayed_delivery`` again (service
  ``lambda``), as Lambda's own queue may deliver twice or late;
- a target that refuses a delivery (``delivery_failure``, a throttled Lambda, Step Functions or queue)
  is retried with exponential back-off and jitter per the target's ``RetryPolicy``
  (``MaximumRetryAttempts``, default 185; ``MaximumEventAgeInSeconds``, default 86400, counted from the
  event's ingestion); then, or at once for an error that cannot be retried (a target that does not exist,
  a missing or refused role, an input that cannot be transformed), the event goes to the target's
  ``DeadLetterConfig`` queue with EventBridge's message attributes (``RULE_ARN``, ``TARGET_ARN``,
  ``ERROR_CODE``, ``ERROR_MESSAGE``, ``EXHAUSTED_RETRY_CONDITION``, ``RETRY_ATTEMPTS``), or is dropped;
- each region has its own buses (the default bus included); an event bus target in another region or
  account needs the target's ``RoleArn`` (allowed ``events:PutEvents`` on that bus: :attr:`EventDelivery.
  authorize`) and delivers the same event there (same ``id``, ``region`` and ``time``).

:class:`EventDelivery` is also a :class:`~localcloud.contracts.Ticker`: late deliveries, retries and
operator stops wait on the virtual clock as foreground work.

Not modelled: archives and replays, API destinations, cross-account bus policies, the DLQ's queue policy
(EventBridge needs ``sqs:SendMessage`` granted to ``events.amazonaws.com`` there: a template test checks
it instead).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import random
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from moto.events.exceptions import ValidationException
from moto.events.models import EventsBackend, events_backends
from moto.iam.models import iam_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends
from moto.stepfunctions.responses import get_backend

from localcloud.contracts import AwsError, Due
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.iam import TargetCaller
from localcloud.timeline import Kind, Timeline

EVENT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""EventBridge envelopes carry ``time`` to the second, in UTC, with a ``Z``."""

_ENABLED_STATES = ("ENABLED", "ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS")
_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+|\*)\]|\['([^']+)'\]")
_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.\-]+)>")

DEFAULT_MAXIMUM_RETRY_ATTEMPTS = 185
"""EventBridge's (and Scheduler's) default ``RetryPolicy.MaximumRetryAttempts``."""
DEFAULT_MAXIMUM_EVENT_AGE_SECONDS = 86_400
"""EventBridge's (and Scheduler's) default ``RetryPolicy.MaximumEventAgeInSeconds`` (24 hours)."""
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 600.0
"""Retry ``n`` waits between half and all of ``min(cap, base x 2^(n-1))`` (exponential back-off with
jitter; AWS documents the shape, not the figures: these spread 185 retries over about a day)."""
_ONCE_KINDS = frozenset({FaultKind.DUPLICATE_DELIVERY, FaultKind.DELAYED_DELIVERY, FaultKind.ABORT_EXECUTION})
_LAMBDA_KINDS = frozenset({FaultKind.DUPLICATE_DELIVERY, FaultKind.DELAYED_DELIVERY})
_FAILURE_KINDS = frozenset({FaultKind.DELIVERY_FAILURE})


class TargetAuthorizer(Protocol):
    """IAM's side of a delivery (``localcloud.iam.Iam``)."""

    def authorize_target(self, caller: TargetCaller, target_arn: str) -> Any:
        """None if ``caller`` may deliver to ``target_arn``, else the denial (with its ``message``)."""
        ...

    def authorize_service(
        self, service_principal: str, action: str, resource: str, *, source_arn: str, operation: str
    ) -> Any:
        """None if the resource's own policy lets the service act on it (a DLQ's queue policy), else the
        denial."""
        ...


class LambdaInvoker(Protocol):
    """The part of the local Lambda runtime that delivery and schedules use."""

    def invoke(self, name_or_arn: str, payload: bytes, *, invocation_type: str = "RequestResponse") -> Any:
        """Invoke a function (``invocation_type="Event"``: asynchronously, as EventBridge does)."""
        ...


@dataclass(frozen=True)
class Delivery:
    """One delivery attempt of one event to one target (for tests and the timeline).

    ``target_arn`` is the target's ARN; ``payload`` the exact text the target received; ``error`` set if
    the target could not be reached (unknown state machine, unsupported target type, refused); ``attempt``
    counts from 1 (retries are 2, 3...). ``rule`` is the rule's name, or ``schedule <group>/<name>``.
    """

    at: datetime
    event_id: str
    detail_type: str
    source: str
    rule: str
    target_arn: str
    payload: str
    error: str | None = None
    attempt: int = 1


class TargetError(Exception):
    """A target could not be reached (the message says which and why).

    ``code`` is the ``ERROR_CODE`` EventBridge writes on the dead-letter message (``NO_RESOURCE``,
    ``NO_PERMISSIONS``, ``THROTTLING``, ``INVALID_JSON``, ``INVALID_PARAMETER``...); ``retriable`` says
    whether the retry policy applies (AWS does not retry a missing resource or a permission error).
    """

    def __init__(self, message: str, *, code: str = "NO_RESOURCE", retriable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable


@dataclass(frozen=True)
class RetryPolicy:
    """A target's ``RetryPolicy`` (EventBridge ``PutTargets``, Scheduler ``Target``), defaults applied."""

    maximum_retry_attempts: int = DEFAULT_MAXIMUM_RETRY_ATTEMPTS
    maximum_event_age_seconds: int = DEFAULT_MAXIMUM_EVENT_AGE_SECONDS

    @classmethod
    def of(cls, target: dict[str, Any]) -> RetryPolicy:
        """The policy of a target as stored (keys ``MaximumRetryAttempts``, ``MaximumEventAgeInSeconds``)."""
        given = target.get("RetryPolicy") or {}
        attempts = given.get("MaximumRetryAttempts")
        age = given.get("MaximumEventAgeInSeconds")
        return cls(
            DEFAULT_MAXIMUM_RETRY_ATTEMPTS if attempts is None else int(attempts),
            DEFAULT_MAXIMUM_EVENT_AGE_SECONDS if age is None else int(age),
        )


@dataclass
class DeliveryJob:
    """One event (or schedule firing) on its way to one target, across its attempts.

    ``render(attempt)`` gives the payload of an attempt (1-based); ``dead_letter(error, retries,
    exhausted)`` the dead-letter message body and attributes; ``service``/``operation``/``params`` are what
    fault rules match (see :mod:`localcloud.faults`); ``region`` is the rule's or schedule's region.
    """

    origin: str
    service: str
    operation: str
    params: dict[str, Any]
    target: dict[str, Any]
    region: str
    event_id: str
    detail_type: str
    source: str
    render: Callable[[int], str]
    dead_letter: Callable[[TargetError, int, str | None], tuple[str, dict[str, str]]]
    ingested: datetime
    event_bus_parameters: dict[str, Any] | None = None
    caller: TargetCaller | None = None
    """Who delivers (the service, the rule's or schedule's ARN, the target's role), for IAM."""
    sender: Callable[[str], str] | None = None
    """Delivers a payload itself (Scheduler's universal targets) instead of :meth:`EventDelivery.send`."""
    retries: int = 0
    abort: FaultRule | None = None
    copy: int = 0

    @property
    def arn(self) -> str:
        """The target's ARN."""
        return str(self.target.get("Arn", ""))


@dataclass(order=True)
class _Pending:
    due: datetime
    seq: int
    run: Callable[[], object] = field(compare=False)


# ------------------------------------------------------------------------------------ input transformation


def json_path(document: Any, path: str) -> Any:
    """Evaluate the JSONPath subset EventBridge supports (``$``, ``$.a.b``, ``$.a[0]``, ``$.a[*].b``).

    Returns None when the path does not exist (EventBridge then substitutes ``null``).

    Raises:
        ValueError: the path does not start with ``$``.
    """
    if not path.startswith("$"):
        raise ValueError(f"JSONPath must start with $: {path!r}")
    current: list[Any] = [document]
    wildcard = False
    position = 1
    while position < len(path):
        match = _PATH_TOKEN.match(path, position)
        if match is None:
            raise ValueError(f"unsupported JSONPath {path!r} at {path[position:]!r}")
        position = match.end()
        key = match.group(1) or match.group(3)
        index = match.group(2)
        following: list[Any] = []
        for node in current:
            if key is not None and isinstance(node, dict) and key in node:
                following.append(node[key])
            elif index == "*" and isinstance(node, list):
                wildcard = True
                following.extend(node)
            elif index is not None and index != "*" and isinstance(node, list) and int(index) < len(node):
                following.append(node[int(index)])
        current = following
    if wildcard:
        return current
    return current[0] if current else None


def render_input_template(template: str, values: dict[str, Any], raw: frozenset[str] = frozenset()) -> str:
    """Fill ``<name>`` placeholders of an ``InputTemplate``.

    Outside a JSON string a placeholder becomes the JSON of its value (a string gets quotes, a missing
    value ``null``); inside a JSON string it becomes the value's text, escaped for that string. Names in
    ``raw`` (``aws.events.event``, ``aws.events.event.json``) are inserted as JSON, unescaped, as AWS does.
    Unknown placeholders are left as they are.
    """
    out: list[str] = []
    in_string = False
    position = 0
    while position < len(template):
        char = template[position]
        if char == "\\" and in_string:
            out.append(template[position : position + 2])
            position += 2
            continue
        if char == '"':
            in_string = not in_string
            out.append(char)
            position += 1
            continue
        match = _PLACEHOLDER.match(template, position) if char == "<" else None
        if match is None or match.group(1) not in values:
            out.append(char)
            position += 1
            continue
        name = match.group(1)
        value = values[name]
        if name in raw or not in_string:
            out.append(json.dumps(value))
        elif isinstance(value, str):
            out.append(json.dumps(value)[1:-1])
        elif value is None:
            out.append("")
        else:
            out.append(json.dumps(json.dumps(value))[1:-1])
        position = match.end()
    return "".join(out)


def target_input(target: dict[str, Any], event: dict[str, Any], *, rule_arn: str, rule_name: str) -> str:
    """The text a rule's target receives for ``event`` (``Input``, ``InputPath``, ``InputTransformer``).

    Raises:
        ValueError: a JSONPath is invalid.
    """
    if target.get("Input") is not None:
        return str(target["Input"])
    if target.get("InputPath"):
        return json.dumps(json_path(event, str(target["InputPath"])))
    transformer = target.get("InputTransformer")
    if transformer:
        values: dict[str, Any] = {
            name: json_path(event, path) for name, path in (transformer.get("InputPathsMap") or {}).items()
        }
        values["aws.events.rule-arn"] = rule_arn
        values["aws.events.rule-name"] = rule_name
        values["aws.events.event.ingestion-time"] = event.get("time")
        values["aws.events.event"] = {k: v for k, v in event.items() if k != "detail"}
        values["aws.events.event.json"] = event
        return render_input_template(
            str(transformer["InputTemplate"]),
            values,
            raw=frozenset({"aws.events.event", "aws.events.event.json"}),
        )
    return json.dumps(event)


def envelope(
    *,
    event_id: str,
    source: str,
    detail_type: str,
    detail: Any,
    account: str,
    region: str,
    time: datetime,
    resources: list[str] | None = None,
) -> dict[str, Any]:
    """The event as EventBridge delivers it to targets (keys in EventBridge's order)."""
    return {
        "version": "0",
        "id": event_id,
        "detail-type": detail_type,
        "source": source,
        "account": account,
        "time": time.astimezone(UTC).strftime(EVENT_TIME_FORMAT),
        "region": region,
        "resources": list(resources or []),
        "detail": detail,
    }


def _entry_time(value: Any, now: datetime) -> datetime:
    """``PutEvents`` ``Time``: epoch seconds on the JSON wire, or ISO text; default now."""
    if value is None or value == "":
        return now
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), UTC)
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except ValueError:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# ----------------------------------------------------------------------------------------------- delivery


class EventDelivery:
    """Delivers events to rule targets; implements :class:`~localcloud.contracts.EventSink` and, for late
    deliveries and retries, :class:`~localcloud.contracts.Ticker`.

    ``lambdas`` invokes functions; ``timeline`` records every event put and each delivery; ``touch`` is
    called on each delivery so the virtual clock sees activity; ``seed`` makes event ids, execution names
    and retry jitter deterministic; ``label`` shortens resource names in timeline texts (drops the stack
    prefix); ``faults`` draws the delivery fault kinds. :attr:`authorizer` (IAM, when it is on) decides
    whether a delivery's caller may reach its target and its dead-letter queue; without it a target's
    ``RoleArn`` must at least exist. Use :meth:`install` / :meth:`uninstall` around a run (moto must be
    active).
    """

    def __init__(
        self,
        *,
        account_id: str,
        region: str,
        lambdas: LambdaInvoker,
        timeline: Timeline | None = None,
        touch: Callable[[], None] | None = None,
        now: Callable[[], datetime] | None = None,
        seed: int = 7,
        label: Callable[[str], str] | None = None,
        faults: FaultInjector | None = None,
    ) -> None:
        self.account_id = account_id
        self.label = label or (lambda name: name)
        self.region = region
        self.lambdas = lambdas
        self.timeline = timeline
        self.faults = faults
        self._touch = touch or (lambda: None)
        self._now = now or (lambda: datetime.now(UTC))
        self._random = random.Random(seed)
        self._jitter = random.Random(seed + 1)
        self._lock = threading.RLock()
        self._original: Any = None
        self._pending: list[_Pending] = []
        self._seq = itertools.count()
        self.deliveries: list[Delivery] = []
        self.dead_letters: list[tuple[DeliveryJob, TargetError]] = []
        """Deliveries given up on (sent to their dead-letter queue, or dropped), with the last error."""
        self.authorizer: TargetAuthorizer | None = None  # IAM: targets are reached only when it allows

    # ------------------------------------------------------------------------------------------- lifecycle

    def install(self) -> None:
        """Route moto's ``PutEvents`` through this delivery (process-wide; undo with :meth:`uninstall`)."""
        if self._original is not None:
            return
        self._original = EventsBackend.put_events
        delivery = self

        def put_events(backend: Any, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return delivery.put_entries(backend, events)

        EventsBackend.put_events = put_events  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        """Restore moto's ``PutEvents``."""
        if self._original is not None:
            EventsBackend.put_events = self._original  # type: ignore[method-assign]
            self._original = None

    def new_id(self) -> str:
        """A deterministic UUID (event ids, execution names)."""
        with self._lock:
            return str(uuid.UUID(int=self._random.getrandbits(128), version=4))

    # ---------------------------------------------------------------------------------------- Ticker API

    def next_due(self, now: datetime) -> Due | None:
        """The next late delivery, retry or operator stop (foreground work), or None."""
        with self._lock:
            if not self._pending:
                return None
            due = self._pending[0].due
        return Due(max(due, now + timedelta(microseconds=1)), True)

    def advance(self, now: datetime) -> None:
        """Run every late delivery, retry and stop due at or before ``now``, in time order."""
        while True:
            with self._lock:
                if not self._pending or self._pending[0].due > now:
                    return
                item = heapq.heappop(self._pending)
            item.run()

    def later(self, at: datetime, run: Callable[[], object]) -> None:
        """Run ``run()`` when the virtual clock reaches ``at`` (from :meth:`advance`)."""
        with self._lock:
            heapq.heappush(self._pending, _Pending(at, next(self._seq), run))
        self._touch()

    # -------------------------------------------------------------------------------------------- ingress

    def put_entries(self, backend: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """What ``PutEvents`` does: validate each entry (as moto/AWS do), then deliver the valid ones.

        Returns the ``Entries`` of the response (``EventId`` or ``ErrorCode``/``ErrorMessage`` per entry).

        Raises:
            moto ValidationException: more than 10 entries (as AWS).
        """
        if len(entries) > 10:
            raise ValidationException(
                "1 validation error detected: Value '[PutEventsRequestEntry]' at 'entries' failed to satisfy "
                "constraint: Member must have length less than or equal to 10"
            )
        results: list[dict[str, Any]] = []
        for entry in entries:
            error = self._entry_error(entry)
            if error is not None:
                results.append({"ErrorCode": error[0], "ErrorMessage": error[1]})
                continue
            bus_name = backend._normalize_event_bus_arn(entry.get("EventBusName"))
            bus_name = bus_name.rsplit("event-bus/", 1)[-1]
            if bus_name not in backend.event_buses:
                results.append(
                    {
                        "ErrorCode": "ResourceNotFoundException",
                        "ErrorMessage": f"Event bus {bus_name} does not exist.",
                    }
                )
                continue
            event_id = self.new_id()
            event = envelope(
                event_id=event_id,
                source=str(entry["Source"]),
                detail_type=str(entry["DetailType"]),
                detail=json.loads(entry["Detail"]),
                account=backend.account_id,
                region=backend.region_name,
                time=_entry_time(entry.get("Time"), self._now()),
                resources=list(entry.get("Resources") or []),
            )
            results.append({"EventId": event_id})
            self.deliver(bus_name, event, backend=backend)
        return results

    @staticmethod
    def _entry_error(entry: dict[str, Any]) -> tuple[str, str] | None:
        for key in ("Source", "DetailType", "Detail"):
            if not entry.get(key):
                return (
                    "InvalidArgument",
                    f"Parameter {key} is not valid. Reason: {key} is a required argument.",
                )
        if str(entry["Source"]).startswith("aws."):
            # AWS sources are reserved: only AWS services (and forwarding rules) put those events.
            return "NotAuthorizedForSourceException", "Not authorized for the source."
        try:
            detail = json.loads(entry["Detail"])
        except ValueError:
            return "MalformedDetail", "Detail is malformed."
        if not isinstance(detail, dict):
            return "MalformedDetail", "Detail is malformed."
        return None

    def put_aws_event(
        self,
        *,
        source: str,
        detail_type: str,
        detail: dict[str, Any],
        resources: list[str],
        region: str,
    ) -> None:
        """Put an event as an AWS service does, on the default bus of ``region`` (``EventSink``): the
        region where the resource lives, whatever region the stack is in."""
        backend = events_backends[self.account_id][region]
        event = envelope(
            event_id=self.new_id(),
            source=source,
            detail_type=detail_type,
            detail=detail,
            account=self.account_id,
            region=region,
            time=self._now(),
            resources=resources,
        )
        self.deliver("default", event, backend=backend)

    # ---------------------------------------------------------------------------------------------- rules

    def deliver(self, bus_name: str, event: dict[str, Any], *, backend: Any = None) -> list[Delivery]:
        """Send ``event`` (an envelope) to the targets of every enabled rule of ``bus_name`` that matches.

        Rules are taken in creation order; only rules with an event pattern take part (scheduled rules
        are fired by the scheduler). Returns the delivery attempts made now (late ones come later).
        """
        backend = backend or events_backends[self.account_id][self.region]
        self._touch()
        bus = backend.event_buses.get(bus_name)
        matched = [
            rule
            for rule in (list(bus.rules.values()) if bus is not None else [])
            if rule.state in _ENABLED_STATES
            and rule.event_pattern.dump() is not None
            and rule.event_pattern.matches_event(event)
        ]
        summary = _summary(event["detail"])
        if self.timeline is not None:
            names = ", ".join(self.label(rule.name) for rule in matched) or "no rule matched"
            where = bus_name if backend.region_name == self.region else f"{bus_name} ({backend.region_name})"
            self.timeline.add(
                Kind.EVENT,
                f"{event['detail-type']} ({event['source']}) on {where}{summary} -> {names}",
                event_id=event["id"],
                bus=bus_name,
                region=backend.region_name,
                detail_type=event["detail-type"],
                source=event["source"],
                rules=[rule.name for rule in matched],
                event=event,
            )
        made: list[Delivery] = []
        for rule in matched:
            for target in list(rule.targets):
                made.extend(self.start(self._rule_job(rule, target, event, bus_name, backend.region_name)))
        return made

    def send_rule_targets(self, rule: Any, event: dict[str, Any]) -> list[Delivery]:
        """Send ``event`` to every target of one rule (used for scheduled rules' ``Scheduled Event``)."""
        region = str(event.get("region") or self.region)
        made: list[Delivery] = []
        for target in list(rule.targets):
            made.extend(self.start(self._rule_job(rule, target, event, "default", region)))
        return made

    def _rule_job(
        self, rule: Any, target: dict[str, Any], event: dict[str, Any], bus: str, region: str
    ) -> DeliveryJob:
        arn = str(target.get("Arn", ""))

        def render(attempt: int) -> str:
            del attempt
            return target_input(target, event, rule_arn=rule.arn, rule_name=rule.name)

        def dead_letter(
            error: TargetError, retries: int, exhausted: str | None
        ) -> tuple[str, dict[str, str]]:
            attributes = {
                "RULE_ARN": rule.arn,
                "TARGET_ARN": arn,
                "ERROR_CODE": error.code,
                "ERROR_MESSAGE": str(error),
                "RETRY_ATTEMPTS": str(retries),
            }
            if exhausted:
                attributes["EXHAUSTED_RETRY_CONDITION"] = exhausted
            return json.dumps(event), attributes

        return DeliveryJob(
            origin=f"rule {self.label(rule.name)}",
            service="eventbridge",
            operation=str(event.get("detail-type")),
            params={
                "source": event.get("source"),
                "detail-type": event.get("detail-type"),
                "rule": rule.name,
                "bus": bus,
                "region": region,
                "target": arn,
                "target_service": _service_of(arn),
            },
            target=dict(target),
            region=region,
            event_id=str(event.get("id")),
            detail_type=str(event.get("detail-type")),
            source=str(event.get("source")),
            render=render,
            dead_letter=dead_letter,
            ingested=self._now(),
            caller=TargetCaller("events.amazonaws.com", rule.arn, target.get("RoleArn")),
        )

    # ------------------------------------------------------------------------------ attempts and retries

    def _draw(self, job: DeliveryJob, kinds: frozenset[FaultKind]) -> dict[FaultKind, FaultRule]:
        if self.faults is None or not self.faults.rules:
            return {}
        fired = self.faults.draw(job.service, job.operation, job.params, kinds=kinds)
        return {rule.kind: rule for rule in fired}

    def start(self, job: DeliveryJob) -> list[Delivery]:
        """Deliver a job for the first time: at once, or duplicated, delayed or to be aborted as the fault
        rules say; a refused attempt is retried per the target's retry policy. Returns the attempts made
        now."""
        fired = self._draw(job, _ONCE_KINDS)
        job.abort = fired.get(FaultKind.ABORT_EXECUTION)
        delayed = fired.get(FaultKind.DELAYED_DELIVERY)
        copies = [job]
        if FaultKind.DUPLICATE_DELIVERY in fired:
            copies.append(dataclasses.replace(job, abort=None, copy=1))
            self._note(f"{self._what(job)}: delivered twice")
        made: list[Delivery] = []
        for copy in copies:
            # With a duplicate, the copy is the late one (a stale redelivery); alone, the event is late.
            if delayed is not None and (copy.copy == 1 or len(copies) == 1):
                at = self._now() + timedelta(seconds=delayed.delay_seconds)
                self._note(f"{self._what(job)}: delayed by {delayed.delay_seconds:g} s")
                self.later(at, lambda copy=copy: self._attempt(copy))  # type: ignore[misc]
            else:
                made.append(self._attempt(copy))
        return made

    def _attempt(self, job: DeliveryJob) -> Delivery:
        attempt = job.retries + 1
        error: TargetError | None = None
        payload = ""
        outcome = ""
        try:
            payload = job.render(attempt)
        except ValueError as exc:
            error = TargetError(f"input transformation failed: {exc}", code="INVALID_JSON")
        if error is None and self._draw(job, _FAILURE_KINDS):
            error = TargetError(
                f"{job.arn} refused the delivery (throttled; fault delivery_failure)",
                code="THROTTLING",
                retriable=True,
            )
        if error is None:
            try:
                if job.sender is not None:
                    outcome = job.sender(payload)
                else:
                    outcome = self.send(
                        job.arn,
                        payload,
                        origin=job.origin,
                        event_bus_parameters=job.event_bus_parameters,
                        caller=job.caller,
                        source_region=job.region,
                    )
            except TargetError as exc:
                error = exc
        record = Delivery(
            at=self._now(),
            event_id=job.event_id,
            detail_type=job.detail_type,
            source=job.source,
            rule=job.params.get("rule") or job.origin,
            target_arn=job.arn,
            payload=payload,
            error=None if error is None else str(error),
            attempt=attempt,
        )
        with self._lock:
            self.deliveries.append(record)
        if error is None:
            if job.abort is not None and outcome.startswith("started "):
                self._abort_later(outcome.removeprefix("started "), job.abort)
            return record
        self._failed(job, error)
        return record

    def _failed(self, job: DeliveryJob, error: TargetError) -> None:
        """Retry per the target's retry policy, or give up: dead-letter queue, else dropped."""
        now = self._now()
        exhausted: str | None = None
        if error.retriable:
            policy = RetryPolicy.of(job.target)
            if job.retries >= policy.maximum_retry_attempts:
                exhausted = "MaximumRetryAttempts"
            else:
                wait = self._backoff(job.retries + 1)
                if (now + wait - job.ingested).total_seconds() > policy.maximum_event_age_seconds:
                    exhausted = "MaximumEventAgeInSeconds"
                else:
                    job.retries += 1
                    self._note(
                        f"{job.origin}: target {self._short(job.arn)} not reached ({error.code}: {error}); "
                        f"retry {job.retries} in {wait.total_seconds():.0f} s"
                    )
                    self.later(now + wait, lambda: self._attempt(job))
                    return
        self._give_up(job, error, exhausted)

    def _backoff(self, retry: int) -> timedelta:
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** min(retry - 1, 30))
        with self._lock:
            seconds = ceiling / 2 + self._jitter.uniform(0, ceiling / 2)
        return timedelta(seconds=seconds)

    def _give_up(self, job: DeliveryJob, error: TargetError, exhausted: str | None) -> None:
        with self._lock:
            self.dead_letters.append((job, error))
        why = f"{error.code}: {error}" + (
            f"; {exhausted} exhausted after {job.retries} retries" if exhausted else ""
        )
        queue_arn = str((job.target.get("DeadLetterConfig") or {}).get("Arn") or "")
        if not queue_arn:
            self._note(f"{self._what(job)}: dropped ({why})")
            return
        body, attributes = job.dead_letter(error, job.retries, exhausted)
        parts = queue_arn.split(":")
        refused = self._dead_letter_denial(job, queue_arn)
        if refused is not None:
            self._note(
                f"{self._what(job)}: dropped, dead-letter queue {parts[-1]} refused it ({refused}), {why}"
            )
            return
        try:
            sqs_backends[parts[4]][parts[3]].send_message(
                parts[5],
                body,
                message_attributes={
                    key: {"DataType": "String", "StringValue": value} for key, value in attributes.items()
                },
            )
        except Exception as exc:  # moto's QueueDoesNotExist...: the event is lost, as on AWS
            self._note(
                f"{self._what(job)}: dropped, dead-letter queue {queue_arn} not reached ({exc}) after {why}"
            )
            return
        self._note(f"{self._what(job)}: sent to dead-letter queue {parts[5]} ({why})")

    def _dead_letter_denial(self, job: DeliveryJob, queue_arn: str) -> str | None:
        """Why IAM refuses the dead letter, or None: EventBridge needs the queue's policy to let
        ``events.amazonaws.com`` send for the rule; Scheduler sends with the schedule's role."""
        if self.authorizer is None or job.caller is None:
            return None
        if job.caller.service == "events.amazonaws.com":
            denial = self.authorizer.authorize_service(
                job.caller.service,
                "sqs:SendMessage",
                queue_arn,
                source_arn=job.caller.source_arn,
                operation="dead-letter",
            )
        else:
            denial = self.authorizer.authorize_target(job.caller, queue_arn)
        return None if denial is None else str(getattr(denial, "message", denial))

    def _abort_later(self, execution_arn: str, rule: FaultRule) -> None:
        def stop() -> None:
            parts = execution_arn.split(":")
            try:
                backend = get_backend(parts[4], parts[3])
                if backend.describe_execution(execution_arn).status != "RUNNING":
                    return
                backend.stop_execution(execution_arn)
            except Exception as exc:  # an execution gone or finished: nothing to stop
                self._note(f"StopExecution {execution_arn} failed: {exc}")
                return
            if self.timeline is not None:
                machine = self.label(parts[6]) if len(parts) > 6 else execution_arn
                self.timeline.add(
                    Kind.EXECUTION,
                    f"{machine}: execution {parts[-1][:8]} stopped by an operator (StopExecution, fault "
                    "abort_execution)",
                    execution_arn=execution_arn,
                )

        self.later(self._now() + timedelta(seconds=rule.delay_seconds), stop)

    # -------------------------------------------------------------------------------------------- targets

    def send(
        self,
        arn: str,
        payload: str,
        *,
        origin: str,
        event_bus_parameters: dict[str, Any] | None = None,
        caller: TargetCaller | None = None,
        source_region: str | None = None,
    ) -> str:
        """Deliver ``payload`` to a target ARN as EventBridge (or Scheduler) does; returns what was done.

        ``caller`` (the service, the rule's or schedule's ARN and the target's role) is authorized first
        when IAM is on: a denied delivery raises :class:`TargetError` with IAM's message. Lambda:
        asynchronous invoke. Step Functions: StartExecution with a generated name. Event bus:
        a new event (for Scheduler targets, from ``event_bus_parameters`` ``DetailType``/``Source`` and
        the payload as detail) or the same event forwarded (rule targets; in another region or account
        only with the caller's ``role_arn``). SQS: SendMessage. SNS: Publish. Without IAM a ``role_arn``
        must at least exist.

        Raises:
            TargetError: the target does not exist, refused, or its type is not supported locally.
        """
        self._touch()
        parts = arn.split(":", 5)
        if len(parts) < 6 or not arn.startswith("arn:"):
            raise TargetError(f"{arn!r} is not an ARN", code="INVALID_PARAMETER")
        service, region, account, resource = parts[2], parts[3], parts[4], parts[5]
        self._check_caller(caller, arn)
        role_arn = caller.role_arn if caller is not None else None
        if service == "lambda":
            return self._invoke(arn, payload, resource.split(":")[1] if ":" in resource else resource)
        if service == "states":
            return self._start_execution(arn, region, account, payload, origin)
        if service == "events" and resource.startswith("event-bus/"):
            if (
                event_bus_parameters is None
                and not role_arn
                and (region != (source_region or self.region) or account != self.account_id)
            ):
                raise TargetError(
                    f"event bus {arn} is in another region or account: a rule target there needs a RoleArn "
                    "allowed events:PutEvents on it",
                    code="NO_PERMISSIONS",
                )
            return self._to_bus(resource.split("/", 1)[1], region, account, payload, event_bus_parameters)
        if service == "sqs":
            try:
                sqs_backends[account][region].send_message(resource, payload)
            except Exception as exc:  # moto's QueueDoesNotExist
                raise TargetError(f"SendMessage to {arn} failed: {exc}") from exc
            return f"sent to queue {resource}"
        if service == "sns":
            try:
                topic = sns_backends[account][region].get_topic(arn)
            except Exception as exc:  # moto's TopicNotFound
                raise TargetError(f"Publish to {arn} failed: {exc}") from exc
            topic.publish(payload)
            return f"published to topic {resource}"
        raise TargetError(f"target type {service} is not delivered locally", code="INVALID_PARAMETER")

    def _invoke(self, arn: str, payload: str, function: str) -> str:
        """An asynchronous invoke, as Lambda accepts it: maybe run twice or late (its own queue)."""
        job = DeliveryJob(
            origin=f"lambda {self.label(function)}",
            service="lambda",
            operation=function,
            params={"function": function},
            target={"Arn": arn},
            region=arn.split(":")[3],
            event_id="",
            detail_type="invocation",
            source="lambda",
            render=lambda attempt: payload,
            dead_letter=lambda error, retries, exhausted: (payload, {}),
            ingested=self._now(),
        )
        fired = self._draw(job, _LAMBDA_KINDS)
        delayed = fired.get(FaultKind.DELAYED_DELIVERY)
        runs = 2 if FaultKind.DUPLICATE_DELIVERY in fired else 1
        knows = getattr(self.lambdas, "knows", None)
        if delayed is not None and runs == 1 and callable(knows) and not knows(arn):
            raise TargetError(f"Function not found: {arn}")
        for run in range(runs):
            if delayed is not None and (run == 1 or runs == 1):
                at = self._now() + timedelta(seconds=delayed.delay_seconds)
                self._note(f"{job.origin}: asynchronous invocation runs {delayed.delay_seconds:g} s late")
                self.later(at, lambda: self._invoke_quietly(arn, payload))
            else:
                self._invoke_now(arn, payload)
        if runs == 2:
            self._note(f"lambda {self.label(function)}: asynchronous invocation delivered twice")
        return f"invoked {function}"

    def _invoke_now(self, arn: str, payload: str) -> None:
        try:
            self.lambdas.invoke(arn, payload.encode(), invocation_type="Event")
        except AwsError as exc:
            retriable = exc.status == 429 or exc.status >= 500
            code = "NO_RESOURCE" if exc.status == 404 else "THROTTLING" if retriable else "INVALID_PARAMETER"
            raise TargetError(f"Invoke {arn}: {exc.message}", code=code, retriable=retriable) from exc

    def _invoke_quietly(self, arn: str, payload: str) -> None:
        try:
            self._invoke_now(arn, payload)
        except TargetError as exc:
            self._note(f"late asynchronous invocation of {arn} failed: {exc}")

    def _start_execution(self, arn: str, region: str, account: str, payload: str, origin: str) -> str:
        name = self.new_id()
        try:
            execution = get_backend(account, region).start_execution(arn, name=name, execution_input=payload)
        except Exception as exc:  # moto raises its own AWSError subclasses
            raise TargetError(f"StartExecution on {arn} failed: {exc}") from exc
        execution_arn = str(getattr(execution, "execution_arn", arn))
        if self.timeline is not None:
            machine = self.label(arn.rsplit(":", 1)[-1])
            self.timeline.add(
                Kind.EXECUTION,
                f"{machine}: execution {name[:8]} started by {origin}",
                execution_arn=execution_arn,
                state_machine=machine,
            )
        return f"started {execution_arn}"

    def _to_bus(
        self, bus_name: str, region: str, account: str, payload: str, parameters: dict[str, Any] | None
    ) -> str:
        backend = events_backends[account][region]
        if bus_name not in backend.event_buses:
            raise TargetError(f"event bus {bus_name} does not exist in {account}/{region}")
        if parameters is not None:
            try:
                detail = json.loads(payload) if payload else {}
            except ValueError as exc:
                raise TargetError(
                    f"the input is not JSON, so it cannot be an event's detail: {exc}", code="INVALID_JSON"
                ) from exc
            event = envelope(
                event_id=self.new_id(),
                source=str(parameters.get("Source")),
                detail_type=str(parameters.get("DetailType")),
                detail=detail,
                account=account,
                region=region,
                time=self._now(),
            )
        else:
            event = json.loads(payload)
        self.deliver(bus_name, event, backend=backend)
        return f"put on bus {bus_name}" + ("" if region == self.region else f" ({region})")

    # ------------------------------------------------------------------------------------------- helpers

    def _check_caller(self, caller: TargetCaller | None, arn: str) -> None:
        """IAM (when on) decides whether ``caller`` may reach ``arn``; without it a role must exist.

        Raises:
            TargetError: ``NO_PERMISSIONS``, with why.
        """
        if caller is not None and self.authorizer is not None:
            denied = self.authorizer.authorize_target(caller, arn)
            if denied is not None:
                raise TargetError(f"access denied: {denied.message}", code="NO_PERMISSIONS")
        elif caller is not None and caller.role_arn:
            missing = self._role_exists(caller.role_arn)
            if missing is not None:
                raise TargetError(missing, code="NO_PERMISSIONS")

    @staticmethod
    def _role_exists(role_arn: str) -> str | None:
        """Without IAM, at least the role EventBridge or Scheduler would assume must exist (else why not)."""
        parts = role_arn.split(":")
        try:
            iam_backends[parts[4]]["aws"].get_role_by_arn(role_arn)
        except Exception:  # moto's NoSuchEntity, or not a role ARN
            return f"role {role_arn} does not exist (EventBridge cannot assume it)"
        return None

    def _what(self, job: DeliveryJob) -> str:
        return f"{job.origin}: {job.detail_type} {job.event_id[:8]} to {self._short(job.arn)}"

    def _short(self, arn: str) -> str:
        return self.label(arn.rsplit(":", 1)[-1].rsplit("/", 1)[-1])

    def _note(self, text: str) -> None:
        if self.timeline is not None:
            self.timeline.add(Kind.NOTE, text)


def _service_of(arn: str) -> str:
    parts = arn.split(":")
    return parts[2] if len(parts) > 2 else ""


def _summary(detail: Any) -> str:
    """A short, one-line glimpse of an event's detail for the timeline."""
    if not isinstance(detail, dict) or not detail:
        return ""
    names = ("request_id", "EndpointName", "EndpointStatus", "status", "state", "reason", "alarmName")
    keys = [k for k in names if k in detail]
    parts = [f"{k}={_clip(str(detail[k]))}" for k in keys[:3]]
    if isinstance(detail.get("state"), dict) and "value" in detail["state"]:
        parts = [p for p in parts if not p.startswith("state=")] + [f"state={detail['state']['value']}"]
    return f" [{', '.join(parts)}]" if parts else ""


def _clip(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
