"""Lambda ``api``: the REST API (API Gateway REST proxy, IAM auth) over the reservations.

Routes (Powertools ``APIGatewayRestResolver``):

- ``POST /reservations``: validate, put ``ReservationRequested`` once per ``request_id`` -> 202
  ``{"request_id", "status": "REQUESTED", "links"}``; 400 ``{"errors": [{"field", "message"}]}``.
- ``GET /reservations/{id}``: history and current state; 404 when unknown.
- ``POST /reservations/{id}/approval``: ``{"approved", "approver", "reason"}`` -> answers the waiting
  approval task; 409 when not awaiting approval.
- ``DELETE /reservations/{id}``: cancel -> 202, ``ReleaseRequested`` (reason ``cancelled``).

Env: LEDGER_TABLE, EVENT_BUS_NAME, IDEMPOTENCY_TABLE.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from aws_lambda_powertools.utilities.typing import LambdaContext
from capacity.errors import (
    DuplicateRequest,
    FieldError,
    InvalidRequest,
    NotAwaitingApproval,
    ReservationClosed,
    ReservationNotFound,
)
from capacity.logic import api
from capacity.ports import Ports
from capacity.settings import Settings

logger = Logger()
app = APIGatewayRestResolver()
CONFLICTS: list[type[Exception]] = [
    NotAwaitingApproval,
    ReservationClosed,
    DuplicateRequest,
    IdempotencyAlreadyInProgressError,
]


def _ports() -> Ports:
    return Ports(Settings.from_env(require=("ledger_table",)))


def _json(status: int, body: dict[str, Any]) -> Response[str]:
    return Response(status_code=status, content_type="application/json", body=json.dumps(body))


def _body() -> Any:
    """The request body as JSON (numbers with decimals as ``Decimal``: money is never a float)."""
    try:
        text = app.current_event.decoded_body
    except ValueError as exc:  # binascii.Error, UnicodeDecodeError: isBase64Encoded with a bad body
        raise InvalidRequest(
            [FieldError("body", f"is marked base64-encoded but is not valid base64 UTF-8: {exc}")]
        ) from exc
    if not text:
        raise InvalidRequest([FieldError("body", "is empty: send a JSON object")])
    try:
        return json.loads(text, parse_float=Decimal)
    except ValueError as exc:
        raise InvalidRequest([FieldError("body", f"is not valid JSON: {exc}")]) from exc


@app.post("/reservations")
def post_reservation() -> Response[str]:
    """Submit a reservation request."""
    ports = _ports()
    result = api.submit_reservation(
        _body(),
        ports,
        persistence=api.persistence_layer(ports.settings),
        lambda_context=app.lambda_context,
    )
    logger.set_correlation_id(result["request_id"])
    return _json(202, result)


@app.get("/reservations/<request_id>")
def get_reservation(request_id: str) -> Response[str]:
    """The reservation's state and history."""
    logger.set_correlation_id(request_id)
    return _json(200, api.get_reservation(request_id, _ports()))


@app.post("/reservations/<request_id>/approval")
def post_approval(request_id: str) -> Response[str]:
    """Approve or reject the pending purchase."""
    logger.set_correlation_id(request_id)
    return _json(200, api.decide_approval(request_id, _body(), _ports()))


@app.delete("/reservations/<request_id>")
def delete_reservation(request_id: str) -> Response[str]:
    """Cancel the reservation and release whatever it holds."""
    logger.set_correlation_id(request_id)
    actor = api.caller(app.current_event.raw_event)
    return _json(202, api.cancel_reservation(request_id, _ports(), actor=actor))


@app.exception_handler(InvalidRequest)  # type: ignore[untyped-decorator]
def invalid(exc: InvalidRequest) -> Response[str]:
    """400 with every problem, each naming the field and the fix."""
    return _json(400, {"errors": [error.as_dict() for error in exc.errors]})


@app.exception_handler(ReservationNotFound)  # type: ignore[untyped-decorator]
def not_found(exc: ReservationNotFound) -> Response[str]:
    """404 for an unknown reservation."""
    return _json(404, {"message": str(exc)})


@app.exception_handler(CONFLICTS)  # type: ignore[untyped-decorator]
def conflict(exc: Exception) -> Response[str]:
    """409: the reservation is not in a state that allows this (or the same POST is in flight)."""
    return _json(409, {"message": str(exc) or type(exc).__name__})


@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Resolve the API Gateway proxy event."""
    return app.resolve(event, context)
