"""The traffic report: copies and instances over a reservation, the scale events and why, and the
instance-hours of packing the models on one endpoint against one dedicated endpoint per model.

Over 400 lines: one report built and drawn from one replay; its sections share one hour grid.

Built from what a :class:`~localcloud.traffic.TrafficReplay` observed (samples, Application Auto Scaling
activities) and from the ``SCALE#`` items ``scale_components`` writes in the ledger (see
``docs/scaling-notes.md``). Written as ``reports/<reservation>.json`` and drawn as
``reports/<reservation>.png`` (matplotlib, Agg backend: no display needed).

The comparison (seed 004: "the models stay idle half of the time on their own dedicated instances"):

- **shared endpoint** = the integral of the endpoint's instance count over the traffic window, i.e.
  ``sum_i instances(t_i) x (t_{i+1} - t_i)`` over the samples (hours; each sample holds until the next);
- **dedicated endpoints** = ``sum_m ceil(peak_copies_m / copies_per_instance_m) x window_hours``: each model
  alone on its own endpoint, holding the instances its peak copy count needs for the whole window, where
  ``copies_per_instance_m = floor(min(accelerators / a_m, vCPUs / c_m, memory / mem_m))`` over the resources
  a copy of ``m`` requires (its ``ComputeResourceRequirements`` against the instance type);
- **saving** = ``1 - shared / dedicated``.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from localcloud.chart import ChartWorker, draw_chart
from localcloud.chart import parse_utc as _parse
from localcloud.emulator.instances import spec_for
from localcloud.traffic import Sample, TrafficProfile, TrafficResult

FORMULA = (
    "shared = sum over samples of instances x hours until the next sample; "
    "dedicated = sum over models of ceil(peak copies / copies per instance) x window hours, "
    "copies per instance = floor(min(instance accelerators / copy accelerators, instance vCPUs / copy CPU "
    "cores, instance memory / copy memory)); saving = 1 - shared / dedicated"
)
SCALE_PREFIX = "SCALE#"
_TO_COUNT = re.compile(r"to (\d+)")


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instance_hours(points: Sequence[tuple[datetime, int]]) -> float:
    """The integral of a step function: each ``(at, instances)`` holds until the next point's ``at``; the
    last point only closes the series. Hours (instance-hours), 0.0 for fewer than two points.

    Raises:
        ValueError: the points are not in time order.
    """
    total = 0.0
    for (at, count), (following, _next) in itertools.pairwise(points):
        if following < at:
            raise ValueError(f"samples out of order: {_iso(following)} after {_iso(at)}")
        total += count * (following - at).total_seconds() / 3600
    return total


def copies_per_instance(instance_type: str, requirements: tuple[float, float, float]) -> int:
    """How many copies needing ``requirements`` (accelerators, CPU cores, memory MiB) fit on one instance of
    ``instance_type`` (the emulator's hardware table; see ``docs/localcloud-emulator.md``).

    Raises:
        ValueError: unknown instance type, or a copy that needs nothing or does not fit at all.
    """
    spec = spec_for(instance_type)
    if spec is None:
        raise ValueError(f"unknown instance type {instance_type!r}")
    accelerators, cpus, memory = requirements
    limits = [
        have / need
        for have, need in (
            (spec.accelerators, accelerators),
            (spec.vcpus, cpus),
            (spec.memory_gib * 1024, memory),
        )
        if need > 0
    ]
    if not limits:
        raise ValueError("a copy must require some accelerators, CPU cores or memory")
    fit = math.floor(min(limits) + 1e-9)
    if fit < 1:
        raise ValueError(f"one copy needing {requirements} does not fit on one {instance_type}")
    return fit


def compare(
    samples: Sequence[Sample], instance_type: str, requirements: dict[str, tuple[float, float, float]]
) -> dict[str, Any]:
    """Instance-hours of the shared endpoint against one dedicated endpoint per model (module docstring).

    Returns:
        ``{"formula", "window_hours", "shared_endpoint", "dedicated_endpoints", "saving_instance_hours",
        "saving_percent", "models": {model: {"peak_copies", "copies_per_instance", "instances",
        "instance_hours"}}}`` (instance-hours rounded to 4 decimals, the percentage to 1).
    """
    if len(samples) < 2:
        raise ValueError("the comparison needs at least two samples (the start and the end of the window)")
    window = (samples[-1].at - samples[0].at).total_seconds() / 3600
    shared = instance_hours([(sample.at, sample.instances) for sample in samples])
    models: dict[str, Any] = {}
    dedicated = 0.0
    for model, needs in requirements.items():
        peak = max(sample.copies.get(model, 0) for sample in samples)
        per_instance = copies_per_instance(instance_type, needs)
        instances = math.ceil(peak / per_instance)
        hours = instances * window
        dedicated += hours
        models[model] = {
            "peak_copies": peak,
            "copies_per_instance": per_instance,
            "instances": instances,
            "instance_hours": round(hours, 4),
        }
    saving = dedicated - shared
    return {
        "formula": FORMULA,
        "window_hours": round(window, 4),
        "shared_endpoint": round(shared, 4),
        "dedicated_endpoints": round(dedicated, 4),
        "saving_instance_hours": round(saving, 4),
        "saving_percent": round(100 * saving / dedicated, 1) if dedicated else 0.0,
        "models": models,
    }


def _activity_reason(cause: str) -> str:
    """Why Application Auto Scaling acted, in words (the raw ``Cause`` stays in the event's ``cause``)."""
    if "AlarmHigh" in cause:
        return "target tracking: invocations per copy above the target for 3 minutes (AlarmHigh)"
    if "AlarmLow" in cause:
        return "target tracking: invocations per copy below 90% of the target for 15 minutes (AlarmLow)"
    return cause


def scale_events(result: TrafficResult, ledger: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every change of a model's copy count with its reason, oldest first: Application Auto Scaling
    activities (``source`` ``application-auto-scaling``; ``from_copies`` is the count the previous event
    or the first sample left) and the ledger's ``SCALE#`` items (``source`` ``ledger``, as written by
    ``scale_components``)."""
    if result.deployment is None:
        return []
    model_of = {
        f"inference-component/{name}": model
        for deployment in result.deployments or [result.deployment]
        for model, name in deployment.components.items()
    }
    events: list[dict[str, Any]] = []
    for activity in result.activities:
        model = model_of.get(str(activity.get("ResourceId")))
        found = _TO_COUNT.search(str(activity.get("Description", "")))
        if model is None or found is None:
            continue
        start = activity["StartTime"]
        at = start if isinstance(start, datetime) else _parse(str(start))
        events.append(
            {
                "at": _iso(at),
                "model": model,
                "source": "application-auto-scaling",
                "action": "scale" if activity.get("StatusCode") == "Successful" else "scale-failed",
                "from_copies": None,
                "to_copies": int(found.group(1)),
                "reason": _activity_reason(str(activity.get("Cause", ""))),
                "cause": str(activity.get("Cause", "")),
            }
        )
    for item in ledger:
        events.append(
            {
                "at": _iso(_parse(str(item.get("at") or item["sk"].split("#")[1]))),
                "model": str(item.get("model") or ""),
                "source": "ledger",
                "action": str(item.get("action", "")),
                "from_copies": _int_or_none(item.get("from_copies")),
                "to_copies": _int_or_none(item.get("to_copies")),
                "reason": str(item.get("reason", "")),
            }
            | ({"failed_requests": int(item["failed_requests"])} if "failed_requests" in item else {})
        )
    events.sort(key=lambda event: (event["at"], event["model"], event["source"]))
    first = result.samples[0].desired if result.samples else {}
    current = dict(first)
    for event in events:
        if event["source"] == "application-auto-scaling" and event["action"] == "scale":
            event["from_copies"] = current.get(event["model"])
        if event["to_copies"] is not None and event["action"] != "scale-failed":
            current[event["model"]] = event["to_copies"]
    return events


def _int_or_none(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def build_report(
    result: TrafficResult, profile: TrafficProfile, *, ledger: Sequence[dict[str, Any]] = ()
) -> dict[str, Any]:
    """The report as a JSON-safe dict (see ``docs/localcloud.md``, "Traffic and reports").

    Raises:
        ValueError: the replay found no deployment or took fewer than two samples.
    """
    deployment = result.deployment
    if deployment is None or result.started is None:
        raise ValueError("the traffic replay found no inference components: nothing to report")
    samples = result.samples
    models = list(deployment.components)
    traffic: dict[str, Any] = {}
    for model in models:
        totals = result.totals(model)
        traffic[model] = {
            "inference_component": deployment.components[model],
            "sent": totals.sent,
            "served": totals.served,
            "failed_no_capacity": totals.failed,
            "hourly": [
                {"hour": _iso(hour), "sent": count.sent, "served": count.served, "failed": count.failed}
                for (name, hour), count in sorted(result.hours.items(), key=lambda item: item[0][1])
                if name == model
            ],
        }
    return {
        "reservation": deployment.reservation,
        "endpoint": deployment.endpoint,
        "variant": deployment.variant,
        "instance_type": deployment.instance_type,
        "window": {
            "start": _iso(result.started),
            "end": _iso(result.ended or samples[-1].at),
            "ended_by_release": result.ended is not None,
        },
        "profile": {
            "description": profile.description,
            "batch_minutes": profile.batch_minutes,
            "sample_minutes": profile.sample_minutes,
        },
        "traffic": traffic,
        "other_invoke_errors": dict(result.errors),
        "series": {
            "at": [_iso(sample.at) for sample in samples],
            "instances": [sample.instances for sample in samples],
            "copies": {model: [sample.copies.get(model, 0) for sample in samples] for model in models},
            "desired_copies": {
                model: [sample.desired.get(model, 0) for sample in samples] for model in models
            },
        },
        "scale_events": scale_events(result, ledger),
        "switches": [
            {
                "at": _iso(switch.at),
                "from_reservation": switch.from_reservation,
                "to_reservation": switch.to_reservation,
                "from_endpoint": switch.from_endpoint,
                "to_endpoint": switch.to_endpoint,
                "failed": switch.failed,
            }
            for switch in result.switches
        ],
        "instance_hours": compare(samples, deployment.instance_type, deployment.requirements),
    }


def ledger_scale_items(cloud: Any, result: TrafficResult) -> list[dict[str, Any]]:
    """The ledger's ``SCALE#`` items of the replayed reservation (plain values), read from the running
    cloud's ``LedgerTable``; empty if the stack has no ledger or the reservation is unknown."""
    if result.deployment is None:
        return []
    try:
        table = cloud.stack.physical_id("LedgerTable")
    except Exception:  # a template without the ledger: no scale items to show
        return []
    from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415 - only needed here

    deserializer = TypeDeserializer()
    client = cloud.client("dynamodb")
    items: list[dict[str, Any]] = []
    with cloud.dispatcher.exempt():
        pages = client.get_paginator("query").paginate(
            TableName=table,
            KeyConditionExpression="request_id = :r AND begins_with(sk, :p)",
            ExpressionAttributeValues={
                ":r": {"S": result.deployment.reservation},
                ":p": {"S": SCALE_PREFIX},
            },
        )
        for page in pages:
            items.extend(
                {key: deserializer.deserialize(value) for key, value in item.items()}
                for item in page["Items"]
            )
    return items


def write_report(
    report: dict[str, Any], directory: Path, *, chart: ChartWorker | None = None, name: str | None = None
) -> tuple[Path, Path]:
    """Write ``<directory>/<name>.json`` and ``<directory>/<name>.png`` (``name``: the run's, e.g.
    ``demo``, so runs of one reservation id do not overwrite each other; default the reservation's id);
    returns both paths. ``chart``: a worker started earlier draws the PNG (see :mod:`localcloud.chart`),
    else this process."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name or report["reservation"])) or "reservation"
    json_path = directory / f"{stem}.json"
    png_path = directory / f"{stem}.png"
    json_path.write_text(json.dumps(report, indent=2, default=str) + "\n", encoding="utf-8")
    if chart is not None:
        chart.draw(json_path, png_path)
    else:
        draw_chart(report, png_path)
    return json_path, png_path


def format_report(
    report: dict[str, Any],
    paths: tuple[Path, Path] | None = None,
    *,
    every_hours: int = 3,
    all_events: bool = False,
) -> str:
    """The text the CLI prints: copies and instances every ``every_hours`` hours, the traffic, the scale
    events and their reasons (those of the first 24 hours unless ``all_events``), the instance-hours
    comparison, and where the JSON and PNG are."""
    series = report["series"]
    models = list(series["copies"])
    lines = [
        f"== Traffic and scaling: {report['reservation']} on {report['endpoint']} "
        f"({report['window']['start']} to {report['window']['end']})",
        f"  {report['profile']['description']}".rstrip(),
    ]
    header = ["UTC", *[f"copies {model}" for model in models], "instances"]
    rows = [header]
    last_hour: datetime | None = None
    times = [_parse(text) for text in series["at"]]
    for index, at in enumerate(times):
        bucket = at.replace(minute=0, second=0, microsecond=0)
        due = last_hour is None or (bucket - last_hour).total_seconds() >= every_hours * 3600
        if not due and index != len(times) - 1:
            continue
        if due:
            last_hour = bucket
        rows.append(
            [
                at.strftime("%m-%d %H:%M"),
                *[str(series["copies"][model][index]) for model in models],
                str(series["instances"][index]),
            ]
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines += ["  " + "  ".join(cell.rjust(widths[i]) for i, cell in enumerate(row)) for row in rows]
    lines.append("")
    for model, traffic in report["traffic"].items():
        lines.append(
            f"  {model}: {traffic['sent']} requests, {traffic['served']} served, "
            f"{traffic['failed_no_capacity']} failed for lack of capacity (cold starts)"
        )
    for switch in report.get("switches", []):
        lines.append(
            f"  {switch['at']}  moved from {switch['from_endpoint']} to {switch['to_endpoint']} (roll-over "
            f"{switch['from_reservation']} -> {switch['to_reservation']}): {switch['failed']} request(s) "
            "failed on the old endpoint before the clients read the parameter again"
        )
    events = report["scale_events"]
    # The first day of events shows the daily pattern; the JSON has them all.
    day_end = _iso(_parse(report["window"]["start"]) + timedelta(hours=24))
    shown = events if all_events else [event for event in events if event["at"] < day_end]
    more = f" (the first 24 hours: {len(shown)}; all in the JSON)" if len(shown) < len(events) else ""
    lines += ["", f"  Scale events: {len(events)}{more}"]
    for event in shown:
        if event["from_copies"] is None or event["to_copies"] is None:
            change = f"-> {event['to_copies']}" if event["to_copies"] is not None else ""
        elif event["from_copies"] == event["to_copies"]:
            change = f"(at {event['to_copies']})"
        else:
            change = f"{event['from_copies']} -> {event['to_copies']}"
        who = event["model"] or "(endpoint)"
        lines.append(f"  {event['at']}  {who}  {event['action']} {change}: {event['reason']}")
    comparison = report["instance_hours"]
    lines += [
        "",
        f"  Instance-hours over {comparison['window_hours']:.2f} h:",
        f"    shared endpoint (measured)       {comparison['shared_endpoint']:9.2f}",
    ]
    for model, item in comparison["models"].items():
        lines.append(
            f"    dedicated {model:<22} {item['instance_hours']:9.2f}  (peak {item['peak_copies']} copies, "
            f"{item['copies_per_instance']} per instance -> {item['instances']} instance(s))"
        )
    lines += [
        f"    dedicated endpoints (total)      {comparison['dedicated_endpoints']:9.2f}",
        f"    more without sharing             {comparison['saving_instance_hours']:9.2f}  "
        f"({comparison['saving_percent']:.1f}% of the dedicated total; seed 004 reports ~50% on average): "
        "instance-hours a team would have needed, not dollars saved (the reservation is paid either way)",
    ]
    if paths is not None:
        lines += ["", f"  Report: {paths[0]}", f"  Chart:  {paths[1]}"]
    return "\n".join(lines)
