"""Serving a load on an endpoint: inference components with their scaling policies on (instance type,
count), minute by minute over a window (issue 33).

The model is the local cloud's (``localcloud/emulator``), which follows AWS's documented behaviour:

* **Instances.** Managed instance scaling: the variant runs as many instances as its copies need
  (:func:`~servingsim.packing.pack`), at least ``min_instances``, at most the reservation's count; copies
  that do not fit on those instances are not placed (they do not serve).
* **Target tracking** on ``SageMakerInferenceComponentInvocationsPerCopy`` (``Sum`` of invocations per
  placed copy over 60 s; no datapoint in a minute without invocations): ``AlarmHigh`` after 3 datapoints
  above the target, ``AlarmLow`` after 15 below 90% of it; the action follows the alarm by
  :attr:`Timings.reaction_minutes` and sets ``ceil(desired x metric / target)`` within [min, max] copies,
  never within the cooldowns (no scale-in during a scale-out cooldown); a missing datapoint is
  insufficient data (no scale-in, the run of datapoints starts again).
* **Scale to zero** (a model with ``copies_min == 0``, the application's own alarms, DESIGN.md section 4):
  no invocation for ``idle_minutes`` sets 0 copies; a request refused for no capacity (no copy placed)
  raises the ``no-capacity`` alarm at the end of its minute and sets 1 copy, target tracking's scale-in
  suspended until the alarm is ``OK`` again (a minute without refusals).
* **Copy changes** take effect after :attr:`Timings.scale_out_minutes` (out) or
  :attr:`Timings.scale_in_minutes` (in).
* **Refusals.** A request to a model with no copy placed is refused (SageMaker Runtime "no capacity");
  with ``requests_per_minute_per_copy`` (a copy's throughput: its concurrency x 60 / seconds per
  request), requests beyond ``placed copies x`` that in a minute are refused too (they are still
  invocations: target tracking sees them).

One-minute steps are CloudWatch's periods, the only instants an alarm changes: a 72-hour window is 4,320
steps whatever the request rate (requests are counted, never drawn one by one). Pure standard library; it
imports nothing of the application or of the local cloud (both import it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from servingsim.packing import Hardware, Requirements, pack

MINUTES_PER_HOUR = 60


@dataclass(frozen=True)
class Timings:
    """How long things take, in minutes (the local cloud's defaults, ``localcloud/emulator/market.py``)."""

    scale_out_minutes: int = 2
    scale_in_minutes: int = 1
    reaction_minutes: int = 1
    high_datapoints: int = 3
    low_datapoints: int = 15


@dataclass(frozen=True)
class ModelLoad:
    """One model (one inference component) and its traffic.

    Attributes:
        name: the model.
        requirements: what one copy needs.
        copies_initial, copies_min, copies_max: the component's copy counts (``copies_min`` 0: it may
            scale to zero).
        target_per_copy: target tracking's ``TargetValue`` (invocations per copy per minute).
        scale_out_cooldown_seconds, scale_in_cooldown_seconds: the policy's cooldowns.
        idle_minutes: minutes without invocations before 0 copies (models that may scale to zero).
        requests_per_minute: 24 rates, requests per minute in each UTC hour (index 0 = 00:00-00:59),
            repeated every day of the window.
        requests_per_minute_per_copy: the most requests one copy serves in a minute (None: unbounded, as
            the local cloud's endpoint).
    """

    name: str
    requirements: Requirements
    copies_initial: int
    copies_min: int
    copies_max: int
    requests_per_minute: Sequence[float]
    target_per_copy: float = 10.0
    scale_out_cooldown_seconds: int = 300
    scale_in_cooldown_seconds: int = 300
    idle_minutes: int = 15
    requests_per_minute_per_copy: float | None = None

    def __post_init__(self) -> None:
        if len(self.requests_per_minute) != 24:
            raise ValueError(f"{self.name}: give 24 hourly rates, not {len(self.requests_per_minute)}")
        if any(rate < 0 for rate in self.requests_per_minute):
            raise ValueError(f"{self.name}: rates are requests per minute, 0 or more")
        if not 0 <= self.copies_min <= self.copies_initial <= self.copies_max:
            raise ValueError(f"{self.name}: copies must satisfy 0 <= min <= initial <= max")


@dataclass
class ModelOutcome:
    """What one model's requests met: ``sent`` = ``served`` + ``rejected``; ``peak_copies`` the most
    copies placed at once; ``worst_hour_rejected_percent`` the largest share refused in one hour."""

    name: str
    sent: float = 0.0
    served: float = 0.0
    rejected: float = 0.0
    peak_copies: int = 0
    worst_hour_rejected_percent: float = 0.0

    @property
    def rejected_percent(self) -> float:
        """Share of requests refused over the window, percent (0 when nothing was sent)."""
        return 100.0 * self.rejected / self.sent if self.sent else 0.0


@dataclass
class Outcome:
    """The simulation of one candidate (``instances`` reserved) over ``hours``.

    Attributes:
        models: per model, in the order given.
        instance_hours_used: instance-hours the endpoint ran (its managed instance count over time).
        peak_instances: the most instances run at once.
        needed: per hour of the window, the most instances the copies wanted (uncapped by the
            reservation): the chart's "needed" line.
        running: per hour, the most instances run.
        hour_sent, hour_rejected: per hour, requests sent and refused (every model).
    """

    instances: int
    hours: int
    models: list[ModelOutcome]
    instance_hours_used: float = 0.0
    peak_instances: int = 0
    needed: list[int] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    hour_sent: list[float] = field(default_factory=list)
    hour_rejected: list[float] = field(default_factory=list)

    @property
    def peak_rejected_percent(self) -> float:
        """Share refused in the busiest hours (those with the most requests sent), percent."""
        top = max(self.hour_sent, default=0.0)
        if not top:
            return 0.0
        busiest = [i for i, sent in enumerate(self.hour_sent) if sent == top]
        return 100.0 * sum(self.hour_rejected[i] for i in busiest) / (top * len(busiest))

    @property
    def sent(self) -> float:
        """Requests sent over the window, every model."""
        return sum(item.sent for item in self.models)

    @property
    def rejected(self) -> float:
        """Requests refused over the window, every model."""
        return sum(item.rejected for item in self.models)

    @property
    def rejected_percent(self) -> float:
        """Share of all requests refused, percent."""
        return 100.0 * self.rejected / self.sent if self.sent else 0.0

    @property
    def worst_hour_rejected_percent(self) -> float:
        """The largest hourly share refused of any model, percent (the peak's figure)."""
        return max((item.worst_hour_rejected_percent for item in self.models), default=0.0)

    @property
    def reserved_instance_hours(self) -> float:
        """Instances reserved x hours."""
        return float(self.instances * self.hours)

    @property
    def idle_percent(self) -> float:
        """Share of the reserved instance-hours nothing ran on, percent."""
        reserved = self.reserved_instance_hours
        return 100.0 * (1 - self.instance_hours_used / reserved) if reserved else 0.0


@dataclass
class _State:
    """One component's moving parts (minutes since the window's start)."""

    desired: int
    effective: int
    pending: list[tuple[int, int]] = field(default_factory=list)
    high_run: int = 0
    low_run: int = 0
    idle_run: int = 0
    last_out: int = -(10**9)
    last_in: int = -(10**9)
    suspended: bool = False


def _change(state: _State, at: int, to: int, minutes: int) -> None:
    state.desired = to
    state.pending.append((at + minutes, to))


def simulate(
    hardware: Hardware,
    instances: int,
    models: Sequence[ModelLoad],
    *,
    start: datetime,
    hours: int,
    min_instances: int = 1,
    timings: Timings | None = None,
) -> Outcome:
    """Serve ``models``' traffic on at most ``instances`` instances of ``hardware`` for ``hours`` from
    ``start`` (UTC; the profile's hour of day is read at each minute), starting with each component at
    ``copies_initial`` copies in service.

    Raises:
        ValueError: ``instances`` < 1, ``hours`` < 1, or no model.
    """
    if instances < 1 or hours < 1 or not models:
        raise ValueError("simulate needs at least one instance, one hour and one model")
    timings = timings or Timings()
    states = [_State(desired=m.copies_initial, effective=m.copies_initial) for m in models]
    outcomes = [ModelOutcome(m.name) for m in models]
    hourly = [[0.0, 0.0] for _ in models]  # sent, rejected in the current hour
    result = Outcome(instances=instances, hours=hours, models=outcomes)
    first_hour = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    offset = int((start.astimezone(UTC) - first_hour) / timedelta(minutes=1))
    day_minute = first_hour.hour * MINUTES_PER_HOUR + offset  # the window's start, minutes since 00:00 UTC
    packed: dict[tuple[int, ...], tuple[int, int, tuple[int, ...]]] = {}
    used_minutes = 0
    hour_needed = hour_running = 0
    for minute in range(hours * MINUTES_PER_HOUR):
        for state in states:
            if state.pending:
                done = [item for item in state.pending if item[0] <= minute]
                if done:
                    state.effective = done[-1][1]
                    state.pending = [item for item in state.pending if item[0] > minute]
        key = tuple(state.effective for state in states)
        if key not in packed:  # copies change rarely: pack each combination once
            demands = [(m.name, m.requirements, count) for m, count in zip(models, key, strict=True)]
            needed, _ = pack(hardware, demands, None)
            running = max(min_instances, min(instances, needed))
            _, where = pack(hardware, demands, running)
            packed[key] = (needed, running, tuple(where[m.name] for m in models))
        needed, running, placed_counts = packed[key]
        used_minutes += running
        hour_needed, hour_running = max(hour_needed, needed), max(hour_running, running)
        result.peak_instances = max(result.peak_instances, running)
        hour_of_day = (day_minute + minute) // MINUTES_PER_HOUR % 24
        for index, (load, state) in enumerate(zip(models, states, strict=True)):
            rejected = _serve(
                load,
                state,
                outcomes[index],
                minute,
                hour_of_day=hour_of_day,
                placed=placed_counts[index],
                timings=timings,
            )
            hourly[index][0] += float(load.requests_per_minute[hour_of_day])
            hourly[index][1] += rejected
        if (offset + minute + 1) % MINUTES_PER_HOUR == 0 or minute == hours * MINUTES_PER_HOUR - 1:
            result.needed.append(hour_needed)
            result.running.append(hour_running)
            result.hour_sent.append(sum(sent for sent, _ in hourly))
            result.hour_rejected.append(sum(rejected for _, rejected in hourly))
            hour_needed = hour_running = 0
            for index, (sent, rejected) in enumerate(hourly):
                if sent:
                    share = 100.0 * rejected / sent
                    outcomes[index].worst_hour_rejected_percent = max(
                        outcomes[index].worst_hour_rejected_percent, share
                    )
                hourly[index] = [0.0, 0.0]
    result.instance_hours_used = used_minutes / MINUTES_PER_HOUR
    return result


def _serve(
    load: ModelLoad,
    state: _State,
    outcome: ModelOutcome,
    minute: int,
    *,
    hour_of_day: int,
    placed: int,
    timings: Timings,
) -> float:
    """One model's requests of ``minute`` on its ``placed`` copies, then its alarms; returns the refused."""
    outcome.peak_copies = max(outcome.peak_copies, placed)
    rate = float(load.requests_per_minute[hour_of_day])
    served = 0.0 if placed == 0 else rate
    if placed and load.requests_per_minute_per_copy is not None:
        served = min(rate, placed * load.requests_per_minute_per_copy)
    outcome.sent += rate
    outcome.served += served
    outcome.rejected += rate - served
    _evaluate(
        load,
        state,
        minute,
        invocations=rate if placed else 0.0,
        placed=placed,
        refused_no_copy=rate > 0 and not placed,
        timings=timings,
    )
    return rate - served


def _evaluate(
    load: ModelLoad,
    state: _State,
    minute: int,
    *,
    invocations: float,
    placed: int,
    refused_no_copy: bool,
    timings: Timings,
) -> None:
    """The alarms at the end of ``minute`` (its datapoints) and the actions they take a minute later."""
    act = minute + timings.reaction_minutes
    # Every request that reached a copy is an invocation, served or refused for the copy's concurrency.
    metric = invocations / placed if invocations and placed else None  # no invocations: no datapoint
    target = load.target_per_copy
    state.high_run = state.high_run + 1 if metric is not None and metric > target else 0
    state.low_run = state.low_run + 1 if metric is not None and metric < 0.9 * target else 0
    state.idle_run = 0 if invocations else state.idle_run + 1
    out_cooled = act >= state.last_out + load.scale_out_cooldown_seconds // 60
    in_cooled = act >= state.last_in + load.scale_in_cooldown_seconds // 60
    if metric is not None and state.high_run >= timings.high_datapoints and out_cooled:
        wanted = min(load.copies_max, max(load.copies_min, math.ceil(state.desired * metric / target)))
        if wanted > state.desired:
            _change(state, act, wanted, timings.scale_out_minutes)
            state.last_out = act
    elif (
        metric is not None
        and state.low_run >= timings.low_datapoints
        and not state.suspended
        and out_cooled
        and in_cooled
    ):
        wanted = min(load.copies_max, max(load.copies_min, 1, math.ceil(state.desired * metric / target)))
        if wanted < state.desired:
            _change(state, act, wanted, timings.scale_in_minutes)
            state.last_in = act
    if load.copies_min == 0:
        if refused_no_copy and state.desired == 0:
            _change(state, act, 1, timings.scale_out_minutes)  # the no-capacity alarm
            state.suspended = True
        elif placed:
            state.suspended = False  # the no-capacity alarm is OK again
        if state.idle_run >= load.idle_minutes and state.desired > 0 and not state.suspended:
            _change(state, act, 0, timings.scale_in_minutes)  # the idle alarm
            state.idle_run = 0
