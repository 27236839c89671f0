"""What runs on the reservation: ``create_endpoint`` and ``create_inference_components`` (SageMaker),
``launch_instances`` (EC2).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from capacity.contracts.common import StepIn, StepOut


# 7. create_endpoint
class EndpointInput(StepIn):
    """``{"request_id", "action": "create" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["create", "status"]
    attempt: int = Field(default=0, ge=0)


class EndpointOutput(StepOut):
    """``{"endpoint_name", "status", "next_wait_seconds" (30..300, 0 when InService), "attempt"}``."""

    endpoint_name: str
    status: str
    next_wait_seconds: int
    attempt: int


# 8. create_inference_components
class ComponentsInput(StepIn):
    """``{"request_id", "action": "create" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["create", "status"]
    attempt: int = Field(default=0, ge=0)


class ComponentsOutput(StepOut):
    """``{"status": "InService" | "Creating", "component_names", "next_wait_seconds", "attempt"}``."""

    status: Literal["InService", "Creating"]
    component_names: list[str]
    next_wait_seconds: int
    attempt: int


# 7b. launch_instances (platform ec2)
class LaunchInput(StepIn):
    """``{"request_id", "action": "launch" | "status", "attempt"?}``."""

    request_id: str
    action: Literal["launch", "status"]
    attempt: int = Field(default=0, ge=0)


class LaunchOutput(StepOut):
    """``{"status": "Running" | "Pending", "capacity_reservation_id", "availability_zone", "instance_ids",
    "next_wait_seconds", "attempt"}``."""

    status: Literal["Running", "Pending"]
    capacity_reservation_id: str
    availability_zone: str
    instance_ids: list[str]
    next_wait_seconds: int
    attempt: int
