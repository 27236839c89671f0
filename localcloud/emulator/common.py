"""Pieces every emulated service shares: the virtual clock, lifecycles, errors, ids, tags, pagination."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from localcloud.contracts import AwsError, EventSink
from localcloud.emulator.market import Market
from localcloud.faults import FaultKind

Params = dict[str, Any]
Response = dict[str, Any]
Handler = Callable[[Params, str, frozenset[FaultKind]], Response]
"""An operation: ``handler(params, region, faults) -> response``; raises :class:`AwsError`."""

NEVER = datetime.max.replace(tzinfo=UTC)
"""A phase that starts at NEVER never starts: a resource stuck in its transitional state."""


def utcnow() -> datetime:
    """The current virtual time, tz-aware UTC (time-machine moves it; never real time)."""
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """``moment`` as tz-aware UTC (naive values, as moto stores them, are taken to be UTC)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso_millis(moment: datetime) -> str:
    """CloudWatch's event timestamp format: ``2019-10-02T17:04:40.989+0000``."""
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%S.") + f"{as_utc(moment).microsecond // 1000:03d}+0000"


def iso_z(moment: datetime) -> str:
    """``2026-12-10T11:30:00Z``."""
    return as_utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Timeline:
    """A resource's status as a function of virtual time: a list of (start, status) phases.

    The status at ``now`` is the one of the last phase that started at or before ``now``; a phase starting
    at :data:`NEVER` never begins (a stuck resource keeps its transitional state).
    """

    phases: list[tuple[datetime, str]] = field(default_factory=list)

    def at(self, now: datetime) -> str:
        """The status at ``now`` (the first phase's status before it starts)."""
        current = self.phases[0][1]
        for start, status in self.phases:
            if start <= now:
                current = status
        return current

    def since(self, now: datetime) -> datetime:
        """When the status at ``now`` began."""
        began = self.phases[0][0]
        for start, _status in self.phases:
            if start <= now:
                began = start
        return began

    def add(self, start: datetime, status: str) -> None:
        """Append a phase; phases after ``start`` that have not begun are dropped (superseded)."""
        self.phases = [(begin, status_) for begin, status_ in self.phases if begin <= start]
        self.phases.append((start, status))

    def next_change(self, now: datetime) -> datetime | None:
        """The start of the first phase after ``now`` (None if none is scheduled)."""
        upcoming = [start for start, _status in self.phases if now < start < NEVER]
        return min(upcoming) if upcoming else None


@dataclass
class Context:
    """What every emulated service shares: account, market, event sink, id source and the lock."""

    account_id: str
    market: Market
    events: EventSink
    lock: threading.RLock = field(default_factory=threading.RLock)
    _ids: dict[tuple[object, ...], int] = field(default_factory=dict)
    read_lag_seconds: float = 0.0
    """How old the answer of the read being served is (``stale_listing``; 0: up to date). Set per call."""

    def new_id(self, *parts: object, length: int = 17) -> str:
        """A deterministic lowercase hex id (the seed, ``parts`` and how often ``parts`` came decide it)."""
        # Counted per ``parts``: concurrent calls about different things do not change each other's ids.
        self._ids[parts] = self._ids.get(parts, 0) + 1
        return self.market.token("id", self._ids[parts], *parts, length=length)

    def uuid(self, *parts: object) -> str:
        """A deterministic id in UUID format."""
        raw = self.new_id(*parts, length=32)
        return f"{raw[:8]}-{raw[8:12]}-{raw[12:16]}-{raw[16:20]}-{raw[20:]}"


def validation(message: str) -> AwsError:
    """SageMaker's and Application Auto Scaling's ``ValidationException`` (HTTP 400)."""
    return AwsError("ValidationException", message)


def tags_to_dict(tags: Sequence[dict[str, str]] | None) -> dict[str, str]:
    """``[{"Key": k, "Value": v}]`` -> ``{k: v}``."""
    return {tag["Key"]: tag.get("Value", "") for tag in tags or []}


def dict_to_tags(tags: dict[str, str]) -> list[dict[str, str]]:
    """``{k: v}`` -> ``[{"Key": k, "Value": v}]``."""
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def paginate(
    items: list[Any],
    params: Params,
    *,
    default_max: int = 100,
    next_key: str = "NextToken",
    max_key: str = "MaxResults",
) -> tuple[list[Any], str | None]:
    """One page of ``items`` and the token of the next page (an index, opaque to callers).

    Raises:
        AwsError: ``ValidationException`` for a token this emulator did not issue.
    """
    token = params.get(next_key)
    start = 0
    if token:
        if not token.startswith("page-") or not token[5:].isdigit():
            raise validation(f"Invalid pagination token: {token}")
        start = int(token[5:])
    limit = int(params.get(max_key) or default_max)
    page = items[start : start + limit]
    following = start + limit
    return page, (f"page-{following}" if following < len(items) else None)


def sort_items(items: list[Any], key: Callable[[Any], Any], params: Params) -> list[Any]:
    """``items`` sorted by ``key``, descending when ``SortOrder`` is ``Descending``."""
    return sorted(items, key=key, reverse=params.get("SortOrder") == "Descending")


def sort_listing[T](items: list[T], keys: dict[str, Callable[[T], Any]], params: Params) -> list[T]:
    """A SageMaker ``List*`` answer's order: ``SortBy`` one of ``keys`` (default ``CreationTime``),
    ``SortOrder`` default ``Descending`` (SageMaker API reference, ListEndpoints/ListInferenceComponents)."""
    key = keys[params.get("SortBy") or "CreationTime"]
    return sorted(items, key=key, reverse=params.get("SortOrder", "Descending") == "Descending")


@dataclass
class RecordingSink:
    """An :class:`~localcloud.contracts.EventSink` that keeps every event it is given."""

    events: list[dict[str, Any]] = field(default_factory=list)

    def put_aws_event(
        self, *, source: str, detail_type: str, detail: dict[str, Any], resources: list[str], region: str
    ) -> None:
        """Record one event."""
        self.events.append(
            {
                "source": source,
                "detail-type": detail_type,
                "detail": detail,
                "resources": resources,
                "region": region,
            }
        )

    def of_type(self, detail_type: str) -> list[dict[str, Any]]:
        """The recorded events of one detail-type, oldest first."""
        return [event for event in self.events if event["detail-type"] == detail_type]
