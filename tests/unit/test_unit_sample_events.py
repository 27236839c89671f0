"""Every sample event in events/ is a valid input of its function (the gate in tests/gates/ wants each one
named by a test: this table is where a new function's events go).

The function inputs name reservation ``eval-week-49``, which the empty unit ledger does not hold, so a step
answers ``ReservationNotFound`` or ``PlanFailed`` (no such plan), or does its work when it needs no
reservation; what must never happen is
``InvalidRequest``, the error of an input that does not match the function's contract. Each event with a
required field removed must fail with ``InvalidRequest``, which shows the check can tell the two apart.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from capacity.errors import CapacityError, InvalidRequest

from tests.unit.handler_support import invoke, load_handler
from tests.unit.unit_fakes import World

ROOT = Path(__file__).resolve().parents[2]

STEP_EVENTS: list[tuple[str, str, str]] = [
    # (function, sample event, a required field of its input)
    ("record_request", "events/functions/record_request.json", "detail"),
    ("search_offerings", "events/functions/search_offerings.json", "region"),
    ("choose_offering", "events/functions/choose_offering.json", "request_id"),
    ("notify", "events/functions/notify.json", "kind"),
    ("purchase_capacity", "events/functions/purchase_capacity.json", "request_id"),
    ("wait_for_activation", "events/functions/wait_for_activation.json", "request_id"),
    ("create_endpoint", "events/functions/create_endpoint.json", "request_id"),
    ("create_inference_components", "events/functions/create_inference_components.json", "request_id"),
    ("release_capacity", "events/functions/release_capacity.json", "request_id"),
]

DOMAIN_ANSWERS = {"ReservationNotFound", "PlanFailed"}
"""What a step may answer about ``eval-week-49`` on an empty ledger and an empty SageMaker."""

API_EVENTS: list[tuple[str, set[int]]] = [
    # (API Gateway proxy event, the statuses it may get from an empty ledger)
    ("events/api_post_reservation.json", {202}),
    ("events/api_post_reservation_needs_approval.json", {202}),
    ("events/api_get_reservation.json", {404}),
    ("events/api_post_approval.json", {404}),
    ("events/api_delete_reservation.json", {404}),
]


@pytest.fixture
def fake_sagemaker(aws: None, monkeypatch: pytest.MonkeyPatch) -> World:
    """A fake SageMaker behind ``Ports`` (moto has no training plans)."""
    world = World()
    monkeypatch.setattr("capacity.ports.SageMakerAdapter", world.client)
    return world


def _answer(handler: Any, event: dict[str, Any]) -> str:
    """``ok`` when the handler returned, else the name of the domain error it raised."""
    try:
        invoke(handler, event)
    except CapacityError as exc:  # a domain answer (no such reservation or plan): the input was understood
        return type(exc).__name__
    return "ok"


def _event(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((ROOT / path).read_text())
    return loaded


@pytest.mark.usefixtures("fake_sagemaker")
@pytest.mark.parametrize(("function", "path", "required"), STEP_EVENTS)
def test_step_sample_event_matches_the_function_contract(function: str, path: str, required: str) -> None:
    handler = load_handler(function)
    event = _event(path)
    answer = _answer(handler, event)
    assert answer not in ("InvalidRequest", None), f"{path} is not a valid {function} input"
    assert answer in DOMAIN_ANSWERS | {"ok"}, f"{path}: {answer}"

    broken = {key: value for key, value in event.items() if key != required}
    with pytest.raises(InvalidRequest, match=required):
        invoke(handler, broken)


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize(("path", "statuses"), API_EVENTS)
def test_api_sample_event_is_routed_and_accepted(path: str, statuses: set[int]) -> None:
    handler = load_handler("api")
    response = invoke(handler, _event(path))
    assert response["statusCode"] in statuses, response
