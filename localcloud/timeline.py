"""What happened in a local cloud run, in virtual-time order: the story the CLI prints and tests read.

Entries are recorded as they happen (API requests and responses, events put on a bus, schedules fired,
executions started by a rule) with :meth:`Timeline.add`; entries that another component already keeps
(Lambda invocation records, Slack messages, faults fired) are read from it through :meth:`Timeline.add_feed`;
execution results are computed when the timeline is read (:meth:`Timeline.add_source`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class Kind:
    """Entry kinds (strings, so sources outside this module can add their own)."""

    API = "api"
    EVENT = "event"
    EXECUTION = "execution"
    LAMBDA = "lambda"
    SCHEDULE = "schedule"
    SLACK = "slack"
    FAULT = "fault"
    NOTE = "note"


@dataclass(frozen=True)
class TimelineEntry:
    """One line of the story: ``at`` (virtual time, tz-aware UTC), ``kind`` (see :class:`Kind`), ``text``.

    ``detail`` carries structured data for tests (a function name, an execution ARN...); ``seq`` orders
    entries recorded at the same instant.
    """

    at: datetime
    kind: str
    text: str
    detail: dict[str, Any] = field(default_factory=dict)
    seq: int = 0

    def render(self) -> str:
        """``2026-12-01T11:30:00Z  event      text`` (multi-line texts are indented under the first line)."""
        stamp = self.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        head, *rest = self.text.splitlines() or [""]
        lines = [f"{stamp}  {self.kind:<9}  {head}"]
        lines.extend(" " * 33 + line for line in rest)
        return "\n".join(lines)


class Timeline:
    """Thread-safe, append-only record of a run, merged with pulled sources when read.

    Ordering: by virtual time; at one instant (time stands still while code runs) by the order in which
    the timeline learnt of the entry. *Feeds* (append-only lists kept by another component, such as the
    Lambda runtime's invocation records) are synced at every :meth:`add` and read, so an invocation made
    while serving an API request lands between the request and the response. *Sources* are computed when
    the timeline is read (execution results) and sort after everything else at the same instant.
    """

    def __init__(self, now: Callable[[], datetime] | None = None) -> None:
        self._now = now or (lambda: datetime.now(UTC))
        self._lock = threading.RLock()
        self._entries: list[TimelineEntry] = []
        self._feeds: list[tuple[Callable[[int], Sequence[TimelineEntry]], list[int]]] = []
        self._sources: list[Callable[[], Iterable[TimelineEntry]]] = []
        self._seq = 0

    def add(self, kind: str, text: str, *, at: datetime | None = None, **detail: Any) -> TimelineEntry:
        """Record an entry at ``at`` (default: now, virtual); returns it."""
        with self._lock:
            self._sync()
            self._seq += 1
            entry = TimelineEntry(at or self._now(), kind, text, dict(detail), self._seq)
            self._entries.append(entry)
        return entry

    def add_feed(self, feed: Callable[[int], Sequence[TimelineEntry]]) -> None:
        """Register an append-only list of entries kept elsewhere, read incrementally: ``feed(start)``
        returns the entries from position ``start`` on (only those: each is built once, so the timeline's
        cost grows linearly with what it holds)."""
        with self._lock:
            self._feeds.append((feed, [0]))

    def add_source(self, source: Callable[[], Iterable[TimelineEntry]]) -> None:
        """Register a callable that yields entries when the timeline is read (e.g. execution results)."""
        with self._lock:
            self._sources.append(source)

    def _sync(self) -> None:
        for feed, seen in self._feeds:
            items = feed(seen[0])
            for item in items:
                self._seq += 1
                self._entries.append(
                    TimelineEntry(item.at, item.kind, item.text, dict(item.detail), self._seq)
                )
            seen[0] += len(items)

    def entries(self, *kinds: str) -> list[TimelineEntry]:
        """Every entry (or those of ``kinds``), sorted by time, then by the order learnt."""
        with self._lock:
            self._sync()
            # Ordered by the second shown, then by the order learnt: sub-second back-offs would otherwise
            # put an execution's end (whose time moto keeps in whole seconds) before what its last step did.
            merged = sorted(self._entries, key=lambda e: (_second(e.at), e.seq))
            computed: list[TimelineEntry] = []
            for source in self._sources:
                computed.extend(source())
        late = self._seq + 1
        combined = [(e.at, e.seq, e) for e in merged] + [(e.at, late + i, e) for i, e in enumerate(computed)]
        combined.sort(key=lambda item: (_second(item[0]), item[1]))
        return [e for _, _, e in combined if not kinds or e.kind in kinds]

    def recorded(self, *kinds: str) -> list[TimelineEntry]:
        """Entries recorded so far (added and fed), without the computed sources; unsorted."""
        with self._lock:
            self._sync()
            return [e for e in self._entries if not kinds or e.kind in kinds]

    def recorded_since(self, start: int) -> list[TimelineEntry]:
        """Entries recorded (added and fed) from position ``start`` on, in the order learnt (``serve``
        prints a growing timeline this way, without re-reading what it printed)."""
        with self._lock:
            self._sync()
            return self._entries[start:]

    def computed(self) -> list[TimelineEntry]:
        """The entries the sources compute now (execution starts and results)."""
        with self._lock:
            sources = list(self._sources)
        computed: list[TimelineEntry] = []
        for source in sources:
            computed.extend(source())
        return computed

    def render(self, *kinds: str) -> str:
        """The entries as text, one per line (multi-line entries indented)."""
        return "\n".join(entry.render() for entry in self.entries(*kinds))

    def __len__(self) -> int:
        return len(self.entries())


def _second(moment: datetime) -> datetime:
    """``moment`` without its fraction of a second (the precision the timeline shows)."""
    return moment.replace(microsecond=0)
