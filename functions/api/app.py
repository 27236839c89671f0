"""Lambda ``api``: the REST API (API Gateway REST proxy, IAM auth) over reservations, plans and schedules.

Over 400 lines: the routes are the OpenAPI document's source (``make openapi``): one resolver sees them all;
each route is a few lines over ``capacity.logic.doors.api``.

Powertools ``APIGatewayRestResolver`` with data validation: bodies, path and query parameters and responses
are pydantic models, and the OpenAPI document (``docs/openapi.json``, ``make openapi``) is generated from
this module by :func:`openapi_json`. Routes (docs/api.md):

- ``POST /plans``: dry run across regions -> 200 :class:`~capacity.logic.steps.plans.PlanResult`; buys
  nothing.
- ``POST /reservations`` -> 202 ``{"request_id", "status": "REQUESTED", "links"}``.
- ``GET /reservations?status=&limit=&next_token=`` -> 200 one page, newest first.
- ``GET /reservations/{request_id}`` -> 200 state, request, purchase, history.
- ``POST /reservations/{request_id}/approval`` -> 200; the caller's IAM identity is recorded.
- ``DELETE /reservations/{request_id}`` -> 202 cancel and release.
- ``POST /reservations/{request_id}/extensions`` -> 200 the extension offerings (dry run, no ``offering_id``),
  or 202 ``ExtensionRequested`` put for ``offering_id`` (issue 17), or 202 ``APPROVAL_REQUIRED`` above the
  approval threshold.
- ``POST /reservations/{request_id}/extensions/{extension_id}/approval`` -> 200; the caller's IAM identity is
  recorded (an approver of the team, never a requester).
- ``PATCH /reservations/{request_id}`` (``serve_until``, ``rollover_lead_hours``) -> 200: keep serving until
  then (issue 17), the same callers as an extension.
- ``POST /schedules`` -> 201; ``GET /schedules``, ``GET /schedules/{name}``, ``DELETE /schedules/{name}``.
- ``GET /costs?team=&month=&group_by=`` -> 200 paid, used and on-demand equivalent (``Accept: text/csv``).
- Admin (a separate IAM permission, ``/admin/*``): ``PUT|GET|DELETE /admin/teams/{team}``,
  ``GET /admin/teams``, ``PUT /admin/account``, ``GET|PUT /admin/admins``, ``GET|PUT /admin/people``.

Errors: 400 ``{"errors": [{"field", "message"}]}`` when the request breaks the schema (types, required
fields, bounds, field rules); 413 when the body exceeds :data:`MAX_BODY_BYTES`; 422 (same body) when it
matches the schema but cannot be carried out (a start already in the past, a schedule's request template
that is not a valid request, a ``next_token`` this API did not issue); 404/409 ``{"message"}``; 503
``{"message"}`` when AWS throttles beyond retries.

Env: LEDGER_TABLE, EVENT_BUS_NAME, IDEMPOTENCY_TABLE, REQUEST_SCHEDULE_GROUP,
SCHEDULED_REQUEST_FUNCTION_ARN, REQUEST_SCHEDULER_ROLE_ARN.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from types import UnionType
from typing import Annotated, Any, Literal

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import (
    RequestUnsupportedContentType,
    RequestValidationError,
)
from aws_lambda_powertools.event_handler.openapi.params import Body, Path, Query
from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
)
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity import jsonsafe
from capacity.adapters import clients
from capacity.errors import (
    BudgetExceeded,
    DuplicateRequest,
    ExtensionRefused,
    FieldError,
    InvalidRequest,
    NotAwaitingApproval,
    NotPermitted,
    OutOfScope,
    PaidReservation,
    ReservationClosed,
    ReservationNotFound,
    RetryableAwsError,
    ScheduleExists,
    ScheduleNotFound,
    TeamLimitExceeded,
    TeamNotFound,
)
from capacity.logic.doors import api, extension_request, schedules, serve_until
from capacity.logic.doors.api import ApprovalDecision
from capacity.logic.doors.extension_request import ExtensionBody, ExtensionDecision
from capacity.logic.doors.schedules import ScheduleDefinition
from capacity.logic.doors.serve_until import ServeUntilBody
from capacity.logic.governance import costs, policy
from capacity.logic.steps import plans
from capacity.logic.steps.plans import PlanResult
from capacity.ports import Ports
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.rest_bodies import (
    AccountView,
    ApprovalResult,
    CancelAccepted,
    CostReport,
    ErrorsBody,
    GatewayDeniedBody,
    MessageBody,
    PaidReservationBody,
    ReservationAccepted,
    ReservationList,
    ReservationView,
    ScheduleDeleted,
    ScheduleList,
    ScheduleView,
    ServeUntilResult,
    TeamDeleted,
    TeamList,
    TeamView,
)
from capacity.settings import Settings
from capacity.teams import TEAM_NAME_PATTERN, AccountPolicy, Principals, TeamPolicyBody

logger = Logger()
app = APIGatewayRestResolver(
    enable_validation=True,
    response_validation_error_http_code=HTTPStatus(500),  # a response off its schema is our bug
    json_body_deserializer=jsonsafe.loads,  # money is never a float; nesting is bounded
)

API_TITLE = "Capacity Orchestrator API"
API_VERSION = "1.0.0"
MAX_BODY_BYTES = 64 * 1024
"""Bodies above 64 KiB are refused with 413 (a request with ten models is under 8 KiB)."""
REQUEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$"
SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9-]{0,52}$"

RequestId = Annotated[
    str, Path(pattern=REQUEST_ID_PATTERN, description="the reservation's request_id", max_length=64)
]
ScheduleName = Annotated[
    str, Path(pattern=SCHEDULE_NAME_PATTERN, description="the schedule's name", max_length=53)
]
Limit = Annotated[int, Query(ge=1, le=100, description="at most this many items per page")]
NextToken = Annotated[str | None, Query(max_length=2048, description="the previous page's next_token, as is")]

CONFLICTS: list[type[Exception]] = [
    ExtensionRefused,
    BudgetExceeded,
    TeamLimitExceeded,
    NotAwaitingApproval,
    ReservationClosed,
    DuplicateRequest,
    IdempotencyAlreadyInProgressError,
    ScheduleExists,
]


def _body(description: str, model: type[Any] | UnionType) -> OpenAPIResponse:
    """One documented answer; ``model`` may be a union of bodies (Powertools builds its schema)."""
    return {"description": description, "content": {"application/json": {"model": model}}}


INVALID = _body("the request breaks the schema: every problem, each naming the field and the fix", ErrorsBody)
TOO_LARGE = _body(f"the body is larger than {MAX_BODY_BYTES} bytes", ErrorsBody)
UNPROCESSABLE = _body("valid against the schema but cannot be carried out (see the messages)", ErrorsBody)
NOT_FOUND = _body("no such reservation or schedule", MessageBody)
CONFLICT = _body("the resource is not in a state that allows this", MessageBody)
UNAVAILABLE = _body("AWS throttled or failed beyond retries: try again", MessageBody)
FORBIDDEN = _body(
    "the caller may not do this: API Gateway's refusal (``Message``: no execute-api:Invoke grant for the"
    " route) or the function's (``message``: why and who may)",
    MessageBody | GatewayDeniedBody,
)
ERRORS = {
    400: INVALID,
    403: FORBIDDEN,
    404: NOT_FOUND,
    409: CONFLICT,
    413: TOO_LARGE,
    422: UNPROCESSABLE,
    503: UNAVAILABLE,
}
"""The documented error answers by status (the exception handlers below produce them)."""


def _responses(status: int, description: str, model: type[Any], *errors: int) -> dict[int, OpenAPIResponse]:
    """A route's documented answers: ``status`` with ``model``, then the ``errors`` statuses' bodies."""
    return {status: _body(description, model), **{code: ERRORS[code] for code in errors}}


def _ports() -> Ports:
    return Ports(Settings.from_env(require=("ledger_table",)))


def _identity() -> str:
    return api.caller(app.current_event.raw_event)


def _viewer(ports: Ports) -> policy.Viewer:
    """The authenticated caller and what it may read (:func:`capacity.logic.governance.policy.viewer`): every
    read route's one rule."""
    return policy.viewer(_identity(), ports)


def _as_sent(request: ReservationRequest) -> dict[str, Any]:
    """The validated request as a dict, without the ``strategy`` the model defaulted.

    The route's validation has no clock, so the model would default ``strategy`` to ``reserved``; the
    logic's :func:`~capacity.request.parse_request` defaults it again with the (virtual) ``now``, which
    makes a request whose window starts within the hour ``on-demand-first`` (issue 6).
    """
    body = request.model_dump(mode="json")
    sent = app.current_event.json_body
    if not isinstance(sent, Mapping) or sent.get("strategy") is None:
        body.pop("strategy", None)
    return body


def _json(status: int, body: Mapping[str, Any]) -> Response[Any]:
    return Response(status_code=status, content_type="application/json", body=dict(body))


# ------------------------------------------------------------------------------------------- plans


@app.post(
    "/plans",
    summary="Dry run: where is capacity, what would it cost, what would be bought",
    responses=_responses(
        200,
        "ranked offerings, the recommendation and what the caller's team refuses; nothing is bought",
        PlanResult,
        400,
        403,
        413,
        422,
        503,
    ),
    tags=["plans"],
)
def post_plan(request: Annotated[ReservationRequest, Body()]) -> PlanResult:
    """Search every region of the request and rank the offerings, judged by the caller's team; buys and
    stores nothing."""
    return plans.plan_reservation(_as_sent(request), _ports(), requester=_identity())


# ------------------------------------------------------------------------------------ reservations


@app.post(
    "/reservations",
    summary="Request GPU capacity and the models to serve on it",
    responses=_responses(
        202, "accepted: follow links.self", ReservationAccepted, 400, 403, 409, 413, 422, 503
    ),
    tags=["reservations"],
)
def post_reservation(request: Annotated[ReservationRequest, Body()]) -> Response[ReservationAccepted]:
    """Validate the request and put ``ReservationRequested`` once per ``request_id``."""
    ports = _ports()
    identity = _identity()
    result = api.submit_reservation(
        _as_sent(request),
        ports,
        persistence=ports.idempotency_store(),
        lambda_context=app.lambda_context,
        actor=identity,
        requester=identity,  # the authenticated caller, whatever the body says
    )
    logger.set_correlation_id(result["request_id"])
    return _json(202, result)


@app.get(
    "/reservations",
    summary="List reservations, newest first",
    responses=_responses(200, "one page", ReservationList, 400, 403, 422, 503),
    tags=["reservations"],
)
def list_reservations(
    status: Annotated[State | None, Query(description="only those currently in this state")] = None,
    team: Annotated[str | None, Query(pattern=TEAM_NAME_PATTERN, description="only this team's")] = None,
    limit: Limit = 20,
    next_token: NextToken = None,
) -> ReservationList:
    """One page of reservations (``next_token`` for the next)."""
    ports = _ports()
    page = api.list_reservations(
        ports, status=status, team=team, limit=limit, next_token=next_token, viewer=_viewer(ports)
    )
    return ReservationList.model_validate(page)


@app.get(
    "/reservations/<request_id>",
    summary="A reservation's state, purchase and history",
    responses=_responses(200, "the reservation", ReservationView, 400, 404, 503),
    tags=["reservations"],
)
def get_reservation(request_id: RequestId) -> ReservationView:
    """The reservation's state and history."""
    logger.set_correlation_id(request_id)
    ports = _ports()
    return ReservationView.model_validate(api.get_reservation(request_id, ports, viewer=_viewer(ports)))


@app.post(
    "/reservations/<request_id>/approval",
    summary="Approve or reject the pending purchase",
    responses=_responses(
        200,
        "the decision was passed to the waiting workflow",
        ApprovalResult,
        400,
        403,
        404,
        409,
        413,
        422,
        503,
    ),
    tags=["reservations"],
)
def post_approval(request_id: RequestId, decision: Annotated[ApprovalDecision, Body()]) -> ApprovalResult:
    """Approve or reject; the approver recorded is the caller's IAM identity, never the requester (403)."""
    logger.set_correlation_id(request_id)
    body = decision.model_dump(mode="json", exclude_none=True)
    ports = _ports()
    result = api.decide_approval(request_id, body, ports, identity=_identity(), viewer=_viewer(ports))
    return ApprovalResult.model_validate(result)


@app.delete(
    "/reservations/<request_id>",
    summary="Cancel and release now (a paid fee is not refunded: confirm=true)",
    responses={
        **_responses(
            202, "cancelled, and its successors; the release is requested", CancelAccepted, 400, 403, 404, 503
        ),
        409: _body(
            "the upfront fee is paid and confirm=true was not given (the sunk fee and what cancelling "
            "saves), "
            "or the reservation is already released",
            PaidReservationBody,
        ),
    },
    tags=["reservations"],
)
def delete_reservation(
    request_id: RequestId,
    confirm: Annotated[
        bool, Query(description="true: cancel even though the paid upfront fee is not refunded")
    ] = False,
) -> Response[CancelAccepted]:
    """Cancel the reservation and release whatever it holds; a paid reservation only with ``confirm=true``."""
    logger.set_correlation_id(request_id)
    ports, identity = _ports(), _identity()
    api.require_may_act(request_id, _viewer(ports), ports, doing="cancel")
    return _json(202, api.cancel_reservation(request_id, ports, actor=identity, confirm=confirm))


@app.post(
    "/reservations/<request_id>/extensions",
    summary="Extend the reservation in place: list the extension offerings, or buy one",
    responses={
        200: {"description": "dry run: the extension offerings with fee, new end and on-demand equivalent"},
        202: {"description": "ExtensionRequested: the extension is bought once, then its payment confirmed"},
        **{code: ERRORS[code] for code in (400, 403, 404, 409, 413, 422, 503)},
    },
    tags=["reservations"],
)
def post_extension(request_id: RequestId, body: Annotated[ExtensionBody, Body()]) -> Response[Any]:
    """Without ``offering_id``: the offerings (buys nothing). With it: the purchase is requested."""
    logger.set_correlation_id(request_id)
    sent = body.model_dump(mode="json", exclude_none=True)
    ports, identity = _ports(), _identity()
    api.require_may_act(request_id, _viewer(ports), ports, doing="extend")
    result = extension_request.request_extension(request_id, sent, ports, requester=identity)
    return _json(200 if result["dry_run"] else 202, result)


@app.post(
    "/reservations/<request_id>/extensions/<extension_id>/approval",
    summary="Approve or reject an extension above the approval threshold",
    responses={
        200: {
            "description": "decided: approved (the extension is requested) or rejected (nothing is bought)"
        },
        **{code: ERRORS[code] for code in (400, 403, 404, 409, 413, 422, 503)},
    },
    tags=["reservations"],
)
def post_extension_approval(
    request_id: RequestId,
    extension_id: Annotated[str, Path(min_length=1, max_length=256, description="the extension offering id")],
    decision: Annotated[ExtensionDecision, Body()],
) -> Response[Any]:
    """Approve or reject; the approver recorded is the caller's IAM identity, never a requester (403)."""
    logger.set_correlation_id(request_id)
    body = decision.model_dump(mode="json", exclude_none=True)
    ports = _ports()
    result = extension_request.decide_extension_approval(
        request_id, extension_id, body, ports, identity=_identity(), viewer=_viewer(ports)
    )
    return _json(200, result)


@app.patch(
    "/reservations/<request_id>",
    summary="Keep serving until a time: extend in place, else roll over to the next reservation",
    responses=_responses(
        200,
        "recorded: the orchestrator acts at the lead time before each end",
        ServeUntilResult,
        400,
        403,
        404,
        409,
        413,
        422,
        503,
    ),
    tags=["reservations"],
)
def patch_reservation(request_id: RequestId, body: Annotated[ServeUntilBody, Body()]) -> ServeUntilResult:
    """Set or move ``serve_until`` (null: no longer than the reservations bought) or the lead time; the
    requester's side and the team's approvers may (403 otherwise)."""
    logger.set_correlation_id(request_id)
    ports, identity = _ports(), _identity()
    api.require_may_act(request_id, _viewer(ports), ports, doing="keep serving")
    sent = body.model_dump(mode="json", exclude_unset=True)
    return ServeUntilResult.model_validate(
        serve_until.set_serve_until(request_id, sent, ports, actor=identity)
    )


# --------------------------------------------------------------------------------------- schedules


@app.post(
    "/schedules",
    summary="Create a recurring reservation (EventBridge Scheduler)",
    responses=_responses(201, "created", ScheduleView, 400, 409, 413, 422, 503),
    tags=["schedules"],
)
def post_schedule(definition: Annotated[ScheduleDefinition, Body()]) -> Response[ScheduleView]:
    """Validate the definition and its request template, then create the schedule."""
    body = definition.model_dump(mode="json")
    return _json(201, schedules.create_schedule(body, _ports(), actor=_identity()))


@app.get(
    "/schedules",
    summary="List the recurring reservations",
    responses=_responses(200, "one page", ScheduleList, 400, 422, 503),
    tags=["schedules"],
)
def list_schedules(limit: Limit = 20, next_token: NextToken = None) -> ScheduleList:
    """One page of schedules, by name."""
    ports = _ports()
    page = schedules.list_schedules(ports, limit=limit, next_token=next_token, viewer=_viewer(ports))
    return ScheduleList.model_validate(page)


@app.get(
    "/schedules/<name>",
    summary="One recurring reservation",
    responses=_responses(200, "the schedule", ScheduleView, 400, 404, 503),
    tags=["schedules"],
)
def get_schedule(name: ScheduleName) -> ScheduleView:
    """The schedule and its request template."""
    ports = _ports()
    return ScheduleView.model_validate(schedules.get_schedule(name, ports, viewer=_viewer(ports)))


@app.delete(
    "/schedules/<name>",
    summary="Delete a recurring reservation",
    responses=_responses(200, "deleted", ScheduleDeleted, 400, 403, 404, 503),
    tags=["schedules"],
)
def delete_schedule(name: ScheduleName) -> ScheduleDeleted:
    """Delete the schedule (its owner, its team's members and approvers); reservations it already requested
    are not touched."""
    return ScheduleDeleted.model_validate(schedules.delete_schedule(name, _ports(), actor=_identity()))


# ------------------------------------------------------------------------------------------- costs


@app.get(
    "/costs",
    summary="Paid, used and on-demand equivalent per team, instance type or region and month",
    responses={
        200: {
            "description": "the report (JSON), or its rows and totals as CSV with Accept: text/csv",
            "content": {
                "application/json": {"model": CostReport},
                "text/csv": {"schema": {"type": "string"}},
            },
        },
        **{code: ERRORS[code] for code in (400, 403, 503)},
    },
    tags=["costs"],
)
def get_costs(
    team: Annotated[str | None, Query(pattern=TEAM_NAME_PATTERN, description="only this team")] = None,
    month: Annotated[
        str | None, Query(pattern=r"^\d{4}-(0[1-9]|1[0-2])$", description="yyyy-mm (UTC)")
    ] = None,
    group_by: Annotated[
        Literal["team", "instance_type", "region"], Query(description="what a row is")
    ] = "team",
    limit: Annotated[
        int, Query(ge=1, le=1000, description="reservations listed per page (the rows count them all)")
    ] = 100,
    next_token: Annotated[
        str | None, Query(max_length=2048, description="the previous page's next_token")
    ] = None,
) -> Response[Any]:
    """Every reservation with a purchase, grouped, from the costs rollup (one item per team-month asked);
    ``totals.paid_usd`` is the sum of their fees; ``reservations`` pages by ``limit``."""
    try:
        ports = _ports()
        report = costs.cost_report(
            ports,
            team=team,
            month=month,
            group_by=group_by,
            limit=limit,
            next_token=next_token,
            viewer=_viewer(ports),
        )
    except ValueError as exc:
        return _problems(400, [FieldError("next_token", str(exc))])
    accept = (app.current_event.headers or {}).get("accept") or (app.current_event.headers or {}).get(
        "Accept"
    )
    if accept and "text/csv" in accept:
        return Response(status_code=200, content_type="text/csv", body=costs.report_csv(report))
    return _json(200, CostReport.model_validate(report).model_dump(mode="json"))


# ------------------------------------------------------------------------------------------- admin
# Guarded by a separate IAM permission: execute-api:Invoke on .../admin/* (deploy/admin-policy.json); the
# requester and approver policies do not grant it.

TeamName = Annotated[str, Path(pattern=TEAM_NAME_PATTERN, description="the team's name", max_length=63)]


@app.put(
    "/admin/teams/<team>",
    summary="Create or replace a team (admins: execute-api:Invoke on /admin/*)",
    responses=_responses(200, "the team, with this month's spend", TeamView, 400, 403, 413, 422, 503),
    tags=["admin"],
)
def put_team(team: TeamName, body: Annotated[TeamPolicyBody, Body()]) -> TeamView:
    """Members, approvers, monthly budget, approval threshold, types, regions and quotas of ``team``."""
    return TeamView.model_validate(
        policy.put_team(team, body.model_dump(mode="json", exclude_none=True), _ports(), actor=_identity())
    )


@app.get(
    "/admin/teams",
    summary="Every team and the account cap",
    responses=_responses(200, "the teams", TeamList, 400, 403, 503),
    tags=["admin"],
)
def list_teams() -> TeamList:
    """Every team with this month's spend, and the account-wide cap."""
    return TeamList.model_validate(policy.list_teams(_ports()))


@app.get(
    "/admin/teams/<team>",
    summary="One team",
    responses=_responses(200, "the team", TeamView, 400, 403, 404, 503),
    tags=["admin"],
)
def get_team(team: TeamName) -> TeamView:
    """The team, this month's spend and the instances it holds."""
    return TeamView.model_validate(policy.get_team(team, _ports()))


@app.delete(
    "/admin/teams/<team>",
    summary="Delete a team (its reservations are not touched)",
    responses=_responses(200, "deleted", TeamDeleted, 400, 403, 404, 503),
    tags=["admin"],
)
def delete_team(team: TeamName) -> TeamDeleted:
    """Its members can no longer request; what it bought stays."""
    return TeamDeleted.model_validate(policy.delete_team(team, _ports()))


@app.put(
    "/admin/account",
    summary="Set the account-wide monthly cap (USD)",
    responses=_responses(200, "the cap and this month's spend", AccountView, 400, 403, 413, 422, 503),
    tags=["admin"],
)
def put_account(body: Annotated[AccountPolicy, Body()]) -> AccountView:
    """Upfront fees all teams together may commit per UTC calendar month."""
    return AccountView.model_validate(
        policy.put_account(body.model_dump(mode="json"), _ports(), actor=_identity())
    )


@app.get(
    "/admin/admins",
    summary="Who sees every team's reservations, schedules and spend",
    responses=_responses(200, "the administrators (every list empty: nobody)", Principals, 400, 403, 503),
    tags=["admin"],
)
def get_admins() -> Principals:
    """The policy's ``admins``: ARN patterns, IAM principal tags, Slack users and user groups."""
    return Principals.model_validate(policy.get_admins(_ports()))


@app.put(
    "/admin/admins",
    summary="Replace who sees every team (admins: execute-api:Invoke on /admin/*)",
    responses=_responses(200, "the administrators now", Principals, 400, 403, 413, 422, 503),
    tags=["admin"],
)
def put_admins(body: Annotated[Principals, Body()]) -> Principals:
    """Set the policy's ``admins`` without seeding again; who may call the admin routes stays IAM's."""
    return Principals.model_validate(
        policy.put_admins(body.model_dump(mode="json"), _ports(), actor=_identity())
    )


@app.get(
    "/admin/people",
    summary="Whose identities are one person's (the four-eyes rule compares people)",
    responses=_responses(200, "the people", policy.PeopleBody, 400, 403, 503),
    tags=["admin"],
)
def get_people() -> policy.PeopleBody:
    """The policy's ``people``: each person's IAM principal ARN patterns and Slack users."""
    return policy.PeopleBody.model_validate(policy.get_people(_ports()))


@app.put(
    "/admin/people",
    summary="Replace whose identities are one person's (admins: execute-api:Invoke on /admin/*)",
    responses=_responses(200, "the people now", policy.PeopleBody, 400, 403, 413, 422, 503),
    tags=["admin"],
)
def put_people(body: Annotated[policy.PeopleBody, Body()]) -> policy.PeopleBody:
    """Name each person's identities once: a request made as one is never approved as another."""
    return policy.PeopleBody.model_validate(
        policy.put_people(body.model_dump(mode="json"), _ports(), actor=_identity())
    )


# ------------------------------------------------------------------------------------------ errors


def _problems(status: int, errors: Sequence[FieldError]) -> Response[Any]:
    return _json(status, {"errors": [error.as_dict() for error in errors]})


@app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
def invalid_schema(exc: RequestValidationError) -> Response[Any]:
    """400: the request breaks the schema (Powertools validation), with pydantic's errors made friendly."""
    return _problems(400, api.validation_problems(exc.errors()))


@app.exception_handler(RequestUnsupportedContentType)  # type: ignore[untyped-decorator]
def unsupported_content(exc: RequestUnsupportedContentType) -> Response[Any]:
    """400: the body is not JSON (``Content-Type`` other than ``application/json``)."""
    message = "is not supported: send the body as JSON with Content-Type: application/json"
    return _problems(400, [FieldError("Content-Type", message)])


@app.exception_handler(OutOfScope)  # type: ignore[untyped-decorator]
def out_of_scope(exc: OutOfScope) -> Response[Any]:
    """400: the request names a model bucket or an instance role this deployment does not allow."""
    return _problems(400, exc.errors)


@app.exception_handler(InvalidRequest)  # type: ignore[untyped-decorator]
def unprocessable(exc: InvalidRequest) -> Response[Any]:
    """422: the request matched the schema but the logic cannot carry it out (the messages say why)."""
    return _problems(422, exc.errors)


@app.exception_handler([ReservationNotFound, ScheduleNotFound, TeamNotFound])  # type: ignore[untyped-decorator]
def not_found(exc: Exception) -> Response[Any]:
    """404 for an unknown reservation or schedule."""
    return _json(404, {"message": str(exc)})


@app.exception_handler(CONFLICTS)  # type: ignore[untyped-decorator]
def conflict(exc: Exception) -> Response[Any]:
    """409: the resource is not in a state that allows this (or the same POST is in flight)."""
    return _json(409, {"message": str(exc) or type(exc).__name__})


@app.exception_handler(NotPermitted)  # type: ignore[untyped-decorator]
def forbidden(exc: NotPermitted) -> Response[Any]:
    """403: the caller may not do this (self-approval, not an approver or member of the team)."""
    return _json(403, {"message": str(exc)})


@app.exception_handler(PaidReservation)  # type: ignore[untyped-decorator]
def paid(exc: PaidReservation) -> Response[Any]:
    """409: the reservation's fee is paid; the answer names it and how to cancel anyway (``confirm=true``)."""
    return _json(409, {"message": str(exc), **exc.details})


@app.exception_handler(RetryableAwsError)  # type: ignore[untyped-decorator]
def unavailable(exc: RetryableAwsError) -> Response[Any]:
    """503: AWS throttled or failed beyond the retries, or no time was left to ask it; the same request may
    be sent again."""
    return _json(503, {"message": f"{exc}; try again in a few seconds"})


@app.exception_handler(IdempotencyPersistenceLayerError)  # type: ignore[untyped-decorator]
def unrecorded(exc: IdempotencyPersistenceLayerError) -> Response[Any]:
    """503: the idempotency store could not be read or written (the same faults, met by Powertools); the
    same request sent again is answered from what was recorded."""
    return _json(503, {"message": f"{exc}; try again in a few seconds"})


def _precheck(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """400 for a body that is not JSON, is marked base64 but is not, or nests deeper than
    :data:`capacity.jsonsafe.MAX_DEPTH` levels; 413 above :data:`MAX_BODY_BYTES`."""
    body = event.get("body")
    if not isinstance(body, str) or not body:
        return None
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type and media_type != "application/json" and not media_type.endswith("+json"):
        return _proxy(400, "Content-Type", f"{media_type!r} is not supported: send JSON as application/json")
    raw: bytes
    if event.get("isBase64Encoded"):
        try:
            raw = base64.b64decode(body, validate=True)
            raw.decode("utf-8")
        except (binascii.Error, ValueError) as exc:
            return _proxy(400, "body", f"is marked base64-encoded but is not valid base64 UTF-8: {exc}")
    else:
        raw = body.encode("utf-8")
    if len(raw) > MAX_BODY_BYTES:
        return _proxy(413, "body", f"is {len(raw)} bytes; the limit is {MAX_BODY_BYTES} bytes (64 KiB)")
    try:  # before anything parses it: json.loads recurses once per level and would crash the function
        jsonsafe.check_text(raw.decode("utf-8"), field="body")
    except InvalidRequest as exc:
        return _proxy(400, exc.errors[0].field, exc.errors[0].message)
    return None


def _proxy(status: int, field: str, message: str) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps({"errors": [{"field": field, "message": message}]}),
        "isBase64Encoded": False,
    }


def openapi_json() -> str:
    """The OpenAPI document of this API as Powertools generates it (``docs/openapi.json``)."""
    return app.get_openapi_json_schema(
        title=API_TITLE,
        version=API_VERSION,
        description=(
            "Short-term GPU capacity (SageMaker training plans for endpoints) and the models served on it. "
            "IAM-authenticated (SigV4). See docs/api.md."
        ),
    )


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Resolve the API Gateway proxy event."""
    early = _precheck(event)
    if early is not None:
        return early
    with clients.answer_within(context.get_remaining_time_in_millis):  # a 503 before API Gateway's 502
        return app.resolve(event, context)
