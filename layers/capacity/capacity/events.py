"""Event details (source ``capacity.orchestrator``): one model per ``detail-type`` (per platform where the
platform's own names differ), each with ``schema_version`` 1, but ``ReservationPurchased``,
``ReservationActive`` and ``ReservationReleased``: 2 since issue 28 named a capacity block in its own words
(``capacity_reservation_*``) instead of the training plan's (docs/architecture.md, Events)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from capacity.base import Model
from capacity.offerings import ExtensionOffering, OfferingSummary
from capacity.records import CostSummary
from capacity.wire import Money, UtcDatetime


class _Detail(Model):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1


class _DetailV2(Model):
    """A detail whose shape changed in issue 28: a capacity block in its own names (``platform`` says
    which)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[2] = 2


class SlackOrigin(Model):
    """Where a request made in Slack came from: progress is posted in a thread in ``channel_id``.

    ``user_id`` is the requester's Slack user id (``U...``); ``team_id`` the workspace (``T...``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z0-9]+$")
    user_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z0-9]+$")
    team_id: str | None = Field(default=None, max_length=64)


class ResumeOf(Model):
    """The stopped reserve execution a ``ReservationRequested`` resumes
    (:mod:`capacity.logic.steps.stopped`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=128)
    execution: str = Field(min_length=1, max_length=2048)
    """The ARN of the execution that was stopped (timed out, aborted, failed outside its failure path), or
    that continues as new (``look`` set)."""
    look: int | None = Field(default=None, ge=1)
    """Set by the reserve workflow's ``ContinueAsNew`` state only: the request keeps looking and the
    execution carries on at this look (``capacity.logic.continuity.keep_looking``), without the resume's
    wait."""


class ReservationRequestedDetail(_Detail):
    """``ReservationRequested``: ``request`` is the raw request (validated by ``record_request``);
    ``slack`` (optional) is the Slack channel and user of a request made with ``/gpu reserve``;
    ``resume_of`` (put by the application only) names the stopped execution this one carries on."""

    request: dict[str, Any]
    slack: SlackOrigin | None = None
    resume_of: ResumeOf | None = None


class ReservationPlannedDetail(_Detail):
    """``ReservationPlanned``: the decision (``PURCHASE``, ``APPROVAL_REQUIRED``...), why, and the pick."""

    request_id: str
    decision: str
    reason: str
    offering: OfferingSummary | None = None
    offerings_considered: int = 0


class ApprovalRequestedDetail(_Detail):
    """``ApprovalRequested``: a person must approve ``offering`` (fee above ``approval_above_usd``, USD: the
    threshold that applied, the team's when it is lower than the request's or the request names none).

    ``approval_deadline`` (UTC, rounded down to the minute) is when the approval wait of ``timeout_seconds``
    ends, counted from when the approval state was entered: never later than the state machine's (the
    operations topic's notice quotes it; template.yaml).
    """

    request_id: str
    offering: OfferingSummary | None
    approval_above_usd: Money | None
    timeout_seconds: int
    approval_deadline: UtcDatetime | None = None


class ReservationPurchasedDetail(_DetailV2):
    """``ReservationPurchased`` (version 2): the reservation bought, upfront fee in USD, window in UTC; one of
    :class:`TrainingPlanPurchasedDetail` and :class:`CapacityBlockPurchasedDetail`. Version 1 named a capacity
    block's ARN and id ``training_plan_arn``/``training_plan_name`` and had no ``platform``."""

    request_id: str
    region: str
    start_time: UtcDatetime
    end_time: UtcDatetime
    upfront_fee_usd: Money


class TrainingPlanPurchasedDetail(ReservationPurchasedDetail):
    """``ReservationPurchased`` of a training plan: ``platform`` ``sagemaker``, its ARN and name."""

    platform: Literal["sagemaker"] = "sagemaker"
    training_plan_arn: str
    training_plan_name: str


class CapacityBlockPurchasedDetail(ReservationPurchasedDetail):
    """``ReservationPurchased`` of a capacity block: ``platform`` ``ec2``, its ARN, id (``cr-...``) and
    zone."""

    platform: Literal["ec2"] = "ec2"
    capacity_reservation_arn: str
    capacity_reservation_id: str
    availability_zone: str


class ReservationActiveDetail(_DetailV2):
    """``ReservationActive`` (version 2): the reservation is active, endpoints or instances can run on it; one
    of :class:`TrainingPlanActiveDetail` and :class:`CapacityBlockActiveDetail`. Version 1 named a capacity
    block's id ``training_plan_name`` and had no ``platform``."""

    request_id: str
    region: str
    start_time: UtcDatetime | None
    end_time: UtcDatetime | None


class TrainingPlanActiveDetail(ReservationActiveDetail):
    """``ReservationActive`` of a training plan (``Active``): ``platform`` ``sagemaker``, its name."""

    platform: Literal["sagemaker"] = "sagemaker"
    training_plan_name: str


class CapacityBlockActiveDetail(ReservationActiveDetail):
    """``ReservationActive`` of a capacity block (``active``): ``platform`` ``ec2``, its id (``cr-...``)."""

    platform: Literal["ec2"] = "ec2"
    capacity_reservation_id: str


class ReservationReadyDetail(_Detail):
    """``ReservationReady``: the endpoint and every inference component are ``InService`` (SageMaker), or the
    capacity block is active and its instances run (``platform`` ``ec2``: ``capacity_reservation_id``,
    ``availability_zone``, ``instance_ids``; no endpoint). ``parameter_name``: the SSM parameter that now
    names this endpoint (``/capacity-orchestrator/<first request of the chain>/endpoint``)."""

    request_id: str
    region: str
    endpoint_name: str = ""
    inference_component_names: list[str] = Field(default_factory=list)
    capacity_reservation_id: str | None = None
    availability_zone: str | None = None
    instance_ids: list[str] = Field(default_factory=list)
    parameter_name: str = ""
    """The SSM parameter clients read the current endpoint from (SageMaker; empty for EC2): it names this
    endpoint from now on (issue 17)."""


class ExtensionRequestedDetail(_Detail):
    """``ExtensionRequested``: buy ``offering`` for ``request_id`` (``extension_id`` names this extension:
    a second delivery of the same one buys nothing); ``requester`` who asked."""

    request_id: str
    extension_id: str
    offering: ExtensionOffering
    requester: str


class ExtensionApprovalRequestedDetail(_Detail):
    """``ExtensionApprovalRequested``: the extension ``extension_id`` of ``request_id`` (``offering``, asked
    by ``requester``) costs more than the approval threshold ``approval_above_usd`` (USD: the one that
    applied, the team's when it is lower than the request's) and waits for an approver."""

    request_id: str
    extension_id: str
    offering: ExtensionOffering
    requester: str
    approval_above_usd: Money | None = None


class ReservationExtendedDetail(_Detail):
    """``ReservationExtended``: the extension is paid; the reservation now ends at ``end_time``."""

    request_id: str
    extension_id: str
    offering_id: str
    end_time: UtcDatetime
    upfront_fee_usd: Money


class ExtensionFailedDetail(_Detail):
    """``ExtensionFailed``: nothing was extended (payment failed, refused); it still ends at ``end_time``."""

    request_id: str
    extension_id: str
    reason: str
    end_time: UtcDatetime | None = None


class ReleaseRequestedDetail(_Detail):
    """``ReleaseRequested``: release the reservation (``reason``: reservation-end, cancelled, failed...)."""

    request_id: str
    reason: str


class ReservationReleasedDetail(_DetailV2):
    """``ReservationReleased`` (version 2): everything was deleted; ``summary`` is the cost summary. Version
    1's summary named a capacity block's id ``training_plan_name`` (and on-demand capacity ``on-demand
    instances``) and had no ``market`` nor ``capacity_reservation_id``."""

    request_id: str
    reason: str | None = None
    summary: CostSummary | None = None


class ReservationFailedDetail(_Detail):
    """``ReservationFailed``: ``error`` is the error name, ``reason`` a sentence a person can act on."""

    request_id: str
    error: str
    reason: str


class RolloverDueDetail(_Detail):
    """``RolloverDue``: look at ``request_id``'s ``serve_until`` now (the one-time schedule at the lead time
    before its end, and the checks after it; :mod:`capacity.logic.continuity.rollover`). A nudge: the handler
    acts on the ledger's current state, so a late or repeated one does nothing twice."""

    request_id: str
    reason: str = "lead-time"


class ServeUntilChangedDetail(_Detail):
    """``ServeUntilChanged``: ``PATCH /reservations/{id}`` set or moved ``serve_until`` (None: keep serving no
    longer than the reservation) or the lead time."""

    request_id: str
    serve_until: UtcDatetime | None
    rollover_lead_hours: int
    actor: str


class ReservationRolledOverDetail(_Detail):
    """``ReservationRolledOver``: the successor ``successor_id`` serves (its endpoint and inference components
    are ``InService``), the SSM parameter ``parameter_name`` now names its endpoint, and the predecessor
    ``request_id`` is released."""

    request_id: str
    successor_id: str
    region: str
    endpoint_name: str = ""
    inference_component_names: list[str] = Field(default_factory=list)
    parameter_name: str = ""


class RolloverFailedDetail(_Detail):
    """``RolloverFailed``: ``request_id`` cannot be kept serving until ``serve_until``: neither an extension
    nor a successor could be had (``reason``); it ends at ``end_time`` as any reservation. Put at the lead
    time, so a person can act before the end."""

    request_id: str
    reason: str
    end_time: UtcDatetime
    serve_until: UtcDatetime
