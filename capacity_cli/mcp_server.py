"""``capacity mcp``: the CLI's operations as MCP tools for agents (the official ``mcp`` SDK, ``MCPServer``).

Over 400 lines: the tools are thin and share one server, its target and its rule that an agent never spends
without a person's decision.

The same target and auth as the CLI (``capacity --stack prod mcp`` signs with the profile's credentials;
``capacity --local mcp`` keeps one embedded local cloud for the server's life, on standard input/output
that the cloud's virtual clock does not wait for: :mod:`capacity_cli.mcp_stdio`). Tools:

- ``plan(request)``: the dry run (``POST /plans``); buys nothing.
- ``reserve(request, confirm, idempotency_key?)``: without ``confirm: true`` a quote (the price, and the
  request id the request will have); with it, the request is submitted **held for a person**: an agent
  never spends on its own say (see "Held for a person" below). Same arguments, same request id.
- ``status(request_id?, state?, limit?)``: one reservation (state, purchase, history, spend so far) or a list.
- ``watch(request_id, until?, timeout_seconds?)``: follow until a state (the local cloud runs its simulation).
- ``extend(request_id, duration_hours, offering_id?)``: the extension offerings; with ``offering_id``, the
  extension is asked only when it will wait for an approver (else the tool gives a person the command).
- ``cancel(request_id, confirm)``: without ``confirm: true`` it says what cancelling loses; with it, cancels
  (cancelling spends nothing).
- ``costs(team?, month?, group_by?)``: only when the deployment has ``GET /costs``.

Held for a person: the server, not the agent, marks every reservation it submits as asked by an agent:
``approval_above_usd`` is set to 0 after the agent's arguments are read (an agent cannot drop it: any value
it sends is replaced), so any fee above $0 waits in ``AWAITING_APPROVAL`` for an approver of the team who is
not the requester (Slack buttons, ``capacity approve``, ``POST /reservations/{id}/approval``), whatever the
team's threshold; with no decision within ``approval_timeout_hours`` nothing is bought. The mark is kept by
the purchases the request leads to (extensions in place and roll-overs of ``serve_until`` are above a
threshold of 0 too). ``strategy`` is ``reserved``: on-demand capacity is launched without an approval step,
so an agent's request cannot ask for it (``on-demand-first``/``spot-ok`` are refused with why).

Idempotent by intent: a request without ``request_id`` gets ``mcp-<hash>``, derived from the agent's
arguments as given (the request before defaults such as a start of "now" are filled in, and the optional
``idempotency_key``), never from the clock; a second call finds the request and returns it, submitting
nothing.

There is deliberately no ``approve`` tool. A refusal is a tool error whose text holds the API's field errors
and suggestions.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Annotated, Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp_types import ToolAnnotations
from pydantic import Field

from capacity_cli import __version__, render
from capacity_cli.api import ApiError, CapacityApi, CliError, NotAvailableError, spend_so_far
from capacity_cli.request import KEEP_SERVING_FIELDS, RequestFlags, build_request
from capacity_cli.suggest import describe_problems
from capacity_cli.watch import DEFAULT_UNTIL, follow

INSTRUCTIONS = (
    "Capacity Orchestrator: short-term GPU capacity on AWS (SageMaker training plans, EC2 Capacity Blocks). "
    "Call plan first (free, buys nothing). reserve without confirm gives a quote; with confirm=true it "
    "submits the request, which then waits for a person (an approver of the team) to approve or reject it: "
    "an agent never buys alone. Tell the person the price, the request id and the decision command the tool "
    "returns. Retrying a call with the same arguments is safe (same request id). Purchases are paid upfront "
    "and not refundable. The request is the body of POST /reservations (docs/api.md)."
)
AGENT_APPROVAL_ABOVE_USD = "0"
"""The approval threshold the server puts on every request an agent submits: any fee needs a person."""
AGENT_STRATEGY = "reserved"
"""The only strategy an agent's request may have: the reserving path is the one with an approval step."""
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
ASKS = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
"""reserve and extend: they record a request for a person to decide; repeated, they change nothing more."""
CANCELS = ToolAnnotations(
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


def _tool_error(exc: CliError, sent: Any = None) -> ToolError:
    """A refusal as a :class:`ToolError` whose text the model can act on (field errors, suggestions)."""
    if isinstance(exc, ApiError):
        if exc.problems:
            lines = describe_problems(exc.problems, sent)
            return ToolError(f"the API refused the request ({exc.status}):\n- " + "\n- ".join(lines))
        return ToolError(f"the API answered {exc.status}: {exc.message}")
    return ToolError(str(exc))


def _call[T](call: Callable[[], T], *, sent: Any = None) -> T:
    """Run an API call; a refusal becomes a :class:`ToolError` (:func:`_tool_error`)."""
    try:
        return call()
    except CliError as exc:
        raise _tool_error(exc, sent) from exc


def intent_id(request: Mapping[str, Any], idempotency_key: str | None = None) -> str:
    """The request id of an agent's request: its own ``request_id``, else ``mcp-`` and 24 hex digits of the
    SHA-256 of the arguments as given (canonical JSON) and ``idempotency_key``: no clock, so the same call
    repeated later is the same request."""
    given = request.get("request_id")
    if isinstance(given, str) and given:
        return given
    canonical = json.dumps(
        {"request": dict(request), "idempotency_key": idempotency_key}, sort_keys=True, default=str
    )
    return "mcp-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def held_for_a_person(body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` as an agent may submit it (see "Held for a person" in the module docstring).

    Raises:
        ToolError: the request asks for on-demand or spot capacity (no approval step precedes a launch).
    """
    strategy = body.get("strategy")
    if strategy not in (None, AGENT_STRATEGY):
        raise ToolError(
            f"strategy {strategy!r}: on-demand and spot capacity are launched without an approval step, and "
            "an agent's request always waits for a person's decision; use strategy reserved, or ask a person "
            "to run it (capacity reserve)"
        )
    return {**body, "approval_above_usd": AGENT_APPROVAL_ABOVE_USD, "strategy": AGENT_STRATEGY}


def _existing(api: CapacityApi, request_id: str) -> dict[str, Any] | None:
    """The reservation ``request_id`` if the API knows it (None on 404)."""
    try:
        return api.reservation(request_id)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def build_server(  # noqa: C901, PLR0915 - one closure per tool, over the same api
    api: CapacityApi,
    *,
    default_region: str = "us-east-1",
    default_requester: str = "mcp-agent",
    costs: bool | None = None,
    target_flags: str = "",
) -> MCPServer:
    """The MCP server over ``api`` (see the module docstring).

    Args:
        costs: register the ``costs`` tool; None asks the deployment once (``GET /costs`` answers, or 403
            ``Missing Authentication Token`` when it has no such route).
        target_flags: the CLI's target options for the decision commands the tools return
            (``--stack prod``, ``--endpoint http://127.0.0.1:3000``; empty: the configured target).
    """
    server = AgentServer(
        "capacity-orchestrator", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    cli = "capacity " + (f"{target_flags} " if target_flags else "")

    def complete(request: Mapping[str, Any]) -> dict[str, Any]:
        return build_request(
            request, RequestFlags(), now=api.transport.now(), default_region=default_region,
            default_requester=default_requester,
        )  # fmt: skip

    def decision(request_id: str) -> dict[str, str]:
        return {
            "who": "an approver of the request's team, not its requester (four-eyes rule)",
            "approve": f"{cli}approve {request_id}",
            "reject": f"{cli}reject {request_id} --reason '...'",
            "api": f'POST /reservations/{request_id}/approval {{"approved": true}}, signed by the approver',
            "slack": "the Approve / Reject buttons of the request's message in the team's Slack channel",
        }

    def quote(body: Mapping[str, Any]) -> dict[str, Any]:
        # A dry run keeps nothing serving: it prices the first reservation (serve_until is left out).
        first = {key: value for key, value in body.items() if key not in KEEP_SERVING_FIELDS}
        priced: dict[str, Any] = _call(lambda: api.plan(first), sent=first)
        return priced

    def reservation_answer(view: Mapping[str, Any], *, price: str | None) -> dict[str, Any]:
        rid = str(view.get("request_id"))
        pending = render.pending_approval(view)
        answer: dict[str, Any] = {
            "submitted": True,
            "request_id": rid,
            "state": view.get("state"),
            "spend_so_far_usd": str(spend_so_far(view)),
        }
        if pending is not None:
            answer["price"] = render.detail_text("AWAITING_APPROVAL", pending)
            answer["held_for"] = "a person's decision: nothing is bought until an approver approves it"
        elif price is not None:
            answer["price"] = price
        if view.get("state") in (None, "REQUESTED", "SEARCHING", "PLANNED", "AWAITING_APPROVAL"):
            answer["decision"] = decision(rid)
        answer["next"] = (
            f"tell the person the price, the request id {rid} and the decision command; follow it with "
            "status or watch"
        )
        return answer

    @server.tool(annotations=READ_ONLY)
    async def plan(request: RequestArg) -> dict[str, Any]:
        """Dry run: ranked offerings across regions with fee, $/instance-hour, on-demand equivalent,
        saving and break-even utilisation, the recommendation and why. Buys nothing, stores nothing."""
        body = _call(lambda: complete(request))
        return quote(body)

    @server.tool(annotations=ASKS)
    async def reserve(
        request: RequestArg,
        confirm: Annotated[
            bool,
            Field(
                description="false: a quote only. true: submit the request; it then waits for an approver "
                "of the team (a person) to approve or reject it"
            ),
        ] = False,
        idempotency_key: Annotated[
            str | None,
            Field(
                description="optional: tells apart two intentionally separate requests with the same "
                "arguments; the same arguments and key always give the same request id",
                max_length=128,
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Reserve GPU capacity for a person to approve. Without confirm=true: the price (a dry run) and the
        request id; nothing is submitted. With confirm=true: the request is submitted and held until an
        approver of the team decides (whatever the amount); returns the price, the request id and the
        decision command. The same call again returns the same request and submits nothing."""
        request_id = intent_id(request, idempotency_key)
        body = held_for_a_person(_call(lambda: complete({**request, "request_id": request_id})))
        found = _call(lambda: _existing(api, request_id))
        if found is not None:
            return {**reservation_answer(found, price=None), "already_submitted": True}
        priced = quote(body)
        price = render.price_line({**priced, "needs_approval": True})
        if not confirm:
            return {
                "submitted": False,
                "request_id": request_id,
                "price": price,
                "decision": priced.get("decision"),
                "reason": priced.get("reason"),
                "recommendation": priced.get("recommendation"),
                "needs_approval": True,
                "next": "show the price to the person; reserve again with the same arguments and "
                "confirm=true submits it for an approver to decide",
            }
        try:
            api.submit(body)
        except ApiError as exc:
            if exc.status != 409 or _call(lambda: _existing(api, request_id)) is None:
                raise _tool_error(exc, body) from exc  # a 409 for our id is the same request again
        except CliError as exc:
            raise _tool_error(exc, body) from exc
        view = _call(lambda: api.reservation(request_id))
        return reservation_answer(view, price=price)

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

    @server.tool(annotations=ASKS)
    async def extend(
        request_id: str,
        duration_hours: Annotated[int, Field(ge=24, multiple_of=24)] = 24,
        offering_id: Annotated[
            str | None, Field(description="ask for this extension offering (listed without it)")
        ] = None,
    ) -> dict[str, Any]:
        """Extend a reservation in place. Without offering_id: the extension offerings (new end, fee,
        whether the rules allow it); nothing is asked. With offering_id: the extension is asked only when it
        will wait for an approver of the team (reservations an agent asked for); otherwise nothing is asked
        and the answer gives the command a person runs to decide."""
        view = _call(lambda: api.reservation(request_id))
        body: dict[str, Any] = {"duration_hours": duration_hours}
        if offering_id is None:
            listed: Any = _call(lambda: api.extensions(request_id, body), sent=body)
            return {"asked": False, "offerings": listed}
        threshold = (view.get("request") or {}).get("approval_above_usd")
        command = f"{cli}extend {request_id} --duration {duration_hours // 24}d --offering {offering_id}"
        if threshold is None or str(threshold) not in ("0", "0.00", "0.0"):
            return {
                "asked": False,
                "why": "this reservation's extensions below its approval threshold are bought at once: a "
                "person must ask for it",
                "command": command,
            }
        result: Any = _call(
            lambda: api.extensions(request_id, {**body, "offering_id": offering_id}), sent=body
        )
        return {"asked": True, "held_for": "an approver of the team", "result": result}

    @server.tool(annotations=CANCELS)
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


class AgentServer(MCPServer):
    """:class:`MCPServer` whose stdio transport can leave the embedded local cloud's clock alone.

    ``ignore_thread`` set (``--local``): :meth:`run_stdio_async` reads the client's messages in a thread
    registered with the clock as infrastructure (:mod:`capacity_cli.mcp_stdio` says why the SDK's own
    ``stdio_server()`` hangs there); None: the SDK's transport, unchanged.
    """

    ignore_thread: Callable[[threading.Thread], None] | None = None

    async def run_stdio_async(self) -> None:
        """Serve on standard input/output until the client closes its end."""
        if self.ignore_thread is None:
            await super().run_stdio_async()
            return
        from capacity_cli.mcp_stdio import WireReader, WireWriter, claimed_stdio  # noqa: PLC0415

        with claimed_stdio() as (wire_in, wire_out):
            reader = WireReader(wire_in, self.ignore_thread)
            reader.start()
            # Explicit streams: stdio_server() then claims no descriptor and starts no reading thread.
            streams = stdio_server(stdin=cast(Any, reader), stdout=cast(Any, WireWriter(wire_out)))
            async with streams as (read_stream, write_stream):
                lowlevel = self._lowlevel_server
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


def serve_stdio(
    api: CapacityApi,
    *,
    default_region: str,
    default_requester: str,
    target_flags: str = "",
    ignore_thread: Callable[[threading.Thread], None] | None = None,
) -> None:
    """Run the server on standard input/output until the client closes it (``capacity mcp``).

    The calling thread runs the event loop and the tools (an embedded local cloud is driven by the thread
    that started it); ``ignore_thread``: the embedded cloud's ``clock.ignore_thread`` (see
    :class:`AgentServer`).
    """
    import anyio  # noqa: PLC0415

    server = build_server(
        api, default_region=default_region, default_requester=default_requester, target_flags=target_flags
    )
    if isinstance(server, AgentServer):
        server.ignore_thread = ignore_thread
    anyio.run(server.run_stdio_async)
