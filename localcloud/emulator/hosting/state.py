"""The state of SageMaker hosting in every region, the look-ups every operation shares, and the instances
and copies derived from it (managed instance scaling, training plan capacity, packing)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from localcloud.emulator.common import (
    Context,
    utcnow,
    validation,
)
from localcloud.emulator.hosting.packing import pack, spec_of
from localcloud.emulator.hosting.records import (
    GONE,
    TOMBSTONE_KEPT,
    Component,
    Endpoint,
    EndpointConfig,
    Model,
    mis_enabled,
    plan_arn_of,
)
from localcloud.emulator.training_plans import TrainingPlans


class HostingState:
    """Models, endpoint configs, endpoints and inference components of every region, the look-ups on them,
    and what Application Auto Scaling and the billing report ask of them. ``plans`` gives access to training
    plans (to check and count reservations)."""

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
            needed, _placed = pack(spec_of(variant), demands, None)
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
        _used, placed = pack(spec_of(variant), demands, instances)
        return placed.get(component.name, 0)

    def _model(self, region: str, name: str) -> Model:
        model = self.models.get((region, name))
        if model is None:
            raise validation(f'Could not find model "{self._arn(region, "model", name)}".')
        return model

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
