"""``python -m localcloud``: run a sample event through the local cloud, or serve the API on 127.0.0.1.
Kept whole: the run and serve commands share the event detection, delivery and timeline printing.

``run EVENT_FILE`` stands the template up, delivers the event, runs the simulation until nothing is left
to do, and prints what a person watching would have seen: the timeline with simulated timestamps (API
calls, events, executions, Lambda invocations, schedules, faults and every Slack message in full), the
executions, and the billable resources left. The event kind is detected:

- an API Gateway REST proxy event (``httpMethod``, ``path``) -> the matching ``Api`` route;
- an EventBridge event (``detail-type``, ``source``, ``detail``) -> put on the stack's bus (``aws.*``
  sources on the default bus, as AWS does), or ``PutEvents`` entries (``Source``/``DetailType``/``Detail``,
  one, a list, or ``{"Entries": [...]}``);
- a Scheduler ``CreateSchedule`` request (``ScheduleExpression``, ``Target``) -> created, then fired;
- a plain request, JSON or YAML (``instance_type`` and ``max_upfront_fee_usd``: the body of
  ``POST /reservations``; ``schedule_expression`` and ``request``: of ``POST /schedules``) -> wrapped as API
  Gateway would (:mod:`localcloud.proxy`) and sent to that route (``--plan``: to ``POST /plans``);
- an EC2 ``CreateLaunchTemplate`` request (``LaunchTemplateName``, ``LaunchTemplateData``, and an optional
  ``Regions`` list, default the cloud's region) -> the launch template created in each region (setup for
  an EC2 capacity block request that names it);
- a SageMaker ``CreateModel`` request (``ModelName``, ``PrimaryContainer`` or ``Containers``,
  ``ExecutionRoleArn``, and an optional ``Regions`` list) -> the model created in each region
  (setup for a request that names existing models, as Slack's ``/gpu reserve ... models=a,b`` does: on AWS
  they must exist too);
- anything else with ``--function NAME`` -> that function, invoked directly.

Virtual time starts at ``--start``, else at the event's own time (``requestContext.requestTimeEpoch`` or
``time``), else at :data:`localcloud.cloud.DEFAULT_START`.

``serve`` answers the template's API on 127.0.0.1 (``make serve``). Its virtual clock starts at ``--start``
(``now``: the real time), else at :data:`localcloud.serving.SAMPLE_EPOCH`, the sample events' time, and
stands there until the first request arrives; then it runs at ``--speed``. ``--setup EVENT`` delivers setup
events first (the sample models: ``events/sagemaker_create_model_llama_*.json``).

Exit status: 0 when every execution succeeded (or is still waiting, e.g. for an approval) and no API
answer was a 5xx; 1 when an execution failed, an API answer was a 5xx or the run got stuck; 2 when the
template or the event cannot be used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from time_machine import escape_hatch

from localcloud.capacity_report import capacity_view, format_capacity, read_ledgers, sizing_lines
from localcloud.chart import ChartWorker
from localcloud.clock import (
    DEFAULT_STALL_SECONDS,
    STALL_SECONDS_ENV,
    ClockStuckError,
    RunProgress,
    default_stall_seconds,
)
from localcloud.cloud import DEFAULT_START, ExecutionSummary, LocalCloud
from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector
from localcloud.http_api import (
    ApiCaller,
    LocalApiServer,
    SigV4Verifier,
    api_callers,
    describe_routes,
    response_summary,
)
from localcloud.proxy import load_document, plain_route, proxy_event
from localcloud.report import build_report, format_report, ledger_scale_items, write_report
from localcloud.rightsize_view import ask_plan, predicted_section
from localcloud.serving import SAMPLE_EPOCH, RealTimeDriver, SlackClock
from localcloud.template import TemplateError
from localcloud.timeline import Kind, TimelineEntry
from localcloud.traffic import TrafficProfile, TrafficReplay, attach

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """The command line, the event or the template cannot be used (message for the user)."""


# --------------------------------------------------------------------------------------------- parsing


def build_parser() -> argparse.ArgumentParser:
    """The ``python -m localcloud`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="python -m localcloud",
        description="Run the SAM application in one process, on a virtual clock, with no AWS account.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--template", type=Path, default=Path("template.yaml"), help="SAM template")
        sub.add_argument("--stack-name", default="capacity-orchestrator")
        sub.add_argument("--region", default=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"))
        sub.add_argument("--faults", type=Path, help="JSON list of fault rules (see docs/localcloud.md)")
        sub.add_argument(
            "--market",
            type=Path,
            help="the capacity market's settings (JSON, localcloud.emulator.market.MarketConfig: capacity, "
            "sold_out... e.g. events/market_serve_until.json)",
        )
        sub.add_argument("--seed", type=int, default=7, help="seeds ids and the capacity market")
        sub.add_argument(
            "--start",
            help="virtual start time, ISO 8601, or now (run: default the event's time; serve: default "
            f"{SAMPLE_EPOCH:%Y-%m-%dT%H:%M:%SZ}, the sample events' time)",
        )
        sub.add_argument(
            "--parameter",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="template parameter override",
        )
        sub.add_argument("--verbose", action="store_true", help="also print Lambda logs and every AWS call")

    run = commands.add_parser(
        "run",
        help="deliver sample events in order, run to quiescence, print what happened",
        description="Deliver each EVENT_FILE in order to one local cloud. After each but the last, the "
        "simulation runs for --gap of virtual time (default: until idle); after the last, until idle.",
    )
    run.add_argument("event_file", type=Path, nargs="+")
    run.add_argument(
        "--gap",
        type=_parse_duration,
        help="virtual time between events, e.g. 30m, 2h, 1d (default: run until idle before the next)",
    )
    common(run)
    run.add_argument("--function", help="invoke this function (logical id or name) with the event")
    run.add_argument(
        "--plan",
        action="store_true",
        help="send a plain reservation request to POST /plans (a dry run) instead of POST /reservations",
    )
    run.add_argument(
        "--caller",
        metavar="ARN",
        help="the IAM principal a plain request comes from (requestContext.identity.userArn; default the "
        "first ApiCallers entry of local_values.json, the demo's requester)",
    )
    run.add_argument("--bus", help="event bus for EventBridge events (default: the stack's bus)")
    run.add_argument(
        "--stall-seconds",
        type=float,
        default=None,
        help="hang detector: the run fails after this many seconds of real time without progress (virtual "
        f"time still, no invocation started or ended); default {DEFAULT_STALL_SECONDS:.0f}, or "
        f"{STALL_SECONDS_ENV}. A run that progresses is never cut short, however slow the machine",
    )
    run.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="a progress line on stderr while the run runs (auto: rewritten in place on a terminal, one "
        "line every 10 s otherwise)",
    )
    run.add_argument("--allow-failed", action="store_true", help="exit 0 even if an execution failed")
    run.add_argument(
        "--traffic",
        type=Path,
        help="replay this traffic profile (JSON, e.g. events/traffic_two_models.json) against the "
        "reservation's inference components, and write the report (see docs/localcloud.md)",
    )
    run.add_argument(
        "--reports-dir",
        type=Path,
        default=Path("reports"),
        help="where --traffic and --report-name write their JSON and PNG (default: reports)",
    )
    run.add_argument(
        "--report-name",
        metavar="NAME",
        help="write <reports-dir>/NAME.json and NAME.png: reserved capacity against what ran (purchases, "
        "extensions, roll-overs and releases marked) and, with --traffic, the traffic report (default with "
        "--traffic: the reservation's id); make demo, demo-ec2 and demo-extend each name their own",
    )

    soak = commands.add_parser(
        "soak", help="randomized lifecycles with injected faults, checked for the money rules (docs/soak.md)"
    )
    # The soak is a test harness kept outside the runtime package; this entry point is the one place the
    # runtime reaches it (the import-linter contract in pyproject.toml ignores exactly this import).
    from localcloud_soak.run import add_arguments as soak_arguments  # noqa: PLC0415

    soak_arguments(soak)

    serve = commands.add_parser("serve", help="serve the template's Api events on 127.0.0.1")
    common(serve)
    serve.add_argument("--port", type=int, default=3000)
    serve.add_argument("--speed", type=float, default=1.0, help="virtual seconds per real second")
    serve.add_argument(
        "--setup",
        type=Path,
        action="append",
        default=[],
        metavar="EVENT_FILE",
        help="deliver this event before serving, e.g. events/sagemaker_create_model_llama_eu.json (repeat)",
    )
    serve.add_argument(
        "--sigv4",
        action="store_true",
        help="check SigV4 on the AWS_IAM routes as API Gateway does (callers: ApiCallers in "
        "localcloud/local_values.json; request times against the real clock) and pass the caller's identity",
    )
    return parser


def _parameters(pairs: list[str]) -> dict[str, str]:
    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--parameter {pair!r}: expected KEY=VALUE")
        overrides[key] = value
    return overrides


def _parse_duration(text: str) -> timedelta:
    """``90s``, ``30m``, ``2h`` or ``1d`` as a timedelta (argparse type)."""
    units = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
    number, unit = text[:-1], text[-1:]
    if unit not in units or not number.isdigit():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a whole number and a unit s, m, h or d (e.g. 2h)"
        )
    return timedelta(**{units[unit]: int(number)})


def _parse_start(text: str) -> datetime:
    if text.strip().lower() == "now":
        return datetime.now(UTC).replace(microsecond=0)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(f"--start {text!r}: not an ISO 8601 date-time") from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _unsigned_caller(values: Mapping[str, Any]) -> ApiCaller | None:
    """Who an unsigned request is (serve without ``--sigv4``): the first of ``ApiCallers`` (the demo's
    requester), None when there are none (every AWS_IAM route then has no caller, as a broken deploy)."""
    try:
        return next(iter(api_callers(values).values()), None)
    except ValueError:
        return None


def _market(path: Path | None) -> MarketConfig | None:
    """The market settings of ``--market`` (None: the emulator's defaults).

    Raises:
        UsageError: unreadable, not JSON, or not valid settings (the message names the field).
    """
    if path is None:
        return None
    try:
        return MarketConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--market {path}: {exc}") from exc


def _faults(path: Path | None, seed: int) -> FaultInjector | None:
    source = path or (Path(os.environ["LOCALCLOUD_FAULTS"]) if os.environ.get("LOCALCLOUD_FAULTS") else None)
    if source is None:
        return None
    try:
        return FaultInjector.from_file(source, seed=seed)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"faults: {exc}") from exc


# -------------------------------------------------------------------------------------------- the event


def load_event(path: Path) -> Any:
    """Read an event file: JSON, or YAML for ``.yaml``/``.yml`` (a plain request is often written in YAML).

    Raises:
        UsageError: unreadable, or not JSON/YAML.
    """
    try:
        return load_document(path)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def event_kind(event: Any) -> str:  # noqa: PLR0911 - one return per kind
    """``api``, ``eventbridge``, ``put_events``, ``schedule``, ``launch_template``, ``request`` (a plain
    reservation request or schedule definition: the body of ``POST /reservations`` or ``POST /schedules``)
    or ``unknown``."""
    if isinstance(event, dict):
        if "httpMethod" in event and ("path" in event or "resource" in event):
            return "api"
        if {"detail-type", "source", "detail"} <= event.keys():
            return "eventbridge"
        if "Entries" in event or {"Source", "DetailType", "Detail"} <= event.keys():
            return "put_events"
        if {"ScheduleExpression", "Target"} <= event.keys():
            return "schedule"
        if {"LaunchTemplateName", "LaunchTemplateData"} <= event.keys():
            return "launch_template"
        if _is_create_model(event):
            return "sagemaker_models"
        if plain_route(event) is not None:
            return "request"
    if isinstance(event, list) and event and all(isinstance(e, dict) and "Source" in e for e in event):
        return "put_events"
    return "unknown"


def _is_create_model(event: Any) -> bool:
    """A SageMaker ``CreateModel`` request (its required ``ModelName`` and ``ExecutionRoleArn``)."""
    return isinstance(event, dict) and {"ModelName", "ExecutionRoleArn"} <= event.keys()


def event_time(event: Any) -> datetime | None:
    """The instant an event says it happened (API ``requestTimeEpoch``, EventBridge ``time``), if any."""
    if not isinstance(event, dict):
        return None
    epoch = (event.get("requestContext") or {}).get("requestTimeEpoch")
    if isinstance(epoch, (int, float)):
        return datetime.fromtimestamp(epoch / 1000, UTC)
    text = event.get("time")
    if isinstance(text, str):
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            return None
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return None


def default_caller(cloud: LocalCloud) -> str:
    """Who a plain request comes from unless ``--caller`` says (API Gateway's IAM authorizer always passes
    one): the first of ``local_values.json``'s ``ApiCallers`` (the demo's requester, team ml-platform), as
    an unsigned request to ``serve``."""
    caller = _unsigned_caller(cloud.stack.local_values)
    return caller.arn if caller else f"arn:aws:sts::{cloud.account_id}:assumed-role/localcloud/local-user"


def default_bus(cloud: LocalCloud) -> str:
    """The stack's event bus when it has exactly one, else ``default``."""
    buses = [
        cloud.stack.physical_id(r.logical_id) for r in cloud.stack.resources_of_type("AWS::Events::EventBus")
    ]
    return buses[0] if len(buses) == 1 else "default"


def deliver(  # noqa: PLR0911 - one return per kind
    cloud: LocalCloud,
    event: Any,
    kind: str,
    *,
    bus: str | None,
    function: str | None,
    plan: bool = False,
    caller: str | None = None,
) -> dict[str, Any]:
    """Hand the event to the cloud; returns a small description (for the report).

    Raises:
        UsageError: the event kind is unknown and no ``--function`` was given, or the function is unknown.
    """
    if function is not None:
        try:
            spec = cloud.stack.function(function)
        except KeyError as exc:
            known = ", ".join(s.logical_id for s in cloud.stack.functions)
            raise UsageError(f"--function {function!r}: no such function (known: {known})") from exc
        result = cloud.lambdas.invoke(spec.arn, json.dumps(event).encode())
        return {
            "function": spec.logical_id,
            "error": result.function_error,
            "payload": result.payload.decode(),
        }
    if kind == "api":
        return {"api": cloud.api_request(event)}
    if kind == "eventbridge":
        if str(event["source"]).startswith("aws."):
            cloud.delivery.put_aws_event(
                source=event["source"],
                detail_type=event["detail-type"],
                detail=event["detail"],
                resources=list(event.get("resources") or []),
                region=str(event.get("region") or cloud.region),
            )
            return {"bus": "default"}
        target = bus or default_bus(cloud)
        entry = {
            "EventBusName": target,
            "Source": event["source"],
            "DetailType": event["detail-type"],
            "Detail": json.dumps(event["detail"]),
            "Resources": list(event.get("resources") or []),
        }
        return {"bus": target, "event_ids": cloud.put_events([entry])}
    if kind == "put_events":
        entries = event["Entries"] if isinstance(event, dict) and "Entries" in event else event
        entries = entries if isinstance(entries, list) else [entries]
        target = bus or default_bus(cloud)
        prepared = [
            {**entry, "EventBusName": entry.get("EventBusName", target)}
            | ({"Detail": json.dumps(entry["Detail"])} if isinstance(entry.get("Detail"), dict) else {})
            for entry in entries
        ]
        return {"event_ids": cloud.put_events(prepared)}
    if kind == "schedule":
        request = {"Name": "localcloud-run", "FlexibleTimeWindow": {"Mode": "OFF"}, **event}
        cloud.client("scheduler").create_schedule(**request)
        return {"schedule": request["Name"]}
    if kind == "request":
        method, path = plain_route(event) or ("POST", "/reservations")
        if plan and path == "/reservations":
            path = "/plans"
        wrapped = proxy_event(
            method=method,
            path=path,
            body=event,
            routes=cloud.stack.api_routes,
            account_id=cloud.account_id,
            now=cloud.now(),
            identity=caller or default_caller(cloud),
        )
        return {"api": cloud.api_request(wrapped)}
    if kind in ("launch_template", "sagemaker_models"):
        return create_setup(cloud, event, kind)
    raise UsageError(
        "the event is neither an API Gateway proxy event, an EventBridge event, PutEvents entries nor a "
        "CreateSchedule request; pass --function NAME to invoke a function with it"
    )


def create_setup(cloud: LocalCloud, event: Any, kind: str) -> dict[str, Any]:
    """Create what a request later names, as its owner would with the AWS API, in each of the event's
    ``Regions`` (default the cloud's): a launch template (``launch_template``) or SageMaker models
    (``sagemaker_models``: a ``CreateModel`` request)."""
    if kind == "launch_template":
        request = {key: value for key, value in event.items() if key != "Regions"}
        regions = list(event.get("Regions") or [cloud.region])
        ids = [
            cloud.client("ec2", region).create_launch_template(**request)["LaunchTemplate"][
                "LaunchTemplateId"
            ]
            for region in regions
        ]
        return {"launch_template": request["LaunchTemplateName"], "ids": ids}
    request = {key: value for key, value in event.items() if key != "Regions"}
    created = [
        cloud.client("sagemaker", region).create_model(**request)["ModelArn"]
        for region in list(event.get("Regions") or [cloud.region])
    ]
    return {"models": created}


# ------------------------------------------------------------------------------------------------ report


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else "-"


def format_executions(executions: list[ExecutionSummary], stack_name: str) -> str:
    """A table of executions (state machine, name, status, start, stop, transitions, error)."""
    if not executions:
        return "  (none)"
    rows = [("STATE MACHINE", "EXECUTION", "STATUS", "START", "STOP", "TRANSITIONS", "ERROR")]
    for e in executions:
        machine = e.state_machine.removeprefix(f"{stack_name}-")
        error = f"{e.error}: {e.cause}"[:80] if e.error else ""
        rows.append(
            (machine, e.name[:12], e.status, _when(e.start), _when(e.stop), str(e.transitions), error)
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    )


def format_billable(resources: list[Any]) -> str:
    """One line per billable resource left, or ``none``."""
    if not resources:
        return "  none"
    lines = []
    for resource in resources:
        if is_dataclass(resource) and not isinstance(resource, type):
            fields = asdict(resource)
        elif hasattr(resource, "_asdict"):
            fields = resource._asdict()
        else:
            fields = {"resource": str(resource)}
        lines.append("  " + "  ".join(f"{k}={v}" for k, v in fields.items()))
    return "\n".join(lines)


def _routine(entry: TimelineEntry) -> bool:
    """Lines a person following the story can do without (shown with ``--verbose``): Lambda invocations
    that succeeded, DynamoDB stream batches that succeeded (the ledger's outbox), and CloudWatch alarm state
    changes that no rule of the stack listens to."""
    if entry.kind == Kind.LAMBDA:
        return entry.text.endswith("-> ok")
    if entry.kind == Kind.EVENT and entry.detail.get("mapping"):
        return entry.detail.get("error") is None
    return (
        entry.kind == Kind.EVENT
        and "(aws.cloudwatch)" in entry.text
        and entry.text.endswith("no rule matched")
    )


GROUP_MIN_REPEATS = 3
"""A block of lines repeated at least this many times in a row is printed once, with a count."""
_GROUP_MAX_BLOCK = 4


def group_repeats(entries: list[TimelineEntry]) -> list[TimelineEntry | tuple[int, int, datetime]]:
    """The entries with runs of a repeated block (1 to 4 lines equal but for their time, e.g. an alarm
    going ALARM then OK every minute) kept once: each run becomes its first block, then ``(block length,
    further repeats, time of the last line)``."""
    keys = [(entry.kind, entry.text) for entry in entries]
    out: list[TimelineEntry | tuple[int, int, datetime]] = []
    i = 0
    while i < len(entries):
        for size in range(1, _GROUP_MAX_BLOCK + 1):
            block = keys[i : i + size]
            repeats = 1
            while keys[i + repeats * size : i + (repeats + 1) * size] == block:
                repeats += 1
            if repeats >= GROUP_MIN_REPEATS:
                out.extend(entries[i : i + size])
                out.append((size, repeats - 1, entries[i + repeats * size - 1].at))
                i += repeats * size
                break
        else:
            out.append(entries[i])
            i += 1
    return out


_WORD = re.compile(r"\w")
_MERGED_KINDS = frozenset({Kind.EVENT, Kind.SCHEDULE})
"""Kinds whose same-second lines are merged: events and schedule firings come in one per model."""


def _shared_length(one: str, two: str) -> int:
    """How many leading characters ``one`` and ``two`` share."""
    return next(
        (i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), min(len(one), len(two))
    )


def _variants(first: str, other: str) -> tuple[str, str, str, str] | None:
    """``(prefix, first's word, other's word, suffix)`` when two one-line texts differ in one word (the
    varying part widened to whole words, holding no space, and no upper-case status), else None."""
    if "\n" in first or "\n" in other:
        return None
    start = _shared_length(first, other)
    end = _shared_length(first[start:][::-1], other[start:][::-1])
    while start > 0 and _WORD.match(first[start - 1]):
        start -= 1
    while end > 0 and _WORD.match(first[len(first) - end]):
        end -= 1
    one, two = first[start : len(first) - end], other[start : len(other) - end]
    # A status (ALARM, OK, IN_SERVICE...) that differs is a change, not a sibling.
    if " " in one or " " in two or one.isupper() or two.isupper():
        return None
    return first[:start], one, two, first[len(first) - end :]


@dataclass
class _Siblings:
    """Lines merged into one: the first, the varying word of each, and what they share around it."""

    head: TimelineEntry
    words: list[str]
    prefix: str
    suffix: str

    def take(self, entry: TimelineEntry) -> bool:
        """Add ``entry`` if it differs from the others in the same word only."""
        found = _variants(self.head.text, entry.text)
        if found is None or (found[0], found[3]) != (self.prefix, self.suffix):
            return False
        self.words.append(found[2])
        return True

    def entry(self) -> TimelineEntry:
        distinct = list(dict.fromkeys(self.words))
        if len(distinct) == 1:
            return replace(self.head, text=f"{self.head.text} (x{len(self.words)})")
        return replace(self.head, text=self.prefix + "{" + ", ".join(distinct) + "}" + self.suffix)


def merge_siblings(entries: list[TimelineEntry]) -> list[TimelineEntry]:
    """Event and schedule lines of one second that differ in one word only (the same alarm of two models,
    one idle check per model) as one line naming the variants, ``.../llama-3-8b-{eu, us}/idle,
    state=ALARM``, at the first one's place; a line repeated as is gets ``(x2)``. Linear in the entries:
    a line is compared only with the lines of its own second and kind."""
    merged: list[TimelineEntry | _Siblings] = []
    places: dict[tuple[str, datetime], list[int]] = {}  # (kind, second) -> indexes in ``merged``
    for entry in entries:
        if entry.kind not in _MERGED_KINDS:
            merged.append(entry)
            continue
        bucket = places.setdefault((entry.kind, entry.at.replace(microsecond=0)), [])
        for index in bucket:
            item = merged[index]
            if isinstance(item, _Siblings):
                if item.take(entry):
                    break
                continue
            found = _variants(item.text, entry.text)
            if found is not None:
                merged[index] = _Siblings(item, [found[1], found[2]], found[0], found[3])
                break
        else:
            bucket.append(len(merged))
            merged.append(entry)
    return [item.entry() if isinstance(item, _Siblings) else item for item in merged]


def format_timeline(entries: list[TimelineEntry], *, verbose: bool) -> str:
    """The timeline; with ``verbose``, every line and each Lambda invocation's log under its line. Unless
    ``verbose``, lines of one second that differ in one word are one line (:func:`merge_siblings`), and a
    block of lines repeated in a row (:func:`group_repeats`) is printed once with how often it repeated."""
    lines: list[str] = []
    shown = [entry for entry in entries if verbose or not _routine(entry)]
    for item in shown if verbose else group_repeats(merge_siblings(shown)):
        if isinstance(item, tuple):
            size, more, last = item
            what = "the line above" if size == 1 else f"the {size} lines above"
            lines.append(f"{'':22}  ...        {what} repeated {more} more time(s), until {_when(last)}")
            continue
        lines.append(item.render())
        if verbose and item.kind == Kind.LAMBDA and item.detail.get("log"):
            lines.extend(" " * 33 + "| " + line for line in str(item.detail["log"]).splitlines())
    return "\n".join(lines)


def report(
    cloud: LocalCloud,
    deliveries: list[dict[str, Any]],
    *,
    verbose: bool,
    stuck: str | None,
    after_timeline: str = "",
    capacity: dict[str, Any] | None = None,
) -> tuple[str, bool]:
    """The text printed after a run and whether the run failed (``after_timeline``: more sections, such as
    the traffic report, printed right after the timeline; ``capacity``: reserved against what ran, for the
    cost summary's sizing lines)."""
    executions = cloud.executions()
    entries = cloud.timeline.entries()
    if verbose:
        entries = sorted(
            entries
            + [
                TimelineEntry(
                    c.at,
                    "aws",
                    f"{c.service} {c.operation} -> {c.route} {c.status or ''}"
                    f"{' ' + c.error_code if c.error_code else ''}"
                    f"{' faults ' + ','.join(k.value for k in c.faults) if c.faults else ''}",
                    {},
                    -1,
                )
                for c in list(cloud.dispatcher.calls)
            ],
            key=lambda e: e.at,
        )
    billable = cloud.billable_resources()
    sections = [
        f"== Timeline ({_when(cloud.clock.now())} at the end)",
        format_timeline(entries, verbose=verbose),
    ]
    if after_timeline:
        sections.append(after_timeline)
    sections += ["", "== Executions", format_executions(executions, cloud.stack.stack_name)]
    sections += ["", "== Billable resources left", format_billable(billable)]
    # Slack messages are already in the timeline, in full, where they were posted.
    sections += ["", f"== Slack messages: {len(cloud.outbox.messages)} (in the timeline above)"]
    problems: list[str] = []
    failed = [e for e in executions if e.failed]
    problems += [
        f"execution {e.name} of {e.state_machine} {e.status}: {e.error} {e.cause or ''}".strip()
        for e in failed
    ]
    for delivered in deliveries:
        api = delivered.get("api")
        if isinstance(api, dict) and int(api.get("statusCode", 200)) >= 400:
            problems.append(f"the API answered {response_summary(api)}")
        if delivered.get("error"):
            problems.append(f"the function failed: {delivered.get('payload')}")
    if stuck:
        problems.append(stuck)
    waiting = [e for e in executions if e.status == "RUNNING"]
    sections += ["", "== Result"]
    if waiting:
        sections.append(f"  {len(waiting)} execution(s) still running (waiting for a callback or a timer)")
    sections.append("  ok" if not problems else "\n".join(f"  FAILED: {p}" for p in problems))
    costs = cost_section(cloud, capacity, sharing="== Traffic and scaling" in after_timeline)
    if costs:  # last: what the capacity really cost, from what ran (issue 16)
        sections += ["", costs]
    return "\n".join(sections), bool(problems)


def _usd(value: Any) -> str:
    return f"${float(value):,.2f}" if value is not None else "n/a"


def _ledger(cloud: LocalCloud, request_id: str) -> list[dict[str, Any]]:
    """Every ledger item of ``request_id`` as plain values (the soak's reader: no faults)."""
    from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415 - boto3 is the cloud's own

    client = cloud.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": cloud.stack.physical_id("LedgerTable"),
        "KeyConditionExpression": "request_id = :r",
        "ExpressionAttributeValues": {":r": {"S": request_id}},
        "ConsistentRead": True,
    }
    items: list[dict[str, Any]] = []
    with cloud.dispatcher.exempt():
        while True:
            page = client.query(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    plain = TypeDeserializer()
    return [{k: plain.deserialize(v) for k, v in item.items()} for item in items]


def _at(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def fee_lines(cloud: LocalCloud, request_id: str) -> list[str]:
    """What each fee of ``request_id`` bought and how much of it served (issue 28): the reservation's own
    fee and each paid extension, its hours (UTC) and the hours of it during which the reservation served
    (from ``READY`` to the first ``RELEASING``), from the ledger."""
    items = _ledger(cloud, request_id)
    purchase = next((i for i in items if i.get("sk") == "PURCHASE"), None)
    if purchase is None or not purchase.get("start_time"):
        return []
    entries = sorted(
        (i for i in items if str(i.get("sk", "")).startswith("STATE#")), key=lambda i: str(i["sk"])
    )
    ready = next((_at(e["at"]) for e in entries if e.get("state") == "READY"), None)
    ended = next((_at(e["at"]) for e in entries if e.get("state") == "RELEASING"), None) or cloud.now()
    fees: list[tuple[str, Any, datetime, datetime]] = []
    extended = [e for e in entries if e.get("state") == "EXTENDED"]
    first_end = _at(extended[0]["detail"]["previous_end_time"]) if extended else _at(purchase["end_time"])
    fees.append(("reservation", purchase.get("upfront_fee_usd"), _at(purchase["start_time"]), first_end))
    for entry in extended:
        detail = entry.get("detail") or {}
        fees.append(
            ("extension", entry.get("money_usd"), _at(detail["previous_end_time"]), _at(detail["end_time"]))
        )
    lines = []
    for what, fee, start, end in fees:
        bought = (end - start) / timedelta(hours=1)
        used = 0.0
        if ready is not None:
            used = max(0.0, (min(end, ended) - max(start, ready)) / timedelta(hours=1))
        unused = "" if used > 0 else "  UNUSED"
        lines.append(
            f"    {what} fee {_usd(fee)}: bought {start:%m-%d %H:%M} -> {end:%m-%d %H:%M} UTC "
            f"({bought:.0f} h); served {used:.2f} h of it{unused}"
        )
    return lines


def cost_section(cloud: LocalCloud, capacity: dict[str, Any] | None = None, *, sharing: bool = False) -> str:
    """``== Cost summary``: the application's own ``GET /costs`` (as the demo's caller), one line per
    reservation bought, from what ran: paid, instance-hours used of reserved, USD per used instance-hour,
    and the saving or loss against on-demand for what ran; then, for a reservation larger than the most
    that ever ran on it, by how much (``capacity``, read from the ledger when not given); with ``sharing``
    (a traffic report above), what its comparison counts. Empty when nothing was bought."""
    if not any(route.path == "/costs" for route in cloud.stack.api_routes):
        return ""
    event = proxy_event(
        method="GET",
        path="/costs",
        routes=cloud.stack.api_routes,
        account_id=cloud.account_id,
        now=cloud.now(),
        identity=default_caller(cloud),
    )
    answer = cloud.api_request(event)
    if int(answer.get("statusCode", 500)) != 200:
        return f"== Cost summary\n  GET /costs answered {response_summary(answer)}"
    report = json.loads(answer["body"])
    if not report["reservations"]:
        return ""
    lines = ["== Cost summary (GET /costs: from what ran)"]
    for item in report["reservations"]:
        saving = float(item["saving_usd"] or 0)
        on_demand = float(item["on_demand_equivalent_used_usd"] or 0)
        verdict = (
            f"saved {_usd(saving)} ({saving / on_demand * 100:.1f}%)"
            if saving >= 0 and on_demand
            else f"LOST {_usd(-saving)} against on-demand"
        )
        observed = "" if item["usage_observed"] else " (instance counts not recorded: all assumed used)"
        lines.append(
            f"  {item['request_id']} (team {item['team']}, {item['instance_type']} in {item['region']}): "
            f"paid {_usd(item['paid_usd'])}; {item['used_instance_hours']} of "
            f"{item['reserved_instance_hours']} instance-hours used "
            f"({item['utilisation_percent']}%){observed}; "
            f"{_usd(item['usd_per_used_instance_hour'])} per used instance-hour; on demand, what ran would "
            f"have cost {_usd(on_demand)}: {verdict}"
        )
        lines.extend(fee_lines(cloud, str(item["request_id"])))
        if capacity is None:
            capacity = capacity_view(read_ledgers(cloud), now=cloud.now())
        lines.extend(sizing_lines(capacity, str(item["request_id"])))
    totals = report["totals"]
    lines.append(
        f"  total: {totals['reservations']} reservation(s), paid {_usd(totals['paid_usd'])}, "
        f"{totals['used_instance_hours']} of {totals['reserved_instance_hours']} instance-hours used, "
        f"on-demand equivalent {_usd(totals['on_demand_equivalent_used_usd'])}, "
        f"saving {_usd(totals['saving_usd'])}"
    )
    if sharing:
        lines.append(
            "  The sharing comparison above counts instance-hours one endpoint per model would have needed, "
            "not dollars saved: the reservation was sized and paid either way."
        )
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------- commands


def command_run(args: argparse.Namespace) -> int:
    """``run``: deliver the events in order, run to quiescence, print the report."""
    events = [load_event(path) for path in args.event_file]
    kinds = [event_kind(event) for event in events]
    for event, kind in zip(events, kinds, strict=True):
        if kind == "unknown" and args.function is None:
            deliver(None, event, kind, bus=None, function=None)  # type: ignore[arg-type]  # raises UsageError
    start = _parse_start(args.start) if args.start else event_time(events[0]) or DEFAULT_START
    profile = _traffic_profile(args.traffic)
    # The chart's worker imports matplotlib on another core while the cloud starts and the simulation runs
    # (it exits by itself when this process does).
    chart = ChartWorker() if profile is not None or args.report_name else None
    cloud = LocalCloud(
        args.template,
        start=start,
        seed=args.seed,
        faults=_faults(args.faults, args.seed),
        market=_market(args.market),
        parameter_overrides=_parameters(args.parameter),
        stack_name=args.stack_name,
        region=args.region,
    )
    header = (
        f"== Local cloud: stack {args.stack_name} from {args.template}, region {args.region}, "
        f"seed {args.seed}, "
        f"virtual start {_when(start)}"
    )
    print(header)
    for warning in cloud.stack.warnings:
        print(f"   note: {warning}")
    began = time.monotonic()
    stuck: str | None = None
    deliveries: list[dict[str, Any]] = []
    traffic_text = ""
    try:
        stall = args.stall_seconds if args.stall_seconds is not None else default_stall_seconds()
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if stall <= 0:
        raise UsageError("--stall-seconds must be positive")
    progress = ProgressLine(cloud, mode=args.progress)
    with cloud, chart or contextlib.nullcontext():
        replay = attach(cloud, profile) if profile is not None else None
        right_size: dict[str, Any] = {}
        for position, (event, kind) in enumerate(zip(events, kinds, strict=True)):
            if profile is not None and not right_size and args.function is None:
                # What the load needs, asked before buying (issue 33): the same request to POST /plans.
                right_size = ask_plan(cloud, event, kind, profile, args.caller or default_caller(cloud))
            deliveries.append(
                deliver(
                    cloud,
                    event,
                    kind,
                    bus=args.bus,
                    function=args.function,
                    plan=args.plan,
                    caller=args.caller,
                )
            )
            last = position == len(events) - 1
            try:
                if last or args.gap is None:
                    cloud.run_until_idle(stall_seconds=stall, progress=progress)
                else:
                    cloud.run(until=cloud.now() + args.gap, stall_seconds=stall, progress=progress)
            except ClockStuckError as exc:
                stuck = (
                    f"the run made no progress for {stall:.0f} s of real time (the hang detector, "
                    f"--stall-seconds or {STALL_SECONDS_ENV}; "
                    f"make demo DEMO_ARGS='--stall-seconds N'):\n{exc}"
                )
                break
            finally:
                progress.done()
        view = capacity_view(read_ledgers(cloud), now=cloud.now())
        traffic_text = _reports(cloud, args, view, replay, profile, right_size, chart)
        text, failed = report(
            cloud, deliveries, verbose=args.verbose, stuck=stuck, after_timeline=traffic_text, capacity=view
        )
    print(text)
    print(f"   ({time.monotonic() - began:.1f} s of wall time)")
    return EXIT_FAILED if failed and not args.allow_failed else EXIT_OK


def _reports(  # noqa: PLR0917 - what run holds at the end, handed on as is
    cloud: LocalCloud,
    args: argparse.Namespace,
    view: dict[str, Any],
    replay: TrafficReplay | None,
    profile: TrafficProfile | None,
    right_size: dict[str, Any],
    chart: ChartWorker | None,
) -> str:
    """The sections printed after the timeline: the traffic report (``--traffic``) or reserved capacity
    against what ran alone (``--report-name``), each written to ``--reports-dir`` too."""
    if replay is not None and profile is not None:
        text = traffic_report(
            cloud, replay, profile, args.reports_dir, chart=chart, name=args.report_name, capacity=view
        )
        return text + predicted_section(right_size, replay.result)
    if args.report_name:
        return capacity_only_report(view, args.reports_dir, args.report_name, chart=chart)
    return ""


class ProgressLine:
    """The progress line ``run`` prints on stderr: virtual time, invocations, real seconds, and how long
    nothing has moved against the hang detector's limit.

    ``mode``: ``auto`` (rewritten in place on a terminal; else a line every 10 s), ``always`` (a line
    every 10 s), ``never``.
    """

    def __init__(self, cloud: LocalCloud, *, mode: str = "auto", stream: Any = None) -> None:
        self.cloud = cloud
        self.stream = stream if stream is not None else sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.in_place = mode == "auto" and tty
        self.enabled = mode != "never"
        self.every = 0.0 if self.in_place else 10.0
        self._last = 0.0
        self._shown = False

    def __call__(self, progress: RunProgress) -> None:
        if not self.enabled or progress.wall_seconds - self._last < self.every:
            return
        self._last = progress.wall_seconds
        line = (
            f"   .. virtual {_when(progress.now)}, {len(self.cloud.lambdas.records)} invocation(s), "
            f"{progress.wall_seconds:.0f} s"
        )
        if progress.still_seconds >= 5:
            line += f"; no progress for {progress.still_seconds:.0f} s (limit {progress.stall_seconds:.0f} s)"
        if self.in_place:
            self.stream.write("\r" + line.ljust(100)[:100])
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self._shown = True

    def done(self) -> None:
        """End the in-place line (before the report is printed)."""
        if self._shown and self.in_place:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
        self._shown = False
        self._last = 0.0


def _traffic_profile(path: Path | None) -> TrafficProfile | None:
    if path is None:
        return None
    try:
        return TrafficProfile.load(path)
    except ValueError as exc:
        raise UsageError(f"--traffic: {exc}") from exc


def traffic_report(
    cloud: LocalCloud,
    replay: TrafficReplay,
    profile: TrafficProfile,
    directory: Path,
    *,
    chart: ChartWorker | None = None,
    name: str | None = None,
    capacity: dict[str, Any] | None = None,
) -> str:
    """Build the traffic report (with ``capacity``: reserved against what ran), write its JSON and PNG into
    ``directory`` as ``<name>`` (default the reservation's id; the PNG drawn by ``chart`` when given), and
    return the text to print (an explanation instead when the replay never found the reservation's
    inference components)."""
    if replay.result.deployment is None:
        return (
            "\n== Traffic\n  no inference component of the profile's models came into service: "
            "nothing replayed"
        )
    replay.close()  # a run that ended before the release: sample once more and read the activities
    try:
        built = build_report(replay.result, profile, ledger=ledger_scale_items(cloud, replay.result))
    except ValueError as exc:
        return f"\n== Traffic\n  no report: {exc}"
    if capacity is not None:
        built["capacity"] = capacity
    if name:
        built["name"] = name
    paths = write_report(built, directory, chart=chart, name=name)
    text = "\n" + format_report(built, paths)
    if capacity is not None and capacity["reservations"]:
        text += "\n\n" + format_capacity(capacity)
    return text


def capacity_only_report(
    view: dict[str, Any], directory: Path, name: str, *, chart: ChartWorker | None = None
) -> str:
    """For a run without traffic (``make demo-ec2``): write ``<directory>/<name>.json`` and ``.png`` with
    reserved capacity against what ran, and return the text to print (nothing was bought: no files)."""
    if not view["reservations"]:
        if chart is not None:
            chart.close()
        return "\n== Reserved against what ran\n  nothing was bought: no chart"
    report = {"name": name, "reservation": view["reservations"][0]["request_id"], "capacity": view}
    paths = write_report(report, directory, chart=chart, name=name)
    return f"\n{format_capacity(view)}\n\n  Report: {paths[0]}\n  Chart:  {paths[1]}"


def command_serve(args: argparse.Namespace) -> int:
    """``serve``: the template's API on 127.0.0.1 with the clock running at ``--speed``; Ctrl-C stops."""
    if args.speed <= 0:
        raise UsageError("--speed must be positive")
    start = _parse_start(args.start) if args.start else SAMPLE_EPOCH
    setup = [load_event(path) for path in args.setup]
    cloud = LocalCloud(
        args.template,
        start=start,
        seed=args.seed,
        faults=_faults(args.faults, args.seed),
        market=_market(args.market),
        parameter_overrides=_parameters(args.parameter),
        stack_name=args.stack_name,
        region=args.region,
    )
    if not cloud.stack.api_routes:
        raise UsageError(f"{args.template}: no Api events to serve")
    verifier = None
    if args.sigv4:
        try:
            # The client signs with its own (real) clock, not the simulation's.
            verifier = SigV4Verifier.from_local_values(
                cloud.stack.local_values,
                region=args.region,
                now=lambda: escape_hatch.datetime.datetime.now(UTC),
            )
        except ValueError as exc:
            raise UsageError(f"--sigv4: {exc}") from exc
    with cloud:
        for event in setup:
            deliver(cloud, event, event_kind(event), bus=None, function=None)
        cloud.run(until=cloud.now())
        secret = (cloud.stack.local_values.get("SecretsManager") or {}).get("SlackSigningSecret")
        slack_clock = (
            SlackClock(
                str(secret), virtual_now=cloud.now, real_now=lambda: escape_hatch.datetime.datetime.now(UTC)
            )
            if secret
            else None
        )
        # The driver moves Slack's signature onto virtual time once the clock caught up with the arrival.
        driver = RealTimeDriver(cloud, speed=args.speed, slack_clock=slack_clock, hold=True)
        server = LocalApiServer(
            port=args.port,
            routes=cloud.stack.api_routes,
            serve=driver.submit,
            account_id=cloud.account_id,
            now=cloud.now,
            log=(lambda line: print(f"   http {line}", flush=True)) if args.verbose else None,
            verifier=verifier,
            unsigned_caller=_unsigned_caller(cloud.stack.local_values) if verifier is None else None,
            on_request=driver.wake,
        )
        cloud.clock.ignore_thread(server.start())
        print(
            f"== Serving {args.template} on http://127.0.0.1:{args.port} "
            f"(virtual time x{args.speed:g} while idle; requests are served in virtual time); Ctrl-C stops"
        )
        print(
            f"   virtual time starts at {_when(start)} with the first request (--start); answers carry it in "
            "their Date header, and capacity --endpoint reads +2d from it"
        )
        print(describe_routes(cloud.stack.api_routes, args.port, sigv4=verifier is not None), flush=True)
        printer = TimelinePrinter(cloud)
        try:
            driver.serve_forever(threading.Event(), after_step=printer.print_new)
        except KeyboardInterrupt:
            print("\n== Stopped", flush=True)
        finally:
            server.stop()
    return EXIT_OK


class TimelinePrinter:
    """Prints the timeline lines not printed yet (``serve``): the entries recorded since the last call, and
    the execution lines computed when something ran (virtual time or the invocations moved)."""

    def __init__(self, cloud: LocalCloud, out: Any = None) -> None:
        self.cloud = cloud
        self.out = out
        self._printed = 0
        self._computed: set[tuple[datetime, str, str]] = set()
        self._mark: tuple[datetime, int] | None = None

    def print_new(self) -> None:
        """Print what the timeline learnt since the last call, in timeline order."""
        entries = self.cloud.timeline.recorded_since(self._printed)
        self._printed += len(entries)
        mark = (self.cloud.now(), len(self.cloud.lambdas.records))
        if mark != self._mark:
            self._mark = mark
            for entry in self.cloud.timeline.computed():
                key = (entry.at, entry.kind, entry.text)
                if key not in self._computed:
                    self._computed.add(key)
                    entries.append(entry)
        for entry in sorted(entries, key=lambda e: e.at.replace(microsecond=0)):
            print(entry.render(), file=self.out or sys.stdout, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    # moto's ASL interpreter logs every failed state at ERROR with its whole parse tree; the timeline
    # already says what failed, in one line.
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    try:
        if args.command == "run":
            return command_run(args)
        if args.command == "soak":
            from localcloud_soak.run import run_command as run_soak  # noqa: PLC0415 - see build_parser

            return run_soak(args)
        return command_serve(args)
    except (UsageError, TemplateError) as exc:
        print(f"localcloud: {exc}", file=sys.stderr)
        return EXIT_USAGE
