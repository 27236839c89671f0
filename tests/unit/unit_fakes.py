"""Fakes of the logic's ports (SageMaker, events, scheduler, task tokens, Slack) and data builders.

The SageMaker fake keeps the AWS behaviour the logic depends on: deterministic plan names collide
(``ResourceInUse`` -> ``TrainingPlanNameInUse``), stale offering ids fail (``OfferingExpired``), quota
(``QuotaExceeded``), and endpoint/component statuses the test sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from capacity.adapters.sagemaker import ComponentInfo, EndpointInfo
from capacity.errors import OfferingExpired, QuotaExceeded, TrainingPlanNameInUse
from capacity.resources import Extension, SlackMessage, TrainingPlan
from pydantic import BaseModel

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
WINDOW_START = datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
WINDOW_END = datetime(2026, 12, 14, 11, 30, tzinfo=UTC)
ACCOUNT = "123456789012"


class Clock:
    """A settable UTC clock."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def request_body(**overrides: Any) -> dict[str, Any]:
    """A valid request: 2 x ml.p5.48xlarge, 72 h in a 6-day window, two models, $30,000 budget."""
    body: dict[str, Any] = {
        "request_id": "demo-1",
        "requester": "alice@example.com",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 2,
        "earliest_start": "2026-12-08T11:30:00Z",
        "latest_end": "2026-12-14T11:30:00Z",
        "duration_hours": 72,
        "regions": ["us-east-1", "us-west-2"],
        "max_upfront_fee_usd": "30000",
        "models": [
            {
                "name": "llama-eu",
                "image": "763104351884.dkr.ecr.us-east-1.amazonaws.com/djl-inference:0.29.0-lmi11.0.0-cu124",
                "model_data_url": "s3://models/llama-eu/model.tar.gz",
                "accelerators": 4,
                "cpu_cores": 16,
                "memory_mb": 262144,
                "copies": {"initial": 1, "min": 0, "max": 2},
            },
            {
                "name": "llama-us",
                "model_name": "llama-us-v3",
                "accelerators": 4,
                "cpu_cores": 16,
                "memory_mb": 262144,
                "copies": {"initial": 1, "min": 1, "max": 2},
            },
        ],
    }
    body.update(overrides)
    return body


def raw_offering(
    offering_id: str,
    *,
    fee: str,
    start: datetime = WINDOW_START + timedelta(days=1),
    hours: int = 72,
    count: int = 2,
    zone: str = "us-east-1a",
    instance_type: str = "ml.p5.48xlarge",
    currency: str = "USD",
) -> dict[str, Any]:
    """One ``SearchTrainingPlanOfferings`` item as botocore parses it."""
    end = start + timedelta(hours=hours)
    return {
        "TrainingPlanOfferingId": offering_id,
        "TargetResources": ["endpoint"],
        "RequestedStartTimeAfter": WINDOW_START,
        "RequestedEndTimeBefore": WINDOW_END,
        "DurationHours": hours,
        "DurationMinutes": 0,
        "UpfrontFee": fee,
        "CurrencyCode": currency,
        "ReservedCapacityOfferings": [
            {
                "InstanceType": instance_type,
                "InstanceCount": count,
                "AvailabilityZone": zone,
                "DurationHours": hours,
                "DurationMinutes": 0,
                "StartTime": start,
                "EndTime": end,
            }
        ],
    }


@dataclass
class World:
    """Shared state of the fake SageMaker across regions."""

    offerings: dict[tuple[str, int, int], list[dict[str, Any]]] = field(default_factory=dict)
    quota_regions: set[str] = field(default_factory=set)
    expired_ids: set[str] = field(default_factory=set)
    plans: dict[str, TrainingPlan] = field(default_factory=dict)
    plan_status: str = "Pending"
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    endpoints: dict[str, EndpointInfo] = field(default_factory=dict)
    components: dict[str, ComponentInfo] = field(default_factory=dict)
    component_specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    endpoint_status_after_create: str = "Creating"
    models: set[tuple[str, str]] = field(default_factory=lambda: {("*", "llama-us-v3")})
    """``(region, model name)`` of the SageMaker models that exist (``*``: every region)."""
    plan_extensions: list[Extension] = field(default_factory=list)
    """The extension offerings every plan is offered (any duration; ``expired_ids`` applies)."""
    extension_history: list[Extension] = field(default_factory=list)
    """The extensions bought (``ExtendTrainingPlan``), ``pending`` payment."""

    def client(self, region: str, *_client: Any) -> FakeSageMaker:
        """Stands in for ``SageMakerAdapter(region, client)`` (the client is ignored)."""
        return FakeSageMaker(region, self)

    def names(self, operation: str) -> list[dict[str, Any]]:
        return [args for op, args in self.calls if op == operation]

    def add_offerings(self, region: str, *items: dict[str, Any], duration: int = 72, count: int = 2) -> None:
        self.offerings.setdefault((region, duration, count), []).extend(items)


class FakeSageMaker:
    """In-memory :class:`capacity.ports.SageMakerPort` for one region."""

    def __init__(self, region: str, world: World) -> None:
        self.region = region
        self.world = world

    def _log(self, operation: str, **args: Any) -> None:
        self.world.calls.append((operation, {"region": self.region, **args}))

    def search_training_plan_offerings(
        self,
        *,
        instance_type: str,
        instance_count: int,
        start_after: datetime,
        end_before: datetime,
        duration_hours: int,
    ) -> list[dict[str, Any]]:
        self._log("SearchTrainingPlanOfferings", duration=duration_hours, count=instance_count)
        if self.region in self.world.quota_regions:
            raise QuotaExceeded(f"SearchTrainingPlanOfferings in {self.region}: ResourceLimitExceeded")
        return [
            dict(item) for item in self.world.offerings.get((self.region, duration_hours, instance_count), [])
        ]

    def _find_offering(self, offering_id: str) -> dict[str, Any] | None:
        for (region, _, _), items in self.world.offerings.items():
            for item in items:
                if region == self.region and item["TrainingPlanOfferingId"] == offering_id:
                    return item
        return None

    def create_training_plan(self, *, name: str, offering_id: str, tags: Sequence[Mapping[str, str]]) -> str:
        self._log("CreateTrainingPlan", name=name, offering_id=offering_id)
        if name in self.world.plans:
            raise TrainingPlanNameInUse(f"training plan {name} already exists")
        if offering_id in self.world.expired_ids:
            raise OfferingExpired(f"offering {offering_id} has expired")
        offering = self._find_offering(offering_id)
        segment = (offering or {}).get("ReservedCapacityOfferings", [{}])[0]
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:training-plan/{name}"
        self.world.plans[name] = TrainingPlan(
            arn=arn,
            name=name,
            status=self.world.plan_status,
            status_message=None,
            start_time=segment.get("StartTime"),
            end_time=segment.get("EndTime"),
            upfront_fee_usd=Decimal(offering["UpfrontFee"]) if offering else None,
            total_instance_count=segment.get("InstanceCount"),
            instance_type=segment.get("InstanceType"),
        )
        self.world.tags[arn] = {t["Key"]: t["Value"] for t in tags}
        return arn

    def set_plan_status(self, name: str, status: str, message: str | None = None) -> None:
        plan = self.world.plans[name]
        self.world.plans[name] = TrainingPlan(
            **{**plan.__dict__, "status": status, "status_message": message}
        )

    def describe_training_plan(self, name: str) -> TrainingPlan | None:
        self._log("DescribeTrainingPlan", name=name)
        return self.world.plans.get(name)

    def search_plan_extensions(self, plan_arn: str, hours: int) -> list[Extension]:
        self._log("SearchTrainingPlanOfferings", plan_arn=plan_arn, hours=hours)
        # more are tested on the local cloud (tests/integration/test_extensions.py)
        return [item for item in self.world.plan_extensions if item.offering_id not in self.world.expired_ids]

    def extend_training_plan(self, offering_id: str) -> Extension:
        self._log("ExtendTrainingPlan", offering_id=offering_id)
        found = next((item for item in self.world.plan_extensions if item.offering_id == offering_id), None)
        if found is None or offering_id in self.world.expired_ids:
            raise OfferingExpired(f"no extension offering {offering_id} in the fake")
        bought = replace(found, status="pending")
        self.world.extension_history.append(bought)
        return bought

    def plan_extension_history(self, plan_arn: str) -> list[Extension]:
        self._log("DescribeTrainingPlanExtensionHistory", plan_arn=plan_arn)
        return list(self.world.extension_history)

    def find_training_plan(self, name: str) -> TrainingPlan | None:
        self._log("ListTrainingPlans", name=name)
        return self.world.plans.get(name)

    def create_endpoint_config(
        self,
        *,
        name: str,
        variant: Mapping[str, Any],
        execution_role_arn: str,
        tags: Sequence[Mapping[str, str]],
    ) -> bool:
        self._log("CreateEndpointConfig", name=name, variant=dict(variant), role=execution_role_arn)
        if name in self.world.configs:
            return False
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:endpoint-config/{name}"
        self.world.configs[name] = {
            "EndpointConfigName": name,
            "EndpointConfigArn": arn,
            "variant": dict(variant),
        }
        self.world.tags[arn] = {t["Key"]: t["Value"] for t in tags}
        return True

    def model_exists(self, name: str) -> bool:
        self._log("DescribeModel", name=name)
        return (self.region, name) in self.world.models or ("*", name) in self.world.models

    def describe_endpoint_config(self, name: str) -> dict[str, Any] | None:
        return self.world.configs.get(name)

    def delete_endpoint_config(self, name: str) -> bool:
        self._log("DeleteEndpointConfig", name=name)
        return self.world.configs.pop(name, None) is not None

    def create_endpoint(self, *, name: str, config_name: str, tags: Sequence[Mapping[str, str]]) -> bool:
        self._log("CreateEndpoint", name=name, config=config_name)
        if name in self.world.endpoints:
            return False
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:endpoint/{name}"
        self.world.endpoints[name] = EndpointInfo(
            name=name,
            arn=arn,
            status=self.world.endpoint_status_after_create,
            failure_reason=None,
            config_name=config_name,
        )
        self.world.tags[arn] = {t["Key"]: t["Value"] for t in tags}
        return True

    def set_endpoint_status(self, name: str, status: str, reason: str | None = None) -> None:
        info = self.world.endpoints[name]
        self.world.endpoints[name] = EndpointInfo(
            name=info.name, arn=info.arn, status=status, failure_reason=reason, config_name=info.config_name
        )

    def describe_endpoint(self, name: str) -> EndpointInfo | None:
        return self.world.endpoints.get(name)

    def delete_endpoint(self, name: str) -> bool:
        self._log("DeleteEndpoint", name=name)
        if name not in self.world.endpoints:
            return False
        self.set_endpoint_status(name, "Deleting")
        return True

    def list_endpoint_names(self, name_contains: str) -> list[tuple[str, str]]:
        return [(n, e.arn) for n, e in self.world.endpoints.items() if name_contains in n]

    def list_endpoint_config_names(self, name_contains: str) -> list[tuple[str, str]]:
        return [(n, c["EndpointConfigArn"]) for n, c in self.world.configs.items() if name_contains in n]

    def create_inference_component(
        self,
        *,
        name: str,
        endpoint_name: str,
        variant_name: str,
        specification: Mapping[str, Any],
        copy_count: int,
        tags: Sequence[Mapping[str, str]],
    ) -> bool:
        self._log("CreateInferenceComponent", name=name, copy_count=copy_count, variant=variant_name)
        if name in self.world.components:
            return False
        arn = f"arn:aws:sagemaker:{self.region}:{ACCOUNT}:inference-component/{name}"
        self.world.components[name] = ComponentInfo(
            name=name, arn=arn, status="Creating", endpoint_name=endpoint_name
        )
        self.world.component_specs[name] = dict(specification)
        self.world.tags[arn] = {t["Key"]: t["Value"] for t in tags}
        return True

    def set_component_status(self, name: str, status: str, reason: str | None = None) -> None:
        info = self.world.components[name]
        self.world.components[name] = ComponentInfo(
            name=info.name,
            arn=info.arn,
            status=status,
            endpoint_name=info.endpoint_name,
            failure_reason=reason,
        )

    def describe_inference_component(self, name: str) -> ComponentInfo | None:
        return self.world.components.get(name)

    def list_inference_components(
        self, *, endpoint_name: str | None = None, name_contains: str | None = None
    ) -> list[ComponentInfo]:
        return [
            c
            for c in self.world.components.values()
            if (endpoint_name is None or c.endpoint_name == endpoint_name)
            and (name_contains is None or name_contains in c.name)
        ]

    def delete_inference_component(self, name: str) -> bool:
        self._log("DeleteInferenceComponent", name=name)
        if name not in self.world.components:
            return False
        self.set_component_status(name, "Deleting")
        return True

    def update_inference_component_copies(self, name: str, copies: int) -> None:
        self._log("UpdateInferenceComponentRuntimeConfig", name=name, copies=copies)
        self.world.components[name] = replace(self.world.components[name], desired_copies=copies)

    def finish_deletions(self) -> None:
        """What SageMaker does a few minutes after the deletes: the resources disappear."""
        for name in [n for n, c in self.world.components.items() if c.status == "Deleting"]:
            del self.world.components[name]
        for name in [n for n, e in self.world.endpoints.items() if e.status == "Deleting"]:
            del self.world.endpoints[name]

    def resource_tags(self, arn: str) -> dict[str, str] | None:
        return self.world.tags.get(arn)


@dataclass
class FakeEvents:
    """Records ``put`` calls as (detail type, JSON detail)."""

    puts: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def put(self, detail_type: str, detail: BaseModel, *, resources: Sequence[str] = ()) -> str:
        self.puts.append((detail_type, detail.model_dump(mode="json")))
        return f"event-{len(self.puts)}"

    def types(self) -> list[str]:
        return [detail_type for detail_type, _ in self.puts]


@dataclass
class FakeScheduler:
    """Records release schedules by name (a second create with the same name is a conflict)."""

    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)

    def move_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> None:
        self.schedules[name] = {"at": at, "request_id": request_id, "reason": reason}

    def move_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> None:
        self.schedules[name] = {"at": at, "detail_type": detail_type, "detail": detail.model_dump()}

    def schedule_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> bool:
        if name in self.schedules:
            return False
        self.schedules[name] = {"at": at, "request_id": request_id, "reason": reason}
        return True

    def schedule_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> bool:
        if name in self.schedules:
            return False
        self.schedules[name] = {"at": at, "detail_type": detail_type, "detail": detail.model_dump()}
        return True

    def delete(self, name: str) -> bool:
        self.deleted.append(name)
        return self.schedules.pop(name, None) is not None


@dataclass
class FakeTasks:
    """Records task token answers."""

    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def succeed(self, token: str, output: Mapping[str, Any]) -> None:
        self.calls.append(("success", token, dict(output)))

    def fail(self, token: str, *, error: str, cause: str) -> None:
        self.calls.append(("failure", token, {"error": error, "cause": cause}))


@dataclass
class FakeSlack:
    """Records Slack messages."""

    messages: list[SlackMessage] = field(default_factory=list)

    def post(self, message: SlackMessage) -> bool:
        self.messages.append(message)
        return True

    def publish(self, message: SlackMessage) -> str | None:
        self.messages.append(message)
        return f"1700000000.{len(self.messages):06d}"

    def texts(self) -> list[str]:
        return [m.text for m in self.messages]
