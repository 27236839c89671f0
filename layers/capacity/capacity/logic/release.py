"""Step 9, ``release_capacity``: delete what the reservation created, verify, report the cost.

Order (AWS_FACTS.md; issue 4): stop scale-out first (``delete_scaling``: delete the components' scaling
policies and deregister their scalable targets, so nothing scales a component while it is deleted), then
``delete_alarms`` (every alarm under the reservation's alarm prefix, so no alarm starts a copy again), then
inference components, then the endpoint (SageMaker refuses to delete an endpoint
that still hosts components, or one that is ``Creating``/``Updating``), then the endpoint config (refused
while an endpoint uses it). Each action is idempotent; the state machine loops on ``remaining`` /
``next_wait_seconds`` and retries :class:`~capacity.errors.ResourceBusy`. The polls of
``delete_components`` and ``delete_endpoint`` back off (30 s doubling to 300 s, by ``attempt``) and stop
after :data:`MAX_POLL_ATTEMPTS` (about two hours) with :class:`~capacity.errors.ReleaseStuck`, naming
what is still billing, so the workflow's ``Catch`` tells a person instead of polling forever.

Exactly one ``RELEASED`` entry even when two releases race: ``finish`` puts a conditional ``RELEASED``
marker item first; only its writer records the state, puts ``ReservationReleased`` and posts the
summary. ``begin`` answers ``already_released`` on that marker only when nothing of the reservation still
exists (:func:`still_billing`): a deployment step that created something after a release's pass puts a new
``ReleaseRequested`` (:func:`~capacity.logic.common.stop_if_released`), and that release deletes it.
A reservation that never bought anything has nothing to release: every action is a no-op.

Re-entrant with a reserve workflow still deploying: ``delete_endpoint`` deletes components that appeared
after ``delete_components`` (and waits), and ``finish`` removes scaling and alarms once more (a deployment
may have put them after ``delete_scaling``) before it verifies that nothing of the reservation is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from botocore.exceptions import ClientError

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts import ReleaseInput, ReleaseOutput, StepError, backoff_seconds
from capacity.errors import FieldError, InvalidRequest, LeftoverResources, ReleaseStuck, ResourceBusy
from capacity.jsonsafe import check_depth
from capacity.ledger import RELEASED_MARKER
from capacity.logic.capacity_blocks import live_instances, release_block
from capacity.logic.common import Purchase, load_purchase, post, states
from capacity.logic.ending import record_released
from capacity.logic.notify import readable_reason, report_release_failure
from capacity.logic.purchase import reconcile_purchase
from capacity.logic.scaling import delete_alarms, scaling_leftovers, stop_scaling
from capacity.models import (
    CostSummary,
    ReleaseRequestedDetail,
    State,
    parse_model,
)
from capacity.naming import (
    alarm_prefix,
    base_name,
    endpoint_config_name,
    endpoint_name,
    inference_component_name,
    release_retry_schedule_name,
)
from capacity.ports import Ports, SageMakerPort
from capacity.timeutil import parse_utc

logger = logging.getLogger(__name__)

POLL_SECONDS = 30
MAX_POLL_SECONDS = 300
# Waits of 30, 60, 120, 240 then 300 s: 28 polls are about two hours of waiting per deletion.
MAX_POLL_ATTEMPTS = 28
_BUSY_ENDPOINT = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
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
    if (
        purchase is None
        and marker is None
        and step.action == "begin"
        and reconcile_purchase(ports, step.request_id) is not None
    ):
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
    if purchase.platform == "ec2":  # a capacity block: terminate its instances (issue 6)
        return release_block(step, ports, purchase)

    sagemaker = ports.sagemaker(purchase.region)
    if step.action == "begin":
        ledger.append(
            step.request_id,
            State.RELEASING,
            actor=ports.actor,
            detail={"reason": step.reason or "requested"},
            once=True,
        )
        return ReleaseOutput(done=False)
    if step.action == "finish":
        return _finish(step, ports, sagemaker, purchase)
    if step.action in ("delete_scaling", "delete_alarms"):
        output = _stop_scaling_or_alarms(step, ports, purchase)
    else:
        models = _model_names(ports, step.request_id)
        components = [inference_component_name(step.request_id, model) for model in models]
        output = _DELETIONS[step.action](sagemaker, step.request_id, step.attempt, components)
    return output


def still_billing(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """What of the reservation still exists in the purchase's region: instances (``platform`` ``ec2``), or
    inference components, the endpoint, its config, scalable targets, scaling policies and alarms."""
    if purchase.platform == "ec2":
        return [f"instance {i}" for i in live_instances(ports, purchase, request_id)]
    models = _model_names(ports, request_id)
    found = leftovers(ports.sagemaker(purchase.region), request_id, models)
    return found + scaling_leftovers(ports, request_id, models, purchase.region)


def _model_names(ports: Ports, request_id: str) -> list[str]:
    request = ports.ledger.get_request(request_id)
    return [m.name for m in request.models] if request else []


def _poll(attempt: int, request_id: str, still: list[str]) -> ReleaseOutput:
    """Wait and poll again, or raise :class:`ReleaseStuck` once the attempts are used up."""
    if attempt >= MAX_POLL_ATTEMPTS:
        waited = sum(backoff_seconds(a, base=POLL_SECONDS, cap=MAX_POLL_SECONDS) for a in range(attempt))
        raise ReleaseStuck(
            f"release of {request_id} gave up after {attempt} polls (about {waited // 60} minutes); "
            f"still billing: {', '.join(still)}. A person must delete these and check why they are stuck."
        )
    return ReleaseOutput(
        done=False,
        remaining=len(still),
        next_wait_seconds=backoff_seconds(attempt, base=POLL_SECONDS, cap=MAX_POLL_SECONDS),
        attempt=attempt + 1,
    )


def _delete_endpoint_config(
    sagemaker: SageMakerPort, request_id: str, attempt: int = 0, components: Sequence[str] = ()
) -> ReleaseOutput:
    if sagemaker.describe_endpoint(endpoint_name(request_id)) is not None:
        raise ResourceBusy(f"endpoint {endpoint_name(request_id)} still exists; its config must wait")
    sagemaker.delete_endpoint_config(endpoint_config_name(request_id))
    return ReleaseOutput(done=True)


def _delete_components(
    sagemaker: SageMakerPort, request_id: str, attempt: int = 0, components: Sequence[str] = ()
) -> ReleaseOutput:
    """Delete the listed components of the endpoint and the reservation's own ``components`` by name: a
    listing may lag behind a create (eventually consistent), ``DeleteInferenceComponent`` does not (it
    answers not-found only for what does not exist)."""
    listed = sagemaker.list_inference_components(endpoint_name=endpoint_name(request_id))
    for component in listed:
        if component.status == "Deleting":
            continue
        try:
            sagemaker.delete_inference_component(component.name)
        except ResourceBusy as exc:  # still Creating/Updating: counted as remaining, tried again next time
            logger.info("inference component %s busy: %s", component.name, exc)
    # Every listed component still bills, ``Deleting`` ones included, until it is gone from the listing.
    still = [f"inference component {c.name} ({c.status})" for c in listed]
    names = {c.name for c in listed}
    for name in components:
        if name in names:
            continue
        try:
            if sagemaker.delete_inference_component(name):
                still.append(f"inference component {name} (not listed yet)")
        except ResourceBusy:  # it exists and is busy: not listed yet, still billing
            still.append(f"inference component {name} (busy, not listed yet)")
    if not still:
        return ReleaseOutput(done=True)
    return _poll(attempt, request_id, still)


def _delete_endpoint(
    sagemaker: SageMakerPort, request_id: str, attempt: int = 0, components: Sequence[str] = ()
) -> ReleaseOutput:
    name = endpoint_name(request_id)
    listed = sagemaker.list_inference_components(endpoint_name=name)
    if listed:
        # Created after delete_components (a deployment still running): delete them too, then wait.
        _delete_components(sagemaker, request_id, components=components)
        raise ResourceBusy(f"endpoint {name} still hosts {len(listed)} inference component(s)")
    info = sagemaker.describe_endpoint(name)
    if info is None:
        # DescribeEndpoint may lag behind CreateEndpoint; DeleteEndpoint does not: not found means gone.
        if not sagemaker.delete_endpoint(name):
            return ReleaseOutput(done=True)
        return _poll(attempt, request_id, [f"endpoint {name} (not described yet, deleting)"])
    if info.status in _BUSY_ENDPOINT:
        raise ResourceBusy(f"endpoint {name} is {info.status}; SageMaker refuses to delete it now")
    if info.status != "Deleting" and not sagemaker.delete_endpoint(name):
        return ReleaseOutput(done=True)
    return _poll(attempt, request_id, [f"endpoint {name} ({info.status})"])


def leftovers(sagemaker: SageMakerPort, request_id: str, model_names: list[str]) -> list[str]:
    """Endpoints, endpoint configs and inference components of the reservation still present, each named
    with its kind (``endpoint co-x (Deleting)``, ``endpoint config co-x-config``, ``inference component
    co-x-m (InService)``), sorted.

    A resource counts when it carries the tag ``capacity-orchestrator:request-id`` = ``request_id``,
    or (when its tags cannot be read) when it has one of the reservation's deterministic names.
    """
    base = base_name(request_id)
    endpoint, config = endpoint_name(request_id), endpoint_config_name(request_id)
    expected = {endpoint, config, *(inference_component_name(request_id, m) for m in model_names)}

    def ours(name: str, arn: str) -> bool:
        tags = sagemaker.resource_tags(arn)
        return tags.get(TAG_REQUEST_ID) == request_id if tags is not None else name in expected

    def listings() -> Iterator[Callable[[], list[tuple[str, str, str]]]]:
        def components(*, on: str | None = None, named: str | None = None) -> list[tuple[str, str, str]]:
            found = sagemaker.list_inference_components(endpoint_name=on, name_contains=named)
            return [(c.name, c.arn, f"inference component {c.name} ({c.status})") for c in found]

        yield lambda: components(on=endpoint)
        yield lambda: components(named=base)
        yield lambda: [(n, a, f"endpoint {n}") for n, a in sagemaker.list_endpoint_names(base)]
        yield lambda: [(n, a, f"endpoint config {n}") for n, a in sagemaker.list_endpoint_config_names(base)]

    found: dict[str, str] = {}
    for listing in listings():
        try:
            found.update((name, label) for name, arn, label in listing() if ours(name, arn))
        except ClientError as exc:  # an unsupported listing must not hide the direct checks below
            logger.warning("listing for leftovers failed: %s", exc)
    info = sagemaker.describe_endpoint(endpoint)
    if info is not None:
        found[endpoint] = f"endpoint {endpoint} ({info.status})"
    if sagemaker.describe_endpoint_config(config) is not None:
        found[config] = f"endpoint config {config}"
    return sorted(found.values())


def named_leftovers(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """Everything of the reservation that may still bill, each named with its kind (:func:`still_billing`),
    for a person to act on. Best effort: a listing that fails (often the very trouble that failed the
    release) is replaced by what it would have looked for, marked "not checked"."""
    if purchase.platform == "ec2":
        checks: list[tuple[str, Callable[[], list[str]]]] = [
            (
                f"instances tagged {TAG_REQUEST_ID}={request_id} in {purchase.region}",
                lambda: [f"instance {i}" for i in live_instances(ports, purchase, request_id)],
            )
        ]
    else:
        models = _model_names(ports, request_id)
        components = ", ".join(inference_component_name(request_id, m) for m in models)
        checks = [
            (
                f"endpoint {endpoint_name(request_id)}, endpoint config {endpoint_config_name(request_id)}, "
                f"inference components {components or '(none)'} in {purchase.region}",
                lambda: leftovers(ports.sagemaker(purchase.region), request_id, models),
            ),
            (
                f"scalable targets, scaling policies and alarms {alarm_prefix(request_id)}* in "
                f"{purchase.region}",
                lambda: scaling_leftovers(ports, request_id, models, purchase.region),
            ),
        ]
    found: list[str] = []
    for expected, check in checks:
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
    tell this attempt (:func:`~capacity.logic.notify.report_release_failure`, once per ``attempt_id``). The
    workflow then fails, so ``ReleaseFailuresAlarm`` pages operations for every failed attempt.

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


def _stop_scaling_or_alarms(step: ReleaseInput, ports: Ports, purchase: Purchase) -> ReleaseOutput:
    """``delete_scaling`` (policies, then scalable targets) or ``delete_alarms``: stop scale-out first."""
    if step.action == "delete_scaling":
        models = _model_names(ports, step.request_id)
        removed = stop_scaling(ports, step.request_id, models, purchase.region)
    else:
        removed = delete_alarms(ports, step.request_id, purchase.region)
    logger.info("release of %s: %s removed %s", step.request_id, step.action, removed or "nothing")
    return ReleaseOutput(done=True)


def _finish(step: ReleaseInput, ports: Ports, sagemaker: SageMakerPort, purchase: Purchase) -> ReleaseOutput:
    models = _model_names(ports, step.request_id)
    # A deployment racing this release may have put scaling or alarms after delete_scaling/delete_alarms.
    stop_scaling(ports, step.request_id, models, purchase.region)
    delete_alarms(ports, step.request_id, purchase.region)
    left = leftovers(sagemaker, step.request_id, models)
    left += scaling_leftovers(ports, step.request_id, models, purchase.region)
    if left:
        raise LeftoverResources(
            f"release of {step.request_id} left resources tagged with it: {', '.join(left)}"
        )
    return record_released(
        step,
        ports,
        purchase,
        lambda summary, reason: messages.released(summary, request_id=step.request_id, reason=reason),
    )


_DELETIONS: dict[str, Callable[[SageMakerPort, str, int, Sequence[str]], ReleaseOutput]] = {
    "delete_components": _delete_components,
    "delete_endpoint": _delete_endpoint,
    "delete_endpoint_config": _delete_endpoint_config,
}
