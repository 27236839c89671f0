"""On demand first for ``platform`` ``ec2``: ``RunInstances`` on demand from the request's launch template in
each candidate region in preference order (``InsufficientInstanceCapacity``: the next region), then with
``spot-ok`` the same on spot (``InstanceMarketOptions.MarketType = spot``); client tokens per (request,
market, region) make retries idempotent. Instances not running after :data:`MAX_POLLS` polls raise
``LaunchFailed``.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import datetime

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.on_demand import OnDemandOutput
from capacity.errors import CapacityUnavailable, LaunchFailed
from capacity.events import ReservationReadyDetail
from capacity.logic.governance.checks import region_problems
from capacity.logic.steps.common import (
    Purchase,
    post,
)
from capacity.logic.steps.on_demand_record import launched, record_try, written_recently
from capacity.logic.steps.ready import record_ready
from capacity.ports import Ports
from capacity.record_kinds import ON_DEMAND_INSTANCES_PREFIX, ON_DEMAND_TRY_PREFIX
from capacity.request import ReservationRequest
from capacity.resources import LIVE_INSTANCE_STATES, tags_for

logger = logging.getLogger(__name__)

MAX_POLLS = 20


def launched_recently(ports: Ports, request_id: str, region: str, now: datetime) -> bool:
    """True when on-demand instances were launched in ``region`` (``RunInstances`` called) less than
    :data:`~capacity.logic.steps.on_demand_record.NOT_VISIBLE_GRACE` ago: an empty ``DescribeInstances`` may
    lag behind, so they must not be taken as gone yet."""
    return written_recently(ports, request_id, f"{ON_DEMAND_INSTANCES_PREFIX}{region}", now)


def stop_instances(ports: Ports, request_id: str, region: str) -> list[str]:
    """Terminate the on-demand instances of a stopped request in ``region``; what is still there, named.

    Listed live instances are terminated; when nothing is listed but ``RunInstances`` was called less than
    the grace ago (:func:`launched_recently`), what the tries recorded is terminated by id and the region
    counts as not clean yet (the listing may lag behind the launch).
    """
    ec2 = ports.ec2(region)
    listed = ec2.find_instances(request_id)
    live = [i for i in listed if i.state in LIVE_INSTANCE_STATES]
    ec2.terminate_instances([i.instance_id for i in live if i.state != "shutting-down"])
    left = [f"instance {i.instance_id} in {region}" for i in live]
    if not listed and launched_recently(ports, request_id, region, ports.clock()):
        unseen = sorted(
            str(instance_id)
            for item in ports.ledger.items(request_id, ON_DEMAND_TRY_PREFIX)
            if item.get("region") == region
            for instance_id in item.get("instance_ids") or []
        )
        ec2.terminate_instances(unseen)
        left.append(f"instances launched in {region} ({', '.join(unseen) or 'ids not recorded'}), unlisted")
    return left


def client_token(request_id: str, market: str, region: str) -> str:
    """The ``RunInstances`` client token of one try (<= 64 ASCII characters)."""
    return "od-" + hashlib.sha256(f"{request_id}#{market}#{region}".encode()).hexdigest()[:40]


def markets(request: ReservationRequest) -> list[str]:
    """The markets to try, in order: on demand, then spot for ``spot-ok``."""
    return ["on-demand", "spot"] if request.strategy == "spot-ok" else ["on-demand"]


def instance_tries(request: ReservationRequest, ports: Ports, now: datetime) -> OnDemandOutput:
    """``RunInstances`` on demand (then spot) region by region; a region where the launch template cannot
    be used (:func:`~capacity.logic.governance.checks.region_problems`) is recorded and skipped."""
    tries: list[str] = []
    unusable = {region: region_problems(request, ports, region) for region in request.regions}
    for market in markets(request):
        for region in request.regions:
            if unusable[region]:  # the launch template is missing there (or its role is not allowed)
                why = "; ".join(p.message for p in unusable[region])
                record_try(
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
            # Instances of the request may exist there from now on, whatever DescribeInstances says a while.
            ports.ledger.put_once(request.id, f"{ON_DEMAND_INSTANCES_PREFIX}{region}", {"market": market})
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
                record_try(
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
            record_try(
                ports,
                request,
                market=market,
                region=region,
                order=len(tries) + 1,
                outcome="launched",
                error=None,
                instance_ids=ids,
            )
            return launched(request, ports, market=market, region=region, ids=ids, now=now)
    post(
        ports,
        messages.no_on_demand_instances(request, tries=tries),
    )
    return OnDemandOutput(outcome="unavailable")


def instance_status(
    request: ReservationRequest, purchase: Purchase, ports: Ports, attempt: int
) -> OnDemandOutput:
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
    ready = ReservationReadyDetail(
        request_id=request.id,
        region=purchase.region,
        availability_zone=",".join(zones) or None,
        instance_ids=running,
    )
    detail = {"market": purchase.market, "region": purchase.region, "zones": zones, "instance_ids": running}
    if record_ready(ports, ready, detail=detail):
        post(
            ports,
            messages.instances_ready(
                request, market=purchase.market, running=running, zones=zones or [purchase.region]
            ),
        )
    return OnDemandOutput(
        outcome="running", region=purchase.region, market=purchase.market, instance_ids=running
    )
