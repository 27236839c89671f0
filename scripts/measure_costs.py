"""What the stack itself costs per reservation, measured on the local cloud (docs/deploy.md, "What it costs").

Runs ``make demo``'s lifecycle (events/api_post_reservation.json: 2 x ml.p5.48xlarge for 72 h, two models,
seed 004's traffic replayed) and counts what AWS bills the application for, apart from the capacity itself:
Step Functions state transitions (``GetExecutionHistory``), Lambda invocations, the application's API calls
by service (DynamoDB, EventBridge, Scheduler, CloudWatch, Secrets Manager...: every call the dispatcher saw a
function or state machine make), and the CloudWatch alarms alive while the endpoint serves. Prices are
us-east-1 list prices (:data:`PRICES`, with their units), without free tiers. The figures it prints are
quoted in docs/deploy.md; run it again after changing the workflow:

    PYTHONPATH=.:layers/capacity .venv/bin/python scripts/measure_costs.py
"""

from __future__ import annotations

import json
import math
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

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
}
GB_SECONDS_PER_INVOCATION = Decimal("0.5")
"""Billed duration is not measured locally (the virtual clock stands still while code runs): 1 s at 512 MB
per invocation is assumed, above the handlers' usual few hundred milliseconds."""


def _item_units(params: dict[str, Any], unit_bytes: int) -> int:
    size = len(json.dumps(params.get("Item") or params, default=str))
    return max(1, math.ceil(size / unit_bytes))


def measure() -> dict[str, Any]:
    """Run the lifecycle and count (see the module docstring)."""
    event = json.loads(EVENT.read_text())
    cloud = LocalCloud(ROOT / "template.yaml", start=event_time(event), seed=7)
    with cloud:
        attach(cloud, TrafficProfile.load(PROFILE))
        cloud.api_request(event)

        def state_seen(state: str) -> bool:
            table = cloud.stack.physical_id("LedgerTable")
            with cloud.dispatcher.exempt():
                items = cloud.client("dynamodb").query(
                    TableName=table,
                    KeyConditionExpression="request_id = :r",
                    ExpressionAttributeValues={":r": {"S": REQUEST_ID}},
                )["Items"]
            return any(item.get("state", {}).get("S") == state for item in items)

        cloud.run(stop_when=lambda: state_seen("READY"))
        ready_at = cloud.now()
        with cloud.dispatcher.exempt():
            alarms = sum(
                len(cloud.client("cloudwatch", region).describe_alarms()["MetricAlarms"])
                for region in REGIONS
            )
        cloud.run(stop_when=lambda: state_seen("RELEASING"))
        serving_hours = Decimal((cloud.now() - ready_at).total_seconds()) / 3600
        cloud.run_until_idle()
        if not state_seen("RELEASED"):
            raise RuntimeError("the lifecycle did not end RELEASED")
        executions = cloud.executions()
        invocations = list(cloud.lambdas.records)
        calls = [c for c in cloud.dispatcher.calls if c.caller is not None or c.service == "sfn"]
        billable_left = cloud.billable_resources()
    by_call = Counter((c.service, c.operation) for c in calls)
    wru = sum(
        _item_units(c.params, 1024)
        for c in calls
        if c.service == "dynamodb"
        and c.operation in ("PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems")
    )
    rru = sum(
        _item_units(c.response or {}, 4096)
        for c in calls
        if c.service == "dynamodb" and c.operation in ("GetItem", "Query", "Scan")
    )
    events = sum(
        len(c.params.get("Entries") or [None])
        for c in calls
        if (c.service, c.operation) == ("eventbridge", "PutEvents")
    )
    counts = {
        "transition": sum(e.transitions for e in executions),
        "lambda_request": len(invocations),
        "lambda_gb_second": GB_SECONDS_PER_INVOCATION * len(invocations),
        "api_request": 1,
        "dynamodb_wru": wru,
        "dynamodb_rru": rru,
        "custom_event": events,
        "scheduler_invocation": by_call[("scheduler", "CreateSchedule")],  # each one-time schedule fires once
        "alarm_hour": alarms * serving_hours,
        "metric_request": by_call[("cloudwatch", "GetMetricStatistics")]
        + by_call[("cloudwatch", "GetMetricData")],
        "secrets_call": by_call[("secretsmanager", "GetSecretValue")],
        "trace": len(invocations),
    }
    return {
        "counts": counts,
        "alarms": alarms,
        "serving_hours": serving_hours,
        "executions": len(executions),
        "functions": Counter(r.function.removeprefix("capacity-orchestrator-") for r in invocations),
        "calls": by_call,
        "billable_left": billable_left,
    }


def main() -> int:
    """Print the counts and their cost."""
    result = measure()
    total = Decimal(0)
    print(f"{'item':<22} {'count':>12} {'USD':>10}  price")
    for key, count in result["counts"].items():
        price, what = PRICES[key]
        usd = price * Decimal(str(count))
        total += usd
        print(f"{key:<22} {float(count):>12,.1f} {float(usd):>10.4f}  {what}")
    print(f"{'total':<22} {'':>12} {float(total):>10.4f}")
    print(
        f"\n{result['executions']} executions; {result['alarms']} alarms while serving "
        f"{float(result['serving_hours']):.1f} h; "
        f"billable resources left: {result['billable_left'] or 'none'}"
    )
    print("invocations by function:", dict(result["functions"].most_common()))
    top = {f"{s} {o}": n for (s, o), n in result["calls"].most_common(12)}
    print("the application's AWS calls (top 12):", top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
