"""``on_demand``: capacity run on demand or on spot (strategy ``on-demand-first`` / ``spot-ok``), before any
search.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from capacity.contracts.common import StepIn, StepOut, StepPlatform


# 2a. on_demand (strategy on-demand-first / spot-ok, before any search)
class OnDemandInput(StepIn):
    """``{"request_id", "platform", "action": "try" | "status", "attempt"?}``."""

    request_id: str
    platform: StepPlatform = None
    action: Literal["try", "status"]
    attempt: int = Field(default=0, ge=0)


class OnDemandOutput(StepOut):
    """``{"outcome", "region", "market", "instance_ids", "next_wait_seconds", "attempt"}``.

    ``outcome``: ``skipped`` (strategy ``reserved``, a dry run, over budget or not supported: reserve),
    ``unavailable`` (no capacity in any region or market: reserve), ``launched`` (instances or an endpoint
    starting: poll ``status``), ``running`` (EC2: ``READY``), ``endpoint_ready`` (SageMaker: the on-demand
    endpoint is ``InService``; create the inference components).
    """

    outcome: Literal["skipped", "unavailable", "launched", "running", "endpoint_ready"]
    region: str | None = None
    market: str | None = None
    instance_ids: list[str] = Field(default_factory=list)
    next_wait_seconds: int = 0
    attempt: int = 0
