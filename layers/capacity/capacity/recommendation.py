"""The recommendation a plan shows a person (``POST /plans``, the Slack ``plan`` command): which option, why,
what it costs against the alternatives, and the break-even utilisation of reserving (pure, no I/O).

The options follow seed 000's decision framework (DESIGN.md section 2): start with the least restrictive
option and reserve only when the start time or certainty requires it.

* ``on-demand``: the window starts within the hour (``on-demand-first``), on-demand capacity is not known
  to be missing, and the request does not insist on certainty. Nothing upfront; pay per instance-hour used.
* ``spot``: as on-demand, for ``spot-ok`` EC2 work, when on-demand capacity is missing (interruptible).
* ``capacity-block`` (EC2) or ``training-plan`` (SageMaker): the best ranked offering, when certainty is
  required (``reserved``), the window starts later than on-demand can promise, or on demand is missing.
* ``none``: nothing feasible to reserve and on demand is not an option.

Money is USD: the on-demand cost of the requested instance-hours (``pricing``), the reservation's upfront
fee, the saving, and the break-even utilisation = upfront fee / on-demand cost of the reserved hours: a
reservation used less than that fraction of its hours costs more than on demand would have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Literal

from capacity.admission import ON_DEMAND_FIRST_HORIZON
from capacity.offerings import Offering
from capacity.planner import needs_approval
from capacity.platforms import platform
from capacity.pricing import format_usd, on_demand_equivalent, on_demand_usd_per_hour
from capacity.ranking import rank
from capacity.request import ReservationRequest
from capacity.timeutil import short

Option = Literal["on-demand", "spot", "capacity-block", "training-plan", "none"]


@dataclass(frozen=True)
class Alternative:
    """One option with its cost in USD for the requested instance-hours (None when unknown)."""

    option: Option
    cost_usd: Decimal | None
    note: str


@dataclass(frozen=True)
class Recommendation:
    """What to do and why.

    Attributes:
        option: the recommended option.
        reason: why, in one or two sentences.
        cost_usd: its cost for the requested instance-hours (on demand: rate x count x duration; reserved:
            the upfront fee), None when unknown.
        on_demand_cost_usd: the same instance-hours on demand in the first region.
        break_even_utilisation: upfront fee / on-demand cost of the reserved hours (fraction, 4 decimals) for
            the best reservation, None without one.
        offering: the best feasible reservation offering, if any.
        alternatives: the other options with their costs.
    """

    option: Option
    reason: str
    cost_usd: Decimal | None
    on_demand_cost_usd: Decimal | None
    break_even_utilisation: Decimal | None
    offering: Offering | None
    alternatives: tuple[Alternative, ...] = field(default_factory=tuple)

    @property
    def text(self) -> str:
        """The recommendation as a paragraph a person reads (Slack, API)."""
        cost = f" ({format_usd(self.cost_usd)})" if self.cost_usd is not None else ""
        lines = [f"Recommended: {self.option}{cost}. {self.reason}"]
        for alt in self.alternatives:
            alt_cost = format_usd(alt.cost_usd) if alt.cost_usd is not None else "cost unknown"
            lines.append(f"- {alt.option}: {alt_cost}; {alt.note}")
        if self.break_even_utilisation is not None:
            lines.append(
                f"Reserving pays off only if the capacity is used more than "
                f"{self.break_even_utilisation * 100:.0f}% of the reserved hours; below that, on demand is "
                "cheaper."
            )
        return "\n".join(lines)


def _reserved_option(request: ReservationRequest) -> Option:
    return platform(request.platform).reserved


def reservable(request: ReservationRequest) -> bool:
    """Whether the request's type can be reserved at all (``ml.g6.*`` has no training plan)."""
    return platform(request.platform).reserves(request.instance_type)


def _reserved_note(best: Offering, on_demand: Decimal | None) -> str:
    where = (
        f"{best.region} ({best.availability_zone}), {short(best.start_time)} to {short(best.end_time)} UTC"
    )
    if best.saving_percent is not None and on_demand is not None:
        return f"upfront, {where}; {best.saving_percent:.1f}% below on demand if fully used"
    return f"upfront, {where}"


@dataclass(frozen=True)
class OnDemandOverLimit:
    """On demand from now to ``latest_end`` would cost more than the request allows, or its cost cannot be
    known, so the workflow reserves (whose fee is known before it is paid).

    Attributes:
        cost_usd: the on-demand cost (USD) of ``instance_count`` instances from now to ``latest_end`` at the
            dearest rate among the request's regions (the instances run until then); None when some region's
            on-demand price is unknown (``limit`` is then ``unpriced``).
        limit: which limit it exceeds: ``approval`` (``approval_above_usd``: the reserving path asks for
            approval), ``budget`` (``max_upfront_fee_usd``), or ``unpriced`` (a spend nobody can check
            against the limits is not made).
        limit_usd: that limit (USD).
    """

    cost_usd: Decimal | None
    limit: Literal["approval", "budget", "unpriced"]
    limit_usd: Decimal

    def sentence(self, until: str) -> str:
        """``on demand until <until> would cost about $X, above the <limit> $Y`` (or why it has no price)."""
        if self.cost_usd is None:
            return (
                f"on demand until {until} has no known price in every region of the request, so its cost "
                f"cannot be checked against the budget {format_usd(self.limit_usd)}"
            )
        name = "approval threshold" if self.limit == "approval" else "budget"
        return (
            f"on demand until {until} would cost about {format_usd(self.cost_usd)}, above the {name} "
            f"{format_usd(self.limit_usd)}"
        )


def on_demand_hold_usd(request: ReservationRequest, now: datetime) -> Decimal | None:
    """What on demand for ``request`` may cost (USD, cents): ``instance_count`` instances from ``now`` to
    ``latest_end`` (the instances run until then), at the dearest on-demand rate among the request's regions
    (the launch may happen in any of them, the first with free capacity). Spot is priced the same: the
    on-demand rate is its upper bound. None when some region's on-demand price is unknown.

    The one figure every on-demand rule uses: the request's budget and the approval threshold
    (:func:`on_demand_over_limit`) and the hold on the team's month, the account cap and the quota
    (:mod:`capacity.logic.governance.on_demand_spend`)."""
    rates = [on_demand_usd_per_hour(region, request.instance_type) for region in request.regions]
    known = [rate for rate in rates if rate is not None]
    if not known or len(known) < len(rates):
        return None
    hours = Decimal(max(0, int((request.latest_end - now).total_seconds()))) / 3600
    return on_demand_equivalent(max(known), instance_count=request.instance_count, hours=hours)


def on_demand_over_limit(request: ReservationRequest, now: datetime) -> OnDemandOverLimit | None:
    """The workflow's cost rule for ``on-demand-first``/``spot-ok`` requests, shared by the plan (here) and
    the ``try`` step (:mod:`capacity.logic.steps.on_demand`): on demand is not tried when its cost
    (:func:`on_demand_hold_usd`: from ``now`` to ``latest_end`` at the dearest rate among the request's
    regions, so the spend stays within the limits wherever it lands) needs an approval
    (:func:`~capacity.planner.needs_approval` by ``approval_above_usd``, checked first: the rule a purchase's
    fee is judged by) or is above ``max_upfront_fee_usd``. A region whose on-demand price is unknown makes the
    cost unknowable: ``unpriced``, never tried (the money rules check every spend before it is made). None:
    within both limits."""
    cost = on_demand_hold_usd(request, now)
    if cost is None:
        return OnDemandOverLimit(None, "unpriced", request.max_upfront_fee_usd)
    threshold = request.approval_above_usd
    if threshold is not None and needs_approval(cost, threshold):
        return OnDemandOverLimit(cost, "approval", threshold)
    if cost > request.max_upfront_fee_usd:
        return OnDemandOverLimit(cost, "budget", request.max_upfront_fee_usd)
    return None


@dataclass(frozen=True)
class TeamLeft:
    """What the request's team (and the account) may still commit this month, USD, and the sentence naming it
    (:func:`capacity.logic.governance.policy.left_in_month`: "team ml-eval has $812.40 left in December
    2026")."""

    usd: Decimal
    sentence: str


def on_demand_skip_reason(
    request: ReservationRequest, now: datetime, *, team_left: TeamLeft | None = None
) -> str | None:
    """Why the workflow would not try on demand for an ``on-demand-first``/``spot-ok`` request (None: it
    would), as a plan says it: :func:`on_demand_over_limit` with the end in ``YYYY-MM-DD HH:MM UTC``, else
    (with ``team_left``) a cost above what the team has left this month: the hold the ``try`` step would take
    on the team's month is refused (:mod:`capacity.logic.governance.on_demand_spend`; a preview: the step
    decides atomically, the quota included)."""
    until = f"{short(request.latest_end)} UTC"
    over = on_demand_over_limit(request, now)
    if over is not None:
        return over.sentence(until)
    cost = on_demand_hold_usd(request, now)
    if team_left is not None and cost is not None and cost > team_left.usd:
        return f"{team_left.sentence}, less than on demand until {until} would cost ({format_usd(cost)})"
    return None


def on_demand_check(request: ReservationRequest, now: datetime, *, team_left: TeamLeft | None = None) -> str:
    """How a dry run judges on-demand availability (it never launches anything), as a sentence; ``team_left``
    as for :func:`on_demand_skip_reason`."""
    if request.strategy == "reserved":
        return "not tried: strategy reserved always reserves"
    if request.earliest_start > now + ON_DEMAND_FIRST_HORIZON:
        return (
            f"not tried: the window starts {short(request.earliest_start)} UTC, more than an hour from now, "
            "and on-demand capacity cannot be promised ahead"
        )
    skipped = on_demand_skip_reason(request, now, team_left=team_left)
    if skipped is not None:
        return f"not tried: {skipped}"
    launch = platform(request.platform).launch_call
    return (
        f"unknown: only launching ({launch}) tells whether on-demand capacity is free and a plan launches "
        f"nothing; the workflow tries on demand first in {', '.join(request.regions)}, in that order"
    )


def _fallback(request: ReservationRequest, best: Offering | None) -> str:
    """What the workflow does when on demand fails in every region."""
    if not reservable(request):
        return (
            f" No training plan exists for {request.instance_type}, so there is no reservation fallback: "
            "if no region has on-demand capacity, the request ends FAILED."
        )
    if best is not None:
        return f" If no region has capacity, it reserves the {_reserved_option(request)} below instead."
    return " If no region has capacity, it searches for a reservation then and fails if none is feasible."


def recommend(
    request: ReservationRequest,
    offerings: Sequence[Offering],
    *,
    now: datetime,
    on_demand_available: bool | None = None,
    team_left: TeamLeft | None = None,
) -> Recommendation:
    """Recommend an option for ``request`` given the searched ``offerings`` (feasible or not).

    Args:
        request: the validated request (its ``strategy``, window, count, type and regions).
        offerings: normalised offerings (training plans or capacity blocks); infeasible ones are ignored.
        now: the current UTC time (does the window start within the hour?).
        on_demand_available: whether on-demand capacity was found (None: not tried, assumed possible;
            the workflow tries it first, region by region).
        team_left: what the request's team has left this month (None: no teams policy): on demand costing
            more is not tried (:func:`on_demand_skip_reason`).

    Returns:
        A :class:`Recommendation`; its ``text`` is what a person reads.
    """
    region = request.regions[0]
    rate = on_demand_usd_per_hour(region, request.instance_type)
    hours = Decimal(request.duration_hours)
    on_demand = (
        on_demand_equivalent(rate, instance_count=request.instance_count, hours=hours)
        if rate is not None
        else None
    )
    ranked = rank(offerings, request.regions)
    best = ranked[0] if ranked else None
    break_even = best.break_even_utilisation if best is not None else None
    reserved = _reserved_option(request)
    starts_now = request.earliest_start <= now + ON_DEMAND_FIRST_HORIZON
    wants_on_demand = request.strategy in ("on-demand-first", "spot-ok") and starts_now
    skipped = on_demand_skip_reason(request, now, team_left=team_left) if wants_on_demand else None
    od_note = (
        f"{request.instance_count} x {request.instance_type} for {request.duration_hours} h in {region} at "
        f"${rate:.2f}/instance-hour, paid per hour used, no guarantee it is available"
        if rate is not None
        else "no on-demand price known for this type"
    )
    on_demand_alt = Alternative("on-demand", on_demand, od_note)
    reserved_alt = (
        Alternative(reserved, best.upfront_fee_usd, _reserved_note(best, on_demand))
        if best is not None
        else None
    )

    if wants_on_demand and on_demand_available is not False and skipped is None:
        why = (
            "The window starts now and the request allows on-demand capacity: start with the least "
            "restrictive option and pay only for the hours used; reserve only if on demand is not available."
        )
        if on_demand_available is None:
            why += (
                " Whether on-demand capacity is free is known only by launching, which a plan never does: "
                f"the workflow tries it first in {', '.join(request.regions)}, in that order."
            )
        why += _fallback(request, best)
        alts: tuple[Alternative, ...] = (reserved_alt,) if reserved_alt else ()
        return Recommendation("on-demand", why, on_demand, on_demand, break_even, best, alts)
    if (
        wants_on_demand
        and skipped is None
        and request.strategy == "spot-ok"
        and platform(request.platform).spot
    ):
        why = (
            "No on-demand capacity was found; the work tolerates interruptions (spot-ok), so spot is the "
            "next least restrictive option (spot prices are below on demand; the on-demand figure is an "
            "upper bound)."
        )
        spot_alts = tuple(a for a in (on_demand_alt, reserved_alt) if a is not None)
        return Recommendation("spot", why, on_demand, on_demand, break_even, best, spot_alts)
    if best is not None:
        if skipped is not None:
            why = f"On demand is not tried: {skipped}; the workflow reserves instead."
        elif not starts_now:
            why = (
                f"The window starts {short(request.earliest_start)} UTC, more than an hour from now: "
                "on-demand capacity cannot be promised that far ahead, so reserve it."
            )
        elif request.strategy == "reserved":
            why = "The request needs certainty (strategy reserved): reserve the capacity now."
        else:
            why = "No on-demand capacity was found in the candidate regions: reserve it."
        why += f" The cheapest feasible of {len(ranked)} offerings is chosen (lowest fee, earliest start)."
        if best.upfront_fee_usd > request.max_upfront_fee_usd:
            budget = format_usd(request.max_upfront_fee_usd)
            why += (
                f" Its fee is above the budget max_upfront_fee_usd {budget}, so nothing would be bought: "
                "raise the budget or shorten the reservation."
            )
        return Recommendation(
            reserved, why, best.upfront_fee_usd, on_demand, break_even, best, (on_demand_alt,)
        )
    if not reservable(request):
        why = (
            f"No training plan exists for {request.instance_type}, so it runs on demand only"
            + (f", and on demand is not tried: {skipped}" if skipped is not None else "")
            + (", and no on-demand capacity was found" if on_demand_available is False else "")
            + (
                ", and the window does not start within the hour"
                if not starts_now and request.strategy != "reserved"
                else ""
            )
            + ": the request would end FAILED."
        )
        return Recommendation("none", why, None, on_demand, None, None, (on_demand_alt,))
    why = (
        "No feasible offering to reserve in the window"
        + (" and no on-demand capacity" if on_demand_available is False else "")
        + (f" (on demand is not tried: {skipped})" if skipped is not None else "")
        + ": widen the window, add regions, or change the duration, count or instance type."
    )
    return Recommendation("none", why, None, on_demand, None, None, (on_demand_alt,))
