"""The virtual clock on its own: sleeping threads, tickers, quiescence, time seen by every thread."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from localcloud.clock import (
    DEFAULT_STALL_SECONDS,
    STALL_SECONDS_ENV,
    ClockStuckError,
    VirtualClock,
    default_stall_seconds,
)
from localcloud.contracts import Due

START = datetime(2026, 1, 5, 6, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> Iterator[VirtualClock]:
    virtual = VirtualClock(START)
    virtual.start()
    try:
        yield virtual
    finally:
        virtual.stop()


def _spawn(target: Callable[[], None], name: str) -> threading.Thread:
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


class DailyAt:
    """A cron(0 h * * ? *)-like ticker: fires every day at ``hour``:00 UTC."""

    def __init__(self, hour: int, *, foreground: bool) -> None:
        self.hour = hour
        self.foreground = foreground
        self.fired: list[datetime] = []
        self._last: datetime | None = None

    def _next_after(self, now: datetime) -> datetime:
        candidate = now.replace(hour=self.hour, minute=0, second=0, microsecond=0)
        return candidate if candidate > now else candidate + timedelta(days=1)

    def next_due(self, now: datetime) -> Due | None:
        return Due(self._next_after(now), self.foreground)

    def advance(self, now: datetime) -> None:
        if now.hour == self.hour and now.minute == 0 and now.second == 0 and self._last != now:
            self._last = now
            self.fired.append(now)


class OneShot:
    """Foreground work at one instant (an at() schedule)."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.fired: list[datetime] = []

    def next_due(self, now: datetime) -> Due | None:
        return Due(self.at, True) if not self.fired and self.at > now else None

    def advance(self, now: datetime) -> None:
        if not self.fired and now >= self.at:
            self.fired.append(now)


def test_every_thread_sees_the_virtual_time(clock: VirtualClock) -> None:
    seen: list[datetime] = []
    thread = _spawn(lambda: seen.append(datetime.now(UTC)), "reader")
    thread.join()

    assert seen == [START]
    assert datetime.now(UTC) == START
    assert time.time() == START.timestamp()
    assert clock.now() == START


def test_sleeping_threads_wake_at_their_instants_in_order(clock: VirtualClock) -> None:
    # Given three threads sleeping 2 h, 30 min and 2 h, registered in that order
    woke: list[tuple[str, datetime]] = []
    lock = threading.Lock()

    def sleeper(name: str, seconds: float) -> Callable[[], None]:
        def run() -> None:
            clock.sleep(seconds)
            with lock:
                woke.append((name, datetime.now(UTC)))

        return run

    for name, seconds in (("a", 7200), ("b", 1800), ("c", 7200)):
        _spawn(sleeper(name, seconds), name)
        clock.run(until=clock.now())  # settle: the thread is parked before the next one starts

    # When
    result = clock.run_until_idle()

    # Then each woke at its instant; a before c at the same instant (registration order)
    assert woke == [
        ("b", START + timedelta(minutes=30)),
        ("a", START + timedelta(hours=2)),
        ("c", START + timedelta(hours=2)),
    ]
    assert result.reason == "idle"
    assert result.now == START + timedelta(hours=2)


def test_run_until_moves_the_clock_to_that_instant(clock: VirtualClock) -> None:
    result = clock.run(until=START + timedelta(days=3))

    assert result.reason == "until"
    assert clock.now() == START + timedelta(days=3)
    assert datetime.now(UTC) == START + timedelta(days=3)


def test_background_ticker_does_not_keep_an_idle_run_going(clock: VirtualClock) -> None:
    daily = DailyAt(7, foreground=False)
    clock.add_ticker(daily)

    result = clock.run_until_idle()

    assert result.reason == "idle"
    assert daily.fired == []
    assert clock.now() == START


def test_background_ticker_fires_at_each_instant_up_to_until(clock: VirtualClock) -> None:
    # Given a daily 07:00 ticker, starting Monday 06:00
    daily = DailyAt(7, foreground=False)
    clock.add_ticker(daily)

    # When three days pass
    clock.run(until=START + timedelta(days=3))

    # Then it fired at 07:00 on each of the three days
    assert daily.fired == [START + timedelta(hours=1, days=d) for d in range(3)]


def test_foreground_ticker_keeps_the_run_going_and_background_work_before_it_is_done(
    clock: VirtualClock,
) -> None:
    daily = DailyAt(7, foreground=False)
    once = OneShot(START + timedelta(days=2, hours=12))
    clock.add_ticker(daily)
    clock.add_ticker(once)

    result = clock.run_until_idle()

    assert once.fired == [START + timedelta(days=2, hours=12)]
    assert daily.fired == [START + timedelta(hours=1, days=d) for d in range(3)]
    assert result.now == START + timedelta(days=2, hours=12)
    assert result.steps == 4


class HourlyWithHorizon:
    """A bounded ticker (``next_due_before``): background work every hour; remembers the horizons it was
    given and answers None past them, as a costly look-ahead may."""

    def __init__(self) -> None:
        self.horizons: list[datetime | None] = []
        self.fired: list[datetime] = []

    def _next(self, now: datetime) -> datetime:
        return now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)

    def next_due(self, now: datetime) -> Due | None:
        self.horizons.append(None)
        return Due(self._next(now), False)

    def next_due_before(self, now: datetime, horizon: datetime) -> Due | None:
        self.horizons.append(horizon)
        return Due(self._next(now), False) if self._next(now) <= horizon else None

    def advance(self, now: datetime) -> None:
        if now.minute == 0 and now.second == 0 and (not self.fired or self.fired[-1] != now):
            self.fired.append(now)


def test_a_bounded_ticker_is_asked_last_with_the_earliest_instant_already_due(clock: VirtualClock) -> None:
    # Given an hourly bounded ticker registered before a one-shot due 2.5 hours after the start
    hourly = HourlyWithHorizon()
    once = OneShot(START + timedelta(hours=2, minutes=30))
    clock.add_ticker(hourly)
    clock.add_ticker(once)

    result = clock.run_until_idle()

    # Then it still fires at every hour before the one-shot (None past the horizon hides nothing: the clock
    # steps to the horizon and asks again), and its first horizon was the one-shot's instant
    assert hourly.fired == [START + timedelta(hours=1), START + timedelta(hours=2)]
    assert hourly.horizons[0] == START + timedelta(hours=2, minutes=30)
    assert once.fired == [START + timedelta(hours=2, minutes=30)]
    assert result.reason == "idle"


def test_a_bounded_ticker_alone_is_asked_without_a_horizon(clock: VirtualClock) -> None:
    hourly = HourlyWithHorizon()
    clock.add_ticker(hourly)

    clock.run(until=START + timedelta(hours=3))

    assert hourly.fired == [START + timedelta(hours=h) for h in (1, 2, 3)]
    assert None in hourly.horizons


def test_wait_event_returns_true_when_set_before_the_timeout(clock: VirtualClock) -> None:
    event = threading.Event()
    outcome: list[tuple[bool, datetime]] = []

    def waiter() -> None:
        outcome.append((clock.wait_event(event, 3600), datetime.now(UTC)))

    def setter() -> None:
        clock.sleep(600)
        event.set()

    _spawn(waiter, "waiter")
    _spawn(setter, "setter")
    clock.run_until_idle()

    assert outcome == [(True, START + timedelta(minutes=10))]


def test_wait_event_times_out_in_virtual_time(clock: VirtualClock) -> None:
    event = threading.Event()
    outcome: list[tuple[bool, datetime]] = []
    _spawn(lambda: outcome.append((clock.wait_event(event, 3600), datetime.now(UTC))), "waiter")

    clock.run_until_idle()

    assert outcome == [(False, START + timedelta(hours=1))]


def test_a_pulsed_event_wakes_its_waiter(clock: VirtualClock) -> None:
    # moto's interpreter signals state changes with set(); clear()
    event = threading.Event()
    outcome: list[bool] = []
    _spawn(lambda: outcome.append(clock.wait_event(event, None)), "waiter")
    clock.run_until_idle()

    event.set()
    event.clear()
    clock.run_until_idle()

    assert outcome == [True]


def test_stop_when_ends_the_run_at_a_quiescent_point(clock: VirtualClock) -> None:
    ticks: list[datetime] = []

    def ticker() -> None:
        for _ in range(10):
            clock.sleep(60)
            ticks.append(clock.now())

    _spawn(ticker, "ticker")
    result = clock.run(stop_when=lambda: len(ticks) >= 3)

    assert result.reason == "stop_when"
    assert result.now == START + timedelta(minutes=3)
    assert len(ticks) == 3


def test_sleep_in_the_owner_thread_drives_the_simulation(clock: VirtualClock) -> None:
    woke: list[datetime] = []

    def other() -> None:
        clock.sleep(30)
        woke.append(clock.now())

    _spawn(other, "other")
    clock.run_until_idle()

    clock.sleep(45)

    assert woke == [START + timedelta(seconds=30)]
    assert clock.now() == START + timedelta(seconds=30 + 45)


def test_a_busy_thread_makes_the_run_fail_with_a_diagnostic(clock: VirtualClock) -> None:
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            sum(range(1000))

    _spawn(spin, "busy-worker")
    try:
        with pytest.raises(ClockStuckError, match=r"busy-worker \(\d+\): RUNNING") as raised:
            clock.run_until_idle(stall_seconds=0.3)
    finally:
        stop.set()
    # The failure names the hang detector's setting, so a person knows what to raise.
    assert "stall_seconds=0.3" in str(raised.value)
    assert "LOCALCLOUD_STALL_SECONDS" in str(raised.value)


def test_a_slow_run_that_progresses_is_never_cut_short(clock: VirtualClock) -> None:
    # Given a worker whose every step takes more real time (busy work) than the run's whole hang limit would
    # allow if it were a wall cap, and which sleeps one virtual minute between steps
    steps: list[datetime] = []

    def slow_worker() -> None:
        for _ in range(6):
            began = time.monotonic()
            while time.monotonic() - began < 0.5:
                sum(range(1000))
            steps.append(clock.now())
            clock.sleep(60)

    _spawn(slow_worker, "slow-worker")
    # When it runs with a hang limit of 2.5 s (the whole run takes about 3 s of real time; each step leaves
    # 2 s for a loaded machine to schedule the threads)
    result = clock.run_until_idle(stall_seconds=2.5)
    # Then it ends idle with every step done: progress (virtual time moving) resets the detector
    assert result.reason == "idle"
    assert steps == [START + timedelta(minutes=i) for i in range(6)]


def test_garbage_collection_pauses_are_not_counted_as_a_hang(clock: VirtualClock) -> None:
    # Given a heap large enough that each full collection takes a while, and a worker that, while virtual
    # time stands still, spends over twice the hang limit in the garbage collector (a full pass over a large
    # heap on a loaded machine stops every thread for seconds). Few, long passes: the real time between two
    # passes (handing the GIL to the driver and back, which a loaded machine can stretch) is no collection
    # and counts as time without progress, so many short passes would make the test depend on the load.
    ballast = [[None] for _ in range(1_500_000)]
    in_collector: list[float] = []
    limit = 0.5

    def collecting_worker() -> None:
        began = time.monotonic()
        while time.monotonic() - began < 3 * limit:
            start = time.monotonic()
            gc.collect()
            in_collector.append(time.monotonic() - start)
        assert ballast
        clock.sleep(60)

    _spawn(collecting_worker, "collecting-worker")
    # When it runs with a hang limit of 0.5 s
    result = clock.run_until_idle(stall_seconds=limit)
    # Then the run ends idle with the worker's sleep done: only time outside the collector can be a hang
    assert result.reason == "idle"
    assert result.now == START + timedelta(seconds=60)
    # and the collector did hold the worker past the limit (one pass or many, however loaded the machine)
    assert sum(in_collector) > 2 * limit


def test_a_collection_whose_finalizers_release_the_gil_is_not_counted_as_a_hang(clock: VirtualClock) -> None:
    # Given garbage whose finalizers block (a __del__ that waits releases the GIL, so the hang detector runs
    # in the middle of the collection), 0.8 s of them in one collection
    class Blocking:
        def __init__(self) -> None:
            self.cycle = self  # only the collector frees it

        def __del__(self) -> None:
            time.sleep(0.1)

    def collecting_worker() -> None:
        for _ in range(8):
            Blocking()
        gc.collect()
        clock.sleep(60)

    _spawn(collecting_worker, "collecting-worker")
    # When it runs with a hang limit of 0.3 s
    result = clock.run_until_idle(stall_seconds=0.3)
    # Then the collection under way counts as the collector's, not as a hang
    assert result.reason == "idle"
    assert result.now == START + timedelta(seconds=60)


def test_the_stall_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STALL_SECONDS_ENV, "42.5")
    assert default_stall_seconds() == 42.5
    monkeypatch.setenv(STALL_SECONDS_ENV, "soon")
    with pytest.raises(ValueError, match="LOCALCLOUD_STALL_SECONDS='soon': expected a positive number"):
        default_stall_seconds()
    monkeypatch.delenv(STALL_SECONDS_ENV)
    assert default_stall_seconds() == DEFAULT_STALL_SECONDS


def test_an_ignored_infrastructure_thread_does_not_block_the_run(clock: VirtualClock) -> None:
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            time.sleep(0.001)

    server = _spawn(serve, "http-server")
    clock.ignore_thread(server)
    try:
        assert clock.run(until=START + timedelta(hours=1)).reason == "until"
    finally:
        stop.set()


def test_stop_abandons_parked_threads_and_restores_real_time() -> None:
    # Given a thread parked for a day of virtual time
    virtual = VirtualClock(START)
    virtual.start()
    resumed = threading.Event()

    def parked() -> None:
        virtual.sleep(86400)
        resumed.set()

    _spawn(parked, "parked")
    virtual.run(until=START + timedelta(seconds=1))

    # When the clock stops
    virtual.stop()

    # Then the thread never resumes (a finished simulation must not run on), and time is real again
    assert not resumed.wait(0.2)
    assert not time_machine.escape_hatch.is_travelling()
    assert not virtual.started
