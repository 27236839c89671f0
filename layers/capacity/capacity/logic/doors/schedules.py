"""Recurring reservations: ``POST/GET/DELETE /schedules`` and the ``scheduled_request`` function.

Over 400 lines: the schedules API and the function the schedules fire share their validation.

A schedule is an EventBridge Scheduler schedule (``cron(...)`` or ``rate(...)`` with an explicit IANA time
zone) in the application's request schedule group. Its target is the ``scheduled_request`` function with
``Input`` = ``{"schedule": <definition>, "scheduled_time": "<aws.scheduler.scheduled-time>"}``: Scheduler
replaces the placeholder with the firing's time (Scheduler user guide, "Adding context attributes"), so the
static input still tells each run apart. Each run turns the stored request template into a request whose
window starts ``start_after_hours`` after the firing and lasts ``window_hours``, with
``request_id = <name>-<YYYY-MM-DD>`` (the firing's date in the schedule's time zone), and submits it like
``POST /reservations`` (Powertools idempotency on ``request_id``, then the ledger's conditional ``REQUEST``
put): a schedule that fires twice on one date reserves once.

Validation at creation: the name, the expression (AWS's six-field cron syntax or ``rate()``; ``at()``
is refused, a one-time reservation is a ``POST /reservations``), the time zone, and the request template
through :func:`~capacity.request.parse_request` with the window of a firing "now"; a template may not keep
looking until one instant (``search_until``) nor bring one reservation (``training_plan_arn``,
``capacity_reservation_id``): every run after the first would be refused when it fires.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ConfigDict, Field, StringConstraints, field_validator

from capacity.base import Model
from capacity.errors import (
    DuplicateRequest,
    FieldError,
    InvalidRequest,
    NotPermitted,
    OutOfScope,
    ScheduleExists,
    ScheduleNotFound,
)
from capacity.jsonsafe import check_depth
from capacity.logic.doors import api
from capacity.logic.governance.checks import require_in_scope
from capacity.logic.governance.policy import Viewer, may_act, resolve_team
from capacity.ports import Ports
from capacity.request import parse_request, require_not_a_successor
from capacity.timeutil import as_utc, iso_z, parse_utc
from capacity.validation import parse_model
from capacity.wire import StrictBool, StrictInt

MAX_LIST_LIMIT = 100
MAX_START_AFTER_HOURS = 8 * 7 * 24
"""Training plans and capacity blocks are offered up to about 8 weeks ahead (AWS_FACTS.md)."""
_TEMPLATE_EXCLUDED = ("earliest_start", "latest_end", "request_id")
_ONE_INSTANT_OR_RESERVATION = {
    "search_until": "is one instant, which every run after it would find in the past (each run would be "
    "refused): leave it out; each run searches once",
    "serve_until": "is one instant, which every run after it would find in the past (each run would be "
    "refused): leave it out; each run serves its own window (PATCH /reservations/{id} sets serve_until on a "
    "run's reservation)",
    "training_plan_arn": "names one reservation, which cannot serve every run (it is in use or over after "
    "the first): leave it out; each run buys its own",
    "capacity_reservation_id": "names one reservation, which cannot serve every run (it is in use or over "
    "after the first): leave it out; each run buys its own",
}
"""Request fields that hold for one reservation only (keep looking's deadline, keep serving's end, a brought
reservation, issue 17): refused in a recurring template, or every run after the first would be refused when it
fires."""

ScheduleName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,52}$")]
"""1-53 letters, digits and hyphens: ``<name>-<YYYY-MM-DD>`` must stay a valid 64-character request id."""


class ScheduleDefinition(Model):
    """Body of ``POST /schedules``: when to fire and what to request each time.

    ``schedule_expression``: ``cron(minutes hours day-of-month month day-of-week year)`` (AWS syntax, one
    of the day fields ``?``) or ``rate(N unit)``; ``timezone``: IANA name (``UTC``, ``Europe/Paris``) the
    cron is read in; ``start_after_hours``: the request's ``earliest_start`` is the firing time plus this
    (0..1344 h); ``window_hours``: ``latest_end - earliest_start`` (default the template's
    ``duration_hours``); ``request``: a reservation request without ``earliest_start``, ``latest_end``
    and ``request_id``; ``enabled``: false creates it disabled.
    """

    model_config = ConfigDict(extra="forbid")

    name: ScheduleName
    schedule_expression: str = Field(min_length=1, max_length=256, examples=["cron(30 11 ? * MON *)"])
    timezone: str = Field(min_length=1, max_length=50, examples=["UTC"])
    start_after_hours: StrictInt = Field(default=0, ge=0, le=MAX_START_AFTER_HOURS)
    window_hours: StrictInt | None = Field(default=None, ge=24, le=4368 + MAX_START_AFTER_HOURS)
    description: str | None = Field(default=None, max_length=256)
    enabled: StrictBool = True
    request: dict[str, Any] = Field(
        description="a reservation request (as for POST /reservations) without earliest_start, latest_end "
        "and request_id"
    )

    @field_validator("schedule_expression")
    @classmethod
    def _expression(cls, value: str) -> str:
        problem = expression_problem(value)
        if problem:
            raise ValueError(problem)
        return value.strip()

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"{value!r} is not an IANA time zone: use a name such as UTC, Europe/Paris or "
                "America/New_York"
            ) from exc
        return value


# --------------------------------------------------------------------------------------- expressions

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")  # AWS: 1 = Sunday
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minutes", 0, 59, {}),
    ("hours", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate(_MONTHS, 1)}),
    ("day-of-week", 1, 7, {d: i for i, d in enumerate(_WEEKDAYS, 1)}),
    ("year", 1970, 2199, {}),
)


def _value_ok(token: str, low: int, high: int, names: Mapping[str, int]) -> bool:
    if token.upper() in names:
        return True
    return token.isdigit() and low <= int(token) <= high


def _cron_field_problem(text: str, index: int) -> str | None:
    field, low, high, names = _FIELDS[index]
    if text == "*" or (text == "?" and index in (2, 4)):
        return None
    for part in text.split(","):
        upper = part.upper()
        if index == 2 and (upper in ("L", "LW") or re.fullmatch(r"L-\d{1,2}", upper)):
            continue
        if index == 2 and re.fullmatch(r"\d{1,2}W", upper) and _value_ok(upper[:-1], low, high, names):
            continue
        if index == 4 and upper.endswith("L") and _value_ok(upper[:-1], low, high, names):
            continue
        if index == 4 and "#" in upper:
            day, _, nth = upper.partition("#")
            if _value_ok(day, low, high, names) and nth in {"1", "2", "3", "4", "5"}:
                continue
            return f"{field} {part!r}: use <day>#<1-5>, e.g. MON#1 for the first Monday"
        base, slash, step = part.partition("/")
        if slash and not (step.isdigit() and int(step) > 0):
            return f"{field} {part!r}: the increment after / must be a positive number"
        bounds = base.split("-") if base != "*" else []
        if len(bounds) > 2 or not all(_value_ok(b, low, high, names) for b in bounds):
            return f"{field} {part!r}: use values {low}-{high}" + (
                f" or names like {next(iter(names))}" if names else ""
            )
    return None


def expression_problem(expression: str) -> str | None:  # noqa: PLR0911 - one return per rule
    """What is wrong with a recurring schedule expression (None when it is valid).

    Follows "Schedule types on EventBridge Scheduler" (Scheduler user guide): ``cron()`` has six fields
    (minutes hours day-of-month month day-of-week year) with exactly one day field ``?``; ``rate()`` takes
    a positive value and ``minute(s)``, ``hour(s)`` or ``day(s)``.
    """
    text = expression.strip()
    match = re.fullmatch(r"(at|rate|cron)\((.*)\)", text)
    if match is None:
        return "use cron(minutes hours day-of-month month day-of-week year), e.g. cron(30 11 ? * MON *)"
    kind, body = match.groups()
    if kind == "at":
        return "at() fires once: submit a one-time reservation with POST /reservations instead"
    if kind == "rate":
        rate = re.fullmatch(r"\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*", body)
        if rate is None or int(rate.group(1)) == 0:
            return "rate() needs a positive value and a unit: rate(7 days)"
        if (int(rate.group(1)) == 1) == rate.group(2).endswith("s"):
            return "rate(): use '1 day' or 'N days' (singular for 1, plural otherwise)"
        return None
    fields = body.split()
    if len(fields) != 6:
        return f"cron() needs 6 fields (minutes hours day-of-month month day-of-week year), got {len(fields)}"
    if (fields[2] == "?") == (fields[4] == "?"):
        return "cron(): exactly one of day-of-month and day-of-week must be ?, e.g. cron(30 11 ? * MON *)"
    for index, text_field in enumerate(fields):
        problem = _cron_field_problem(text_field, index)
        if problem:
            return f"cron(): {problem}"
    return None


# ------------------------------------------------------------------------------------------- requests


def request_for_run(definition: ScheduleDefinition, scheduled_time: datetime) -> dict[str, Any]:
    """The reservation request of the run firing at ``scheduled_time`` (UTC).

    ``request_id`` is ``<name>-<YYYY-MM-DD>``, the date in the schedule's time zone; ``earliest_start``
    is ``scheduled_time + start_after_hours``, ``latest_end`` that plus ``window_hours``.
    """
    when = as_utc(scheduled_time)
    local_date = when.astimezone(ZoneInfo(definition.timezone)).date()
    duration = definition.request.get("duration_hours")
    window = definition.window_hours or (duration if isinstance(duration, int) else 24)
    start = when + timedelta(hours=definition.start_after_hours)
    return {
        **definition.request,
        "request_id": f"{definition.name}-{local_date.isoformat()}",
        "earliest_start": iso_z(start),
        "latest_end": iso_z(start + timedelta(hours=window)),
    }


def _validate_template(definition: ScheduleDefinition, now: datetime) -> None:
    present = [key for key in _TEMPLATE_EXCLUDED if key in definition.request]
    once = [key for key in _ONE_INSTANT_OR_RESERVATION if definition.request.get(key) is not None]
    if present or once:
        raise InvalidRequest(
            [
                FieldError(
                    f"request.{key}",
                    "leave it out: each run sets the window from the firing time and the id "
                    f"{definition.name}-<YYYY-MM-DD>",
                )
                for key in present
            ]
            + [FieldError(f"request.{key}", _ONE_INSTANT_OR_RESERVATION[key]) for key in once]
        )
    try:
        require_not_a_successor(parse_request(request_for_run(definition, now), now=None))
    except InvalidRequest as exc:
        raise InvalidRequest([FieldError(_template_field(e.field), e.message) for e in exc.errors]) from exc


def _require_template_in_scope(definition: ScheduleDefinition, ports: Ports) -> None:
    """Every run would be refused outside the allowed buckets and instance roles: refuse the schedule.

    Raises:
        OutOfScope: naming ``request.<field>`` (an API 400).
    """
    request = parse_request(request_for_run(definition, ports.clock()), now=None)
    try:
        require_in_scope(request, ports)
    except OutOfScope as exc:
        raise OutOfScope([FieldError(_template_field(e.field), e.message) for e in exc.errors]) from exc


def _template_field(field: str) -> str:
    if field == "latest_end":
        return "window_hours"
    if field == "request":
        return "request"
    return f"request.{field}"


def _view(schedule: Mapping[str, Any]) -> dict[str, Any]:
    definition = _definition(schedule)
    created = schedule.get("CreationDate")
    return {
        "name": definition.name,
        "schedule_expression": str(schedule.get("ScheduleExpression") or definition.schedule_expression),
        "timezone": str(schedule.get("ScheduleExpressionTimezone") or definition.timezone),
        "state": str(schedule.get("State") or "ENABLED"),
        "start_after_hours": definition.start_after_hours,
        "window_hours": definition.window_hours,
        "description": definition.description,
        "request": definition.request,
        "request_id_pattern": f"{definition.name}-<YYYY-MM-DD>",
        "created_at": iso_z(created) if isinstance(created, datetime) else None,
        "arn": schedule.get("Arn"),
        "links": {"self": f"/schedules/{definition.name}"},
    }


def _definition(schedule: Mapping[str, Any]) -> ScheduleDefinition:
    target = schedule.get("Target") or {}
    payload = json.loads(str(target.get("Input") or "{}"))
    return ScheduleDefinition.model_validate(payload["schedule"])


# ---------------------------------------------------------------------------------------------- doors


def create_schedule(body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """Validate a :class:`ScheduleDefinition` and create its EventBridge Scheduler schedule.

    Returns:
        The schedule as ``GET /schedules/{name}`` shows it.

    Raises:
        InvalidRequest: the definition or its request template is invalid (fields named).
        OutOfScope: the template names a model bucket or an instance role the deployment does not allow.
        ScheduleExists: a schedule with this name exists (delete it first).
        NotPermitted: ``actor`` (its owner) is in no team, or not in the template's ``team`` (403).
    """
    definition = parse_model(ScheduleDefinition, body)
    _validate_template(definition, ports.clock())
    _require_template_in_scope(definition, ports)
    asked = definition.request.get("team") if isinstance(definition.request, Mapping) else None
    resolve_team(actor, ports, asked if isinstance(asked, str) else None)  # its owner's team pays each run
    target_input = json.dumps(
        {
            "schedule": definition.model_dump(mode="json"),
            "scheduled_time": "<aws.scheduler.scheduled-time>",
            "created_by": actor,
        },
        separators=(",", ":"),
    )
    schedules = ports.request_schedules
    created = schedules.create(
        name=definition.name,
        expression=definition.schedule_expression,
        timezone=definition.timezone,
        target_input=target_input,
        description=definition.description or f"Recurring reservation {definition.name} (by {actor})",
        enabled=definition.enabled,
    )
    if not created:
        raise ScheduleExists(
            f"schedule {definition.name!r} already exists: DELETE /schedules/{definition.name} first or "
            "choose another name"
        )
    stored = schedules.get(definition.name)
    if stored is None:  # pragma: no cover - it was just created
        raise ScheduleNotFound(f"schedule {definition.name!r} vanished right after creation")
    return _view(stored)


def get_schedule(name: str, ports: Ports, *, viewer: Viewer | None = None) -> dict[str, Any]:
    """The schedule ``name``, if ``viewer`` may see it (its owner, the team its runs are charged to:
    :class:`~capacity.logic.governance.policy.Viewer`; None: an internal read, unscoped).

    Raises:
        ScheduleNotFound: there is none, or ``viewer`` may not see it (404 too: existence is not revealed).
    """
    stored = ports.request_schedules.get(name)
    if stored is None or not _shown(stored, ports, viewer):
        raise ScheduleNotFound(f"no schedule {name!r}")
    return _view(stored)


def list_schedules(
    ports: Ports, *, limit: int = 20, next_token: str | None = None, viewer: Viewer | None = None
) -> dict[str, Any]:
    """The schedules ``viewer`` may see (None: all), by name: ``{"schedules": [...], "next_token"}`` (None
    after the last page; a page may hold fewer than ``limit`` while ``next_token`` is set).

    Raises:
        InvalidRequest: ``limit`` not in 1..100 or a ``next_token`` this API did not issue.
    """
    if not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidRequest([FieldError("limit", f"must be between 1 and {MAX_LIST_LIMIT}")])
    after = _decode_token(next_token) if next_token else None
    names = [name for name in ports.request_schedules.names() if after is None or name > after]
    page = names[:limit]
    views = [view for view in (_safe_get(ports, name, viewer) for name in page) if view is not None]
    more = len(names) > limit
    return {"schedules": views, "next_token": _encode_token(page[-1]) if more and page else None}


def _safe_get(ports: Ports, name: str, viewer: Viewer | None) -> dict[str, Any] | None:
    stored = ports.request_schedules.get(name)  # deleted between the listing and now: skip it
    return _view(stored) if stored is not None and _shown(stored, ports, viewer) else None


def _owner_and_team(stored: Mapping[str, Any], ports: Ports) -> tuple[str | None, str | None]:
    """A schedule's owner (who created it) and the team its runs are charged to (the template's ``team``,
    else the owner's only team; None when neither is known)."""
    payload = json.loads(str((stored.get("Target") or {}).get("Input") or "{}"))
    owner = payload.get("created_by")
    owner = owner if isinstance(owner, str) else None
    asked = (payload.get("schedule") or {}).get("request", {}).get("team")
    team = asked if isinstance(asked, str) else None
    if team is None and owner is not None:
        with contextlib.suppress(NotPermitted):  # the owner left every team: only its owner may
            team = resolve_team(owner, ports, None)
    return owner, team


def _shown(stored: Mapping[str, Any], ports: Ports, viewer: Viewer | None) -> bool:
    if viewer is None or viewer.teams is None:
        return True
    owner, team = _owner_and_team(stored, ports)
    return viewer.sees(team=team, requester=owner)


def _encode_token(name: str) -> str:
    return base64.urlsafe_b64encode(f"schedule:{name}".encode()).decode().rstrip("=")


def _decode_token(token: str) -> str:
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, ValueError) as exc:
        raise _bad_token() from exc
    if not text.startswith("schedule:"):
        raise _bad_token()
    return text.removeprefix("schedule:")


def _bad_token() -> InvalidRequest:
    return InvalidRequest(
        [
            FieldError(
                "next_token", "is not a token this API issued: pass next_token from the previous page as is"
            )
        ]
    )


def delete_schedule(name: str, ports: Ports, *, actor: str) -> dict[str, Any]:
    """Delete the schedule (reservations it already requested are not touched), by ``actor``: its owner, a
    member of the team its runs are charged to or one of that team's approvers
    (:func:`~capacity.logic.governance.policy.may_act`, as for a cancel): an approver of another team never
    stops it.

    Returns:
        ``{"name", "deleted": true}``.

    Raises:
        ScheduleNotFound: there is none.
        NotPermitted: ``actor`` may not delete it (403; nothing deleted).
    """
    stored = ports.request_schedules.get(name)
    if stored is None:
        raise ScheduleNotFound(f"no schedule {name!r}")
    _require_may_delete(name, stored, ports, actor=actor)
    if not ports.request_schedules.delete(name):
        raise ScheduleNotFound(f"no schedule {name!r}")
    return {"name": name, "deleted": True}


def _require_may_delete(name: str, stored: Mapping[str, Any], ports: Ports, *, actor: str) -> None:
    """Refuse ``actor`` unless it owns schedule ``name`` or may act for the team its runs are charged to
    (the template's ``team``, else the owner's only team).

    Raises:
        NotPermitted: the message names who may.
    """
    owner, team = _owner_and_team(stored, ports)
    try:
        may_act(actor, owner, team, ports, doing="delete")
    except NotPermitted:
        raise NotPermitted(
            f"{actor} may not delete schedule {name!r}: only its owner ({owner or 'unknown'}), the "
            f"members of team {team or '(none)'} and its approvers may"
        ) from None


# --------------------------------------------------------------------------------------------- a run


class ScheduledRun(Model):
    """The ``scheduled_request`` function's input (the schedule's target ``Input`` after substitution)."""

    model_config = ConfigDict(extra="ignore")

    schedule: ScheduleDefinition
    scheduled_time: str
    created_by: str | None = None


def run_schedule(
    event: Any,
    ports: Ports,
    *,
    persistence: BasePersistenceLayer | None,
    lambda_context: LambdaContext | None = None,
) -> dict[str, Any]:
    """Submit the reservation of one firing (``ReservationRequested`` once per schedule and date).

    Returns:
        ``{"request_id", "status"}``: ``REQUESTED`` when submitted (or re-answered by idempotency for the
        same firing), ``DUPLICATE`` when another firing on the same date already submitted it.

    Raises:
        InvalidRequest: the input is not a schedule run, or the request is no longer valid (e.g. the
            template's start is now in the past); Scheduler retries and then drops it, so the ledger
            holds nothing for that date.
    """
    check_depth(event, field="event")
    run = parse_model(ScheduledRun, event)
    try:
        scheduled = parse_utc(run.scheduled_time)
    except ValueError as exc:
        raise InvalidRequest(
            [
                FieldError(
                    "scheduled_time", f"{run.scheduled_time!r} is not a timestamp like 2026-12-07T11:30:00Z"
                )
            ]
        ) from exc
    request = request_for_run(run.schedule, scheduled)
    try:
        result = api.submit_reservation(
            request,
            ports,
            persistence=persistence,
            lambda_context=lambda_context,
            actor=f"schedule:{run.schedule.name}",
            # The schedule's owner requests (and its team pays), never the template's requester field.
            requester=run.created_by or f"schedule:{run.schedule.name}",
        )
    except DuplicateRequest:
        return {"request_id": request["request_id"], "status": "DUPLICATE"}
    return {"request_id": result["request_id"], "status": result["status"]}
