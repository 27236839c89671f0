"""EventBridge delivery: events put on a bus reach the targets of the rules that match them.

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

Not modelled: retries and dead-letter queues for failed deliveries, archives and replays, API
destinations, cross-account permissions.
"""

from __future__ import annotations

import json
import random
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from moto.events.exceptions import ValidationException
from moto.events.models import EventsBackend, events_backends
from moto.sns.models import sns_backends
from moto.sqs.models import sqs_backends
from moto.stepfunctions.responses import get_backend

from localcloud.iam import TargetCaller
from localcloud.timeline import Kind, Timeline

EVENT_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
"""EventBridge envelopes carry ``time`` to the second, in UTC, with a ``Z``."""

_ENABLED_STATES = ("ENABLED", "ENABLED_WITH_ALL_CLOUDTRAIL_MANAGEMENT_EVENTS")
_PATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+|\*)\]|\['([^']+)'\]")
_PLACEHOLDER = re.compile(r"<([A-Za-z0-9_.\-]+)>")


class TargetAuthorizer(Protocol):
    """IAM's side of a delivery (``localcloud.iam.Iam``)."""

    def authorize_target(self, caller: TargetCaller, target_arn: str) -> Any:
        """None if ``caller`` may deliver to ``target_arn``, else the denial (with its ``message``)."""
        ...


class LambdaInvoker(Protocol):
    """The part of the local Lambda runtime that delivery and schedules use."""

    def invoke(self, name_or_arn: str, payload: bytes, *, invocation_type: str = "RequestResponse") -> Any:
        """Invoke a function (``invocation_type="Event"``: asynchronously, as EventBridge does)."""
        ...


@dataclass(frozen=True)
class Delivery:
    """One event delivered to one target (for tests and the timeline).

    ``target_arn`` is the target's ARN; ``payload`` the exact text the target received; ``error`` set if
    the target could not be reached (unknown state machine, unsupported target type).
    """

    at: datetime
    event_id: str
    detail_type: str
    source: str
    rule: str
    target_arn: str
    payload: str
    error: str | None = None


class TargetError(Exception):
    """A target could not be reached (the message says which and why)."""


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
    """Delivers events to rule targets; implements :class:`~localcloud.contracts.EventSink`.

    ``lambdas`` invokes functions; ``timeline`` records every event put and each delivery; ``touch`` is
    called on each delivery so the virtual clock sees activity; ``seed`` makes event ids and execution
    names deterministic; ``label`` shortens resource names in timeline texts (drops the stack prefix).
    Use :meth:`install` / :meth:`uninstall` around a run (moto must be active).
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
    ) -> None:
        self.account_id = account_id
        self.label = label or (lambda name: name)
        self.region = region
        self.lambdas = lambdas
        self.timeline = timeline
        self._touch = touch or (lambda: None)
        self._now = now or (lambda: datetime.now(UTC))
        self._random = random.Random(seed)
        self._lock = threading.RLock()
        self._original: Any = None
        self.deliveries: list[Delivery] = []
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
        """Put an event as an AWS service does, on the default bus of ``region`` (``EventSink``)."""
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
        are fired by the scheduler). Returns the deliveries made.
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
            self.timeline.add(
                Kind.EVENT,
                f"{event['detail-type']} ({event['source']}) on {bus_name}{summary} -> {names}",
                event_id=event["id"],
                bus=bus_name,
                detail_type=event["detail-type"],
                source=event["source"],
                rules=[rule.name for rule in matched],
                event=event,
            )
        made: list[Delivery] = []
        for rule in matched:
            for target in list(rule.targets):
                made.append(self._send(rule.arn, rule.name, target, event))
        return made

    def send_rule_targets(self, rule: Any, event: dict[str, Any]) -> list[Delivery]:
        """Send ``event`` to every target of one rule (used for scheduled rules' ``Scheduled Event``)."""
        return [self._send(rule.arn, rule.name, target, event) for target in list(rule.targets)]

    def _send(self, rule_arn: str, rule_name: str, target: dict[str, Any], event: dict[str, Any]) -> Delivery:
        arn = str(target.get("Arn", ""))
        error: str | None = None
        try:
            payload = target_input(target, event, rule_arn=rule_arn, rule_name=rule_name)
        except ValueError as exc:
            payload, error = "", f"input transformation failed: {exc}"
        if error is None:
            try:
                caller = TargetCaller("events.amazonaws.com", rule_arn, target.get("RoleArn"))
                self.send(arn, payload, origin=f"rule {self.label(rule_name)}", caller=caller)
            except TargetError as exc:
                error = str(exc)
        record = Delivery(
            at=self._now(),
            event_id=str(event.get("id")),
            detail_type=str(event.get("detail-type")),
            source=str(event.get("source")),
            rule=rule_name,
            target_arn=arn,
            payload=payload,
            error=error,
        )
        with self._lock:
            self.deliveries.append(record)
        if error is not None and self.timeline is not None:
            self.timeline.add(
                Kind.NOTE, f"rule {rule_name}: target {arn} not reached: {error}", rule=rule_name
            )
        return record

    # -------------------------------------------------------------------------------------------- targets

    def send(
        self,
        arn: str,
        payload: str,
        *,
        origin: str,
        event_bus_parameters: dict[str, Any] | None = None,
        caller: TargetCaller | None = None,
    ) -> str:
        """Deliver ``payload`` to a target ARN as EventBridge (or Scheduler) does; returns what was done.

        ``caller`` (the service, the rule's or schedule's ARN and the target's role) is authorized first
        when IAM is on: a denied delivery raises :class:`TargetError` with IAM's message. Lambda:
        asynchronous invoke. Step Functions: StartExecution with a generated name. Event bus:
        a new event (for Scheduler targets, from ``event_bus_parameters`` ``DetailType``/``Source`` and
        the payload as detail) or the same event forwarded (rule targets). SQS: SendMessage. SNS: Publish.

        Raises:
            TargetError: the target does not exist or its type is not supported locally.
        """
        self._touch()
        parts = arn.split(":", 5)
        if len(parts) < 6 or not arn.startswith("arn:"):
            raise TargetError(f"{arn!r} is not an ARN")
        service, region, account, resource = parts[2], parts[3], parts[4], parts[5]
        if caller is not None and self.authorizer is not None:
            denial = self.authorizer.authorize_target(caller, arn)
            if denial is not None:
                raise TargetError(f"access denied: {denial.message}")
        if service == "lambda":
            self.lambdas.invoke(arn, payload.encode(), invocation_type="Event")
            return f"invoked {resource.split(':')[1] if ':' in resource else resource}"
        if service == "states":
            return self._start_execution(arn, region, account, payload, origin)
        if service == "events" and resource.startswith("event-bus/"):
            return self._to_bus(resource.split("/", 1)[1], region, account, payload, event_bus_parameters)
        if service == "sqs":
            sqs_backends[account][region].send_message(resource, payload)
            return f"sent to queue {resource}"
        if service == "sns":
            topic = sns_backends[account][region].get_topic(arn)
            topic.publish(payload)
            return f"published to topic {resource}"
        raise TargetError(f"target type {service} is not delivered locally")

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
                raise TargetError(f"the input is not JSON, so it cannot be an event's detail: {exc}") from exc
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
        return f"put on bus {bus_name}"


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
