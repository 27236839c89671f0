"""UTC time helpers: one clock, one wire format.

Everything the application stores or returns is UTC. Step Functions ``Wait`` with ``TimestampPath`` wants
RFC 3339 with ``Z`` (``2026-12-10T11:30:00Z``, AWS Step Functions "Wait" state docs), so that is the format
of every timestamp a handler returns. The ledger keeps milliseconds so that its sort keys order events.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time, tz-aware UTC (follows time-machine's virtual clock in the local cloud)."""
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """``value`` converted to UTC.

    Raises:
        ValueError: ``value`` is naive (no time zone): a naive time is ambiguous, never guessed.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("naive datetime: a time zone is required")
    return value.astimezone(UTC)


def iso_z(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ`` (seconds precision, UTC): the format handlers return and ASL waits on."""
    return as_utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def iso_ms(value: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` (milliseconds, UTC): ledger timestamps and sort keys."""
    utc = as_utc(value)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_utc(text: str) -> datetime:
    """Parse an ISO-8601 timestamp with a zone (``Z`` or an offset) into tz-aware UTC.

    Raises:
        ValueError: not ISO-8601, or no time zone.
    """
    return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def hours_between(start: datetime, end: datetime) -> float:
    """Hours from ``start`` to ``end`` (negative if ``end`` is earlier)."""
    return (as_utc(end) - as_utc(start)).total_seconds() / 3600.0


def short(value: datetime) -> str:
    """``YYYY-MM-DD HH:MM`` UTC, for tables a person reads."""
    return as_utc(value).strftime("%Y-%m-%d %H:%M")
