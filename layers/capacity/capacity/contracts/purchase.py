"""``purchase_capacity``: buy the chosen offering once (or adopt the reservation a request brings) and
answer the reservation in its platform's own names.
"""

from __future__ import annotations

from typing import Literal

from capacity.contracts.common import StepIn, StepOut, StepPlatform
from capacity.offerings import OfferingSummary
from capacity.purchases import CapacityBlockPurchase, ReservedPurchase
from capacity.wire import Money, UtcDatetime


# 5. purchase_capacity
class PurchaseInput(StepIn):
    """``{"request_id", "platform", "offering": {...}, "execution"}``: the offering chosen by
    ``choose_offering``, and the Step Functions execution that buys (``$$.Execution.Id``; it owns the
    purchase intent)."""

    request_id: str
    platform: StepPlatform = None
    offering: OfferingSummary
    execution: str | None = None


class AdoptInput(StepIn):
    """``{"request_id", "platform", "execution", "action": "adopt"}``: use the reservation the request brings
    (:func:`capacity.logic.steps.purchase.adopt_reservation`); nothing is bought."""

    request_id: str
    platform: StepPlatform = None
    action: Literal["adopt"]
    execution: str | None = None


class _Bought(StepOut):
    """What every reservation bought (or adopted) answers: region, start/end (UTC), upfront fee (USD)."""

    region: str
    start_time: UtcDatetime
    end_time: UtcDatetime
    upfront_fee_usd: Money


class TrainingPlanOutput(_Bought):
    """The training plan bought (or adopted): ``{"platform": "sagemaker", "training_plan_arn",
    "training_plan_name", "region", "start_time", "end_time", "upfront_fee_usd"}``."""

    platform: Literal["sagemaker"] = "sagemaker"
    training_plan_arn: str
    training_plan_name: str

    @property
    def arn(self) -> str:
        """The training plan's ARN (the events' resource)."""
        return self.training_plan_arn


class CapacityBlockOutput(_Bought):
    """The capacity block bought (or adopted): ``{"platform": "ec2", "capacity_reservation_arn",
    "capacity_reservation_id", "availability_zone", "region", "start_time", "end_time",
    "upfront_fee_usd"}``."""

    platform: Literal["ec2"] = "ec2"
    capacity_reservation_arn: str
    capacity_reservation_id: str
    availability_zone: str

    @property
    def arn(self) -> str:
        """The capacity reservation's ARN (the events' resource)."""
        return self.capacity_reservation_arn


PurchaseOutput = TrainingPlanOutput | CapacityBlockOutput
"""``purchase_capacity``'s output, kept at ``$.purchase``: the reservation in its platform's own names (issue
28); ``CheckPayment``/``CheckActivation`` pass it whole to ``wait_for_activation``, ``WaitForStart`` waits
for its ``start_time``."""


def purchase_output(record: ReservedPurchase) -> PurchaseOutput:
    """The output of the ``PURCHASE`` item's reservation (a training plan or a capacity block)."""
    if isinstance(record, CapacityBlockPurchase):
        return CapacityBlockOutput.model_validate(
            record.model_dump(include=set(CapacityBlockOutput.model_fields))
        )
    return TrainingPlanOutput.model_validate(record.model_dump(include=set(TrainingPlanOutput.model_fields)))
