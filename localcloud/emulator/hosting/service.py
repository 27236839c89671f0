"""SageMaker hosting: models, endpoint configs, endpoints, inference components, and SageMaker Runtime
``InvokeEndpoint`` (SageMaker API reference; "Inference components", "Using training plans for SageMaker
inference endpoints" and "Scale an endpoint to zero instances" in the developer guide).

Lifecycles are derived from virtual time, never from threads: an endpoint created at ``t`` is ``Creating``
until ``t + Timings.endpoint_create`` and ``InService`` after; an update is ``Updating`` for
``Timings.endpoint_update``; a delete is ``Deleting`` for ``Timings.endpoint_delete``, after which the
endpoint is gone. Inference components likewise (``Creating``, ``InService``, ``Updating`` while a copy-count
change is under way, ``Deleting``); ``CurrentCopyCount`` follows ``DesiredCopyCount`` after
``Timings.component_scale_out`` (or ``_scale_in``).

Packing: each copy of a component needs its ``ComputeResourceRequirements`` (accelerators, CPU cores,
memory) on one instance of the variant's type (table in :mod:`localcloud.emulator.instances`); copies are
placed first-fit-decreasing. With managed instance scaling the variant runs as many instances as the copies
need, between ``MinInstanceCount`` and ``MaxInstanceCount`` (0 allowed) and never more than its training
plan has free; copies that do not fit stay unplaced (``CurrentCopyCount < DesiredCopyCount``). When the
plan is not ``Active`` (expired) the variant has no instances and every invocation fails for lack of
capacity.

Rules (error code, then the key phrase of the message):

* names taken: ``ValidationException`` "Cannot create already existing ...";
  unknown resources: ``ValidationException`` "Could not find ...".
* ``CreateEndpointConfig``: ``InstanceType`` in the model's enum; a variant without ``ModelName`` needs
  ``ExecutionRoleArn``; ``ManagedInstanceScaling.MinInstanceCount = 0`` is rejected in
  ``MarketConfig.min_instance_count_zero_rejected_regions``; one training plan per endpoint; the plan must
  exist, target ``endpoint`` and have the variant's instance type.
* ``CreateEndpoint``/``UpdateEndpoint``: the plan must be ``Active`` and have the instances free;
  on-demand instances beyond ``MarketConfig.endpoint_quotas`` answer ``ResourceLimitExceeded``.
* ``UpdateEndpoint``/``DeleteEndpoint`` are rejected while the endpoint is ``Creating`` or ``Updating``
  ("Cannot update in-progress endpoint", "Cannot delete in-progress endpoint"); ``DeleteEndpoint`` is
  rejected while the endpoint has inference components.
* ``DeleteEndpointConfig`` is rejected while a live endpoint uses the config or is being created or updated
  with it (AWS documents this as "must not"; the emulator enforces it).
* ``CreateInferenceComponent``: the endpoint must be ``InService``; a variant with ``ModelName`` answers
  "Inference Components are not supported in this Endpoint"; ``CopyCount`` must be at least 1; one copy
  must fit on one instance.
* ``InvokeEndpoint`` on a component with no placed copy (scaled to zero, still starting, plan expired):
  ``ValidationError`` "Inference Component has no capacity to process this request. ..." (the message AWS
  sends), and a ``NoCapacityInvocationFailures`` datapoint.

An endpoint whose variant has no training plan and asks for more instances than
``MarketConfig.on_demand_capacity`` allows in the region ends ``Failed`` as under ``insufficient_capacity``.

Faults: ``insufficient_capacity`` makes ``CreateEndpoint`` end ``Failed`` (``FailureReason`` names
``InsufficientInstanceCapacity``), an ``UpdateEndpoint`` roll back to ``InService`` on the old config with a
``FailureReason``, ``CreateInferenceComponent`` and ``UpdateInferenceComponentRuntimeConfig`` end ``Failed``,
and ``InvokeEndpoint`` fail as with no capacity. ``stuck`` keeps the resource the call creates, updates or
deletes in its transitional state forever.
"""

from __future__ import annotations

from localcloud.emulator.common import (
    Handler,
    Params,
    Response,
    dict_to_tags,
    utcnow,
    validation,
)
from localcloud.emulator.hosting.components import InferenceComponents
from localcloud.emulator.hosting.configs import ModelsAndConfigs
from localcloud.emulator.hosting.endpoints import Endpoints
from localcloud.emulator.hosting.runtime import Runtime
from localcloud.faults import FaultKind


class Hosting(ModelsAndConfigs, Endpoints, InferenceComponents, Runtime):
    """Models, endpoint configs, endpoints and inference components of every region, and the operations on
    them. ``plans`` gives access to training plans (to check and count reservations).

    One class made of one part per concept (:mod:`~localcloud.emulator.hosting.configs`, ``endpoints``,
    ``events``, ``components``, ``runtime``) over their shared
    :class:`~localcloud.emulator.hosting.state.HostingState`.
    """

    def sagemaker_operations(self) -> dict[str, Handler]:
        """SageMaker operation name -> handler."""
        return {
            "CreateModel": self.create_model,
            "DescribeModel": self.describe_model,
            "DeleteModel": self.delete_model,
            "CreateEndpointConfig": self.create_endpoint_config,
            "DescribeEndpointConfig": self.describe_endpoint_config,
            "DeleteEndpointConfig": self.delete_endpoint_config,
            "ListEndpointConfigs": self.list_endpoint_configs,
            "CreateEndpoint": self.create_endpoint,
            "DescribeEndpoint": self.describe_endpoint,
            "UpdateEndpoint": self.update_endpoint,
            "DeleteEndpoint": self.delete_endpoint,
            "ListEndpoints": self.list_endpoints,
            "CreateInferenceComponent": self.create_component,
            "DescribeInferenceComponent": self.describe_component,
            "UpdateInferenceComponentRuntimeConfig": self.update_component_runtime,
            "DeleteInferenceComponent": self.delete_component,
            "ListInferenceComponents": self.list_components,
            "ListTags": self.list_tags,
        }

    def runtime_operations(self) -> dict[str, Handler]:
        """SageMaker Runtime operation name -> handler."""
        return {"InvokeEndpoint": self.invoke_endpoint}

    # -- tags -----------------------------------------------------------------------------------

    def list_tags(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListTags`` for models, endpoint configs, endpoints, inference components and training plans.
        Raises ``ValidationException`` for an ARN the emulator does not hold (deleted, or never created)."""
        del faults, region
        self._purge(utcnow())
        arn = params["ResourceArn"]
        for store in (self.models, self.configs, self.endpoints, self.components):
            for item in store.values():
                if item.arn == arn:
                    return {"Tags": dict_to_tags(item.tags)}
        plan_tags = self.plans.tags_of(arn)
        if plan_tags is not None:
            return {"Tags": plan_tags}
        raise validation(f"Resource {arn} does not exist or is not taggable.")
