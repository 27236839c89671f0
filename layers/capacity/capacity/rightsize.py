"""Right-sizing a reservation before buying it (issue 33): simulate the request's models on each candidate
instance count over the expected load (:mod:`servingsim`, the model of copies, instances and scaling the
local cloud runs) and find the smallest count that meets the service target. Pure: no I/O.

The candidates are the counts a training plan sells (1, 2, 4 ... 64) from 1 to the larger of the count
asked for and the count every model's ``copies.max`` would need at once (more instances than that change
nothing), keeping those that hold the initial copies. The simulation starts at ``earliest_start`` with
every component at ``copies.initial`` and runs ``duration_hours``; the offering bought may start later in
the day, which moves the daily profile against the window by that much (the figures are a prediction, and
the cost summary compares them with what ran).

Reading the figures (each :class:`CandidateFigures`): ``rejected_percent`` is the share of all requests
refused for lack of capacity over the window (the target's measure), ``peak_rejected_percent`` the share
in the busiest hours, ``worst_hour_rejected_percent`` the largest share in any one hour of any model (cold
starts from zero copies show there), ``idle_percent`` the share of reserved instance-hours nothing ran on.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING

from pydantic import Field

from capacity.base import Model
from capacity.instances import spec_for
from capacity.pricing import format_usd
from capacity.request_parts import LoadSpec, ModelSpec
from capacity.wire import Money, UtcDatetime

# servingsim is imported where a request with a load is sized (PLC0415 below), not with this module: every
# handler imports the request model, few size one (about 10 ms of each cold start, issue 31).
if TYPE_CHECKING:
    from servingsim import Hardware, ModelLoad, Outcome

SELLABLE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""Instance counts a training plan sells (the same list as the request's rule on ``instance_count``)."""


class CandidateFigures(Model):
    """One candidate (``instance_count`` x ``instance_type``) simulated over the load.

    Percentages are 0..100; instance-hours over the reservation; ``upfront_fee_usd`` the cheapest feasible
    offering of that count (set by ``POST /plans``, which searches each count; null when none was found or
    not searched).
    """

    instance_type: str
    instance_count: int
    meets_target: bool
    rejected_percent: float
    peak_rejected_percent: float
    worst_hour_rejected_percent: float
    requests: int
    rejected_requests: int
    instance_hours_used: float
    reserved_instance_hours: float
    idle_percent: float
    peak_instances: int
    upfront_fee_usd: Money | None = None


class RightSizing(Model):
    """What the simulation says about the candidates of a request with a ``load`` (issue 33).

    ``instance_count``: the smallest candidate meeting ``max_rejected_percent`` (null: none does, and
    ``best`` is the candidate refusing least); ``requested_count`` the count the request asked for;
    ``candidates`` smallest first; ``needed_instances_by_hour`` the instances the copies wanted in each hour
    of the window on the largest candidate (the chart's "needed" line against the reserved count);
    ``text`` says it in a sentence or two.
    """

    instance_type: str
    requested_count: int
    instance_count: int | None
    best: int
    max_rejected_percent: float
    simulated_from: UtcDatetime
    hours: int
    candidates: list[CandidateFigures] = Field(default_factory=list)
    needed_instances_by_hour: list[int] = Field(default_factory=list)
    text: str = ""

    def candidate(self, count: int) -> CandidateFigures | None:
        """The figures of ``count`` instances (None if not a candidate)."""
        return next((item for item in self.candidates if item.instance_count == count), None)


def _hardware(instance_type: str) -> Hardware:
    from servingsim import Hardware  # noqa: PLC0415 - see the imports

    spec = spec_for(instance_type)
    if spec is None:
        raise ValueError(f"unknown instance type {instance_type!r}")
    return Hardware(float(spec.accelerators), float(spec.vcpus), float(spec.memory_mib))


def _loads(models: Sequence[ModelSpec], load: LoadSpec) -> list[ModelLoad]:
    from servingsim import ModelLoad, Requirements  # noqa: PLC0415 - see the imports

    profiles = {item.model: item for item in load.models}
    loads = []
    for model in models:
        scaling = model.scaling_or_default
        profile = profiles.get(model.name)
        loads.append(
            ModelLoad(
                name=model.name,
                requirements=Requirements(float(model.accelerators), model.cpu_cores, float(model.memory_mb)),
                copies_initial=model.copies.initial,
                copies_min=model.copies.min,
                copies_max=model.copies.max,
                requests_per_minute=profile.requests_per_minute if profile else [0.0] * 24,
                target_per_copy=scaling.target_invocations_per_copy,
                scale_out_cooldown_seconds=scaling.scale_out_cooldown_seconds,
                scale_in_cooldown_seconds=scaling.scale_in_cooldown_seconds,
                idle_minutes=model.idle_minutes,
                requests_per_minute_per_copy=profile.requests_per_minute_per_copy if profile else None,
            )
        )
    return loads


def candidate_counts(instance_type: str, models: Sequence[ModelSpec], requested_count: int) -> list[int]:
    """The counts worth simulating (module docstring), smallest first."""
    from servingsim import Requirements, pack  # noqa: PLC0415 - see the imports

    hardware = _hardware(instance_type)
    demands = [
        (m.name, Requirements(float(m.accelerators), m.cpu_cores, float(m.memory_mb)), m.copies.max)
        for m in models
    ]
    at_most, _ = pack(hardware, demands, None)
    initial = [(name, needs, m.copies.initial) for (name, needs, _), m in zip(demands, models, strict=True)]
    holds_initial, _ = pack(hardware, initial, None)
    upper = max(requested_count, at_most, 1)
    wanted = [count for count in SELLABLE_COUNTS if count >= holds_initial]
    counts = [count for count in wanted if count <= upper]
    if not counts or counts[-1] < upper:  # a need between two sellable counts (3): the next one (4)
        counts += [count for count in wanted if count > upper][:1]
    return counts


def _figures(instance_type: str, outcome: Outcome, target: float) -> CandidateFigures:
    return CandidateFigures(
        instance_type=instance_type,
        instance_count=outcome.instances,
        meets_target=outcome.rejected_percent <= target + 1e-9,
        rejected_percent=round(outcome.rejected_percent, 3),
        peak_rejected_percent=round(outcome.peak_rejected_percent, 3),
        worst_hour_rejected_percent=round(outcome.worst_hour_rejected_percent, 3),
        requests=math.floor(outcome.sent + 0.5),
        rejected_requests=math.floor(outcome.rejected + 0.5),
        instance_hours_used=round(outcome.instance_hours_used, 2),
        reserved_instance_hours=outcome.reserved_instance_hours,
        idle_percent=round(outcome.idle_percent, 1),
        peak_instances=outcome.peak_instances,
    )


def size(
    *,
    instance_type: str,
    models: Sequence[ModelSpec],
    load: LoadSpec,
    requested_count: int,
    start: datetime,
    hours: int,
    min_instances: int,
) -> RightSizing:
    """Simulate every candidate count (:func:`candidate_counts`) and pick the smallest meeting the target.

    Raises:
        ValueError: an unknown instance type, no model, or ``hours`` < 1.
    """
    from servingsim import simulate  # noqa: PLC0415 - see the imports

    hardware = _hardware(instance_type)
    loads = _loads(models, load)
    target = load.max_rejected_percent
    outcomes = [
        simulate(hardware, count, loads, start=start, hours=hours, min_instances=min_instances)
        for count in candidate_counts(instance_type, models, requested_count)
    ]
    figures = [_figures(instance_type, outcome, target) for outcome in outcomes]
    meeting = [item.instance_count for item in figures if item.meets_target]
    best = min(figures, key=lambda item: (item.rejected_requests, item.instance_count))
    sizing = RightSizing(
        instance_type=instance_type,
        requested_count=requested_count,
        instance_count=meeting[0] if meeting else None,
        best=best.instance_count,
        max_rejected_percent=target,
        simulated_from=start,
        hours=hours,
        candidates=figures,
        needed_instances_by_hour=list(outcomes[-1].needed),
    )
    return sizing.model_copy(update={"text": describe(sizing)})


def _percent(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".") + "%"


def describe(sizing: RightSizing, fees: Mapping[int, Decimal] | None = None) -> str:
    """The answer in words: the smallest count meeting the target with its figures, and what the next
    larger candidate (or the count asked for) would add, in dollars when ``fees`` (count -> cheapest fee,
    USD) has both; or, when no count meets the target, that plainly, with the best that exists."""
    fees = fees or {}
    kind = sizing.instance_type
    target = _percent(sizing.max_rejected_percent)
    chosen = sizing.candidate(sizing.instance_count) if sizing.instance_count is not None else None
    if chosen is None:
        best = sizing.candidate(sizing.best) or sizing.candidates[-1]
        return (
            f"No instance count of {kind} meets the target of at most {target} of requests refused: the "
            f"best, {best.instance_count} x {kind}, refuses {_percent(best.rejected_percent)} "
            f"({best.rejected_requests:,} of {best.requests:,}; "
            f"{_percent(best.peak_rejected_percent)} at the peak). More instances would not help: raise the "
            f"models' copies.max, their per-copy capacity, "
            f"or choose a larger instance type."
        )
    text = (
        f"{chosen.instance_count} x {kind} serves this load with {_percent(chosen.rejected_percent)} of "
        f"requests refused ({chosen.rejected_requests:,} of {chosen.requests:,}; "
        f"{_percent(chosen.peak_rejected_percent)} at the peak, target at most {target}), "
        f"{_percent(100 - chosen.idle_percent)} of its instance-hours used"
    )
    compare = sizing.requested_count if sizing.requested_count != chosen.instance_count else None
    if compare is None:
        compare = next(
            (c.instance_count for c in sizing.candidates if c.instance_count > chosen.instance_count), None
        )
    other = sizing.candidate(compare) if compare is not None else None
    if other is None:
        return text + "."
    if chosen.instance_count in fees and other.instance_count in fees:
        more = fees[other.instance_count] - fees[chosen.instance_count]
        cost = f"costs {format_usd(more)} more and "
    else:
        cost = ""
    return text + (
        f"; {other.instance_count} x {cost}is {_percent(other.idle_percent)} idle "
        f"({_percent(other.rejected_percent)} refused)."
    )
