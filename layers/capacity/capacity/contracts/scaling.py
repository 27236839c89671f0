"""``scale_components``: what it did with one alarm state change (its input is the ``CloudWatch Alarm State
Change`` event: :mod:`capacity.logic.sagemaker.scaling`).
"""

from __future__ import annotations

from typing import Literal

from capacity.contracts.common import StepOut

# 10. scale_components: in = the ``CloudWatch Alarm State Change`` event (capacity.logic.sagemaker.scaling)
ScaleAction = Literal[
    "ignored",
    "scale_out_from_zero",
    "refused_scale_out",
    "scale_in_to_zero",
    "cold_start_ended",
    "release_requested_idle",
    "idle_check_scheduled",
    "idle_alarm_rearmed",
]


class ScaleOutput(StepOut):
    """``{"action", "reason", "request_id", "model", "from_copies", "to_copies", "failed_requests",
    "duplicate"}``: what ``scale_components`` did with one alarm state change and why (copies are desired
    copy counts; ``failed_requests`` counts ``NoCapacityInvocationFailures``)."""

    action: ScaleAction
    reason: str
    request_id: str | None = None
    model: str | None = None
    from_copies: int | None = None
    to_copies: int | None = None
    failed_requests: int | None = None
    duplicate: bool = False
