"""Inference components: ``CreateInferenceComponent``, ``DescribeInferenceComponent``,
``UpdateInferenceComponentRuntimeConfig`` (and the copy changes Application Auto Scaling asks for),
``DeleteInferenceComponent`` and ``ListInferenceComponents``."""

from __future__ import annotations

from collections.abc import Callable
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
from localcloud.emulator.hosting.packing import Requirements, spec_of
from localcloud.emulator.hosting.records import Component, CopyChange, Endpoint
from localcloud.emulator.hosting.state import HostingState
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.shapes import conform, output_shape
from localcloud.faults import FaultKind


class InferenceComponents(HostingState):
    """The inference component operations."""

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
        spec = spec_of(variant)
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
        """``DeleteInferenceComponent``: ``Deleting`` for ``Timings.component_delete``, then gone; a repeat
        while ``Deleting`` is a no-op.

        Refused (``ValidationException``) while the component is ``Creating`` or ``Updating``: AWS refuses it
        while ``Creating`` (a component stuck ``Creating`` cannot be deleted: aws/amazon-sagemaker-examples
        issue 3432); while ``Updating`` it is not documented either way, so the less kind answer is taken, as
        for endpoints (``Cannot delete in-progress endpoint``)."""
        now = utcnow()
        component = self._component(region, params["InferenceComponentName"], now)
        status = component.status(now)
        if status == "Deleting":
            return {}
        if status in ("Creating", "Updating"):
            raise validation(f'Cannot delete inference component "{component.arn}" while it is {status}.')
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
