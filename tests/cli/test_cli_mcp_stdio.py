"""``capacity --local mcp`` over real stdio, driven by the official ``mcp`` client as a subprocess.

The in-process client of test_cli_mcp.py never crosses a pipe: here the server is the console script, the
client is ``mcp.client.stdio``, and every call after initialise must answer (they hung until the local
cloud's hang detector before: the SDK's stdin reader thread kept the virtual clock from settling). The
session is the acceptance's: list tools, plan, reserve (held for a person: nothing bought), the same
reserve again (same id, nothing more), status, cancel. The server's clock starts at a fixed instant
(``--start``), so the sample's window is in the future on any date.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.cli.conftest import ENV, ROOT

START = "2026-11-29T12:00:00Z"
"""The server's virtual start: the sample's window (2026-12-06 to 2026-12-13) is a week later."""
CALL_TIMEOUT = 120.0
"""Real seconds a call may take before the test fails (a hang shows up as this, not as the detector's)."""


def _request(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((ROOT / "events" / "reservation_request.json").read_text())
    body.pop("request_id")  # the server derives it from the arguments
    return body | changes


def _capacity() -> str:
    return str(Path(sys.executable).with_name("capacity"))


async def _session(calls: list[tuple[str, dict[str, Any]]]) -> tuple[list[str], list[Any]]:
    params = StdioServerParameters(
        command=_capacity(),
        args=["--local", "--start", START, "mcp"],
        env={**os.environ, **ENV, "LOCALCLOUD_STALL_SECONDS": "60"},
        cwd=str(ROOT),
    )
    results: list[Any] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        with anyio.fail_after(CALL_TIMEOUT):
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
        for name, arguments in calls:
            with anyio.fail_after(CALL_TIMEOUT):
                results.append(await session.call_tool(name, arguments))
    return names, results


def _content(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] = result.structured_content
    return content


def test_an_agents_session_over_stdio_holds_the_purchase_for_a_person() -> None:
    request = _request(approval_above_usd="12000")  # the agent's own threshold is replaced by 0
    calls: list[tuple[str, dict[str, Any]]] = [
        ("plan", {"request": request}),
        ("reserve", {"request": request}),
        ("reserve", {"request": request, "confirm": True}),
        ("reserve", {"request": request, "confirm": True}),
        ("status", {}),
        ("reserve", {"request": request | {"strategy": "on-demand-first"}, "confirm": True}),
        ("reserve", {"request": _request(serve_until="2026-12-20T00:00:00Z")}),
        ("reserve", {"request": _request(search_until="2026-12-07T00:00:00Z")}),
    ]

    names, results = anyio.run(_session, calls)
    planned, quoted, held, again, listed, on_demand, serving, looking = results

    assert sorted(names) == ["cancel", "costs", "extend", "plan", "reserve", "status", "watch"]
    assert _content(planned)["decision"] == "DRY_RUN"
    fee = _content(planned)["recommendation"]["upfront_fee_usd"]
    quote = _content(quoted)
    assert quote["submitted"] is False
    assert quote["request_id"].startswith("mcp-")
    assert "paid upfront, not refundable (a person must approve it first)" in quote["price"]
    hold = _content(held)
    assert hold["request_id"] == quote["request_id"]  # the quote said which id it would be
    assert hold["state"] == "AWAITING_APPROVAL"
    assert hold["spend_so_far_usd"] == "0"
    assert hold["price"].startswith(f"${float(fee):,.2f}")
    assert hold["decision"]["approve"] == f"capacity --local approve {hold['request_id']}"
    repeat = _content(again)
    assert repeat["request_id"] == hold["request_id"]
    assert repeat["already_submitted"] is True
    assert repeat["state"] == "AWAITING_APPROVAL"
    assert repeat["spend_so_far_usd"] == "0"
    items = _content(listed)["reservations"]
    assert [item["request_id"] for item in items] == [hold["request_id"]]  # one request, not two
    assert on_demand.is_error
    assert "launched without an approval step" in on_demand.content[0].text
    assert _content(serving)["submitted"] is False
    assert "It would buy 2 x ml.p5.48xlarge" in _content(serving)["price"]  # a quote, not a 422
    assert _content(looking)["submitted"] is False
    assert _content(looking)["price"].startswith("It would buy")


def test_status_and_cancel_of_the_held_request_over_stdio() -> None:
    request = _request()
    _, (quoted,) = anyio.run(_session, [("reserve", {"request": request})])
    rid = _content(quoted)["request_id"]

    calls: list[tuple[str, dict[str, Any]]] = [
        ("reserve", {"request": request, "confirm": True}),
        ("status", {"request_id": rid}),
        ("cancel", {"request_id": rid}),
        ("cancel", {"request_id": rid, "confirm": True}),
        ("status", {"request_id": rid}),
    ]
    _, (held_again, status, notice, cancelled, after) = anyio.run(_session, calls)

    assert _content(held_again)["request_id"] == rid  # another server later: the same id for the same call
    view = _content(status)
    assert view["state"] == "AWAITING_APPROVAL"
    assert view["request"]["approval_above_usd"] == "0"
    assert view["purchase"] is None
    assert "PURCHASED" not in [entry["state"] for entry in view["history"]]
    assert "nothing is lost" in _content(notice)["notice"]
    assert _content(cancelled)["cancelled"] is True
    assert _content(after)["state"] == "CANCELLED"
    assert _content(after)["spend_so_far_usd"] == "0"
