"""Schedule expressions: AWS cron syntax, rate and at, time zones and DST, StartDate/EndDate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import islice
from zoneinfo import ZoneInfo

import pytest

from localcloud.scheduler import (
    AtExpression,
    CronExpression,
    RateExpression,
    ScheduleExpressionError,
    occurrences,
    parse_expression,
)

UTC_ZONE = ZoneInfo("UTC")
PARIS = ZoneInfo("Europe/Paris")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def cron_times(expression: str, after: datetime, count: int, tz: ZoneInfo = UTC_ZONE) -> list[datetime]:
    parsed = parse_expression(expression)
    assert isinstance(parsed, CronExpression)
    return list(islice(occurrences(parsed, tz=tz, anchor=after, after=after), count))


def test_weekday_cron_in_a_time_zone_skips_weekends() -> None:
    # 2026-12-04 is a Friday; 09:00 in Paris is 08:00 UTC in winter.
    times = cron_times("cron(0 9 ? * MON-FRI *)", utc(2026, 12, 4, 8, 30), 3, PARIS)

    assert times == [utc(2026, 12, 7, 8, 0), utc(2026, 12, 8, 8, 0), utc(2026, 12, 9, 8, 0)]


def test_increments_lists_and_ranges() -> None:
    times = cron_times("cron(0/20 8-9 * * ? *)", utc(2026, 1, 1), 7)

    assert [t.strftime("%H:%M") for t in times] == [
        "08:00",
        "08:20",
        "08:40",
        "09:00",
        "09:20",
        "09:40",
        "08:00",
    ]
    assert times[-1].day == 2


def test_last_day_nearest_weekday_and_nth_weekday() -> None:
    last = cron_times("cron(30 11 L * ? *)", utc(2026, 1, 1), 3)
    assert [t.date().isoformat() for t in last] == ["2026-01-31", "2026-02-28", "2026-03-31"]

    # 15W: 2026-02-15 is a Sunday -> Monday 16th; 2026-08-15 is a Saturday -> Friday 14th
    nearest = cron_times("cron(0 12 15W * ? 2026)", utc(2026, 2, 1), 7)
    assert nearest[0].date().isoformat() == "2026-02-16"
    assert "2026-08-14" in [t.date().isoformat() for t in nearest]

    # 3#2: the second Tuesday (1 = Sunday, so 3 = Tuesday)
    second_tuesday = cron_times("cron(0 10 ? * 3#2 *)", utc(2026, 1, 1), 2)
    assert [t.date().isoformat() for t in second_tuesday] == ["2026-01-13", "2026-02-10"]

    # 6L: the last Friday
    last_friday = cron_times("cron(0 10 ? * 6L *)", utc(2026, 1, 1), 2)
    assert [t.date().isoformat() for t in last_friday] == ["2026-01-30", "2026-02-27"]


def test_year_field_ends_the_schedule() -> None:
    times = cron_times("cron(0 0 1 JAN ? 2027-2028)", utc(2026, 6, 1), 5)

    assert times == [utc(2027, 1, 1), utc(2028, 1, 1)]


def test_dst_gap_is_skipped_and_repeated_hour_fires_once() -> None:
    # Europe/Paris: 2026-03-29 02:00 -> 03:00 (no 02:30); 2026-10-25 03:00 -> 02:00 (02:30 twice).
    spring = cron_times("cron(30 2 * * ? *)", utc(2026, 3, 28, 12), 2, PARIS)
    assert [t.astimezone(PARIS).date().isoformat() for t in spring] == ["2026-03-30", "2026-03-31"]

    autumn = cron_times("cron(30 2 * * ? *)", utc(2026, 10, 24, 12), 2, PARIS)
    assert autumn == [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("cron(0 12 * * * *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(0 12 ? * ? *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(0 24 * * ? *)", "24 is outside 0-23"),
        ("cron(0 12 * * ?)", "expected 6 fields"),
        ("rate(0 minutes)", "positive value"),
        ("rate(1 hours)", "use '1 hour'"),
        ("at(2026-13-01T00:00:00)", "yyyy-mm-ddThh:mm:ss"),
        ("every(5 minutes)", "expected at(...), rate(...) or cron(...)"),
    ],
)
def test_invalid_expressions_are_rejected(expression: str, message: str) -> None:
    with pytest.raises(
        ScheduleExpressionError, match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")
    ):
        parse_expression(expression)


def test_rate_starts_at_start_date_or_immediately_and_stops_at_end_date() -> None:
    rate = parse_expression("rate(6 hours)")
    assert rate == RateExpression(timedelta(hours=6))
    created = utc(2026, 12, 1, 8)

    immediate = list(
        islice(occurrences(rate, tz=UTC_ZONE, anchor=created, after=created - timedelta(seconds=1)), 3)
    )
    assert immediate == [utc(2026, 12, 1, 8), utc(2026, 12, 1, 14), utc(2026, 12, 1, 20)]

    bounded = list(
        occurrences(
            rate,
            tz=UTC_ZONE,
            anchor=created,
            after=created,
            start=utc(2026, 12, 2),
            end=utc(2026, 12, 3),
        )
    )
    assert bounded == [utc(2026, 12, 2, 0), utc(2026, 12, 2, 6), utc(2026, 12, 2, 12), utc(2026, 12, 2, 18)]


def test_at_expression_is_local_to_its_time_zone() -> None:
    at = parse_expression("at(2026-07-01T09:00:00)")
    assert at == AtExpression(datetime(2026, 7, 1, 9))  # noqa: DTZ001 - at() is a wall time

    assert list(occurrences(at, tz=PARIS, anchor=utc(2026, 1, 1), after=utc(2026, 1, 1))) == [
        utc(2026, 7, 1, 7)
    ]
    assert list(occurrences(at, tz=PARIS, anchor=utc(2026, 1, 1), after=utc(2026, 7, 1, 7))) == []
