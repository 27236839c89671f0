"""On-demand first (issue 6, seed 000's decision framework): before searching for reserved capacity, try to
get the capacity on demand now, region by region, then (``spot-ok``) on spot, and reserve only when nothing
is available.

``platform`` ``sagemaker`` (:func:`_sagemaker`): the endpoint config and endpoint of the reservation's
deterministic names, **without** ``CapacityReservationConfig``, in each candidate region in preference
order; an endpoint that ends ``Failed`` for lack of capacity (``InsufficientInstanceCapacity`` in its
``FailureReason``) is deleted with its config (the next call waits until both are gone, so no on-demand
config is ever adopted by the reserving path) and the next region is tried; ``InService`` goes on to the
inference components (outcome ``endpoint_ready``).

``platform`` ``ec2``: ``RunInstances`` on demand from the request's launch template in each
candidate region in preference order; ``InsufficientInstanceCapacity`` moves to the next region; with
``spot-ok`` the same on spot (``InstanceMarketOptions.MarketType = spot``); when every try failed the
workflow goes on to the capacity block search. Every try is a ledger item ``ON_DEMAND_TRY#<market>#<region>``
(outcome, error, time), put once so a retried step does not repeat it.

On success the instances run from now until the request's ``latest_end``: a ``PURCHASE`` item with
``market`` ``on-demand``/``spot``, no upfront fee and ``end_time`` = ``latest_end`` (so the shared release
steps terminate them), the release scheduled at ``latest_end - release_margin_minutes``, ``PLANNED``
(decision ``ON_DEMAND``), ``DEPLOYING``, then ``READY``. The cost summary uses on-demand prices.

Skipped (the workflow reserves): strategy ``reserved``, a dry run, or an on-demand cost for the window above
``max_upfront_fee_usd`` or above ``approval_above_usd`` (the reserving path asks for the approval).

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

import hashlib
import logging
from datetime import datetime, timedelta
from decimal import Decimal
from typing import NoReturn

from capacity import messages
from capacity.contracts import OnDemandInput, OnDemandOutput, backoff_seconds
from capacity.errors import CapacityUnavailable, EndpointFailed, LaunchFailed, ReservationCancelled
from capacity.ledger import PURCHASE
from capacity.logic import policy
from capacity.logic.buy_once import RELEASE_REASON
from capacity.logic.checks import not_deployable, region_problems
from capacity.logic.common import (
    STOP_STATES,
    Purchase,
    first_entry,
    load_request,
    post,
    states,
    stop_if_released,
)
from capacity.logic.sagemaker.deploy import ENDPOINT_DEADLINE, production_variant
from capacity.models import (
    ReservationPlannedDetail,
    ReservationReadyDetail,
    ReservationRequest,
    State,
)
from capacity.naming import endpoint_config_name, endpoint_name, release_schedule_name
from capacity.ports import Ports, SageMakerPort
from capacity.pricing import on_demand_usd_per_hour
from capacity.recommendation import on_demand_over_limit
from capacity.resources import LIVE_INSTANCE_STATES, tags_for
from capacity.timeutil import iso_z, short

logger = logging.getLogger(__name__)

TRY_PREFIX = "ON_DEMAND_TRY#"

MAX_POLLS = 20
PHASE_DEADLINE = timedelta(hours=3)
"""The longest the on-demand tries may wait on SageMaker in all (creations, failed regions' deletions,
the deletions after a cancel), counted from ``REQUESTED``."""
_HOURS = Decimal("0.01")


def client_token(request_id: str, market: str, region: str) -> str:
    """The ``RunInstances`` client token of one try (<= 64 ASCII characters)."""
    return "od-" + hashlib.sha256(f"{request_id}#{market}#{region}".encode()).hexdigest()[:40]


def markets(request: ReservationRequest) -> list[str]:
    """The markets to try, in order: on demand, then spot for ``spot-ok``."""
    return ["on-demand", "spot"] if request.strategy == "spot-ok" else ["on-demand"]


def _team_refusal(request: ReservationRequest, ports: Ports) -> str | None:
    """What the request's team refuses (:func:`~capacity.logic.policy.admit`: types, regions, quota,
    budget): nothing is launched on demand for it, and the reserve path rejects it with the same reason."""
    admission = policy.admit(request, ports)
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
    request = load_request(ports, step.request_id)
    now = ports.clock()
    if request.strategy == "reserved":
        return OnDemandOutput(outcome="skipped")
    if states(ports.ledger.history(request.id)) & STOP_STATES:
        return _abandon(request, ports, step.attempt)
    existing = ports.ledger.get(request.id, PURCHASE)
    if existing is not None and existing.get("timed_out"):  # a retried step after the deadline
        raise EndpointFailed(str(existing.get("timed_out")))
    if existing is not None and str(existing.get("market")) in ("on-demand", "spot"):
        if request.platform == "sagemaker":
            return OnDemandOutput(
                outcome="endpoint_ready", region=str(existing["region"]), market="on-demand"
            )
        return _status(request, Purchase(existing), ports, step.attempt)
    if step.action == "try":
        reason = _skip_reason(request, now) or _team_refusal(request, ports)
        if reason is not None:
            post(ports, messages.on_demand_skipped(request.id, reason=reason))
            return OnDemandOutput(outcome="skipped")
    if request.platform == "sagemaker":
        return _sagemaker(request, ports, step.attempt, now)
    if step.action == "status":
        return OnDemandOutput(outcome="unavailable")
    return _ec2_tries(request, ports, now)


def _ec2_tries(request: ReservationRequest, ports: Ports, now: datetime) -> OnDemandOutput:
    """``RunInstances`` on demand (then spot) region by region; a region where the launch template cannot
    be used (:func:`~capacity.logic.checks.region_problems`) is recorded and skipped."""
    tries: list[str] = []
    unusable = {region: region_problems(request, ports, region) for region in request.regions}
    for market in markets(request):
        for region in request.regions:
            if unusable[region]:  # the launch template is missing there (or its role is not allowed)
                why = "; ".join(p.message for p in unusable[region])
                _record_try(
                    ports,
                    request,
                    market=market,
                    region=region,
                    order=len(tries) + 1,
                    outcome="not-usable",
                    error=why,
                )
                tries.append(f"{market} in {region}: {why}")
                continue
            ec2 = ports.ec2(region)
            try:
                ids = ec2.run_instances(
                    count=request.instance_count,
                    instance_type=request.instance_type,
                    launch_template=request.launch_template.as_aws() if request.launch_template else None,
                    client_token=client_token(request.id, market, region),
                    tags=tags_for(request.id),
                    market_type="spot" if market == "spot" else None,
                )
            except CapacityUnavailable as exc:
                _record_try(
                    ports,
                    request,
                    market=market,
                    region=region,
                    order=len(tries) + 1,
                    outcome="insufficient-capacity",
                    error=str(exc),
                )
                tries.append(f"{market} in {region}: no capacity")
                continue
            _record_try(
                ports,
                request,
                market=market,
                region=region,
                order=len(tries) + 1,
                outcome="launched",
                error=None,
                instance_ids=ids,
            )
            return _launched(request, ports, market=market, region=region, ids=ids, now=now)
    post(
        ports,
        messages.no_on_demand_instances(request, tries=tries),
    )
    return OnDemandOutput(outcome="unavailable")


def _record_try(
    ports: Ports,
    request: ReservationRequest,
    *,
    market: str,
    region: str,
    order: int,
    outcome: str,
    error: str | None,
    instance_ids: list[str] | None = None,
) -> None:
    ports.ledger.put_once(
        request.id,
        f"{TRY_PREFIX}{market}#{region}",
        {
            "actor": ports.actor,
            "order": order,
            "market": market,
            "region": region,
            "outcome": outcome,
            "error": error,
            "instance_ids": instance_ids or [],
            "at": iso_z(ports.clock()),
        },
    )


def _sagemaker(  # noqa: PLR0911 - one return per endpoint state
    request: ReservationRequest, ports: Ports, attempt: int, now: datetime
) -> OnDemandOutput:
    """One step of the SageMaker on-demand tries (see the module docstring); state lives in AWS and in the
    ``ON_DEMAND_TRY#`` ledger items."""
    name = endpoint_name(request.id)
    wait = OnDemandOutput(
        outcome="launched",
        market="on-demand",
        next_wait_seconds=backoff_seconds(min(attempt, 3), base=30, cap=300),
        attempt=attempt + 1,
    )
    failed: list[str] = []
    for order, region in enumerate(request.regions, start=1):
        if ports.ledger.get(request.id, f"{TRY_PREFIX}on-demand#{region}") is not None:
            failed.append(region)
            continue
        sagemaker = ports.sagemaker(region)
        info = sagemaker.describe_endpoint(name)
        if info is None:
            if not _cleaned(ports, request.id, failed):
                _check_phase_deadline(
                    request, ports, failed, now, "a failed region's endpoint still deleting"
                )
                return wait  # an earlier region's endpoint is still deleting
            if not _usable(request, ports, region, order):  # a model is missing here: try the next region
                failed.append(region)
                continue
            _create_endpoint(request, ports, sagemaker)
            if states(ports.ledger.history(request.id)) & STOP_STATES:  # cancelled during the creates
                return _abandon(request, ports, attempt)
            return wait.model_copy(update={"region": region})
        if info.status == "InService":
            _record_try(
                ports,
                request,
                market="on-demand",
                region=region,
                order=order,
                outcome="in-service",
                error=None,
            )
            _launched(request, ports, market="on-demand", region=region, ids=[], now=now)
            return OnDemandOutput(outcome="endpoint_ready", region=region, market="on-demand")
        if info.status == "Failed" and "capacity" in (info.failure_reason or "").lower():
            _record_try(
                ports,
                request,
                market="on-demand",
                region=region,
                order=order,
                outcome="insufficient-capacity",
                error=info.failure_reason,
            )
            sagemaker.delete_endpoint(name)
            failed.append(region)
            continue
        if info.status == "Failed":
            raise EndpointFailed(f"on-demand endpoint {name} in {region} failed: {info.failure_reason}")
        created = info.created or _requested_at(ports, request.id, now)
        if now > created + ENDPOINT_DEADLINE:
            minutes = int((now - created).total_seconds() // 60)
            _give_up(
                request,
                ports,
                region,
                f"on-demand endpoint {name} in {region} is still {info.status} {minutes} minutes after its "
                f"creation (deadline {int(ENDPOINT_DEADLINE.total_seconds() // 60)} minutes)",
                order=order,
            )
        return wait.model_copy(update={"region": region})
    if not _cleaned(ports, request.id, failed):
        _check_phase_deadline(request, ports, failed, now, "a failed region's endpoint still deleting")
        return wait
    outcomes = [ports.ledger.get(request.id, f"{TRY_PREFIX}on-demand#{r}") or {} for r in request.regions]
    if all(t.get("outcome") == "not-usable" for t in outcomes):  # nowhere to run: do not reserve either
        raise not_deployable(request, {r: region_problems(request, ports, r) for r in request.regions})
    post(
        ports,
        messages.no_on_demand_endpoint(request),
    )
    return OnDemandOutput(outcome="unavailable")


def _usable(request: ReservationRequest, ports: Ports, region: str, order: int) -> bool:
    """What the request names exists in ``region`` (:func:`~capacity.logic.checks.region_problems`), checked
    before anything bills there; when not, the try is recorded (``not-usable``, why) and False."""
    problems = region_problems(request, ports, region)
    if problems:
        why = "; ".join(p.message for p in problems)
        _record_try(
            ports, request, market="on-demand", region=region, order=order, outcome="not-usable", error=why
        )
    return not problems


def _create_endpoint(request: ReservationRequest, ports: Ports, sagemaker: SageMakerPort) -> None:
    """The on-demand endpoint config (no ``CapacityReservationConfig``) and endpoint, of the reservation's
    names (a retry finds them)."""
    name, config = endpoint_name(request.id), endpoint_config_name(request.id)
    if sagemaker.describe_endpoint_config(config) is None:
        variant = production_variant(request, "")
        del variant["CapacityReservationConfig"]  # on demand: no training plan
        sagemaker.create_endpoint_config(
            name=config,
            variant=variant,
            execution_role_arn=ports.settings.need("endpoint_execution_role_arn"),
            tags=tags_for(request.id),
        )
    # DEPLOYING is recorded only when one serves: the reserving path's deadlines count from it.
    sagemaker.create_endpoint(name=name, config_name=config, tags=tags_for(request.id))


def _cleaned(ports: Ports, request_id: str, regions: list[str]) -> bool:
    """Delete the failed on-demand endpoints and their configs in ``regions``; True once all are gone."""
    name, config = endpoint_name(request_id), endpoint_config_name(request_id)
    done = True
    for region in regions:
        sagemaker = ports.sagemaker(region)
        info = sagemaker.describe_endpoint(name)
        if info is not None:
            if info.status != "Deleting":
                sagemaker.delete_endpoint(name)
            done = False
            continue
        sagemaker.delete_endpoint_config(config)
    return done


def _requested_at(ports: Ports, request_id: str, now: datetime) -> datetime:
    requested = first_entry(ports.ledger.history(request_id), State.REQUESTED)
    return requested.at if requested is not None else now


def _check_phase_deadline(
    request: ReservationRequest, ports: Ports, regions: list[str], now: datetime, waiting: str
) -> None:
    """Give up (:func:`_give_up`, in the first of ``regions`` where an endpoint remains) once the on-demand
    tries have waited :data:`PHASE_DEADLINE` since ``REQUESTED``."""
    since = _requested_at(ports, request.id, now)
    if now <= since + PHASE_DEADLINE:
        return
    name = endpoint_name(request.id)
    region = next((r for r in regions if ports.sagemaker(r).describe_endpoint(name) is not None), None)
    if region is None:
        return  # gone meanwhile: the next poll goes on
    hours = PHASE_DEADLINE.total_seconds() / 3600
    _give_up(
        request, ports, region, f"on demand still waiting for {waiting} in {region} after {hours:g} hours"
    )


def _give_up(
    request: ReservationRequest, ports: Ports, region: str, why: str, *, order: int | None = None
) -> NoReturn:
    """The deadline passed with an endpoint still in ``region``: record the try (``timed-out``), hand the
    region to the release (a ``PURCHASE`` item marked ``timed_out``, no fee: no release knows the region
    otherwise), and stop.

    Raises:
        EndpointFailed: the workflow records ``FAILED``, tells the requester and requests the release.
        ReservationCancelled: a stop state is recorded: the release is requested again here.
    """
    _record_try(
        ports,
        request,
        market="on-demand",
        region=region,
        order=order or request.regions.index(region) + 1,
        outcome="timed-out",
        error=why,
    )
    reason = f"{why}; giving up: it is deleted as soon as SageMaker allows (the release retries until then)"
    rate = on_demand_usd_per_hour(region, request.instance_type)
    now = ports.clock()
    ports.ledger.put_once(
        request.id,
        PURCHASE,
        {
            "actor": ports.actor,
            "platform": request.platform,
            "market": "on-demand",
            "timed_out": reason,
            "training_plan_arn": "",
            "training_plan_name": "",
            "capacity_reservation_id": "",
            "availability_zone": "",
            "region": region,
            "start_time": iso_z(now),
            "end_time": iso_z(max(now, request.latest_end)),
            "upfront_fee_usd": "0",
            "on_demand_usd_per_hour": f"{rate:f}" if rate is not None else None,
            "instance_type": request.instance_type,
            "instance_count": request.instance_count,
            "instance_ids": [],
        },
    )
    stop_if_released(ports, request.id, "waiting for on-demand capacity")  # cancelled: release requested
    raise EndpointFailed(reason)


def _abandon(request: ReservationRequest, ports: Ports, attempt: int) -> OnDemandOutput:
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
        if request.platform == "ec2":
            ec2 = ports.ec2(region)
            live = [i for i in ec2.find_instances(request.id) if i.state in LIVE_INSTANCE_STATES]
            ec2.terminate_instances([i.instance_id for i in live if i.state != "shutting-down"])
            left.extend(f"instance {i.instance_id} in {region}" for i in live)
            continue
        sagemaker = ports.sagemaker(region)
        info = sagemaker.describe_endpoint(name)
        if info is None:
            sagemaker.delete_endpoint_config(config)
            continue
        left.append(f"endpoint {name} in {region} ({info.status})")
        if info.status not in ("Deleting", "Creating", "Updating"):  # Creating: refused, deleted next poll
            sagemaker.delete_endpoint(name)
    if left:
        logger.info("%s stopped while on demand: deleting %s", request.id, ", ".join(left))
        if request.platform == "sagemaker":  # a Creating endpoint cannot be deleted: not forever here
            _check_phase_deadline(
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
    raise ReservationCancelled(f"reservation {request.id} was stopped; nothing launched on demand is left")


def _launched(
    request: ReservationRequest, ports: Ports, *, market: str, region: str, ids: list[str], now: datetime
) -> OnDemandOutput:
    rate = on_demand_usd_per_hour(region, request.instance_type)
    ports.ledger.put_once(
        request.id,
        PURCHASE,
        {
            "actor": ports.actor,
            "platform": request.platform,
            "market": market,
            "training_plan_arn": "",
            "training_plan_name": "",
            "capacity_reservation_id": "",
            "availability_zone": "",
            "region": region,
            "start_time": iso_z(now),
            "end_time": iso_z(request.latest_end),
            "upfront_fee_usd": "0",
            "on_demand_usd_per_hour": f"{rate:f}" if rate is not None else None,
            "instance_type": request.instance_type,
            "instance_count": request.instance_count,
            "instance_ids": ids,
        },
    )
    # Cancelled while launching: the PURCHASE now tells a new release what to delete (a release that ran
    # before it found nothing).
    stop_if_released(ports, request.id, "launching on demand")
    release_at = request.latest_end - timedelta(minutes=request.release_margin_minutes)
    ports.scheduler.schedule_release(
        name=release_schedule_name(request.id), at=release_at, request_id=request.id, reason=RELEASE_REASON
    )
    reason = (
        f"{request.instance_count} x {request.instance_type} on {market} in {region} now, until "
        f"{short(request.latest_end)} UTC (latest_end): no reservation needed"
        + (f"; about ${rate:.2f} per instance-hour" if rate is not None else "")
        + "."
    )
    try:
        # Only while no outcome is recorded (one transaction each): a DELETE after the check above must not
        # be followed by PLANNED/DEPLOYING; the check, run again, requests the release once more and raises.
        _record_launch(request, ports, market=market, region=region, ids=ids, reason=reason, at=release_at)
    except ReservationCancelled:
        stop_if_released(ports, request.id, "launching on demand")
        raise
    if request.platform == "sagemaker":
        return OnDemandOutput(outcome="endpoint_ready", region=region, market=market)
    return OnDemandOutput(
        outcome="launched",
        region=region,
        market=market,
        instance_ids=sorted(ids),
        next_wait_seconds=backoff_seconds(0, base=30, cap=300),
        attempt=1,
    )


def _record_launch(
    request: ReservationRequest,
    ports: Ports,
    *,
    market: str,
    region: str,
    ids: list[str],
    reason: str,
    at: datetime,
) -> None:
    """``PLANNED`` (decision ``ON_DEMAND``, with its event and post) then ``DEPLOYING``, each once.

    Raises:
        ReservationCancelled: an outcome is recorded (see :meth:`capacity.ledger.Ledger.append`).
    """
    written = ports.ledger.append(
        request.id,
        State.PLANNED,
        actor=ports.actor,
        detail={"decision": "ON_DEMAND", "reason": reason, "market": market, "region": region},
        once=True,
        unless_outcome=True,
    )
    if written is not None:
        ports.events.put(
            "ReservationPlanned",
            ReservationPlannedDetail(request_id=request.id, decision="ON_DEMAND", reason=reason),
        )
        post(ports, messages.on_demand_decision(request.id, reason=reason))
    ports.ledger.append(
        request.id,
        State.DEPLOYING,
        actor=ports.actor,
        detail={"market": market, "region": region, "instance_ids": ids, "release_at": iso_z(at)},
        once=True,
        unless_outcome=True,
    )


def _status(request: ReservationRequest, purchase: Purchase, ports: Ports, attempt: int) -> OnDemandOutput:
    instances = ports.ec2(purchase.region).find_instances(request.id)
    gone = [i.instance_id for i in instances if i.state not in ("pending", "running")]
    if gone:
        raise LaunchFailed(
            f"instance(s) {', '.join(gone)} of {request.id} stopped or terminated while starting"
        )
    running = sorted(i.instance_id for i in instances if i.state == "running")
    if len(running) < request.instance_count:
        if attempt >= MAX_POLLS:
            raise LaunchFailed(
                f"{len(running)} of {request.instance_count} on-demand instances of {request.id} running "
                f"after {attempt} polls"
            )
        return OnDemandOutput(
            outcome="launched",
            region=purchase.region,
            market=purchase.market,
            instance_ids=sorted(i.instance_id for i in instances),
            next_wait_seconds=backoff_seconds(attempt, base=30, cap=300),
            attempt=attempt + 1,
        )
    zones = sorted({i.availability_zone for i in instances if i.availability_zone})
    written = ports.ledger.append(
        request.id,
        State.READY,
        actor=ports.actor,
        detail={
            "market": purchase.market,
            "region": purchase.region,
            "zones": zones,
            "instance_ids": running,
        },
        once=True,
    )
    if written is not None:
        ports.events.put(
            "ReservationReady",
            ReservationReadyDetail(
                request_id=request.id,
                region=purchase.region,
                availability_zone=",".join(zones) or None,
                instance_ids=running,
            ),
        )
        post(
            ports,
            messages.instances_ready(
                request, market=purchase.market, running=running, zones=zones or [purchase.region]
            ),
        )
    return OnDemandOutput(
        outcome="running", region=purchase.region, market=purchase.market, instance_ids=running
    )
