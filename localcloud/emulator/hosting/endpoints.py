"""Endpoints: ``CreateEndpoint``, ``UpdateEndpoint``, ``DeleteEndpoint`` (with the reservation and quota
rules), ``DescribeEndpoint`` and ``ListEndpoints``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from localcloud.emulator.common import (
    NEVER,
    Params,
    Response,
    paginate,
    sort_listing,
    tags_to_dict,
    utcnow,
    validation,
)
from localcloud.emulator.hosting.events import EndpointEvents
from localcloud.emulator.hosting.records import Deployment, Endpoint, EndpointConfig, plan_arn_of
from localcloud.emulator.market import on_demand_limit
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.training_plans import quota_error
from localcloud.faults import FaultKind

_IN_PROGRESS = frozenset({"Creating", "Updating", "SystemUpdating", "RollingBack"})
INSUFFICIENT_CAPACITY_REASON = (
    "Unable to provision requested ML compute capacity due to InsufficientInstanceCapacity error. "
    "Please retry using a different ML instance type or after some time."
)


class Endpoints(EndpointEvents):
    """The endpoint operations."""

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
