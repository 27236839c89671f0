"""Inputs and outputs of the Lambda handlers: the contract with the state machines.

Over 400 lines: every handler's input and output in workflow order, as the state machines mirror them.

Field names are fixed (the ASL files select them with JSONPath); change them only together with
``statemachines/*.asl.json``. Inputs ignore unknown fields (a state may carry more than a step needs);
outputs are dumped with ``model_dump(mode="json")``: timestamps ``YYYY-MM-DDTHH:MM:SSZ``, money decimal
strings, never a ``datetime`` or ``Decimal`` object, never ``ResponseMetadata``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from capacity.base import Model
from capacity.errors import PlanFailed
from capacity.offerings import OfferingSummary
from capacity.platforms import PlatformName as Platform
from capacity.purchases import CapacityBlockPurchase, ReservedPurchase
from capacity.records import CostSummary
from capacity.wire import Money, UtcDatetime


class _In(Model):
    model_config = ConfigDict(extra="ignore")


StepPlatform = Platform | None
"""A step input's ``platform`` (the request's, from :class:`RecordRequestOutput` through the state): None
when the input lacks it, i.e. a state machine execution started on a definition from before ``platform``
was carried (executions keep the definition they started with); the step then reads the platform from
the ledger, as it did before."""


class _Out(Model):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The JSON-safe dict the handler returns."""
        return self.model_dump(mode="json")


# 1. record_request: in = the EventBridge event (see capacity.logic.intake)
class RecordRequestOutput(_Out):
    """``{"request_id", "platform", "duplicate", "regions", "dry_run", "resume_offering", "brought"}``;
    ``duplicate`` ends the workflow quietly; ``resume_offering`` (a resumed workflow whose request has a
    purchase intent) is the offering the intent names: the workflow goes straight back to the purchase.
    ``platform`` is the request's (``sagemaker`` | ``ec2``): the state machine keeps it at ``$.platform``,
    passes it to the steps that route by it and branches on it."""

    request_id: str
    platform: Platform
    duplicate: bool
    regions: list[str]
    dry_run: bool
    resume_offering: OfferingSummary | None = None
    brought: bool = False
    """The request brings its own reservation: the workflow adopts it (``AdoptReservation``) instead of
    searching, choosing and buying."""
    continued: bool = False
    """This execution continues a request that keeps looking (``resume_of.look``: continue-as-new before the
    history limit): it goes straight to look ``look``'s search."""
    look: int = 0
    """The look this execution starts at (0, or the continued one's next look)."""
    invalid: str | None = None
    """Why a request admitted at its door (202) and recorded now is refused (its delivery came after its
    window could start, say): the workflow records ``FAILED`` with this reason and tells the requester
    (``NotifyFailure``), so GET shows an outcome."""
    invalid_error: str = "InvalidRequest"
    """The error name ``FAILED`` records with ``invalid`` (the refusal's own: ``OutOfScope``,
    ``BroughtReservationRefused``...; ``InvalidRequest`` for a delivery too late for its window)."""


# 2. search_offerings
class SearchInput(_In):
    """``{"request_id", "region", "look"}`` (one Map iteration per region); ``look`` counts the searches of
    a request that keeps looking (0 first): each look's offerings are stored apart."""

    request_id: str
    region: str
    look: int = Field(default=0, ge=0)


class SearchOutput(_Out):
    """``{"region", "count", "feasible", "quota_error"}``: offerings stored, feasible ones, quota problem."""

    region: str
    count: int
    feasible: int
    quota_error: str | None = None


# 3. choose_offering
class ChooseInput(_In):
    """``{"request_id", "searches": [<search outputs>], "look"}`` (``look``: which search, 0 first)."""

    request_id: str
    searches: list[SearchOutput] = Field(default_factory=list)
    look: int = Field(default=0, ge=0)


Decision = Literal["NO_OFFERING", "REJECTED", "DRY_RUN", "APPROVAL_REQUIRED", "PURCHASE", "SEARCH_AGAIN"]


class ChooseOutput(_Out):
    """``{"decision", "reason", "offering" | null, "approval_timeout_seconds", "look", "next_look",
    "next_look_at" | null, "wait_seconds", "continue_as" | null}``.

    Keep looking (issue 17): ``SEARCH_AGAIN`` waits ``wait_seconds`` (at least 1; the ``SearchLater``
    task's timeout) until ``next_look_at`` (UTC) and searches again as look ``next_look``, in a fresh
    execution named ``continue_as`` when it is set (continue-as-new before the history limit, issue 31;
    :func:`capacity.logic.keep_looking.successor_name`). A dry run that found nothing fitting says in
    ``next_look_at`` when the workflow would look again (null otherwise).
    """

    decision: Decision
    reason: str
    offering: OfferingSummary | None
    approval_timeout_seconds: int
    look: int = 0
    next_look: int = 1
    next_look_at: UtcDatetime | None = None
    wait_seconds: int = 0
    continue_as: str | None = None


# 4. notify
class StepError(_In):
    """The ``{"Error", "Cause"}`` object a Step Functions ``Catch`` puts in ``ResultPath``."""

    Error: str = "States.TaskFailed"
    Cause: str | None = None


class DegradedStreak(_In):
    """How long a step has been failing on transient faults (kept in the ledger's ``DEGRADED#<time>`` items
    by ``notify`` kind ``degraded``). Times are ``YYYY-MM-DDTHH:MM:SSZ`` (``""`` before the first fault)."""

    state: str = ""
    since: str = ""
    last_at: str = ""
    attempt: int = Field(default=0, ge=0)
    told: int = Field(default=0, ge=0)
    """How many times a person was told about this streak."""


class DegradedOutput(_Out):
    """What the reserve workflow does about a step that keeps failing on transient faults.

    ``action``: ``wait`` (``wait_seconds``, then the step again), ``fail`` (no money at stake: the failure
    path) or ``end`` (the reservation ended or is being released: the release owns what is left); plus the
    streak (:class:`DegradedStreak`'s fields) for the next fault.
    """

    action: Literal["wait", "fail", "end"]
    wait_seconds: int
    state: str
    since: str
    last_at: str
    attempt: int
    told: int


class NotifyInput(_In):
    """``kind`` ``search_wait`` (``task_token``: the wait between two looks of a request that keeps looking,
    :mod:`capacity.logic.keep_looking`), ``offering_taken`` (``error``, ``look``: a look's offering was
    taken before the purchase; answers a :class:`ChooseOutput`), ``approval_request`` (``task_token``,
    ``plan``), ``approval_outcome`` (``approved``, ``reason``, optional ``error``), ``failure``
    (``error``; ``phase`` ``release`` when the release workflow itself failed, so no new release is
    requested), ``degraded`` (``state``: the step that keeps failing, ``error``: its last transient fault)
    or ``workflow_stopped`` (``workflow``: Step Functions' execution status change event, from the default
    bus; ``request_id`` empty)."""

    kind: Literal[
        "search_wait",
        "offering_taken",
        "approval_request",
        "approval_outcome",
        "failure",
        "degraded",
        "workflow_stopped",
    ]
    request_id: str
    state: str | None = None
    task_token: str | None = None
    plan: ChooseOutput | None = None
    approved: bool | None = None
    reason: str | None = None
    approver: str | None = None
    error: StepError | None = None
    phase: Literal["reserve", "release"] | None = None
    attempt_id: str | None = Field(default=None, max_length=256)
    """``failure`` of ``phase`` ``release``: the release execution's name (one record per attempt)."""
    workflow: dict[str, Any] | None = None
    """``workflow_stopped``: the EventBridge event (``detail``: ``executionArn``, ``status``, ``input``)."""
    entered_at: UtcDatetime | None = None
    """``approval_request``: when the approval state was entered (``$$.State.EnteredTime``, UTC): the
    approval timeout (``TimeoutSecondsPath``) counts from no earlier than this instant."""
    look: int = Field(default=0, ge=0)
    """``offering_taken``: the look whose offering was taken (its answer waits for look ``look + 1``)."""


class NotifyOutput(_Out):
    """``{"notified": true, "state": "<state recorded or current>"}``."""

    notified: bool
    state: str | None


# 5. purchase_capacity
class PurchaseInput(_In):
    """``{"request_id", "platform", "offering": {...}, "execution"}``: the offering chosen by
    ``choose_offering``, and the Step Functions execution that buys (``$$.Execution.Id``; it owns the
    purchase intent)."""

    request_id: str
    platform: StepPlatform = None
    offering: OfferingSummary
    execution: str | None = None


class AdoptInput(_In):
    """``{"request_id", "platform", "execution", "action": "adopt"}``: use the reservation the request brings
    (:func:`capacity.logic.purchase.adopt_reservation`); nothing is bought."""

    request_id: str
    platform: StepPlatform = None
    action: Literal["adopt"]
    execution: str | None = None


class _Bought(_Out):
    """What every reservation bought (or adopted) answers: region, start/end (UTC), upfront fee (USD)."""

    region: str
    start_time: UtcDatetime
    end_time: UtcDatetime
    upfront_fee_usd: Money


class TrainingPlanOutput(_Bought):
    """The training plan bought (or adopted): ``{"platform": "sagemaker", "training_plan_arn",
    "training_plan_name", "region", "start_time", "end_time", "upfront_fee_usd"}``."""

    platform: Literal["sagemaker"] = "sagemaker"
    training_plan_arn: str
    training_plan_name: str

    @property
    def arn(self) -> str:
        """The training plan's ARN (the events' resource)."""
        return self.training_plan_arn


class CapacityBlockOutput(_Bought):
    """The capacity block bought (or adopted): ``{"platform": "ec2", "capacity_reservation_arn",
    "capacity_reservation_id", "availability_zone", "region", "start_time", "end_time",
    "upfront_fee_usd"}``."""

    platform: Literal["ec2"] = "ec2"
    capacity_reservation_arn: str
    capacity_reservation_id: str
    availability_zone: str

    @property
    def arn(self) -> str:
        """The capacity reservation's ARN (the events' resource)."""
        return self.capacity_reservation_arn


PurchaseOutput = TrainingPlanOutput | CapacityBlockOutput
"""``purchase_capacity``'s output, kept at ``$.purchase``: the reservation in its platform's own names (issue
28); ``CheckPayment``/``CheckActivation`` pass it whole to ``wait_for_activation``, ``WaitForStart`` waits
for its ``start_time``."""


def purchase_output(record: ReservedPurchase) -> PurchaseOutput:
    """The output of the ``PURCHASE`` item's reservation (a training plan or a capacity block)."""
    if isinstance(record, CapacityBlockPurchase):
        return CapacityBlockOutput.model_validate(
            record.model_dump(include=set(CapacityBlockOutput.model_fields))
        )
    return TrainingPlanOutput.model_validate(record.model_dump(include=set(TrainingPlanOutput.model_fields)))


# 6. wait_for_activation
class TrainingPlanHeld(_In):
    """The training plan an activation poll reads (``$.purchase``: its other fields are ignored)."""

    platform: Literal["sagemaker"]
    region: str
    training_plan_name: str


class CapacityBlockHeld(_In):
    """The capacity block an activation poll reads (``$.purchase``: its other fields are ignored)."""

    platform: Literal["ec2"]
    region: str
    capacity_reservation_id: str


class ActivationInput(_In):
    """``{"request_id", "platform", "purchase": {...}, "attempt"}``: ``purchase`` is ``purchase_capacity``'s
    output (:data:`PurchaseOutput`).

    Deprecated input: an execution started on a definition from before issue 28 passes ``region`` and
    ``training_plan_name`` instead of ``purchase`` (for ``platform`` ``ec2``, the capacity block's id was in
    ``training_plan_name``); it is read as the purchase (:meth:`training_plan`, :meth:`capacity_block`) until
    no such execution is left.
    """

    request_id: str
    platform: StepPlatform = None
    purchase: Annotated[TrainingPlanHeld | CapacityBlockHeld, Field(discriminator="platform")] | None = None
    attempt: int = Field(default=0, ge=0)
    region: str | None = None
    """Deprecated (before issue 28): the reservation's region."""
    training_plan_name: str | None = None
    """Deprecated (before issue 28): the training plan's name, or the capacity block's id."""

    @model_validator(mode="after")
    def _names_a_reservation(self) -> ActivationInput:
        if self.purchase is None and not (self.region and self.training_plan_name):
            raise ValueError("purchase is required: the purchase step's output ($.purchase)")
        return self

    def training_plan(self) -> TrainingPlanHeld:
        """The training plan to poll.

        Raises:
            PlanFailed: the input names no training plan.
        """
        if isinstance(self.purchase, TrainingPlanHeld):
            return self.purchase
        if self.purchase is None and self.region and self.training_plan_name:
            return TrainingPlanHeld(
                platform="sagemaker", region=self.region, training_plan_name=self.training_plan_name
            )
        raise PlanFailed(f"no training plan to poll for {self.request_id}")

    def capacity_block(self) -> CapacityBlockHeld:
        """The capacity block to poll.

        Raises:
            PlanFailed: the input names no capacity block.
        """
        if isinstance(self.purchase, CapacityBlockHeld):
            return self.purchase
        if self.purchase is None and self.region and self.training_plan_name:
            return CapacityBlockHeld(
                platform="ec2", region=self.region, capacity_reservation_id=self.training_plan_name
            )
        raise PlanFailed(f"no capacity block to poll for {self.request_id}")


class ActivationOutput(_Out):
    """``{"status", "attempt": attempt + 1, "next_wait_seconds": 60 * 2**attempt capped at 900, "platform"}``.

    ``platform`` echoes the reservation's (the state machine branches on ``$.platform``, the request's).
    """

    status: str
    attempt: int
    next_wait_seconds: int
    platform: Platform = "sagemaker"


# 7. create_endpoint
class EndpointInput(_In):
    """``{"request_id", "action": "create" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["create", "status"]
    attempt: int = Field(default=0, ge=0)


class EndpointOutput(_Out):
    """``{"endpoint_name", "status", "next_wait_seconds" (30..300, 0 when InService), "attempt"}``."""

    endpoint_name: str
    status: str
    next_wait_seconds: int
    attempt: int


# 8. create_inference_components
class ComponentsInput(_In):
    """``{"request_id", "action": "create" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["create", "status"]
    attempt: int = Field(default=0, ge=0)


class ComponentsOutput(_Out):
    """``{"status": "InService" | "Creating", "component_names", "next_wait_seconds", "attempt"}``."""

    status: Literal["InService", "Creating"]
    component_names: list[str]
    next_wait_seconds: int
    attempt: int


# 7b. launch_instances (platform ec2)
class LaunchInput(_In):
    """``{"request_id", "action": "launch" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["launch", "status"]
    attempt: int = Field(default=0, ge=0)


class LaunchOutput(_Out):
    """``{"status": "Running" | "Pending", "capacity_reservation_id", "availability_zone", "instance_ids",
    "next_wait_seconds", "attempt"}``."""

    status: Literal["Running", "Pending"]
    capacity_reservation_id: str
    availability_zone: str
    instance_ids: list[str]
    next_wait_seconds: int
    attempt: int


# 2a. on_demand (strategy on-demand-first / spot-ok, before any search)
class OnDemandInput(_In):
    """``{"request_id", "platform", "action": "try" | "status", "attempt"?}``."""

    request_id: str
    platform: StepPlatform = None
    action: Literal["try", "status"]
    attempt: int = Field(default=0, ge=0)


class OnDemandOutput(_Out):
    """``{"outcome", "region", "market", "instance_ids", "next_wait_seconds", "attempt"}``.

    ``outcome``: ``skipped`` (strategy ``reserved``, a dry run, over budget or not supported: reserve),
    ``unavailable`` (no capacity in any region or market: reserve), ``launched`` (instances or an endpoint
    starting: poll ``status``), ``running`` (EC2: ``READY``), ``endpoint_ready`` (SageMaker: the on-demand
    endpoint is ``InService``; create the inference components).
    """

    outcome: Literal["skipped", "unavailable", "launched", "running", "endpoint_ready"]
    region: str | None = None
    market: str | None = None
    instance_ids: list[str] = Field(default_factory=list)
    next_wait_seconds: int = 0
    attempt: int = 0


# 9. release_capacity
ReleaseAction = Literal[
    "begin",
    "delete_scaling",
    "delete_alarms",
    "delete_components",
    "delete_endpoint",
    "delete_endpoint_config",
    "finish",
    "attempt_failed",
]


class ReleaseInput(_In):
    """``{"request_id", "action", "reason"?, "attempt"?, "detail"?, "error"?, "attempt_id"?}``.

    ``begin`` gets the ``ReleaseRequested`` event's ``detail`` and validates it (``request_id`` is ``""``
    when the event did not carry a string one). ``attempt`` counts the polls of ``delete_components`` /
    ``delete_endpoint`` (backoff and deadline). ``attempt_failed`` gets the ``error`` the workflow caught
    and ``attempt_id`` (the release execution's name: one record and one alert per failed execution).
    """

    request_id: str = ""
    action: ReleaseAction
    reason: str | None = None
    attempt: int = Field(default=0, ge=0)
    detail: Any = None
    error: StepError | None = None
    attempt_id: str | None = Field(default=None, max_length=256)


class ReleaseOutput(_Out):
    """``{"done", "remaining", "next_wait_seconds", "attempt", "already_released", "summary" | null,
    "leftovers", "retry_at" | null, "platform" | null, "payment_wait_seconds", "postponed"}``
    (``attempt_failed``: what is still there and when
    the release is tried again, UTC). ``platform`` is the ``PURCHASE``'s (null when nothing was bought):
    the release workflow branches on ``begin``'s to run only its platform's teardown states."""

    done: bool
    remaining: int = 0
    next_wait_seconds: int = 0
    attempt: int = 0
    already_released: bool = False
    summary: CostSummary | None = None
    leftovers: list[str] = Field(default_factory=list)
    retry_at: UtcDatetime | None = None
    platform: Platform | None = None
    payment_wait_seconds: int = 0
    """``begin``: an extension's payment is in flight; wait this long and begin again (nothing deleted)."""
    postponed: bool = False
    """``begin``: an extension was paid, the reservation serves to its new end (its schedule moved)."""


def backoff_seconds(attempt: int, *, base: int, cap: int) -> int:
    """``base * 2**attempt`` seconds, capped at ``cap`` (poll intervals that grow with the attempt)."""
    return int(min(base * 2 ** min(max(attempt, 0), 16), cap))


# 10. scale_components: in = the ``CloudWatch Alarm State Change`` event (capacity.logic.sagemaker.scaling)
ScaleAction = Literal[
    "ignored",
    "scale_out_from_zero",
    "refused_scale_out",
    "scale_in_to_zero",
    "cold_start_ended",
    "release_requested_idle",
    "idle_check_scheduled",
    "idle_alarm_rearmed",
]


class ScaleOutput(_Out):
    """``{"action", "reason", "request_id", "model", "from_copies", "to_copies", "failed_requests",
    "duplicate"}``: what ``scale_components`` did with one alarm state change and why (copies are desired
    copy counts; ``failed_requests`` counts ``NoCapacityInvocationFailures``)."""

    action: ScaleAction
    reason: str
    request_id: str | None = None
    model: str | None = None
    from_copies: int | None = None
    to_copies: int | None = None
    failed_requests: int | None = None
    duplicate: bool = False


# ------------------------------------------------------------------------------------------ REST API
# Response bodies of functions/api (the OpenAPI document in docs/openapi.json is generated from them).


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
    workflow's choose step rejects with (:func:`capacity.logic.policy.admit`, :func:`~capacity.logic.policy.
    judge_plan`), so a requester learns them before submitting.

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
