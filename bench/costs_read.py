"""Benchmark 9: the DynamoDB calls of ``GET /costs`` as the ledger grows (issue 31).

A moto ledger table (as template.yaml defines it) holds 10, 1,000 and 10,000 released reservations (two
teams, three months; each with its ``REQUEST``, ``PURCHASE``, ``PURCHASED`` and ``RELEASED`` entries and its
costs rollup as the ledger's transactions leave it) and one reservation still serving. ``cost_report`` (what
the route runs) is called for one team's month and for everything, with the DynamoDB calls counted on the
client (botocore's ``before-call`` event) and the wall time taken. For contrast, the report as it was computed
before the rollup (``ledger_report``: one query per reservation) up to 100 reservations.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from bench.report import Section, ms

NOW = datetime(2026, 12, 20, tzinfo=UTC)
TEAMS = ("ml-eval", "ml-platform")
MONTHS = ("2026-10", "2026-11", "2026-12")
FINAL = {
    "paid_usd": "1990.60",
    "reserved_instance_hours": "144.00",
    "used_instance_hours": "70.82",
    "utilisation_percent": "49.2",
    "on_demand_equivalent_used_usd": "3897.75",
    "saving_usd": "1907.15",
    "usd_per_used_instance_hour": "28.11",
    "usage_observed": True,
    "as_of": "2026-12-20T00:00:00.000Z",
    "market": "reserved",
    "brought": False,
}


def _table(client: Any) -> None:
    client.create_table(
        TableName="ledger",
        KeySchema=[
            {"AttributeName": "request_id", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": n, "AttributeType": "S"} for n in ("request_id", "sk", "listing", "written_at")
        ],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": "listing",
                "KeySchema": [
                    {"AttributeName": "listing", "KeyType": "HASH"},
                    {"AttributeName": "written_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
    )


def _reservation(index: int, *, released: bool) -> tuple[str, str, str, list[dict[str, Any]]]:
    """A reservation's ledger items: ``(request id, team, month, items)``."""
    rid = f"r-{index:06d}"
    team, month = TEAMS[index % 2], MONTHS[index % 3]
    at = f"{month}-05T10:00:00.000Z"
    start = datetime.fromisoformat(f"{month}-10T00:00:00+00:00")
    body = {"team": team, "instance_type": "ml.p5.48xlarge", "instance_count": 2}
    items: list[dict[str, Any]] = [
        {"sk": "REQUEST", "request": body, "listing": "reservation", "written_at": at},
        {
            "sk": "PURCHASE",
            "training_plan_arn": f"arn:aws:sagemaker:us-east-1:123456789012:training-plan/{rid}",
            "training_plan_name": rid,
            "region": "us-east-1",
            "start_time": start.isoformat(),
            "end_time": (start + timedelta(hours=72)).isoformat(),
            "upfront_fee_usd": "1990.60",
            "instance_type": "ml.p5.48xlarge",
            "instance_count": 2,
        },
        {"sk": f"STATE#{at}#0000", "state": "PURCHASED", "at": at, "actor": "bench", "money_usd": "1990.60"},
        {"sk": f"STATE#{month}-10T01:00:00.000Z#0000", "state": "READY", "at": f"{month}-10T01:00:00.000Z"},
    ]
    if released:
        items.append(
            {
                "sk": f"STATE#{month}-12T00:00:00.000Z#0000",
                "state": "RELEASED",
                "at": f"{month}-12T00:00:00.000Z",
            }
        )
    return rid, team, month, [{"request_id": rid, "detail": {}, "actor": "bench", **i} for i in items]


def _seed(client: Any, count: int) -> None:
    from capacity import cost_rollup
    from capacity.adapters.dynamodb import serialize_item

    items: list[dict[str, Any]] = []
    totals: dict[str, dict[str, Any]] = {}
    for index in range(count + 1):
        released = index < count  # the last one still serves
        rid, team, month, own = _reservation(index, released=released)
        items += own
        change = cost_rollup.Change(rid, month, None, True, None)
        reservation = cost_rollup.Reservation(team, "ml.p5.48xlarge", "us-east-1", "reserved", False)
        pk = cost_rollup.partition(team, month)
        line, total = (
            cost_rollup.new_line(change, reservation),
            totals.get(pk) or cost_rollup.new_total(team, month),
        )
        money = cost_rollup.Change(rid, month, cost_rollup.dec("1990.60"), False, FINAL if released else None)
        line, totals[pk] = cost_rollup.apply(money, *cost_rollup.apply(change, line, total))
        items += [line, {"request_id": rid, "sk": cost_rollup.POINTER, "rollup": pk}]
    items += totals.values()
    items.append(
        {
            "request_id": "COSTS",
            "sk": "INDEX",
            "team_months": sorted([t, m] for t in TEAMS for m in MONTHS),
            "version": 1,
        }
    )
    for start in range(0, len(items), 25):
        batch = [{"PutRequest": {"Item": serialize_item(i)}} for i in items[start : start + 25]]
        client.batch_write_item(RequestItems={"ledger": batch})


def _counted(client: Any, call: Callable[[], object]) -> tuple[Counter[str], float]:
    calls: Counter[str] = Counter()

    def count(model: Any, **_: Any) -> None:
        calls[model.name] += 1

    client.meta.events.register("before-call.dynamodb", count)
    began = time.perf_counter()
    try:
        call()
    finally:
        client.meta.events.unregister("before-call.dynamodb", count)
    return calls, time.perf_counter() - began


def _calls(calls: Counter[str]) -> str:
    return f"{sum(calls.values())} (" + ", ".join(f"{n} {op}" for op, n in sorted(calls.items())) + ")"


def run(quick: bool) -> Section:
    """Count the calls (see the module docstring)."""
    import boto3
    from capacity.ledger import Ledger
    from capacity.logic.governance import costs
    from capacity.ports import Ports
    from moto import mock_aws

    sizes = (10, 100, 1000) if quick else (10, 1000, 10_000)
    rows = [["reservations", "GET /costs asks", "DynamoDB calls", "ms", "before the rollup: calls", "ms"]]
    for size in sizes:
        with mock_aws():
            client = boto3.client("dynamodb", region_name="us-east-1")
            _table(client)
            _seed(client, size)
            ports = cast(
                "Ports",
                SimpleNamespace(ledger=Ledger("ledger", client, clock=lambda: NOW), clock=lambda: NOW),
            )
            for label, query in (
                ("team=ml-eval&month=2026-11", {"team": "ml-eval", "month": "2026-11"}),
                ("(everything)", {}),
            ):
                calls, seconds = _counted(client, lambda q=query, p=ports: costs.cost_report(p, **q))  # type: ignore[misc]
                before, before_s = ["-", "-"]
                if size <= 100:
                    old, old_s = _counted(client, lambda q=query, p=ports: costs.ledger_report(p, **q))  # type: ignore[misc]
                    before, before_s = _calls(old), ms(old_s)
                rows.append([f"{size:,} + 1 serving", label, _calls(calls), ms(seconds), before, before_s])
    return Section(
        title="9. GET /costs: DynamoDB calls as the ledger grows",
        method=__doc__.split("\n\n", 1)[1].strip() if __doc__ else "",
        table=rows,
        notes=[
            "The calls do not grow with the reservations: one item per team-month asked (the index and one "
            "BatchGetItem for everything), one Query of the first page of reservations per team-month read, "
            "and one Query per reservation still serving (its hours are read as they stand). With 10 "
            "reservations the first page of 100 spans all six team-months (six Queries); with more, the "
            "first team-month fills it.",
            "The milliseconds are moto's: it filters a Query's partition item by item and lists the index by "
            "scanning, so its time grows with the table; DynamoDB reads a page in time independent of it.",
        ],
    )
