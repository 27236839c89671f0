"""The SageMaker teardown (``release_capacity`` for ``platform`` ``sagemaker``).

Order (AWS_FACTS.md; issue 4): stop scale-out first (``delete_scaling``: delete the components' scaling
policies and deregister their scalable targets, so nothing scales a component while it is deleted), then
``delete_alarms`` (every alarm under the reservation's alarm prefix, so no alarm starts a copy again), then
inference components, then the endpoint (SageMaker refuses to delete an endpoint that still hosts
components, or one that is ``Creating``/``Updating``), then the endpoint config (refused while an endpoint
uses it). Each action is idempotent; the state machine loops on ``remaining`` / ``next_wait_seconds`` and
retries :class:`~capacity.errors.ResourceBusy`. The polls of ``delete_components`` and ``delete_endpoint``
back off (30 s doubling to 300 s, by ``attempt``) and stop after :data:`MAX_POLL_ATTEMPTS` (about two hours)
with :class:`~capacity.errors.ReleaseStuck`, naming what is still billing.

Re-entrant with a reserve workflow still deploying: ``delete_endpoint`` deletes components that appeared
after ``delete_components`` (and waits), and ``finish`` removes scaling and alarms once more (a deployment
may have put them after ``delete_scaling``) before it verifies that nothing of the reservation is left.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence

from botocore.exceptions import ClientError

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.errors import LeftoverResources, ReleaseStuck, ResourceBusy
from capacity.lifecycle import Event
from capacity.logic.sagemaker.scaling import delete_alarms, scaling_leftovers, stop_scaling
from capacity.logic.steps.common import Purchase
from capacity.logic.steps.ending import record_released
from capacity.naming import (
    alarm_prefix,
    base_name,
    endpoint_config_name,
    endpoint_name,
    inference_component_name,
)
from capacity.ports import Ports, SageMakerPort

logger = logging.getLogger(__name__)

POLL_SECONDS = 30


MAX_POLL_SECONDS = 300


# Waits of 30, 60, 120, 240 then 300 s: 28 polls are about two hours of waiting per deletion.
MAX_POLL_ATTEMPTS = 28


_BUSY_ENDPOINT = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})


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


def release_endpoint(step: ReleaseInput, ports: Ports, purchase: Purchase) -> ReleaseOutput:
    """One release action for a SageMaker purchase: ``begin`` (records ``RELEASING``), ``delete_scaling``,
    ``delete_alarms``, ``delete_components``, ``delete_endpoint``, ``delete_endpoint_config`` or ``finish``.

    Raises:
        ResourceBusy: the endpoint is ``Creating``/``Updating`` or still has components (retry).
        ReleaseStuck: components or the endpoint still exist after :data:`MAX_POLL_ATTEMPTS` polls.
        LeftoverResources: ``finish`` found resources of the reservation.
    """
    sagemaker = ports.sagemaker(purchase.region)
    if step.action == "begin":
        ports.ledger.record(
            step.request_id,
            Event.START_RELEASE,
            actor=ports.actor,
            detail={"reason": step.reason or "requested"},
        )
        return ReleaseOutput(done=False)
    if step.action == "finish":
        return _finish(step, ports, sagemaker, purchase)
    if step.action in ("delete_scaling", "delete_alarms"):
        return _stop_scaling_or_alarms(step, ports, purchase)
    models = _model_names(ports, step.request_id)
    components = [inference_component_name(step.request_id, model) for model in models]
    return _DELETIONS[step.action](sagemaker, step.request_id, step.attempt, components)


def still_billing(ports: Ports, request_id: str, purchase: Purchase) -> list[str]:
    """Inference components, the endpoint, its config, scalable targets, scaling policies and alarms of the
    reservation still present in the purchase's region, each named."""
    models = _model_names(ports, request_id)
    found = leftovers(ports.sagemaker(purchase.region), request_id, models)
    return found + scaling_leftovers(ports, request_id, models, purchase.region)


def leftover_checks(
    ports: Ports, request_id: str, purchase: Purchase
) -> list[tuple[str, Callable[[], list[str]]]]:
    """What a failed release looks for, named, with the lookup (endpoint resources; scaling and alarms)."""
    models = _model_names(ports, request_id)
    components = ", ".join(inference_component_name(request_id, m) for m in models)
    return [
        (
            f"endpoint {endpoint_name(request_id)}, endpoint config {endpoint_config_name(request_id)}, "
            f"inference components {components or '(none)'} in {purchase.region}",
            lambda: leftovers(ports.sagemaker(purchase.region), request_id, models),
        ),
        (
            f"scalable targets, scaling policies and alarms {alarm_prefix(request_id)}* in {purchase.region}",
            lambda: scaling_leftovers(ports, request_id, models, purchase.region),
        ),
    ]
