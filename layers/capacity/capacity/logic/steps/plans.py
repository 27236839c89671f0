"""``POST /plans`` (and Slack ``/gpu plan``): a synchronous dry run that buys nothing and stores nothing.

The same code as the workflow, run in one call: :func:`~capacity.request.parse_request` (with
``dry_run`` forced on), :func:`~capacity.logic.steps.search.region_offerings` in every requested region (in
preference order), :func:`~capacity.planner.decide` (the decision framework of seed 000 and DESIGN.md
section 2: the cheapest feasible offering within the budget, each shown with its on-demand equivalent,
saving and break-even utilisation) and :func:`~capacity.recommendation.recommend` (which option: on demand
now, spot, a training plan or a capacity block, why, its cost against the others). Searches stop at a
time limit (API Gateway ends an integration after 29 s): the regions not searched are named in the answer,
never silently dropped. A type without training plans (``ml.g6.*``) searches nothing.

The planner lives among the steps, not the doors: the roll-over plans a successor with it
(:mod:`capacity.logic.continuity.rollover`), and the doors (``POST /plans``, ``/gpu plan``) answer with it.

Like the workflow, the dry run checks what the request names where it would run
(:func:`~capacity.logic.governance.checks.region_problems`: ``model_name`` models, the launch template and its
version, its instance role) in each region searched (every region, for on demand only): those regions'
offerings are not considered and are listed in ``unusable_regions`` with why; when no region with a feasible
offering passes, ``decision`` is ``NOT_DEPLOYABLE`` (the workflow would fail before asking anyone to approve)
and nothing "would be bought". Scopes (model artifact buckets, instance roles) are checked first
(:func:`~capacity.logic.governance.checks.require_in_scope`: 400).

Like the workflow, the dry run is judged by the caller's team (issue 16): the request is charged to the
authenticated caller's team (:func:`~capacity.logic.governance.policy.charged_to`: 403 for a caller in no
team), planned with the team's approval threshold, and ``REJECTED`` with the team's reasons
(:func:`~capacity.logic.governance.policy.judge_plan`, the rule the choose step applies); ``team`` reports the
problems and what the team has left this month.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import Field

from capacity.base import Model
from capacity.errors import RetryableAwsError
from capacity.logic.continuity.keep_looking import dry_run_note, may_look_again
from capacity.logic.governance.checks import not_considered, not_deployable, region_problems, require_in_scope
from capacity.logic.governance.policy import Admission, admit, charged_to, judge_plan, left_in_month
from capacity.logic.steps.search import region_offerings
from capacity.offerings import Offering
from capacity.planner import Decision, decide, needs_approval
from capacity.ports import Ports
from capacity.ranking import rank
from capacity.recommendation import Recommendation, TeamLeft, on_demand_check, recommend, reservable
from capacity.request import ReservationRequest, parse_request
from capacity.rest_bodies import OptionCost, PlanAdvice, TeamCheck
from capacity.rightsize import RightSizing, describe
from capacity.wire import UtcDatetime

PLAN_TIME_LIMIT_SECONDS = 20.0
"""Stop starting new region searches after this long (the API answers within API Gateway's 29 s)."""
MAX_RANKED = 20
NOT_DEPLOYABLE = "NOT_DEPLOYABLE"
"""The dry run's decision when feasible offerings exist only where what the request names does not."""
"""How many ranked offerings the answer lists (the best first)."""


class PlanResult(Model):
    """The dry run's answer.

    ``decision`` is ``DRY_RUN`` (would buy ``recommendation``), ``REJECTED`` (``recommendation``, the
    cheapest feasible offering, is above ``max_upfront_fee_usd``), ``NO_OFFERING`` (no recommendation) or
    ``NOT_DEPLOYABLE`` (feasible offerings exist only in regions where what the request names - a
    ``model_name``, the launch template or its version - does not exist: ``unusable_regions`` says why);
    ``reason`` says why in a sentence (the same text the workflow would record). ``offerings`` are the
    feasible ones, best first (at most 20), each with
    ``upfront_fee_usd``, ``on_demand_equivalent_usd``, ``saving_percent`` and ``break_even_utilisation``
    (a fraction: the capacity pays off when used more than this share of the reserved hours);
    ``alternatives`` the nearest infeasible ones. ``needs_approval`` is true when buying it would wait for
    a person (fee above ``approval_above_usd``). ``next_look_at`` (UTC) is set when the request keeps
    looking (``search_until``) and nothing fits now: when the workflow would search again (issue 17).
    ``advice`` says which option the decision framework recommends (on demand now, spot, the training plan
    or capacity block, or none), why, what it costs against the alternatives and the break-even utilisation
    of reserving; ``recommendation`` is the reservation the workflow would buy if it reserves. Money is USD
    (decimal strings in JSON).
    """

    request_id: str
    decision: str = Field(description="DRY_RUN, REJECTED, NO_OFFERING or NOT_DEPLOYABLE")
    reason: str
    recommendation: Offering | None = None
    needs_approval: bool = False
    offerings: list[Offering] = Field(default_factory=list)
    offerings_considered: int = 0
    alternatives: list[Offering] = Field(default_factory=list)
    quota_errors: dict[str, str] = Field(default_factory=dict)
    regions_searched: list[str] = Field(default_factory=list)
    regions_not_searched: dict[str, str] = Field(
        default_factory=dict, description="region -> why it was not searched (time limit, AWS error)"
    )
    unusable_regions: dict[str, str] = Field(
        default_factory=dict,
        description="region -> what the request names that does not exist there (its offerings are not "
        "considered)",
    )
    advice: PlanAdvice = Field(description="the recommended option, why, its cost against the others")
    team: TeamCheck | None = Field(
        default=None,
        description="what the caller's team refuses and has left this month (null: no teams policy)",
    )
    next_look_at: UtcDatetime | None = Field(
        default=None,
        description="a request with search_until that finds nothing fitting now: when the workflow would "
        "look again (UTC); null otherwise",
    )
    right_size: RightSizing | None = Field(
        default=None,
        description="a request with load (issue 33): each candidate instance count simulated on it, with "
        "the cheapest feasible fee of that count, the smallest meeting the target and why (text)",
    )


def _advice(recommendation: Recommendation, check: str) -> PlanAdvice:
    return PlanAdvice(
        option=recommendation.option,
        reason=recommendation.reason,
        cost_usd=recommendation.cost_usd,
        on_demand_cost_usd=recommendation.on_demand_cost_usd,
        break_even_utilisation=recommendation.break_even_utilisation,
        on_demand_available=None,
        on_demand_check=check,
        alternatives=[
            OptionCost(option=a.option, cost_usd=a.cost_usd, note=a.note) for a in recommendation.alternatives
        ],
        text=recommendation.text,
    )


def plan_reservation(
    body: Mapping[str, Any],
    ports: Ports,
    *,
    requester: str | None = None,
    time_limit_seconds: float = PLAN_TIME_LIMIT_SECONDS,
    monotonic: Callable[[], float] = time.monotonic,
) -> PlanResult:
    """Rank the offerings for ``body`` across its regions and say what would be bought, buying nothing.

    Args:
        body: a reservation request as for ``POST /reservations`` (``dry_run`` is forced to true).
        ports: the searches (``ports.sagemaker(region)`` or ``ports.ec2(region)``), the checks of what the
            request names, ``ports.policy`` (and ``ports.iam`` for tag membership) and ``ports.clock``.
        requester: the authenticated caller (IAM principal ARN, ``slack:<user id>``); it replaces the body's
            ``requester`` and picks the team (:func:`~capacity.logic.governance.policy.charged_to`). None: the
            body's.
        time_limit_seconds: no region search starts after this long.
        monotonic: the stopwatch (tests).

    Raises:
        InvalidRequest: the request is invalid (each error names the field).
        NotPermitted: the caller is in no team, or not in the team the body names (403).
    """
    now = ports.clock()
    if requester is not None:
        body = charged_to(body, requester, ports)
    request = parse_request({**body, "dry_run": True}, now=now)
    require_in_scope(request, ports)
    admission = admit(request, ports)
    planned = admission.request if admission else request
    started = monotonic()
    offerings: list[Offering] = []
    quota_errors: dict[str, str] = {}
    searched: list[str] = []
    skipped: dict[str, str] = {}
    # ml.g6.* has no training plan: nothing to search (the workflow runs it on demand only)
    for region in request.regions if reservable(request) else ():
        if monotonic() - started >= time_limit_seconds:
            skipped[region] = f"not searched: the {time_limit_seconds:g} s time limit was reached"
            continue
        try:
            found, quota_error = region_offerings(ports, region, request)
        except RetryableAwsError as exc:  # one region's outage must not hide the others' offerings
            skipped[region] = f"search failed: {exc}; try again later"
            continue
        searched.append(region)
        offerings.extend(found)
        if quota_error:
            quota_errors[region] = quota_error
    checked = searched if reservable(request) else list(request.regions)
    blocked = {r: issues for r in checked if (issues := region_problems(request, ports, r))}
    feasible_regions = {o.region for o in offerings if o.feasible}
    offerings = [o for o in offerings if o.region not in blocked]
    plan, refusal = judge_plan(decide(planned, offerings, quota_errors=quota_errors), admission, ports)
    next_look_at, look_note = (None, "")
    if request.search_until is not None and may_look_again(plan, refusal):
        next_look_at, look_note = dry_run_note(request, now)
    # A dry run launches nothing, so on-demand availability is unknown (None): recommend() says the
    # workflow tries on demand first when the strategy and the start allow it.
    recommendation, on_demand = _recommend(planned, offerings, admission, ports, now)
    reason = plan.reason
    decision = plan.decision.value
    if not reservable(request):
        reason = f"Nothing to reserve: {recommendation.reason}"
        if refusal:
            reason = f"{refusal}. {reason}"
    if feasible_regions and feasible_regions <= set(blocked):
        decision = NOT_DEPLOYABLE
        reason = f"Would buy nothing: {not_deployable(request, blocked)}"
    elif blocked:
        reason += f" {not_considered(blocked)}"
    if skipped:
        reason += " Not searched: " + "; ".join(f"{r} ({why})" for r, why in skipped.items()) + "."
    reason += look_note
    threshold = planned.approval_above_usd
    approval_needed = (
        decision == Decision.DRY_RUN.value
        and plan.offering is not None
        and needs_approval(plan.offering.upfront_fee_usd, threshold)
    )
    return PlanResult(
        request_id=request.id,
        decision=decision,
        reason=reason,
        recommendation=plan.offering if decision != NOT_DEPLOYABLE else None,
        needs_approval=approval_needed,
        offerings=rank(offerings, request.regions)[:MAX_RANKED],
        offerings_considered=plan.considered,
        alternatives=list(plan.alternatives),
        quota_errors=quota_errors,
        regions_searched=searched,
        regions_not_searched=skipped,
        unusable_regions={r: "; ".join(p.message for p in issues) for r, issues in blocked.items()},
        advice=_advice(recommendation, on_demand),
        team=_team_check(admission, refusal, ports),
        next_look_at=next_look_at,
        right_size=_right_size(
            request,
            offerings,
            ports,
            regions=searched,
            blocked=set(blocked),
            started=started,
            monotonic=monotonic,
        ),
    )


def _right_size(
    request: ReservationRequest,
    offerings: list[Offering],
    ports: Ports,
    *,
    regions: list[str],
    blocked: set[str],
    started: float,
    monotonic: Callable[[], float],
) -> RightSizing | None:
    """The candidates simulated on the request's load, each with the cheapest feasible fee of its count in
    the regions searched (a search per other count, within the time limit), and the answer in words."""
    if request.load is None:
        return None
    sizing = request.sizing or request.simulate_load(request.load)
    fees: dict[int, Decimal] = {}
    for candidate in sizing.candidates:
        count = candidate.instance_count
        if count == request.instance_count:
            found = offerings
        else:
            found = []
            counted = request.model_copy(update={"instance_count": count})
            for region in regions:
                if region in blocked or monotonic() - started >= PLAN_TIME_LIMIT_SECONDS:
                    continue
                try:
                    found.extend(region_offerings(ports, region, counted)[0])
                except RetryableAwsError:
                    continue  # that count's fee stays unknown; the main answer already says the region
        feasible = [o.upfront_fee_usd for o in found if o.feasible and o.region not in blocked]
        if feasible:
            fees[count] = min(feasible)
    candidates = [
        item.model_copy(update={"upfront_fee_usd": fees.get(item.instance_count)})
        for item in sizing.candidates
    ]
    priced = sizing.model_copy(update={"candidates": candidates})
    return priced.model_copy(update={"text": describe(priced, fees)})


def _recommend(
    planned: ReservationRequest,
    offerings: list[Offering],
    admission: Admission | None,
    ports: Ports,
    now: datetime,
) -> tuple[Recommendation, str]:
    """The recommendation and how on demand is judged (``on_demand_check``), on demand's cost weighed against
    what the team has left this month (:func:`~capacity.logic.governance.policy.left_in_month`; no team:
    not)."""
    team_left = None
    if admission is not None and admission.team is not None:
        team_left = TeamLeft(*left_in_month(ports, admission.team, now))
    recommendation = recommend(planned, offerings, now=now, on_demand_available=None, team_left=team_left)
    return recommendation, on_demand_check(planned, now, team_left=team_left)


def _team_check(admission: Admission | None, refusal: str | None, ports: Ports) -> TeamCheck | None:
    if admission is None:
        return None
    check = TeamCheck(
        team=admission.team.name if admission.team else None,
        problems=list(admission.problems),
        approval_above_usd=admission.request.approval_above_usd,
        refusal=refusal,
    )
    if admission.team is None:
        return check
    left, sentence = left_in_month(ports, admission.team, ports.clock())
    return check.model_copy(update={"left_usd": left, "left": sentence})
