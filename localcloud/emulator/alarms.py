"""CloudWatch alarm evaluation: the alarms the application creates with ``PutMetricAlarm`` live in moto's
backend (moto stores them but never evaluates them); this :class:`~localcloud.contracts.Ticker` evaluates
them against the datapoints in moto's backend, writes the new state into moto, and puts the
``CloudWatch Alarm State Change`` event AWS sends (source ``aws.cloudwatch``; detail ``alarmName``,
``state``, ``previousState``, ``configuration.metrics``: "Alarm events and EventBridge", CloudWatch user
guide).

Over 400 lines: one evaluator of CloudWatch's alarm semantics (periods, datapoints to alarm, missing data,
metric math), read whole.

Evaluation follows "Evaluating an alarm" and "How alarm state is evaluated when data is missing" of the
CloudWatch user guide:

* at each period boundary (multiples of ``Period`` since the epoch) the alarm looks at its *evaluation
  range*, the last ``EvaluationPeriods + 2`` complete periods (the guide's example: a 3-of-3 alarm
  retrieves the 5 most recent datapoints), and computes ``Statistic`` (Sum, Average, Minimum, Maximum,
  SampleCount) over the datapoints of each period that has any; a period without datapoints is *missing*
  (never zero), whether it lies before or after the alarm's creation;
* with at least ``EvaluationPeriods`` datapoints in the range, the most recent ``EvaluationPeriods`` of them
  are evaluated and ``TreatMissingData`` plays no part; with fewer, the missing ones are filled in, as few
  as possible, per ``TreatMissingData``: ``breaching`` / ``notBreaching`` count each fill as bad / good;
  ``missing`` goes ``INSUFFICIENT_DATA`` when the range has no datapoint; ``ignore`` keeps the state then;
* ``ALARM`` when at least ``DatapointsToAlarm`` (default ``EvaluationPeriods``) of the evaluated datapoints
  breach the threshold (``GreaterThanOrEqualToThreshold``, ``GreaterThanThreshold``, ``LessThanThreshold``,
  ``LessThanOrEqualToThreshold``), else ``OK``; except that with ``missing``/``ignore`` and too few
  datapoints, all of them breaching but fewer than ``DatapointsToAlarm``, ``ignore`` keeps the state and
  ``missing`` goes ``ALARM`` only if the oldest evaluated datapoint is a real breaching one (the data
  stopped after a breach), else ``INSUFFICIENT_DATA`` (the data is just starting): the guide's tables, row
  by row (tests/localcloud/emulator/test_em_alarms_missing.py);
* a new alarm starts in ``INSUFFICIENT_DATA`` (moto says ``OK``; the evaluator corrects it silently, as
  AWS sends no state-change event for creation).

Not evaluated (left as moto stores them): composite alarms, metric-math expressions, percentile
(``ExtendedStatistic``) and anomaly-detection alarms.

Idle cost: :meth:`AlarmEvaluator.next_due` returns only instants at which some alarm's state would change:
an alarm's result can only change at a boundary while a period holding data is inside its evaluation range
(or just left it), so the evaluator checks those boundaries (and the next one) and returns the first that
changes a state, or None. Weeks without datapoints cost no steps. The work is background: it does not
keep a run going. It is a bounded ticker (:class:`~localcloud.contracts.BoundedTicker`): the clock asks it
last, with the earliest instant something else is due, and it looks no further (a busy metric makes every
boundary a candidate, and the clock steps there and asks again anyway); the evaluation made while looking
ahead is reused when the clock reaches that boundary, if no datapoint before it was added since.

A state set from outside (``SetAlarmState``) gets its event too (foreground work: it follows from a call),
and the alarm's actions run; the next evaluation corrects it, as on AWS.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from localcloud.contracts import Due
from localcloud.emulator import cloudwatch
from localcloud.emulator.cloudwatch import Datapoint, MetricIndex
from localcloud.emulator.common import Context, as_utc, iso_millis

STATISTICS = frozenset({"Sum", "Average", "Minimum", "Maximum", "SampleCount"})
_COMPARISONS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "GreaterThanOrEqualToThreshold": (
        lambda value, threshold: value >= threshold,
        "greater than or equal to",
    ),
    "GreaterThanThreshold": (lambda value, threshold: value > threshold, "greater than"),
    "LessThanThreshold": (lambda value, threshold: value < threshold, "less than"),
    "LessThanOrEqualToThreshold": (lambda value, threshold: value <= threshold, "less than or equal to"),
}
_INITIAL_REASON = "Unchecked: Initial alarm creation"
LOOKBACK_PERIODS = 2
"""Periods the evaluation range holds beyond ``EvaluationPeriods`` (the user guide's example: 5 datapoints
retrieved for a 3-of-3 alarm; the exact number on AWS depends on the period and resolution)."""


@dataclass(frozen=True)
class AlarmSpec:
    """What an evaluable alarm watches and how it decides."""

    name: str
    namespace: str
    metric_name: str
    dimensions: dict[str, str]
    statistic: str
    period: int
    evaluation_periods: int
    datapoints_to_alarm: int
    threshold: float
    comparison: str
    treat_missing: str
    metric_id: str

    def breaches(self, value: float) -> bool:
        """True if ``value`` crosses the threshold."""
        return _COMPARISONS[self.comparison][0](value, self.threshold)


def spec_of(alarm: Any) -> AlarmSpec | None:
    """The evaluable description of a moto ``Alarm``, or None if the emulator does not evaluate it."""
    if getattr(alarm, "rule", None) is not None or alarm.extended_statistic:
        return None
    if alarm.comparison_operator not in _COMPARISONS:
        return None
    queries = list(alarm.metric_data_queries or [])
    if queries:
        stats = [query for query in queries if query.metric_stat is not None]
        if len(stats) != 1 or any(query.expression for query in queries):
            return None
        stat = stats[0].metric_stat
        namespace, metric_name = stat.metric.namespace, stat.metric.metric_name
        dimensions = {dimension.name: dimension.value for dimension in stat.metric.dimensions}
        statistic, period, metric_id = stat.stat, int(float(stat.period)), stats[0].id or "m1"
    else:
        namespace, metric_name = alarm.namespace, alarm.metric_name
        dimensions = {dimension.name: dimension.value for dimension in alarm.dimensions}
        statistic, period, metric_id = alarm.statistic, int(float(alarm.period or 60)), "m1"
    if statistic not in STATISTICS or not namespace or not metric_name or period <= 0:
        return None
    evaluation_periods = int(alarm.evaluation_periods or 1)
    return AlarmSpec(
        name=alarm.name,
        namespace=namespace,
        metric_name=metric_name,
        dimensions=dimensions,
        statistic=statistic,
        period=period,
        evaluation_periods=evaluation_periods,
        datapoints_to_alarm=int(alarm.datapoints_to_alarm or evaluation_periods),
        threshold=float(alarm.threshold),
        comparison=alarm.comparison_operator,
        treat_missing=alarm.treat_missing_data or "missing",
        metric_id=metric_id,
    )


def statistic(points: list[Datapoint], name: str) -> float:
    """One CloudWatch statistic over datapoints (at least one)."""
    if name == "Minimum":
        return min(point.minimum for point in points)
    if name == "Maximum":
        return max(point.maximum for point in points)
    samples = sum(point.sample_count for point in points)
    if name == "SampleCount":
        return samples
    total = sum(point.total for point in points)
    if name == "Sum":
        return total
    return total / samples if samples else 0.0


def _at(point: Datapoint) -> datetime:
    return point.at


def _boundary(moment: datetime, period: int) -> datetime:
    """The last period boundary at or before ``moment``."""
    seconds = math.floor(moment.timestamp())
    return datetime.fromtimestamp(seconds - seconds % period, UTC)


@dataclass(frozen=True)
class Evaluation:
    """The outcome of evaluating an alarm at a boundary.

    ``state`` is None when nothing decides (``ignore`` with too few datapoints): the state stays.
    ``periods`` holds (period start, value or None, sample count) of the evaluation range, oldest first;
    ``evaluated`` the real datapoints evaluated (the most recent ``EvaluationPeriods`` at most), oldest first.
    """

    state: str | None
    periods: list[tuple[datetime, float | None, float]]
    reason: str
    reason_data: str
    evaluated: list[tuple[datetime, float, float]]

    def present(self) -> list[float]:
        """The values of the real datapoints evaluated, oldest first (what a scaling policy acts on)."""
        return [value for _start, value, _count in self.evaluated]


def _decide(
    spec: AlarmSpec, evaluated: list[tuple[datetime, float, float]], fills: list[datetime]
) -> str | None:
    """The state from the evaluated real datapoints and the periods filled in (None: keep the state)."""
    breaching = sum(1 for _start, value, _count in evaluated if spec.breaches(value))
    missing = spec.treat_missing
    if not fills or missing == "notBreaching":
        return "ALARM" if breaching >= spec.datapoints_to_alarm else "OK"
    if missing == "breaching":
        return "ALARM" if breaching + len(fills) >= spec.datapoints_to_alarm else "OK"
    # ``missing`` and ``ignore``: fills are neither good nor bad.
    if not evaluated:
        return None if missing == "ignore" else "INSUFFICIENT_DATA"
    if breaching >= spec.datapoints_to_alarm or breaching < len(evaluated):
        return "ALARM" if breaching >= spec.datapoints_to_alarm else "OK"
    # Every real datapoint breaches, too few to alarm: ``ignore`` keeps the state; ``missing`` goes ALARM
    # when the oldest evaluated datapoint is real (older than every fill: the data stopped after a breach),
    # INSUFFICIENT_DATA when the data is just starting.
    if missing == "ignore":
        return None
    return "ALARM" if evaluated[0][0] < min(fills) else "INSUFFICIENT_DATA"


Period = tuple[datetime, float | None, float]
"""One period of an evaluation range: (start, the statistic or None when it holds no datapoint, sample
count)."""


def _period(spec: AlarmSpec, inside: list[Datapoint], start: datetime) -> Period:
    value = statistic(inside, spec.statistic) if inside else None
    return start, value, sum(point.sample_count for point in inside)


def evaluation_range(spec: AlarmSpec, points: list[Datapoint], at: datetime) -> list[Period]:
    """The evaluation range at the boundary ``at``: the last ``EvaluationPeriods + 2`` periods, oldest
    first (``points`` in time order)."""
    period = timedelta(seconds=spec.period)
    span = spec.evaluation_periods + LOOKBACK_PERIODS
    periods: list[Period] = []
    # One search for the range's first point, then a walk.
    index = bisect_left(points, at - span * period, key=_at)
    for back in range(span, 0, -1):
        start = at - back * period
        end = start + period
        stop = index
        while stop < len(points) and points[stop].at < end:
            stop += 1
        periods.append(_period(spec, points[index:stop], start))
        index = stop
    return periods


def slide(
    spec: AlarmSpec, points: list[Datapoint], previous: list[Period], previous_at: datetime, at: datetime
) -> list[Period] | None:
    """The evaluation range at ``at`` from the one at the boundary before (``previous``, at
    ``previous_at``): one period leaves, the one just ended comes in. None when ``previous_at`` is not the
    boundary before ``at``; the caller makes sure no datapoint before ``previous_at`` was added since."""
    if at - previous_at != timedelta(seconds=spec.period):
        return None
    inside = points[bisect_left(points, previous_at, key=_at) : bisect_left(points, at, key=_at)]
    return [*previous[1:], _period(spec, inside, previous_at)]


def evaluate(
    spec: AlarmSpec,
    points: list[Datapoint],
    at: datetime,
    *,
    explain: bool = True,
    periods: list[Period] | None = None,
) -> Evaluation:
    """Evaluate ``spec`` over ``points`` at the boundary ``at`` (see the module docstring).

    With ``explain`` False only the state is computed (``reason`` and ``reason_data`` are empty): what the
    evaluator needs at boundaries where nothing changes, which are most of them. ``periods``: the
    evaluation range at ``at`` when the caller has it (:func:`slide`), else computed from ``points``.
    """
    if periods is None:
        periods = evaluation_range(spec, points, at)
    real = [(start, value, count) for start, value, count in periods if value is not None]
    evaluated = real[-spec.evaluation_periods :]
    needed = spec.evaluation_periods - len(evaluated)
    # As few fills as possible, the most recent missing periods first.
    fills = [start for start, value, _count in periods if value is None][::-1][:needed] if needed > 0 else []
    state = _decide(spec, evaluated, fills)
    if not explain:
        return Evaluation(state, periods, "", "", evaluated)
    breaching = sum(1 for _start, value, _count in evaluated if spec.breaches(value))
    words = _COMPARISONS[spec.comparison][1]
    shown = ", ".join(
        f"{value} ({start.strftime('%d/%m/%y %H:%M:%S')})" for start, value, _count in reversed(evaluated)
    )
    if state in (None, "INSUFFICIENT_DATA"):
        reason = (
            f"Insufficient Data: {len(fills)} datapoint{'s' if len(fills) != 1 else ''} "
            f"{'were' if len(fills) != 1 else 'was'} unknown."
        )
    elif state == "ALARM":
        plural = "s" if spec.datapoints_to_alarm != 1 else ""
        reason = (
            f"Threshold Crossed: {breaching + (len(fills) if spec.treat_missing == 'breaching' else 0)} out "
            f"of the last {spec.evaluation_periods} datapoints [{shown}] was {words} the threshold "
            f"({spec.threshold}) (minimum {spec.datapoints_to_alarm} datapoint{plural} for OK -> ALARM "
            "transition)."
        )
    else:
        reason = (
            f"Threshold Crossed: {len(evaluated)} datapoint{'s' if len(evaluated) != 1 else ''} [{shown}] "
            f"was not {words} the threshold ({spec.threshold}) (minimum 1 datapoint for ALARM -> OK "
            "transition)."
        )
    reason_data = json.dumps(
        {
            "version": "1.0",
            "queryDate": iso_millis(at),
            "startDate": iso_millis(periods[0][0]),
            "statistic": spec.statistic,
            "period": spec.period,
            "recentDatapoints": [value for _start, value, _count in reversed(evaluated)],
            "threshold": spec.threshold,
            "evaluatedDatapoints": [
                {"timestamp": iso_millis(start), "sampleCount": count, "value": value}
                for start, value, count in reversed(evaluated)
            ],
        },
        separators=(",", ":"),
    )
    return Evaluation(state, periods, reason, reason_data, evaluated)


def candidate_boundaries(
    spec: AlarmSpec, points: list[Datapoint], after: datetime, until: datetime | None
) -> Iterator[datetime]:
    """Boundaries in ``(after, until]``, in time order, where the result can differ from the one before:
    every boundary while a period holding data is inside the evaluation range (which datapoints are
    evaluated and which periods are filled in shift with each one) or has just left it, plus the first
    boundary after ``after``. Lazy: a caller that stops at the first change pays for no more.

    A datapoint at ``t`` in the period starting at ``s`` makes the boundaries ``s + 1`` to ``s + span + 1``
    periods candidates, so a boundary ``b`` is one exactly when some datapoint lies in
    ``[b - (span + 1) periods, b)``: one search per boundary yielded (``points`` is in time order), and a
    boundary that is none jumps to the first boundary after the next datapoint. A busy metric costs
    O(log n) per boundary, not a walk over the range's datapoints at every step."""
    step = spec.period
    reach = timedelta(seconds=(spec.evaluation_periods + LOOKBACK_PERIODS + 1) * step)
    floor_after = math.floor(after.timestamp())
    moment = floor_after - floor_after % step + step
    last = None if until is None else math.floor(until.timestamp())
    if last is not None and moment > last:
        return
    yield datetime.fromtimestamp(moment, UTC)
    moment += step
    while last is None or moment <= last:
        boundary = datetime.fromtimestamp(moment, UTC)
        index = bisect_left(points, boundary - reach, key=_at)
        if index == len(points):
            return
        if points[index].at < boundary:
            yield boundary
            moment += step
            continue
        seconds = math.floor(points[index].at.timestamp())
        moment = seconds - seconds % step + step


def _snapshot(alarm: Any) -> dict[str, Any]:
    """An alarm's state as the ``state``/``previousState`` block of the event."""
    block: dict[str, Any] = {
        "value": alarm.state_value,
        "reason": alarm.state_reason,
        "timestamp": iso_millis(alarm.state_updated_timestamp),
    }
    if alarm.state_reason_data and alarm.state_reason_data != "{}":
        block["reasonData"] = alarm.state_reason_data
    return block


@dataclass
class _Seen:
    """What the evaluator remembers about one moto alarm object."""

    identity: int
    evaluated_until: datetime
    state: str
    """The state the evaluator last saw or set: a different state in moto was set by someone else
    (``SetAlarmState``), and gets its event too."""
    previous: dict[str, Any]
    """The ``previousState`` block of the next event (value, reason, reasonData, timestamp)."""


class AlarmEvaluator:
    """The CloudWatch alarm :class:`~localcloud.contracts.Ticker` (background work)."""

    def __init__(self, ctx: Context, index: MetricIndex | None = None) -> None:
        self.ctx = ctx
        self.index = index or MetricIndex()
        self._seen: dict[tuple[str, str], _Seen] = {}
        # moto replaces an alarm's object on every PutMetricAlarm, so the object itself keys its spec.
        self._specs: dict[tuple[str, str], tuple[Any, AlarmSpec | None]] = {}
        # (region, name) -> (alarm object, boundary, datapoints before it, evaluation range, state): the
        # look-ahead's last evaluation, reused by the step that reaches that boundary while no datapoint
        # before it was added (datapoints are append-only, so the count before the boundary tells), and
        # slid to the next boundary.
        self._looked: dict[tuple[str, str], tuple[Any, datetime, int, list[Period], str | None]] = {}
        # (region, name) -> (alarm, boundary, datapoints before it, evaluation): :meth:`current`'s last.
        self._current: dict[tuple[str, str], tuple[Any, datetime, int, Evaluation]] = {}
        self.on_alarm: Callable[[str, Any, datetime], None] | None = None
        """Called (region, moto alarm, instant) when an alarm with actions enabled enters ``ALARM``:
        CloudWatch invokes the alarm's actions on the state change (Application Auto Scaling policies among
        them)."""

    def _alarms(self, now: datetime) -> list[tuple[str, Any, Any, AlarmSpec]]:
        """(region, backend, alarm, spec) of every evaluable alarm; new alarms are set to
        ``INSUFFICIENT_DATA`` and remembered."""
        found = []
        for region, backend in cloudwatch.backends(self.ctx.account_id):
            for alarm in list(backend.alarms.values()):
                key = (region, alarm.name)
                known = self._specs.get(key)
                if known is None or known[0] is not alarm:
                    known = self._specs[key] = (alarm, spec_of(alarm))
                spec = known[1]
                if spec is None:
                    continue
                seen = self._seen.get(key)
                if seen is None or seen.identity != id(alarm):
                    if (
                        alarm.state_value == "OK"
                        and alarm.state_reason == _INITIAL_REASON
                        and not alarm.history
                    ):
                        alarm.state_value = "INSUFFICIENT_DATA"
                    created = as_utc(alarm.configuration_updated_timestamp)
                    self._seen[key] = _Seen(id(alarm), min(created, now), alarm.state_value, _snapshot(alarm))
                found.append((region, backend, alarm, spec))
        return found

    def points(self, backend: Any, spec: AlarmSpec) -> list[Datapoint]:
        """The datapoints of the alarm's metric."""
        return self.index.series(backend, spec.namespace, spec.metric_name, spec.dimensions)

    def next_due(self, now: datetime) -> Due | None:
        """The first boundary after ``now`` at which some alarm changes state, or None (background)."""
        return self.next_due_before(now, None)

    def next_due_before(self, now: datetime, horizon: datetime | None) -> Due | None:
        """:meth:`next_due`, looking no further than ``horizon`` (None: "no change at or before it"): a busy
        metric makes every boundary a candidate, so the search stops where the clock steps anyway."""
        with self.ctx.lock:
            earliest: datetime | None = None
            for region, backend, alarm, spec in self._alarms(now):
                if alarm.state_value != self._seen[(region, alarm.name)].state:
                    # Set from outside (SetAlarmState): its event is due now, and it follows from a call.
                    return Due(now + timedelta(microseconds=1), foreground=True)
                points = self.points(backend, spec)
                after = self._seen[(region, alarm.name)].evaluated_until
                state = alarm.state_value
                for moment in candidate_boundaries(spec, points, after, earliest or horizon):
                    result = self._state_at((region, alarm.name), alarm, spec, points, moment)
                    if result is not None and result != state:
                        earliest = moment
                        break
        if earliest is None:
            return None
        return Due(max(earliest, now + timedelta(microseconds=1)), foreground=False)

    def _state_at(
        self, key: tuple[str, str], alarm: Any, spec: AlarmSpec, points: list[Datapoint], moment: datetime
    ) -> str | None:
        """The state an evaluation at ``moment`` gives (None: keep), the look-ahead's while still valid.

        The evaluation range slides from the one of the boundary before when no datapoint before that
        boundary was added since (the clock steps boundary by boundary through a busy metric)."""
        before = bisect_left(points, moment, key=_at)
        looked = self._looked.get(key)
        if looked is not None and looked[0] is alarm and looked[1] == moment and looked[2] == before:
            return looked[4]
        periods = None
        if looked is not None and looked[0] is alarm and looked[2] == bisect_left(points, looked[1], key=_at):
            periods = slide(spec, points, looked[3], looked[1], moment)
        if periods is None:
            periods = evaluation_range(spec, points, moment)
        state = evaluate(spec, points, moment, explain=False, periods=periods).state
        self._looked[key] = (alarm, moment, before, periods, state)
        return state

    def advance(self, now: datetime) -> None:
        """Evaluate every alarm at each boundary up to ``now`` where it can change; update moto; send the
        state-change events (outside the lock: delivery may call back into the emulator)."""
        events: list[tuple[str, dict[str, Any], str]] = []
        with self.ctx.lock:
            for region, backend, alarm, spec in self._alarms(now):
                seen = self._seen[(region, alarm.name)]
                if alarm.state_value != seen.state:
                    events.append(self._event(region, alarm, spec, seen))
                    if alarm.state_value == "ALARM" and alarm.actions_enabled and self.on_alarm is not None:
                        self.on_alarm(region, alarm, as_utc(alarm.state_updated_timestamp))
                points = self.points(backend, spec)
                for moment in candidate_boundaries(spec, points, seen.evaluated_until, now):
                    state = self._state_at((region, alarm.name), alarm, spec, points, moment)
                    if state is None or state == alarm.state_value:
                        continue
                    result = evaluate(spec, points, moment)
                    alarm.update_state(result.reason, result.reason_data, state)
                    alarm.state_updated_timestamp = moment.replace(tzinfo=None)
                    events.append(self._event(region, alarm, spec, seen))
                    if state == "ALARM" and alarm.actions_enabled and self.on_alarm is not None:
                        self.on_alarm(region, alarm, moment)
                seen.evaluated_until = max(seen.evaluated_until, now)
        for arn, detail, region in events:
            self.ctx.events.put_aws_event(
                source="aws.cloudwatch",
                detail_type="CloudWatch Alarm State Change",
                detail=detail,
                resources=[arn],
                region=region,
            )

    def _event(
        self, region: str, alarm: Any, spec: AlarmSpec, seen: _Seen
    ) -> tuple[str, dict[str, Any], str]:
        """The state-change event for the alarm's current state (previous state from ``seen``), and the
        new state remembered in ``seen``."""
        current = _snapshot(alarm)
        detail = {
            "alarmName": alarm.name,
            "state": current,
            "previousState": seen.previous,
            "configuration": self._configuration(alarm, spec),
        }
        seen.state, seen.previous = alarm.state_value, current
        return alarm.alarm_arn, detail, region

    @staticmethod
    def _configuration(alarm: Any, spec: AlarmSpec) -> dict[str, Any]:
        configuration: dict[str, Any] = {
            "metrics": [
                {
                    "id": spec.metric_id,
                    "metricStat": {
                        "metric": {
                            "dimensions": dict(spec.dimensions),
                            "name": spec.metric_name,
                            "namespace": spec.namespace,
                        },
                        "period": spec.period,
                        "stat": spec.statistic,
                    },
                    "returnData": True,
                }
            ]
        }
        if alarm.description:
            configuration["description"] = alarm.description
        return configuration

    def current(
        self, region: str, alarm_name: str, now: datetime
    ) -> tuple[Any, AlarmSpec, Evaluation] | None:
        """A moto alarm, its spec and its evaluation at the last boundary before ``now`` (for Application
        Auto Scaling, which acts on the alarm's metric value: the evaluation has no reason text)."""
        backend = cloudwatch.backend(self.ctx.account_id, region)
        alarm = backend.alarms.get(alarm_name)
        if alarm is None:
            return None
        known = self._specs.get((region, alarm_name))
        spec = known[1] if known is not None and known[0] is alarm else spec_of(alarm)
        if spec is None:
            return None
        points = self.points(backend, spec)
        moment = _boundary(now, spec.period)
        # Asked at every step while an alarm is in ALARM: kept while no datapoint before the boundary was
        # added (as the look-ahead's evaluation is).
        before = bisect_left(points, moment, key=_at)
        kept = self._current.get((region, alarm_name))
        if kept is not None and kept[0] is alarm and kept[1] == moment and kept[2] == before:
            return alarm, spec, kept[3]
        evaluation = evaluate(spec, points, moment, explain=False)
        self._current[(region, alarm_name)] = (alarm, moment, before, evaluation)
        return alarm, spec, evaluation
