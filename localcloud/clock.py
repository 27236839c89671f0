"""The local cloud's virtual clock: one simulated UTC time for handlers, moto and the AWS emulator.
Kept whole: the clock, its timers and its hang detector share one lock and one run loop.

Time is frozen with time-machine (``travel(start, tick=False)``): ``datetime.now()``, ``time.time()`` and
everything built on them return the virtual instant in every thread; ``time.monotonic`` stays real. The
clock moves only when :meth:`VirtualClock.run` advances it, as a discrete-event simulation:

- threads that need time to pass call :meth:`~VirtualClock.sleep`, :meth:`~VirtualClock.sleep_until` or
  :meth:`~VirtualClock.wait_event`; they register a wake-up and block;
- tickers (:class:`localcloud.contracts.Ticker`: schedules, alarms, AWS resource lifecycles) report when
  they next have work;
- when the simulation is *quiescent* (every thread other than the driver is blocked, and the activity
  counter did not move between samples a few milliseconds apart; threads parked in the clock are known
  at once, without sampling, and a thread parking notifies the driver), the clock jumps to the earliest due
  instant, runs the tickers, then wakes the sleepers due then, one at a time, in (time, registration)
  order, waiting for quiescence after each, so a run is reproducible.

A thread is *blocked* when it is parked in one of the clock's own calls (and its wake-up has not come), or
when its innermost Python frame is a standard-library wait that nobody has ended yet: a
``threading.Condition.wait`` (under ``Event.wait``, ``Semaphore.acquire``, ``queue.Queue``) whose waiter
lock no notify has released, a ``Thread.join`` of a live thread, an idle ``concurrent.futures`` worker.
A thread that is starting or ending (alive, but without a Python frame) keeps the simulation busy, and
so does a thread blocked on a plain C-level ``Lock.acquire`` (it looks busy, conservatively): the local
cloud's own locks are built on ``threading.Condition``.

Two more things happen at quiescent points, before time may move:

- *settle hooks* (:meth:`VirtualClock.add_settle_hook`) run and may make a parked thread runnable; the
  Lambda runtime grants its CPU this way, so which of several ready invocations runs next is decided when
  everything else is still, never by the operating system's thread scheduling;
- a thread with a *deadline* (:meth:`VirtualClock.deadline`: a Lambda invocation's timeout) never sleeps
  past it: its sleep or wait ends at the deadline with the deadline's exception, as Lambda stops a function
  at its timeout.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import Any, Literal, cast

import time_machine

from localcloud.contracts import BoundedTicker, Due, Ticker

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NS_PER_SECOND = 1_000_000_000

# Real-time sampling used to decide quiescence (seconds of wall time).
_SAMPLE_GAPS = (0.0005, 0.0015)
_BUSY_POLL = 0.0005

STALL_SECONDS_ENV = "LOCALCLOUD_STALL_SECONDS"
"""Environment variable overriding :data:`DEFAULT_STALL_SECONDS` (seconds of real time)."""
DEFAULT_STALL_SECONDS = 600.0
"""How long a run may make no progress (virtual time still, no sleeper woken, no invocation started or
ended) before the hang detector ends it: real seconds. A run that progresses is never cut short, however
slow the machine; 600 s is longer than any Lambda's 900 s timeout needs in real compute at this scale."""


def default_stall_seconds() -> float:
    """:data:`DEFAULT_STALL_SECONDS`, or ``LOCALCLOUD_STALL_SECONDS`` when set to a positive number.

    Raises:
        ValueError: the variable is set but is not a positive number.
    """
    text = os.environ.get(STALL_SECONDS_ENV, "").strip()
    if not text:
        return DEFAULT_STALL_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ValueError(f"{STALL_SECONDS_ENV}={text!r}: expected a positive number of seconds")
    return value


class _GcPauses:
    """Real seconds the garbage collector has spent in this process since import (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._began = 0.0
        gc.callbacks.append(self._observe)

    def _observe(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._began


_GC_PAUSES = _GcPauses()


RunReason = Literal["idle", "until", "stop_when"]


class ClockStuckError(RuntimeError):
    """The hang detector ended a run: nothing progressed for ``stall_seconds`` of real time (virtual time
    stood still, no sleeper was woken, no progress source moved).

    The message names the setting (``stall_seconds`` / ``LOCALCLOUD_STALL_SECONDS``) and lists every thread
    the clock watches and where it is (parked, blocked or running).
    """


@dataclass(frozen=True)
class RunProgress:
    """What a run's progress callback receives (about once a second of real time).

    Attributes:
        now: the virtual UTC instant.
        steps: instants the clock moved to in this run so far.
        wall_seconds: real seconds since the run began.
        still_seconds: real seconds since the last progress (what the hang detector measures).
        stall_seconds: the hang detector's limit.
    """

    now: datetime
    steps: int
    wall_seconds: float
    still_seconds: float
    stall_seconds: float


class _HangDetector:
    """Ends a run that makes no progress for ``stall_seconds`` of real time, and reports progress.

    Progress is any change of the clock's mark: the virtual instant, the count of sleepers woken, or a
    value of a progress source (:meth:`VirtualClock.add_progress_source`: invocations started and ended).
    The garbage collector's pauses do not count as time without progress: a full collection of a large
    heap stops every thread, for seconds on a loaded machine, and a slow machine is not a hang. A thread
    that computes without end (a busy loop, AWS calls without a wait) is one: it ends the run.
    """

    def __init__(
        self,
        clock: VirtualClock,
        stall_seconds: float,
        progress: Callable[[RunProgress], None] | None,
        interval: float = 1.0,
    ) -> None:
        self.clock = clock
        self.stall_seconds = stall_seconds
        self.progress = progress
        self.interval = interval
        self.began = time.monotonic()
        self.since = self.began
        self.mark = clock._progress_mark()
        self.gc_at_since = _GC_PAUSES.seconds
        self.reported = self.began
        self.steps = 0

    def _progressed(self, now: float) -> None:
        self.since, self.gc_at_since = now, _GC_PAUSES.seconds

    def check(self) -> None:
        """Raise :class:`ClockStuckError` after ``stall_seconds`` without progress; report progress."""
        now = time.monotonic()
        mark = self.clock._progress_mark()
        if mark != self.mark:
            self.mark = mark
            self._progressed(now)
        collecting = _GC_PAUSES.seconds - self.gc_at_since
        still = now - self.since - collecting
        if self.progress is not None and now - self.reported >= self.interval:
            self.reported = now
            self.progress(
                RunProgress(
                    now=self.clock.now(),
                    steps=self.steps,
                    wall_seconds=now - self.began,
                    still_seconds=still,
                    stall_seconds=self.stall_seconds,
                )
            )
        if still <= self.stall_seconds:
            return
        raise ClockStuckError(
            f"hang detector: no progress for {still:.0f} s of real time, garbage collection's "
            f"{collecting:.1f} s not counted (virtual time stood still at {self.clock.now().isoformat()}, "
            "no invocation started or ended); the limit is "
            f"stall_seconds={self.stall_seconds:g} ({STALL_SECONDS_ENV}, or --stall-seconds of "
            "python -m localcloud run); threads:\n" + self.clock.describe_threads()
        )


@dataclass(frozen=True)
class RunResult:
    """How a :meth:`VirtualClock.run` ended.

    Attributes:
        reason: ``"idle"`` (nothing sleeping, no foreground ticker work, nothing running), ``"until"``
            (the clock reached the ``until`` instant) or ``"stop_when"`` (the predicate became true).
        now: the virtual UTC instant at the end of the run.
        steps: how many distinct instants the clock moved to.
    """

    reason: RunReason
    now: datetime
    steps: int


@dataclass
class _EventHook:
    """Book-keeping for a ``threading.Event`` whose ``set`` notifies the clock (stored on the event): how
    often it was set, and the threads parked waiting for it (woken one by one, not the whole clock)."""

    generation: int = 0
    waiters: set[_Waiter] = field(default_factory=set)


@dataclass(eq=False)
class _Waiter:
    """A thread parked in the clock: until ``at_ns`` (if any) or until ``event`` is set or pulsed."""

    thread_ident: int
    thread_name: str
    at_ns: int | None
    seq: int
    event: threading.Event | None = None
    hook: _EventHook | None = None
    event_generation: int = 0
    fired: bool = False
    done: bool = False
    description: str = ""
    wake: threading.Condition | None = None
    """Notified when the waiter may have become runnable (on the clock's lock: each parked thread waits on
    its own condition, so a wake-up or a touch does not wake every parked thread to check)."""

    def runnable(self) -> bool:
        """True once the timer fired or the event was set or pulsed since the thread parked."""
        if self.fired:
            return True
        if self.event is not None and self.event.is_set():
            return True
        return self.hook is not None and self.hook.generation != self.event_generation


@dataclass(order=True)
class _Timer:
    """A wake-up; timers due at the same instant fire in the order of their threads' names, then of
    registration (thread names such as ``Thread-12`` or ``lambda-event-fn-3`` follow creation order, which
    is reproducible; the registration order of concurrent threads is not)."""

    at_ns: int
    thread_key: str
    seq: int
    waiter: _Waiter = field(compare=False)


def _thread_key(name: str) -> str:
    # Zero-pad numbers so that Thread-9 sorts before Thread-10.
    return re.sub(r"\d+", lambda match: match.group().zfill(12), name)


def _to_ns(at: datetime) -> int:
    if at.tzinfo is None:
        raise ValueError(f"naive datetime {at!r}: the virtual clock needs a timezone-aware UTC instant")
    delta = at - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _NS_PER_SECOND + delta.microseconds * 1_000


def _from_ns(ns: int) -> datetime:
    return _EPOCH + timedelta(microseconds=ns // 1_000)


def _frame_is_blocking(frame: FrameType) -> bool:
    """True if a thread whose innermost frame is ``frame`` waits for another thread, and still has to.

    Recognized: ``threading.Condition.wait`` (under ``Event.wait``, ``Semaphore.acquire``, ``queue.Queue``)
    whose waiter lock has not been released by a notify yet; ``Thread.join`` of a thread still alive; an
    idle ``concurrent.futures`` worker (CPython 3.13 sources). Checking the waiter lock, not only the
    frame, tells a thread that was notified but not yet scheduled (runnable) from one still waiting.
    """
    filename = frame.f_code.co_filename.replace("\\", "/")
    name = frame.f_code.co_name
    if filename.endswith("/threading.py"):
        local = frame.f_locals
        if name == "wait":
            waiter = local.get("waiter")
            return waiter is not None and local.get("gotit") is False and bool(waiter.locked())
        if name == "join":
            thread = local.get("self")
            return isinstance(thread, threading.Thread) and thread.is_alive()
        return False
    if filename.endswith("/concurrent/futures/thread.py") and name == "_worker":
        work_queue = frame.f_locals.get("work_queue")
        return work_queue is not None and bool(work_queue.empty())
    return False


class VirtualClock:
    """A virtual UTC clock driving a discrete-event simulation (see the module docstring).

    Args:
        start: the first virtual instant (timezone-aware; converted to UTC).

    Thread-safe. One clock per process: time-machine's patching is process-global.
    """

    def __init__(self, start: datetime) -> None:
        self._now_ns = _to_ns(start.astimezone(UTC))
        # The clock's lock. Drivers wait on _cv for activity; each parked thread waits on its own condition
        # over the same lock (_Waiter.wake).
        self._mutex = threading.RLock()
        self._cv = threading.Condition(self._mutex)
        self._seq = itertools.count()
        self._timers: list[_Timer] = []
        self._parked: dict[int, _Waiter] = {}
        self._tickers: list[tuple[int, Ticker]] = []
        self._advancing: set[int] = set()
        self._activity = 0
        self._ignored: set[int] = set()
        self._drivers: list[int] = []
        self._owner: int | None = None
        self._travel: Any = None
        self._traveller: Any = None
        self._started = False
        self._stopped = False
        self._abandoned: set[int] = set()
        self._hooks_lock = threading.Lock()
        self._park_hooks: list[tuple[Callable[[], None], Callable[[], None]]] = []
        self._settle_hooks: list[Callable[[], bool]] = []
        self._deadlines = threading.local()
        self._confirmed: tuple[int, tuple[tuple[int, int, int], ...]] | None = None
        self._woken = 0
        self._progress_sources: list[Callable[[], int]] = []

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        """Begin time travel: from now on every thread sees the virtual time.

        Threads alive at this point (other than the caller) are infrastructure and are ignored by the
        quiescence check. The calling thread becomes the clock's owner: its :meth:`sleep` calls drive
        the clock themselves when nobody else does.

        Raises:
            RuntimeError: the clock was already started.
        """
        if self._started:
            raise RuntimeError("the virtual clock is already started")
        self._travel = time_machine.travel(_from_ns(self._now_ns), tick=False)
        self._traveller = self._travel.start()
        me = threading.get_ident()
        self._owner = me
        # sys._current_frames() also lists raw _thread threads that threading.enumerate() does not know
        # (pytest-xdist's execnet receiver is one): they are infrastructure too.
        alive = {t.ident for t in threading.enumerate() if t.ident is not None} | set(sys._current_frames())
        self._ignored = alive - {me}
        self._started = True

    def stop(self) -> None:
        """End time travel. Threads parked in the clock are abandoned: they never resume.

        Waking them would let a finished simulation's executions run on in real time, against whatever
        cloud the process starts next (moto's mock is process-global). A simulation thread that was still
        running is abandoned at its next :meth:`sleep` or :meth:`wait_event` (:meth:`wait_for_threads` waits
        for that); for the owner and infrastructure threads these behave like ``time.sleep`` and
        ``threading.Event.wait`` from now on.
        """
        if not self._started:
            return
        with self._cv:
            self._started = False
            self._stopped = True
            # An abandoned thread keeps this clock alive for good; what the hooks reach (a whole cloud)
            # must not stay with it.
            self._tickers, self._park_hooks, self._settle_hooks, self._progress_sources = [], [], [], []
        if self._travel is not None:
            self._travel.stop()
        self._travel = None
        self._traveller = None

    @property
    def started(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._started

    def waits_for_a_driver(self) -> bool:
        """False when a thread from outside the simulation (:meth:`outside`) asks while nothing runs it: no
        driver is active and the caller does not own the clock (its waits would not drive it)."""
        if not getattr(self._deadlines, "outside", False):
            return True
        with self._cv:
            return bool(self._drivers) or threading.get_ident() == self._owner

    @contextmanager
    def outside(self) -> Iterator[None]:
        """Mark the calling thread as arriving from outside the simulation for the block (an HTTP request of
        ``serve``): what it asks of the simulation must not wait for a run that may not come."""
        previous = getattr(self._deadlines, "outside", False)
        self._deadlines.outside = True
        try:
            yield
        finally:
            self._deadlines.outside = previous

    # -- reading time ----------------------------------------------------------------------------------

    def now(self) -> datetime:
        """The current virtual instant (timezone-aware UTC, microsecond precision)."""
        return _from_ns(self._now_ns)

    # -- threads that wait -----------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of virtual time (no-op for ``seconds <= 0``).

        In the thread driving the clock (or in the owner thread while nobody drives), sleeping *is*
        advancing: it runs the simulation until the wake-up instant.
        """
        if seconds <= 0:
            self.touch()
            return
        if not self._started:
            self._abandon_if_simulated()
            time.sleep(seconds)
            return
        self.sleep_until(_from_ns(self._now_ns + round(seconds * 1_000_000) * 1_000))

    def sleep_until(self, at: datetime) -> None:
        """Block the calling thread until the virtual instant ``at`` (tz-aware); returns at once if past.

        Raises:
            BaseException: the calling thread's :meth:`deadline` exception, at the deadline, if ``at`` is
                not before it.
        """
        at_ns = _to_ns(at)
        if not self._started:
            self._abandon_if_simulated()
            # Not travelling: a plain sleep in real time.
            remaining = (at_ns - time.time_ns()) / _NS_PER_SECOND
            if remaining > 0:
                time.sleep(remaining)
            return
        limit = self._deadline()
        if limit is not None and at_ns >= limit[0]:
            at_ns = limit[0]
        if at_ns > self._now_ns:
            if self._drives_itself():
                self._call_park_hooks(parking=True)
                try:
                    self.run(until=_from_ns(at_ns))
                finally:
                    self._call_park_hooks(parking=False)
            else:
                self._park(at_ns=at_ns, event=None, description=f"sleep until {_from_ns(at_ns).isoformat()}")
        else:
            self.touch()
        if limit is not None and at_ns >= limit[0]:
            raise limit[1]()

    def wait_event(
        self, event: threading.Event, timeout_seconds: float | None, *, park_hooks: bool = True
    ) -> bool:
        """Block until ``event`` is set (or pulsed: ``set(); clear()``) or ``timeout_seconds`` (virtual) pass.

        In the driving thread this runs the simulation meanwhile; if the simulation goes idle before the
        event comes (nothing left that could set it), it returns False rather than wait forever.

        Args:
            event: what to wait for.
            timeout_seconds: virtual seconds; None waits without a time limit.
            park_hooks: False skips the park hooks (the Lambda runtime's own wait for its CPU).

        Returns:
            True if the event was set or pulsed, False on timeout (like ``threading.Event.wait``).

        Raises:
            BaseException: the calling thread's :meth:`deadline` exception, if the deadline comes first.
        """
        if event.is_set():
            return True
        if not self._started:
            self._abandon_if_simulated()
            # threading.Event.wait itself: ``event`` may be a clock-aware subclass that calls back here.
            return threading.Event.wait(event, timeout_seconds)
        at_ns = None if timeout_seconds is None else self._now_ns + round(timeout_seconds * 1_000_000) * 1_000
        limit = self._deadline() if park_hooks else None
        capped = limit is not None and (at_ns is None or at_ns >= limit[0])
        if limit is not None and capped:
            at_ns = limit[0]
        if at_ns is not None and at_ns <= self._now_ns:
            if event.is_set():
                return True
            if limit is not None and capped:
                raise limit[1]()
            return False
        if self._drives_itself():
            # The driver waits by running the simulation until the event fires or the timeout passes.
            hook = self._hook_event(event)
            generation = hook.generation
            if park_hooks:
                self._call_park_hooks(parking=True)
            try:
                self.run(
                    until=None if at_ns is None else _from_ns(at_ns),
                    stop_when=lambda: event.is_set() or hook.generation != generation,
                )
            finally:
                if park_hooks:
                    self._call_park_hooks(parking=False)
            woken = event.is_set() or hook.generation != generation
        else:
            woken = self._park(
                at_ns=at_ns, event=event, description="wait for an event", park_hooks=park_hooks
            )
        if not woken and limit is not None and capped:
            raise limit[1]()
        return woken

    @contextmanager
    def deadline(self, at: datetime, error: Callable[[], BaseException]) -> Iterator[None]:
        """Within the block, the calling thread never sleeps or waits (in the clock) past ``at``.

        A :meth:`sleep`, :meth:`sleep_until` or :meth:`wait_event` that would end at or after ``at`` ends
        at ``at`` and raises ``error()`` instead. Nested deadlines: the earliest wins.
        """
        stack: list[tuple[int, Callable[[], BaseException]]] | None = getattr(self._deadlines, "stack", None)
        if stack is None:
            stack = []
            self._deadlines.stack = stack
        stack.append((_to_ns(at), error))
        try:
            yield
        finally:
            stack.pop()

    def _deadline(self) -> tuple[int, Callable[[], BaseException]] | None:
        stack: list[tuple[int, Callable[[], BaseException]]] | None = getattr(self._deadlines, "stack", None)
        if not stack:
            return None
        return min(stack, key=lambda item: item[0])

    # -- tickers, activity, infrastructure -------------------------------------------------------------

    def add_ticker(self, ticker: Ticker) -> None:
        """Register a ticker; its ``advance(now)`` runs each time the clock reaches a new instant."""
        with self._cv:
            self._tickers.append((next(self._seq), ticker))
            self._activity += 1

    def remove_ticker(self, ticker: Ticker) -> None:
        """Unregister a ticker (no error if it was not registered)."""
        with self._cv:
            self._tickers = [(s, t) for s, t in self._tickers if t is not ticker]

    def touch(self) -> None:
        """Mark activity (a dispatch, an invocation, a delivery): the simulation is not quiescent yet."""
        with self._cv:
            self._activity += 1
            self._cv.notify_all()

    def ignore_thread(self, thread: threading.Thread | None = None) -> None:
        """Exclude an infrastructure thread (an HTTP server loop...) from the quiescence check.

        Args:
            thread: the thread; None for the calling thread.
        """
        ident = threading.get_ident() if thread is None else thread.ident
        if ident is not None:
            with self._cv:
                self._ignored.add(ident)

    def add_park_hooks(self, on_park: Callable[[], None], on_unpark: Callable[[], None]) -> None:
        """Call ``on_park`` in a thread just before it blocks in the clock and ``on_unpark`` after.

        The Lambda runtime uses this to let other invocations run while a handler sleeps.
        """
        self._park_hooks.append((on_park, on_unpark))

    def add_settle_hook(self, hook: Callable[[], bool]) -> None:
        """Call ``hook()`` from the driver at every quiescent point; True means it made a thread runnable.

        Hooks run until none makes progress, before :meth:`run` checks ``stop_when``, moves time or wakes the
        next sleeper: the Lambda runtime hands its CPU to one ready invocation this way.
        """
        self._settle_hooks.append(hook)

    # -- running the simulation ------------------------------------------------------------------------

    def run(
        self,
        *,
        until: datetime | None = None,
        stop_when: Callable[[], bool] | None = None,
        stall_seconds: float | None = None,
        progress: Callable[[RunProgress], None] | None = None,
    ) -> RunResult:
        """Advance the simulation from the calling (driver) thread.

        Args:
            until: stop when the next due instant is after this one; the clock then moves to ``until``.
                With ``until``, background ticker work (recurring schedules, alarm evaluation) up to that
                instant is done too.
            stop_when: checked at every quiescent point; the run stops when it returns True.
            stall_seconds: the hang detector: the run fails after this many real seconds without progress
                (see :class:`ClockStuckError`); however long a progressing run takes, it is never cut
                short. Default :func:`default_stall_seconds`.
            progress: called about once a second of real time with a :class:`RunProgress`.

        Returns:
            A :class:`RunResult`. Without ``until`` and ``stop_when`` the run ends ``"idle"``: no thread is
            sleeping on a timer, no foreground ticker work is due and nothing is running.

        Raises:
            RuntimeError: the clock is not started.
            ClockStuckError: the hang detector: no progress for ``stall_seconds`` of real time.
        """
        if not self._started:
            raise RuntimeError("the virtual clock is not started")
        until_ns = None if until is None else _to_ns(until)
        limit = default_stall_seconds() if stall_seconds is None else stall_seconds
        watch = _HangDetector(self, limit, progress)
        with self._driving():
            while True:
                watch.check()
                self._settle(watch)
                if stop_when is not None and stop_when():
                    return RunResult("stop_when", self.now(), watch.steps)
                next_ns = self._next_instant(include_background=until_ns is not None)
                if until_ns is not None and (next_ns is None or next_ns > until_ns):
                    if self._now_ns < until_ns:
                        self._step_to(until_ns, watch)
                        watch.steps += 1
                        continue
                    return RunResult("until", self.now(), watch.steps)
                if next_ns is None:
                    return RunResult("idle", self.now(), watch.steps)
                self._step_to(next_ns, watch)
                watch.steps += 1

    def run_until_idle(
        self, stall_seconds: float | None = None, progress: Callable[[RunProgress], None] | None = None
    ) -> RunResult:
        """:meth:`run` with neither ``until`` nor ``stop_when``."""
        return self.run(stall_seconds=stall_seconds, progress=progress)

    def add_progress_source(self, source: Callable[[], int]) -> None:
        """Count ``source()`` (a number that grows as the simulation works, such as invocations started
        and ended) as progress for the hang detector."""
        self._progress_sources.append(source)

    def _progress_mark(self) -> tuple[int, ...]:
        return (self._now_ns, self._woken, *(source() for source in self._progress_sources))

    def describe_threads(self) -> str:
        """Every watched thread and where it is (for diagnostics)."""
        frames = sys._current_frames()
        names = {t.ident: t.name for t in threading.enumerate()}
        with self._cv:
            parked = dict(self._parked)
            ignored = set(self._ignored)
            drivers = list(self._drivers)
        lines = [f"virtual now {self.now().isoformat()}, activity {self._activity}"]
        for ident, frame in sorted(frames.items()):
            name = names.get(ident, "?")
            if ident in ignored:
                continue
            if ident in drivers:
                lines.append(f"- {name} ({ident}): driver")
                continue
            waiter = parked.get(ident)
            if waiter is not None:
                state = "runnable" if waiter.runnable() else "parked"
                lines.append(f"- {name} ({ident}): {state} in the clock: {waiter.description}")
                continue
            state = "blocked" if _frame_is_blocking(frame) else "RUNNING"
            stack = "".join(traceback.format_stack(frame, limit=4)).rstrip()
            lines.append(f"- {name} ({ident}): {state}\n{stack}")
        return "\n".join(lines)

    def wait_for_threads(self, timeout_seconds: float, *, besides: set[int]) -> list[threading.Thread]:
        """After :meth:`stop`, wait (in real time) until no simulation thread runs any more.

        A thread is done when it ended, is abandoned in the clock, is infrastructure (:meth:`ignore_thread`)
        or waits for another thread (a lock, a queue); then nothing of the finished simulation can act on
        the next one. On a busy machine a handler may need many seconds to reach its next wait.

        Args:
            timeout_seconds: real seconds to wait at most.
            besides: idents of threads that are none of the simulation's business (alive before it).

        Returns:
            The threads still running at the deadline (empty when all are done).
        """
        me = threading.get_ident()
        deadline = time.monotonic() + timeout_seconds
        while True:
            frames = sys._current_frames()
            with self._cv:
                held = set(self._parked) | self._abandoned | self._ignored
            running = [
                thread
                for thread in threading.enumerate()
                if thread.ident not in besides
                and thread.ident != me
                and thread.ident not in held
                and thread.is_alive()
                and not (thread.ident in frames and _frame_is_blocking(frames[thread.ident]))
            ]
            remaining = deadline - time.monotonic()
            if not running or remaining <= 0:
                return running
            running[0].join(min(0.05, remaining))

    # -- internals -------------------------------------------------------------------------------------

    def _abandon_if_simulated(self) -> None:
        """After :meth:`stop`, block a simulation thread (not the owner, not infrastructure) forever."""
        me = threading.get_ident()
        if not self._stopped or me == self._owner or me in self._ignored:
            return
        never = threading.Condition(self._mutex)
        with never:
            self._abandoned.add(me)
            while True:
                never.wait()

    def _drives_itself(self) -> bool:
        me = threading.get_ident()
        with self._cv:
            if me in self._drivers:
                return True
            return not self._drivers and me == self._owner

    @contextmanager
    def _driving(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cv:
            self._drivers.append(me)
        try:
            yield
        finally:
            with self._cv:
                self._drivers.remove(me)

    def _call_park_hooks(self, *, parking: bool) -> None:
        hooks = self._park_hooks if parking else list(reversed(self._park_hooks))
        for on_park, on_unpark in hooks:
            (on_park if parking else on_unpark)()

    def _hook_event(self, event: threading.Event) -> _EventHook:
        """Make ``event.set()`` notify the clock (an instance-level wrapper, installed once per event)."""
        with self._hooks_lock:
            hook = getattr(event, "_localcloud_hook", None)
            if isinstance(hook, _EventHook):
                return hook
            new_hook = _EventHook()
            original_set = event.set
            clock = self

            def hooked_set() -> None:
                original_set()
                with clock._cv:
                    new_hook.generation += 1
                    clock._activity += 1
                    waiters = list(new_hook.waiters)
                    clock._cv.notify_all()
                for waiter in waiters:  # outside the clock's lock: a waiter may be parked in another clock
                    if waiter.wake is not None:
                        with waiter.wake:
                            waiter.wake.notify()

            event.set = hooked_set  # type: ignore[method-assign]
            event._localcloud_hook = new_hook  # type: ignore[attr-defined]
            return new_hook

    def _park(
        self, *, at_ns: int | None, event: threading.Event | None, description: str, park_hooks: bool = True
    ) -> bool:
        """Block the calling thread in the clock; True if woken by the event, False on timeout or stop."""
        hook = self._hook_event(event) if event is not None else None
        me = threading.current_thread()
        if park_hooks:
            self._call_park_hooks(parking=True)
        try:
            wake = threading.Condition(self._mutex)
            with self._cv:
                waiter = _Waiter(
                    thread_ident=me.ident or 0,
                    thread_name=me.name,
                    at_ns=at_ns,
                    seq=next(self._seq),
                    event=event,
                    hook=hook,
                    event_generation=hook.generation if hook is not None else 0,
                    description=description,
                    wake=wake,
                )
                if at_ns is not None:
                    heapq.heappush(self._timers, _Timer(at_ns, _thread_key(me.name), waiter.seq, waiter))
                if hook is not None:
                    hook.waiters.add(waiter)
                self._parked[waiter.thread_ident] = waiter
                self._activity += 1
                self._cv.notify_all()
                try:
                    while self._stopped or not waiter.runnable():  # stopped: abandoned, never resumes
                        wake.wait()
                finally:
                    waiter.done = True
                    if hook is not None:
                        hook.waiters.discard(waiter)
                    self._parked.pop(waiter.thread_ident, None)
                    self._activity += 1
        finally:
            if park_hooks:
                self._call_park_hooks(parking=False)
        if event is None:
            return False
        return event.is_set() or (hook is not None and hook.generation != waiter.event_generation)

    def _pop_stale_timers(self) -> None:
        """Drop timers of waiters that already left (woken by their event); caller holds ``_cv``."""
        while self._timers and (self._timers[0].waiter.done or self._timers[0].waiter.fired):
            heapq.heappop(self._timers)

    def _snapshot(self) -> tuple[int, tuple[tuple[int, int, int], ...]] | None:
        """A signature of the simulation if every watched thread is blocked, else None."""
        frames = sys._current_frames()
        for thread in threading.enumerate():
            # A thread still starting (no Python frame yet) or already ending is about to change things.
            if isinstance(thread, threading._DummyThread) or thread.ident in self._ignored:
                continue
            if thread.ident is None or (thread.ident not in frames and thread.is_alive()):
                return None
        with self._cv:
            activity = self._activity
            signature: list[tuple[int, int, int]] = []
            for ident, frame in frames.items():
                if ident in self._drivers or ident in self._ignored:
                    continue
                waiter = self._parked.get(ident)
                if waiter is not None:
                    if waiter.runnable():
                        return None
                    signature.append((ident, -1, waiter.seq))
                    continue
                if not _frame_is_blocking(frame):
                    return None
                signature.append((ident, id(frame.f_code), frame.f_lasti))
        return activity, tuple(sorted(signature))

    def _settle(self, watch: _HangDetector) -> None:
        """Wait for quiescence, then let the settle hooks make threads runnable until none does."""
        while True:
            self._await_quiescence(watch)
            if not any(hook() for hook in list(self._settle_hooks)):
                return

    def _await_quiescence(self, watch: _HangDetector) -> None:
        while True:
            first = self._snapshot()
            if first is not None:
                # Threads parked in the clock are known exactly; only frame-inferred waits need re-sampling.
                if first == self._confirmed or all(seq_or_code == -1 for _, seq_or_code, _ in first[1]):
                    self._confirmed = first
                    return
                stable = True
                for gap in _SAMPLE_GAPS:
                    time.sleep(gap)
                    if self._snapshot() != first:
                        stable = False
                        break
                if stable:
                    self._confirmed = first
                    return
            watch.check()
            with self._cv:
                self._cv.wait(_BUSY_POLL)

    def _next_instant(self, *, include_background: bool) -> int | None:
        now = self.now()
        with self._cv:
            self._pop_stale_timers()
            timer_ns = self._timers[0].at_ns if self._timers else None
            tickers = [t for _, t in self._tickers]
        candidates: list[int] = [] if timer_ns is None else [timer_ns]
        foreground = timer_ns is not None
        background: list[int] = []
        # Bounded tickers last: each may stop looking at the earliest instant found so far (the clock steps
        # there anyway, and asks again then).
        plain = [ticker for ticker in tickers if not hasattr(ticker, "next_due_before")]
        bounded = [cast(BoundedTicker, ticker) for ticker in tickers if hasattr(ticker, "next_due_before")]
        dues: list[Due | None] = [ticker.next_due(now) for ticker in plain]
        for ticker in bounded:
            known = candidates + background + [_to_ns(due.at) for due in dues if due is not None]
            dues.append(ticker.next_due_before(now, _from_ns(min(known))) if known else ticker.next_due(now))
        for due in dues:
            if due is None:
                continue
            # Contract: strictly after now; a late report is served one microsecond later.
            due_ns = max(_to_ns(due.at), self._now_ns + 1_000)
            if due.foreground:
                foreground = True
                candidates.append(due_ns)
            else:
                background.append(due_ns)
        if not foreground and not include_background:
            return None
        candidates.extend(background)
        return min(candidates) if candidates else None

    def _step_to(self, at_ns: int, watch: _HangDetector) -> None:
        """Move to ``at_ns``, run the tickers, then wake the sleepers due, one at a time."""
        if at_ns > self._now_ns:
            delta_us = (at_ns - self._now_ns) // 1_000
            if self._traveller is not None:
                self._traveller.shift(timedelta(microseconds=delta_us))
            with self._cv:
                self._now_ns += delta_us * 1_000
        now = self.now()
        with self._cv:
            tickers = list(self._tickers)
        for seq, ticker in tickers:
            if seq in self._advancing:
                continue  # a nested run (a ticker that sleeps) must not re-enter the same ticker
            self._advancing.add(seq)
            try:
                ticker.advance(now)
            finally:
                self._advancing.discard(seq)
        while True:
            with self._cv:
                self._pop_stale_timers()
                if not self._timers or self._timers[0].at_ns > self._now_ns:
                    return
                timer = heapq.heappop(self._timers)
                timer.waiter.fired = True
                if timer.waiter.wake is not None:
                    timer.waiter.wake.notify()
                self._activity += 1
                self._woken += 1
                self._cv.notify_all()
            self._settle(watch)
