"""The chain of reservations that keeps a model served (issue 17, ``serve_until``): its links, the SSM
parameter clients find the current endpoint by, the hand-over when a successor is ready, and the chain as
``GET /reservations/{id}`` shows it.

A successor is a request of its own whose ``rollover_of`` names its predecessor; the predecessor's
``SUCCESSOR`` item names the successor (put by :mod:`capacity.logic.continuity.rollover` before the successor
is requested). A link counts only when both agree (:func:`linked_predecessor`): a request that names a
predecessor which did not name it back takes nothing over.

The parameter ``/capacity-orchestrator/<first request of the chain>/endpoint`` (:func:`publish_endpoint`) is
written when a SageMaker reservation is ``READY``, before ``ReservationReady``: its JSON value names the
request, region, endpoint and the inference component of each model. A successor's ``READY`` overwrites it
(the switch: once, since an equal value is not written again) and hands over (:func:`hand_over`):
``ReservationRolledOver``, ``ROLLED_OVER`` on the predecessor, and the predecessor's release (reason
``rolled-over``). Once the reservation it names and every later one of the chain are stopped, the release
deletes it (:func:`retire_endpoint`): a dead endpoint is never shown as current. Nothing here imports a
platform wing: :mod:`capacity.logic.steps.ready` and :mod:`capacity.logic.steps.ending` call it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from capacity import messages
from capacity.events import ReleaseRequestedDetail, ReservationReadyDetail, ReservationRolledOverDetail
from capacity.ledger import history_of
from capacity.logic.steps.common import STOP_STATES, post, purchase_from, states
from capacity.naming import endpoint_parameter_name, inference_component_name
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE, REQUEST, ROLLED_OVER, SERVE_UNTIL, SUCCESSOR
from capacity.request import ReservationRequest
from capacity.succession import MAX_GENERATIONS
from capacity.timeutil import iso_z, parse_utc

logger = logging.getLogger(__name__)

RELEASE_REASON = "rolled-over"
"""``ReleaseRequested`` reason of a predecessor once its successor serves."""


@dataclass(frozen=True)
class Target:
    """What a reservation keeps serving until (UTC; None: no longer than itself), and how long before its end
    the orchestrator acts (hours)."""

    serve_until: datetime | None
    lead_hours: int


def serving_target(
    ports: Ports, request: ReservationRequest, *, items: Sequence[Mapping[str, Any]] | None = None
) -> Target:
    """The reservation's current ``serve_until`` and lead time: the last ``SERVE_UNTIL#`` (a PATCH), else the
    request's (``items``: the reservation's ledger items already read, else they are queried)."""
    prefix = f"{SERVE_UNTIL}#"
    read = ports.ledger.items(request.id, prefix) if items is None else items
    changes = sorted((i for i in read if str(i["sk"]).startswith(prefix)), key=lambda i: str(i["sk"]))
    if changes:
        last = changes[-1]
        until = last.get("serve_until")
        return Target(parse_utc(str(until)) if until else None, int(last["rollover_lead_hours"]))
    return Target(request.serve_until, request.rollover_lead_hours)


def linked_predecessor(ports: Ports, request: ReservationRequest) -> ReservationRequest | None:
    """The reservation ``request`` takes over from: its ``rollover_of``, when that one's ``SUCCESSOR`` names
    ``request`` back (None otherwise)."""
    if not request.rollover_of:
        return None
    successor = ports.ledger.get(request.rollover_of, SUCCESSOR)
    if successor is None or successor.get("successor_id") != request.id:
        logger.warning(
            "%s names %s as its predecessor, which does not name it back", request.id, request.rollover_of
        )
        return None
    return ports.ledger.get_request(request.rollover_of)


def chain_ids(ports: Ports, request_id: str) -> list[str]:
    """Every request of the chain ``request_id`` belongs to, first (the root) to last (at most
    :data:`~capacity.succession.MAX_GENERATIONS`)."""
    back: list[str] = [request_id]
    current = ports.ledger.get_request(request_id)
    while current is not None and current.rollover_of and len(back) < MAX_GENERATIONS:
        previous = linked_predecessor(ports, current)
        if previous is None:
            break
        back.insert(0, previous.id)
        current = previous
    forward = back[-1]
    while len(back) < MAX_GENERATIONS:
        successor = ports.ledger.get(forward, SUCCESSOR)
        if successor is None:
            break
        forward = str(successor["successor_id"])
        back.append(forward)
    return back


def successors(ports: Ports, request_id: str) -> list[str]:
    """The successors requested after ``request_id``, nearest first (named by ``SUCCESSOR`` items, recorded
    or not yet)."""
    found: list[str] = []
    current = request_id
    while len(found) < MAX_GENERATIONS:
        successor = ports.ledger.get(current, SUCCESSOR)
        if successor is None:
            return found
        current = str(successor["successor_id"])
        found.append(current)
    return found


def chain_root(ports: Ports, request: ReservationRequest) -> str:
    """The first request of ``request``'s chain (``request`` itself without a linked predecessor)."""
    current = request
    for _ in range(MAX_GENERATIONS):
        previous = linked_predecessor(ports, current)
        if previous is None:
            return current.id
        current = previous
    return current.id


def _endpoint_value(request: ReservationRequest, event: ReservationReadyDetail) -> str:
    """The parameter's JSON value: the request, region, endpoint and each model's inference component."""
    return json.dumps(
        {
            "request_id": request.id,
            "region": event.region,
            "endpoint_name": event.endpoint_name,
            "inference_components": {
                model.name: inference_component_name(request.id, model.name) for model in request.models
            },
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def endpoint_parameter(ports: Ports, request: ReservationRequest) -> str:
    """The name of the endpoint parameter of ``request``'s chain (named after its first request)."""
    return endpoint_parameter_name(chain_root(ports, request))


def handed_over(ports: Ports, request: ReservationRequest) -> bool:
    """True when ``request`` is no successor, or its predecessor is told (``ROLLED_OVER``) and stopped: the
    hand-over (:func:`hand_over`) has nothing left to do."""
    if not request.rollover_of:
        return True
    return ports.ledger.get(request.rollover_of, ROLLED_OVER) is not None and bool(
        states(ports.ledger.history(request.rollover_of)) & STOP_STATES
    )


def publish_endpoint(ports: Ports, request: ReservationRequest, event: ReservationReadyDetail) -> str:
    """Write the chain's endpoint parameter for ``request``'s endpoint (``event``), unless it holds that value
    already or ``request`` has handed over to a successor since; returns the parameter's name.

    Raises:
        RetryableAwsError, AccessDenied: Parameter Store failed or refused (the step retries).
    """
    name = endpoint_parameter(ports, request)
    if ports.ledger.get(request.id, ROLLED_OVER) is None:
        ports.parameters.put(
            name,
            _endpoint_value(request, event),
            description=f"Capacity Orchestrator: the endpoint serving {request.id}'s models now",
        )
    return name


def retire_endpoint(ports: Ports, request_id: str) -> bool:
    """Delete the endpoint parameter of ``request_id``'s chain once nothing it could name serves: the
    reservation it names and every later one of the chain are stopped (``RELEASING`` or a final state) or,
    never recorded, past their latest start, so clients are never told a deleted endpoint is current. While
    a later reservation may still become ``READY`` (it would write its own endpoint there) the parameter
    stays; that reservation's own ending retires it. Called when a reservation of the chain is released and
    when a successor fails; idempotent.

    Returns:
        True when this call deleted it.

    Raises:
        RetryableAwsError, AccessDenied: Parameter Store failed or refused (the step retries).
    """
    chain = chain_ids(ports, request_id)
    name = endpoint_parameter_name(chain[0])
    value = ports.parameters.get(name)
    if value is None:
        return False
    try:
        named = str(json.loads(value).get("request_id"))
    except (ValueError, AttributeError):
        named = ""
    if named not in chain:  # not a value this chain wrote: not ours to delete
        logger.warning("the parameter %s names %r, not a reservation of %s's chain", name, named, request_id)
        return False
    later = chain[chain.index(named) :]
    pairs = zip([None, *later], later, strict=False)
    if any(_may_serve(ports, member, previous) for previous, member in pairs):
        return False
    return ports.parameters.delete(name)


def _may_serve(ports: Ports, member: str, previous: str | None) -> bool:
    """Whether ``member`` serves or may still: not stopped and, when its request is not recorded (its
    ``ReservationRequested`` is late or lost), its predecessor's ``SUCCESSOR`` latest start not passed yet
    (after it nothing can be bought in its window: the intake refuses it and records nothing)."""
    if states(ports.ledger.history(member)) & STOP_STATES:
        return False
    if previous is None or ports.ledger.get(member, REQUEST) is not None:
        return True
    successor = ports.ledger.get(previous, SUCCESSOR) or {}
    latest_start = successor.get("latest_start")
    return latest_start is None or ports.clock() < parse_utc(str(latest_start))


def hand_over(ports: Ports, request: ReservationRequest, event: ReservationReadyDetail) -> None:
    """``request`` serves (its endpoint parameter written): when it is a successor, tell and release its
    predecessor: ``ReservationRolledOver`` (at least once), ``ROLLED_OVER`` on the predecessor (once: the
    message with it), and ``ReleaseRequested`` (``rolled-over``) while the predecessor is not stopped. The
    predecessor's own release schedule stays as the backstop until its release deletes it.

    Raises:
        RetryableAwsError: the bus or the ledger failed (the step retries: every part is idempotent).
    """
    predecessor = linked_predecessor(ports, request)
    if predecessor is None:
        return
    ports.events.put(
        "ReservationRolledOver",
        ReservationRolledOverDetail(
            request_id=predecessor.id,
            successor_id=request.id,
            region=event.region,
            endpoint_name=event.endpoint_name,
            inference_component_names=list(event.inference_component_names),
            parameter_name=event.parameter_name,
        ),
    )
    created, _ = ports.ledger.put_once(
        predecessor.id,
        ROLLED_OVER,
        {
            "actor": ports.actor,
            "successor_id": request.id,
            "region": event.region,
            "endpoint_name": event.endpoint_name,
            "parameter_name": event.parameter_name,
        },
    )
    if not states(ports.ledger.history(predecessor.id)) & STOP_STATES:
        ports.events.put(
            "ReleaseRequested", ReleaseRequestedDetail(request_id=predecessor.id, reason=RELEASE_REASON)
        )
    if created:
        post(
            ports,
            messages.rolled_over(
                predecessor.id,
                successor=request.id,
                region=event.region,
                endpoint=event.endpoint_name,
                parameter=event.parameter_name,
            ),
        )


def chain_view(
    ports: Ports, request_id: str, *, items: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The chain ``request_id`` belongs to, as ``GET /reservations/{id}`` shows it: per reservation
    ``request_id``, ``rollover_of``, what (``instance_type``, ``instance_count``, ``platform``), where
    (``region``), its window (``start_time``, ``end_time``: the end of its last paid extension), ``fee_usd``
    (the upfront fee plus paid extensions, USD) and ``state``. A single reservation without successor or
    predecessor is a chain of one, read from ``items`` (its ledger items, when already read) alone."""
    own = list(items) if items is not None else ports.ledger.items(request_id)
    by_sk = {str(item["sk"]): item for item in own}
    alone = SUCCESSOR not in by_sk and not ((by_sk.get(REQUEST) or {}).get("request") or {}).get(
        "rollover_of"
    )
    members = [request_id] if alone else chain_ids(ports, request_id)
    return [_link(member, own if member == request_id else ports.ledger.items(member)) for member in members]


def _link(member: str, items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One reservation of :func:`chain_view` from its ledger items."""
    by_sk = {str(item["sk"]): item for item in items}
    request = (by_sk.get(REQUEST) or {}).get("request") or {}
    history = history_of(items)
    purchase = purchase_from(items) if PURCHASE in by_sk else None
    fee = purchase.upfront_fee_usd + purchase.extension_fees_usd if purchase else Decimal(0)
    return {
        "request_id": member,
        "rollover_of": request.get("rollover_of"),
        "platform": request.get("platform", "sagemaker"),
        "instance_type": request.get("instance_type"),
        "instance_count": request.get("instance_count"),
        "region": purchase.region if purchase else None,
        "start_time": iso_z(purchase.start_time) if purchase else None,
        "end_time": iso_z(purchase.end_time) if purchase else None,
        "fee_usd": f"{fee:f}",
        "state": history[-1].state.value if history else None,
        "rolled_over_to": (by_sk.get(ROLLED_OVER) or {}).get("successor_id"),
    }
