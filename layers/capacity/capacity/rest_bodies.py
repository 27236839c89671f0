"""The REST API's response bodies (``functions/api``): the OpenAPI document (``docs/openapi.json``, ``make
openapi``) is generated from them; the Slack door and the CLI read the same shapes.

Bodies forbid unknown fields (a response off its schema is our bug: the API answers 500). Money is a
decimal string (USD), timestamps ``YYYY-MM-DDTHH:MM:SSZ`` (UTC).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from capacity.base import Model
from capacity.wire import Money


class _Body(Model):
    model_config = ConfigDict(extra="forbid")


class FieldProblem(_Body):
    """One problem: ``field`` is a dotted path (``models.0.memory_mb``, ``limit``), ``message`` the fix."""

    field: str
    message: str


class ErrorsBody(_Body):
    """400/413/422: ``{"errors": [{"field", "message"}]}``, every problem found."""

    errors: list[FieldProblem]


class MessageBody(_Body):
    """404/409/503: ``{"message": "..."}``, a sentence saying what is wrong and what to do."""

    message: str


class GatewayDeniedBody(_Body):
    """403 from API Gateway itself, before the function runs: the caller's identity policy does not allow
    ``execute-api:Invoke`` on the route (``{"Message": "User: <arn> is not authorized to perform:
    execute-api:Invoke on resource: <route arn>"}``, header ``x-amzn-ErrorType: AccessDeniedException``;
    the policy to attach is in docs/deploy.md)."""

    Message: str


class ReservationLinks(_Body):
    """Paths (relative to the stage) to follow, approve or cancel a reservation."""

    self: str
    approval: str
    cancel: str


class ReservationAccepted(_Body):
    """202 of ``POST /reservations`` (and, with ``successors``, of ``DELETE /reservations/{id}``)."""

    request_id: str
    status: str = Field(description="REQUESTED after a POST; CANCELLED (or the final state) after a DELETE")
    links: ReservationLinks


class CancelAccepted(ReservationAccepted):
    """202 of ``DELETE /reservations/{id}``."""

    successors: list[str] | None = Field(
        default=None,
        description="the state of each successor requested to keep it serving (serve_until), cancelled with "
        "it; null when it had none",
    )


class HistoryEntry(_Body):
    """One state change: ``at`` UTC, ``actor`` the function or person, ``money_usd`` when money moved."""

    state: str
    at: str
    actor: str
    detail: dict[str, Any] = Field(default_factory=dict)
    money_usd: str | None = None


class ChainLink(_Body):
    """One reservation of a chain kept serving (``serve_until``, issue 17)."""

    request_id: str
    rollover_of: str | None = Field(default=None, description="the reservation it took over from")
    platform: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    region: str | None = None
    start_time: str | None = Field(default=None, description="UTC")
    end_time: str | None = Field(default=None, description="UTC, after its paid extensions")
    fee_usd: str = Field(description="upfront fee plus paid extensions, USD")
    state: str | None = None
    rolled_over_to: str | None = Field(default=None, description="the successor it handed over to")


class ServeUntilResult(_Body):
    """200 of ``PATCH /reservations/{id}``."""

    request_id: str
    serve_until: str | None = Field(description="UTC; null: no longer than the reservations bought so far")
    rollover_lead_hours: int
    next_check: str | None = Field(
        description="when the orchestrator extends or rolls over (UTC); null while nothing is bought"
    )
    chain: list[ChainLink]


class ReservationView(_Body):
    """200 of ``GET /reservations/{id}``: current state (null before the workflow records the request)."""

    request_id: str
    state: str | None
    request: dict[str, Any]
    purchase: dict[str, Any] | None = Field(
        description="what was bought, in its platform's own names: kind training-plan (training_plan_arn, "
        "training_plan_name), capacity-block (capacity_reservation_arn, capacity_reservation_id, "
        "availability_zone), on-demand-endpoint or on-demand-instances; platform, market, region, "
        "start_time, end_time (UTC), upfront_fee_usd (USD), brought; null before a purchase",
    )
    history: list[HistoryEntry]
    spend: dict[str, Any] | None = Field(
        default=None,
        description="spend so far (issue 16): paid, reserved and used instance-hours, on-demand equivalent "
        "of what ran, saving (negative: a loss), USD per used instance-hour; null before a purchase",
    )
    serve_until: str | None = Field(
        default=None, description="keep serving until this UTC time (issue 17; null: no longer than itself)"
    )
    rollover_lead_hours: int | None = Field(
        default=None, description="how long before an end the orchestrator extends or rolls over"
    )
    chain: list[ChainLink] = Field(
        default_factory=list,
        description="the reservations that keep the models served, first to last (this one among them): "
        "what, where, window, fee and state of each",
    )
    links: ReservationLinks


class ReservationListItem(_Body):
    """One reservation of ``GET /reservations``."""

    request_id: str
    state: str | None
    requester: str | None = None
    team: str | None = None
    instance_type: str | None = None
    instance_count: int | None = None
    earliest_start: str | None = None
    duration_hours: int | None = None
    dry_run: bool = False
    created_at: str
    links: ReservationLinks


class ReservationList(_Body):
    """200 of ``GET /reservations``: newest first; ``next_token`` is null after the last page."""

    reservations: list[ReservationListItem]
    next_token: str | None = None


class ApprovalResult(_Body):
    """200 of ``POST /reservations/{id}/approval``."""

    request_id: str
    approved: bool
    status: str = Field(description="APPROVED or REJECTED")
    approver: str


class ScheduleView(_Body):
    """A recurring reservation schedule (201 of ``POST /schedules``, 200 of ``GET /schedules/{name}``)."""

    name: str
    schedule_expression: str
    timezone: str
    state: str = Field(description="ENABLED or DISABLED")
    start_after_hours: int
    window_hours: int | None
    description: str | None
    request: dict[str, Any]
    request_id_pattern: str
    created_at: str | None
    arn: str | None
    links: dict[str, str]


class ScheduleList(_Body):
    """200 of ``GET /schedules``: by name; ``next_token`` is null after the last page."""

    schedules: list[ScheduleView]
    next_token: str | None = None


class ScheduleDeleted(_Body):
    """200 of ``DELETE /schedules/{name}``."""

    name: str
    deleted: bool


PlanOption = Literal["on-demand", "spot", "capacity-block", "training-plan", "none"]
"""The options of seed 000's decision framework (:mod:`capacity.recommendation`)."""


class OptionCost(_Body):
    """One option next to the recommended one: its cost in USD for the requested instance-hours (null when
    no price is known) and a note (where, when, what the figure means)."""

    option: PlanOption
    cost_usd: Money | None
    note: str


class PlanAdvice(_Body):
    """The option a ``POST /plans`` dry run recommends in seed 000's decision framework (DESIGN.md section 2):
    start with the least restrictive option (on demand now; spot for ``spot-ok`` EC2 work) and reserve (a
    ``training-plan`` on SageMaker, a ``capacity-block`` on EC2) when the start time or certainty requires
    it.

    ``cost_usd`` is the recommended option's cost (on demand: rate x instance_count x duration_hours in the
    first region; reserved: the upfront fee), ``on_demand_cost_usd`` the same instance-hours on demand,
    ``break_even_utilisation`` the best reservation's upfront fee / its on-demand equivalent (a fraction: it
    pays off only when used more than this share of its hours). ``on_demand_available`` is always null in a
    dry run (only launching tells, and a plan launches nothing); ``on_demand_check`` says how it was judged.
    ``text`` is the whole explanation as a paragraph (what Slack shows). Money is USD (decimal strings).
    """

    option: PlanOption
    reason: str
    cost_usd: Money | None
    on_demand_cost_usd: Money | None
    break_even_utilisation: Money | None
    on_demand_available: bool | None = None
    on_demand_check: str
    alternatives: list[OptionCost] = Field(default_factory=list)
    text: str


class TeamCheck(_Body):
    """What the caller's team says of a ``POST /plans`` dry run (issue 16): the same checks the reserve
    workflow's choose step rejects with (:func:`capacity.logic.governance.policy.admit`,
    :func:`~capacity.logic.governance.policy. judge_plan`), so a requester learns them before submitting.

    ``team`` is the team the request would be charged to (null when it names none that exists);
    ``problems`` what the team does not allow (a type, a region, more instances than its quota, a budget
    above its monthly budget or the account cap; each a sentence with the fix; empty: none);
    ``left_usd``/``left`` what the team (and the account) may still commit this UTC month, USD, and the
    sentence ("team ml-eval has $812.40 left in December 2026"); ``approval_above_usd`` the threshold the
    purchase would be judged by (the lower of the request's and the team's); ``refusal`` why the workflow
    would reject the request (null: the team allows it).
    """

    team: str | None
    problems: list[str] = Field(default_factory=list)
    left_usd: Money | None = None
    left: str | None = None
    approval_above_usd: Money | None = None
    refusal: str | None = None


class PaidReservationBody(_Body):
    """409 of ``DELETE /reservations/{id}`` without ``confirm=true`` when the upfront fee is paid (issue
    16) or its purchase call is on its way (``purchase_on_its_way``)."""

    message: str
    upfront_fee_usd: str | None = Field(default=None, description="the fee paid, USD; never refunded")
    refunded_usd: str | None = Field(default=None, description="always 0: purchases cannot be refunded")
    saves_usd: str | None = Field(
        default=None, description="what cancelling still saves, USD (0: the fee covers the whole reservation)"
    )
    what: str | None = None
    end_time: str | None = None
    purchase_on_its_way: bool | None = Field(
        default=None,
        description="true: nothing is bought yet but the purchase call is on its way (AWS may take the fee)",
    )
    extension_fees_usd: str | None = Field(default=None, description="its paid extensions, USD; not refunded")
    extensions_in_flight: list[dict[str, Any]] | None = Field(
        default=None,
        description="extensions whose payment AWS may still take: [{extension_id, upfront_fee_usd}]",
    )
    at_stake: list[dict[str, Any]] | None = Field(
        default=None,
        description="every reservation whose fees the cancel throws away (it, then the successors it stops), "
        "each with its request_id and the fields above",
    )
    not_refunded_usd: str | None = Field(default=None, description="the total of every fee at stake, USD")


class TeamView(_Body):
    """200 of the admin team routes: the policy, this month (``yyyy-mm``) and its spend and room (USD), and
    the instances of each family it holds now."""

    team: dict[str, Any]
    month: str
    spent_usd: str
    left_usd: str
    instances_held: dict[str, int]


class TeamList(_Body):
    """200 of ``GET /admin/teams``."""

    teams: list[TeamView]
    account: dict[str, Any] | None = None


class TeamDeleted(_Body):
    """200 of ``DELETE /admin/teams/{team}``."""

    name: str
    deleted: bool


class AccountView(_Body):
    """200 of ``PUT /admin/account``: the cap (USD) and this month's spend across teams."""

    monthly_cap_usd: str
    month: str
    spent_usd: str


class CostRow(_Body):
    """One group of ``GET /costs`` (or the totals): USD as decimal strings, instance-hours as decimals."""

    group: str
    month: str
    reservations: int
    paid_usd: str
    reserved_instance_hours: str
    used_instance_hours: str
    on_demand_equivalent_used_usd: str
    saving_usd: str


class CostReport(_Body):
    """200 of ``GET /costs`` (``Accept: text/csv`` answers the rows and totals as CSV)."""

    group_by: str
    team: str | None
    month: str | None
    rows: list[CostRow]
    totals: CostRow
    reservations: list[dict[str, Any]]
    next_token: str | None = None
    """The next page of ``reservations`` (``limit`` per page), null on the last; rows and totals count all."""
