"""Shell completion of values (``capacity --install-completion``): instance types, regions, states,
platforms and strategies from the product's own tables, request ids from the API's listing.

The tables are ``catalog.json`` beside this module, exported from the layer by ``scripts/export_catalog.py``
(the CLI never imports the layer; a test fails when the file drifts). Request ids come from
``GET /reservations`` of the target the command line names (``--endpoint``, ``--stack``, the configuration
file), with a short timeout and no retries; the embedded local cloud keeps nothing between commands, so it
completes none. A completion never fails the shell: whatever goes wrong completes nothing.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import typer

CATALOG = Path(__file__).resolve().parent / "catalog.json"
QUICK_TIMEOUT_SECONDS = 2.0
"""How long a completion waits for the API (a shell waits for it)."""
LISTED = 100
"""Request ids offered: the newest page of ``GET /reservations``."""


@cache
def catalog() -> dict[str, Any]:
    """The exported tables (empty when the file is missing)."""
    try:
        loaded: dict[str, Any] = json.loads(CATALOG.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded


def _matching(values: Iterable[str], incomplete: str) -> list[str]:
    return [value for value in values if value.startswith(incomplete)]


def _root_params(ctx: typer.Context) -> Mapping[str, Any]:
    return ctx.find_root().params


def instance_types(ctx: typer.Context, incomplete: str) -> list[str]:
    """``--type``: the ``ml.*`` types of a SageMaker request, the EC2 types of ``--platform ec2`` (both when
    the platform is not given yet)."""
    types = catalog().get("instance_types") or {}
    platform = ctx.params.get("platform")
    chosen = [platform] if platform in types else ["sagemaker", "ec2"]
    return _matching([t for name in chosen for t in types.get(name, [])], incomplete)


def region(incomplete: str) -> list[str]:
    """``--region``: the regions the API knows."""
    return _matching(catalog().get("regions") or [], incomplete)


def regions(incomplete: str) -> list[str]:
    """``--regions us-east-1,us-w<TAB>``: the last region of a comma-separated list."""
    done, _, last = incomplete.rpartition(",")
    prefix = done + "," if done else ""
    chosen = set(done.split(",")) if done else set()
    return [prefix + value for value in region(last) if value not in chosen]


def states(incomplete: str) -> list[str]:
    """``--state``/``--status``/``--until``: the reservation states."""
    return _matching(catalog().get("states") or [], incomplete.upper())


def platforms(incomplete: str) -> list[str]:
    """``--platform``."""
    return _matching(catalog().get("platforms") or [], incomplete)


def strategies(incomplete: str) -> list[str]:
    """``--strategy``."""
    return _matching(catalog().get("strategies") or [], incomplete)


def outputs(incomplete: str) -> list[str]:
    """``--output``."""
    from capacity_cli.config import OUTPUTS  # noqa: PLC0415

    return _matching(OUTPUTS, incomplete)


def request_ids(ctx: typer.Context, incomplete: str) -> list[str]:
    """A reservation's id: the newest ``GET /reservations`` page of the target named on the command line
    (none for the embedded local cloud). Never raises."""
    try:
        return _matching(_listed_ids(_root_params(ctx)), incomplete)
    except Exception:  # a completion must never fail the shell
        return []


def _listed_ids(params: Mapping[str, Any]) -> list[str]:
    from capacity_cli.api import CapacityApi  # noqa: PLC0415
    from capacity_cli.config import load_config  # noqa: PLC0415
    from capacity_cli.targets import TargetOptions, kind_of, open_transport  # noqa: PLC0415

    config = load_config(params.get("config_file"))
    options = TargetOptions(
        local=bool(params.get("local")),
        endpoint=params.get("endpoint"),
        stack=params.get("stack"),
        region=params.get("region"),
        profile=params.get("profile"),
        identity=params.get("identity"),
    )
    if kind_of(options, config) == "local":
        return []  # a fresh embedded cloud holds no reservation: nothing to offer, nothing started
    with contextlib.ExitStack() as resources:
        transport = open_transport(options, config, resources, quick_timeout=QUICK_TIMEOUT_SECONDS)
        page = CapacityApi(transport).reservations(limit=LISTED)
    return [str(item["request_id"]) for item in page.get("reservations") or []]
