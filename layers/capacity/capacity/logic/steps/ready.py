"""``READY``, recorded once for every platform: the reservation serves (SageMaker: the endpoint and its
inference components are ``InService``; EC2: the instances run, or the block is active without a launch
template)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capacity.events import ReservationReadyDetail
from capacity.lifecycle import Event
from capacity.logic.continuity.chain import endpoint_parameter, hand_over, handed_over, publish_endpoint
from capacity.logic.steps.common import states
from capacity.ports import Ports
from capacity.records import LedgerEntry, State


def record_ready(
    ports: Ports,
    event: ReservationReadyDetail,
    *,
    detail: dict[str, Any],
    resources: Sequence[str] | None = None,
    history: list[LedgerEntry] | None = None,
) -> bool:
    """Put ``ReservationReady`` (``event``; ``resources``: ARNs of the capacity), then record ``READY`` with
    ``detail`` once per lifecycle. True when this call recorded it: only then the caller records the usage and
    posts the Slack message.

    A SageMaker endpoint is first written to the chain's SSM parameter
    (:func:`~capacity.logic.continuity.chain. publish_endpoint`: ``event.parameter_name``), before the event
    and the state. A successor hands over from its predecessor
    (:func:`~capacity.logic.continuity.chain.hand_over`: the predecessor told and released) only after its own
    ``READY`` is recorded, so a predecessor is never released for a successor whose ``READY`` is not in the
    ledger (a step that died between the two would have left it so, and failed for good, both); a retry after
    ``READY`` finishes a hand-over left undone (:func:`~capacity.logic.continuity.chain.handed_over`).

    The order is the one safe under retries. The event goes out only while ``READY`` is not recorded yet
    (read from ``history``, else from the ledger), and before the state: a step retried after the state was
    written sends nothing again, and a step that died between the event and the state sends it again on its
    retry (at least once: a consumer may see it twice, never not at all). The other order, the state first,
    would lose the event for good when the Lambda dies right after writing the state, since the retry finds
    ``READY`` and cannot tell whether the event went out.

    Raises:
        RetryableAwsError: ``PutEvents`` or the ledger write failed after retries (nothing recorded: retry).
    """
    seen = states(history if history is not None else ports.ledger.history(event.request_id))
    request = ports.ledger.get_request(event.request_id)
    if State.READY in seen:
        if request is not None and not handed_over(ports, request):  # died after READY: finish it
            if event.endpoint_name:
                event = event.model_copy(update={"parameter_name": endpoint_parameter(ports, request)})
            hand_over(ports, request, event)
        return False
    if request is not None and event.endpoint_name:  # clients find the endpoint by the chain's parameter
        event = event.model_copy(update={"parameter_name": publish_endpoint(ports, request, event)})
    ports.events.put("ReservationReady", event, resources=resources or ())
    written = ports.ledger.record(event.request_id, Event.SERVE, actor=ports.actor, detail=detail)
    if request is not None:
        hand_over(ports, request, event)  # a successor: the predecessor is told and released
    return written is not None
