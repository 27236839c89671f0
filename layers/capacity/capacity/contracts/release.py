"""``release_capacity``: tear down what a reservation holds, step by step."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from capacity.contracts.common import StepError, StepIn, StepOut
from capacity.platforms import PlatformName as Platform
from capacity.records import CostSummary
from capacity.wire import UtcDatetime

# 9. release_capacity
ReleaseAction = Literal[
    "begin",
    "delete_scaling",
    "delete_alarms",
    "delete_components",
    "delete_endpoint",
    "delete_endpoint_config",
    "finish",
    "attempt_failed",
]


class ReleaseInput(StepIn):
    """``{"request_id", "action", "reason"?, "attempt"?, "detail"?, "error"?, "attempt_id"?}``.

    ``begin`` gets the ``ReleaseRequested`` event's ``detail`` and validates it (``request_id`` is ``""``
    when the event did not carry a string one). ``attempt`` counts the polls of ``delete_components`` /
    ``delete_endpoint`` (backoff and deadline). ``attempt_failed`` gets the ``error`` the workflow caught
    and ``attempt_id`` (the release execution's name: one record and one alert per failed execution).
    """

    request_id: str = ""
    action: ReleaseAction
    reason: str | None = None
    attempt: int = Field(default=0, ge=0)
    detail: Any = None
    error: StepError | None = None
    attempt_id: str | None = Field(default=None, max_length=256)


class ReleaseOutput(StepOut):
    """``{"done", "remaining", "next_wait_seconds", "attempt", "already_released", "summary" | null,
    "leftovers", "retry_at" | null, "platform" | null, "payment_wait_seconds", "postponed"}``
    (``attempt_failed``: what is still there and when
    the release is tried again, UTC). ``platform`` is the ``PURCHASE``'s (null when nothing was bought):
    the release workflow branches on ``begin``'s to run only its platform's teardown states."""

    done: bool
    remaining: int = 0
    next_wait_seconds: int = 0
    attempt: int = 0
    already_released: bool = False
    summary: CostSummary | None = None
    leftovers: list[str] = Field(default_factory=list)
    retry_at: UtcDatetime | None = None
    platform: Platform | None = None
    payment_wait_seconds: int = 0
    """``begin``: an extension's payment is in flight; wait this long and begin again (nothing deleted)."""
    postponed: bool = False
    """``begin``: an extension was paid, the reservation serves to its new end (its schedule moved)."""
