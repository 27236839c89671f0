"""``READY``, recorded once for every platform: the reservation serves (SageMaker: the endpoint and its
inference components are ``InService``; EC2: the instances run, or the block is active without a launch
template)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capacity.events import ReservationReadyDetail
from capacity.logic.chain import hand_over, publish_endpoint
from capacity.logic.common import states
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

    A SageMaker endpoint is first written to the chain's SSM parameter (:func:`~capacity.logic.chain.
    publish_endpoint`: ``event.parameter_name``); a successor then hands over from its predecessor
    (:func:`~capacity.logic.chain.hand_over`), both before the state, so a retry repeats them harmlessly.

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
    if State.READY in seen:
        return False
    request = ports.ledger.get_request(event.request_id)
    if request is not None and event.endpoint_name:  # clients find the endpoint by the chain's parameter
        event = event.model_copy(update={"parameter_name": publish_endpoint(ports, request, event)})
    ports.events.put("ReservationReady", event, resources=resources or ())
    if request is not None:
        hand_over(ports, request, event)  # a successor: the predecessor is told and released
    written = ports.ledger.append(event.request_id, State.READY, actor=ports.actor, detail=detail, once=True)
    return written is not None
