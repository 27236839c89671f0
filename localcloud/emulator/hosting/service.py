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

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import AwsError, Due
from localcloud.emulator import cloudwatch
from localcloud.emulator.common import (
    NEVER,
    Context,
    Handler,
    Params,
    Response,
    dict_to_tags,
    paginate,
    sort_listing,
    tags_to_dict,
    utcnow,
    validation,
)
from localcloud.emulator.instances import InstanceSpec, spec_for
from localcloud.emulator.market import on_demand_limit
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.shapes import check_enum, conform, output_shape
from localcloud.emulator.training_plans import TrainingPlans, quota_error
from localcloud.faults import FaultKind

GONE = "Gone"
"""Pseudo-status of a resource whose deletion has completed (it no longer exists)."""
TOMBSTONE_KEPT = timedelta(days=1)
"""How long a deleted endpoint or component stays visible to stale reads (longer than any lag)."""

_FALLBACK_SPEC = InstanceSpec("unknown", 0, 4, 16, 0.0)
_IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)
INSUFFICIENT_CAPACITY_REASON = (
    "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error. "
    "Please retry using a different ML instance type or after some time."
)


@dataclass
class Model:
    """A SageMaker model (``CreateModel`` request kept as given)."""

    name: str
    arn: str
    created: datetime
    request: Params
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class EndpointConfig:
    """An endpoint configuration (request kept as given)."""

    name: str
    arn: str
    created: datetime
    request: Params
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def variants(self) -> list[dict[str, Any]]:
        """The production variants."""
        variants: list[dict[str, Any]] = self.request["ProductionVariants"]
        return variants

    def variant(self, name: str) -> dict[str, Any] | None:
        """A production variant by name."""
        return next((variant for variant in self.variants if variant["VariantName"] == name), None)


def plan_arn_of(variant: dict[str, Any]) -> str | None:
    """The training plan a variant runs on, if any."""
    reservation = variant.get("CapacityReservationConfig") or {}
    arn: str | None = reservation.get("MlReservationArn")
    return arn


def mis_enabled(variant: dict[str, Any]) -> bool:
    """True if managed instance scaling is on for the variant."""
    return (variant.get("ManagedInstanceScaling") or {}).get("Status") == "ENABLED"


@dataclass
class Deployment:
    """One ``CreateEndpoint`` or ``UpdateEndpoint``: which config, when it started and completes."""

    config: EndpointConfig
    started: datetime
    completes: datetime
    succeeds: bool = True
    failure_reason: str | None = None


@dataclass
class Endpoint:
    """An endpoint; its status, config and failure reason are functions of virtual time."""

    name: str
    arn: str
    created: datetime
    deployments: list[Deployment]
    tags: dict[str, str] = field(default_factory=dict)
    delete_started: datetime | None = None
    delete_completes: datetime | None = None
    variant_instances: dict[str, int] = field(default_factory=dict)
    """Desired instance counts set through Application Auto Scaling (``sagemaker:variant:...``)."""
    variants_with_components: set[str] = field(default_factory=set)

    def status(self, now: datetime) -> str:
        """``Creating``, ``InService``, ``Updating``, ``Failed``, ``Deleting`` or :data:`GONE`."""
        if self.delete_started is not None and self.delete_completes is not None:
            if now >= self.delete_completes:
                return GONE
            if now >= self.delete_started:
                return "Deleting"
        latest = self.deployments[-1]
        first = self.deployments[0]
        if now < first.completes:
            return "Creating"
        if not first.succeeds:
            return "Failed"
        if latest.started <= now < latest.completes:
            return "Updating"
        return "InService"

    def deployment(self, now: datetime) -> Deployment:
        """The deployment in effect at ``now`` (the first one until it completes)."""
        done = [item for item in self.deployments if item.completes <= now and item.succeeds]
        return done[-1] if done else self.deployments[0]

    def config(self, now: datetime) -> EndpointConfig:
        """The endpoint config in effect at ``now``."""
        return self.deployment(now).config

    def pending(self, now: datetime) -> Deployment | None:
        """The update under way at ``now`` (not the creation)."""
        latest = self.deployments[-1]
        if len(self.deployments) > 1 and latest.started <= now < latest.completes:
            return latest
        return None

    def failure_reason(self, now: datetime) -> str | None:
        """Why the latest completed deployment failed, if it did."""
        done = [item for item in self.deployments if item.completes <= now]
        return done[-1].failure_reason if done and not done[-1].succeeds else None

    def last_modified(self, now: datetime) -> datetime:
        """When the endpoint last changed, at or before ``now``."""
        moments = [self.created]
        for item in self.deployments:
            moments.extend(moment for moment in (item.started, item.completes) if moment <= now)
        if self.delete_started is not None and self.delete_started <= now:
            moments.append(self.delete_started)
        return max(moments)

    def uses_config(self, name: str, now: datetime) -> bool:
        """True if the endpoint is live and runs on, or is being created or updated with, config ``name``."""
        status = self.status(now)
        if status in ("Deleting", GONE):
            return False
        if self.config(now).name == name:
            return True
        pending = self.pending(now)
        return pending is not None and pending.config.name == name


@dataclass(frozen=True)
class Requirements:
    """What one copy of a component needs on an instance."""

    accelerators: float
    cpus: float
    memory_mib: float

    def fits(self, free: list[float]) -> bool:
        """True if the copy fits in ``free`` = [accelerators, cpus, memory]."""
        return (
            self.accelerators <= free[0] + 1e-9
            and self.cpus <= free[1] + 1e-9
            and self.memory_mib <= free[2] + 1e-9
        )


@dataclass
class CopyChange:
    """A requested copy count: asked at ``at``, in effect from ``completes`` unless it ``fails``."""

    at: datetime
    desired: int
    completes: datetime
    fails: bool = False


@dataclass
class Component:
    """An inference component; status and copy counts are functions of virtual time.

    ``changes[0]`` is the creation.
    """

    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    created: datetime
    request: Params
    requirements: Requirements
    changes: list[CopyChange]
    tags: dict[str, str] = field(default_factory=dict)
    failure_reason: str | None = None
    delete_started: datetime | None = None
    delete_completes: datetime | None = None

    def status(self, now: datetime) -> str:
        """``Creating``, ``InService``, ``Updating``, ``Failed``, ``Deleting`` or :data:`GONE`."""
        if self.delete_started is not None and self.delete_completes is not None:
            if now >= self.delete_completes:
                return GONE
            if now >= self.delete_started:
                return "Deleting"
        first = self.changes[0]
        if now < first.completes:
            return "Creating"
        if first.fails:
            return "Failed"
        latest = self._latest(now)
        if now < latest.completes:
            return "Updating"
        return "Failed" if latest.fails else "InService"

    def _latest(self, now: datetime) -> CopyChange:
        asked = [change for change in self.changes if change.at <= now]
        return asked[-1] if asked else self.changes[0]

    def desired(self, now: datetime) -> int:
        """The copy count asked for last, at or before ``now``."""
        return self._latest(now).desired

    def effective(self, now: datetime) -> int:
        """The copy count in effect at ``now`` (before packing limits): the latest-asked change that has
        completed. 0 while creating, after a failure, while deleting."""
        if self.status(now) in ("Creating", "Deleting", GONE) or self.changes[0].fails:
            return 0
        done = [change for change in self.changes if change.completes <= now and not change.fails]
        return done[-1].desired if done else 0

    def last_modified(self, now: datetime) -> datetime:
        """When the component last changed, at or before ``now``."""
        moments = [self.created]
        for change in self.changes:
            moments.extend(moment for moment in (change.at, change.completes) if moment <= now)
        if self.delete_started is not None and self.delete_started <= now:
            moments.append(self.delete_started)
        return max(moments)


def pack(
    spec: InstanceSpec, demands: list[tuple[str, Requirements, int]], instances: int | None
) -> tuple[int, dict[str, int]]:
    """Place copies first-fit-decreasing on instances of ``spec``.

    Args:
        spec: the instance type.
        demands: (component name, per-copy requirements, copies).
        instances: how many instances exist (None: open as many as needed).

    Returns:
        (instances used, copies placed per component).
    """
    capacity = [float(spec.accelerators), float(spec.vcpus), float(spec.memory_gib * 1024)]
    # Round-robin over components, so that when room runs out every component keeps its first copies
    # (SageMaker does not evict one model's running copy to start another's); then largest first.
    rounds = max((count for _name, _requirements, count in demands), default=0)
    copies = [
        (name, requirements)
        for index in range(rounds)
        for name, requirements, count in demands
        if index < count and requirements.fits(list(capacity))
    ]
    copies.sort(key=lambda item: (item[1].accelerators, item[1].memory_mib, item[1].cpus), reverse=True)
    free: list[list[float]] = []
    placed = {name: 0 for name, _requirements, _count in demands}
    for name, requirements in copies:
        slot = next((item for item in free if requirements.fits(item)), None)
        if slot is None and (instances is None or len(free) < instances):
            slot = list(capacity)
            free.append(slot)
        if slot is None:
            continue
        slot[0] -= requirements.accelerators
        slot[1] -= requirements.cpus
        slot[2] -= requirements.memory_mib
        placed[name] += 1
    return len(free), placed


class Hosting:
    """Models, endpoint configs, endpoints and inference components of every region, and the operations on
    them. ``plans`` gives access to training plans (to check and count reservations)."""

    def __init__(self, ctx: Context, plans: TrainingPlans) -> None:
        self.ctx = ctx
        self.plans = plans
        self.models: dict[tuple[str, str], Model] = {}
        self.configs: dict[tuple[str, str], EndpointConfig] = {}
        self.endpoints: dict[tuple[str, str], Endpoint] = {}
        self.components: dict[tuple[str, str], Component] = {}
        # Deleted ones, kept a while for reads that answer as of the past (``stale_listing``).
        self.gone_endpoints: list[tuple[tuple[str, str], Endpoint]] = []
        self.gone_components: list[tuple[tuple[str, str], Component]] = []
        self.region_of: dict[str, str] = {}
        self._outbox: list[tuple[datetime, str, Endpoint, str]] = []
        plans.usage = self.plan_usage

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

    # -- names, look-ups, housekeeping ------------------------------------------------------------

    def _arn(self, region: str, kind: str, name: str) -> str:
        # SageMaker lower-cases resource names in ARNs.
        return f"arn:aws:sagemaker:{region}:{self.ctx.account_id}:{kind}/{name.lower()}"

    def _purge(self, now: datetime) -> None:
        """Forget endpoints and components whose deletion has completed (kept aside for stale reads for
        :data:`TOMBSTONE_KEPT`)."""
        for key in [key for key, item in self.endpoints.items() if item.status(now) == GONE]:
            self.gone_endpoints.append((key, self.endpoints.pop(key)))
        for key in [key for key, item in self.components.items() if item.status(now) == GONE]:
            self.gone_components.append((key, self.components.pop(key)))
        horizon = now - TOMBSTONE_KEPT
        self.gone_endpoints = [
            (k, e) for k, e in self.gone_endpoints if (e.delete_completes or now) > horizon
        ]
        self.gone_components = [
            (k, c) for k, c in self.gone_components if (c.delete_completes or now) > horizon
        ]

    def _read_time(self, now: datetime) -> datetime:
        """The instant a read answers for: ``now``, or ``read_lag_seconds`` ago (``stale_listing``)."""
        lag = self.ctx.read_lag_seconds
        return now - timedelta(seconds=lag) if lag > 0 else now

    @staticmethod
    def _as_of(live: dict[tuple[str, str], Any], gone: list[Any], region: str, at: datetime) -> list[Any]:
        """(name, item) of ``region`` (endpoints or components) as a read at ``at`` sees them: created by
        then and not gone by then (the latest of a name, when it was deleted and created again)."""
        seen: dict[str, Any] = {}
        for key, candidate in [*gone, *live.items()]:
            if key[0] == region and candidate.created <= at and candidate.status(at) != GONE:
                seen[key[1]] = candidate
        return sorted(seen.items(), key=lambda pair: pair[0])

    def _endpoint(self, region: str, name: str, now: datetime) -> Endpoint:
        self._purge(utcnow())
        endpoint: Endpoint | None
        if self.ctx.read_lag_seconds > 0:  # a stale read: the endpoint as it was then
            endpoint = dict(self._as_of(self.endpoints, self.gone_endpoints, region, now)).get(name)
        else:
            endpoint = self.endpoints.get((region, name))
        if endpoint is None:
            raise validation(f'Could not find endpoint "{name}".')
        return endpoint

    def _config(self, region: str, name: str) -> EndpointConfig:
        config = self.configs.get((region, name))
        if config is None:
            raise validation(f'Could not find endpoint configuration "{name}".')
        return config

    def _component(self, region: str, name: str, now: datetime) -> Component:
        self._purge(utcnow())
        component: Component | None
        if self.ctx.read_lag_seconds > 0:  # a stale read: the component as it was then
            component = dict(self._as_of(self.components, self.gone_components, region, now)).get(name)
        else:
            component = self.components.get((region, name))
        if component is None:
            raise validation(f'Could not find inference component "{name}".')
        return component

    def _components_on(self, region: str, endpoint_name: str, variant: str | None = None) -> list[Component]:
        return [
            component
            for (component_region, _name), component in self.components.items()
            if component_region == region
            and component.endpoint_name == endpoint_name
            and (variant is None or component.variant_name == variant)
        ]

    @staticmethod
    def _spec(variant: dict[str, Any]) -> InstanceSpec:
        return spec_for(variant.get("InstanceType") or "") or _FALLBACK_SPEC

    # -- instances and copies (derived) ----------------------------------------------------------------

    def _uncapped_instances(
        self, region: str, endpoint: Endpoint, variant: dict[str, Any], now: datetime, *, desired: bool
    ) -> int:
        """Instances the variant wants at ``now`` before its training plan limits it."""
        status = endpoint.status(now)
        if status in ("Failed", "Deleting", GONE) or variant.get("ServerlessConfig"):
            return 0
        initial = int(variant.get("InitialInstanceCount") or 1)
        if status == "Creating" and not desired:
            return 0
        name = variant["VariantName"]
        if mis_enabled(variant) and name in endpoint.variants_with_components:
            scaling = variant.get("ManagedInstanceScaling") or {}
            low = int(scaling.get("MinInstanceCount", 1))
            high = int(scaling.get("MaxInstanceCount", max(initial, low)))
            demands = [
                (
                    component.name,
                    component.requirements,
                    component.desired(now) if desired else component.effective(now),
                )
                for component in self._components_on(region, endpoint.name, name)
                if component.status(now) not in ("Deleting", GONE)
            ]
            needed, _placed = pack(self._spec(variant), demands, None)
            return max(low, min(high, needed))
        return endpoint.variant_instances.get(name, initial)

    def _instances(
        self,
        region: str,
        endpoint: Endpoint,
        variant: dict[str, Any],
        now: datetime,
        *,
        desired: bool = False,
    ) -> int:
        """Instances the variant has (or, with ``desired``, wants) at ``now``, within its plan's capacity."""
        count = self._uncapped_instances(region, endpoint, variant, now, desired=desired)
        plan_arn = plan_arn_of(variant)
        if plan_arn is None:
            return count
        plan = self.plans.by_arn(plan_arn)
        if plan is None or plan.status(now) != "Active":
            return 0
        others = self._plan_demand(plan_arn, now, exclude=endpoint.arn)
        return max(0, min(count, plan.total - others))

    def _plan_demand(self, plan_arn: str, now: datetime, *, exclude: str | None = None) -> int:
        total = 0
        for (region, _name), endpoint in self.endpoints.items():
            if endpoint.arn == exclude or endpoint.status(now) in ("Deleting", GONE, "Failed"):
                continue
            for variant in endpoint.config(now).variants:
                if plan_arn_of(variant) == plan_arn:
                    # An endpoint holds the instances it is provisioning too (desired, not only current).
                    total += self._uncapped_instances(region, endpoint, variant, now, desired=True)
        return total

    def plan_usage(self, plan_arn: str, now: datetime) -> int:
        """Instances of a training plan that live endpoints hold at ``now``."""
        return self._plan_demand(plan_arn, now)

    def placed_copies(self, region: str, component: Component, now: datetime) -> int:
        """Copies of ``component`` running at ``now``: in effect, and placed on the variant's instances."""
        endpoint = self.endpoints.get((region, component.endpoint_name))
        if endpoint is None or endpoint.status(now) not in ("InService", "Updating"):
            return 0
        variant = endpoint.config(now).variant(component.variant_name)
        if variant is None:
            return 0
        instances = self._instances(region, endpoint, variant, now)
        demands = [
            (item.name, item.requirements, item.effective(now))
            for item in self._components_on(region, endpoint.name, component.variant_name)
            if item.status(now) not in ("Deleting", GONE)
        ]
        _used, placed = pack(self._spec(variant), demands, instances)
        return placed.get(component.name, 0)

    # -- models ---------------------------------------------------------------------------------

    def create_model(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``CreateModel``. Raises ``ValidationException`` if the name is taken."""
        del faults
        require_known_region(region)
        name = params["ModelName"]
        arn = self._arn(region, "model", name)
        if (region, name) in self.models:
            raise validation(f'Cannot create already existing model "{arn}".')
        self.models[(region, name)] = Model(
            name, arn, utcnow(), dict(params), tags_to_dict(params.get("Tags"))
        )
        self.region_of[arn] = region
        return {"ModelArn": arn}

    def describe_model(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeModel``. Raises ``ValidationException`` for an unknown model."""
        del faults
        model = self._model(region, params["ModelName"])
        shaped: Response = conform(model.request, output_shape("sagemaker", "DescribeModel"))
        shaped.update({"ModelArn": model.arn, "CreationTime": model.created})
        return shaped

    def _model(self, region: str, name: str) -> Model:
        model = self.models.get((region, name))
        if model is None:
            raise validation(f'Could not find model "{self._arn(region, "model", name)}".')
        return model

    def delete_model(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeleteModel``. Raises ``ValidationException`` for an unknown model."""
        del faults
        model = self._model(region, params["ModelName"])
        del self.models[(region, model.name)]
        return {}

    # -- endpoint configs -----------------------------------------------------------------------

    def create_endpoint_config(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``CreateEndpointConfig``, with the rules of the module docstring."""
        del faults
        require_known_region(region)
        name = params["EndpointConfigName"]
        arn = self._arn(region, "endpoint-config", name)
        if (region, name) in self.configs:
            raise validation(f'Cannot create already existing endpoint configuration "{arn}".')
        variants: list[dict[str, Any]] = params["ProductionVariants"]
        names = [variant["VariantName"] for variant in variants]
        if len(set(names)) != len(names):
            raise validation("Production variant names must be unique within an endpoint configuration.")
        plan_arns: set[str] = set()
        for position, variant in enumerate(variants, start=1):
            self._check_variant(params, variant, position, region)
            plan_arn = plan_arn_of(variant)
            if plan_arn is not None:
                plan_arns.add(plan_arn)
        if len(plan_arns) > 1:
            raise validation(
                "An endpoint can use exactly one training plan: the production variants reference "
                f"{len(plan_arns)} different MlReservationArn values."
            )
        config = EndpointConfig(name, arn, utcnow(), dict(params), tags_to_dict(params.get("Tags")))
        self.configs[(region, name)] = config
        self.region_of[arn] = region
        return {"EndpointConfigArn": arn}

    def _check_variant(self, params: Params, variant: dict[str, Any], position: int, region: str) -> None:
        instance_type = variant.get("InstanceType")
        if instance_type is not None:
            check_enum(
                "sagemaker",
                "ProductionVariantInstanceType",
                instance_type,
                f"productionVariants.{position}.member.instanceType",
            )
        model_name = variant.get("ModelName")
        if model_name is not None:
            self._model(region, model_name)
        elif not variant.get("ServerlessConfig"):
            if not params.get("ExecutionRoleArn"):
                raise validation(
                    "ExecutionRoleArn is required for an endpoint configuration whose production variants "
                    "have no ModelName (an endpoint that hosts inference components)."
                )
            if instance_type is None:
                raise validation(f"Production variant {variant['VariantName']} needs an InstanceType.")
        initial = int(variant.get("InitialInstanceCount") or 1)
        if mis_enabled(variant):
            self._check_scaling(variant, initial, region)
        self._check_plan(variant, instance_type, initial, region)

    def _check_scaling(self, variant: dict[str, Any], initial: int, region: str) -> None:
        scaling = variant["ManagedInstanceScaling"]
        low = scaling.get("MinInstanceCount")
        high = scaling.get("MaxInstanceCount")
        if low == 0 and region in self.ctx.market.config.min_instance_count_zero_rejected_regions:
            raise validation(
                f"ManagedInstanceScaling.MinInstanceCount 0 is not supported in region {region} for "
                f"production variant {variant['VariantName']}. Set MinInstanceCount to 1 or more."
            )
        if low is not None and high is not None and low > high:
            raise validation("ManagedInstanceScaling.MinInstanceCount must not exceed MaxInstanceCount.")
        if high is not None and initial > high:
            raise validation("InitialInstanceCount must not exceed ManagedInstanceScaling.MaxInstanceCount.")

    def _check_plan(
        self, variant: dict[str, Any], instance_type: str | None, initial: int, region: str
    ) -> None:
        plan_arn = plan_arn_of(variant)
        if plan_arn is None:
            return
        plan = self.plans.by_arn(plan_arn)
        if plan is None or plan.region != region:
            raise validation(f'Could not find training plan "{plan_arn}".')
        if plan.target != "endpoint":
            raise validation(
                f"Training plan {plan.name} was bought for target resource {plan.target}; an endpoint "
                "can use only a training plan whose target resource is endpoint."
            )
        if instance_type != plan.instance_type:
            raise validation(
                f"The InstanceType {instance_type} of production variant {variant['VariantName']} does not "
                f"match the instance type {plan.instance_type} of training plan {plan.name}."
            )
        if initial > plan.total:
            raise validation(
                f"InitialInstanceCount {initial} of production variant {variant['VariantName']} exceeds the "
                f"{plan.total} instances of training plan {plan.name}."
            )

    def describe_endpoint_config(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeEndpointConfig``. Raises ``ValidationException`` for an unknown config."""
        del faults
        config = self._config(region, params["EndpointConfigName"])
        shaped: Response = conform(config.request, output_shape("sagemaker", "DescribeEndpointConfig"))
        shaped.update({"EndpointConfigArn": config.arn, "CreationTime": config.created})
        return shaped

    def delete_endpoint_config(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeleteEndpointConfig``. Raises ``ValidationException`` for an unknown config.

        Accepted while an endpoint uses the config, or is being created or updated with it, as SageMaker
        accepts it ("If you delete the EndpointConfig of an endpoint that is active or being created or
        updated you may lose visibility into the instance type the endpoint is using. The endpoint must be
        deleted in order to stop incurring charges.", DeleteEndpointConfig API reference): the endpoint
        keeps running on it.
        """
        del faults
        config = self._config(region, params["EndpointConfigName"])
        del self.configs[(region, config.name)]
        return {}

    def list_endpoint_configs(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListEndpointConfigs`` with name/time filters, sorting and pagination."""
        del faults
        configs = [
            config for (config_region, _name), config in self.configs.items() if config_region == region
        ]
        if params.get("NameContains"):
            configs = [config for config in configs if params["NameContains"] in config.name]
        if params.get("CreationTimeBefore"):
            configs = [config for config in configs if config.created < params["CreationTimeBefore"]]
        if params.get("CreationTimeAfter"):
            configs = [config for config in configs if config.created > params["CreationTimeAfter"]]
        configs = sort_listing(
            configs, {"Name": lambda item: item.name, "CreationTime": lambda item: item.created}, params
        )
        page, token = paginate(configs, params)
        response: Response = {
            "EndpointConfigs": [
                {"EndpointConfigName": item.name, "EndpointConfigArn": item.arn, "CreationTime": item.created}
                for item in page
            ]
        }
        if token:
            response["NextToken"] = token
        return response

    # -- endpoints ------------------------------------------------------------------------------

    def _check_capacity(
        self, region: str, config: EndpointConfig, now: datetime, *, endpoint_arn: str
    ) -> None:
        """The reservation and quota rules of ``CreateEndpoint`` and ``UpdateEndpoint``."""
        for variant in config.variants:
            if variant.get("ServerlessConfig"):
                continue
            initial = int(variant.get("InitialInstanceCount") or 1)
            plan_arn = plan_arn_of(variant)
            if plan_arn is not None:
                plan = self.plans.by_arn(plan_arn)
                if plan is None:
                    raise validation(f'Could not find training plan "{plan_arn}".')
                status = plan.status(now)
                if status != "Active":
                    raise validation(
                        f"Training plan {plan.name} is {status}: an endpoint can use a training plan "
                        f"only while it is Active (from {plan.offering.start.isoformat()} to "
                        f"{plan.end_at(now).isoformat()})."
                    )
                available = plan.total - self._plan_demand(plan_arn, now, exclude=endpoint_arn)
                if initial > available:
                    raise validation(
                        f"Production variant {variant['VariantName']} needs {initial} instances but training "
                        f"plan {plan.name} has {max(0, available)} available."
                    )
                continue
            instance_type = variant.get("InstanceType")
            if instance_type is None:
                continue
            limit = self.ctx.market.endpoint_quota(region, instance_type)
            used = self._on_demand_usage(region, instance_type, now, exclude=endpoint_arn)
            if used + initial > limit:
                raise quota_error(f"{instance_type} for endpoint usage", limit, used, initial)

    def _on_demand_usage(self, region: str, instance_type: str, now: datetime, *, exclude: str) -> int:
        used = 0
        for (endpoint_region, _name), endpoint in self.endpoints.items():
            if endpoint_region != region or endpoint.arn == exclude:
                continue
            for variant in endpoint.config(now).variants:
                if variant.get("InstanceType") == instance_type and plan_arn_of(variant) is None:
                    used += self._instances(region, endpoint, variant, now, desired=True)
        return used

    def create_endpoint(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``CreateEndpoint``: ``Creating`` for ``Timings.endpoint_create``, then ``InService`` (or
        ``Failed`` under ``insufficient_capacity``)."""
        require_known_region(region)
        now = utcnow()
        self._purge(now)
        name = params["EndpointName"]
        arn = self._arn(region, "endpoint", name)
        if (region, name) in self.endpoints:
            raise validation(f'Cannot create already existing endpoint "{arn}".')
        config = self._config(region, params["EndpointConfigName"])
        self._check_capacity(region, config, now, endpoint_arn=arn)
        if not self._on_demand_room(region, config):
            faults = faults | {FaultKind.INSUFFICIENT_CAPACITY}
        self.endpoints[(region, name)] = Endpoint(
            name=name,
            arn=arn,
            created=now,
            deployments=[
                self._deployment(config, now, self.ctx.market.config.timings.endpoint_create, faults)
            ],
            tags=tags_to_dict(params.get("Tags")),
        )
        self.region_of[arn] = region
        endpoint = self.endpoints[(region, name)]
        self._announce(region, endpoint, now, "CREATING")
        self._announce_deployment(region, endpoint, endpoint.deployments[0])
        return {"EndpointArn": arn}

    def _on_demand_room(self, region: str, config: EndpointConfig) -> bool:
        """False when a variant without a training plan asks for more instances than
        ``MarketConfig.on_demand_capacity`` allows in the region (the endpoint then fails for capacity)."""
        for variant in config.variants:
            if plan_arn_of(variant) is not None:
                continue
            limit = on_demand_limit(self.ctx.market.config, region, str(variant["InstanceType"]))
            if limit is not None and int(variant.get("InitialInstanceCount") or 1) > limit:
                return False
        return True

    @staticmethod
    def _deployment(
        config: EndpointConfig, now: datetime, duration: Any, faults: frozenset[FaultKind]
    ) -> Deployment:
        if FaultKind.STUCK in faults:
            return Deployment(config, now, NEVER)
        if FaultKind.INSUFFICIENT_CAPACITY in faults:
            return Deployment(
                config, now, now + duration, succeeds=False, failure_reason=INSUFFICIENT_CAPACITY_REASON
            )
        return Deployment(config, now, now + duration)

    def update_endpoint(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``UpdateEndpoint``: ``Updating`` for ``Timings.endpoint_update``, then ``InService`` on the new
        config. Rejected while ``Creating``/``Updating``, while deleting, and when ``Failed``."""
        now = utcnow()
        endpoint = self._endpoint(region, params["EndpointName"], now)
        status = endpoint.status(now)
        if status in _IN_PROGRESS:
            raise validation(f'Cannot update in-progress endpoint "{endpoint.arn}".')
        if status == "Deleting":
            raise validation(f'Cannot update endpoint "{endpoint.arn}" while it is being deleted.')
        if status == "Failed":
            raise validation(f'Cannot update failed endpoint "{endpoint.arn}".')
        config = self._config(region, params["EndpointConfigName"])
        self._check_capacity(region, config, now, endpoint_arn=endpoint.arn)
        endpoint.deployments.append(
            self._deployment(config, now, self.ctx.market.config.timings.endpoint_update, faults)
        )
        self._announce(region, endpoint, now, "UPDATING")
        self._announce_deployment(region, endpoint, endpoint.deployments[-1])
        return {"EndpointArn": endpoint.arn}

    def delete_endpoint(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeleteEndpoint``: ``Deleting`` for ``Timings.endpoint_delete``, then gone. Rejected while
        ``Creating``/``Updating`` and while inference components remain; repeated while deleting: no-op."""
        now = utcnow()
        endpoint = self._endpoint(region, params["EndpointName"], now)
        status = endpoint.status(now)
        if status == "Deleting":
            return {}
        if status in _IN_PROGRESS:
            raise validation(f'Cannot delete in-progress endpoint "{endpoint.arn}".')
        remaining = self._components_on(region, endpoint.name)
        if remaining:
            raise validation(
                f'Cannot delete endpoint "{endpoint.arn}": it still has {len(remaining)} inference '
                f"component(s) ({', '.join(sorted(item.name for item in remaining))}). Delete the inference "
                "components first."
            )
        endpoint.delete_started = now
        endpoint.delete_completes = (
            NEVER if FaultKind.STUCK in faults else now + self.ctx.market.config.timings.endpoint_delete
        )
        self._announce(region, endpoint, now, "DELETING")
        return {}

    # -- endpoint state-change events (a Ticker) -----------------------------------------------------

    def _announce(self, region: str, endpoint: Endpoint, at: datetime, status: str) -> None:
        """Queue the ``SageMaker Endpoint State Change`` event AWS sends when the endpoint reaches ``status``
        at ``at`` (nothing for a transition that never happens)."""
        if at < NEVER:
            self._outbox.append((at, region, endpoint, status))

    def _announce_deployment(self, region: str, endpoint: Endpoint, deployment: Deployment) -> None:
        first = deployment is endpoint.deployments[0]
        # A failed update rolls back: the endpoint is in service again on its old configuration.
        status = "FAILED" if first and not deployment.succeeds else "IN_SERVICE"
        self._announce(region, endpoint, deployment.completes, status)

    def next_due(self, now: datetime) -> Due | None:
        """The next endpoint state-change event to send (foreground: it follows from a call just made)."""
        with self.ctx.lock:
            pending = [at for at, _region, _endpoint, _status in self._outbox]
        if not pending:
            return None
        return Due(max(min(pending), now + timedelta(microseconds=1)), foreground=True)

    def advance(self, now: datetime) -> None:
        """Send every endpoint state-change event due at or before ``now`` (source ``aws.sagemaker``; detail
        as in "Events that Amazon SageMaker AI sends to Amazon EventBridge")."""
        with self.ctx.lock:
            due = sorted((item for item in self._outbox if item[0] <= now), key=lambda item: item[0])
            self._outbox = [item for item in self._outbox if item[0] > now]
            events = [
                (region, endpoint, self._event_detail(endpoint, at, status))
                for at, region, endpoint, status in due
            ]
        for region, endpoint, detail in events:
            self.ctx.events.put_aws_event(
                source="aws.sagemaker",
                detail_type="SageMaker Endpoint State Change",
                detail=detail,
                resources=[endpoint.arn],
                region=region,
            )

    @staticmethod
    def _event_detail(endpoint: Endpoint, at: datetime, status: str) -> dict[str, Any]:
        config = endpoint.config(at)
        detail: dict[str, Any] = {
            "EndpointName": endpoint.name,
            "EndpointArn": endpoint.arn,
            "EndpointConfigName": config.name,
            "ProductionVariants": [
                {
                    "DesiredWeight": float(variant.get("InitialVariantWeight", 1.0)),
                    "DesiredInstanceCount": float(variant.get("InitialInstanceCount") or 1),
                }
                for variant in config.variants
            ],
            "EndpointStatus": status,
            "CreationTime": endpoint.created.timestamp() * 1000,
            "LastModifiedTime": at.timestamp() * 1000,
            "Tags": dict(endpoint.tags),
        }
        reason = endpoint.failure_reason(at)
        if status == "FAILED" and reason:
            detail["FailureReason"] = reason
        return detail

    def describe_endpoint(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeEndpoint``: status, variants with instance counts and reservation use (as of
        ``delay_seconds`` ago under ``stale_listing``)."""
        del faults
        now = self._read_time(utcnow())
        endpoint = self._endpoint(region, params["EndpointName"], now)
        status = endpoint.status(now)
        config = endpoint.config(now)
        shaped: Response = {
            "EndpointName": endpoint.name,
            "EndpointArn": endpoint.arn,
            "EndpointConfigName": config.name,
            "ProductionVariants": [
                self._variant_summary(region, endpoint, variant, now, status) for variant in config.variants
            ],
            "EndpointStatus": status,
            "CreationTime": endpoint.created,
            "LastModifiedTime": endpoint.last_modified(now),
        }
        reason = endpoint.failure_reason(now)
        if reason:
            shaped["FailureReason"] = reason
        pending = endpoint.pending(now)
        if pending is not None:
            shaped["PendingDeploymentSummary"] = {
                "EndpointConfigName": pending.config.name,
                "StartTime": pending.started,
                "ProductionVariants": [
                    {
                        "VariantName": variant["VariantName"],
                        "DesiredInstanceCount": int(variant.get("InitialInstanceCount") or 1),
                        "VariantStatus": [{"Status": "Updating", "StartTime": pending.started}],
                    }
                    for variant in pending.config.variants
                ],
            }
        return shaped

    def _variant_summary(
        self, region: str, endpoint: Endpoint, variant: dict[str, Any], now: datetime, status: str
    ) -> dict[str, Any]:
        weight = float(variant.get("InitialVariantWeight", 1.0))
        summary: dict[str, Any] = {
            "VariantName": variant["VariantName"],
            "CurrentWeight": weight,
            "DesiredWeight": weight,
            "CurrentInstanceCount": self._instances(region, endpoint, variant, now),
            "DesiredInstanceCount": self._instances(region, endpoint, variant, now, desired=True),
        }
        if status in ("Creating", "Updating", "Deleting"):
            summary["VariantStatus"] = [{"Status": status, "StartTime": endpoint.last_modified(now)}]
        for key in ("ManagedInstanceScaling", "RoutingConfig"):
            if variant.get(key):
                summary[key] = dict(variant[key])
        if variant.get("ServerlessConfig"):
            summary["CurrentServerlessConfig"] = dict(variant["ServerlessConfig"])
            summary["DesiredServerlessConfig"] = dict(variant["ServerlessConfig"])
        model_name = variant.get("ModelName")
        model = self.models.get((region, model_name)) if model_name else None
        image = (model.request.get("PrimaryContainer") or {}).get("Image") if model else None
        if image and status not in ("Creating", "Failed"):
            summary["DeployedImages"] = [
                {"SpecifiedImage": image, "ResolvedImage": image, "ResolutionTime": endpoint.created}
            ]
        plan_arn = plan_arn_of(variant)
        if plan_arn is not None:
            plan = self.plans.by_arn(plan_arn)
            reservation = variant.get("CapacityReservationConfig") or {}
            used_here = self._instances(region, endpoint, variant, now)
            summary["CapacityReservationConfig"] = {
                "MlReservationArn": plan_arn,
                "CapacityReservationPreference": reservation.get(
                    "CapacityReservationPreference", "capacity-reservations-only"
                ),
                "TotalInstanceCount": plan.total if plan else 0,
                "AvailableInstanceCount": (
                    max(0, plan.total - self.plan_usage(plan_arn, now))
                    if plan and plan.status(now) == "Active"
                    else 0
                ),
                "UsedByCurrentEndpoint": used_here,
            }
        return summary

    def _endpoint_matches(self, endpoint: Endpoint, params: Params, now: datetime) -> bool:
        checks = (
            ("NameContains", lambda value: value in endpoint.name),
            ("StatusEquals", lambda value: endpoint.status(now) == value),
            ("CreationTimeBefore", lambda value: endpoint.created < value),
            ("CreationTimeAfter", lambda value: endpoint.created > value),
            ("LastModifiedTimeBefore", lambda value: endpoint.last_modified(now) < value),
            ("LastModifiedTimeAfter", lambda value: endpoint.last_modified(now) > value),
        )
        return all(params.get(key) is None or check(params[key]) for key, check in checks)

    def list_endpoints(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListEndpoints`` with filters, sorting (default newest first) and pagination (as of
        ``delay_seconds`` ago under ``stale_listing``)."""
        del faults
        self._purge(utcnow())
        now = self._read_time(utcnow())
        endpoints = [
            endpoint
            for _name, endpoint in self._as_of(self.endpoints, self.gone_endpoints, region, now)
            if self._endpoint_matches(endpoint, params, now)
        ]
        endpoints = sort_listing(
            endpoints,
            {
                "Name": lambda endpoint: endpoint.name,
                "CreationTime": lambda endpoint: endpoint.created,
                "Status": lambda endpoint: endpoint.status(now),
            },
            params,
        )
        page, token = paginate(endpoints, params)
        response: Response = {
            "Endpoints": [
                {
                    "EndpointName": endpoint.name,
                    "EndpointArn": endpoint.arn,
                    "CreationTime": endpoint.created,
                    "LastModifiedTime": endpoint.last_modified(now),
                    "EndpointStatus": endpoint.status(now),
                }
                for endpoint in page
            ]
        }
        if token:
            response["NextToken"] = token
        return response

    # -- inference components -------------------------------------------------------------------

    def create_component(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``CreateInferenceComponent``, with the rules of the module docstring."""
        require_known_region(region)
        now = utcnow()
        self._purge(now)
        name = params["InferenceComponentName"]
        arn = self._arn(region, "inference-component", name)
        if (region, name) in self.components:
            raise validation(f'Cannot create already existing inference component "{arn}".')
        endpoint = self._endpoint(region, params["EndpointName"], now)
        status = endpoint.status(now)
        if status != "InService":
            raise validation(
                f'Endpoint "{endpoint.name}" is {status}: inference components can be created only on an '
                "endpoint that is InService."
            )
        variant = self._ic_variant(endpoint, params.get("VariantName"), now)
        if variant.get("ModelName"):
            raise validation(
                "Inference Components are not supported in this Endpoint. Its production variant "
                f"{variant['VariantName']} names a model (ModelName); create the endpoint configuration "
                "without ModelName to host inference components."
            )
        if params.get("Specifications"):
            raise validation("Specifications (several instance types) is not emulated; use Specification.")
        specification = params.get("Specification")
        if not specification:
            raise validation("Specification is required.")
        if specification.get("BaseInferenceComponentName"):
            raise validation("Adapter inference components (BaseInferenceComponentName) are not emulated.")
        if not specification.get("ModelName") and not specification.get("Container"):
            raise validation("The Specification must name a ModelName or a Container.")
        if specification.get("ModelName"):
            self._model(region, specification["ModelName"])
        runtime = params.get("RuntimeConfig")
        if not runtime:
            raise validation("RuntimeConfig is required.")
        copies = int(runtime["CopyCount"])
        if copies < 1:
            raise validation(
                f"CopyCount {copies} is not valid when creating inference component {name}: it must be at "
                "least 1. Reach 0 copies later with UpdateInferenceComponentRuntimeConfig or Application "
                "Auto Scaling."
            )
        requirements = self._requirements(specification, name, variant)
        timings = self.ctx.market.config.timings
        if FaultKind.STUCK in faults:
            first = CopyChange(now, copies, NEVER)
        else:
            first = CopyChange(
                now, copies, now + timings.component_create, fails=FaultKind.INSUFFICIENT_CAPACITY in faults
            )
        component = Component(
            name=name,
            arn=arn,
            endpoint_name=endpoint.name,
            endpoint_arn=endpoint.arn,
            variant_name=variant["VariantName"],
            created=now,
            request=dict(params),
            requirements=requirements,
            changes=[first],
            tags=tags_to_dict(params.get("Tags")),
            failure_reason=(
                "Unable to place inference component copies: insufficient capacity "
                "(InsufficientInstanceCapacity)."
                if first.fails
                else None
            ),
        )
        self.components[(region, name)] = component
        endpoint.variants_with_components.add(variant["VariantName"])
        self.region_of[arn] = region
        return {"InferenceComponentArn": arn}

    @staticmethod
    def _ic_variant(endpoint: Endpoint, variant_name: str | None, now: datetime) -> dict[str, Any]:
        variants = endpoint.config(now).variants
        if variant_name is None:
            if len(variants) != 1:
                raise validation(
                    f"VariantName is required: endpoint {endpoint.name} has {len(variants)} production "
                    "variants."
                )
            return variants[0]
        variant = endpoint.config(now).variant(variant_name)
        if variant is None:
            raise validation(f"Production variant {variant_name} does not exist in endpoint {endpoint.name}.")
        return variant

    def _requirements(
        self, specification: dict[str, Any], name: str, variant: dict[str, Any]
    ) -> Requirements:
        compute = specification.get("ComputeResourceRequirements")
        if not compute:
            raise validation("Specification.ComputeResourceRequirements is required.")
        requirements = Requirements(
            accelerators=float(compute.get("NumberOfAcceleratorDevicesRequired") or 0),
            cpus=float(compute.get("NumberOfCpuCoresRequired") or 0),
            memory_mib=float(compute["MinMemoryRequiredInMb"]),
        )
        spec = self._spec(variant)
        if not requirements.fits(
            [float(spec.accelerators), float(spec.vcpus), float(spec.memory_gib * 1024)]
        ):
            raise validation(
                f"The compute resource requirements of inference component {name} "
                f"({requirements.accelerators:g} accelerators, {requirements.cpus:g} CPU cores, "
                f"{requirements.memory_mib:g} MiB) exceed one {variant.get('InstanceType')} instance "
                f"({spec.accelerators} accelerators, {spec.vcpus} vCPUs, {spec.memory_gib * 1024} MiB)."
            )
        return requirements

    def describe_component(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeInferenceComponent``: status and ``RuntimeConfig`` (desired and current copies), as of
        ``delay_seconds`` ago under ``stale_listing``."""
        del faults
        now = self._read_time(utcnow())
        component = self._component(region, params["InferenceComponentName"], now)
        specification = dict(component.request["Specification"])
        container = specification.pop("Container", None)
        shaped_spec: dict[str, Any] = conform(
            specification,
            output_shape("sagemaker", "DescribeInferenceComponent").members["Specification"],
        )
        if container:
            summary: dict[str, Any] = {
                key: container[key] for key in ("ArtifactUrl", "Environment") if key in container
            }
            if container.get("Image"):
                summary["DeployedImage"] = {
                    "SpecifiedImage": container["Image"],
                    "ResolvedImage": container["Image"],
                    "ResolutionTime": component.created,
                }
            shaped_spec["Container"] = summary
        shaped: Response = {
            "InferenceComponentName": component.name,
            "InferenceComponentArn": component.arn,
            "EndpointName": component.endpoint_name,
            "EndpointArn": component.endpoint_arn,
            "VariantName": component.variant_name,
            "Specification": shaped_spec,
            "RuntimeConfig": {
                "DesiredCopyCount": component.desired(now),
                "CurrentCopyCount": self.placed_copies(region, component, now),
            },
            "CreationTime": component.created,
            "LastModifiedTime": component.last_modified(now),
            "InferenceComponentStatus": component.status(now),
        }
        if component.status(now) == "Failed" and component.failure_reason:
            shaped["FailureReason"] = component.failure_reason
        return shaped

    def change_copies(
        self,
        region: str,
        component: Component,
        copies: int,
        now: datetime,
        faults: frozenset[FaultKind] = frozenset(),
    ) -> None:
        """Ask for ``copies`` copies from ``now`` (UpdateInferenceComponentRuntimeConfig and Application Auto
        Scaling both come here). Raises ``ValidationException`` while creating or deleting."""
        status = component.status(now)
        if status in ("Creating", "Deleting"):
            raise validation(f'Cannot update inference component "{component.arn}" while it is {status}.')
        timings = self.ctx.market.config.timings
        delay = (
            timings.component_scale_out if copies > component.effective(now) else timings.component_scale_in
        )
        if FaultKind.STUCK in faults:
            change = CopyChange(now, copies, NEVER)
        else:
            change = CopyChange(now, copies, now + delay, fails=FaultKind.INSUFFICIENT_CAPACITY in faults)
            if change.fails:
                component.failure_reason = (
                    "Unable to place the requested copies: insufficient capacity "
                    "(InsufficientInstanceCapacity)."
                )
        component.changes.append(change)

    def update_component_runtime(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``UpdateInferenceComponentRuntimeConfig``: a new desired copy count (0 allowed)."""
        now = utcnow()
        component = self._component(region, params["InferenceComponentName"], now)
        self.change_copies(region, component, int(params["DesiredRuntimeConfig"]["CopyCount"]), now, faults)
        return {"InferenceComponentArn": component.arn}

    def delete_component(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DeleteInferenceComponent``: ``Deleting`` for ``Timings.component_delete``, then gone."""
        now = utcnow()
        component = self._component(region, params["InferenceComponentName"], now)
        if component.status(now) == "Deleting":
            return {}
        component.delete_started = now
        component.delete_completes = (
            NEVER if FaultKind.STUCK in faults else now + self.ctx.market.config.timings.component_delete
        )
        return {}

    def list_components(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListInferenceComponents`` with filters (endpoint, variant, name, status, times), sorting and
        pagination (as of ``delay_seconds`` ago under ``stale_listing``)."""
        del faults
        self._purge(utcnow())
        now = self._read_time(utcnow())
        checks: tuple[tuple[str, Callable[[Component, Any], bool]], ...] = (
            ("EndpointNameEquals", lambda item, value: item.endpoint_name == value),
            ("VariantNameEquals", lambda item, value: item.variant_name == value),
            ("NameContains", lambda item, value: value in item.name),
            ("StatusEquals", lambda item, value: item.status(now) == value),
            ("CreationTimeBefore", lambda item, value: item.created < value),
            ("CreationTimeAfter", lambda item, value: item.created > value),
            ("LastModifiedTimeBefore", lambda item, value: item.last_modified(now) < value),
            ("LastModifiedTimeAfter", lambda item, value: item.last_modified(now) > value),
        )
        components = [
            component
            for _name, component in self._as_of(self.components, self.gone_components, region, now)
            if all(params.get(key) is None or check(component, params[key]) for key, check in checks)
        ]
        components = sort_listing(
            components,
            {
                "Name": lambda item: item.name,
                "CreationTime": lambda item: item.created,
                "Status": lambda item: item.status(now),
            },
            params,
        )
        page, token = paginate(components, params)
        response: Response = {
            "InferenceComponents": [
                {
                    "CreationTime": item.created,
                    "InferenceComponentArn": item.arn,
                    "InferenceComponentName": item.name,
                    "EndpointArn": item.endpoint_arn,
                    "EndpointName": item.endpoint_name,
                    "VariantName": item.variant_name,
                    "InferenceComponentStatus": item.status(now),
                    "LastModifiedTime": item.last_modified(now),
                }
                for item in page
            ]
        }
        if token:
            response["NextToken"] = token
        return response

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

    # -- runtime ----------------------------------------------------------------------------------

    def invoke_endpoint(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """SageMaker Runtime ``InvokeEndpoint``: a canned JSON reply, counted in CloudWatch
        (``AWS/SageMaker`` ``Invocations`` per endpoint+variant and per component, ``InvocationsPerCopy``,
        ``InvocationsPerInstance``); with no capacity, ``ValidationError`` and a
        ``NoCapacityInvocationFailures`` datapoint.

        Raises:
            AwsError: ``ValidationError`` (unknown endpoint or component, endpoint not in service, no
                capacity).
        """
        now = utcnow()
        self._purge(now)
        name = params["EndpointName"]
        endpoint = self.endpoints.get((region, name))
        if endpoint is None:
            raise AwsError("ValidationError", f"Endpoint {name} of account {self.ctx.account_id} not found.")
        status = endpoint.status(now)
        if status not in ("InService", "Updating"):
            raise AwsError("ValidationError", f"Endpoint {name} is not in service (status {status}).")
        component_name = params.get("InferenceComponentName")
        config = endpoint.config(now)
        if component_name is None:
            variant = (
                config.variant(params["TargetVariant"]) if params.get("TargetVariant") else config.variants[0]
            )
            if variant is None or not variant.get("ModelName"):
                raise AwsError(
                    "ValidationError",
                    "Inference Component Name header is required for endpoints to which you plan to deploy "
                    "inference components. Please include Inference Component Name header or consider using "
                    "SageMaker models.",
                )
            if (
                self._instances(region, endpoint, variant, now) == 0
                or FaultKind.INSUFFICIENT_CAPACITY in faults
            ):
                # A model variant with no instance (its training plan expired, or scaled to zero).
                raise AwsError(
                    "ValidationError",
                    f"Endpoint {name} has no capacity to process this request: production variant "
                    f"{variant['VariantName']} has no running instance.",
                )
            return self._reply(region, endpoint, variant, None, params=params, now=now)
        component = self.components.get((region, component_name))
        if component is None or component.endpoint_name != name:
            raise AwsError(
                "ValidationError", f"Inference Component {component_name} not found for endpoint {name}."
            )
        variant = config.variant(component.variant_name)
        copies = self.placed_copies(region, component, now)
        if (
            variant is None
            or copies == 0
            or component.status(now) not in ("InService", "Updating")
            or FaultKind.INSUFFICIENT_CAPACITY in faults
        ):
            cloudwatch.put_metric(
                self.ctx.account_id,
                region,
                namespace=cloudwatch.SAGEMAKER_NAMESPACE,
                name="NoCapacityInvocationFailures",
                dimensions={"InferenceComponentName": component.name},
                value=1.0,
                at=now,
            )
            raise AwsError("ValidationError", NO_CAPACITY_MESSAGE)
        return self._reply(region, endpoint, variant, (component, copies), params=params, now=now)

    def _reply(
        self,
        region: str,
        endpoint: Endpoint,
        variant: dict[str, Any],
        component: tuple[Component, int] | None,
        *,
        params: Params,
        now: datetime,
    ) -> Response:
        account = self.ctx.account_id
        namespace = cloudwatch.SAGEMAKER_NAMESPACE
        variant_dims = {"EndpointName": endpoint.name, "VariantName": variant["VariantName"]}
        cloudwatch.put_metric(
            account,
            region,
            namespace=namespace,
            name="Invocations",
            dimensions=variant_dims,
            value=1.0,
            at=now,
        )
        instances = self._instances(region, endpoint, variant, now)
        if instances:
            cloudwatch.put_metric(
                account,
                region,
                namespace=namespace,
                name="InvocationsPerInstance",
                dimensions=variant_dims,
                value=1.0 / instances,
                at=now,
            )
        reply: dict[str, Any] = {"endpoint": endpoint.name, "variant": variant["VariantName"]}
        if component is not None:
            item, copies = component
            component_dims = {"InferenceComponentName": item.name}
            cloudwatch.put_metric(
                account,
                region,
                namespace=namespace,
                name="Invocations",
                dimensions=component_dims,
                value=1.0,
                at=now,
            )
            cloudwatch.put_metric(
                account,
                region,
                namespace=namespace,
                name="InvocationsPerCopy",
                dimensions=component_dims,
                value=1.0 / copies,
                at=now,
            )
            reply["inference_component"] = item.name
        body: bytes = params.get("Body") or b""
        reply["generated_text"] = f"[local cloud] canned reply to {len(body)} bytes"
        return {
            "Body": json.dumps(reply).encode(),
            "ContentType": "application/json",
            "InvokedProductionVariant": variant["VariantName"],
        }

    # -- for Application Auto Scaling and the runtime -----------------------------------------------

    def find_component(self, region: str, name: str) -> Component | None:
        """A live component by name (None if unknown or gone)."""
        self._purge(utcnow())
        return self.components.get((region, name))

    def find_variant(
        self, region: str, endpoint_name: str, variant_name: str
    ) -> tuple[Endpoint, dict[str, Any]] | None:
        """A live endpoint and one of its variants (None if either is unknown)."""
        now = utcnow()
        self._purge(now)
        endpoint = self.endpoints.get((region, endpoint_name))
        if endpoint is None:
            return None
        variant = endpoint.config(now).variant(variant_name)
        return None if variant is None else (endpoint, variant)

    def variant_desired_instances(
        self, region: str, endpoint: Endpoint, variant: dict[str, Any], now: datetime
    ) -> int:
        """``DesiredInstanceCount`` of a variant (the capacity Application Auto Scaling scales)."""
        return self._instances(region, endpoint, variant, now, desired=True)

    def set_variant_instances(
        self, endpoint: Endpoint, variant: dict[str, Any], count: int, now: datetime
    ) -> None:
        """Set a variant's desired instance count (Application Auto Scaling).

        Raises ``ValidationException`` unless the endpoint is ``InService``."""
        status = endpoint.status(now)
        if status != "InService":
            raise validation(f'Cannot update in-progress endpoint "{endpoint.arn}".')
        endpoint.variant_instances[variant["VariantName"]] = count

    def billable(self, now: datetime) -> list[tuple[str, str, str, str, str]]:
        """(resource type, name, ARN, region, status) of every live endpoint, config and component."""
        self._purge(now)
        found: list[tuple[str, str, str, str, str]] = []
        for (region, _name), endpoint in self.endpoints.items():
            found.append(("endpoint", endpoint.name, endpoint.arn, region, endpoint.status(now)))
        for (region, _name), config in self.configs.items():
            found.append(("endpoint-config", config.name, config.arn, region, "Created"))
        for (region, _name), component in self.components.items():
            found.append(
                ("inference-component", component.name, component.arn, region, component.status(now))
            )
        return found
