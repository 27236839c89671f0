"""Decide what to do with the ranked offerings: buy, ask, reject, report (pure, no I/O).

Order of the checks (issue 3, ``choose_offering``): no feasible offering -> ``NO_OFFERING`` (with the
nearest alternatives or the quota problem); the cheapest feasible one above ``max_upfront_fee_usd`` ->
``REJECTED``; a dry run -> ``DRY_RUN``; above ``approval_above_usd`` -> ``APPROVAL_REQUIRED``; otherwise
``PURCHASE``. Money is USD; the reason is a sentence for a person (it goes to Slack and the ledger).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from capacity.instances import TRAINING_PLAN_INSTANCE_TYPES
from capacity.offerings import Offering
from capacity.platforms import platform
from capacity.pricing import format_usd
from capacity.ranking import alternatives as nearest_alternatives
from capacity.ranking import rank
from capacity.request import ReservationRequest
from capacity.timeutil import iso_z, short

TOP_N = 5
"""How many of the best offerings the ledger's PLANNED entry keeps (the rest stay in OFFERINGS_TABLE)."""


class Decision(StrEnum):
    """What ``choose_offering`` decided (the state machine branches on it)."""

    NO_OFFERING = "NO_OFFERING"
    REJECTED = "REJECTED"
    DRY_RUN = "DRY_RUN"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    PURCHASE = "PURCHASE"
    SEARCH_AGAIN = "SEARCH_AGAIN"
    """Nothing fits now and the request keeps looking until ``search_until``: decided by the choose step
    (:mod:`capacity.logic.continuity.keep_looking`), never by :func:`decide`."""


def needs_approval(amount_usd: Decimal, threshold_usd: Decimal | None) -> bool:
    """Whether spending ``amount_usd`` (USD) needs a person's approval: it is above ``threshold_usd`` (the
    request's ``approval_above_usd``, lowered to its team's by :func:`capacity.logic.governance.policy.admit`;
    None: no threshold, never). The one rule for a purchase's fee, an extension's fee and an on-demand
    launch's hold (:func:`capacity.recommendation.on_demand_over_limit`)."""
    return threshold_usd is not None and amount_usd > threshold_usd


@dataclass(frozen=True)
class Plan:
    """A decision, why, the chosen offering (if any), the best few and the nearest alternatives."""

    decision: Decision
    reason: str
    offering: Offering | None
    top: tuple[Offering, ...] = ()
    alternatives: tuple[Offering, ...] = ()
    quota_errors: Mapping[str, str] = field(default_factory=dict)
    considered: int = 0


def describe_offering(offering: Offering) -> str:
    """``$8,523.65 in us-east-1 (us-east-1a), 2026-12-09 11:30 to 2026-12-12 11:30 UTC (72 h, 2 x ...)``."""
    return (
        f"{format_usd(offering.upfront_fee_usd)} in {offering.region} ({offering.availability_zone}), "
        f"{short(offering.start_time)} to {short(offering.end_time)} UTC "
        f"({offering.duration_hours} h, {offering.instance_count} x {offering.instance_type})"
    )


def _economics(offering: Offering) -> str:
    parts = [f"${offering.usd_per_instance_hour:.2f} per instance-hour"]
    if offering.on_demand_equivalent_usd is not None and offering.saving_percent is not None:
        parts.append(
            f"on-demand equivalent {format_usd(offering.on_demand_equivalent_usd)}, "
            f"saving {offering.saving_percent:.1f}%"
        )
    if offering.break_even_utilisation is not None:
        parts.append(f"pays off above {offering.break_even_utilisation * 100:.0f}% utilisation")
    return "; ".join(parts)


def _tie_note(ranked: Sequence[Offering]) -> str:
    if len(ranked) < 2 or ranked[0].upfront_fee_usd != ranked[1].upfront_fee_usd:
        return ""
    first, second = ranked[0], ranked[1]
    if first.start_time != second.start_time:
        return " Tie on fee with another offering, broken by the earlier start."
    return " Tie on fee and start with another offering, broken by region preference."


def quota_message(request: ReservationRequest, quota_errors: Mapping[str, str]) -> str:
    """A sentence per region whose search hit a quota (``ResourceLimitExceeded``), with the fix."""
    if not quota_errors:
        return ""
    regions = ", ".join(sorted(quota_errors))
    details = "; ".join(f"{region}: {message}" for region, message in sorted(quota_errors.items()))
    return (
        f"Quota exceeded in {regions} ({details}): this is a service quota, not a lack of capacity; ask "
        f"for a quota increase for {request.instance_type} training plans (Service Quotas) or lower "
        "instance_count."
    )


def no_training_plan_message(request: ReservationRequest) -> str:
    """Why an on-demand-only type (``ml.g6.*``, no training plan) ends without capacity."""
    return (
        f"No training plan exists for {request.instance_type} (training plans reserve "
        + ", ".join(sorted(TRAINING_PLAN_INSTANCE_TYPES))
        + f"), so there is no reservation fallback: {request.instance_type} runs on demand only, and "
        f"{request.instance_count} x {request.instance_type} on demand was not obtained in "
        f"{', '.join(request.regions)} (no capacity, or not tried because it would cost more than the budget "
        "or the approval threshold, or its team's month or quota refused it). Try again later, add regions, "
        "or pick a type training plans reserve."
    )


def alternatives_message(
    request: ReservationRequest, alternatives: Sequence[Offering], quota_errors: Mapping[str, str]
) -> str:
    """Why nothing matched and what is nearest (other durations, regions, counts), as one paragraph."""
    if not platform(request.platform).reserves(request.instance_type):
        return no_training_plan_message(request)
    text = (
        f"No offering of {request.instance_count} x {request.instance_type} for {request.duration_hours} h "
        f"between {iso_z(request.earliest_start)} and {iso_z(request.latest_end)} in "
        f"{', '.join(request.regions)}."
    )
    quota = quota_message(request, quota_errors)
    if quota:
        text += " " + quota
    if alternatives:
        listed = "; ".join(
            f"{describe_offering(o)} [{o.infeasible_reason}]" if o.infeasible_reason else describe_offering(o)
            for o in alternatives
        )
        text += f" Nearest alternatives: {listed}."
    elif not quota:
        text += (
            " No alternatives were found either: widen the window, add regions, change the duration or "
            "try another instance type."
        )
    return text


def right_size_note(request: ReservationRequest) -> str:
    """With ``right_size`` (issue 33): which count the simulation chose over the one asked for, and its
    figures, recorded with the decision ("" otherwise)."""
    sizing = request.sizing
    if sizing is None:
        return ""
    if sizing.instance_count is None:
        return f" Right-size: {sizing.text} So the count asked for, {sizing.requested_count} x, is searched."
    chosen = (
        f"the {sizing.requested_count} x asked for is"
        if sizing.instance_count == sizing.requested_count
        else f"{sizing.instance_count} x instead of the {sizing.requested_count} x asked for,"
    )
    return (
        f" Right-size: {chosen} the smallest count meeting the target on the expected load (simulated from "
        f"{iso_z(sizing.simulated_from)} for {sizing.hours} h): {sizing.text}"
    )


def decide(
    request: ReservationRequest,
    offerings: Sequence[Offering],
    *,
    quota_errors: Mapping[str, str] | None = None,
) -> Plan:
    """Decide for ``request`` given every stored offering (feasible or not) and per-region quota errors.

    Returns:
        A :class:`Plan`. Never buys above ``max_upfront_fee_usd``: the chosen offering is the cheapest
        feasible one, so if it is over budget every other one is too.
    """
    quotas = dict(quota_errors or {})
    ranked = rank(offerings, request.regions)
    alts = tuple(nearest_alternatives(offerings, request))
    top = tuple(ranked[:TOP_N])

    def plan(decision: Decision, reason: str, offering: Offering | None) -> Plan:
        return Plan(decision, reason + right_size_note(request), offering, top, alts, quotas, len(offerings))

    if not ranked:
        return plan(Decision.NO_OFFERING, alternatives_message(request, alts, quotas), None)

    best = ranked[0]
    choice = (
        f"Cheapest feasible offering of {len(ranked)}: {describe_offering(best)}; {_economics(best)}."
        + _tie_note(ranked)
    )
    budget = format_usd(request.max_upfront_fee_usd)
    if best.upfront_fee_usd > request.max_upfront_fee_usd:
        reason = (
            f"{choice} It is above the budget max_upfront_fee_usd {budget}, so nothing was bought: raise the "
            f"budget to at least {format_usd(best.upfront_fee_usd)} or shorten the reservation."
        )
        return plan(Decision.REJECTED, reason, best)

    threshold = request.approval_above_usd
    approval_needed = needs_approval(best.upfront_fee_usd, threshold)
    if request.dry_run:
        approval = (
            f" It would need approval (above {format_usd(threshold)})."
            if approval_needed and threshold is not None
            else ""
        )
        reason = f"Dry run: would buy it. {choice} Within the budget {budget}.{approval} Nothing was bought."
        return plan(Decision.DRY_RUN, reason, best)
    if approval_needed and threshold is not None:
        reason = (
            f"{choice} Within the budget {budget} but above the approval threshold {format_usd(threshold)}: "
            f"a person must approve within {request.approval_timeout_hours} h."
        )
        return plan(Decision.APPROVAL_REQUIRED, reason, best)
    reason = f"{choice} Within the budget {budget}" + (
        f" and below the approval threshold {format_usd(threshold)}." if threshold is not None else "."
    )
    return plan(Decision.PURCHASE, reason, best)
