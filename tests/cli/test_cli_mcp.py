"""The MCP server through the SDK's in-process client: its tools, a plan, and nothing spent unconfirmed."""

from __future__ import annotations

import json
from typing import Any

import anyio
from mcp import Client

from capacity_cli.api import CapacityApi
from capacity_cli.local import EmbeddedTransport
from capacity_cli.mcp_server import build_server
from localcloud.cloud import LocalCloud
from tests.cli.conftest import REQUESTER_ARN, future_body, ledger


def _run(cloud: LocalCloud, calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    api = CapacityApi(EmbeddedTransport(cloud, identity=REQUESTER_ARN))
    server = build_server(api)  # asks the deployment whether GET /costs exists: it does not

    async def session() -> tuple[list[str], list[Any]]:
        async with Client(server) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
        return names, results

    # The event loop runs in this thread, the one that drives the local cloud's clock.
    return anyio.run(session)


def test_the_tools_are_listed_and_plan_runs(cloud: LocalCloud) -> None:
    body = future_body(cloud, instance_type="ml.p5en.48xlarge")

    names, (planned,) = _run(cloud, [("plan", {"request": body})])

    assert sorted(names) == ["cancel", "costs", "extend", "plan", "reserve", "status", "watch"]  # no approve
    assert not planned.is_error
    result = planned.structured_content
    assert result["decision"] == "DRY_RUN"
    assert result["recommendation"]["instance_type"] == "ml.p5en.48xlarge"
    assert result["offerings"][0]["upfront_fee_usd"] == result["recommendation"]["upfront_fee_usd"]


def test_reserve_and_cancel_act_only_when_confirmed(cloud: LocalCloud) -> None:
    body = future_body(cloud, request_id="mcp-unconfirmed", instance_type="ml.p5en.48xlarge")
    misspelt = body | {"regions": ["us-east1"]}

    _, (priced, refused) = _run(cloud, [("reserve", {"request": body}), ("plan", {"request": misspelt})])

    assert priced.structured_content["submitted"] is False
    assert "paid upfront, not refundable" in priced.structured_content["price"]
    assert ledger(cloud, "mcp-unconfirmed") == []
    assert refused.is_error
    text = json.dumps([block.model_dump() for block in refused.content])
    assert "unknown region(s) 'us-east1'" in text
    assert "did you mean 'us-east-1'?" in text
