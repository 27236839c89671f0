"""``capacity smoke``: does every route of a deployment answer? It buys, creates and changes nothing.

Each route is called with a request whose answer is known without side effects: a dry run (``POST /plans``
never buys), lists, and requests for a reservation and a schedule that do not exist (404) or with a body the
API refuses before doing anything (400). An answer proves the route exists, API Gateway accepted the SigV4
signature (IAM auth), the function ran with its permissions (DynamoDB reads, Scheduler list, SageMaker
search) and the error shapes are the API's. The Slack routes (no IAM auth; every request must carry Slack's
signature) must refuse an unsigned request with 401; 502 means the Slack signing secret was never set
(docs/slack.md, step 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from capacity_cli.api import CapacityApi, UnreachableError

MISSING_RESERVATION = "smoke-check-no-such-reservation"
MISSING_SCHEDULE = "smoke-check-no-such-schedule"


@dataclass(frozen=True)
class RouteCheck:
    """One route's check: what was sent, the statuses that pass, what came back and why it matters."""

    method: str
    path: str
    expected: tuple[int, ...]
    status: int | None = None
    ok: bool = False
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)


def _checks(plan_body: Mapping[str, Any]) -> list[tuple[str, str, Any, tuple[int, ...], str]]:
    reservation = f"/reservations/{MISSING_RESERVATION}"
    schedule = f"/schedules/{MISSING_SCHEDULE}"
    return [
        ("POST", "/plans", dict(plan_body), (200,), "dry run: searches, buys nothing"),
        ("POST", "/plans", {}, (400,), "field errors"),
        ("POST", "/reservations", {"requester": ""}, (400,), "refused before anything is submitted"),
        ("GET", "/reservations?limit=1", None, (200,), "ledger listing"),
        ("GET", reservation, None, (404,), "ledger read"),
        ("POST", f"{reservation}/approval", {"approved": False}, (404,), "nothing to approve"),
        ("DELETE", reservation, None, (404,), "nothing to cancel"),
        ("POST", "/schedules", {}, (400,), "refused before anything is created"),
        ("GET", "/schedules?limit=1", None, (200,), "Scheduler listing"),
        ("GET", schedule, None, (404,), "Scheduler read"),
        ("DELETE", schedule, None, (404,), "nothing to delete"),
        ("POST", "/slack/commands", {}, (401, 502), "Slack signature required"),
        ("POST", "/slack/interactions", {}, (401, 502), "Slack signature required"),
    ]


def run_checks(api: CapacityApi, plan_body: Mapping[str, Any]) -> list[RouteCheck]:
    """Call every route once (see the module docstring); never raises for an unexpected status."""
    results = []
    for method, target, body, expected, why in _checks(plan_body):
        path, _, query_text = target.partition("?")
        query = dict(pair.split("=", 1) for pair in query_text.split("&")) if query_text else None
        try:
            answer = api.transport.send(method, path, query=query, body=body)
        except UnreachableError as exc:
            results.append(RouteCheck(method, target, expected, None, False, str(exc)))
            continue
        note = why
        if answer.status == 502 and path.startswith("/slack/"):
            note = "502: the Slack signing secret is not set (docs/slack.md, step 3); fine without Slack"
        elif answer.status not in expected:
            got = answer.body
            message = (got.get("message") or got.get("errors")) if isinstance(got, Mapping) else got
            note = f"unexpected answer: {message}"
        results.append(RouteCheck(method, target, expected, answer.status, answer.status in expected, note))
    return results
