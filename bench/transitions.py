"""Benchmark 1: Step Functions state transitions of a whole lifecycle, by lead time.

Our design: the demo's request (2 x ml.p5.48xlarge, 72 h, two models) run on the local cloud with its
earliest start 1, 7 and 60 days after the request, counting the states entered by every execution
(``GetExecutionHistory``'s ``*StateEntered`` events, what Standard workflows are billed for) - the approach
of tests/integration/test_reserve_lifecycle.py. The reserve workflow waits with one ``Wait`` state until
the plan's start time, then polls with growing intervals.

Baseline (computed, not run): the same lifecycle in a design that polls every minute from the purchase
until the plan starts, each poll being three transitions (``Wait`` 60 s -> ``Task`` describe -> ``Choice``).
Its count is taken as our count plus three per minute of lead (our own few waiting states are not
subtracted: a difference of about ten transitions against thousands).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from bench.report import Section
from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import START, TEMPLATE, base_request, post_reservation, states, training_plans

LEAD_DAYS = (1, 7, 60)
POLL_TRANSITIONS = 3
"""Wait + Task + Choice per poll of the naive design."""
USD_PER_TRANSITION = Decimal("0.000025")
"""Step Functions Standard: $0.025 per 1,000 state transitions (us-east-1 list price)."""


def lifecycle(lead_days: int) -> tuple[int, float]:
    """(state transitions of every execution, minutes from the request to the plan's start) for one lead."""
    body = base_request()
    start = START + timedelta(days=lead_days)
    body.update(
        earliest_start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        latest_end=(start + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    with LocalCloud(
        TEMPLATE,
        start=START,
        seed=7,
        market=MarketConfig(max_lead=timedelta(days=90)),
        # As tests.integration.support.make_cloud, with the functions' logs quiet: only the count matters.
        parameter_overrides={"SlackChannelId": "C0BENCH", "LogLevel": "WARNING"},
    ) as cloud:
        post_reservation(cloud, body)
        cloud.run_until_idle()
        if "RELEASED" not in states(cloud, "eval-week-49"):
            raise RuntimeError(f"lead {lead_days} d: the lifecycle did not end RELEASED")
        transitions = sum(e.transitions for e in cloud.executions())
        (plan,) = training_plans(cloud)
        wait_minutes = (plan["StartTime"] - START).total_seconds() / 60
    return transitions, wait_minutes


def _usd(transitions: int) -> str:
    return f"${USD_PER_TRANSITION * transitions:,.4f}"


def run(quick: bool = False) -> Section:
    """Measure our transitions per lead time and compute the poll-every-minute baseline."""
    rows = [
        [
            "lead time",
            "plan starts after",
            "ours (measured)",
            "ours USD",
            "poll every minute (computed)",
            "baseline USD",
        ]
    ]
    ours: list[int] = []
    for lead in LEAD_DAYS:
        transitions, minutes = lifecycle(lead)
        ours.append(transitions)
        baseline = transitions + POLL_TRANSITIONS * int(minutes)
        rows.append(
            [
                f"{lead} d",
                f"{minutes / 1440:.1f} d",
                str(transitions),
                _usd(transitions),
                f"{baseline:,}",
                _usd(baseline),
            ]
        )
    spread = max(ours) - min(ours)
    return Section(
        title="1. State transitions of a whole lifecycle, by lead time",
        method=(
            "Measured on the local cloud (the demo's request, earliest start 1, 7 and 60 days after it; "
            "states entered by the reserve and release executions, as `GetExecutionHistory` counts them). "
            "The baseline is computed, not run: a design polling every minute from the purchase to the "
            f"plan's start pays {POLL_TRANSITIONS} transitions per minute (Wait, Task, Choice) on top of "
            "the same fixed part. USD at $0.025 per 1,000 transitions (Standard workflows)."
        ),
        table=rows,
        notes=[
            f"Spread of our counts across lead times: {spread} transition(s) (the waiting is one `Wait`)."
        ],
    )
