"""Benchmark 10: keep looking (issue 31 point 4): what a day of looking costs, and how soon capacity that
appears is bought.

Cost: the demo's request looking for a day at the default pace (every 15 minutes) in a market with nothing
to sell, on the local cloud: the reserve workflow's state transitions (``*StateEntered`` of its
executions), the Lambda invocations and the DynamoDB calls (the dispatcher's records) from the POST to the
deadline's answer, divided by the looks. Priced at us-east-1 list prices: $0.025 per 1,000 Standard
transitions; Lambda $0.20 per million requests plus $0.0000166667 per GB-second, each invocation counted
as 100 ms at 512 MB (the template's default memory; the local cloud's durations are virtual, so the
billed duration is an assumption, stated here); DynamoDB on demand $1.25 per million writes and $0.25 per
million reads (each call counted as one request unit: the items are small). Searches
(``SearchTrainingPlanOfferings``) are free.

Delay: looks of 1, 10 and 30 days (every 15 minutes, 2 hours and 6 hours), capacity listed 5 h 7 min before
the deadline (off the looks' grid), as ``tests/integration/test_keep_looking.py`` asserts: the virtual
minutes from the capacity being listed to ``PURCHASED``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from bench.report import Section
from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import START, TEMPLATE, base_request, ledger_items, post_reservation, states

RID = "eval-week-49"
USD_PER_TRANSITION = Decimal("0.000025")
USD_PER_INVOCATION = Decimal("0.0000002") + Decimal("0.1") * Decimal("0.5") * Decimal("0.0000166667")
USD_PER_WRITE = Decimal("0.00000125")
USD_PER_READ = Decimal("0.00000025")
WRITES = {"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}
READS = {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
DELAYS = ((1, 15), (10, 120), (30, 360))
"""(days of looking, search_every_minutes) of the delay rows."""


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cloud(market: MarketConfig) -> LocalCloud:
    return LocalCloud(
        TEMPLATE,
        start=START,
        seed=7,
        market=market,
        parameter_overrides={"SlackChannelId": "C0BENCH", "LogLevel": "WARNING"},
    )


def _looking(days: int, every: int) -> dict[str, Any]:
    deadline = START + timedelta(days=days)
    return {
        **base_request(),
        "earliest_start": _iso(deadline + timedelta(days=1)),
        "latest_end": _iso(deadline + timedelta(days=8)),
        "search_until": _iso(deadline),
        "search_every_minutes": every,
    }


def day_of_looking() -> dict[str, Any]:
    """What one day of looking every 15 minutes (nothing found) costs: counts and USD."""
    with _cloud(MarketConfig(capacity={"*": 0})) as cloud:
        post_reservation(cloud, _looking(1, 15))
        cloud.run_until_idle()
        if states(cloud, RID)[-1] != "FAILED":
            raise RuntimeError(f"a day of looking at nothing ended {states(cloud, RID)}")
        transitions = sum(e.transitions for e in cloud.executions())
        invocations = len(cloud.lambdas.records)
        calls = [c for c in cloud.dispatcher.calls if c.service == "dynamodb"]
        writes = sum(1 for c in calls if c.operation in WRITES)
        reads = sum(1 for c in calls if c.operation in READS)
    usd = (
        USD_PER_TRANSITION * transitions
        + USD_PER_INVOCATION * invocations
        + USD_PER_WRITE * writes
        + USD_PER_READ * reads
    )
    return {
        "looks": 24 * 4 + 1,
        "transitions": transitions,
        "invocations": invocations,
        "writes": writes,
        "reads": reads,
        "usd": usd,
    }


def delay(days: int, every: int) -> tuple[float, int]:
    """(minutes from the capacity being listed to PURCHASED, executions) for a look of ``days``."""
    deadline = START + timedelta(days=days)
    appears = deadline - timedelta(hours=5, minutes=7)
    with _cloud(MarketConfig(listed_from={"*/ml.p5.48xlarge": appears})) as cloud:
        post_reservation(cloud, _looking(days, every))
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        at = next(i["at"] for i in ledger_items(cloud, RID) if i.get("state") == "PURCHASED")
        executions = len(cloud.executions())
    bought = datetime.fromisoformat(str(at).replace("Z", "+00:00"))
    return (bought - appears).total_seconds() / 60, executions


def run(quick: bool = False) -> Section:
    """Measure a day of looking and the delays (``quick``: the 1-day delay only)."""
    day = day_of_looking()
    rows = [
        ["days of looking", "search_every_minutes", "listed -> PURCHASED (min)", "goal (min)", "executions"]
    ]
    for days, every in DELAYS[:1] if quick else DELAYS:
        minutes, executions = delay(days, every)
        rows.append([str(days), str(every), f"{minutes:.1f}", f"<= {every}", str(executions)])
    per_look = day["transitions"] / day["looks"]
    return Section(
        title="10. Keep looking: cost per day, and capacity bought as it appears",
        method=str(__doc__).split("\n\n", 1)[1].replace("\n", " "),
        table=rows,
        notes=[
            f"A day of looking every 15 minutes ({day['looks']} looks, nothing found): {day['transitions']} "
            f"state transitions ({per_look:.1f} per look), {day['invocations']} Lambda invocations, "
            f"{day['writes']} DynamoDB writes and {day['reads']} reads: **${day['usd']:.4f} per day** "
            "(goal: under $0.10).",
        ],
    )
