"""Recurring reservations: validation, the Scheduler schedule, one request per schedule and date."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from capacity.adapters.scheduler import RequestSchedules
from capacity.errors import InvalidRequest, ScheduleExists, ScheduleNotFound
from capacity.logic.doors.schedules import (
    ScheduleDefinition,
    create_schedule,
    delete_schedule,
    expression_problem,
    get_schedule,
    list_schedules,
    request_for_run,
    run_schedule,
)
from capacity.record_kinds import SUBMITTED

from tests.unit.conftest import REGION, Harness
from tests.unit.unit_fakes import request_body

FUNCTION_ARN = f"arn:aws:lambda:{REGION}:123456789012:function:scheduled-request"
ROLE_ARN = "arn:aws:iam::123456789012:role/request-scheduler"


def definition(**overrides: Any) -> dict[str, Any]:
    """Every Monday 11:30 UTC: a 72 h reservation starting within a day of the firing."""
    template = {
        k: v for k, v in request_body().items() if k not in ("earliest_start", "latest_end", "request_id")
    }
    body: dict[str, Any] = {
        "name": "weekly-eval",
        "schedule_expression": "cron(30 11 ? * MON *)",
        "timezone": "UTC",
        "start_after_hours": 24,
        "window_hours": 96,
        "request": template,
    }
    body.update(overrides)
    return body


@pytest.fixture
def schedules(harness: Harness) -> RequestSchedules:
    client = boto3.client("scheduler", region_name=REGION)
    client.create_schedule_group(Name="requests")
    store = RequestSchedules(client, group="requests", target_arn=FUNCTION_ARN, role_arn=ROLE_ARN)
    harness.ports._request_schedules = store
    return store


@pytest.mark.parametrize(
    "expression",
    [
        "cron(30 11 ? * MON *)",
        "cron(0 9 1 * ? *)",
        "cron(0/15 8-17 ? * MON-FRI *)",
        "cron(0 12 L * ? 2026)",
        "cron(0 10 ? * 2#1 *)",
        "rate(7 days)",
        "rate(1 day)",
    ],
)
def test_valid_expressions(expression: str) -> None:
    assert expression_problem(expression) is None


@pytest.mark.parametrize(
    ("expression", "hint"),
    [
        ("cron(30 11 * * MON *)", "exactly one of day-of-month and day-of-week must be ?"),
        ("cron(30 11 ? * MON)", "needs 6 fields"),
        ("cron(61 11 ? * MON *)", "minutes '61': use values 0-59"),
        ("cron(30 11 ? * FUNDAY *)", "day-of-week 'FUNDAY'"),
        ("rate(0 days)", "positive value"),
        ("rate(2 day)", "'N days'"),
        ("at(2026-12-07T11:30:00)", "POST /reservations"),
        ("every monday", "use cron("),
    ],
)
def test_invalid_expressions_say_what_to_fix(expression: str, hint: str) -> None:
    problem = expression_problem(expression)
    assert problem is not None
    assert hint in problem


def test_each_run_gets_an_id_from_the_schedule_and_the_local_date() -> None:
    spec = ScheduleDefinition.model_validate(definition(timezone="Asia/Tokyo"))
    # 23:30 UTC on Sunday is already Monday 08:30 in Tokyo
    request = request_for_run(spec, datetime(2026, 12, 6, 23, 30, tzinfo=UTC))
    assert request["request_id"] == "weekly-eval-2026-12-07"
    assert request["earliest_start"] == "2026-12-07T23:30:00Z"
    assert request["latest_end"] == "2026-12-11T23:30:00Z"


def test_create_stores_the_definition_in_the_schedule_target(
    harness: Harness, schedules: RequestSchedules
) -> None:
    view = create_schedule(definition(), harness.ports, actor="arn:aws:iam::123456789012:user/alice")

    assert view["name"] == "weekly-eval"
    assert view["state"] == "ENABLED"
    assert view["request_id_pattern"] == "weekly-eval-<YYYY-MM-DD>"
    stored = schedules.get("weekly-eval")
    assert stored is not None
    assert stored["ScheduleExpression"] == "cron(30 11 ? * MON *)"
    assert stored["ScheduleExpressionTimezone"] == "UTC"
    assert stored["Target"]["Arn"] == FUNCTION_ARN
    assert stored["Target"]["RoleArn"] == ROLE_ARN
    target_input = json.loads(stored["Target"]["Input"])
    assert target_input["scheduled_time"] == "<aws.scheduler.scheduled-time>"
    assert target_input["schedule"]["request"]["instance_type"] == "ml.p5.48xlarge"
    assert get_schedule("weekly-eval", harness.ports) == view


def test_a_second_schedule_with_the_same_name_conflicts(
    harness: Harness, schedules: RequestSchedules
) -> None:
    create_schedule(definition(), harness.ports, actor="alice")
    with pytest.raises(ScheduleExists):
        create_schedule(definition(start_after_hours=0), harness.ports, actor="alice")


def test_the_request_template_is_validated_at_creation(harness: Harness, schedules: RequestSchedules) -> None:
    with pytest.raises(InvalidRequest) as caught:
        create_schedule(
            definition(window_hours=48, request={**definition()["request"], "instance_count": 3}),
            harness.ports,
            actor="alice",
        )
    fields = {e.field for e in caught.value.errors}
    assert fields == {"request.instance_count"}
    with pytest.raises(InvalidRequest) as short:
        create_schedule(definition(window_hours=48), harness.ports, actor="alice")
    assert [e.field for e in short.value.errors] == ["window_hours"]  # 48 h window, 72 h reservation
    with pytest.raises(InvalidRequest) as fixed:
        create_schedule(
            definition(request={**definition()["request"], "request_id": "x"}), harness.ports, actor="alice"
        )
    assert [e.field for e in fixed.value.errors] == ["request.request_id"]
    assert schedules.names() == []


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("search_until", "2026-12-02T09:00:00Z", "every run after it would find in the past"),
        ("serve_until", "2026-12-20T09:00:00Z", "every run after it would find in the past"),
        (
            "training_plan_arn",
            "arn:aws:sagemaker:us-east-1:123456789012:training-plan/central-procurement-p5",
            "cannot serve every run",
        ),
    ],
)
def test_a_template_that_holds_for_one_run_only_is_refused_naming_the_field(
    harness: Harness, schedules: RequestSchedules, field: str, value: str, says: str
) -> None:
    # Keep looking's deadline and a brought reservation are one instant and one reservation: the first run
    # could use them, every later run would be refused when it fires (and dropped by Scheduler).
    template = {**definition()["request"], field: value}
    with pytest.raises(InvalidRequest) as caught:
        create_schedule(definition(request=template), harness.ports, actor="alice")
    errors = {e.field: e.message for e in caught.value.errors}
    assert list(errors) == [f"request.{field}"], errors
    assert says in errors[f"request.{field}"]
    assert schedules.names() == []


def test_expression_and_timezone_are_validated(harness: Harness, schedules: RequestSchedules) -> None:
    with pytest.raises(InvalidRequest) as caught:
        create_schedule(
            definition(schedule_expression="cron(30 11 * * MON *)", timezone="Mars/Olympus"),
            harness.ports,
            actor="alice",
        )
    assert {e.field for e in caught.value.errors} == {"schedule_expression", "timezone"}


def test_list_pages_by_name_and_delete(harness: Harness, schedules: RequestSchedules) -> None:
    for name in ("c-sched", "a-sched", "b-sched"):
        create_schedule(definition(name=name), harness.ports, actor="alice")

    first = list_schedules(harness.ports, limit=2)
    second = list_schedules(harness.ports, limit=2, next_token=first["next_token"])

    assert [s["name"] for s in first["schedules"]] == ["a-sched", "b-sched"]
    assert [s["name"] for s in second["schedules"]] == ["c-sched"]
    assert second["next_token"] is None
    assert delete_schedule("b-sched", harness.ports, actor="alice") == {"name": "b-sched", "deleted": True}
    with pytest.raises(ScheduleNotFound):
        delete_schedule("b-sched", harness.ports, actor="alice")
    with pytest.raises(ScheduleNotFound):
        get_schedule("b-sched", harness.ports)


def _run_input(time: str) -> dict[str, Any]:
    spec = ScheduleDefinition.model_validate(definition()).model_dump(mode="json")
    return {"schedule": spec, "scheduled_time": time, "created_by": "alice"}


@pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time left")  # no Lambda context here
def test_firing_twice_on_one_date_requests_once(harness: Harness) -> None:
    persistence = harness.ports.idempotency_store()
    harness.clock.now = datetime(2026, 12, 7, 11, 30, tzinfo=UTC)

    first = run_schedule(_run_input("2026-12-07T11:30:00Z"), harness.ports, persistence=persistence)
    retry = run_schedule(_run_input("2026-12-07T11:30:00Z"), harness.ports, persistence=persistence)
    later = run_schedule(_run_input("2026-12-07T17:30:00Z"), harness.ports, persistence=persistence)
    next_week = run_schedule(_run_input("2026-12-14T11:30:00Z"), harness.ports, persistence=persistence)

    assert first == {"request_id": "weekly-eval-2026-12-07", "status": "REQUESTED"}
    assert retry == first  # the same firing delivered again: the same answer
    assert later == {"request_id": "weekly-eval-2026-12-07", "status": "DUPLICATE"}
    assert next_week == {"request_id": "weekly-eval-2026-12-14", "status": "REQUESTED"}
    puts = harness.events.puts
    assert [detail["request"]["request_id"] for _, detail in puts] == [
        "weekly-eval-2026-12-07",
        "weekly-eval-2026-12-14",
    ]
    assert puts[0][1]["request"]["earliest_start"] == "2026-12-08T11:30:00Z"
    submitted = harness.ledger.get("weekly-eval-2026-12-07", SUBMITTED)
    assert submitted is not None
    assert submitted["actor"] == "schedule:weekly-eval"


def test_a_run_whose_start_is_past_fails_loudly(harness: Harness) -> None:
    harness.clock.now = datetime(2026, 12, 9, 0, 0, tzinfo=UTC)
    with pytest.raises(InvalidRequest) as caught:
        run_schedule(_run_input("2026-12-07T11:30:00Z"), harness.ports, persistence=None)
    assert [e.field for e in caught.value.errors] == ["earliest_start"]
    assert harness.events.puts == []
