"""Step 3, ``choose_offering``: rank the stored offerings, decide, record, tell people.

Only offerings in regions where what the request names exists (``model_name`` models, the launch template
and its version, an allowed instance role: :mod:`capacity.logic.governance.checks`) are considered; when every
region with a feasible offering fails that check the step raises ``ModelNotFound``/``LaunchTemplateNotFound``
(recorded ``FAILED`` by the workflow) before anyone is asked to approve.

Records (once, so a retried step does not duplicate): ``FAILED`` for ``NO_OFFERING`` (reason with the
nearest alternatives or the quota problem, and why on demand was not launched when its team refused it:
``ON_DEMAND_REFUSED``); otherwise ``PLANNED`` with the top offerings and the reason,
followed by ``REJECTED`` when over budget. ``PLANNED`` is written only while no ``OUTCOME`` exists (one
transaction), so a DELETE landing after the step's cancel check cannot leave ``PLANNED`` after ``CANCELLED``.
Posts the offerings table and the decision to Slack and puts ``ReservationPlanned`` (and
``ReservationFailed`` for ``NO_OFFERING``).

A request that keeps looking (``search_until``, issue 17) and finds nothing that fits the rules before its
deadline records ``SEARCHING`` instead and answers ``SEARCH_AGAIN`` with the next look
(:mod:`capacity.logic.continuity.keep_looking`); at the deadline the last look's plan is recorded as above,
its reason saying how long it looked, and ``NO_OFFERING`` ends with the error ``SearchDeadlinePassed``.
"""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import datetime

from capacity import messages
from capacity.contracts.finding import ChooseInput, ChooseOutput
from capacity.errors import ReservationCancelled
from capacity.events import ReservationFailedDetail, ReservationPlannedDetail
from capacity.lifecycle import Event
from capacity.logic.continuity.keep_looking import look_again, successor_name
from capacity.logic.governance.checks import deployable_offerings, not_considered
from capacity.logic.governance.on_demand_spend import refused_on_demand
from capacity.logic.governance.policy import admit, judge_plan
from capacity.logic.steps.common import load_request, post, states
from capacity.planner import Decision, Plan, decide
from capacity.ports import Ports
from capacity.ranking import rank
from capacity.records import State
from capacity.request import ReservationRequest


def choose_offering(step: ChooseInput, ports: Ports) -> ChooseOutput:
    """Decide what to buy for ``step.request_id`` from every offering the searches stored.

    Returns:
        The decision, the reason, the chosen offering (small form) and the approval timeout (seconds).

    Raises:
        ReservationNotFound: the request is not recorded.
        ReservationCancelled: the reservation was cancelled before the choice.
        ModelNotFound, LaunchTemplateNotFound: every region with a feasible offering lacks what the request
            names (nothing is planned, nobody is asked to approve, nothing is bought).
    """
    request = load_request(ports, step.request_id)
    history = ports.ledger.history(request.id)
    seen = states(history)
    if State.CANCELLED in seen:
        raise ReservationCancelled(f"reservation {request.id} was cancelled before an offering was chosen")

    offerings = ports.offerings.list(request.id, look=step.look)
    quota_errors = {s.region: s.quota_error for s in step.searches if s.quota_error}
    # Before anyone is asked to approve or anything is bought: only regions where what the request names
    # exists (models, launch template) may be chosen (issue 13, defect 10).
    offerings, blocked = deployable_offerings(request, ports, offerings)
    # Admins' limits, not the requester's (issue 16): the team's types, regions, quota, budget and threshold.
    admission = admit(request, ports)
    plan = decide(admission.request if admission else request, offerings, quota_errors=quota_errors)
    if blocked:
        plan = replace(plan, reason=f"{plan.reason} {not_considered(blocked)}")
    plan, refusal = judge_plan(plan, admission, ports)
    rejection = "TeamLimitExceeded" if refusal else "BudgetExceeded"
    looking = look_again(ports, request, plan, refusal, history, look=step.look)
    if looking.upcoming is not None:  # nothing fits yet: SEARCHING is recorded, the workflow waits
        waited = replace(plan, decision=Decision.SEARCH_AGAIN, offering=None)
        return _answer(request, step, waited, looking.upcoming.at, now=ports.clock())
    plan, error = looking.plan, looking.error
    refused = refused_on_demand(ports, request.id)
    if refused is not None and plan.decision in (Decision.NO_OFFERING, Decision.REJECTED):
        # Why on demand did not serve it either: its team refused the on-demand hold (issue 28, point 6).
        plan = replace(plan, reason=f"{plan.reason} On demand was not launched: {refused}.")
    summary = plan.offering.summary() if plan.offering else None

    if plan.decision is Decision.NO_OFFERING:
        first = State.FAILED not in seen
        if first:
            ports.events.put(
                "ReservationPlanned",
                ReservationPlannedDetail(
                    request_id=request.id,
                    decision=plan.decision.value,
                    reason=plan.reason,
                    offering=None,
                    offerings_considered=plan.considered,
                ),
            )
            ports.events.put(
                "ReservationFailed",
                ReservationFailedDetail(request_id=request.id, error=error, reason=plan.reason),
            )
        written = ports.ledger.record(
            request.id,
            Event.FAIL,
            actor=ports.actor,
            detail={
                "error": error,
                "decision": plan.decision.value,
                "reason": plan.reason,
                "alternatives": [o.summary().model_dump(mode="json") for o in plan.alternatives],
                "quota_errors": dict(plan.quota_errors),
            },
        )
        if written is not None:
            post(ports, messages.offerings_table(request, plan, []))
            post(ports, messages.decision(request, plan))
    else:
        first = State.PLANNED not in seen
        if first:
            ports.events.put(
                "ReservationPlanned",
                ReservationPlannedDetail(
                    request_id=request.id,
                    decision=plan.decision.value,
                    reason=plan.reason,
                    offering=summary,
                    offerings_considered=plan.considered,
                ),
            )
        written = ports.ledger.record(
            request.id,
            Event.PLAN,
            actor=ports.actor,
            detail={
                "decision": plan.decision.value,
                "reason": plan.reason,
                "offering": summary.model_dump(mode="json") if summary else None,
                "top": [o.model_dump(mode="json") for o in plan.top],
                "considered": plan.considered,
                "quota_errors": dict(plan.quota_errors),
            },
        )
        if plan.decision is Decision.REJECTED:
            ports.ledger.record(
                request.id,
                Event.REJECT,
                actor=ports.actor,
                detail={"error": rejection, "reason": plan.reason},
            )
        if written is not None:
            post(ports, messages.offerings_table(request, plan, rank(offerings, request.regions)))
            post(ports, messages.decision(request, plan))

    return _answer(request, step, plan, looking.next_look_at)


def _answer(
    request: ReservationRequest,
    step: ChooseInput,
    plan: Plan,
    next_look_at: datetime | None,
    *,
    now: datetime | None = None,
) -> ChooseOutput:
    """The step's answer for ``plan``; with ``now``, a wait until ``next_look_at`` (``SEARCH_AGAIN``: at least
    a second, the ``SearchLater`` task's timeout)."""
    wait = max(1, math.ceil((next_look_at - now).total_seconds())) if now and next_look_at else 0
    return ChooseOutput(
        decision=plan.decision.value,
        reason=plan.reason,
        offering=plan.offering.summary() if plan.offering else None,
        approval_timeout_seconds=request.approval_timeout_hours * 3600,
        look=step.look,
        next_look=step.look + 1,
        next_look_at=next_look_at,
        wait_seconds=wait,
        continue_as=successor_name(request, step.look + 1) if wait else None,
    )
