"""``launch_instances`` (Lambda ``launch_instances``): ``RunInstances`` from the request's launch template
into its active capacity block (``InstanceMarketOptions.MarketType = capacity-block`` and
``CapacityReservationSpecification.CapacityReservationTarget``), with a client token derived from the
request id, then ``READY`` with the reservation id, zone and instance ids. Without a launch template
nothing is launched and the requester gets the reservation to launch into.
"""

from __future__ import annotations

import hashlib

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.serving import LaunchInput, LaunchOutput
from capacity.errors import (
    LaunchFailed,
    PlanFailed,
)
from capacity.events import ReservationReadyDetail
from capacity.lifecycle import Event
from capacity.logic.governance.costs import record_usage
from capacity.logic.steps.common import (
    Purchase,
    load_purchase,
    load_request,
    post,
    stop_if_released,
)
from capacity.logic.steps.ready import record_ready
from capacity.ports import Ports
from capacity.purchases import CapacityBlockPurchase
from capacity.record_kinds import LAUNCHED
from capacity.request import ReservationRequest
from capacity.resources import Instance, tags_for

MAX_LAUNCH_POLLS = 20


POLL_SECONDS = 30


def client_token(request_id: str) -> str:
    """The ``RunInstances`` client token of a request (<= 64 ASCII characters, one per request)."""
    return "co-" + hashlib.sha256(request_id.encode()).hexdigest()[:40]


def launch_instances(step: LaunchInput, ports: Ports) -> LaunchOutput:
    """``launch``: start the request's instances in its active capacity block (once: client token), record
    ``DEPLOYING``; ``status``: ``Running`` once every instance runs (then ``READY`` with the reservation
    id, zone and instance ids, ``ReservationReady``, a Slack message). Without a launch template nothing
    is launched: ``READY`` at once with no instance ids.

    Raises:
        ReservationNotFound: no request or no purchase recorded.
        ReservationCancelled: the reservation is releasing or final.
        CapacityUnavailable: ``RunInstances`` met ``InsufficientInstanceCapacity``.
        LaunchFailed: an instance stopped or terminated while starting, or not running after
            :data:`MAX_LAUNCH_POLLS` polls.
    """
    request = load_request(ports, step.request_id)
    purchase = load_purchase(ports, step.request_id)
    if purchase is None or not isinstance(purchase.record, CapacityBlockPurchase):
        raise PlanFailed(f"no capacity block purchase is recorded for {step.request_id!r}")
    block = purchase.record
    stop_if_released(ports, request.id, "launching")
    ec2 = ports.ec2(purchase.region)
    reservation_id = block.capacity_reservation_id
    template = request.launch_template
    if template is None:
        return _ready(request, ports, purchase, block, [])
    if step.action == "launch":
        ports.ledger.record(
            request.id,
            Event.DEPLOY,
            actor=ports.actor,
            detail={"capacity_reservation_id": reservation_id, "launch_template": template.as_aws()},
        )
        launched = ec2.run_instances(
            count=request.instance_count,
            instance_type=request.instance_type,
            launch_template=template.as_aws(),
            client_token=client_token(request.id),
            tags=tags_for(request.id),
            capacity_reservation_id=reservation_id,
            market_type="capacity-block",
        )
        # Before anything else: a release reads these when EC2's listing does not show them yet
        ports.ledger.put_once(request.id, LAUNCHED, {"instance_ids": sorted(launched)})
        # A release that ran while RunInstances was in flight found no instance: release again.
        stop_if_released(ports, request.id, "launching")
    instances = ec2.find_instances(request.id)
    gone = [i.instance_id for i in instances if i.state not in ("pending", "running")]
    if gone:
        raise LaunchFailed(
            f"instance(s) {', '.join(gone)} of {request.id} stopped or terminated while starting in capacity "
            f"block {reservation_id}"
        )
    running = [i for i in instances if i.state == "running"]
    if len(running) >= request.instance_count:
        return _ready(request, ports, purchase, block, running)
    if step.attempt >= MAX_LAUNCH_POLLS:
        raise LaunchFailed(
            f"{len(running)} of {request.instance_count} instances of {request.id} running after "
            f"{step.attempt} polls in capacity block {reservation_id}"
        )
    return LaunchOutput(
        status="Pending",
        capacity_reservation_id=reservation_id,
        availability_zone=block.availability_zone,
        instance_ids=sorted(i.instance_id for i in instances),
        next_wait_seconds=backoff_seconds(step.attempt, base=POLL_SECONDS, cap=300),
        attempt=step.attempt + 1,
    )


def _ready(
    request: ReservationRequest,
    ports: Ports,
    purchase: Purchase,
    block: CapacityBlockPurchase,
    running: list[Instance],
) -> LaunchOutput:
    ids = sorted(i.instance_id for i in running)
    zone = block.availability_zone
    reservation_id = block.capacity_reservation_id
    ready = ReservationReadyDetail(
        request_id=request.id,
        region=purchase.region,
        capacity_reservation_id=reservation_id,
        availability_zone=zone,
        instance_ids=ids,
    )
    detail = {"capacity_reservation_id": reservation_id, "availability_zone": zone, "instance_ids": ids}
    if record_ready(ports, ready, detail=detail, resources=[block.capacity_reservation_arn]):
        record_usage(ports, request.id, len(ids), source="instances-running")
        launched = (
            f"{len(ids)} x {request.instance_type} running: {', '.join(ids)}"
            if ids
            else "no launch template was given, so nothing was launched: launch into it with "
            "InstanceMarketOptions.MarketType=capacity-block and CapacityReservationSpecification."
            f"CapacityReservationTarget.CapacityReservationId={reservation_id}"
        )
        post(
            ports,
            messages.block_ready(
                request.id,
                reservation_id,
                zone=zone,
                region=purchase.region,
                launched=launched,
                end=purchase.end_time,
            ),
        )
    return LaunchOutput(
        status="Running",
        capacity_reservation_id=reservation_id,
        availability_zone=zone,
        instance_ids=ids,
        next_wait_seconds=0,
        attempt=0,
    )
