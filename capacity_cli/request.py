"""The request body of ``plan`` and ``reserve``: a file (``-f request.yaml|json``), flags, or both.

The body is exactly ``POST /reservations``' (docs/api.md, "The reservation request"); the API validates it.
Flags set or override single fields; the few conveniences are only about writing times and durations:

- ``--duration 3d`` / ``72h`` -> ``duration_hours`` 72;
- ``--from`` ISO-8601 UTC (``2026-12-10``, ``2026-12-10T11:30Z``), ``now``, or ``+7d`` / ``+12h`` from the
  target's clock (the virtual one of the embedded local cloud) -> ``earliest_start``;
- ``--until`` the same, ``+N`` counting from the start -> ``latest_end``;
- ``--search-until`` the same as ``--from`` (``+3d``: three days from now) -> ``search_until`` (keep looking
  until then when nothing fits now), ``--search-every 90m`` / ``2h`` / ``90`` -> ``search_every_minutes``;
- ``--serve-until`` the same as ``--from`` -> ``serve_until`` (keep the models served until then, over more
  than one reservation if need be), ``--rollover-lead 36h`` / ``2d`` -> ``rollover_lead_hours`` (only with
  ``--serve-until``);
- defaults for what neither the file nor the flags give: ``earliest_start`` now, ``latest_end`` start +
  duration + 1 day (as Slack's ``/gpu reserve``), ``regions`` the target's region, ``requester`` the
  configured ``requester`` (else the caller);
- ``--model NAME`` (repeatable): an existing SageMaker model served as one inference component
  (``{"name": NAME, "model_name": NAME}``; per-copy needs with ``--accelerators``, ``--cpus``,
  ``--memory``, copies with ``--copies MIN:INITIAL:MAX``). Models with images: write them in the file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from capacity_cli.api import CliError


def load_file(path: str) -> Any:
    """A JSON or YAML document from ``path`` (``-``: standard input, JSON or YAML).

    Raises:
        CliError: unreadable, or neither JSON nor YAML (the message names the file and the problem).
    """
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror or exc}") from exc
    yaml_file = path.lower().endswith((".yaml", ".yml"))
    if not yaml_file:
        try:
            return json.loads(text)
        except ValueError as exc:
            if path != "-":
                raise CliError(f"{path}: not JSON: {exc}") from exc
    try:
        import yaml  # noqa: PLC0415 - only for YAML input
    except ImportError as exc:
        raise CliError(f"{path}: reading YAML needs PyYAML (pip install PyYAML), or give JSON") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not YAML: {exc}") from exc


def parse_duration(text: str, option: str = "--duration") -> int:
    """``3d`` -> 72, ``72h`` -> 72, ``72`` -> 72 (hours); ``option`` names the flag in the error.

    Raises:
        CliError: not a whole number of days or hours.
    """
    value = text.strip().lower()
    unit = 24 if value.endswith("d") else 1
    number = value[:-1] if value[-1:] in ("d", "h") else value
    if not number.isdigit():
        raise CliError(f"{option} {text!r}: write whole days or hours, e.g. 3d or 72h")
    return int(number) * unit


def parse_minutes(text: str) -> int:
    """``90`` or ``90m`` -> 90, ``2h`` -> 120 (minutes).

    Raises:
        CliError: not a whole number of minutes or hours.
    """
    value = text.strip().lower()
    unit = 60 if value.endswith("h") else 1
    number = value[:-1] if value[-1:] in ("m", "h") else value
    if not number.isdigit():
        raise CliError(f"--search-every {text!r}: write whole minutes or hours, e.g. 90m or 2h")
    return int(number) * unit


def parse_time(text: str, *, now: datetime, base: datetime | None = None) -> datetime:
    """An instant from ``--from``/``--until`` (see the module docstring).

    Args:
        now: the target's clock; ``base``: what ``+N`` counts from (default ``now``).

    Raises:
        CliError: not a time the CLI understands (naive times are UTC: ``2026-12-10`` is 00:00 UTC).
    """
    value = text.strip()
    if value.lower() == "now":
        return now.replace(microsecond=0)
    if value.startswith("+"):
        return (base or now).replace(microsecond=0) + timedelta(hours=parse_duration(value[1:]))
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise CliError(
            f"{text!r}: write an ISO-8601 UTC time (2026-12-10, 2026-12-10T11:30Z), now, or +7d/+12h"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def iso_z(moment: datetime) -> str:
    """``2026-12-10T11:30:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class RequestFlags:
    """The request flags of ``plan`` and ``reserve`` (None: not given)."""

    request_id: str | None = None
    requester: str | None = None
    instance_type: str | None = None
    count: int | None = None
    duration: str | None = None
    start: str | None = None
    end: str | None = None
    regions: str | None = None
    max_fee: str | None = None
    approval_above: str | None = None
    platform: str | None = None
    strategy: str | None = None
    launch_template: str | None = None
    models: list[str] = field(default_factory=list)
    accelerators: int | None = None
    cpus: float | None = None
    memory: int | None = None
    copies: str | None = None
    search_until: str | None = None
    search_every: str | None = None
    serve_until: str | None = None
    rollover_lead: str | None = None


def build_request(
    document: Any,
    flags: RequestFlags,
    *,
    now: datetime,
    default_region: str,
    default_requester: str,
) -> dict[str, Any]:
    """The body to send: ``document`` (from ``-f``; may be None) with the flags applied.

    Raises:
        CliError: the file is not a JSON object, or a flag's value cannot be read (the API checks the rest).
    """
    if document is None:
        body: dict[str, Any] = {}
    elif isinstance(document, Mapping):
        body = dict(document)
    else:
        kind = type(document).__name__
        raise CliError(f"the request must be a JSON/YAML object (POST /reservations' body), not {kind}")
    simple = {
        "request_id": flags.request_id,
        "requester": flags.requester,
        "instance_type": flags.instance_type,
        "instance_count": flags.count,
        "platform": flags.platform,
        "strategy": flags.strategy,
        "max_upfront_fee_usd": flags.max_fee,
        "approval_above_usd": flags.approval_above,
    }
    body |= {key: value for key, value in simple.items() if value is not None}
    if flags.duration is not None:
        body["duration_hours"] = parse_duration(flags.duration)
    if flags.regions is not None:
        body["regions"] = [region.strip() for region in flags.regions.split(",") if region.strip()]
    if flags.launch_template is not None:
        key = "id" if flags.launch_template.startswith("lt-") else "name"
        body["launch_template"] = {key: flags.launch_template}
    if flags.start is not None:
        body["earliest_start"] = iso_z(parse_time(flags.start, now=now))
    elif "earliest_start" not in body:
        body["earliest_start"] = iso_z(now.replace(microsecond=0))
    start = _instant(body.get("earliest_start"))
    hours = body.get("duration_hours")
    if flags.end is not None:
        body["latest_end"] = iso_z(parse_time(flags.end, now=now, base=start or now))
    elif "latest_end" not in body and start is not None and isinstance(hours, int):
        body["latest_end"] = iso_z(start + timedelta(hours=hours + 24))  # a day of slack, as Slack's
    if flags.models:
        body["models"] = [_model(name, flags) for name in flags.models]
    body |= _keep_looking(flags, now) | _keep_serving(flags, now)
    body.setdefault("requester", default_requester)
    body.setdefault("regions", [default_region])
    return body


def _keep_looking(flags: RequestFlags, now: datetime) -> dict[str, Any]:
    """``search_until`` and ``search_every_minutes`` from ``--search-until`` and ``--search-every``."""
    fields: dict[str, Any] = {}
    if flags.search_until is not None:
        fields["search_until"] = iso_z(parse_time(flags.search_until, now=now))
    if flags.search_every is not None:
        fields["search_every_minutes"] = parse_minutes(flags.search_every)
    return fields


def _keep_serving(flags: RequestFlags, now: datetime) -> dict[str, Any]:
    """``serve_until`` and ``rollover_lead_hours`` from ``--serve-until`` and ``--rollover-lead``.

    Raises:
        CliError: a value that cannot be read, or ``--rollover-lead`` without ``--serve-until``.
    """
    fields: dict[str, Any] = {}
    if flags.serve_until is not None:
        fields["serve_until"] = iso_z(parse_time(flags.serve_until, now=now))
    if flags.rollover_lead is not None:
        if flags.serve_until is None:
            raise CliError("--rollover-lead is when to act for --serve-until: give --serve-until too")
        fields["rollover_lead_hours"] = parse_duration(flags.rollover_lead, "--rollover-lead")
    return fields


KEEP_SERVING_FIELDS = ("serve_until", "rollover_lead_hours")
"""What the dry run that prices a reservation leaves out (it buys nothing, so it keeps nothing serving)."""


def _model(name: str, flags: RequestFlags) -> dict[str, Any]:
    model: dict[str, Any] = {"name": name, "model_name": name}
    if flags.accelerators is not None:
        model["accelerators"] = flags.accelerators
    if flags.cpus is not None:
        model["cpu_cores"] = flags.cpus
    if flags.memory is not None:
        model["memory_mb"] = flags.memory
    if flags.copies is not None:
        parts = flags.copies.split(":")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise CliError(f"--copies {flags.copies!r}: write MIN:INITIAL:MAX, e.g. 0:1:4")
        model["copies"] = {"min": int(parts[0]), "initial": int(parts[1]), "max": int(parts[2])}
    return model


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else None


LOAD_MODEL_FIELDS = ("model", "requests_per_minute", "requests_per_minute_per_copy")
"""What a load keeps of each model of a traffic profile (the API's ``load.models[]`` fields)."""


def load_spec(path: str, *, max_rejected_percent: float | None) -> dict[str, Any]:
    """The request's ``load`` (issue 33) from ``path``: a load as the API takes it (``models[]`` with
    ``model`` and ``requests_per_minute``: 24 rates, one per UTC hour) or a traffic profile as
    ``events/traffic_two_models.json`` gives it (the same ``models[]``, with replay settings that are
    dropped); ``max_rejected_percent`` (percent of requests refused for lack of capacity) overrides the
    file's.

    Raises:
        CliError: unreadable, or no ``models`` list (the message names the file).
    """
    document = load_file(path)
    models = document.get("models") if isinstance(document, dict) else None
    if not isinstance(models, list) or not models:
        raise CliError(f"{path}: a load needs `models`: [{{model, requests_per_minute: [24 rates]}}, ...]")
    load: dict[str, Any] = {
        "models": [
            {
                key: item[key]
                for key in ("model", "requests_per_minute", "requests_per_minute_per_copy")
                if key in item
            }
            for item in models
            if isinstance(item, dict)
        ],
    }
    if document.get("description"):
        load["description"] = str(document["description"])[:1000]
    target = (
        max_rejected_percent if max_rejected_percent is not None else document.get("max_rejected_percent")
    )
    if target is not None:
        load["max_rejected_percent"] = float(target)
    return load
