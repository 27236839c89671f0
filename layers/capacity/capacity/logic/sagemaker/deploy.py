"""Steps 7 and 8: the endpoint on the training plan, then one inference component per model.

Endpoint config (AWS_FACTS.md "Endpoints on a training plan"; seed 004): one production variant
**without** ``ModelName`` (required for inference components), ``InstanceType`` and
``InitialInstanceCount`` of the plan, ``CapacityReservationConfig`` {``MlReservationArn``: the plan ARN,
``CapacityReservationPreference``: ``capacity-reservations-only``}, ``ManagedInstanceScaling``
{``ENABLED``, ``MinInstanceCount`` 0 only if every model may scale to 0 copies, ``MaxInstanceCount`` the
plan's count}, ``RoutingConfig`` ``LEAST_OUTSTANDING_REQUESTS``, and ``ExecutionRoleArn``.

Inference components (``CreateInferenceComponent``): ``Specification`` with ``Container`` {``Image``,
``ArtifactUrl``} (no SageMaker Model needed) or ``ModelName``, ``ComputeResourceRequirements`` from the
request, ``RuntimeConfig.CopyCount`` = max(1, initial) (zero is reached by scaling, never at creation).

Scaling (issue 4, :mod:`capacity.logic.sagemaker.scaling`): once every component is ``InService`` and before
``READY``, each component is registered with Application Auto Scaling (``MinCapacity`` = ``copies.min``,
0 included; ``MaxCapacity`` = ``copies.max``) with a target-tracking policy on
``SageMakerInferenceComponentInvocationsPerCopy``, and the scale-to-zero / scale-from-zero / idle-release
alarms are put.

Every create is idempotent: an existing resource with the deterministic name is adopted. The ledger is read
again after the creates (:func:`~capacity.logic.steps.common.stop_if_released`): when a cancel or a release
was recorded meanwhile, a new ``ReleaseRequested`` deletes what was created and the step raises
``ReservationCancelled``, so nothing outlives a cancel.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from capacity import messages
from capacity.contracts.common import backoff_seconds
from capacity.contracts.serving import ComponentsInput, ComponentsOutput, EndpointInput, EndpointOutput
from capacity.errors import ComponentFailed, EndpointFailed, ResourceBusy
from capacity.events import ReservationReadyDetail
from capacity.lifecycle import Event
from capacity.logic.governance.costs import record_usage
from capacity.logic.sagemaker.scaling import setup_scaling
from capacity.logic.steps.common import (
    ensure_owned,
    first_entry,
    load_request,
    post,
    require_purchase,
    stop_if_released,
)
from capacity.logic.steps.ready import record_ready
from capacity.naming import VARIANT_NAME, endpoint_config_name, endpoint_name, inference_component_name
from capacity.ports import Ports
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.request_parts import ModelSpec
from capacity.resources import tags_for

ENDPOINT_DEADLINE = timedelta(minutes=90)
COMPONENTS_DEADLINE = timedelta(hours=2)


def production_variant(request: ReservationRequest, plan_arn: str) -> dict[str, Any]:
    """The endpoint config's single production variant (no ``ModelName``: it hosts inference components)."""
    return {
        "VariantName": VARIANT_NAME,
        "InstanceType": request.instance_type,
        "InitialInstanceCount": request.instance_count,
        "CapacityReservationConfig": {
            "MlReservationArn": plan_arn,
            "CapacityReservationPreference": "capacity-reservations-only",
        },
        "ManagedInstanceScaling": {
            "Status": "ENABLED",
            "MinInstanceCount": request.min_instance_count,
            "MaxInstanceCount": request.instance_count,
        },
        "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
    }


def component_specification(model: ModelSpec) -> dict[str, Any]:
    """``CreateInferenceComponent.Specification`` for one model.

    ``NumberOfAcceleratorDevicesRequired`` (min 1 in the API) is left out for CPU-only models.
    """
    requirements: dict[str, Any] = {
        "MinMemoryRequiredInMb": model.memory_mb,
        "NumberOfCpuCoresRequired": float(model.cpu_cores),
    }
    if model.accelerators >= 1:
        requirements["NumberOfAcceleratorDevicesRequired"] = float(model.accelerators)
    spec: dict[str, Any] = {"ComputeResourceRequirements": requirements}
    if model.model_name is not None:
        spec["ModelName"] = model.model_name
    else:
        container: dict[str, Any] = {"Image": model.image}
        if model.model_data_url:
            container["ArtifactUrl"] = model.model_data_url
        spec["Container"] = container
    return spec


def _guard(ports: Ports, request_id: str) -> list[Any]:
    return stop_if_released(ports, request_id, "deploying")


def create_endpoint(step: EndpointInput, ports: Ports) -> EndpointOutput:
    """``create``: endpoint config + endpoint (adopted if they exist), records ``DEPLOYING``;
    ``status``: one ``DescribeEndpoint``.

    Raises:
        ReservationNotFound: request or purchase not recorded.
        ReservationCancelled: the release already started.
        EndpointFailed: ``Failed`` (with ``FailureReason``), gone, or not ``InService`` 90 minutes after
            ``DEPLOYING``.
        ConfigurationError: ``ENDPOINT_EXECUTION_ROLE_ARN`` missing.
    """
    request = load_request(ports, step.request_id)
    purchase = require_purchase(ports, request.id)
    sagemaker = ports.sagemaker(purchase.region)
    name, config = endpoint_name(request.id), endpoint_config_name(request.id)
    wait = backoff_seconds(step.attempt, base=30, cap=300)

    if step.action == "create":
        _guard(ports, request.id)
        role = ports.settings.need("endpoint_execution_role_arn")
        existing_config = sagemaker.describe_endpoint_config(config)
        if existing_config is not None and existing_config.get("EndpointConfigArn"):
            ensure_owned(sagemaker, str(existing_config["EndpointConfigArn"]), request.id, "endpoint config")
        if existing_config is None:
            sagemaker.create_endpoint_config(
                name=config,
                variant=production_variant(request, purchase.arn),
                execution_role_arn=role,
                tags=tags_for(request.id),
            )
        info = sagemaker.describe_endpoint(name)
        if info is not None:
            ensure_owned(sagemaker, info.arn, request.id, "endpoint")
        if info is None:
            sagemaker.create_endpoint(name=name, config_name=config, tags=tags_for(request.id))
            info = sagemaker.describe_endpoint(name)
        # A cancel during the creates (a throttling back-off) may have released before they existed.
        _guard(ports, request.id)
        ports.ledger.record(
            request.id,
            Event.DEPLOY,
            actor=ports.actor,
            detail={"endpoint_name": name, "endpoint_config_name": config, "region": purchase.region},
        )
        status = info.status if info else "Creating"
        if info is not None and status == "Failed":
            raise EndpointFailed(f"endpoint {name} failed: {info.failure_reason or 'no reason given'}")
        return EndpointOutput(
            endpoint_name=name, status=status, next_wait_seconds=wait, attempt=step.attempt + 1
        )

    info = sagemaker.describe_endpoint(name)
    if info is None:
        history = _guard(ports, request.id)  # deleted by a release that started meanwhile: not a failure
        deploying = first_entry(history, State.DEPLOYING)
        if deploying is not None and ports.clock() <= deploying.at + ENDPOINT_DEADLINE:
            # DescribeEndpoint may lag behind CreateEndpoint (eventually consistent): not visible yet.
            return EndpointOutput(
                endpoint_name=name, status="Creating", next_wait_seconds=wait, attempt=step.attempt + 1
            )
        raise EndpointFailed(f"endpoint {name} does not exist in {purchase.region}")
    if info.status == "Failed":
        raise EndpointFailed(f"endpoint {name} failed: {info.failure_reason or 'no reason given'}")
    if info.status != "InService":
        deploying = first_entry(ports.ledger.history(request.id), State.DEPLOYING)
        if deploying is not None and ports.clock() > deploying.at + ENDPOINT_DEADLINE:
            raise EndpointFailed(
                f"endpoint {name} is still {info.status} 90 minutes after its creation; giving up"
            )
    return EndpointOutput(
        endpoint_name=name, status=info.status, next_wait_seconds=wait, attempt=step.attempt + 1
    )


def _missing_components(ports: Ports, request_id: str, endpoint: str, missing: list[str]) -> None:
    """Components created but not described: DescribeInferenceComponent may lag behind the create
    (eventually consistent), so they count as not visible yet until the components' deadline.

    Raises:
        ReservationCancelled: a release started meanwhile (and deleted them): not a failure.
        ComponentFailed: still missing :data:`COMPONENTS_DEADLINE` after ``DEPLOYING``.
    """
    history = _guard(ports, request_id)
    deploying = first_entry(history, State.DEPLOYING)
    if deploying is None or ports.clock() > deploying.at + COMPONENTS_DEADLINE:
        raise ComponentFailed(f"inference component(s) {', '.join(missing)} do not exist on {endpoint}")


def create_inference_components(step: ComponentsInput, ports: Ports) -> ComponentsOutput:
    """``create``: one inference component per model (adopted if it exists); ``status``: all
    ``InService`` -> sets up scaling and alarms, records ``READY``, puts ``ReservationReady`` and tells
    Slack.

    Raises:
        ReservationNotFound: request or purchase not recorded.
        ReservationCancelled: the release already started.
        ResourceBusy: the endpoint is not ``InService`` yet (retry).
        EndpointFailed: the endpoint is ``Failed`` or gone.
        ComponentFailed: a component is ``Failed``, gone, or not ``InService`` 2 hours after ``DEPLOYING``.
    """
    request = load_request(ports, step.request_id)
    purchase = require_purchase(ports, request.id)
    sagemaker = ports.sagemaker(purchase.region)
    endpoint = endpoint_name(request.id)
    names = [inference_component_name(request.id, model.name) for model in request.models]
    wait = backoff_seconds(step.attempt, base=30, cap=300)

    if step.action == "create":
        _guard(ports, request.id)
        info = sagemaker.describe_endpoint(endpoint)
        if info is None or info.status == "Failed":
            reason = info.failure_reason if info else "it does not exist"
            raise EndpointFailed(f"endpoint {endpoint} cannot host components: {reason}")
        if info.status != "InService":
            raise ResourceBusy(f"endpoint {endpoint} is {info.status}; components wait for InService")
        ensure_owned(sagemaker, info.arn, request.id, "endpoint")
        for model, name in zip(request.models, names, strict=True):
            component = sagemaker.describe_inference_component(name)
            if component is not None:
                ensure_owned(sagemaker, component.arn, request.id, "inference component")
            if component is None:
                sagemaker.create_inference_component(
                    name=name,
                    endpoint_name=endpoint,
                    variant_name=VARIANT_NAME,
                    specification=component_specification(model),
                    copy_count=max(1, model.copies.initial),
                    tags=tags_for(request.id),
                )
        _guard(ports, request.id)  # a release that ran during the creates found nothing: release again
        return ComponentsOutput(
            status="Creating", component_names=names, next_wait_seconds=wait, attempt=step.attempt + 1
        )

    infos = {name: sagemaker.describe_inference_component(name) for name in names}
    missing = [name for name, info in infos.items() if info is None]
    if missing:
        _missing_components(ports, request.id, endpoint, missing)
        return ComponentsOutput(
            status="Creating", component_names=names, next_wait_seconds=wait, attempt=step.attempt + 1
        )
    failed = [info for info in infos.values() if info is not None and info.status == "Failed"]
    if failed:
        raise ComponentFailed(
            "; ".join(
                f"inference component {i.name} failed: {i.failure_reason or 'no reason given'}"
                for i in failed
            )
        )
    if all(info is not None and info.status == "InService" for info in infos.values()):
        history = _guard(ports, request.id)  # never READY after a cancel or a release
        # Scaling before READY: a component must exist to be registered, and a reservation is not
        # ready until it can scale (to zero and back). Upserts: a retried poll repeats them harmlessly.
        setup_scaling(ports, request, purchase.region)
        history = _guard(ports, request.id)  # scaling and alarms put after a release's pass: release again
        ready_event = ReservationReadyDetail(
            request_id=request.id,
            region=purchase.region,
            endpoint_name=endpoint,
            inference_component_names=names,
        )
        detail = {"endpoint_name": endpoint, "inference_component_names": names, "region": purchase.region}
        if record_ready(ports, ready_event, detail=detail, history=history):
            ready = sagemaker.describe_endpoint(endpoint)  # the instances that serve from now on
            record_usage(ports, request.id, ready.instance_count if ready else None, source="ready")
            post(
                ports, messages.ready(request.id, region=purchase.region, endpoint=endpoint, components=names)
            )
        return ComponentsOutput(
            status="InService", component_names=names, next_wait_seconds=0, attempt=step.attempt + 1
        )

    deploying = first_entry(ports.ledger.history(request.id), State.DEPLOYING)
    if deploying is not None and ports.clock() > deploying.at + COMPONENTS_DEADLINE:
        pending = [f"{n} ({i.status})" for n, i in infos.items() if i is not None and i.status != "InService"]
        raise ComponentFailed(
            f"inference components not InService 2 hours after deployment began: {', '.join(pending)}"
        )
    return ComponentsOutput(
        status="Creating", component_names=names, next_wait_seconds=wait, attempt=step.attempt + 1
    )
