"""On-demand first (issue 6, seed 000's decision framework): before searching for reserved capacity, try to
get the capacity on demand now, region by region, then (``spot-ok``) on spot, and reserve only when nothing
is available.

``platform`` ``sagemaker`` (:func:`~capacity.logic.sagemaker.on_demand.endpoint_tries`): the endpoint config
and endpoint of the reservation's deterministic names, **without** ``CapacityReservationConfig``, in each
candidate region in preference order; an endpoint that ends ``Failed`` for lack of capacity
(``InsufficientInstanceCapacity`` in its ``FailureReason``) is deleted with its config (the next call waits
until both are gone, so no on-demand config is ever adopted by the reserving path) and the next region is
tried; ``InService`` goes on to the inference components (outcome ``endpoint_ready``).

``platform`` ``ec2``: ``RunInstances`` on demand from the request's launch template in each
candidate region in preference order; ``InsufficientInstanceCapacity`` moves to the next region; with
``spot-ok`` the same on spot (``InstanceMarketOptions.MarketType = spot``); when every try failed the
workflow goes on to the capacity block search. Every try is a ledger item ``ON_DEMAND_TRY#<market>#<region>``
(outcome, error, time), put once so a retried step does not repeat it.

On success the instances run from now until the request's ``latest_end``: a ``PURCHASE`` item with
``market`` ``on-demand``/``spot``, no upfront fee and ``end_time`` = ``latest_end`` (so the shared release
steps terminate them), the release scheduled at ``latest_end - release_margin_minutes``, ``PLANNED``
(decision ``ON_DEMAND``), ``DEPLOYING``, then ``READY``. The cost summary uses on-demand prices.

Skipped (the workflow reserves): strategy ``reserved``, a dry run, or an on-demand cost for the window
(:func:`~capacity.recommendation.on_demand_hold_usd`) above ``max_upfront_fee_usd`` or needing an approval
above ``approval_above_usd`` (the team's when it is lower; the rule a purchase's fee is judged by: the
reserving path asks for the approval), or what the team refuses: its admission (types, regions, quota,
budget) and the hold of that cost on its month, the account's month and its instance quota
(:mod:`capacity.logic.governance.on_demand_spend`, the mechanism a purchase holds its fee with). The hold is
given back when nothing is launched and settled from what ran at the release.

Deadlines (issue 13, defect 5): an on-demand endpoint not ``InService`` :data:`ENDPOINT_DEADLINE` after its
``CreationTime``, or any on-demand wait (a failed region's endpoint still deleting, a cancel waiting for a
``Creating`` endpoint to become deletable) still going :data:`PHASE_DEADLINE` after ``REQUESTED``, ends the
tries: the try is recorded (outcome ``timed-out``), a ``PURCHASE`` with ``market`` ``on-demand`` and
``timed_out`` names the region so that a release can delete what bills there, and the step raises
``EndpointFailed`` (the workflow records ``FAILED``, tells the requester and requests the release, which
retries until SageMaker lets it delete) or, after a cancel, requests the release and raises
``ReservationCancelled``. EC2 instances not running after :data:`MAX_POLLS` polls raise ``LaunchFailed``,
released the same way.
"""

from __future__ import annotations

import logging
from datetime import datetime
from decimal import Decimal

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.on_demand import OnDemandInput, OnDemandOutput
from capacity.errors import EndpointFailed, ReservationCancelled
from capacity.logic.ec2.on_demand import instance_status, instance_tries, stop_instances
from capacity.logic.governance import policy
from capacity.logic.governance.on_demand_spend import give_back_on_demand, hold_on_demand
from capacity.logic.sagemaker.on_demand import check_phase_deadline, endpoint_tries, maybe_not_visible
from capacity.logic.steps.common import (
    STOP_STATES,
    Purchase,
    load_request,
    post,
    states,
    stop_if_released,
)
from capacity.logic.steps.on_demand_record import finish_launch, put_purchase
from capacity.naming import endpoint_config_name, endpoint_name
from capacity.platforms import PlatformName
from capacity.platforms import platform as platform_named
from capacity.ports import Ports
from capacity.recommendation import on_demand_over_limit
from capacity.record_kinds import ON_DEMAND_ENDPOINT_PREFIX, ON_DEMAND_INSTANCES_PREFIX, PURCHASE
from capacity.request import ReservationRequest
from capacity.timeutil import iso_z, parse_utc

logger = logging.getLogger(__name__)


_HOURS = Decimal("0.01")


def _team_refusal(admission: policy.Admission | None) -> str | None:
    """What the request's team refuses (:func:`~capacity.logic.governance.policy.admit`: types, regions,
    quota, budget): nothing is launched on demand for it, and the reserve path rejects it with the same
    reason."""
    if admission is None or not admission.problems:
        return None
    return "; ".join(admission.problems)


def _skip_reason(request: ReservationRequest, now: datetime) -> str | None:
    if request.strategy == "reserved":
        return None  # the usual case: nothing to say
    if request.dry_run:
        return "dry run: nothing is launched"
    over = on_demand_over_limit(request, now)
    if over is None:
        return None
    then = ": reserving, which asks for approval" if over.limit == "approval" else ": reserving"
    return over.sentence(iso_z(request.latest_end)) + then


def try_on_demand(step: OnDemandInput, ports: Ports) -> OnDemandOutput:  # noqa: PLR0911 - one per outcome
    """``try``: launch the request's instances on demand (then spot) in the first region that has capacity;
    ``status``: poll them until they run, then record ``READY``.

    Returns:
        ``skipped``/``unavailable`` (the workflow reserves), ``launched`` (poll ``status`` after
        ``next_wait_seconds``) or ``running``.

    Raises:
        ReservationCancelled: the reservation is releasing or final.
        ModelNotFound: (``sagemaker``) a ``model_name`` names no model in any region (a region without it
            is recorded ``not-usable`` and skipped).
        LaunchFailed: the instances stopped or terminated while starting, or never ran.
        QuotaExceeded, RetryableAwsError: from ``RunInstances``.
    """
    request = load_request(ports, step.request_id)  # the tries need the whole request
    # The input lacks the platform only on an execution started on an older definition: the request's.
    platform = step.platform or request.platform
    now = ports.clock()
    if request.strategy == "reserved":
        return OnDemandOutput(outcome="skipped")
    if states(ports.ledger.history(request.id)) & STOP_STATES:
        return _abandon(request, platform, ports, step.attempt)
    existing = ports.ledger.get(request.id, PURCHASE)
    if existing is not None and existing.get("timed_out"):  # a retried step after the deadline
        raise EndpointFailed(str(existing.get("timed_out")))
    if existing is not None and str(existing.get("market")) in ("on-demand", "spot"):
        # A retried step after the launch was recorded: its schedule and records first (idempotent).
        launch = Purchase(existing)
        finish_launch(request, ports, market=launch.market, region=launch.region, ids=launch.instance_ids)
        if platform_named(platform).serves_models:
            return OnDemandOutput(
                outcome="endpoint_ready", region=str(existing["region"]), market="on-demand"
            )
        return instance_status(request, Purchase(existing), ports, step.attempt)
    if step.action == "try":
        admission = policy.admit(request, ports)
        # On demand above the team's approval threshold (when lower than the request's) is not launched
        # either: the reserving path asks for the approval.
        judged = admission.request if admission is not None else request
        reason = _skip_reason(judged, now) or _team_refusal(admission)
        # Every dollar counts against the team: what on demand may cost is held on its month, the account's
        # and its quota before anything is launched (refused: nothing is launched, the workflow reserves).
        reason = reason or hold_on_demand(request, ports, now)
        if reason is not None:
            post(ports, messages.on_demand_skipped(request.id, reason=reason))
            return OnDemandOutput(outcome="skipped")
    if platform_named(platform).serves_models:
        tried = endpoint_tries(request, ports, step.attempt, now)
        if tried is None:
            return _abandon(request, platform, ports, step.attempt)
    elif step.action == "status":
        tried = OnDemandOutput(outcome="unavailable")
    else:
        tried = instance_tries(request, ports, now)
    if tried.outcome == "unavailable":  # nothing runs on demand: the team's month and quota get the hold back
        give_back_on_demand(ports, request.id)
    return tried


def _abandon(
    request: ReservationRequest, platform: PlatformName, ports: Ports, attempt: int
) -> OnDemandOutput:
    """The reservation was cancelled or released while on-demand capacity was being tried.

    With a ``PURCHASE`` recorded the release owns what runs: ``ReleaseRequested`` is put again (a release
    that ran before the ``PURCHASE`` found nothing) and :class:`ReservationCancelled` raised. Without one,
    no release knows the region: every on-demand endpoint and config (``sagemaker``) or instance (``ec2``)
    of the request is deleted here in every candidate region, polling (outcome ``launched``) until all are
    gone, then :class:`ReservationCancelled`.

    Raises:
        ReservationCancelled: nothing of the request is left here, or the release was requested again.
    """
    if ports.ledger.get(request.id, PURCHASE) is not None:
        stop_if_released(ports, request.id, "launching on demand")
    name, config = endpoint_name(request.id), endpoint_config_name(request.id)
    left: list[str] = []
    for region in request.regions:
        if platform_named(platform).launches_instances:
            left.extend(stop_instances(ports, request.id, region))
            continue
        sagemaker = ports.sagemaker(region)
        info = sagemaker.describe_endpoint(name)
        if info is None and maybe_not_visible(ports, request.id, region, ports.clock()):
            left.append(f"endpoint {name} in {region} (created, not visible yet)")  # poll again
            continue
        if info is None:
            sagemaker.delete_endpoint_config(config)
            continue
        left.append(f"endpoint {name} in {region} ({info.status})")
        if info.status not in ("Deleting", "Creating", "Updating"):  # Creating: refused, deleted next poll
            sagemaker.delete_endpoint(name)
    if left:
        logger.info("%s stopped while on demand: deleting %s", request.id, ", ".join(left))
        if platform_named(platform).serves_models:  # a Creating endpoint cannot be deleted: not forever here
            check_phase_deadline(
                request,
                ports,
                list(request.regions),
                ports.clock(),
                "its endpoint to be deletable after a stop",
            )
        return OnDemandOutput(
            outcome="launched",
            market="on-demand",
            next_wait_seconds=backoff_seconds(min(attempt, 3), base=30, cap=300),
            attempt=attempt + 1,
        )
    give_back_on_demand(ports, request.id)  # nothing ran on demand: the team's month and quota get it back
    raise ReservationCancelled(f"reservation {request.id} was stopped; nothing launched on demand is left")


def adopt_left_behind(ports: Ports, request_id: str, *, reason: str) -> bool:
    """On-demand capacity a reserve workflow left behind when it failed or was stopped mid-try: an endpoint
    (or instances) created under its marker (``ON_DEMAND_ENDPOINT#<region>``,
    ``ON_DEMAND_INSTANCES#<region>``, put before the create call) and no ``PURCHASE`` yet (it is recorded
    once the endpoint is ``InService``). It bills by the hour whatever happened to the workflow, so the
    ``PURCHASE`` of the last try is recorded (``market`` of the try, ``timed_out`` ``reason``) for the release
    to delete it: the caller requests it.

    Returns:
        True when a ``PURCHASE`` was recorded here (the caller requests the release); False when one exists
        already or nothing was created on demand.
    """
    ledger = ports.ledger
    if ledger.get(request_id, PURCHASE) is not None:
        return False
    markers = [
        *ledger.items(request_id, ON_DEMAND_ENDPOINT_PREFIX),
        *ledger.items(request_id, ON_DEMAND_INSTANCES_PREFIX),
    ]
    request = ledger.get_request(request_id)
    if not markers or request is None:
        return False
    last = max(markers, key=lambda item: str(item.get("written_at") or ""))
    region = str(last["sk"]).split("#", 1)[1]
    launched_at = parse_utc(str(last["written_at"])) if last.get("written_at") else ports.clock()
    put_purchase(
        ports,
        request,
        market=str(last.get("market") or "on-demand"),
        region=region,
        start=launched_at,
        end=request.latest_end,
        ids=[str(i) for i in last.get("instance_ids") or []],
        timed_out=reason,
    )
    logger.warning(
        "%s: on-demand capacity left in %s by a stopped workflow: recorded for release", request_id, region
    )
    return True
