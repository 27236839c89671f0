"""Benchmark 6: ranking correctness on 1,000 random seeded markets.

Each market is a random request (instance count, duration, window, regions, budget, approval threshold,
dry run) and 0-40 random AWS-shaped ``SearchTrainingPlanOfferings`` answers spread over its regions and
the durations either side (other instance types and counts, windows that start early or end late, equal
fees and starts to force the tie-breaks, a few non-USD ones). The offerings go through the layer as in
production (``capacity.ranking.normalise_offering``, then ``capacity.planner.decide``); the choice is
compared with a brute-force optimum computed here from the raw answers and the stated rules alone:

- feasible: USD, the requested instance type, at least the requested count, exactly the requested
  duration, starting no earlier than the window opens and ending no later than it closes;
- best: lowest upfront fee, then earliest start, then the request's region order, then the offering id
  (a linear scan over every feasible offering, no sorting);
- decision: none feasible -> ``NO_OFFERING``; best above ``max_upfront_fee_usd`` -> ``REJECTED``; dry run ->
  ``DRY_RUN``; above ``approval_above_usd`` -> ``APPROVAL_REQUIRED``; else ``PURCHASE``.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity.models import ReservationRequest, parse_request
from capacity.planner import Decision, decide
from capacity.ranking import normalise_offering

from bench.report import Section
from tests.integration.support import base_request

MARKETS = 1000
SEED = 20261129
TYPES = ("ml.p5.48xlarge", "ml.p4d.24xlarge")
REGIONS = ("us-east-1", "us-west-2", "us-east-2", "eu-west-1", "ap-northeast-1")
T0 = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)


def _request(rng: random.Random, index: int) -> ReservationRequest:
    body = base_request()
    earliest = T0 + timedelta(days=rng.randint(0, 10))
    duration = 24 * rng.randint(1, 5)
    regions = rng.sample(REGIONS, rng.randint(1, len(REGIONS)))
    budget = rng.choice([2_000, 5_000, 12_000, 40_000])
    body.update(
        request_id=f"market-{index}",
        instance_type=TYPES[0],
        instance_count=rng.choice([1, 2, 4, 8]),
        earliest_start=earliest.strftime("%Y-%m-%dT%H:%M:%SZ"),
        latest_end=(earliest + timedelta(hours=duration + 24 * rng.randint(0, 4))).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
        duration_hours=duration,
        regions=regions,
        max_upfront_fee_usd=str(budget),
        approval_above_usd=rng.choice([None, str(budget // 2), str(budget // 4)]),
        dry_run=rng.random() < 0.1,
    )
    if body["approval_above_usd"] is None:
        del body["approval_above_usd"]
    return parse_request(body, now=None)


def _offerings(rng: random.Random, request: ReservationRequest) -> list[tuple[str, dict[str, Any]]]:
    """(region, raw offering) pairs, with deliberate near misses and ties."""
    found = []
    fees = [Decimal(rng.randint(500, 30_000)) for _ in range(6)]  # few distinct fees: ties happen
    for n in range(rng.randint(0, 40)):
        region = rng.choice([*request.regions, *REGIONS])
        duration = request.duration_hours + rng.choice([0, 0, 0, -24, 24])
        if duration < 24:
            duration = request.duration_hours
        start = request.earliest_start + timedelta(hours=rng.choice([-24, 0, 0, 24, 48, 72]))
        end = start + timedelta(hours=duration)
        count = max(1, request.instance_count + rng.choice([0, 0, 0, -1, 1]))
        found.append(
            (
                region,
                {
                    "TrainingPlanOfferingId": f"tpo-{rng.randrange(16**8):08x}-{n}",
                    "TargetResources": ["endpoint"],
                    "DurationHours": duration,
                    "DurationMinutes": 0,
                    "UpfrontFee": str(rng.choice(fees)),
                    "CurrencyCode": "USD" if rng.random() > 0.03 else "EUR",
                    "ReservedCapacityOfferings": [
                        {
                            "InstanceType": TYPES[0] if rng.random() > 0.1 else TYPES[1],
                            "InstanceCount": count,
                            "AvailabilityZone": f"{region}a",
                            "DurationHours": duration,
                            "StartTime": start,
                            "EndTime": end,
                        }
                    ],
                },
            )
        )
    return found


def _brute_force(request: ReservationRequest, raw: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The best feasible raw offering by the stated rules (linear scan), or None."""

    def key(region: str, offering: dict[str, Any]) -> tuple[Decimal, datetime, int, str]:
        segment = offering["ReservedCapacityOfferings"][0]
        rank = request.regions.index(region) if region in request.regions else len(request.regions)
        return Decimal(offering["UpfrontFee"]), segment["StartTime"], rank, offering["TrainingPlanOfferingId"]

    best: tuple[tuple[Decimal, datetime, int, str], dict[str, Any]] | None = None
    for region, offering in raw:
        segment = offering["ReservedCapacityOfferings"][0]
        feasible = (
            offering["CurrencyCode"] == "USD"
            and segment["InstanceType"] == request.instance_type
            and segment["InstanceCount"] >= request.instance_count
            and offering["DurationHours"] == request.duration_hours
            and segment["StartTime"] >= request.earliest_start
            and segment["EndTime"] <= request.latest_end
        )
        if feasible and (best is None or key(region, offering) < best[0]):
            best = (key(region, offering), offering)
    return best[1] if best else None


def _expected_decision(request: ReservationRequest, best: dict[str, Any] | None) -> Decision:
    if best is None:
        return Decision.NO_OFFERING
    fee = Decimal(best["UpfrontFee"])
    if fee > request.max_upfront_fee_usd:
        return Decision.REJECTED
    if request.dry_run:
        return Decision.DRY_RUN
    if request.approval_above_usd is not None and fee > request.approval_above_usd:
        return Decision.APPROVAL_REQUIRED
    return Decision.PURCHASE


def run(quick: bool = False) -> Section:
    """Compare ``decide`` with the brute-force optimum on every market; print and return the counts."""
    rng = random.Random(SEED)
    mismatches: list[str] = []
    decisions: dict[str, int] = {}
    offerings_seen = ties = 0
    for index in range(MARKETS):
        request = _request(rng, index)
        raw = _offerings(rng, request)
        offerings_seen += len(raw)
        normalised = [
            o
            for region, item in raw
            if (
                o := normalise_offering(
                    item,
                    region=region,
                    request=request,
                    searched_duration_hours=int(item["DurationHours"]),
                    searched_count=request.instance_count,
                )
            )
            is not None
        ]
        plan = decide(request, normalised)
        best = _brute_force(request, raw)
        expected = _expected_decision(request, best)
        decisions[plan.decision.value] = decisions.get(plan.decision.value, 0) + 1
        if (
            len(
                [
                    o
                    for o in normalised
                    if o.feasible and best and o.upfront_fee_usd == Decimal(best["UpfrontFee"])
                ]
            )
            > 1
        ):
            ties += 1
        chosen = plan.offering.offering_id if plan.offering else None
        wanted = best["TrainingPlanOfferingId"] if best else None
        if (chosen, plan.decision) != (wanted, expected):
            mismatches.append(
                f"market {index}: chose {chosen} ({plan.decision}), optimum {wanted} ({expected})"
            )
    agree = MARKETS - len(mismatches)
    print(f"   {agree}/{MARKETS} markets agree with the brute-force optimum")
    for line in mismatches[:10]:
        print(f"   MISMATCH {line}")
    rows = [
        ["markets", "offerings", "markets with a fee tie at the top", "agree", "mismatches"],
        [str(MARKETS), str(offerings_seen), str(ties), str(agree), str(len(mismatches))],
    ]
    rows_decisions = ", ".join(f"{name} {count}" for name, count in sorted(decisions.items()))
    return Section(
        title="6. Ranking correctness on 1,000 random markets",
        method=(
            f"Seed {SEED}. Each market: a random request and 0-40 random AWS-shaped offerings (near misses "
            "on type, count, duration and window; few distinct fees, so ties are common; a few non-USD). "
            "The layer's `normalise_offering` + `decide` choose; a brute-force linear scan applies the "
            "stated "
            "rules (feasible = USD, type, count >= requested, exact duration, inside the window; best = "
            "lowest fee, earliest start, region order, id; then budget, dry run, approval threshold) to the "
            "raw answers. A market agrees when both the chosen offering and the decision are equal."
        ),
        table=rows,
        notes=[f"Decisions: {rows_decisions}.", *[f"Mismatch: {m}" for m in mismatches[:10]]],
    )
