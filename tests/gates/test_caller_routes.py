"""Gate (issue 29, 2): every route of docs/openapi.json is granted to the caller role meant for it and to
no other.

The caller roles are the policies of docs/deploy.md (deploy/requester-policy.json, approver-policy.json,
admin-policy.json), evaluated by the local cloud's own IAM (``execute-api:Invoke`` on the route's ARN, as
API Gateway checks an ``AWS_IAM`` route). A route added to the API without its grant (day one: 403 for
everyone) or granted to a role it is not meant for fails here, naming the route and the role.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from localcloud.iam import Iam
from localcloud.iam.lookups import CloudLookups
from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "docs/openapi.json"
ROLES = {
    "requesters": ROOT / "deploy/requester-policy.json",
    "approvers": ROOT / "deploy/approver-policy.json",
    "admins": ROOT / "deploy/admin-policy.json",
}
REQUESTERS, APPROVERS, ADMINS = "requesters", "approvers", "admins"

MEANT_FOR: dict[str, frozenset[str]] = {
    "POST /plans": frozenset({REQUESTERS}),
    "POST /reservations": frozenset({REQUESTERS}),
    "GET /reservations": frozenset({REQUESTERS, APPROVERS}),
    "GET /reservations/{request_id}": frozenset({REQUESTERS, APPROVERS}),
    "DELETE /reservations/{request_id}": frozenset({REQUESTERS}),
    "PATCH /reservations/{request_id}": frozenset({REQUESTERS}),
    "POST /reservations/{request_id}/extensions": frozenset({REQUESTERS}),
    "POST /reservations/{request_id}/approval": frozenset({APPROVERS}),
    "POST /reservations/{request_id}/extensions/{extension_id}/approval": frozenset({APPROVERS}),
    "GET /schedules": frozenset({REQUESTERS, APPROVERS}),
    "GET /schedules/{name}": frozenset({REQUESTERS, APPROVERS}),
    "POST /schedules": frozenset({APPROVERS}),
    "DELETE /schedules/{name}": frozenset({APPROVERS}),
    "GET /costs": frozenset({REQUESTERS, ADMINS}),
    "GET /admin/teams": frozenset({ADMINS}),
    "GET /admin/teams/{team}": frozenset({ADMINS}),
    "PUT /admin/teams/{team}": frozenset({ADMINS}),
    "DELETE /admin/teams/{team}": frozenset({ADMINS}),
    "PUT /admin/account": frozenset({ADMINS}),
    "GET /admin/admins": frozenset({ADMINS}),
    "PUT /admin/admins": frozenset({ADMINS}),
    "GET /admin/people": frozenset({ADMINS}),
    "PUT /admin/people": frozenset({ADMINS}),
}
"""Who each route is for (docs/api.md; docs/deploy.md, "Caller policies")."""


def _routes() -> list[str]:
    paths = json.loads(OPENAPI.read_text(encoding="utf-8"))["paths"]
    return sorted(f"{method.upper()} {path}" for path, ops in paths.items() for method in ops)


@pytest.fixture(scope="module")
def iam() -> Iam:
    """The local cloud's IAM with each caller role's policy attached to a session of its own."""
    stack = Stack.load(ROOT / "template.yaml")
    found = Iam(
        stack,
        lookups=CloudLookups(None, None, account_id=stack.account_id),
        now=lambda: datetime(2026, 1, 1, tzinfo=UTC),
    )
    for role, path in ROLES.items():
        document = json.loads(path.read_text(encoding="utf-8"))
        found.add_caller_policy(_caller(role), document, source=path.name)
    return found


def _caller(role: str) -> str:
    return f"arn:aws:sts::123456789012:assumed-role/{role}/someone"


def _route_arn(route: str) -> str:
    method, path = route.split(" ", 1)
    concrete = re.sub(r"\{[^}]+\}", "r-0123456789abcdef", path)
    return f"arn:aws:execute-api:us-east-1:123456789012:a1b2c3d4e5/v1/{method}{concrete}"


def test_every_route_of_the_api_is_in_the_table() -> None:
    assert set(_routes()) == set(MEANT_FOR), "say who a new route is for in MEANT_FOR (and grant it)"


@pytest.mark.parametrize("route", _routes())
def test_each_route_is_granted_to_the_roles_meant_for_it_and_no_other(iam: Iam, route: str) -> None:
    granted = {
        role
        for role in ROLES
        if iam.authorize_caller(_caller(role), _route_arn(route), operation=route) is None
    }
    assert granted == MEANT_FOR[route], f"{route}: granted to {sorted(granted)}"


def test_a_principal_with_no_caller_policy_is_refused_every_route(iam: Iam) -> None:
    stranger = "arn:aws:sts::123456789012:assumed-role/Visitors/vic"
    refused = [r for r in _routes() if iam.authorize_caller(stranger, _route_arn(r), operation=r) is not None]
    assert refused == _routes()
