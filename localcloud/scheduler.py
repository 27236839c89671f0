"""EventBridge Scheduler and scheduled EventBridge rules, fired on the virtual clock.
Kept whole for now: the at/rate/cron expressions and the ticker firing them; the expressions could move out.

:class:`SchedulerTicker` is a :class:`~localcloud.contracts.Ticker`. It reads the schedules moto stores
(those of the template and those the application creates at run time through the Scheduler API) and the
EventBridge rules with a ``ScheduleExpression``, and fires each at the instants AWS would:

- ``at(yyyy-mm-ddThh:mm:ss)``: once, in ``ScheduleExpressionTimezone`` (StartDate/EndDate ignored, as AWS
  does for one-time schedules); then deleted if ``ActionAfterCompletion`` is ``DELETE``. One-time
  schedules are *foreground* work: they keep ``run_until_idle`` going.
- ``rate(value unit)``: every ``value`` minutes/hours/days (a day is 24 hours, whatever the DST), from
  ``StartDate``, or from creation ("immediately") without one, until ``EndDate``. Background work.
- ``cron(minutes hours day-of-month month day-of-week year)``: AWS's six-field syntax (``* ? , - /``,
  ``L``, ``W``, ``#``, names ``JAN``-``DEC`` and ``SUN``-``SAT`` with ``1`` = Sunday), evaluated in the
  schedule's time zone: a local time skipped by a DST change does not fire, a repeated one fires once.
  Background work.

Sources: "Schedule types on EventBridge Scheduler" (Scheduler user guide) and "Schedule expressions for
rules" (EventBridge user guide; scheduled rules are always UTC). AWS fires within 60 s of the instant;
here the target is invoked exactly at it (an overdue schedule, such as a rate schedule just created, fires
one second later). ``CreateSchedule``/``UpdateSchedule`` of an ``at()`` that is not in the future is
refused with Scheduler's ``ValidationException``, as AWS refuses it (:meth:`SchedulerTicker.install`).

Each firing is a delivery (:class:`~localcloud.delivery.DeliveryJob`, service ``scheduler``, operation
the schedule's name): the delivery fault kinds apply (a firing delivered twice or late), and a target that
refuses it is retried per the target's ``RetryPolicy`` (Scheduler's default: 185 retries within 24 hours)
with ``<aws.scheduler.attempt-number>`` counting, then sent to its ``DeadLetterConfig`` queue.

Targets: Lambda, Step Functions, an event bus (``EventBridgeParameters`` give ``DetailType`` and
``Source``; the ``Input`` is the detail), SQS, SNS, and universal targets
(``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>``). Context attributes ``<aws.scheduler.schedule-arn>``,
``<aws.scheduler.scheduled-time>``, ``<aws.scheduler.execution-id>``, ``<aws.scheduler.attempt-number>``
are replaced in ``Input``. A disabled schedule or rule does not fire.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from moto.events.models import events_backends
from moto.scheduler.exceptions import ValidationException
from moto.scheduler.models import EventBridgeSchedulerBackend, scheduler_backends

from localcloud.contracts import Due
from localcloud.delivery import DeliveryJob, EventDelivery, TargetError, envelope
from localcloud.iam import TargetCaller
from localcloud.timeline import Kind, Timeline

_OVERDUE_DELAY = timedelta(seconds=1)
_SEARCH_YEARS = 8  # how far a cron search looks ahead before declaring "never again"

_MONTHS = {name: i for i, name in enumerate(calendar.month_abbr) if name}
_MONTHS = {k.upper(): v for k, v in _MONTHS.items()}
_WEEKDAYS = {"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}


class ScheduleExpressionError(ValueError):
    """A schedule expression AWS would reject (``ValidationException``); the message says why."""


# ------------------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class AtExpression:
    """``at(yyyy-mm-ddThh:mm:ss)``: ``when`` is a naive local time in the schedule's time zone."""

    when: datetime


@dataclass(frozen=True)
class RateExpression:
    """``rate(value unit)``: ``period`` between invocations."""

    period: timedelta


@dataclass(frozen=True)
class CronField:
    """One parsed cron field: the plain values allowed, plus the special day rules."""

    values: frozenset[int]
    any: bool = False  # ``*`` or ``?``
    last: bool = False  # DOM ``L``
    last_offset: int = 0  # DOM ``L-3``
    nearest_weekday: int | None = None  # DOM ``15W``
    last_weekday_of_month: bool = False  # DOM ``LW``
    last_dow: frozenset[int] = frozenset()  # DOW ``6L``: last Friday
    nth_dow: frozenset[tuple[int, int]] = frozenset()  # DOW ``3#2``: second Tuesday


@dataclass(frozen=True)
class CronExpression:
    """``cron(minutes hours day-of-month month day-of-week year)`` (AWS syntax)."""

    minutes: CronField
    hours: CronField
    days_of_month: CronField
    months: CronField
    days_of_week: CronField
    years: CronField

    def matches_day(self, day: date) -> bool:
        """True if the expression fires on ``day`` (month, year, day-of-month and day-of-week rules)."""
        if day.month not in self.months.values or not (self.years.any or day.year in self.years.values):
            return False
        return self._dom_matches(day) and self._dow_matches(day)

    def _dom_matches(self, day: date) -> bool:
        dom = self.days_of_month
        if dom.any:
            return True
        last_day = calendar.monthrange(day.year, day.month)[1]
        if dom.last and day.day == last_day - dom.last_offset:
            return True
        if dom.last_weekday_of_month:
            last = date(day.year, day.month, last_day)
            while last.weekday() >= 5:
                last -= timedelta(days=1)
            if day == last:
                return True
        if dom.nearest_weekday is not None and day == _nearest_weekday(
            day.year, day.month, dom.nearest_weekday
        ):
            return True
        return day.day in dom.values

    def _dow_matches(self, day: date) -> bool:
        dow = self.days_of_week
        if dow.any:
            return True
        aws_dow = (day.weekday() + 1) % 7 + 1  # Monday=0 in Python -> 2 in AWS; Sunday -> 1
        if aws_dow in dow.values:
            return True
        last_day = calendar.monthrange(day.year, day.month)[1]
        if aws_dow in dow.last_dow and day.day + 7 > last_day:
            return True
        return (aws_dow, (day.day - 1) // 7 + 1) in dow.nth_dow

    def times_of_day(self) -> list[tuple[int, int]]:
        """(hour, minute) pairs of a matching day, in order."""
        return [(h, m) for h in sorted(self.hours.values) for m in sorted(self.minutes.values)]

    def next_after(self, after: datetime, tz: ZoneInfo) -> datetime | None:
        """The first firing instant strictly after ``after`` (tz-aware), in UTC; None if there is none.

        Local times skipped by a DST change do not fire; repeated local times fire once (the first).
        """
        local_after = after.astimezone(tz)
        day = local_after.date()
        limit = day + timedelta(days=366 * _SEARCH_YEARS)
        times = self.times_of_day()
        while day <= limit:
            if self.years.values and not self.years.any and day.year > max(self.years.values):
                return None
            if self.matches_day(day):
                for hour, minute in times:
                    local = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
                    if not _exists(local, tz):
                        continue
                    instant = local.astimezone(UTC)
                    if instant > after:
                        return instant
            day += timedelta(days=1)
        return None


Expression = AtExpression | RateExpression | CronExpression


def _exists(local: datetime, tz: ZoneInfo) -> bool:
    """False for a wall time inside a DST gap (it does not round-trip through UTC)."""
    return local.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == local.replace(tzinfo=None)


def _nearest_weekday(year: int, month: int, day_number: int) -> date | None:
    last_day = calendar.monthrange(year, month)[1]
    if day_number > last_day:
        return None
    target = date(year, month, day_number)
    if target.weekday() == 5:  # Saturday -> Friday, unless that leaves the month
        return target - timedelta(days=1) if day_number > 1 else target + timedelta(days=2)
    if target.weekday() == 6:  # Sunday -> Monday, unless that leaves the month
        return target + timedelta(days=1) if day_number < last_day else target - timedelta(days=2)
    return target


def _number(token: str, names: dict[str, int], low: int, high: int, field: str) -> int:
    upper = token.upper()
    if upper in names:
        return names[upper]
    if not token.isdigit():
        raise ScheduleExpressionError(f"cron {field}: {token!r} is not a number")
    value = int(token)
    if not low <= value <= high:
        raise ScheduleExpressionError(f"cron {field}: {value} is outside {low}-{high}")
    return value


def _parse_field(  # noqa: C901, PLR0912 - one branch per field syntax of cron and rate expressions
    text: str, field: str, low: int, high: int, names: dict[str, int] | None = None, *, day_field: str = ""
) -> CronField:
    names = names or {}
    if text in ("*", "?"):
        if text == "?" and not day_field:
            raise ScheduleExpressionError(f"cron {field}: ? is only allowed in day-of-month or day-of-week")
        return CronField(frozenset(range(low, high + 1)), any=True)
    values: set[int] = set()
    last = False
    last_offset = 0
    nearest: int | None = None
    last_weekday = False
    last_dow: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for part in text.split(","):
        upper = part.upper()
        if day_field == "dom" and upper == "L":
            last = True
        elif day_field == "dom" and re.fullmatch(r"L-\d+", upper):
            last, last_offset = True, int(upper[2:])
        elif day_field == "dom" and upper == "LW":
            last_weekday = True
        elif day_field == "dom" and re.fullmatch(r"\d+W", upper):
            nearest = _number(upper[:-1], names, low, high, field)
        elif day_field == "dow" and re.fullmatch(r"[0-9A-Z]+L", upper):
            last_dow.add(_number(upper[:-1], names, low, high, field))
        elif day_field == "dow" and "#" in upper:
            weekday, _, nth_text = upper.partition("#")
            if not nth_text.isdigit() or not 1 <= int(nth_text) <= 5:
                raise ScheduleExpressionError(f"cron {field}: {part!r}: the week must be 1-5")
            nth.add((_number(weekday, names, low, high, field), int(nth_text)))
        else:
            base, _, step_text = part.partition("/")
            step = 1
            if step_text:
                if not step_text.isdigit() or int(step_text) == 0:
                    raise ScheduleExpressionError(f"cron {field}: {part!r}: bad increment")
                step = int(step_text)
            if base == "*":
                start, end = low, high
            elif "-" in base:
                first, _, second = base.partition("-")
                start = _number(first, names, low, high, field)
                end = _number(second, names, low, high, field)
            else:
                start = _number(base, names, low, high, field)
                end = high if step_text else start
            if start <= end:
                values.update(range(start, end + 1, step))
            else:  # a wrapping range such as FRI-MON or 22-2
                span = list(range(start, high + 1)) + list(range(low, end + 1))
                values.update(span[::step])
    return CronField(
        frozenset(values),
        last=last,
        last_offset=last_offset,
        nearest_weekday=nearest,
        last_weekday_of_month=last_weekday,
        last_dow=frozenset(last_dow),
        nth_dow=frozenset(nth),
    )


def parse_cron(body: str) -> CronExpression:
    """Parse the inside of ``cron(...)``.

    Raises:
        ScheduleExpressionError: not six fields, a value out of range, or day-of-month and day-of-week
            both given (AWS requires ``?`` in one of them).
    """
    fields = body.split()
    if len(fields) != 6:
        raise ScheduleExpressionError(f"cron({body}): expected 6 fields, got {len(fields)}")
    minutes, hours, dom, month, dow, year = fields
    if (dom == "?") == (dow == "?"):
        raise ScheduleExpressionError(
            f"cron({body}): exactly one of day-of-month and day-of-week must be ? (AWS syntax)"
        )
    return CronExpression(
        minutes=_parse_field(minutes, "minutes", 0, 59),
        hours=_parse_field(hours, "hours", 0, 23),
        days_of_month=_parse_field(dom, "day-of-month", 1, 31, day_field="dom"),
        months=_parse_field(month, "month", 1, 12, _MONTHS),
        days_of_week=_parse_field(dow, "day-of-week", 1, 7, _WEEKDAYS, day_field="dow"),
        years=_parse_field(year, "year", 1970, 2199),
    )


@functools.lru_cache(maxsize=1024)
def parse_expression(expression: str) -> Expression:
    """Parse an ``at()``, ``rate()`` or ``cron()`` schedule expression (kept per text: the ticker asks again
    at every step, and the parsed expressions are frozen; a malformed one raises each time).

    Raises:
        ScheduleExpressionError: the expression is malformed (the message says how).
    """
    text = expression.strip()
    match = re.fullmatch(r"(at|rate|cron)\((.*)\)", text)
    if match is None:
        raise ScheduleExpressionError(f"{expression!r}: expected at(...), rate(...) or cron(...)")
    kind, body = match.groups()
    if kind == "at":
        try:
            return AtExpression(datetime.strptime(body.strip(), "%Y-%m-%dT%H:%M:%S"))  # noqa: DTZ007
        except ValueError as exc:
            raise ScheduleExpressionError(f"{expression!r}: at() needs yyyy-mm-ddThh:mm:ss") from exc
    if kind == "rate":
        rate = re.fullmatch(r"\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*", body)
        if rate is None or int(rate.group(1)) == 0:
            raise ScheduleExpressionError(f"{expression!r}: rate() needs a positive value and a unit")
        value, unit = int(rate.group(1)), rate.group(2)
        if (value == 1) != (not unit.endswith("s")):
            raise ScheduleExpressionError(
                f"{expression!r}: use '1 {unit.rstrip('s')}' or 'N {unit.rstrip('s')}s'"
            )
        seconds = {"minute": 60, "hour": 3600, "day": 86400}[unit.rstrip("s")]
        return RateExpression(timedelta(seconds=value * seconds))
    return parse_cron(body)


def _timezone(name: str | None) -> ZoneInfo:
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleExpressionError(f"unknown time zone {name!r}") from exc


def _as_datetime(value: Any) -> datetime | None:
    """moto stores dates as given on the wire: epoch seconds (JSON protocol), datetime, or ISO text."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        return _text_as_datetime(value)
    try:
        return datetime.fromtimestamp(float(value), UTC)
    except (TypeError, ValueError):
        return _text_as_datetime(str(value))


@functools.lru_cache(maxsize=4096)
def _text_as_datetime(text: str) -> datetime:
    """Epoch seconds or ISO text, kept per text (the ticker reads every schedule's dates at every step)."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except ValueError:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def occurrences(
    expression: Expression,
    *,
    tz: ZoneInfo,
    anchor: datetime,
    after: datetime,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Iterator[datetime]:
    """The firing instants strictly after ``after`` (UTC, ascending) of a recurring expression.

    ``anchor`` is when a rate schedule counts from (StartDate or creation); ``start``/``end`` bound
    recurring schedules (EndDate exclusive). An ``at()`` yields its single instant if it is after ``after``.
    """
    if isinstance(expression, AtExpression):
        instant = expression.when.replace(tzinfo=tz).astimezone(UTC)
        if instant > after:
            yield instant
        return
    lower = max(after, start - timedelta(microseconds=1)) if start else after
    if isinstance(expression, RateExpression):
        base = start or anchor
        period = expression.period
        steps = 0 if lower < base else int((lower - base) / period) + 1
        instant = base + steps * period
        while end is None or instant < end:
            yield instant
            instant += period
        return
    current = lower
    while True:
        following = expression.next_after(current, tz)
        if following is None or (end is not None and following >= end):
            return
        yield following
        current = following


# ------------------------------------------------------------------------------------------------ ticker


@dataclass
class _Tracked:
    """What the ticker remembers of one schedule or rule between clock steps."""

    key: str
    anchor: datetime
    fingerprint: str
    last_fired: datetime | None = None
    done: bool = False


@dataclass(frozen=True)
class Firing:
    """One schedule or scheduled rule firing (for tests and the timeline)."""

    at: datetime
    kind: str  # "schedule" or "rule"
    name: str  # group/name or rule name
    target_arn: str
    payload: str
    error: str | None = None


@dataclass(frozen=True)
class _Plan:
    key: str
    due: datetime
    foreground: bool
    fire: Callable[[datetime, datetime], None]  # (due, now): an overdue plan fires now, counts from due


class SchedulerTicker:
    """Fires Scheduler schedules and scheduled EventBridge rules at their virtual instants (a Ticker).

    ``delivery`` sends payloads to targets (and rule targets with their input transformation);
    ``universal`` calls a universal-target API (``service``, ``Operation``, params, and the caller: the
    schedule and its role, as whom the call is made) and is optional.
    ``regions`` are scanned for schedules and rules (default: every region in use).
    """

    def __init__(
        self,
        delivery: EventDelivery,
        *,
        timeline: Timeline | None = None,
        regions: list[str] | None = None,
        universal: Callable[[str, str, dict[str, Any], TargetCaller], Any] | None = None,
    ) -> None:
        self.delivery = delivery
        self.timeline = timeline
        self.account_id = delivery.account_id
        self.regions = regions
        self.universal = universal
        self._tracked: dict[str, _Tracked] = {}
        self._lock = threading.RLock()
        self._originals: dict[str, Any] = {}
        self.firings: list[Firing] = []

    # ------------------------------------------------------------------------------------------ lifecycle

    def install(self) -> None:
        """Refuse, as Scheduler does, ``CreateSchedule``/``UpdateSchedule`` with an ``at()`` that is not in
        the future (moto accepts it; process-wide until :meth:`uninstall`)."""
        if self._originals:
            return
        for name in ("create_schedule", "update_schedule"):
            original = getattr(EventBridgeSchedulerBackend, name)
            self._originals[name] = original

            def checked(backend: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
                refuse_past_at(kwargs.get("schedule_expression"), kwargs.get("schedule_expression_timezone"))
                return _original(backend, *args, **kwargs)

            setattr(EventBridgeSchedulerBackend, name, checked)

    def uninstall(self) -> None:
        """Put moto's ``create_schedule``/``update_schedule`` back."""
        for name, original in self._originals.items():
            setattr(EventBridgeSchedulerBackend, name, original)
        self._originals.clear()

    # --------------------------------------------------------------------------------------- Ticker API

    def next_due(self, now: datetime) -> Due | None:
        """The earliest pending firing strictly after ``now`` (overdue ones: one second from now).

        ``foreground`` is True while a one-time schedule is pending.
        """
        plans = self._plans(now)
        if not plans:
            return None
        earliest = min(p.due for p in plans)
        at = max(earliest, now + _OVERDUE_DELAY) if earliest <= now else earliest
        # Foreground while any one-time schedule is pending, even if a recurring one fires first: the run
        # must go on to reach it.
        return Due(at, any(p.foreground for p in plans))

    def advance(self, now: datetime) -> None:
        """Fire every schedule and scheduled rule due at or before ``now``, in time then name order."""
        for _ in range(10_000):  # a guard: a rate(1 minute) schedule skipped over a year is 525,600 firings
            plans = sorted((p for p in self._plans(now) if p.due <= now), key=lambda p: (p.due, p.key))
            if not plans:
                return
            plan = plans[0]
            plan.fire(plan.due, now)

    # ------------------------------------------------------------------------------------------ discovery

    def _plans(self, now: datetime) -> list[_Plan]:
        with self._lock:
            return list(self._schedule_plans(now)) + list(self._rule_plans(now))

    def _regions(self, account: Any) -> list[str]:
        """The regions to scan: those given, else every region moto has a backend for (sorted)."""
        present = sorted(dict.keys(account))
        return [r for r in present if self.regions is None or r in self.regions]

    def _track(self, key: str, anchor: datetime, fingerprint: str) -> _Tracked:
        tracked = self._tracked.get(key)
        if tracked is None or tracked.fingerprint != fingerprint:
            # New, or updated through UpdateSchedule/PutRule: count again from now (AWS does likewise).
            previous = tracked.last_fired if tracked else None
            tracked = _Tracked(key, anchor, fingerprint, last_fired=previous)
            self._tracked[key] = tracked
        return tracked

    def _schedule_plans(self, now: datetime) -> Iterator[_Plan]:
        account = scheduler_backends.get(self.account_id)
        if account is None:
            return
        for region in self._regions(account):
            backend = account[region]
            for group in list(backend.schedule_groups.values()):
                for schedule in list(group.schedules.values()):
                    plan = self._schedule_plan(backend, group.name, schedule, now)
                    if plan is not None:
                        yield plan

    def _schedule_plan(self, backend: Any, group: str, schedule: Any, now: datetime) -> _Plan | None:
        key = schedule.arn
        created = _as_datetime(schedule.creation_date) or now
        fingerprint = json.dumps(
            [
                schedule.schedule_expression,
                schedule.schedule_expression_timezone,
                str(schedule.start_date),
                str(schedule.end_date),
                schedule.last_modified_date,
            ],
            default=str,
        )
        tracked = self._track(key, created, fingerprint)
        if tracked.done or schedule.state != "ENABLED":
            return None
        try:
            expression = parse_expression(schedule.schedule_expression)
            tz = _timezone(schedule.schedule_expression_timezone)
        except ScheduleExpressionError as exc:
            self._note(f"schedule {group}/{schedule.name}: {exc}; it never fires")
            tracked.done = True
            return None
        one_time = isinstance(expression, AtExpression)
        if one_time:
            after = tracked.last_fired or datetime.min.replace(tzinfo=UTC)
            start = end = None
        else:
            # A rate schedule without StartDate fires at once ("immediately", per the Scheduler guide); a
            # cron schedule fires at its next instant strictly after its creation.
            immediate = isinstance(expression, RateExpression)
            after = tracked.last_fired or (
                tracked.anchor - timedelta(microseconds=1) if immediate else tracked.anchor
            )
            start, end = _as_datetime(schedule.start_date), _as_datetime(schedule.end_date)
        due = next(
            occurrences(expression, tz=tz, anchor=tracked.anchor, after=after, start=start, end=end), None
        )
        if due is None:
            return None

        def fire(due: datetime, now: datetime) -> None:
            tracked.last_fired = due
            if one_time:
                tracked.done = True
            self._fire_schedule(backend, group, schedule, max(due, now), delete=one_time)

        return _Plan(key, due, one_time, fire)

    def _rule_plans(self, now: datetime) -> Iterator[_Plan]:
        account = events_backends.get(self.account_id)
        if account is None:
            return
        for region in self._regions(account):
            backend = account[region]
            bus = backend.event_buses.get("default")
            for rule in list(bus.rules.values()) if bus is not None else []:
                if not rule.scheduled_expression or rule.state not in ("ENABLED",):
                    continue
                tracked = self._track(rule.arn, now, rule.scheduled_expression)
                try:
                    expression = parse_expression(rule.scheduled_expression)
                except ScheduleExpressionError as exc:
                    self._note(f"rule {rule.name}: {exc}; it never fires")
                    continue
                after = tracked.last_fired or tracked.anchor
                due = next(
                    occurrences(expression, tz=ZoneInfo("UTC"), anchor=tracked.anchor, after=after), None
                )
                if due is None:
                    continue

                def fire(
                    due: datetime,
                    now: datetime,
                    rule: Any = rule,
                    tracked: _Tracked = tracked,
                    region: str = region,
                ) -> None:
                    tracked.last_fired = due
                    self._fire_rule(rule, region, max(due, now))

                yield _Plan(rule.arn, due, False, fire)

    # --------------------------------------------------------------------------------------------- firing

    def _fire_schedule(self, backend: Any, group: str, schedule: Any, at: datetime, *, delete: bool) -> None:
        target: dict[str, Any] = dict(schedule.target or {})
        arn = str(target.get("Arn", ""))
        execution_id = self.delivery.new_id()
        if self.timeline is not None:
            self.timeline.add(
                Kind.SCHEDULE,
                f"schedule {group}/{self.delivery.label(schedule.name)} ({schedule.schedule_expression}) "
                f"fired -> {_describe(arn, self.delivery.label)}",
                at=at,
                schedule=f"{group}/{schedule.name}",
                target=arn,
            )
        origin = f"schedule {group}/{schedule.name}"
        universal = arn.startswith("arn:aws:scheduler:::aws-sdk:") or ":scheduler:::aws-sdk:" in arn
        caller = TargetCaller("scheduler.amazonaws.com", str(schedule.arn), target.get("RoleArn"))

        def render(attempt: int) -> str:
            return _scheduler_input(target.get("Input"), schedule.arn, at, execution_id, attempt)

        def dead_letter(
            error: TargetError, retries: int, exhausted: str | None
        ) -> tuple[str, dict[str, str]]:
            del retries, exhausted
            attributes = {
                "ERROR_CODE": error.code,
                "ERROR_MESSAGE": str(error),
                "EXECUTION_ID": execution_id,
                "SCHEDULE_ARN": schedule.arn,
                "SCHEDULED_TIME": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "TARGET_ARN": arn,
            }
            return render(1), attributes

        job = DeliveryJob(
            origin=origin,
            service="scheduler",
            operation=str(schedule.name),
            params={
                "schedule": schedule.name,
                "group": group,
                "target": arn,
                "target_service": "aws-sdk"
                if universal
                else (arn.split(":")[2] if arn.count(":") > 2 else ""),
            },
            target=target,
            region=str(getattr(backend, "region_name", self.delivery.region)),
            event_id=execution_id,
            detail_type="schedule firing",
            source="aws.scheduler",
            render=render,
            dead_letter=dead_letter,
            ingested=at,
            event_bus_parameters=target.get("EventBridgeParameters") or {},
            caller=caller,
            sender=(lambda payload: self._call_universal(arn, payload, caller)) if universal else None,
        )
        for made in self.delivery.start(job):
            self.firings.append(
                Firing(at, "schedule", f"{group}/{schedule.name}", arn, made.payload, made.error)
            )
        if delete and (schedule.action_after_completion or "NONE") == "DELETE":
            with contextlib.suppress(Exception):  # the application may have deleted it already
                backend.delete_schedule(group, schedule.name)

    def _call_universal(self, arn: str, payload: str, caller: TargetCaller) -> str:
        """A universal target (``arn:aws:scheduler:::aws-sdk:<service>:<apiAction>``): the API call itself."""
        _, _, spec = arn.partition(":aws-sdk:")
        service, _, action = spec.partition(":")
        if self.universal is None:
            raise TargetError(
                f"universal target {service}:{action} is not available", code="INVALID_PARAMETER"
            )
        operation = action[:1].upper() + action[1:]
        try:
            params = json.loads(payload) if payload else {}
            self.universal(service, operation, params, caller)
        except Exception as exc:  # the API's own error is the outcome
            raise TargetError(f"{service}:{operation} failed: {exc}", code="SDK_CLIENT_ERROR") from exc
        return f"called {service}:{operation}"

    def _fire_rule(self, rule: Any, region: str, at: datetime) -> None:
        event = envelope(
            event_id=self.delivery.new_id(),
            source="aws.events",
            detail_type="Scheduled Event",
            detail={},
            account=self.account_id,
            region=region,
            time=at,
            resources=[rule.arn],
        )
        if self.timeline is not None:
            label = self.delivery.label
            targets = ", ".join(_describe(str(t.get("Arn", "")), label) for t in rule.targets) or "no target"
            self.timeline.add(
                Kind.SCHEDULE,
                f"rule {label(rule.name)} ({rule.scheduled_expression}) fired -> {targets}",
                at=at,
                rule=rule.name,
            )
        for delivery in self.delivery.send_rule_targets(rule, event):
            self.firings.append(
                Firing(at, "rule", rule.name, delivery.target_arn, delivery.payload, delivery.error)
            )

    def _note(self, text: str) -> None:
        if self.timeline is not None:
            self.timeline.add(Kind.NOTE, text)


def refuse_past_at(expression: Any, timezone: Any) -> None:
    """Refuse an ``at()`` expression whose instant is not in the future, as Scheduler's ``CreateSchedule``
    and ``UpdateSchedule`` do (a one-time schedule in the past would never fire). Other expressions, and
    malformed ones (refused elsewhere), pass.

    Raises:
        moto ValidationException: the ``at()`` instant is now or in the past (in ``timezone``).
    """
    if not isinstance(expression, str) or not expression.strip().startswith("at("):
        return
    try:
        parsed = parse_expression(expression)
        tz = _timezone(timezone if isinstance(timezone, str) else None)
    except ScheduleExpressionError:
        return
    if not isinstance(parsed, AtExpression):
        return
    instant = parsed.when.replace(tzinfo=tz).astimezone(UTC)
    now = datetime.now(UTC)
    if instant <= now:
        raise ValidationException(
            f"Invalid Schedule Expression {expression}. The date and time of a one-time schedule must be in "
            f"the future (it is {now.strftime('%Y-%m-%dT%H:%M:%S')} UTC now)."
        )


def _describe(arn: str, label: Callable[[str], str]) -> str:
    """A target ARN as a short phrase (``function X``, ``state machine Y``, ``bus Z``)."""
    parts = arn.split(":")
    if len(parts) >= 7 and parts[2] == "lambda":
        return f"function {label(parts[6])}"
    if len(parts) >= 7 and parts[2] == "states":
        return f"state machine {label(parts[6])}"
    if len(parts) >= 6 and parts[2] == "events":
        return f"bus {parts[5].split('/', 1)[-1]}"
    return arn


def _scheduler_input(raw: Any, schedule_arn: str, at: datetime, execution_id: str, attempt: int = 1) -> str:
    """The target input with Scheduler's context attributes filled in (``{}`` when there is none)."""
    text = "{}" if raw is None else str(raw)
    replacements = {
        "<aws.scheduler.schedule-arn>": schedule_arn,
        "<aws.scheduler.scheduled-time>": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "<aws.scheduler.execution-id>": execution_id,
        "<aws.scheduler.attempt-number>": str(attempt),
    }
    for placeholder, value in replacements.items():
        text = text.replace(placeholder, value)
    return text
