"""SageMaker Runtime ``InvokeEndpoint``: a canned reply where the endpoint or component has capacity, the
error AWS sends where it has none, and the ``AWS/SageMaker`` invocation metrics of each."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from localcloud.contracts import AwsError
from localcloud.emulator import cloudwatch
from localcloud.emulator.common import (
    Params,
    Response,
    utcnow,
)
from localcloud.emulator.hosting.records import Component, Endpoint
from localcloud.emulator.hosting.state import HostingState
from localcloud.faults import FaultKind

NO_CAPACITY_MESSAGE = (
    "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress "
    "(if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API."
)


class Runtime(HostingState):
    """The SageMaker Runtime operation."""

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
