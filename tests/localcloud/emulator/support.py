"""Helpers for tests that drive the emulator directly (no botocore round trip): an event sink that records,
a minimal clock loop over the emulator's tickers, and a one-call deployment on a training plan."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from localcloud.contracts import AwsError

if TYPE_CHECKING:
    from localcloud.emulator import Emulator

START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
"""Where emulator tests freeze the clock: a Tuesday, 09:00 UTC (the next 11:30 UTC boundary is that day)."""

Call = Callable[..., dict[str, Any]]
"""``call(service, operation, region=..., faults=..., **params) -> response``."""


class Traveller(Protocol):
    """What the clock loop needs from time-machine's ``travel(...)`` context value."""

    def move_to(self, destination: datetime, tick: bool | None = None) -> None:
        """Jump the virtual clock."""
        ...


def run_clock(
    emulator: Emulator, traveller: Traveller, now: datetime, until: datetime, max_steps: int = 10_000
) -> int:
    """Step the virtual clock through every instant the emulator's tickers ask for, up to ``until``, then
    move to ``until``. What the runtime's clock does, minus everything that is not the emulator.

    Returns:
        The number of instants stepped to (0 when nothing was due: idle costs nothing).
    """
    steps = 0
    while steps < max_steps:
        dues = [due for ticker in emulator.tickers if (due := ticker.next_due(now)) is not None]
        if not dues:
            break
        moment = min(due.at for due in dues)
        if moment > until:
            break
        traveller.move_to(moment)
        now = moment
        steps += 1
        for ticker in emulator.tickers:
            ticker.advance(now)
    traveller.move_to(until)
    for ticker in emulator.tickers:
        ticker.advance(until)
    return steps


@dataclass(frozen=True)
class Deployment:
    """Names and ARNs of a deployment made by :func:`deploy_on_plan`."""

    plan_arn: str
    plan_start: datetime
    plan_end: datetime
    config: str
    endpoint: str
    components: tuple[str, ...]


def deploy_on_plan(
    emulator: Emulator,
    traveller: Traveller,
    *,
    region: str = "us-east-1",
    instance_type: str = "ml.p5.48xlarge",
    count: int = 1,
    days: int = 1,
    components: tuple[str, ...] = ("model-a",),
    accelerators: int = 1,
    min_instances: int = 1,
    max_instances: int | None = None,
    copies: int = 1,
    name: str = "demo",
) -> Deployment:
    """Search, buy a plan, wait for it to be ``Active``, create an endpoint on it with managed instance
    scaling, wait for ``InService``, create components with ``copies`` copies, wait for ``InService``.

    Raises:
        AssertionError: no offering was found.
    """
    plans = emulator.call(
        "sagemaker",
        "SearchTrainingPlanOfferings",
        {
            "InstanceType": instance_type,
            "InstanceCount": count,
            "DurationHours": days * 24,
            "TargetResources": ["endpoint"],
        },
        region=region,
    )["TrainingPlanOfferings"]
    if not plans:
        raise AssertionError(f"no {instance_type} offering in {region}")
    offering = plans[0]
    plan_arn = emulator.call(
        "sagemaker",
        "CreateTrainingPlan",
        {
            "TrainingPlanName": f"{name}-plan",
            "TrainingPlanOfferingId": offering["TrainingPlanOfferingId"],
        },
        region=region,
    )["TrainingPlanArn"]
    start = offering["ReservedCapacityOfferings"][0]["StartTime"]
    end = offering["ReservedCapacityOfferings"][0]["EndTime"]
    traveller.move_to(start + timedelta(minutes=1))
    emulator.call(
        "sagemaker",
        "CreateEndpointConfig",
        {
            "EndpointConfigName": f"{name}-config",
            "ExecutionRoleArn": "arn:aws:iam::123456789012:role/SageMakerExecution",
            "ProductionVariants": [
                {
                    "VariantName": "AllTraffic",
                    "InstanceType": instance_type,
                    "InitialInstanceCount": count,
                    "CapacityReservationConfig": {
                        "MlReservationArn": plan_arn,
                        "CapacityReservationPreference": "capacity-reservations-only",
                    },
                    "ManagedInstanceScaling": {
                        "Status": "ENABLED",
                        "MinInstanceCount": min_instances,
                        "MaxInstanceCount": max_instances or count,
                    },
                    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                }
            ],
        },
        region=region,
    )
    emulator.call(
        "sagemaker",
        "CreateEndpoint",
        {"EndpointName": f"{name}-endpoint", "EndpointConfigName": f"{name}-config"},
        region=region,
    )
    traveller.move_to(start + timedelta(minutes=6))
    for component in components:
        emulator.call(
            "sagemaker",
            "CreateInferenceComponent",
            {
                "InferenceComponentName": component,
                "EndpointName": f"{name}-endpoint",
                "VariantName": "AllTraffic",
                "Specification": {
                    "Container": {
                        "Image": "example.com/llm:1",
                        "ArtifactUrl": f"s3://models/{component}.tar.gz",
                    },
                    "ComputeResourceRequirements": {
                        "NumberOfAcceleratorDevicesRequired": accelerators,
                        "MinMemoryRequiredInMb": 1024,
                    },
                },
                "RuntimeConfig": {"CopyCount": copies},
            },
            region=region,
        )
    traveller.move_to(start + timedelta(minutes=10))
    return Deployment(plan_arn, start, end, f"{name}-config", f"{name}-endpoint", components)


@contextmanager
def raises_aws(code: str, phrase: str | None = None) -> Iterator[pytest.ExceptionInfo[AwsError]]:
    """Expect an :class:`AwsError` with ``code`` (and ``phrase`` in its message)."""
    with pytest.raises(AwsError) as info:
        yield info
    if info.value.code != code:
        raise AssertionError(f"expected {code}, got {info.value.code}: {info.value.message}")
    if phrase is not None and phrase not in info.value.message:
        raise AssertionError(f"{phrase!r} not in {info.value.message!r}")
