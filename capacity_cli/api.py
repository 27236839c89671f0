"""The REST API of docs/api.md as the CLI and the MCP server call it, over any :class:`Transport`.

A transport carries one request to a target and brings back its answer: the deployed API
(:class:`capacity_cli.http.HttpTransport`, SigV4-signed), ``make serve`` (the same class, unsigned or signed
with local credentials), or the embedded local cloud (:class:`capacity_cli.local.EmbeddedTransport`).
:class:`CapacityApi` turns answers into values or into :class:`ApiError` with the API's own field errors.

Routes (docs/api.md): ``POST /plans``, ``POST /reservations``, ``GET /reservations``,
``GET|DELETE /reservations/{id}``, ``POST /reservations/{id}/approval``, ``POST|GET /schedules``,
``GET|DELETE /schedules/{name}``. Two more are planned and used only when a deployment has them:
``GET /costs`` (issue 16) and ``POST /reservations/{id}/extensions`` (issue 17); API Gateway answers 403
``Missing Authentication Token`` for a route it does not have, which :class:`NotAvailableError` reports.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import quote

from capacity_cli.exits import ExitStatus, status_for_http

MISSING_ROUTE = "Missing Authentication Token"
"""API Gateway's 403 message for a route the API does not have (and for an unsigned request)."""

FINAL_STATES = frozenset({"RELEASED", "REJECTED", "FAILED", "CANCELLED"})
"""States after which nothing more happens to a reservation (``CANCELLED`` is followed by its release)."""


class CliError(Exception):
    """A problem the user can fix; the message says what and how (exit status ``bad_input``, 2, unless a
    subclass says otherwise: :mod:`capacity_cli.exits`)."""

    exit_code: ExitStatus = ExitStatus.BAD_INPUT


class UnreachableError(CliError):
    """The target did not answer (no network, ``make serve`` not running, a timeout): ``unavailable``."""

    exit_code = ExitStatus.UNAVAILABLE


class RefusedError(CliError):
    """What the command asks cannot be done in the state things are in (as the API's 409): ``refused``."""

    exit_code = ExitStatus.REFUSED


class NotFoundError(CliError):
    """What the command names does not exist (a stack): ``not_found``."""

    exit_code = ExitStatus.NOT_FOUND


class NotAvailableError(CliError):
    """The deployment has no such route (e.g. ``GET /costs`` before issue 16 is deployed): ``not_found``."""

    exit_code = ExitStatus.NOT_FOUND


@dataclass(frozen=True)
class FieldProblem:
    """One of the API's field errors: ``field`` (``instance_type``, ``models.0.memory_mb``), ``message``."""

    field: str
    message: str


class ApiError(CliError):
    """The API refused the request.

    Attributes:
        status: the HTTP status (400, 404, 409, 413, 422, 503...).
        message: the ``message`` of the body, or a summary of its ``errors``.
        problems: the ``errors`` of a 400/413/422 body (empty otherwise).
        body: the parsed body as received.
    """

    def __init__(self, status: int, body: Any) -> None:
        self.status = status
        self.body = body
        self.problems: list[FieldProblem] = []
        if isinstance(body, Mapping) and isinstance(body.get("errors"), list):
            self.problems = [
                FieldProblem(str(item.get("field", "")), str(item.get("message", "")))
                for item in body["errors"]
                if isinstance(item, Mapping)
            ]
        if isinstance(body, Mapping) and (body.get("message") or body.get("Message")):
            # API Gateway's own refusals (an IAM deny) say "Message"; the API's answers say "message".
            message = str(body.get("message") or body.get("Message"))
        elif self.problems:
            message = "; ".join(f"{p.field}: {p.message}" for p in self.problems)
        else:
            message = str(body) if body else "no body"
        self.message = message
        self.exit_code = status_for_http(status)
        super().__init__(f"{status}: {message}")


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: ``status``, the parsed JSON ``body`` (text when it is not JSON), ``headers``."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


class Transport(Protocol):
    """Carries requests to one target (docs/cli.md, "Targets")."""

    def send(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None
    ) -> Answer:
        """One request; ``path`` is relative to the API stage (``/reservations``), already quoted.

        Raises:
            UnreachableError: no answer came.
        """
        ...

    def describe(self) -> str:
        """One line naming the target (``stack capacity-orchestrator in us-east-1 (https://...)``)."""
        ...

    def now(self) -> datetime:
        """The target's time (UTC): the real clock, or the embedded local cloud's virtual one."""
        ...

    def pause(self, seconds: float, *, request_id: str | None = None) -> bool:
        """Let time pass on the target, at most ``seconds`` of its time; False when nothing more can happen.

        A remote target sleeps for real; the embedded local cloud runs its simulation until the
        reservation ``request_id`` changes state (or nothing is left to run: then False).
        """
        ...


def date_header(headers: Mapping[str, str]) -> datetime | None:
    """The instant of an answer's ``Date`` header (RFC 9110: the server's clock, to the second), or None."""
    found = next((value for key, value in headers.items() if key.lower() == "date"), None)
    if not found:
        return None
    try:
        moment = parsedate_to_datetime(found)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _segment(value: str) -> str:
    # Request ids may hold ':' (allowed in a path segment); anything else unusual is escaped.
    return quote(value, safe=":")


def decode_body(raw: bytes, content_type: str | None) -> Any:
    """The body as JSON (numbers with decimals as :class:`~decimal.Decimal`), else as text."""
    text = raw.decode("utf-8", errors="replace")
    if not text:
        return None
    try:
        return json.loads(text, parse_float=Decimal)
    except ValueError:
        return {"message": text} if "json" in (content_type or "") else text


class CapacityApi:
    """The API's routes as methods (shapes: docs/api.md and docs/openapi.json).

    Every method raises :class:`ApiError` for a 4xx/5xx answer (field errors in ``problems``),
    :class:`NotAvailableError` for a route the deployment lacks, :class:`UnreachableError` when nothing
    answered.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    # ---------------------------------------------------------------------------------------- plumbing

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        planned: str | None = None,
    ) -> Any:
        """Send one request and return the body of a 2xx answer.

        Args:
            planned: for a route the deployment may not have yet, the issue that adds it: a 403
                ``Missing Authentication Token`` then raises :class:`NotAvailableError` naming it.
        """
        answer = self.transport.send(method, path, query=query, body=body)
        if 200 <= answer.status < 300:
            return answer.body
        missing = isinstance(answer.body, Mapping) and answer.body.get("message") == MISSING_ROUTE
        if answer.status == 403 and missing and planned is not None:
            raise NotAvailableError(
                f"not available in this deployment: {method} {path.split('?', 1)[0]} is not a route of this "
                f"API ({planned}); {self.transport.describe()}"
            )
        raise ApiError(answer.status, answer.body)

    # ------------------------------------------------------------------------------------------ plans

    def plan(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /plans``: the dry run (ranked offerings, the recommendation, ``advice``); buys nothing."""
        result: dict[str, Any] = self.call("POST", "/plans", body=dict(request))
        return result

    # ----------------------------------------------------------------------------------- reservations

    def submit(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /reservations``: 202 ``{"request_id", "status": "REQUESTED", "links"}``."""
        result: dict[str, Any] = self.call("POST", "/reservations", body=dict(request))
        return result

    def reservation(self, request_id: str) -> dict[str, Any]:
        """``GET /reservations/{id}``: state, request, purchase, history."""
        result: dict[str, Any] = self.call("GET", f"/reservations/{_segment(request_id)}")
        return result

    def reservations(
        self,
        *,
        state: str | None = None,
        team: str | None = None,
        limit: int = 20,
        next_token: str | None = None,
    ) -> dict[str, Any]:
        """``GET /reservations``: one page, newest first (``{"reservations", "next_token"}``); ``state`` and
        ``team`` keep only those currently in that state, of that team (a filtered page may be short while
        ``next_token`` is set)."""
        query = {"limit": str(limit)}
        if state:
            query["status"] = state
        if team:
            query["team"] = team
        if next_token:
            query["next_token"] = next_token
        result: dict[str, Any] = self.call("GET", "/reservations", query=query)
        return result

    def all_reservations(
        self, *, state: str | None = None, team: str | None = None, limit: int = 20
    ) -> Iterator[dict[str, Any]]:
        """Up to ``limit`` reservations, following ``next_token`` (a filtered page may be short)."""
        token: str | None = None
        found = 0
        while True:
            page = self.reservations(state=state, team=team, limit=min(limit, 100), next_token=token)
            for item in page.get("reservations") or []:
                yield item
                found += 1
                if found >= limit:
                    return
            token = page.get("next_token")
            if not token:
                return

    def decide(self, request_id: str, *, approved: bool, reason: str | None = None) -> dict[str, Any]:
        """``POST /reservations/{id}/approval`` without ``approver``: the API records the caller's identity
        (SigV4 principal ARN; locally ``requestContext.identity.userArn``) as the approver."""
        body: dict[str, Any] = {"approved": approved}
        if reason:
            body["reason"] = reason
        result: dict[str, Any] = self.call(
            "POST", f"/reservations/{_segment(request_id)}/approval", body=body
        )
        return result

    def cancel(self, request_id: str, *, confirm: bool = False) -> dict[str, Any]:
        """``DELETE /reservations/{id}[?confirm=true]``: 202 ``{"request_id", "status", "links"}``; without
        ``confirm`` a reservation whose upfront fee is paid answers 409 with the sunk fee (issue 16)."""
        query = {"confirm": "true"} if confirm else None
        result: dict[str, Any] = self.call("DELETE", f"/reservations/{_segment(request_id)}", query=query)
        return result

    # -------------------------------------------------------------------------------------- schedules

    def schedules(self, *, limit: int = 20, next_token: str | None = None) -> dict[str, Any]:
        """``GET /schedules``: ``{"schedules", "next_token"}``."""
        query = {"limit": str(limit)}
        if next_token:
            query["next_token"] = next_token
        result: dict[str, Any] = self.call("GET", "/schedules", query=query)
        return result

    def schedule(self, name: str) -> dict[str, Any]:
        """``GET /schedules/{name}``."""
        result: dict[str, Any] = self.call("GET", f"/schedules/{_segment(name)}")
        return result

    def create_schedule(self, definition: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /schedules``: 201 with the schedule."""
        result: dict[str, Any] = self.call("POST", "/schedules", body=dict(definition))
        return result

    def delete_schedule(self, name: str) -> dict[str, Any]:
        """``DELETE /schedules/{name}``: ``{"name", "deleted": true}``."""
        result: dict[str, Any] = self.call("DELETE", f"/schedules/{_segment(name)}")
        return result

    # ------------------------------------------------------------------ routes of issues 16 and 17

    def costs(self, query: Mapping[str, str]) -> Any:
        """``GET /costs?team=&month=&group_by=`` (issue 16), when the deployment has it.

        Raises:
            NotAvailableError: the route does not exist in this deployment.
        """
        return self.call("GET", "/costs", query=dict(query), planned="issue 16 adds it")  # since issue 16

    def extensions(self, request_id: str, body: Mapping[str, Any]) -> Any:
        """``POST /reservations/{id}/extensions`` (issue 17), when the deployment has it.

        Raises:
            NotAvailableError: the route does not exist in this deployment.
        """
        return self.call(
            "POST",
            f"/reservations/{_segment(request_id)}/extensions",
            body=dict(body),
            planned="issue 17 adds it",
        )

    def serve_until(self, request_id: str, body: Mapping[str, Any]) -> Any:
        """``PATCH /reservations/{id}`` (issue 17): ``serve_until`` and/or ``rollover_lead_hours``, when the
        deployment has it.

        Raises:
            NotAvailableError: the route does not exist in this deployment.
        """
        return self.call(
            "PATCH", f"/reservations/{_segment(request_id)}", body=dict(body), planned="issue 17 adds it"
        )


def spend_so_far(view: Mapping[str, Any]) -> Decimal:
    """USD committed so far: the sum of the history's ``money_usd`` (upfront fees as they are recorded)."""
    total = Decimal(0)
    for entry in view.get("history") or []:
        money = entry.get("money_usd") if isinstance(entry, Mapping) else None
        if money not in (None, ""):
            total += Decimal(str(money))
    return total
