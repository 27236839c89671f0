"""What every step contract shares: the input and output bases, the platform a step input carries, the
error a ``Catch`` hands on, and the poll backoff.

Inputs ignore unknown fields (a state may carry more than a step needs); outputs forbid them and are dumped
with ``model_dump(mode="json")``: timestamps ``YYYY-MM-DDTHH:MM:SSZ``, money decimal strings.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from capacity.base import Model
from capacity.platforms import PlatformName as Platform


class StepIn(Model):
    model_config = ConfigDict(extra="ignore")


StepPlatform = Platform | None
"""A step input's ``platform`` (the request's, from :class:`RecordRequestOutput` through the state): None
when the input lacks it, i.e. a state machine execution started on a definition from before ``platform``
was carried (executions keep the definition they started with); the step then reads the platform from
the ledger, as it did before."""


class StepOut(Model):
    model_config = ConfigDict(extra="forbid")

    def to_json(self) -> dict[str, Any]:
        """The JSON-safe dict the handler returns."""
        return self.model_dump(mode="json")


class StepError(StepIn):
    """The ``{"Error", "Cause"}`` object a Step Functions ``Catch`` puts in ``ResultPath``."""

    Error: str = "States.TaskFailed"
    Cause: str | None = None


def backoff_seconds(attempt: int, *, base: int, cap: int) -> int:
    """``base * 2**attempt`` seconds, capped at ``cap`` (poll intervals that grow with the attempt)."""
    return int(min(base * 2 ** min(max(attempt, 0), 16), cap))
