"""The ``capacity`` command line (Typer + Rich): plan, reserve, follow, approve, cancel (docs/cli.md).

Over 400 lines: one Typer application whose commands share the global options and the target (a stack or the
local cloud); each command stays a few lines over :class:`~capacity_cli.api.CapacityApi`.

Thin commands over :class:`~capacity_cli.api.CapacityApi`: each reads its options, makes one or two API
calls, and shows the answer (:mod:`capacity_cli.render`). Data goes to standard output (a table, or the
API's JSON/YAML with ``--output``); prompts, progress and errors go to standard error (under ``--output
json|yaml`` an error is a JSON/YAML document there: :mod:`capacity_cli.failures`). Exit statuses: one table,
:mod:`capacity_cli.exits` (0 done, 1 failed, 2 bad input, 3 refused, 4 needs approval, 5 not found,
6 unavailable).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from capacity_cli import __version__, complete, render
from capacity_cli.api import ApiError, CapacityApi, CliError, RefusedError
from capacity_cli.config import OUTPUTS, Config, config_path, load_config
from capacity_cli.exits import ExitStatus, status_for_state
from capacity_cli.failures import CapacityGroup, Failure, failure_of, show
from capacity_cli.request import KEEP_SERVING_FIELDS, RequestFlags, build_request, load_file, load_spec
from capacity_cli.targets import SAMPLE_EPOCH, TargetOptions, kind_of, open_transport, region_of
from capacity_cli.watch import DEFAULT_UNTIL, WatchResult, follow

OVER = frozenset({"RELEASED", "REJECTED"})
"""States after which a reservation holds and awaits nothing (FAILED and CANCELLED still await a release)."""

app = typer.Typer(
    cls=CapacityGroup,
    name="capacity",
    help="Short-term GPU capacity on AWS: plan, reserve, follow, approve and cancel reservations "
    "(the Capacity Orchestrator's REST API; docs/cli.md).",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
schedules_app = typer.Typer(
    help="Recurring reservations (EventBridge Scheduler): list, show, create, delete."
)
app.add_typer(schedules_app, name="schedules")


@dataclass
class Injected:
    """What a caller may hand the CLI through Click's ``obj`` (tests; ``CliRunner.invoke(..., obj=...)``):
    a running local cloud that ``--local`` uses instead of starting one, so several commands share it."""

    cloud: Any


@dataclass
class Runtime:
    """One command's settings and, built on first use, its API client."""

    options: TargetOptions
    config: Config
    output: str
    out: Console
    err: Console
    injected: Injected | None = None
    resources: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _api: CapacityApi | None = None

    @property
    def local(self) -> bool:
        """True when the target is the embedded local cloud."""
        return kind_of(self.options, self.config) == "local"

    def api(self) -> CapacityApi:
        """The API of the resolved target (an embedded cloud starts here, and stops with the command)."""
        if self._api is None:
            transport = open_transport(
                self.options,
                self.config,
                self.resources,
                cloud=self.injected.cloud if self.injected else None,
                note=lambda line: self.tell(f"[dim]{line}[/dim]"),
            )
            self._api = CapacityApi(transport)
        return self._api

    def requester(self) -> str:
        """The ``requester`` of a request that names none: the configured one, else the caller."""
        if self.config.requester:
            return self.config.requester
        if self.local:
            return str(getattr(self.api().transport, "identity", "")).rsplit("/", 1)[-1] or "local-user"
        try:
            return getpass.getuser()
        except (OSError, KeyError):
            return "capacity-cli"

    def tell(self, text: str, *, asking: bool = False, **style: Any) -> None:
        """A line for the person on standard error: progress, a price, what happened. Under ``--output
        json|yaml`` standard error carries only the error document, so it is left out there, unless a
        question follows (``asking``) and the person must see what it is about."""
        if self.output == "table" or asking:
            self.err.print(text, **({"highlight": False} | style))

    def poll_interval(self) -> float:
        """Seconds between two polls of a followed reservation: 1 on a local ``http://`` API (``make serve``:
        its virtual clock runs fast), 10 on a deployed one."""
        endpoint = self.options.endpoint or (None if self.options.stack else self.config.endpoint) or ""
        return 1.0 if endpoint.startswith("http://") else 10.0

    def region(self) -> str:
        """The target's region (for a request's default ``regions``)."""
        return region_of(self.options, self.config)

    def target_flags(self) -> str:
        """The target options as typed on a command line (``--stack prod --region us-west-2``), for the
        commands the CLI and the MCP server tell a person to run; empty for the configured target."""
        o = self.options
        pairs = [
            ("--stack", o.stack),
            ("--endpoint", o.endpoint),
            ("--region", o.region),
            ("--profile", o.profile),
        ]
        flags = ["--local"] if o.local else []
        flags += [f"{name} {value}" for name, value in pairs if value]
        return " ".join(flags)


def _runtime(ctx: typer.Context) -> Runtime:
    runtime = ctx.obj
    if not isinstance(runtime, Runtime):  # a subcommand invoked without the app's callback (never in use)
        raise typer.Exit(2)
    return runtime


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"capacity {__version__}")
        raise typer.Exit(ExitStatus.OK)


def _width() -> int | None:
    # A pipe or a test runner is not a terminal: Rich would assume 80 columns and squeeze the tables.
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return None
    return 150


@app.callback()
def main_options(
    ctx: typer.Context,
    stack: Annotated[
        str | None, typer.Option(help="Deployed stack: its ApiUrl output is the API (SigV4).")
    ] = None,
    endpoint: Annotated[
        str | None,
        typer.Option(help="API base URL instead of a stack, e.g. http://127.0.0.1:3000 (make serve)."),
    ] = None,
    local: Annotated[
        bool,
        typer.Option("--local", help="The embedded local cloud, in this process (default with no stack)."),
    ] = False,
    region: Annotated[
        str | None,
        typer.Option(
            help="The stack's region (default: config, then profile).", autocompletion=complete.region
        ),
    ] = None,
    profile: Annotated[
        str | None, typer.Option(help="AWS profile whose credentials sign the requests.")
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="table (default), json or yaml; errors then come as a JSON/YAML document on stderr.",
            show_default=False,
            autocompletion=complete.outputs,
        ),
    ] = None,
    identity: Annotated[
        str | None,
        typer.Option(
            "--as",
            "--identity",
            metavar="ARN",
            help="Act as this IAM principal: --local, or make serve's http:// endpoint (its "
            "X-Localcloud-Caller header). An approver is another principal than the requester.",
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            help=f"--local only: virtual start, ISO-8601 UTC or now (default {SAMPLE_EPOCH:%Y-%m-%dT%H:%MZ}, "
            "the sample events' time)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="--local only: seeds the emulated capacity market.")] = 7,
    template: Annotated[Path | None, typer.Option(help="--local only: the SAM template to run.")] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", help="Configuration file (default ~/.config/capacity-orchestrator/config.toml)."
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Global options: where the API is and how answers are shown."""
    err = Console(stderr=True, width=_width())
    try:
        config = load_config(config_file)
    except CliError as exc:
        show(err, output or "table", failure_of(exc))
        raise typer.Exit(exc.exit_code) from exc
    chosen = output or config.output or "table"
    if chosen not in OUTPUTS:
        raise typer.BadParameter(f"{chosen!r} is not one of {', '.join(OUTPUTS)}", param_hint="--output")
    injected = ctx.obj if isinstance(ctx.obj, Injected) else None
    runtime = Runtime(
        options=TargetOptions(
            local=local,
            endpoint=endpoint,
            stack=stack,
            region=region,
            profile=profile,
            identity=identity,
            start=start,
            seed=seed,
            template=template,
        ),
        config=config,
        output=chosen,
        out=Console(width=_width(), highlight=False),
        err=err,
        injected=injected,
    )
    ctx.obj = runtime
    ctx.call_on_close(runtime.resources.close)


# ------------------------------------------------------------------------------------------ failures


def _hint(runtime: Runtime, exc: CliError) -> str | None:
    """What to do next, for the failures whose cause is the target rather than the request."""
    if not isinstance(exc, ApiError):
        return None
    fresh_local = runtime.local and runtime.injected is None
    past = any("past" in p.message for p in exc.problems)
    if exc.status == 422 and past:
        if fresh_local:
            return (
                f"the embedded local cloud starts at {SAMPLE_EPOCH:%Y-%m-%dT%H:%MZ} unless --start says "
                "otherwise; write times relative to it: --from +2d"
            )
        return "times relative to the API's own clock never are: --from +2d, --until +7d"
    if exc.status == 404 and fresh_local:
        return (
            "the embedded local cloud keeps nothing between commands: run make serve and use "
            "--endpoint http://127.0.0.1:3000, or follow a reservation with reserve --watch"
        )
    return None


def _fail(
    runtime: Runtime,
    exc: CliError,
    *,
    sent: Any = None,
    schema: str = "ReservationRequest",
    query_value: str | None = None,
) -> NoReturn:
    """Show what went wrong (the API's field errors with suggestions, as lines or the error document) and
    exit with its status (:mod:`capacity_cli.exits`)."""
    failure = failure_of(exc, sent=sent, schema=schema, query_value=query_value, hint=_hint(runtime, exc))
    show(runtime.err, runtime.output, failure)
    raise typer.Exit(failure.status)


def _stop(runtime: Runtime, status: ExitStatus, message: str, hint: str | None = None) -> NoReturn:
    """End a command that ran but did not get what was asked (the message is already on stderr for a
    person; under json/yaml it is the error document) with ``status``."""
    if runtime.output != "table":
        show(runtime.err, runtime.output, Failure(status, message, hint=hint))
    raise typer.Exit(status)


def _guard[T](
    runtime: Runtime, call: Callable[[], T], *, sent: Any = None, schema: str = "ReservationRequest"
) -> T:
    try:
        return call()
    except CliError as exc:
        _fail(runtime, exc, sent=sent, schema=schema)


def _confirm(runtime: Runtime, question: str, *, yes: bool) -> None:
    """Ask ``question [y/N]`` on standard error unless ``--yes``; a no (or no terminal) stops the command."""
    if yes:
        return
    if not typer.confirm(question, default=False, err=True):
        runtime.tell("Nothing was done.")
        _stop(runtime, ExitStatus.FAILED, "the question was answered no: nothing was done")


# ------------------------------------------------------------------------------- request options

FileOption = Annotated[
    str | None,
    typer.Option("--file", "-f", help="The request: JSON or YAML, POST /reservations' body (- for stdin)."),
]
IdOption = Annotated[str | None, typer.Option("--id", help="request_id (idempotency key).")]
RequesterOption = Annotated[str | None, typer.Option(help="requester (default: config, else the caller).")]
TypeOption = Annotated[
    str | None,
    typer.Option(
        "--type", help="instance_type, e.g. ml.p5.48xlarge.", autocompletion=complete.instance_types
    ),
]
CountOption = Annotated[int | None, typer.Option(help="instance_count: 1, 2, 4 ... 64.")]
DurationOption = Annotated[str | None, typer.Option(help="duration: whole days, 3d or 72h.")]
FromOption = Annotated[
    str | None,
    typer.Option("--from", help="earliest_start: 2026-12-10, ...T11:30Z, now, +7d (the API's clock)."),
]
UntilOption = Annotated[
    str | None,
    typer.Option("--until", help="latest_end (default start + duration + 1 day; +N from the start)."),
]
ReservationId = Annotated[
    str, typer.Argument(help="The reservation's request id.", autocompletion=complete.request_ids)
]
StateOption = Annotated[
    str | None,
    typer.Option(help="Only reservations currently in this state.", autocompletion=complete.states),
]
RegionsOption = Annotated[
    str | None,
    typer.Option(help="regions, in preference order: us-east-1,us-west-2.", autocompletion=complete.regions),
]
MaxFeeOption = Annotated[str | None, typer.Option(help="max_upfront_fee_usd: nothing above it is bought.")]
ApprovalOption = Annotated[str | None, typer.Option(help="approval_above_usd: a person approves above it.")]
PlatformOption = Annotated[
    str | None,
    typer.Option(help="platform: sagemaker (default) or ec2.", autocompletion=complete.platforms),
]
StrategyOption = Annotated[
    str | None,
    typer.Option(help="strategy: on-demand-first, reserved, spot-ok.", autocompletion=complete.strategies),
]
TemplateOption = Annotated[
    str | None, typer.Option("--launch-template", help="ec2: launch template name or lt-id.")
]
ModelOption = Annotated[
    list[str] | None, typer.Option("--model", help="An existing SageMaker model to serve (repeat for more).")
]
AcceleratorsOption = Annotated[int | None, typer.Option(help="Per model copy: accelerators.")]
CpusOption = Annotated[float | None, typer.Option(help="Per model copy: CPU cores.")]
MemoryOption = Annotated[int | None, typer.Option(help="Per model copy: memory in MB.")]
CopiesOption = Annotated[str | None, typer.Option(help="Per model: copies MIN:INITIAL:MAX, e.g. 0:1:4.")]
SearchUntilOption = Annotated[
    str | None,
    typer.Option(
        "--search-until",
        help="search_until: when nothing fits now, keep looking until then (2026-12-05, +3d), not fail.",
    ),
]
SearchEveryOption = Annotated[
    str | None,
    typer.Option("--search-every", help="search_every_minutes: the first wait between looks (90m, 2h)."),
]
LoadOption = Annotated[
    str | None,
    typer.Option(
        "--load",
        help="load: the expected traffic (a traffic profile such as events/traffic_two_models.json, or a "
        "load): the plan simulates each instance count on it and names the smallest that serves it.",
    ),
]
MaxRejectedOption = Annotated[
    float | None,
    typer.Option(
        "--max-rejected",
        min=0,
        max=100,
        help="With --load: the most requests refused for lack of capacity (%).",
    ),
]
ServeUntilOption = Annotated[
    str | None,
    typer.Option(
        "--serve-until",
        help="serve_until: keep the models served until then (2026-12-14, +9d), rolling over if need be.",
    ),
]
RolloverLeadOption = Annotated[
    str | None,
    typer.Option("--rollover-lead", help="rollover_lead_hours: act this long before each end (48h, 3d)."),
]


def _request(
    runtime: Runtime,
    file: str | None,
    flags: RequestFlags,
    *,
    load: str | None = None,
    max_rejected: float | None = None,
    right_size: bool = False,
) -> dict[str, Any]:
    document = load_file(file) if file else None
    body = build_request(
        document,
        flags,
        now=runtime.api().transport.now(),
        default_region=runtime.region(),
        default_requester=runtime.requester(),
    )
    if load is not None:
        body["load"] = load_spec(load, max_rejected_percent=max_rejected)
    elif max_rejected is not None and isinstance(body.get("load"), dict):
        body["load"] = {**body["load"], "max_rejected_percent": max_rejected}
    if right_size:
        body["right_size"] = True
    return body


# ------------------------------------------------------------------------------------------- plan


@app.command()
def plan(
    ctx: typer.Context,
    file: FileOption = None,
    request_id: IdOption = None,
    requester: RequesterOption = None,
    instance_type: TypeOption = None,
    count: CountOption = None,
    duration: DurationOption = None,
    start: FromOption = None,
    end: UntilOption = None,
    regions: RegionsOption = None,
    max_fee: MaxFeeOption = None,
    approval_above: ApprovalOption = None,
    platform: PlatformOption = None,
    strategy: StrategyOption = None,
    launch_template: TemplateOption = None,
    model: ModelOption = None,
    accelerators: AcceleratorsOption = None,
    cpus: CpusOption = None,
    memory: MemoryOption = None,
    copies: CopiesOption = None,
    search_until: SearchUntilOption = None,
    search_every: SearchEveryOption = None,
    load: LoadOption = None,
    max_rejected: MaxRejectedOption = None,
) -> None:
    """Dry run: where capacity is, what it costs against on demand, what would be bought. Buys nothing.
    With --load: each instance count simulated on the traffic, and the smallest that serves it."""
    runtime = _runtime(ctx)
    flags = RequestFlags(
        request_id, requester, instance_type, count, duration, start, end, regions, max_fee, approval_above,
        platform, strategy, launch_template, list(model or []), accelerators, cpus, memory, copies,
        search_until, search_every,
    )  # fmt: skip
    body = _guard(runtime, lambda: _request(runtime, file, flags, load=load, max_rejected=max_rejected))
    result = _guard(runtime, lambda: runtime.api().plan(body), sent=body)
    render.emit(runtime.out, runtime.output, result, render.plan_view(result))


# ---------------------------------------------------------------------------------------- reserve


@app.command()
def reserve(
    ctx: typer.Context,
    file: FileOption = None,
    request_id: IdOption = None,
    requester: RequesterOption = None,
    instance_type: TypeOption = None,
    count: CountOption = None,
    duration: DurationOption = None,
    start: FromOption = None,
    end: UntilOption = None,
    regions: RegionsOption = None,
    max_fee: MaxFeeOption = None,
    approval_above: ApprovalOption = None,
    platform: PlatformOption = None,
    strategy: StrategyOption = None,
    launch_template: TemplateOption = None,
    model: ModelOption = None,
    accelerators: AcceleratorsOption = None,
    cpus: CpusOption = None,
    memory: MemoryOption = None,
    copies: CopiesOption = None,
    search_until: SearchUntilOption = None,
    search_every: SearchEveryOption = None,
    serve_until: ServeUntilOption = None,
    rollover_lead: RolloverLeadOption = None,
    load: LoadOption = None,
    max_rejected: MaxRejectedOption = None,
    right_size: Annotated[
        bool,
        typer.Option("--right-size", help="With --load: buy the smallest instance count that serves it."),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask: reserve at the price shown.")] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only the quote: price and offerings (POST /plans); buys nothing."),
    ] = False,
    watch: Annotated[
        bool | None, typer.Option("--watch/--no-watch", help="Follow it afterwards (default with --local).")
    ] = None,
    watch_until: Annotated[
        list[str] | None, typer.Option("--watch-until", help="With --watch: stop at this state (repeat).")
    ] = None,
) -> None:
    """Reserve GPU capacity: shows the price (a dry run first), asks \\[y/N], then submits the request.
    With --dry-run only the quote: nothing is submitted or bought."""
    runtime = _runtime(ctx)
    flags = RequestFlags(
        request_id, requester, instance_type, count, duration, start, end, regions, max_fee, approval_above,
        platform, strategy, launch_template, list(model or []), accelerators, cpus, memory, copies,
        search_until, search_every, serve_until, rollover_lead,
    )  # fmt: skip
    body = _guard(
        runtime,
        lambda: _request(runtime, file, flags, load=load, max_rejected=max_rejected, right_size=right_size),
    )
    # The price is the first reservation's: a dry run keeps nothing serving (it refuses serve_until).
    first = {key: value for key, value in body.items() if key not in KEEP_SERVING_FIELDS}
    priced = _guard(runtime, lambda: runtime.api().plan(first), sent=first)
    asking = not yes and not dry_run
    runtime.tell(render.price_line(priced), asking=asking)
    if dry_run:
        render.emit(runtime.out, runtime.output, priced, render.plan_view(priced))
        runtime.tell("Dry run: nothing was submitted or bought.")
        return
    runtime.tell(
        f"Budget: nothing above {render.usd(body.get('max_upfront_fee_usd'))} is ever bought; the workflow "
        "searches again when it runs, so the offering may differ.",
        asking=asking,
    )
    _confirm(runtime, "Reserve it?", yes=yes)
    accepted = _guard(runtime, lambda: runtime.api().submit(body), sent=body)
    request_id = str(accepted["request_id"])
    follow_it = runtime.local if watch is None else watch
    if not follow_it:
        render.emit(runtime.out, runtime.output, accepted, _accepted_text(accepted))
        return
    runtime.tell(f"Reserved {request_id} ({accepted.get('status')}); following it:")
    result = _follow(runtime, request_id, watch_until or None)
    _finish_watch(runtime, result, asked=watch_until)


def _accepted_text(accepted: Mapping[str, Any]) -> str:
    rid = accepted.get("request_id")
    return (
        f"Reserved {rid}: {accepted.get('status')}. Follow it with `capacity watch {rid}` or "
        f"`capacity status {rid}`; cancel with `capacity cancel {rid}`."
    )


# ----------------------------------------------------------------------------------- status, watch


@app.command()
def status(
    ctx: typer.Context,
    request_id: Annotated[
        str | None,
        typer.Argument(
            help="One reservation (default: a table of them).", autocompletion=complete.request_ids
        ),
    ] = None,
    state: StateOption = None,
    limit: Annotated[int, typer.Option(help="At most this many rows.")] = 20,
    live: Annotated[
        bool, typer.Option("--live", help="Only those still holding or waiting for capacity (all pages).")
    ] = False,
    fail_if_any: Annotated[
        bool, typer.Option("--fail-if-any", help="Exit 1 if any is listed (make remove checks --live).")
    ] = False,
) -> None:
    """A table of reservations, or one with its timeline and spend so far."""
    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    if request_id:
        view = _guard(runtime, lambda: api.reservation(request_id))
        render.emit(runtime.out, runtime.output, view, render.reservation_view(view))
        return
    try:
        wanted = state.upper() if state else None
        if live:
            items = [
                i for i in api.all_reservations(state=wanted, limit=10_000) if i.get("state") not in OVER
            ]
        else:
            items = list(api.all_reservations(state=wanted, limit=limit))
    except CliError as exc:
        _fail(runtime, exc, query_value=state)
    render.emit(runtime.out, runtime.output, {"reservations": items}, render.reservations_table(items))
    if fail_if_any and items:
        message = (
            f"{len(items)} reservation(s) listed: cancel them and wait for RELEASED first "
            "(capacity cancel ID --watch); a removed stack releases nothing."
        )
        runtime.tell(f"[red]{message}[/red]")
        _stop(runtime, ExitStatus.FAILED, message)


@app.command("list")
def list_reservations(
    ctx: typer.Context,
    status_filter: Annotated[
        str | None,
        typer.Option(
            "--status",
            "--state",
            help="Only reservations currently in this state.",
            autocompletion=complete.states,
        ),
    ] = None,
    team: Annotated[str | None, typer.Option(help="Only reservations charged to this team.")] = None,
    limit: Annotated[
        int, typer.Option(min=1, max=100, help="A page of at most this many (the API's limit, 1-100).")
    ] = 20,
    next_token: Annotated[
        str | None, typer.Option("--next-token", help="The page after the one that printed this token.")
    ] = None,
    every_page: Annotated[bool, typer.Option("--all", help="Follow next_token to the last page.")] = False,
) -> None:
    """Reservations, newest first, one page at a time as the API pages them (GET /reservations)."""
    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    wanted = status_filter.upper() if status_filter else None
    try:
        page = api.reservations(state=wanted, team=team, limit=limit, next_token=next_token)
        items = list(page.get("reservations") or [])
        while every_page and page.get("next_token"):
            page = api.reservations(state=wanted, team=team, limit=limit, next_token=page["next_token"])
            items.extend(page.get("reservations") or [])
    except CliError as exc:
        _fail(runtime, exc, query_value=status_filter or team)
    token = page.get("next_token")
    answer = {"reservations": items, "next_token": token}
    render.emit(runtime.out, runtime.output, answer, render.reservations_table(items))
    if token:
        runtime.tell(f"More: --next-token {token}", markup=False, soft_wrap=True)


def _follow(
    runtime: Runtime,
    request_id: str,
    until: Sequence[str] | None,
    *,
    interval: float | None = None,
    timeout: float | None = None,
    skip: int = 0,
) -> WatchResult:
    wanted = frozenset(s.upper() for s in until) if until else DEFAULT_UNTIL
    every = interval if interval is not None else runtime.poll_interval()
    lines = runtime.output == "table"

    def shown(entry: Mapping[str, Any]) -> None:
        if lines:
            runtime.out.print(render.history_line(entry), markup=False, highlight=False, soft_wrap=True)
        else:
            runtime.out.file.write(render.as_json(entry).replace("\n", " ") + "\n")

    api = _guard(runtime, runtime.api)
    return _guard(
        runtime,
        lambda: follow(
            api,
            request_id,
            until=wanted,
            interval_seconds=every,
            timeout_seconds=timeout,
            on_entry=shown,
            skip=skip,
            through=bool(until),
        ),
    )


def _finish_watch(runtime: Runtime, result: WatchResult, *, asked: Sequence[str] | None = None) -> None:
    """Say how a watch ended and exit with its status: 0 when it reached a state it was asked for (with no
    ``--until``: ``READY``, or a final state other than ``FAILED``/``REJECTED``), else by the state it
    stopped at (:func:`capacity_cli.exits.status_for_state`: 4 waiting for approval, 3 rejected, 1 the
    rest)."""
    rid = result.view.get("request_id")
    messages = {
        "reached": f"{rid} is {result.state}.",
        "final": f"{rid} is {result.state}: the state waited for cannot come any more.",
        "idle": f"{rid} is {result.state}: nothing more happens in the local cloud.",
        "timeout": f"{rid} is still {result.state} (timed out).",
    }
    message = messages[result.outcome]
    runtime.tell(message)
    hint = None
    if result.state == "AWAITING_APPROVAL":
        hint = (
            f"Someone other than the requester approves it{_deadline(runtime, result.view)}: "
            f"{_approve_command(runtime, str(rid))}"
        )
        runtime.tell(hint, markup=False, soft_wrap=True)  # a command: never wrapped
    wanted = {s.upper() for s in asked} if asked else None
    if result.outcome == "reached" and (wanted is not None or result.state not in _SHORT_OF_ASKED):
        return
    _stop(runtime, status_for_state(result.state), message, hint)


def _approve_command(runtime: Runtime, request_id: str) -> str:
    """The command an approver runs: signed by the approver's own profile on AWS; as another principal
    (``--as``) on the local cloud and ``make serve``, where nobody signs."""
    flags = runtime.target_flags()
    if runtime.options.stack or (runtime.options.endpoint or "").startswith("https://"):
        return f"capacity {flags} approve {request_id}".replace("  ", " ")
    return f"capacity {flags} --as <approver's principal ARN> approve {request_id}".replace("  ", " ")


_SHORT_OF_ASKED = frozenset({"AWAITING_APPROVAL", "REJECTED", "FAILED", "CANCELLED"})
"""States where a watch with no ``--until`` stops although nothing asked for them: a person must act, or it
is over without having served."""


def _deadline(runtime: Runtime, view: Mapping[str, Any]) -> str:
    """`` by 2026-11-30 12:00 UTC (the API's clock, now 2026-11-29 12:05)``: an approval's deadline in the
    time of the API that will enforce it (``make serve``'s virtual clock runs SPEED times faster)."""
    entry = render.pending_entry(view)
    deadline = render.approval_deadline(entry.get("at"), entry.get("detail")) if entry else None
    if deadline is None:
        return ""
    try:
        now = f", now {runtime.api().transport.now():%Y-%m-%d %H:%M}"
    except CliError:
        now = ""
    return f" by {deadline:%Y-%m-%d %H:%M} UTC (the API's clock{now})"


@app.command()
def watch(
    ctx: typer.Context,
    request_id: ReservationId,
    until: Annotated[
        list[str] | None,
        typer.Option(
            help="Stop at this state (repeat; default READY, AWAITING_APPROVAL or a final state).",
            autocompletion=complete.states,
        ),
    ] = None,
    interval: Annotated[
        float | None,
        typer.Option(help="Seconds between polls of a remote API (default 10; 1 on make serve's http://)."),
    ] = None,
    timeout: Annotated[
        float | None, typer.Option(help="Give up after this many seconds (wall time).")
    ] = None,
) -> None:
    """Live progress of a reservation until it reaches a state (exit 1 if it cannot any more, 4 when it
    waits for an approval nobody asked to wait for, 3 when rejected)."""
    runtime = _runtime(ctx)
    result = _follow(runtime, request_id, until, interval=interval, timeout=timeout)
    _finish_watch(runtime, result, asked=until)


# ------------------------------------------------------------------------------ approvals, cancel


@app.command()
def approve(
    ctx: typer.Context,
    request_id: ReservationId,
    reason: Annotated[str | None, typer.Option(help="Why (recorded with the decision).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Approve a purchase above its threshold: it is bought at once. You are recorded as the approver."""
    _decide(ctx, request_id, approved=True, reason=reason, yes=yes)


@app.command()
def reject(
    ctx: typer.Context,
    request_id: ReservationId,
    reason: Annotated[str | None, typer.Option(help="Why (recorded, and told to the requester).")] = None,
) -> None:
    """Reject a purchase waiting for approval: nothing is bought."""
    _decide(ctx, request_id, approved=False, reason=reason, yes=True)


def _decide(ctx: typer.Context, request_id: str, *, approved: bool, reason: str | None, yes: bool) -> None:
    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    view = _guard(runtime, lambda: api.reservation(request_id))
    entry = render.pending_entry(view)
    if entry is None:
        _fail(runtime, RefusedError(f"{request_id} is {view.get('state')}, not awaiting approval"))
    waiting = render.detail_text("AWAITING_APPROVAL", entry.get("detail"), at=entry.get("at"))
    runtime.tell(f"Waiting for approval: {waiting} (the API's clock)", asking=not yes, soft_wrap=True)
    if approved:
        _confirm(runtime, "Approve this purchase (paid upfront, not refundable)?", yes=yes)
    result = _guard(runtime, lambda: api.decide(request_id, approved=approved, reason=reason))
    text = f"{request_id}: {result.get('status')} by {result.get('approver')}."
    render.emit(runtime.out, runtime.output, result, text)


@app.command()
def cancel(
    ctx: typer.Context,
    request_id: ReservationId,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    watch_release: Annotated[
        bool, typer.Option("--watch", help="Follow the release until RELEASED.")
    ] = False,
) -> None:
    """Cancel and release now: says first what is lost (an upfront fee is not refunded), then asks."""
    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    view = _guard(runtime, lambda: api.reservation(request_id))
    runtime.tell(render.cancel_notice(view), asking=not yes)
    _confirm(runtime, f"Cancel {request_id}?", yes=yes)
    # The person confirmed above that the fee is lost: the API's own 409 question is answered yes.
    result = _guard(runtime, lambda: api.cancel(request_id, confirm=True))
    if not watch_release:
        render.emit(
            runtime.out, runtime.output, result, f"{request_id}: {result.get('status')}; release requested."
        )
        return
    seen = len(view.get("history") or [])
    _finish_watch(runtime, _follow(runtime, request_id, ["RELEASED"], skip=seen))


# ------------------------------------------------------------------------------- costs, extensions


@app.command()
def costs(
    ctx: typer.Context,
    team: Annotated[str | None, typer.Option(help="Only this team.")] = None,
    month: Annotated[str | None, typer.Option(help="YYYY-MM.")] = None,
    group_by: Annotated[
        str | None, typer.Option(help="team, instance_type or region (the JSON's rows).")
    ] = None,
) -> None:
    """What was paid and what ran: a row per reservation (paid, instance-hours used of reserved, on-demand
    cost of what ran, saving or loss) and the total; -o json keeps the API's answer (GET /costs)."""
    runtime = _runtime(ctx)
    query = {k: v for k, v in {"team": team, "month": month, "group_by": group_by}.items() if v}
    result = _guard(runtime, lambda: runtime.api().costs(query))
    render.emit(runtime.out, runtime.output, result, render.costs_view(result))


@app.command()
def extend(
    ctx: typer.Context,
    request_id: ReservationId,
    duration: Annotated[
        str | None, typer.Option(help="How much longer: 1d, 24h (lists the offerings).")
    ] = None,
    offering: Annotated[str | None, typer.Option(help="Buy this extension offering.")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before buying.")] = False,
) -> None:
    """Extend a reservation in place: list the extension offerings, or buy one with --offering
    (POST /reservations/{id}/extensions)."""
    runtime = _runtime(ctx)
    from capacity_cli.request import parse_duration  # noqa: PLC0415

    body: dict[str, Any] = {}
    if duration:
        body["duration_hours"] = _guard(runtime, lambda: parse_duration(duration))
    if offering:
        body["offering_id"] = offering
    if offering:
        _confirm(
            runtime, f"Buy extension {offering} for {request_id} (paid upfront, not refundable)?", yes=yes
        )
    result = _guard(runtime, lambda: runtime.api().extensions(request_id, body), sent=body)
    render.emit(runtime.out, runtime.output, result, render.extensions_view(result))
    if isinstance(result, Mapping) and result.get("status") == "APPROVAL_REQUIRED":
        raise typer.Exit(ExitStatus.NEEDS_APPROVAL)


@app.command("serve-until")
def serve_until(
    ctx: typer.Context,
    request_id: ReservationId,
    until: Annotated[
        str,
        typer.Argument(
            help="Until when (ISO-8601 UTC, or +3d from now), or 'none' to keep it no longer than bought."
        ),
    ],
    lead: Annotated[
        str | None, typer.Option(help="How long before each end to extend or roll over (48h, 2d).")
    ] = None,
) -> None:
    """Keep a reservation's models served until a time: ahead of each end the orchestrator extends it in
    place, else buys the next reservation and moves the clients onto it (PATCH /reservations/{id})."""
    runtime = _runtime(ctx)
    from capacity_cli.request import iso_z, parse_duration, parse_time  # noqa: PLC0415

    api = _guard(runtime, runtime.api)
    body: dict[str, Any] = {}
    if until.strip().lower() == "none":
        body["serve_until"] = None
    else:
        body["serve_until"] = iso_z(_guard(runtime, lambda: parse_time(until, now=api.transport.now())))
    if lead:
        body["rollover_lead_hours"] = _guard(runtime, lambda: parse_duration(lead, "--lead"))
    result = _guard(runtime, lambda: api.serve_until(request_id, body), sent=body)
    render.emit(runtime.out, runtime.output, result, render.serve_until_view(result))


# -------------------------------------------------------------------------------------- schedules


@schedules_app.command("list")
def schedules_list(ctx: typer.Context) -> None:
    """The recurring reservations, by name."""
    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    page = _guard(runtime, lambda: api.schedules(limit=100))
    items = list(page.get("schedules") or [])
    render.emit(runtime.out, runtime.output, page, render.schedules_table(items))


@schedules_app.command("show")
def schedules_show(ctx: typer.Context, name: Annotated[str, typer.Argument(help="The schedule.")]) -> None:
    """One schedule and its request template."""
    runtime = _runtime(ctx)
    item = _guard(runtime, lambda: runtime.api().schedule(name))
    render.emit(runtime.out, runtime.output, item, render.schedule_view(item))


@schedules_app.command("create")
def schedules_create(
    ctx: typer.Context,
    file: Annotated[
        str, typer.Option("--file", "-f", help="The definition: POST /schedules' body, JSON or YAML.")
    ],
) -> None:
    """Create a recurring reservation (each run is a POST /reservations with its own request id)."""
    runtime = _runtime(ctx)
    definition = _guard(runtime, lambda: load_file(file))
    item = _guard(
        runtime,
        lambda: runtime.api().create_schedule(definition),
        sent=definition,
        schema="ScheduleDefinition",
    )
    render.emit(runtime.out, runtime.output, item, render.schedule_view(item))


@schedules_app.command("delete")
def schedules_delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The schedule.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
) -> None:
    """Delete a schedule (reservations it already requested are not touched)."""
    runtime = _runtime(ctx)
    _confirm(runtime, f"Delete schedule {name}?", yes=yes)
    result = _guard(runtime, lambda: runtime.api().delete_schedule(name))
    render.emit(runtime.out, runtime.output, result, f"Schedule {name} deleted.")


# ------------------------------------------------------------------------------------ for admins


@app.command()
def smoke(
    ctx: typer.Context,
    file: FileOption = None,
    instance_type: TypeOption = "ml.p5.48xlarge",
    start: FromOption = "+14d",
) -> None:
    """Check that every route answers, buying nothing (a dry run, lists, and requests that must fail)."""
    from capacity_cli.smoke import run_checks  # noqa: PLC0415

    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    # A plan never reads the model (DescribeModel runs only before a purchase): any name will do.
    flags = RequestFlags(
        instance_type=instance_type,
        count=1,
        duration="1d",
        start=start,
        max_fee="100000",
        models=["smoke-check"],
    )
    body = _guard(runtime, lambda: _request(runtime, file, flags if file is None else RequestFlags()))
    checks = run_checks(api, body)
    runtime.tell(api.transport.describe())
    render.emit(runtime.out, runtime.output, [c.as_dict() for c in checks], render.checks_table(checks))
    failed = [c for c in checks if not c.ok]
    if failed:
        message = f"{len(failed)} of {len(checks)} routes did not answer as expected."
        runtime.tell(f"[red]{message}[/red]")
        _stop(runtime, ExitStatus.FAILED, message)
    runtime.tell(f"All {len(checks)} routes answered as expected.")


@app.command("config")
def show_config(ctx: typer.Context) -> None:
    """Show the configuration file's path, its settings and the target they select (no network)."""
    runtime = _runtime(ctx)
    kind = _guard(runtime, lambda: kind_of(runtime.options, runtime.config))
    data = {
        "path": str(config_path()),
        "target": kind,
        **{k: v for k, v in vars(runtime.config).items() if v},
    }
    text = "\n".join(f"{key:<10} {value}" for key, value in data.items())
    render.emit(runtime.out, runtime.output, data, text)


@app.command()
def mcp(ctx: typer.Context) -> None:
    """Serve the same operations as MCP tools on stdio, for agents (plan, reserve, status, watch, cancel,
    costs)."""
    from capacity_cli.mcp_server import serve_stdio  # noqa: PLC0415

    runtime = _runtime(ctx)
    api = _guard(runtime, runtime.api)
    runtime.err.print(f"capacity MCP server on stdio: {api.transport.describe()}", highlight=False)
    cloud = getattr(api.transport, "cloud", None)  # the embedded local cloud, when --local
    serve_stdio(
        api,
        default_region=runtime.region(),
        default_requester=runtime.requester(),
        target_flags=runtime.target_flags(),
        ignore_thread=cloud.clock.ignore_thread if cloud is not None else None,
    )


def main() -> None:
    """The console script ``capacity``."""
    app(prog_name="capacity")
