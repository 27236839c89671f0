"""Models and endpoint configs: ``CreateModel``, ``DescribeModel``, ``DeleteModel``, ``CreateEndpointConfig``
(with its checks of variants, managed instance scaling and training plans), ``DescribeEndpointConfig``,
``DeleteEndpointConfig``, ``ListEndpointConfigs``."""

from __future__ import annotations

from typing import Any

from localcloud.emulator.common import (
    Params,
    Response,
    paginate,
    sort_listing,
    tags_to_dict,
    utcnow,
    validation,
)
from localcloud.emulator.hosting.records import EndpointConfig, Model, mis_enabled, plan_arn_of
from localcloud.emulator.hosting.state import HostingState
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.shapes import check_enum, conform, output_shape
from localcloud.faults import FaultKind


class ModelsAndConfigs(HostingState):
    """The model and endpoint config operations."""

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
