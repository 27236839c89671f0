"""Callers authorised per route at every door (issue 29, 2): ``localcloud serve``, ``capacity --local`` and
the MCP server's local mode evaluate the caller's ``execute-api:Invoke`` (local_values.json
``CallerPolicies``: deploy/*-policy.json) on the route before any function runs; a route the caller's
policies do not grant is API Gateway's 403, and nothing happens behind it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import anyio
from mcp import Client

from capacity_cli.api import CapacityApi
from capacity_cli.local import EmbeddedTransport
from capacity_cli.mcp_server import build_server
from localcloud.cloud import LocalCloud
from localcloud.http_api import CALLER_HEADER, LocalApiServer, api_callers
from tests.cli.conftest import APPROVER_ARN, REQUESTER_ARN, Cli, future_body

STRANGER = "arn:aws:sts::123456789012:assumed-role/Visitors/vic"
TEAM = {"members": {"iam_principal_arns": [STRANGER]}, "monthly_budget_usd": "1"}


def _lambda_runs(cloud: LocalCloud) -> int:
    return len(cloud.lambdas.records)


def test_serve_refuses_a_route_the_callers_policy_does_not_grant(cloud: LocalCloud) -> None:
    server = LocalApiServer(
        port=0,
        routes=cloud.stack.api_routes,
        serve=cloud.api_request,
        account_id=cloud.account_id,
        now=cloud.now,
        # as `localcloud serve` does: an unsigned request is the caller its X-Localcloud-Caller header names
        unsigned_caller=next(iter(api_callers(cloud.stack.local_values).values())),
    )
    cloud.clock.ignore_thread(server.start())
    port = int(server.server_address[1])

    def put(caller: str) -> tuple[int, dict[str, Any], str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/admin/teams/ml-visitors",
            data=json.dumps(TEAM).encode(),
            method="PUT",
            headers={"Content-Type": "application/json", CALLER_HEADER: caller},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - 127.0.0.1
                return answer.status, json.loads(answer.read()), ""
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read()), str(refused.headers.get("x-amzn-ErrorType"))

    try:
        before = _lambda_runs(cloud)
        status, body, kind = put(REQUESTER_ARN)  # a requester: no grant on the admin routes
        assert (status, kind) == (403, "AccessDeniedException"), body
        assert body["Message"].startswith(
            f"User: {REQUESTER_ARN} is not authorized to perform: execute-api:Invoke on resource: "
            "arn:aws:execute-api:us-east-1:123456789012:"
        )
        assert body["Message"].endswith("/v1/PUT/admin/teams/ml-visitors")
        assert _lambda_runs(cloud) == before  # refused before the function
    finally:
        server.stop()
    denied = [d for d in cloud.iam.denials if d.action == "execute-api:Invoke"] if cloud.iam else []
    assert denied
    assert denied[-1].principal == REQUESTER_ARN


def test_capacity_local_refuses_what_the_identity_is_not_granted(cli: Cli, cloud: LocalCloud) -> None:
    body = future_body(cloud, instance_type="ml.p5en.48xlarge")
    path = cloud.stack.root / "build-plan-request.json"
    path.write_text(json.dumps(body))
    try:
        allowed = cli("plan", "--file", str(path))
        assert allowed.exit_code == 0, allowed.output
        # Approvers' policy grants no POST /plans; a principal with no caller policy is refused every route.
        for identity in (APPROVER_ARN, STRANGER):
            refused = cli("plan", "--file", str(path), identity=identity)
            assert refused.exit_code != 0
            assert "403" in refused.output or "not authorized" in refused.output, refused.output
            assert "execute-api:Invoke" in refused.output, refused.output
    finally:
        path.unlink()


def test_the_mcp_servers_local_mode_refuses_a_caller_without_the_grant(cloud: LocalCloud) -> None:
    body = future_body(cloud, instance_type="ml.p5en.48xlarge")
    server = build_server(CapacityApi(EmbeddedTransport(cloud, identity=STRANGER)))

    async def session() -> Any:
        async with Client(server) as client:
            return await client.call_tool("plan", {"request": body})

    result = anyio.run(session)
    assert result.is_error
    text = " ".join(getattr(part, "text", "") for part in result.content)
    assert "execute-api:Invoke" in text, text
