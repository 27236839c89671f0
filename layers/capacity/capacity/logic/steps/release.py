"""Step 9, ``release_capacity``: delete what the reservation created, verify, report the cost.

A router by platform: the ``PURCHASE`` item's ``platform`` picks the teardown (its
:class:`~capacity.logic.wings.Wing`'s ``release``:
:mod:`capacity.logic.sagemaker.teardown` deletes scaling, alarms, inference components, the endpoint and its
config; :mod:`capacity.logic.ec2.teardown` terminates the instances; ``begin`` answers the platform and
the workflow runs only that platform's states), and both end in
:func:`capacity.logic.steps.ending.record_released`. Here: the checks every release makes first (a valid
``ReleaseRequested``, an intent reconciled, the ``RELEASED`` marker) and a failed attempt's retry.

Exactly one ``RELEASED`` entry even when two releases race: ``finish`` puts a conditional ``RELEASED``
marker item first; only its writer records the state, puts ``ReservationReleased`` and posts the
summary. ``begin`` answers ``already_released`` on that marker only when nothing of the reservation still
exists (:func:`still_billing`): a deployment step that created something after a release's pass puts a new
``ReleaseRequested`` (:func:`~capacity.logic.steps.common.stop_if_released`), and that release deletes it.
A reservation that never bought anything has nothing to release: every action is a no-op.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from decimal import Decimal

from capacity import messages
from capacity.contracts.common import StepError
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.errors import FieldError, InvalidRequest
from capacity.events import ReleaseRequestedDetail
from capacity.jsonsafe import check_depth
from capacity.logic.continuity import extend
from capacity.logic.steps import payment
from capacity.logic.steps.buy_once import RELEASE_REASON
from capacity.logic.steps.common import Purchase, load_purchase, post, states
from capacity.logic.steps.notify import readable_reason, report_release_failure
from capacity.logic.steps.purchase import reconcile_purchase
from capacity.logic.wings import wing
from capacity.naming import (
    release_retry_schedule_name,
)
from capacity.ports import Ports
from capacity.record_kinds import RELEASED_MARKER
from capacity.records import CostSummary, State
from capacity.timeutil import parse_utc
from capacity.validation import parse_model

logger = logging.getLogger(__name__)

_HOURS = Decimal("0.01")
RETRY_FIRST = timedelta(minutes=10)
RETRY_EVERY = timedelta(hours=1)
RETRY_REASON = "release-retry"
"""``ReleaseRequested`` reason of the attempt scheduled after a failed one."""


def release_capacity(step: ReleaseInput, ports: Ports) -> ReleaseOutput:
    """Run one release action for ``step.request_id``.

    Actions: ``begin`` (records ``RELEASING``; ``already_released`` if it was), ``delete_scaling``,
    ``delete_alarms``, ``delete_components``,
    ``delete_endpoint``, ``delete_endpoint_config``, ``finish`` (verify, record ``RELEASED`` with the
    cost summary, put ``ReservationReleased``, post the summary, delete the release schedule), and
    ``attempt_failed`` (the workflow caught an error: name every leftover, schedule the next attempt,
    record and tell this one; see :func:`_attempt_failed`).

    Raises:
        InvalidRequest: ``begin`` got a ``detail`` that is not a valid ``ReleaseRequested`` detail.
        ResourceBusy: the endpoint is ``Creating``/``Updating`` or still has components (retry).
        ReleaseStuck: components or the endpoint still exist after :data:`MAX_POLL_ATTEMPTS` polls.
        LeftoverResources: ``finish`` found resources of the reservation (components, endpoint, config,
            scalable targets, scaling policies, alarms).
        RetryableAwsError: throttling/5xx after retries.
    """
    if step.action == "attempt_failed":
        return _attempt_failed(step, ports)
    return _release_step(step, ports)


def _release_step(step: ReleaseInput, ports: Ports) -> ReleaseOutput:
    """One deletion, verification or bookkeeping action of :func:`release_capacity`."""
    if step.action == "begin" and step.detail is not None:
        check_depth(step.detail, field="detail")
        detail = parse_model(ReleaseRequestedDetail, step.detail)
        step = step.model_copy(update={"request_id": detail.request_id, "reason": detail.reason})
    if not step.request_id.strip():
        raise InvalidRequest([FieldError("request_id", "is required (a non-empty string)")])
    ledger = ports.ledger
    marker = ledger.get(step.request_id, RELEASED_MARKER)
    purchase = load_purchase(ports, step.request_id)
    # An intent whose Lambda died before recording the purchase (then a cancel, or the end): ask AWS by the
    # deterministic name or tag, so what was bought is recorded, scheduled and released.
    # A purchase whose money entry is not recorded yet is recorded now too (the release waits for money in
    # flight: capacity.lifecycle).
    if marker is None and step.action == "begin" and reconcile_purchase(ports, step.request_id) is not None:
        purchase = load_purchase(ports, step.request_id)
    # Released already: done, unless a deployment that raced the release created something after its
    # pass (it puts ReleaseRequested again): then this release deletes it; ``finish`` keeps one RELEASED.
    if marker is not None and (step.action == "begin" or purchase is None):
        left = still_billing(ports, step.request_id, purchase) if purchase is not None else []
        if not left:
            summary = CostSummary.model_validate(marker["summary"]) if marker.get("summary") else None
            return ReleaseOutput(done=True, already_released=True, summary=summary)
        logger.warning("%s was released but still has %s: releasing again", step.request_id, ", ".join(left))
    if purchase is None:
        logger.info("release of %s: nothing was bought, nothing to release", step.request_id)
        return ReleaseOutput(done=True)
    if step.action == "begin" and marker is None:
        waiting = _money_in_flight(step, ports, purchase)
        if waiting is not None:
            return waiting
    output = wing(purchase.platform).release(step, ports, purchase)
    if step.action == "begin":  # the workflow's ``Platform?`` branches on it: only this platform's states run
        output = output.model_copy(update={"platform": purchase.platform})
    return output


def _money_in_flight(step: ReleaseInput, ports: Ports, purchase: Purchase) -> ReleaseOutput | None:
    """A release never deletes what an extension in flight pays for: before ``RELEASING``, every extension
    whose AWS call may have committed is reconciled
    (:func:`~capacity.logic.continuity.extend.settle_in_flight`); while a payment is pending before AWS's
    deadline the workflow waits (``payment_wait_seconds``) and begins again; so it does while the purchase's
    own payment is (:func:`~capacity.logic.steps.payment.unsettled`: a failed one is recorded voided, and
    ``RELEASED`` gives its fee back). A payment that landed moved the end and the release schedule: the
    release of the old end (``reservation-end``) is then ``postponed`` and the reservation serves to the new
    end; any other
    release (a cancel, a roll-over, a failure) goes on, the fee recorded with ``EXTENDED`` first. None:
    go on now."""
    if State.RELEASING in states(ports.ledger.history(step.request_id)):
        return None  # begun already (a retried begin): the deletions go on
    now = ports.clock()
    wakes = [
        extend.settle_in_flight(ports, step.request_id),
        payment.unsettled(ports, step.request_id, purchase),
    ]
    wake = min((at for at in wakes if at is not None), default=None)
    if wake is None and ports.ledger.snapshot(step.request_id).in_flight:
        wake = now + extend.PAYMENT_POLL  # a call not reconciled yet (its step retries): look again soon
    if wake is not None:
        logger.info("release of %s waits for an extension payment until %s", step.request_id, wake)
        seconds = max(1, int((wake - now).total_seconds()))
        return ReleaseOutput(done=False, payment_wait_seconds=seconds, platform=purchase.platform)
    if step.reason == RELEASE_REASON:
        request = ports.ledger.get_request(step.request_id)
        moved = load_purchase(ports, step.request_id)
        if request is not None and moved is not None:
            release_at = moved.end_time - extend.release_margin(request)
            if release_at > now + POSTPONE_TOLERANCE:
                logger.info("release of %s postponed to %s (extended)", step.request_id, release_at)
                return ReleaseOutput(done=True, postponed=True, platform=purchase.platform)
    return None


POSTPONE_TOLERANCE = timedelta(minutes=5)
"""A ``reservation-end`` release that fires earlier than this before the (extended) end's release moment is
postponed to it (its schedule moved with the extension)."""


def still_billing(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """What of the reservation still exists in the purchase's region: instances (``platform`` ``ec2``), or
    inference components, the endpoint, its config, scalable targets, scaling policies and alarms."""
    return wing(purchase.platform).still_billing(ports, request_id, purchase)


def named_leftovers(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """Everything of the reservation that may still bill, each named with its kind (:func:`still_billing`),
    for a person to act on. Best effort: a listing that fails (often the very trouble that failed the
    release) is replaced by what it would have looked for, marked "not checked"."""
    found: list[str] = []
    for expected, check in wing(purchase.platform).leftover_checks(ports, request_id, purchase):
        try:
            found.extend(check())
        except Exception as exc:
            found.append(f"{expected} (not checked: {exc})")
    return found


def retry_delay(attempt: int) -> timedelta:
    """How long after failed attempt ``attempt`` (1, 2, ...) the release is tried again: 10, 20, 40
    minutes, then every hour, for as long as it fails (something may still bill)."""
    delay: timedelta = min(RETRY_FIRST * 2 ** min(max(attempt - 1, 0), 8), RETRY_EVERY)
    return delay


def _attempt_failed(step: ReleaseInput, ports: Ports) -> ReleaseOutput:
    """``attempt_failed``: the workflow caught ``step.error`` (after its retries). Releases retry until
    nothing bills (issue 13, defect 4): name every leftover (:func:`named_leftovers`), schedule the next
    attempt (``co-<id>-retry-<n>``, ``ReleaseRequested`` at ``now +`` :func:`retry_delay`), then record and
    tell this attempt (:func:`~capacity.logic.steps.notify.report_release_failure`, once per ``attempt_id``).
    The workflow then fails, so ``ReleaseFailuresAlarm`` pages operations for every failed attempt.

    A release request that named no reservation (``InvalidRequest``) is only reported: nothing to retry.
    """
    error = step.error or StepError(Error="States.TaskFailed")
    if not step.request_id or error.Error == "InvalidRequest":
        who = step.request_id or "(no request_id)"
        post(ports, messages.release_rejected(who, reason=readable_reason(error)))
        return ReleaseOutput(done=True)
    request_id = step.request_id
    purchase = load_purchase(ports, request_id)
    left = named_leftovers(ports, request_id, purchase) if purchase is not None else []
    history = ports.ledger.history(request_id)
    failed = [e for e in history if e.state is State.FAILED and e.detail.get("phase") == "release"]
    mine = next((e for e in failed if e.detail.get("attempt_id") == step.attempt_id), None)
    attempt = int(mine.detail.get("attempt") or 0) if mine is not None else len(failed) + 1
    retry_at: datetime | None = None
    if purchase is not None and State.RELEASED not in states(history):
        retry_at = ports.clock() + retry_delay(attempt)
        created = ports.scheduler.schedule_release(
            name=release_retry_schedule_name(request_id, attempt),
            at=retry_at,
            request_id=request_id,
            reason=RETRY_REASON,
        )
        if not created and mine is not None and mine.detail.get("retry_at"):  # a retried task: keep its time
            retry_at = parse_utc(str(mine.detail["retry_at"]))
    report_release_failure(
        ports,
        request_id,
        error=error,
        attempt_id=step.attempt_id,
        attempt=attempt,
        leftovers=left,
        retry_at=retry_at,
    )
    return ReleaseOutput(done=False, remaining=len(left), attempt=attempt, leftovers=left, retry_at=retry_at)
