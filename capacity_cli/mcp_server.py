"""``capacity mcp``: the CLI's operations as MCP tools for agents (the official ``mcp`` SDK, ``MCPServer``).

The same target and auth as the CLI (``capacity --stack prod mcp`` signs with the profile's credentials;
``capacity --local mcp`` keeps one embedded local cloud for the server's life). Tools:

- ``plan(request)``: the dry run (``POST /plans``); buys nothing.
- ``reserve(request, confirm)``: without ``confirm: true`` it only prices the request (a dry run) and says so;
  with it, it submits (``POST /reservations``). Money moves only on an explicit confirmation.
- ``status(request_id?, state?, limit?)``: one reservation (state, purchase, history, spend so far) or a list.
- ``watch(request_id, until?, timeout_seconds?)``: follow until a state (the local cloud runs its simulation).
- ``cancel(request_id, confirm)``: without ``confirm: true`` it says what cancelling loses; with it, cancels.
- ``costs(team?, month?, group_by?)``: only when the deployment has ``GET /costs`` (issue 16).

There is deliberately no ``approve`` tool: a purchase above its threshold waits for a person
(docs/cli.md). A refusal is a tool error whose text holds the API's field errors and suggestions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from capacity_cli import __version__, render
from capacity_cli.api import ApiError, CapacityApi, CliError, NotAvailableError, spend_so_far
from capacity_cli.request import RequestFlags, build_request
from capacity_cli.suggest import describe_problems
from capacity_cli.watch import DEFAULT_UNTIL, follow

INSTRUCTIONS = (
    "Capacity Orchestrator: short-term GPU capacity on AWS (SageMaker training plans, EC2 Capacity Blocks). "
    "Call plan first (free, buys nothing). reserve and cancel act only with confirm=true: show the person "
    "the price or what is lost and get their consent first. Purchases are paid upfront and not refundable. "
    "The request is the body of POST /reservations (docs/api.md)."
)
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
SPENDS = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=True
)

RequestArg = Annotated[
    dict[str, Any],
    Field(
        description="The reservation request (POST /reservations' body): requester, instance_type, "
        "instance_count, earliest_start, latest_end, duration_hours, regions, max_upfront_fee_usd, models... "
        "requester and regions default to the server's."
    ),
]


def _call[T](call: Callable[[], T], *, sent: Any = None) -> T:
    """Run an API call; a refusal becomes a :class:`ToolError` whose text the model can act on."""
    try:
        return call()
    except ApiError as exc:
        if exc.problems:
            lines = describe_problems(exc.problems, sent)
            raise ToolError(f"the API refused the request ({exc.status}):\n- " + "\n- ".join(lines)) from exc
        raise ToolError(f"the API answered {exc.status}: {exc.message}") from exc
    except CliError as exc:
        raise ToolError(str(exc)) from exc


def build_server(
    api: CapacityApi,
    *,
    default_region: str = "us-east-1",
    default_requester: str = "mcp-agent",
    costs: bool | None = None,
) -> MCPServer:
    """The MCP server over ``api`` (see the module docstring).

    Args:
        costs: register the ``costs`` tool; None asks the deployment once (``GET /costs`` answers, or 403
            ``Missing Authentication Token`` when it has no such route).
    """
    server: MCPServer = MCPServer(
        "capacity-orchestrator", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def complete(request: dict[str, Any]) -> dict[str, Any]:
        return build_request(
            request, RequestFlags(), now=api.transport.now(), default_region=default_region,
            default_requester=default_requester,
        )  # fmt: skip

    @server.tool(annotations=READ_ONLY)
    async def plan(request: RequestArg) -> dict[str, Any]:
        """Dry run: ranked offerings across regions with fee, $/instance-hour, on-demand equivalent,
        saving and break-even utilisation, the recommendation and why. Buys nothing, stores nothing."""
        body = _call(lambda: complete(request))
        result: dict[str, Any] = _call(lambda: api.plan(body), sent=body)
        return result

    @server.tool(annotations=SPENDS)
    async def reserve(
        request: RequestArg,
        confirm: Annotated[
            bool,
            Field(
                description="true only after the person agreed to the price: then the request is submitted"
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Reserve GPU capacity. Without confirm=true: prices it (a dry run) and submits nothing. With
        confirm=true: submits it (the workflow buys within max_upfront_fee_usd, once per request_id)."""
        body = _call(lambda: complete(request))
        if not confirm:
            priced = _call(lambda: api.plan(body), sent=body)
            return {
                "submitted": False,
                "price": render.price_line(priced),
                "decision": priced.get("decision"),
                "needs_approval": priced.get("needs_approval"),
                "recommendation": priced.get("recommendation"),
                "next": "show the price to the person; call reserve again with confirm=true to submit",
            }
        accepted: dict[str, Any] = _call(lambda: api.submit(body), sent=body)
        return {"submitted": True, **accepted}

    @server.tool(annotations=READ_ONLY)
    async def status(
        request_id: Annotated[str | None, Field(description="one reservation; omit to list them")] = None,
        state: Annotated[
            str | None, Field(description="list only reservations currently in this state")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> dict[str, Any]:
        """One reservation (state, request, purchase, history, spend so far in USD) or the newest ones."""
        if request_id:
            view = _call(lambda: api.reservation(request_id))
            return {**view, "spend_so_far_usd": str(spend_so_far(view))}
        items = _call(lambda: list(api.all_reservations(state=state, limit=limit)))
        return {"reservations": items}

    @server.tool(annotations=READ_ONLY)
    async def watch(
        request_id: str,
        until: Annotated[
            list[str] | None,
            Field(description="states to stop at (default READY, AWAITING_APPROVAL, final ones)"),
        ] = None,
        timeout_seconds: Annotated[float, Field(gt=0, le=900)] = 120.0,
    ) -> dict[str, Any]:
        """Follow a reservation until it reaches a state; returns the new history entries and the state."""
        entries: list[Any] = []
        wanted = frozenset(s.upper() for s in until) if until else DEFAULT_UNTIL
        result = _call(
            lambda: follow(
                api, request_id, until=wanted, timeout_seconds=timeout_seconds, on_entry=entries.append
            )
        )
        return {"outcome": result.outcome, "state": result.state, "new_history": entries}

    @server.tool(annotations=SPENDS)
    async def cancel(
        request_id: str,
        confirm: Annotated[
            bool, Field(description="true only after the person read what is lost: then it is cancelled")
        ] = False,
    ) -> dict[str, Any]:
        """Cancel and release now. Without confirm=true: says what is lost (an upfront fee is not refunded)
        and changes nothing. With confirm=true: cancels."""
        view = _call(lambda: api.reservation(request_id))
        if not confirm:
            return {"cancelled": False, "notice": render.cancel_notice(view), "state": view.get("state")}
        result: dict[str, Any] = _call(lambda: api.cancel(request_id, confirm=True))
        return {"cancelled": True, **result}

    if costs is None:
        try:
            api.costs({})
            costs = True
        except NotAvailableError:
            costs = False
        except CliError:
            costs = True  # the route exists but refused an empty query: the tool will show why

    if costs:

        async def costs_tool(
            team: str | None = None, month: str | None = None, group_by: str | None = None
        ) -> dict[str, Any]:
            """Spend per team and month (GET /costs): paid, used, on-demand equivalent."""
            query = {k: v for k, v in {"team": team, "month": month, "group_by": group_by}.items() if v}
            result: Any = _call(lambda: api.costs(query))
            return {"costs": result}

        server.add_tool(costs_tool, name="costs", annotations=READ_ONLY)

    return server


def serve_stdio(api: CapacityApi, *, default_region: str, default_requester: str) -> None:
    """Run the server on standard input/output until the client closes it (``capacity mcp``).

    The calling thread runs the event loop and the tools (an embedded local cloud is driven by the thread
    that started it).
    """
    import anyio  # noqa: PLC0415

    server = build_server(api, default_region=default_region, default_requester=default_requester)
    anyio.run(server.run_stdio_async)
