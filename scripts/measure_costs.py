"""What the stack itself costs per reservation, measured on the local cloud (docs/deploy.md, "What it costs").

Runs ``make demo``'s lifecycle (events/api_post_reservation.json: 2 x ml.p5.48xlarge for 72 h, two models,
seed 004's traffic replayed) and counts what AWS bills the application for, apart from the capacity itself:
Step Functions state transitions (``GetExecutionHistory``), Lambda invocations, the application's API calls
by service (DynamoDB, EventBridge, Scheduler, CloudWatch, Secrets Manager...: every call the dispatcher saw a
function or state machine make), and the CloudWatch alarms alive while the endpoint serves. Prices are
us-east-1 list prices (:data:`PRICES`, with their units), without free tiers. The figures it prints are
quoted in docs/deploy.md; run it again after changing the workflow:

    make costs-measure    (PYTHONPATH=.:layers/capacity .venv/bin/python scripts/measure_costs.py)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

from moto.cloudwatch.models import CloudWatchBackend

from localcloud.cli import event_time
from localcloud.cloud import LocalCloud
from localcloud.traffic import TrafficProfile, attach

ROOT = Path(__file__).resolve().parents[1]
EVENT = ROOT / "events" / "api_post_reservation.json"
PROFILE = ROOT / "events" / "traffic_two_models.json"
REQUEST_ID = "eval-week-49"
REGIONS = ("us-east-1", "us-west-2", "us-east-2")

PRICES: dict[str, tuple[Decimal, str]] = {
    "transition": (Decimal("0.000025"), "Step Functions Standard, per state transition ($0.025 per 1,000)"),
    "lambda_request": (Decimal("0.0000002"), "Lambda, per request ($0.20 per million)"),
    "lambda_gb_second": (Decimal("0.0000133334"), "Lambda arm64, per GB-second"),
    "api_request": (Decimal("0.0000035"), "API Gateway REST, per request ($3.50 per million)"),
    "dynamodb_wru": (
        Decimal("0.000000625"),
        "DynamoDB on demand, per write request unit ($0.625 per million)",
    ),
    "dynamodb_rru": (
        Decimal("0.000000125"),
        "DynamoDB on demand, per read request unit ($0.125 per million)",
    ),
    "custom_event": (Decimal("0.000001"), "EventBridge, per custom event put ($1.00 per million)"),
    "scheduler_invocation": (
        Decimal("0.000001"),
        "EventBridge Scheduler, per invocation ($1.00 per million)",
    ),
    "alarm_hour": (
        Decimal("0.10") / 730,
        "CloudWatch standard alarm, per alarm-hour ($0.10 per alarm-month)",
    ),
    "metric_request": (
        Decimal("0.00001"),
        "CloudWatch GetMetricStatistics, per metric requested ($0.01/1,000)",
    ),
    "secrets_call": (Decimal("0.000005"), "Secrets Manager, per API call ($0.05 per 10,000)"),
    "trace": (Decimal("0.000005"), "X-Ray, per trace recorded ($5.00 per million)"),
    "log_gb": (Decimal("0.50"), "CloudWatch Logs, per GB ingested (standard class)"),
}
GB_SECONDS_PER_INVOCATION = Decimal("0.5")
"""Billed duration is not measured locally (the virtual clock stands still while code runs): 1 s at 512 MB
per invocation is assumed, above the handlers' usual few hundred milliseconds."""
PLATFORM_LOG_BYTES = 300
"""Lambda's own START, END and REPORT lines per invocation (bytes), on top of the handler's captured log."""
"""The real-time guard of the run (``make demo`` settles in well under a minute on an idle machine)."""

DYNAMODB_WRITES = ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem")
DYNAMODB_READS = ("GetItem", "Query", "Scan", "BatchGetItem")


def _units(payload: Any, unit_bytes: int) -> int:
    """Request units of one call: its items' JSON size in ``unit_bytes`` units, at least 1 (an estimate)."""
    size = len(json.dumps(payload, default=str)) if payload else 0
    return max(1, math.ceil(size / unit_bytes))


@dataclass
class AlarmLog:
    """When each CloudWatch alarm was created and deleted (virtual UTC), wherever it was put: by the
    application (``PutMetricAlarm``) or by Application Auto Scaling's target tracking in the emulator.
    Wraps moto's ``CloudWatchBackend`` while :meth:`watching`; alarm-hours are what CloudWatch bills."""

    now: Callable[[], datetime]
    created: dict[tuple[str, str], datetime] = field(default_factory=dict)
    deleted: dict[tuple[str, str], datetime] = field(default_factory=dict)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """Record alarms put and deleted in the block."""
        put, delete = CloudWatchBackend.put_metric_alarm, CloudWatchBackend.delete_alarms
        log = self

        def put_alarm(backend: CloudWatchBackend, *args: Any, **kwargs: Any) -> Any:
            alarm = put(backend, *args, **kwargs)
            log.created.setdefault((backend.region_name, alarm.name), log.now())
            return alarm

        def delete_alarms(backend: CloudWatchBackend, alarm_names: list[str]) -> None:
            delete(backend, alarm_names)
            for name in alarm_names:
                log.deleted.setdefault((backend.region_name, name), log.now())

        with (
            mock.patch.object(CloudWatchBackend, "put_metric_alarm", put_alarm),
            mock.patch.object(CloudWatchBackend, "delete_alarms", delete_alarms),
        ):
            yield

    def hours(self, end: datetime) -> Decimal:
        """Alarm-hours from each alarm's creation to its deletion (or ``end``)."""
        seconds = sum(
            (self.deleted.get(key, end) - created).total_seconds() for key, created in self.created.items()
        )
        return Decimal(str(seconds)) / 3600


def _ledger_times(cloud: LocalCloud) -> dict[str, datetime]:
    """When the request first reached each state (the ledger's ``STATE#`` items' ``at``)."""
    with cloud.dispatcher.exempt():
        items = cloud.client("dynamodb").query(
            TableName=cloud.stack.physical_id("LedgerTable"),
            KeyConditionExpression="request_id = :r",
            ExpressionAttributeValues={":r": {"S": REQUEST_ID}},
        )["Items"]
    times: dict[str, datetime] = {}
    for item in items:
        state, at = item.get("state", {}).get("S"), item.get("at", {}).get("S")
        if state and at:
            times.setdefault(state, datetime.fromisoformat(at))
    return times


def measure() -> dict[str, Any]:
    """Run the lifecycle (one ``run_until_idle``, as ``make demo``) and count (see the module docstring).

    Raises:
        RuntimeError: the lifecycle did not end ``RELEASED``.
        ClockStuckError: no progress for the stall limit (LOCALCLOUD_STALL_SECONDS; the run is hung).
    """
    event = json.loads(EVENT.read_text())
    cloud = LocalCloud(ROOT / "template.yaml", start=event_time(event), seed=7)
    with cloud:
        attach(cloud, TrafficProfile.load(PROFILE))
        for operation in DYNAMODB_READS:
            # A listener makes the dispatcher parse the response: read units are counted from its items.
            cloud.dispatcher.on("dynamodb", operation, lambda record: None)
        alarms = AlarmLog(cloud.now)
        with alarms.watching():
            cloud.api_request(event)
            cloud.run_until_idle()
        end = cloud.now()
        times = _ledger_times(cloud)
        if "RELEASED" not in times:
            raise RuntimeError(f"the lifecycle did not end RELEASED (states: {sorted(times)})")
        executions = cloud.executions()
        invocations = list(cloud.lambdas.records)
        calls = [c for c in cloud.dispatcher.calls if c.caller is not None or c.service == "sfn"]
        billable_left = cloud.billable_resources()
    by_call = Counter((c.service, c.operation) for c in calls)
    dynamodb = [c for c in calls if c.service == "dynamodb"]
    writes = [c for c in dynamodb if c.operation in DYNAMODB_WRITES]
    wru = sum(_units(c.params, 1024) * (2 if c.operation == "TransactWriteItems" else 1) for c in writes)
    rru = sum(
        _units((c.response or {}).get("Item") or (c.response or {}).get("Items"), 4096)
        for c in dynamodb
        if c.operation in DYNAMODB_READS
    )
    events = sum(
        len(c.params.get("Entries") or [None])
        for c in calls
        if (c.service, c.operation) == ("eventbridge", "PutEvents")
    )
    log_bytes = sum(len(r.log.encode()) + PLATFORM_LOG_BYTES for r in invocations)
    counts = {
        "transition": sum(e.transitions for e in executions),
        "lambda_request": len(invocations),
        "lambda_gb_second": GB_SECONDS_PER_INVOCATION * len(invocations),
        "api_request": 1,
        "dynamodb_wru": wru,
        "dynamodb_rru": rru,
        "custom_event": events,
        "scheduler_invocation": by_call[("scheduler", "CreateSchedule")],  # each one-time schedule fires once
        "alarm_hour": alarms.hours(end),
        "metric_request": by_call[("cloudwatch", "GetMetricStatistics")]
        + by_call[("cloudwatch", "GetMetricData")],
        "secrets_call": by_call[("secrets-manager", "GetSecretValue")],
        "trace": len(invocations),
        "log_gb": Decimal(log_bytes) / 10**9,
    }
    serving = (times.get("RELEASING", end) - times["READY"]) if "READY" in times else timedelta(0)
    return {
        "counts": counts,
        "alarms": len(alarms.created),
        "serving_hours": Decimal(str(serving.total_seconds())) / 3600,
        "executions": len(executions),
        "functions": Counter(r.function.removeprefix("capacity-orchestrator-") for r in invocations),
        "calls": by_call,
        "billable_left": billable_left,
    }


def main(argv: list[str] | None = None) -> int:
    """Print the counts and their cost."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.parse_args(argv)
    began = time.monotonic()
    result = measure()
    total = Decimal(0)
    print(f"{'item':<22} {'count':>12} {'USD':>10}  price")
    for key, count in result["counts"].items():
        price, what = PRICES[key]
        usd = price * Decimal(str(count))
        total += usd
        print(f"{key:<22} {float(count):>12,.6g} {float(usd):>10.4f}  {what}")
    print(f"{'total':<22} {'':>12} {float(total):>10.4f}")
    print(
        f"\n{result['executions']} executions; {result['alarms']} alarms put; "
        f"{float(result['serving_hours']):.1f} h served; "
        f"billable resources left: {result['billable_left'] or 'none'}"
    )
    print("invocations by function:", dict(result["functions"].most_common()))
    top = {f"{s} {o}": n for (s, o), n in result["calls"].most_common(12)}
    print("the application's AWS calls (top 12):", top)
    print(f"({time.monotonic() - began:.1f} s of wall time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
