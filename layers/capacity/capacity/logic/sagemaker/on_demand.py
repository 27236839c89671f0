"""On demand first for ``platform`` ``sagemaker``: the endpoint config and endpoint of the reservation's
deterministic names, **without** ``CapacityReservationConfig``, in each candidate region in preference order;
an endpoint that ends ``Failed`` for lack of capacity is deleted with its config (the next call waits until
both are gone, so no on-demand config is ever adopted by the reserving path) and the next region is tried;
``InService`` goes on to the inference components (outcome ``endpoint_ready``). Deadlines:
:data:`~capacity.logic.sagemaker.deploy.ENDPOINT_DEADLINE` after ``CreationTime``, :data:`PHASE_DEADLINE`
after ``REQUESTED``.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import NoReturn

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.on_demand import OnDemandOutput
from capacity.errors import EndpointFailed
from capacity.logic.governance.checks import not_deployable, region_problems
from capacity.logic.sagemaker.deploy import ENDPOINT_DEADLINE, production_variant
from capacity.logic.steps.common import (
    STOP_STATES,
    post,
    states,
    stop_if_released,
)
from capacity.logic.steps.on_demand_record import (
    launched,
    put_purchase,
    record_try,
    requested_at,
    written_recently,
)
from capacity.naming import endpoint_config_name, endpoint_name
from capacity.ports import Ports, SageMakerPort
from capacity.record_kinds import ON_DEMAND_ENDPOINT_PREFIX, ON_DEMAND_TRY_PREFIX
from capacity.request import ReservationRequest
from capacity.resources import tags_for

logger = logging.getLogger(__name__)


PHASE_DEADLINE = timedelta(hours=3)
"""The longest the on-demand tries may wait on SageMaker in all (creations, failed regions' deletions,
the deletions after a cancel), counted from ``REQUESTED``."""


def endpoint_tries(  # noqa: C901, PLR0911 - one branch and return per endpoint state
    request: ReservationRequest, ports: Ports, attempt: int, now: datetime
) -> OnDemandOutput | None:
    """One step of the SageMaker on-demand tries (see the module docstring); state lives in AWS and in the
    ``ON_DEMAND_TRY#`` ledger items. None: the reservation was stopped during the creates (the caller
    abandons the tries)."""
    name = endpoint_name(request.id)
    wait = OnDemandOutput(
        outcome="launched",
        market="on-demand",
        next_wait_seconds=backoff_seconds(min(attempt, 3), base=30, cap=300),
        attempt=attempt + 1,
    )
    failed: list[str] = []
    for order, region in enumerate(request.regions, start=1):
        if ports.ledger.get(request.id, f"{ON_DEMAND_TRY_PREFIX}on-demand#{region}") is not None:
            failed.append(region)
            continue
        sagemaker = ports.sagemaker(region)
        info = sagemaker.describe_endpoint(name)
        if info is None:
            if not _cleaned(ports, request.id, failed):
                check_phase_deadline(request, ports, failed, now, "a failed region's endpoint still deleting")
                return wait  # an earlier region's endpoint is still deleting
            if not _usable(request, ports, region, order):  # a model is missing here: try the next region
                failed.append(region)
                continue
            _create_endpoint(request, ports, sagemaker, region)
            if states(ports.ledger.history(request.id)) & STOP_STATES:  # cancelled during the creates
                return None  # the router abandons the tries
            return wait.model_copy(update={"region": region})
        if info.status == "InService":
            record_try(
                ports,
                request,
                market="on-demand",
                region=region,
                order=order,
                outcome="in-service",
                error=None,
            )
            launched(request, ports, market="on-demand", region=region, ids=[], now=now)
            return OnDemandOutput(outcome="endpoint_ready", region=region, market="on-demand")
        if info.status == "Failed" and "capacity" in (info.failure_reason or "").lower():
            record_try(
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
        created = info.created or requested_at(ports, request.id, now)
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
        check_phase_deadline(request, ports, failed, now, "a failed region's endpoint still deleting")
        return wait
    outcomes = [
        ports.ledger.get(request.id, f"{ON_DEMAND_TRY_PREFIX}on-demand#{r}") or {} for r in request.regions
    ]
    if all(t.get("outcome") == "not-usable" for t in outcomes):  # nowhere to run: do not reserve either
        raise not_deployable(request, {r: region_problems(request, ports, r) for r in request.regions})
    post(
        ports,
        messages.no_on_demand_endpoint(request),
    )
    return OnDemandOutput(outcome="unavailable")


def _usable(request: ReservationRequest, ports: Ports, region: str, order: int) -> bool:
    """What the request names exists in ``region``
    (:func:`~capacity.logic.governance.checks.region_problems`), checked before anything bills there; when
    not, the try is recorded (``not-usable``, why) and False."""
    problems = region_problems(request, ports, region)
    if problems:
        why = "; ".join(p.message for p in problems)
        record_try(
            ports, request, market="on-demand", region=region, order=order, outcome="not-usable", error=why
        )
    return not problems


def _create_endpoint(
    request: ReservationRequest, ports: Ports, sagemaker: SageMakerPort, region: str
) -> None:
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
    ports.ledger.put_once(request.id, f"{ON_DEMAND_ENDPOINT_PREFIX}{region}", {"endpoint": name})
    sagemaker.create_endpoint(name=name, config_name=config, tags=tags_for(request.id))


def maybe_not_visible(ports: Ports, request_id: str, region: str, now: datetime) -> bool:
    """True when the on-demand endpoint in ``region`` was created (``CreateEndpoint`` called, see
    :data:`~capacity.record_kinds.ON_DEMAND_ENDPOINT_PREFIX`) less than
    :data:`~capacity.logic.steps.on_demand_record.NOT_VISIBLE_GRACE` ago: a ``DescribeEndpoint`` that does not
    find it may lag behind, so it must not be taken as gone yet."""
    return written_recently(ports, request_id, f"{ON_DEMAND_ENDPOINT_PREFIX}{region}", now)


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


def check_phase_deadline(
    request: ReservationRequest, ports: Ports, regions: list[str], now: datetime, waiting: str
) -> None:
    """Give up (:func:`_give_up`, in the first of ``regions`` where an endpoint remains) once the on-demand
    tries have waited :data:`PHASE_DEADLINE` since ``REQUESTED``."""
    since = requested_at(ports, request.id, now)
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
    record_try(
        ports,
        request,
        market="on-demand",
        region=region,
        order=order or request.regions.index(region) + 1,
        outcome="timed-out",
        error=why,
    )
    reason = f"{why}; giving up: it is deleted as soon as SageMaker allows (the release retries until then)"
    now = ports.clock()
    put_purchase(
        ports,
        request,
        market="on-demand",
        region=region,
        start=now,
        end=max(now, request.latest_end),
        ids=[],
        timed_out=reason,
    )
    stop_if_released(ports, request.id, "waiting for on-demand capacity")  # cancelled: release requested
    raise EndpointFailed(reason)
