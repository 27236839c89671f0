"""``wait_for_activation``: poll the reservation bought until it is active."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from capacity.contracts.common import StepIn, StepOut, StepPlatform
from capacity.errors import PlanFailed
from capacity.platforms import PlatformName as Platform


# 6. wait_for_activation
class TrainingPlanHeld(StepIn):
    """The training plan an activation poll reads (``$.purchase``: its other fields are ignored)."""

    platform: Literal["sagemaker"]
    region: str
    training_plan_name: str


class CapacityBlockHeld(StepIn):
    """The capacity block an activation poll reads (``$.purchase``: its other fields are ignored)."""

    platform: Literal["ec2"]
    region: str
    capacity_reservation_id: str


class ActivationInput(StepIn):
    """``{"request_id", "platform", "purchase": {...}, "attempt"}``: ``purchase`` is ``purchase_capacity``'s
    output (:data:`PurchaseOutput`).

    Deprecated input: an execution started on a definition from before issue 28 passes ``region`` and
    ``training_plan_name`` instead of ``purchase`` (for ``platform`` ``ec2``, the capacity block's id was in
    ``training_plan_name``); it is read as the purchase (:meth:`training_plan`, :meth:`capacity_block`) until
    no such execution is left.
    """

    request_id: str
    platform: StepPlatform = None
    purchase: Annotated[TrainingPlanHeld | CapacityBlockHeld, Field(discriminator="platform")] | None = None
    attempt: int = Field(default=0, ge=0)
    region: str | None = None
    """Deprecated (before issue 28): the reservation's region."""
    training_plan_name: str | None = None
    """Deprecated (before issue 28): the training plan's name, or the capacity block's id."""

    @model_validator(mode="after")
    def _names_a_reservation(self) -> ActivationInput:
        if self.purchase is None and not (self.region and self.training_plan_name):
            raise ValueError("purchase is required: the purchase step's output ($.purchase)")
        return self

    def training_plan(self) -> TrainingPlanHeld:
        """The training plan to poll.

        Raises:
            PlanFailed: the input names no training plan.
        """
        if isinstance(self.purchase, TrainingPlanHeld):
            return self.purchase
        if self.purchase is None and self.region and self.training_plan_name:
            return TrainingPlanHeld(
                platform="sagemaker", region=self.region, training_plan_name=self.training_plan_name
            )
        raise PlanFailed(f"no training plan to poll for {self.request_id}")

    def capacity_block(self) -> CapacityBlockHeld:
        """The capacity block to poll.

        Raises:
            PlanFailed: the input names no capacity block.
        """
        if isinstance(self.purchase, CapacityBlockHeld):
            return self.purchase
        if self.purchase is None and self.region and self.training_plan_name:
            return CapacityBlockHeld(
                platform="ec2", region=self.region, capacity_reservation_id=self.training_plan_name
            )
        raise PlanFailed(f"no capacity block to poll for {self.request_id}")


class ActivationOutput(StepOut):
    """``{"status", "attempt": attempt + 1, "next_wait_seconds": 60 * 2**attempt capped at 900, "platform"}``.

    ``platform`` echoes the reservation's (the state machine branches on ``$.platform``, the request's).
    """

    status: str
    attempt: int
    next_wait_seconds: int
    platform: Platform = "sagemaker"
