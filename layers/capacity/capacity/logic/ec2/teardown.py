"""The EC2 teardown (``release_capacity`` for ``platform`` ``ec2``): terminate the instances tagged with the
request id, wait until they are gone, then the shared ending
(:func:`~capacity.logic.steps.ending.record_released`). The block itself is paid upfront and cannot be
deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.errors import (
    LeftoverResources,
    ReleaseStuck,
)
from capacity.lifecycle import Event
from capacity.logic.steps.common import (
    Purchase,
)
from capacity.logic.steps.ending import record_released
from capacity.logic.steps.on_demand_record import NOT_VISIBLE_GRACE
from capacity.ports import Ec2Port, Ports
from capacity.record_kinds import LAUNCHED
from capacity.resources import LIVE_INSTANCE_STATES, Instance
from capacity.timeutil import parse_utc

POLL_SECONDS = 30

MAX_TERMINATE_POLLS = 20


def _live(instances: list[Instance]) -> list[Instance]:
    return [i for i in instances if i.state in LIVE_INSTANCE_STATES]


def release_block(step: ReleaseInput, ports: Ports, purchase: Purchase) -> ReleaseOutput:
    """The release actions for a capacity block (called by ``release_capacity`` for ``platform`` ``ec2``).

    ``begin`` records ``RELEASING`` and terminates every live instance tagged with the request;
    ``delete_components`` terminates what is still live and polls until none is (30 s doubling to 300 s,
    :class:`ReleaseStuck` after :data:`MAX_TERMINATE_POLLS`); ``delete_scaling``, ``delete_alarms``,
    ``delete_endpoint`` and ``delete_endpoint_config`` have nothing to do; ``finish`` verifies no instance
    is left, records ``RELEASED`` once with the cost summary, puts ``ReservationReleased``, posts it and
    deletes the schedule. The block itself is paid upfront and cannot be deleted.

    Raises:
        ReleaseStuck: instances still live after the last poll.
        LeftoverResources: ``finish`` found live instances tagged with the request.
    """
    ec2 = ports.ec2(purchase.region)
    if step.action == "begin":
        ports.ledger.record(
            step.request_id,
            Event.START_RELEASE,
            actor=ports.actor,
            detail={
                "reason": step.reason or "requested",
                "capacity_reservation_id": purchase.name,  # empty for instances run on demand
            },
        )
        _terminate(ec2, step.request_id, purchase, ports)
        return ReleaseOutput(done=False)
    if step.action == "delete_components":
        live = _terminate(ec2, step.request_id, purchase, ports)
        if not live:
            return ReleaseOutput(done=True)
        still = [f"instance {i.instance_id} ({i.state})" for i in live]
        if step.attempt >= MAX_TERMINATE_POLLS:
            raise ReleaseStuck(
                f"release of {step.request_id} gave up after {step.attempt} polls; still billing: "
                f"{', '.join(still)}. A person must terminate these."
            )
        return ReleaseOutput(
            done=False,
            remaining=len(live),
            next_wait_seconds=backoff_seconds(step.attempt, base=POLL_SECONDS, cap=300),
            attempt=step.attempt + 1,
        )
    if step.action == "finish":
        return _finish(step, ports, ec2, purchase)
    # delete_scaling, delete_alarms, delete_endpoint, delete_endpoint_config: SageMaker-only resources.
    return ReleaseOutput(done=True)


def live_instances(ports: Ports, purchase: Purchase, request_id: str) -> list[str]:
    """Ids of the instances of ``request_id`` that still bill (pending, running, stopping... or recorded
    and not listed yet) in the purchase's region."""
    listed = ports.ec2(purchase.region).find_instances(request_id)
    return [i.instance_id for i in _live(listed) + _unlisted(listed, purchase, ports, request_id)]


def _recorded(ports: Ports, purchase: Purchase, request_id: str) -> list[tuple[str, datetime | None]]:
    """``(instance id, when RunInstances answered it)`` of every instance the ledger names: those run on
    demand (the purchase) and those launched into the capacity block (``LAUNCHED``)."""
    recorded = [(i, purchase.written_at) for i in purchase.instance_ids]
    launched = ports.ledger.get(request_id, LAUNCHED)
    if launched is not None:
        at = parse_utc(str(launched["written_at"])) if launched.get("written_at") else None
        recorded += [(str(i), at) for i in launched.get("instance_ids") or []]
    return recorded


def _unlisted(listed: list[Instance], purchase: Purchase, ports: Ports, request_id: str) -> list[Instance]:
    """The instances the ledger recorded (:func:`_recorded`) that the listing does not show while their
    launch is recent (:data:`~capacity.logic.steps.on_demand_record.NOT_VISIBLE_GRACE`): EC2's reads lag
    behind ``RunInstances``, so they count as live (state ``unlisted``) until they are listed. A cancel right
    after the block's instances were launched once left four running to the block's end."""
    seen = {i.instance_id for i in listed}
    now = ports.clock()
    return [
        Instance(
            instance_id=instance_id,
            state="unlisted",
            instance_type=purchase.instance_type,
            availability_zone=None,
            capacity_reservation_id=None,
        )
        for instance_id, at in _recorded(ports, purchase, request_id)
        if instance_id not in seen and at is not None and now < at + NOT_VISIBLE_GRACE
    ]


def _terminate(ec2: Ec2Port, request_id: str, purchase: Purchase, ports: Ports) -> list[Instance]:
    """Terminate every live instance of the request (listed, or recorded and not listed yet); returns those
    not yet ``terminated``."""
    listed = ec2.find_instances(request_id)
    live = _live(listed) + _unlisted(listed, purchase, ports, request_id)
    to_stop = [i.instance_id for i in live if i.state != "shutting-down"]
    if to_stop:
        ec2.terminate_instances(to_stop)
    return live


def _finish(step: ReleaseInput, ports: Ports, ec2: Ec2Port, purchase: Purchase) -> ReleaseOutput:
    listed = ec2.find_instances(step.request_id)
    left = [i.instance_id for i in _live(listed) + _unlisted(listed, purchase, ports, step.request_id)]
    if left:
        raise LeftoverResources(
            f"release of {step.request_id} left instances tagged with it: {', '.join(left)}"
        )
    return record_released(
        step,
        ports,
        purchase,
        lambda summary, reason: messages.released_on_ec2(
            summary, request_id=step.request_id, reason=reason, market=purchase.market
        ),
    )


def still_billing(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """The live instances of the reservation in the purchase's region, each named (``instance i-...``)."""
    return [f"instance {i}" for i in live_instances(ports, purchase, request_id)]


def leftover_checks(
    ports: Ports, request_id: str, purchase: Purchase
) -> list[tuple[str, Callable[[], list[str]]]]:
    """What a failed release looks for, named, with the lookup (the instances tagged with the request)."""
    return [
        (
            f"instances tagged {TAG_REQUEST_ID}={request_id} in {purchase.region}",
            lambda: still_billing(ports, request_id, purchase),
        )
    ]
