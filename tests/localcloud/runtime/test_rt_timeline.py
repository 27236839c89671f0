"""The timeline's feeds are read incrementally: each fed entry is built once, however long the run."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from localcloud.timeline import Kind, Timeline, TimelineEntry

START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_each_fed_entry_is_built_once_and_kept_in_order() -> None:
    records: list[int] = []
    built: list[int] = []

    def feed(start: int) -> Sequence[TimelineEntry]:
        fresh = [
            TimelineEntry(START + timedelta(seconds=r), Kind.LAMBDA, f"fn {r} -> ok") for r in records[start:]
        ]
        built.extend(records[start:])
        return fresh

    timeline = Timeline(now=lambda: START + timedelta(seconds=len(records)))
    timeline.add_feed(feed)
    for r in range(200):
        records.append(r)
        timeline.add(Kind.API, f"GET /{r}")

    assert built == list(range(200))  # 200 entries built, not 200 x 201 / 2
    lambdas = [e.text for e in timeline.entries(Kind.LAMBDA)]
    assert lambdas == [f"fn {r} -> ok" for r in range(200)]
    assert [e.text for e in timeline.recorded_since(398)] == ["fn 199 -> ok", "GET /199"]
