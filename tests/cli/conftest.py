"""Fixtures for the CLI tests: one local cloud of the application shared by the tests of a file.

The CLI is driven through its real entry point (Typer's ``CliRunner`` on ``capacity_cli.app.app``) with
``--local``; Click's ``obj`` hands it the shared cloud (:class:`capacity_cli.app.Injected`), so the
commands of a test (reserve, then watch, status, cancel) act on one cloud, as with ``make serve``.
Reservations of different tests use different request ids; nothing in this package buys
``ml.p5en.48xlarge``, so plans of that type are the same whatever ran before. Following a reservation
moves the shared clock on: tests that need no fixed dates ask for a window after the clock's now
(:func:`future_body`, ``--from +2d``); the plan snapshots, at the sample's own dates, run first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from capacity_cli.app import Injected, app
from localcloud.cloud import LocalCloud
from localcloud.http_api import ApiCaller, LocalApiServer

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ROOT / "events" / "reservation_request.json"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
"""The sample events' time: events/reservation_request.json asks for 2026-12-06 to 2026-12-13."""
REQUESTER_ARN = "arn:aws:sts::123456789012:assumed-role/MlPlatform/ml-platform"
APPROVER_ARN = "arn:aws:sts::123456789012:assumed-role/Approvers/carol"
ENV = {"COLUMNS": "150", "NO_COLOR": "1", "CAPACITY_CONFIG": str(ROOT / "tests" / "cli" / "no-config.toml")}


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    """The application's template on one local cloud per test file, started at :data:`START` (seed 7).

    Per module, not per package: ``tests/`` has no ``__init__.py``, so a "package" fixture would live on
    while the same xdist worker runs other files, which then find a local cloud running."""
    with LocalCloud(ROOT / "template.yaml", start=START, seed=7) as running:
        yield running


@dataclass
class Cli:
    """Runs ``capacity --local ...`` against the shared cloud as ``identity``."""

    cloud: LocalCloud

    def __call__(self, *args: str, input: str | None = None, identity: str = REQUESTER_ARN) -> Result:
        runner = CliRunner()
        return runner.invoke(
            app,
            ["--local", "--identity", identity, *args],
            input=input,
            env=ENV,
            obj=Injected(self.cloud),
            catch_exceptions=False,
        )


@pytest.fixture
def cli(cloud: LocalCloud) -> Cli:
    """``cli("plan", "-f", ...)`` -> the Click result (``exit_code``, ``stdout``, ``stderr``)."""
    return Cli(cloud)


@pytest.fixture(scope="module")
def endpoint(cloud: LocalCloud) -> Iterator[str]:
    """``make serve`` without ``--sigv4`` on a free port of the shared cloud: an unsigned request is its first
    caller (the requester), ``X-Localcloud-Caller`` names another (``capacity --as``)."""
    server = LocalApiServer(
        port=0,
        routes=cloud.stack.api_routes,
        serve=cloud.api_request,
        account_id=cloud.account_id,
        now=cloud.now,
        unsigned_caller=ApiCaller("LOCALREQUESTERKEY", "", REQUESTER_ARN),
    )
    cloud.clock.ignore_thread(server.start())
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stop()


def ledger(cloud: LocalCloud, request_id: str) -> list[dict[str, Any]]:
    """The reservation's ledger items, plain values, in sort-key order."""
    client = cloud.client("dynamodb")
    with cloud.dispatcher.exempt():
        items = client.query(
            TableName=cloud.stack.physical_id("LedgerTable"),
            KeyConditionExpression="request_id = :r",
            ExpressionAttributeValues={":r": {"S": request_id}},
        )["Items"]
    return [{key: _plain(value) for key, value in item.items()} for item in items]


def _plain(value: dict[str, Any]) -> Any:
    ((kind, raw),) = value.items()
    if kind == "M":
        return {k: _plain(v) for k, v in raw.items()}
    if kind == "L":
        return [_plain(v) for v in raw]
    return raw


def states(cloud: LocalCloud, request_id: str) -> list[str]:
    """The reservation's recorded states, in order."""
    return [item["state"] for item in ledger(cloud, request_id) if str(item["sk"]).startswith("STATE#")]


def request_body(**changes: Any) -> dict[str, Any]:
    """events/reservation_request.json with ``changes``."""
    body: dict[str, Any] = json.loads(REQUEST.read_text())
    body.update(changes)
    return body


def future_body(cloud: LocalCloud, **changes: Any) -> dict[str, Any]:
    """:func:`request_body` with its window moved to start two days after the cloud's clock (which earlier
    tests of the package may have moved on)."""
    start = cloud.now().replace(microsecond=0) + timedelta(days=2)
    window = {"earliest_start": _z(start), "latest_end": _z(start + timedelta(days=7))}
    return request_body(**(window | changes))


def _z(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
