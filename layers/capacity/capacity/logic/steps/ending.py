"""The shared ending of every release (training plan, capacity block, on demand, spot): the ``RELEASED``
marker, entry, event, schedule clean-up and summary post, exactly once.

Both platform teardowns (:mod:`capacity.logic.sagemaker.teardown`, :mod:`capacity.logic.ec2.teardown`) end
here once nothing of the reservation is left; it imports neither, so the layer has no circle.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from capacity import money_metrics
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.events import ReservationReleasedDetail
from capacity.lifecycle import Event
from capacity.logic.continuity.attempts import live_hold_key
from capacity.logic.continuity.chain import retire_endpoint
from capacity.logic.governance.costs import release_summary, reservation_spend
from capacity.logic.governance.on_demand_spend import settle_on_demand
from capacity.logic.governance.policy import give_back
from capacity.logic.steps.common import Purchase, first_entry, post
from capacity.logic.steps.forwarding import retire_forwarding
from capacity.logic.steps.payment import refund
from capacity.naming import release_schedule_name
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE_VOIDED, RELEASED_MARKER
from capacity.records import CostSummary, State
from capacity.resources import SlackMessage

logger = logging.getLogger(__name__)


def record_released(
    step: ReleaseInput,
    ports: Ports,
    purchase: Purchase,
    message: Callable[[CostSummary, str | None], SlackMessage],
) -> ReleaseOutput:
    """The end of every release (training plan, capacity block, on demand, spot), once nothing of the
    reservation is left: the cost summary (:func:`~capacity.logic.governance.costs.release_summary`: on-demand
    prices for ``market`` ``on-demand``/``spot``), the team's hold returned to its quota (and for on demand or
    spot settled to the summary's cost of what ran,
    :func:`~capacity.logic.governance.on_demand_spend.settle_on_demand`), the chain's endpoint parameter
    retired when nothing it could name serves (:func:`~capacity.logic.continuity.chain.retire_endpoint`), then
    exactly once (the conditional ``RELEASED`` marker item) the ``ReservationReleased`` event, the
    ``RELEASED`` ledger entry, the deletion of the release schedule and the Slack post ``message(summary,
    reason)``.

    A marker without ``RELEASED`` (the release that wrote it died before recording it) is finished here:
    the event, ``RELEASED`` with the stored summary, the schedule and the post.

    Returns:
        ``done`` with the summary; ``already_released`` with the stored summary when another release wrote
        the marker and recorded ``RELEASED`` first.
    """
    history = ports.ledger.history(step.request_id)
    releasing = first_entry(history, State.RELEASING)
    reason = step.reason or (str(releasing.detail.get("reason")) if releasing else None)
    summary = release_summary(step.request_id, purchase, history, now=ports.clock(), ports=ports)
    # Nothing of it is left: its instances no longer count against the team's quota (the money stays spent,
    # unless AWS charged nothing). Before the marker, so a retry after a failure here gives them back too.
    voided_item = ports.ledger.get(step.request_id, PURCHASE_VOIDED)
    voided = voided_item is not None
    give_back(
        ports, live_hold_key(ports, step.request_id), money=voided, quota=True
    )  # the attempt that bought
    if purchase.market in ("on-demand", "spot"):  # held before the launch: now what ran, instances back
        settle_on_demand(ports, step.request_id, summary.on_demand_equivalent_served_usd)
    # Clients must not be told a deleted endpoint is current: the chain's parameter goes once nothing it
    # could name serves (before the marker, so a retry after a failure here deletes it too).
    retire_endpoint(ports, step.request_id)
    created, item = ports.ledger.put_once(
        step.request_id,
        RELEASED_MARKER,
        {"actor": ports.actor, "reason": reason, "summary": summary.model_dump(mode="json")},
    )
    if not created:
        stored = CostSummary.model_validate(item["summary"]) if item.get("summary") else None
        if stored is None or first_entry(history, State.RELEASED) is not None:
            return ReleaseOutput(done=True, already_released=True, summary=stored)
        # The marker is there but not RELEASED: the release that wrote it died before recording it (a killed
        # Lambda, a failed write). Finish its bookkeeping with what it stored; the event may go twice.
        reason, summary = item.get("reason"), stored
    request = ports.ledger.get_request(step.request_id)
    money_metrics.released(
        request.team if request else None,
        utilisation_percent=summary.utilisation_percent,
        on_demand_used_usd=summary.on_demand_equivalent_served_usd,
    )
    ports.events.put(
        "ReservationReleased",
        ReservationReleasedDetail(request_id=step.request_id, reason=reason, summary=summary),
        resources=[purchase.arn],
    )
    ports.ledger.record(
        step.request_id,
        Event.FINISH_RELEASE,
        actor=ports.actor,
        detail={"reason": reason, "summary": summary.model_dump(mode="json")},
        # AWS charged nothing after all (a payment that failed once the release began): the fee comes back
        money_usd=refund(history, voided_item),
        # its figures are final now: the costs rollup closes it with them, as GET /costs shows them (issue 31)
        spend=reservation_spend(ports, step.request_id, now=ports.clock()),
    )
    try:  # released early (expiry warning, cancel, failure): the end-of-reservation schedule is not needed
        ports.scheduler.delete(release_schedule_name(step.request_id))
    except Exception as exc:  # the schedule firing later is harmless: release answers already_released
        logger.warning("could not delete the release schedule of %s: %s", step.request_id, exc)
    try:  # the last reservation of another region no longer needs its events forwarded
        retire_forwarding(ports, purchase.region)
    except Exception as exc:  # a forwarding rule left behind forwards a few events for nothing: harmless
        logger.warning("could not retire the forwarding rule of %s: %s", purchase.region, exc)
    post(ports, message(summary, reason))
    return ReleaseOutput(done=True, summary=summary)
