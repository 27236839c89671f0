"""DynamoDB Streams to Lambda: the event source mappings of the template, polled as Lambda polls them.
Kept whole: one poller per mapping and shard, under one lock, with its retry and dead-letter rules.

moto keeps a table's stream records (``Table.stream_shard``, one list per table: every ``INSERT``, ``MODIFY``
and ``REMOVE`` in write order, with the image the ``StreamViewType`` asks for) but delivers them nowhere
unless moto's own Lambda backend holds the mapping, which never runs here. :class:`StreamDelivery` reads
those records for each ``AWS::Lambda::EventSourceMapping`` of the stack whose ``EventSourceArn`` is a
DynamoDB stream (what SAM's ``DynamoDB`` event becomes, or one written by hand) and invokes the function as
Lambda's event source mapping does ("Using AWS Lambda with Amazon DynamoDB", "Lambda parameters for Amazon
DynamoDB event source mappings", "Retain discarded records for a DynamoDB event source in Lambda", Lambda
developer guide):

- **Shards.** A stream is split into shards by partition key; each shard is read in order, one batch at a
  time, and the shards in parallel. Here every partition key is hashed onto one of :data:`STREAM_SHARDS`
  shards: the records of one item (one partition key) come in write order, those of different keys in
  whatever order their shards make (never the global write order).
- **Starting position.** ``TRIM_HORIZON``: every record the stream holds (24 hours); ``LATEST``: those
  written after the cloud started.
- **Filters.** ``FilterCriteria.Filters[].Pattern`` (JSON text, EventBridge pattern syntax, as Lambda's
  event filtering reads it: ``eventName``, ``dynamodb.Keys``, ``dynamodb.NewImage`` in DynamoDB JSON) are
  matched with the same matcher as EventBridge rules (moto's); a record that matches no filter is dropped
  for good (its checkpoint passes it), one that matches any is delivered.
- **Batches.** ``{"Records": [...]}`` with each record as Lambda sends it (``eventID``, ``eventName``,
  ``eventVersion``, ``eventSource`` ``aws:dynamodb``, ``awsRegion``, ``eventSourceARN``, ``dynamodb``
  with ``ApproximateCreationDateTime`` in epoch seconds, ``Keys``, ``NewImage``/``OldImage``,
  ``SequenceNumber``, ``SizeBytes``, ``StreamViewType``), at most ``BatchSize`` (default 100), invoked
  synchronously (``RequestResponse``); ``MaximumBatchingWindowInSeconds`` waits that long for more.
- **Late.** A record reaches the poller between :data:`LAG_SECONDS` after its write (drawn from the
  seed; AWS: usually well under a second, 4 polls a second: the less kind end is taken).
- **At least once.** A batch whose invocation fails (the function raised, timed out, answered a
  marshalling error) is retried whole, in place (nothing after it in its shard moves meanwhile), after
  :func:`retry_delay`, until it succeeds, ``MaximumRetryAttempts`` retries are spent or a record is older
  than ``MaximumRecordAgeInSeconds`` (default -1: the stream's 24 hours); then its records are discarded
  and, with ``DestinationConfig.OnFailure``, Lambda's invocation record (metadata: the shard, the first and
  last sequence numbers, not the records) goes to that SQS queue, sent as the function's execution role.
  ``BisectBatchOnFunctionError`` splits a failed batch in two first (splitting spends no retry); the halves
  run in order. An invocation Lambda refuses before the function runs (a throttle) is retried until the
  records are too old, without spending a retry (as AWS documents).
- **Faults** (service ``dynamodb-streams``, operation the function's name; ``match`` keys ``function``,
  ``table``, ``stream``, ``shard``): ``duplicate_delivery`` invokes a batch that succeeded once more,
  ``delayed_delivery`` holds a batch (and its shard) ``delay_seconds``, ``delivery_failure`` (or
  ``throttle``) refuses an invocation as a throttle.
- **IAM.** When the cloud starts, the function's execution role must allow ``dynamodb:DescribeStream``,
  ``GetRecords``, ``GetShardIterator`` on the stream and ``dynamodb:ListStreams`` (the permissions the
  Lambda guide lists), and ``sqs:SendMessage`` on the on-failure queue, or the cloud refuses to start (as
  CloudFormation's ``CreateEventSourceMapping`` fails).

Not modelled: ``ParallelizationFactor`` above 1, ``TumblingWindowInSeconds`` and ``FunctionResponseTypes``
(refused at load), shard splits and the 4-hour shard roll-over, SNS and S3 on-failure destinations.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, cast

from moto.dynamodb.models import dynamodb_backends
from moto.events.models import EventPattern
from moto.sqs.models import sqs_backends

from localcloud.contracts import AwsError, Due
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.iam import TargetCaller
from localcloud.timeline import Kind, Timeline

STREAM_SHARDS = 4
"""Shards of a table's stream: partition keys are hashed onto them (records of one key stay in order)."""
LAG_SECONDS = (1.0, 3.0)
"""A record reaches the poller this long after its write (a seeded draw in the range)."""
RETRY_BASE_SECONDS = 1.0
RETRY_CAP_SECONDS = 60.0
"""A failed batch's retry ``n`` waits ``min(cap, base x 2^(n-1))`` seconds (AWS documents no figure)."""
RETENTION = timedelta(hours=24)
"""A DynamoDB stream keeps a record 24 hours (``MaximumRecordAgeInSeconds`` -1 means this)."""
SERVICE = "dynamodb-streams"
"""The fault rules' ``service`` for stream deliveries (botocore's hyphenated id of DynamoDB Streams)."""
STREAM_READ_ACTIONS = (
    "dynamodb:DescribeStream",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
)
"""What the execution role must allow on the stream ARN (and ``dynamodb:ListStreams`` on ``*``)."""
_UNSUPPORTED = ("TumblingWindowInSeconds", "FunctionResponseTypes")
_ONCE_KINDS = frozenset({FaultKind.DUPLICATE_DELIVERY, FaultKind.DELAYED_DELIVERY})
_REFUSAL_KINDS = frozenset({FaultKind.DELIVERY_FAILURE, FaultKind.THROTTLE})


class Invoker(Protocol):
    """The part of the local Lambda runtime the poller uses."""

    def invoke(self, name_or_arn: str, payload: bytes, *, invocation_type: str = "RequestResponse") -> Any:
        """Invoke a function synchronously (``RequestResponse``)."""
        ...


class Authorizer(Protocol):
    """IAM's side (``localcloud.iam.Iam``)."""

    def authorize_function(
        self, function_name: str, action: str, resource: str, *, service: str, operation: str
    ) -> Any:
        """None if the function's execution role may ``action`` on ``resource``, else the denial."""
        ...

    def authorize_target(self, caller: TargetCaller, target_arn: str) -> Any:
        """None if ``caller``'s role may deliver to ``target_arn`` (an SQS queue), else the denial."""
        ...

    def role_of(self, function_name: str) -> str:
        """The function's execution role ARN."""
        ...


class MappingError(ValueError):
    """An event source mapping the local cloud cannot run (the template loader reports it as a
    ``MappingError``), or one AWS would refuse to create (its role cannot read the stream)."""


def retry_delay(retry: int) -> timedelta:
    """How long a failed batch waits before its retry ``retry`` (1-based)."""
    return timedelta(seconds=min(RETRY_CAP_SECONDS, RETRY_BASE_SECONDS * 2 ** min(retry - 1, 30)))


@dataclass(frozen=True)
class StreamMapping:
    """One ``AWS::Lambda::EventSourceMapping`` on a DynamoDB stream, with Lambda's defaults applied.

    Attributes:
        logical_id: the mapping's logical id; ``arn`` a deterministic ``event-source-mapping`` ARN.
        function: the function's physical name; ``stream_arn`` the stream; ``table`` its table's name.
        starting_position: ``TRIM_HORIZON`` or ``LATEST``.
        batch_size: at most this many records per invocation (default 100).
        batching_window_seconds: how long to gather records before invoking (default 0).
        bisect: ``BisectBatchOnFunctionError``.
        max_retries: ``MaximumRetryAttempts`` (-1: until the record is too old).
        max_age_seconds: ``MaximumRecordAgeInSeconds`` (-1: the stream's 24 hours).
        on_failure: the ``DestinationConfig.OnFailure.Destination`` ARN (an SQS queue), or None.
        filters: the ``FilterCriteria`` patterns as parsed JSON (none: every record).
        enabled: ``Enabled`` (default true).
    """

    logical_id: str
    arn: str
    function: str
    stream_arn: str
    table: str
    region: str
    account: str
    starting_position: str
    batch_size: int = 100
    batching_window_seconds: float = 0.0
    bisect: bool = False
    max_retries: int = -1
    max_age_seconds: int = -1
    on_failure: str | None = None
    filters: tuple[dict[str, Any], ...] = ()
    enabled: bool = True

    @classmethod
    def from_resource(cls, logical_id: str, props: dict[str, Any], *, where: str) -> StreamMapping | None:
        """The mapping of a resolved ``AWS::Lambda::EventSourceMapping``; None when its source is not a
        DynamoDB stream (SQS, Kinesis, Kafka...: not delivered locally).

        Raises:
            MappingError: a property the local cloud cannot reproduce, or a filter that is not JSON.
        """
        source = str(props.get("EventSourceArn") or "")
        parts = source.split(":", 5)
        if len(parts) < 6 or parts[2] != "dynamodb" or "/stream/" not in parts[5]:
            return None
        for name in _UNSUPPORTED:
            if props.get(name):
                raise MappingError(f"{where}.{name}: not supported by the local cloud's stream delivery")
        if int(props.get("ParallelizationFactor") or 1) != 1:
            raise MappingError(f"{where}.ParallelizationFactor: only 1 is supported locally")
        filters: list[dict[str, Any]] = []
        for index, entry in enumerate((props.get("FilterCriteria") or {}).get("Filters") or []):
            text = entry.get("Pattern")
            try:
                pattern = json.loads(text) if isinstance(text, str) else text
            except ValueError as exc:
                raise MappingError(
                    f"{where}.FilterCriteria.Filters[{index}].Pattern is not JSON: {exc}"
                ) from exc
            if not isinstance(pattern, dict):
                raise MappingError(f"{where}.FilterCriteria.Filters[{index}].Pattern must be a JSON object")
            filters.append(pattern)
        destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination and ":sqs:" not in str(destination):
            raise MappingError(
                f"{where}.DestinationConfig.OnFailure: only SQS destinations are delivered locally"
            )
        function = str(props.get("FunctionName") or "")
        if function.startswith("arn:"):
            function = function.split(":")[6]
        position = str(props.get("StartingPosition") or "")
        if position not in ("TRIM_HORIZON", "LATEST"):
            raise MappingError(f"{where}.StartingPosition: TRIM_HORIZON or LATEST for a DynamoDB stream")
        digest = hashlib.sha256(f"{source}|{logical_id}".encode()).hexdigest()
        mapping_id = f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"
        return cls(
            logical_id=logical_id,
            arn=f"arn:{parts[1]}:lambda:{parts[3]}:{parts[4]}:event-source-mapping:{mapping_id}",
            function=function,
            stream_arn=source,
            table=parts[5].split("/")[1],
            region=parts[3],
            account=parts[4],
            starting_position=position,
            batch_size=int(props.get("BatchSize") or 100),
            batching_window_seconds=float(props.get("MaximumBatchingWindowInSeconds") or 0),
            bisect=props.get("BisectBatchOnFunctionError") in (True, "true", "True"),
            max_retries=int(props.get("MaximumRetryAttempts", -1)),
            max_age_seconds=int(props.get("MaximumRecordAgeInSeconds", -1)),
            on_failure=str(destination) if destination else None,
            filters=tuple(filters),
            enabled=props.get("Enabled", True) not in (False, "false", "False"),
        )

    @property
    def max_age(self) -> timedelta:
        """How old a record may be and still be delivered."""
        return (
            RETENTION if self.max_age_seconds < 0 else min(RETENTION, timedelta(seconds=self.max_age_seconds))
        )


@dataclass
class _Record:
    sequence: str
    record: dict[str, Any]
    arrived: datetime
    visible: datetime


@dataclass
class _Shard:
    id: str
    queue: deque[_Record] = field(default_factory=deque)
    parts: list[list[_Record]] = field(default_factory=list)
    """The batch in hand (``parts[0]``) and, after a bisect, the halves still to run after it."""
    retries: int = 0
    refusals: int = 0
    """Invocations Lambda refused for the batch in hand (throttles): they spend no retry, they back off."""
    not_before: datetime | None = None
    running: bool = False
    drawn: bool = False
    """Whether the batch in hand has drawn its once-per-batch faults (duplicate, delay)."""
    duplicate: bool = False


@dataclass
class _Poller:
    mapping: StreamMapping
    cursor: int
    shards: list[_Shard]
    last_visible: dict[str, datetime] = field(default_factory=dict)
    patterns: list[EventPattern] = field(default_factory=list)


@dataclass(frozen=True)
class StreamBatch:
    """One invocation of a function with stream records (for tests and the timeline).

    ``sequences`` are the records' sequence numbers in order; ``payload`` the event the function received
    (JSON text; empty when Lambda refused the invocation); ``error`` the function's ``errorType`` (or why
    Lambda refused the invocation), None when it succeeded; ``attempt`` counts from 1 for each batch (a
    bisected half starts again at 1).
    """

    at: datetime
    mapping: str
    function: str
    shard: str
    sequences: tuple[str, ...]
    payload: str
    error: str | None
    attempt: int


class StreamDelivery:
    """The event source mappings on DynamoDB streams (module docstring); a
    :class:`~localcloud.contracts.Ticker` of the virtual clock (foreground: a record on its way keeps a run
    going).

    Args:
        mappings: the stack's mappings on DynamoDB streams.
        lambdas: invokes functions synchronously.
        now: the virtual clock; ``touch`` tells it of activity.
        faults: draws the delivery fault kinds (service :data:`SERVICE`).
        timeline: records batches, retries and discards.
        seed: makes the lags reproducible.
        authorizer: IAM (None: not evaluated).
        label: shortens resource names for the timeline.

    Attributes:
        batches: every invocation attempt (:class:`StreamBatch`).
        discarded: ``(mapping logical id, shard, sequence numbers, condition)`` of every batch given up on.
    """

    def __init__(
        self,
        mappings: Iterable[StreamMapping],
        *,
        lambdas: Invoker,
        now: Callable[[], datetime],
        touch: Callable[[], None] | None = None,
        faults: FaultInjector | None = None,
        timeline: Timeline | None = None,
        seed: int = 7,
        authorizer: Authorizer | None = None,
        label: Callable[[str], str] | None = None,
    ) -> None:
        self.mappings = [m for m in mappings if m.enabled]
        self.lambdas = lambdas
        self.faults = faults
        self.timeline = timeline
        self.authorizer = authorizer
        self._now = now
        self._touch = touch or (lambda: None)
        self._label = label or (lambda name: name)
        self._random = random.Random(seed ^ 0x57AE)
        self._lock = threading.RLock()
        self._pollers: list[_Poller] = []
        self._threads = itertools.count(1)
        self.batches: list[StreamBatch] = []
        self.discarded: list[tuple[str, str, tuple[str, ...], str]] = []

    # ------------------------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Begin polling (after the stack is deployed): check IAM as ``CreateEventSourceMapping`` does, and
        place each mapping at its starting position.

        Raises:
            MappingError: the execution role may not read the stream or send to the on-failure queue, or the
                table has no stream.
        """
        for mapping in self.mappings:
            self._check_permissions(mapping)
            table = self._table(mapping)
            if table is None or table.stream_shard is None:
                raise MappingError(
                    f"Resources.{mapping.logical_id}: table {mapping.table} has no stream "
                    "(StreamSpecification)"
                )
            cursor = len(table.stream_shard.items) if mapping.starting_position == "LATEST" else 0
            shards = [_Shard(f"shardId-{mapping.table[:24]}-{n:02d}") for n in range(STREAM_SHARDS)]
            patterns = [EventPattern.load(json.dumps(p)) for p in mapping.filters]
            self._pollers.append(_Poller(mapping, cursor, shards, patterns=patterns))

    def _check_permissions(self, mapping: StreamMapping) -> None:
        if self.authorizer is None:
            return
        checks = [(action, mapping.stream_arn) for action in STREAM_READ_ACTIONS]
        checks.append(("dynamodb:ListStreams", "*"))
        for action, resource in checks:
            denied = self.authorizer.authorize_function(
                mapping.function,
                action,
                resource,
                service="dynamodbstreams",
                operation="event-source-mapping",
            )
            if denied is not None:
                raise MappingError(
                    f"Resources.{mapping.logical_id}: CreateEventSourceMapping fails: the execution role of "
                    f"{mapping.function} cannot call {action} on {resource} "
                    f"({getattr(denied, 'message', denied)})"
                )
        if mapping.on_failure:
            caller = TargetCaller(
                "lambda.amazonaws.com", mapping.arn, self.authorizer.role_of(mapping.function)
            )
            denied = self.authorizer.authorize_target(caller, mapping.on_failure)
            if denied is not None:
                raise MappingError(
                    f"Resources.{mapping.logical_id}: CreateEventSourceMapping fails: the execution role of "
                    f"{mapping.function} cannot send to {mapping.on_failure} "
                    f"({getattr(denied, 'message', denied)})"
                )

    @staticmethod
    def _table(mapping: StreamMapping) -> Any:
        return dynamodb_backends[mapping.account][mapping.region].tables.get(mapping.table)

    # ---------------------------------------------------------------------------------------- Ticker API

    def next_due(self, now: datetime) -> Due | None:
        """The next instant a shard has a batch to invoke (foreground), or None."""
        self._ingest()
        soonest: datetime | None = None
        with self._lock:
            for poller in self._pollers:
                for shard in poller.shards:
                    at = self._due(poller, shard)
                    if at is not None and (soonest is None or at < soonest):
                        soonest = at
        if soonest is None:
            return None
        return Due(max(soonest, now + timedelta(microseconds=1)), True)

    def advance(self, now: datetime) -> None:
        """Invoke every batch due at or before ``now`` (each on a thread of its own: the function runs
        synchronously for its poller, as Lambda's pollers wait for it)."""
        self._ingest()
        starting: list[tuple[_Poller, _Shard, list[_Record]]] = []
        with self._lock:
            for poller in self._pollers:
                for shard in poller.shards:
                    at = self._due(poller, shard)
                    if at is None or at > now:
                        continue
                    batch = self._take(poller, shard, now)
                    if batch:
                        shard.running = True
                        starting.append((poller, shard, batch))
        for poller, shard, batch in starting:
            thread = threading.Thread(
                target=self._deliver,
                args=(poller, shard, batch),
                name=f"stream-{poller.mapping.logical_id}-{next(self._threads)}",
                daemon=True,
            )
            thread.start()
        if starting:
            self._touch()

    # ------------------------------------------------------------------------------------------- reading

    def _ingest(self) -> None:
        """Move the records written since the last look from moto's stream onto their shards (filtered)."""
        for poller in self._pollers:
            table = self._table(poller.mapping)
            shard_of_table = getattr(table, "stream_shard", None)
            if shard_of_table is None:
                continue
            items = shard_of_table.items
            end = len(items)
            if end <= poller.cursor:
                continue
            with self._lock:
                for index in range(poller.cursor, end):
                    self._place(poller, table, items[index].to_json())
                poller.cursor = end

    def _place(self, poller: _Poller, table: Any, raw: dict[str, Any]) -> None:
        mapping = poller.mapping
        dynamodb = dict(raw.get("dynamodb") or {})
        created = dynamodb.get("ApproximateCreationDateTime")
        arrived = (
            created.replace(tzinfo=UTC)
            if isinstance(created, datetime) and created.tzinfo is None
            else created
        )
        if not isinstance(arrived, datetime):
            arrived = self._now()
        dynamodb["ApproximateCreationDateTime"] = int(arrived.timestamp())
        record: dict[str, Any] = {
            "eventID": raw.get("eventID"),
            "eventName": raw.get("eventName"),
            "eventVersion": "1.1",
            "eventSource": "aws:dynamodb",
            "awsRegion": mapping.region,
            "dynamodb": dynamodb,
            "eventSourceARN": mapping.stream_arn,
        }
        if poller.patterns and not any(p.matches_event(cast(Any, record)) for p in poller.patterns):
            return  # filtered out: Lambda's checkpoint passes it, the function never sees it
        key = json.dumps((dynamodb.get("Keys") or {}).get(table.hash_key_attr), sort_keys=True)
        index = int(hashlib.sha256(key.encode()).hexdigest(), 16) % STREAM_SHARDS
        shard = poller.shards[index]
        lag = timedelta(seconds=self._random.uniform(*LAG_SECONDS))
        visible = max(arrived + lag, poller.last_visible.get(shard.id, arrived))
        poller.last_visible[shard.id] = visible
        shard.queue.append(_Record(str(dynamodb.get("SequenceNumber")), record, arrived, visible))

    def _due(self, poller: _Poller, shard: _Shard) -> datetime | None:
        """When ``shard`` next has work (its batch in hand, else its first visible record plus the batching
        window), or None (idle, or a batch running)."""
        if shard.running:
            return None
        if shard.parts:
            return shard.not_before or self._now()
        if not shard.queue:
            return None
        first = shard.queue[0].visible
        window = timedelta(seconds=poller.mapping.batching_window_seconds)
        if window and len(shard.queue) < poller.mapping.batch_size:
            return first + window
        return first

    def _take(self, poller: _Poller, shard: _Shard, now: datetime) -> list[_Record]:
        """The batch to invoke now: the one in hand, else the next visible records (up to ``BatchSize``)."""
        if not shard.parts:
            batch: list[_Record] = []
            while shard.queue and shard.queue[0].visible <= now and len(batch) < poller.mapping.batch_size:
                batch.append(shard.queue.popleft())
            if not batch:
                return []
            shard.parts = [batch]
            shard.retries = 0
            shard.refusals = 0
            shard.drawn = False
            shard.duplicate = False
        return self._fresh(poller, shard, now)

    def _fresh(self, poller: _Poller, shard: _Shard, now: datetime) -> list[_Record]:
        """The batch in hand without the records too old to deliver (discarded, ``RecordAgeExceeded``)."""
        while shard.parts:
            batch = shard.parts[0]
            limit = poller.mapping.max_age
            expired = [r for r in batch if now - r.arrived > limit]
            if expired:
                self._discard(poller, shard, expired, "RecordAgeExceeded", error=None)
                batch = [r for r in batch if r not in expired]
            if batch:
                shard.parts[0] = batch
                return batch
            shard.parts.pop(0)
            shard.retries = 0
        return []

    # ---------------------------------------------------------------------------------------- delivering

    def _draw(
        self, poller: _Poller, shard: _Shard, kinds: frozenset[FaultKind]
    ) -> dict[FaultKind, FaultRule]:
        if self.faults is None or not self.faults.rules:
            return {}
        mapping = poller.mapping
        params = {
            "function": mapping.function,
            "table": mapping.table,
            "stream": mapping.stream_arn,
            "shard": shard.id,
        }
        fired = self.faults.draw(SERVICE, mapping.function, params, kinds=kinds)
        return {rule.kind: rule for rule in fired}

    def _deliver(self, poller: _Poller, shard: _Shard, batch: list[_Record]) -> None:
        """Run on the batch's own thread: faults, the invocation, then what Lambda does with its result."""
        mapping = poller.mapping
        try:
            if not shard.drawn:
                shard.drawn = True
                fired = self._draw(poller, shard, _ONCE_KINDS)
                shard.duplicate = FaultKind.DUPLICATE_DELIVERY in fired
                delayed = fired.get(FaultKind.DELAYED_DELIVERY)
                if delayed is not None:
                    self._later(shard, timedelta(seconds=delayed.delay_seconds))
                    self._note(f"{self._what(poller, shard, batch)}: delayed by {delayed.delay_seconds:g} s")
                    return
            error: str | None
            payload = ""
            refused = bool(self._draw(poller, shard, _REFUSAL_KINDS))
            if refused:
                error, function_failed = "Lambda.TooManyRequestsException (fault delivery_failure)", False
            else:
                payload = json.dumps({"Records": [r.record for r in batch]})
                try:
                    result = self.lambdas.invoke(
                        mapping.function, payload.encode(), invocation_type="RequestResponse"
                    )
                except AwsError as exc:  # Lambda refused the invocation before the function ran
                    error, function_failed = f"Lambda.{exc.code}", False
                else:
                    error = _error_type(result) if result.function_error else None
                    function_failed = error is not None
            self._record(poller, shard, batch, payload, error)
            with self._lock:
                if error is None:
                    self._succeeded(poller, shard, batch)
                elif function_failed:
                    self._function_failed(poller, shard, batch, error)
                else:
                    shard.refusals += 1
                    wait = retry_delay(shard.refusals)
                    self._later(shard, wait)
                    self._note(
                        f"{self._what(poller, shard, batch)}: invocation refused ({error}); tried again in "
                        f"{wait.total_seconds():g} s"
                    )
        finally:
            with self._lock:
                shard.running = False
            self._touch()

    def _succeeded(self, poller: _Poller, shard: _Shard, batch: list[_Record]) -> None:
        if shard.duplicate:
            shard.duplicate = False
            self._note(f"{self._what(poller, shard, batch)}: delivered twice")
            shard.not_before = None
            return  # the same batch is invoked once more, then the shard moves on
        shard.parts.pop(0)
        shard.retries = 0
        shard.refusals = 0
        shard.drawn = False
        shard.not_before = None

    def _function_failed(self, poller: _Poller, shard: _Shard, batch: list[_Record], error: str) -> None:
        mapping = poller.mapping
        if mapping.bisect and len(batch) > 1:
            half = len(batch) // 2
            shard.parts[0:1] = [batch[:half], batch[half:]]
            shard.retries = 0
            shard.drawn = False
            shard.not_before = None
            self._note(f"{self._what(poller, shard, batch)}: failed ({error}); split in two")
            return
        shard.retries += 1
        if 0 <= mapping.max_retries < shard.retries:
            shard.parts.pop(0)
            self._discard(poller, shard, batch, "RetryAttemptsExhausted", error=error)
            shard.retries = 0
            shard.drawn = False
            shard.not_before = None
            return
        wait = retry_delay(shard.retries)
        self._later(shard, wait)
        self._note(
            f"{self._what(poller, shard, batch)}: failed ({error}); retry {shard.retries} in "
            f"{wait.total_seconds():g} s"
        )

    def _later(self, shard: _Shard, wait: timedelta) -> None:
        with self._lock:
            shard.not_before = self._now() + wait

    def _discard(
        self, poller: _Poller, shard: _Shard, records: list[_Record], condition: str, *, error: str | None
    ) -> None:
        """Give up on ``records``: Lambda's invocation record to the on-failure queue, if any."""
        mapping = poller.mapping
        sequences = tuple(r.sequence for r in records)
        self.discarded.append((mapping.logical_id, shard.id, sequences, condition))
        text = f"{self._what(poller, shard, records)}: discarded ({condition})"
        if not mapping.on_failure:
            self._note(text + ", no on-failure destination")
            return
        body = {
            "requestContext": {
                "requestId": str(self._random_uuid()),
                "functionArn": f"arn:aws:lambda:{mapping.region}:{mapping.account}:function:"
                f"{mapping.function}",
                "condition": condition,
                "approximateInvokeCount": shard.retries + 1,
            },
            "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"}
            if error
            else {},
            "version": "1.0",
            "timestamp": self._now().strftime("%Y-%m-%dT%H:%M:%S.")
            + f"{self._now().microsecond // 1000:03d}Z",
            "DDBStreamBatchInfo": {
                "shardId": shard.id,
                "startSequenceNumber": sequences[0],
                "endSequenceNumber": sequences[-1],
                "approximateArrivalOfFirstRecord": _iso(records[0].arrived),
                "approximateArrivalOfLastRecord": _iso(records[-1].arrived),
                "batchSize": len(records),
                "streamArn": mapping.stream_arn,
            },
        }
        parts = mapping.on_failure.split(":")
        try:
            sqs_backends[parts[4]][parts[3]].send_message(parts[5], json.dumps(body))
        except Exception as exc:  # moto's QueueDoesNotExist: the metadata is lost, as on AWS
            self._note(text + f"; on-failure queue {parts[5]} not reached ({exc})")
            return
        self._note(text + f"; metadata sent to {parts[5]}")

    def _random_uuid(self) -> str:
        with self._lock:
            value = self._random.getrandbits(128)
        text = f"{value:032x}"
        return f"{text[:8]}-{text[8:12]}-4{text[13:16]}-a{text[17:20]}-{text[20:32]}"

    # ------------------------------------------------------------------------------------------- telling

    def _record(
        self, poller: _Poller, shard: _Shard, batch: list[_Record], payload: str, error: str | None
    ) -> None:
        entry = StreamBatch(
            at=self._now(),
            mapping=poller.mapping.logical_id,
            function=poller.mapping.function,
            shard=shard.id,
            sequences=tuple(r.sequence for r in batch),
            payload=payload,
            error=error,
            attempt=shard.retries + 1,
        )
        with self._lock:
            self.batches.append(entry)
        if self.timeline is not None:
            self.timeline.add(
                Kind.EVENT,
                f"stream {poller.mapping.table}: {len(batch)} record(s) -> "
                f"{self._label(poller.mapping.function)}" + ("" if error is None else f" failed ({error})"),
                mapping=poller.mapping.logical_id,
                shard=shard.id,
                sequences=list(entry.sequences),
                error=error,
            )

    def _what(self, poller: _Poller, shard: _Shard, batch: list[_Record]) -> str:
        return (
            f"stream {poller.mapping.table} -> {self._label(poller.mapping.function)}: batch of {len(batch)} "
            f"({shard.id[-2:]}, {batch[0].sequence if batch else '-'}...)"
        )

    def _note(self, text: str) -> None:
        if self.timeline is not None:
            self.timeline.add(Kind.NOTE, text)


def _error_type(result: Any) -> str:
    try:
        answer = json.loads(result.payload or b"{}")
    except ValueError:
        return "Unhandled"
    return str(answer.get("errorType") or "Unhandled") if isinstance(answer, dict) else "Unhandled"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
