"""``search_offerings`` and ``choose_offering``: the searches of a look and the decision on them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from capacity.contracts.common import StepIn, StepOut
from capacity.offerings import OfferingSummary
from capacity.wire import UtcDatetime


# 2. search_offerings
class SearchInput(StepIn):
    """``{"request_id", "region", "look"}`` (one Map iteration per region); ``look`` counts the searches of
    a request that keeps looking (0 first): each look's offerings are stored apart."""

    request_id: str
    region: str
    look: int = Field(default=0, ge=0)


class SearchOutput(StepOut):
    """``{"region", "count", "feasible", "quota_error"}``: offerings stored, feasible ones, quota problem."""

    region: str
    count: int
    feasible: int
    quota_error: str | None = None


# 3. choose_offering
class ChooseInput(StepIn):
    """``{"request_id", "searches": [<search outputs>], "look"}`` (``look``: which search, 0 first)."""

    request_id: str
    searches: list[SearchOutput] = Field(default_factory=list)
    look: int = Field(default=0, ge=0)


Decision = Literal["NO_OFFERING", "REJECTED", "DRY_RUN", "APPROVAL_REQUIRED", "PURCHASE", "SEARCH_AGAIN"]


class ChooseOutput(StepOut):
    """``{"decision", "reason", "offering" | null, "approval_timeout_seconds", "look", "next_look",
    "next_look_at" | null, "wait_seconds", "continue_as" | null}``.

    Keep looking (issue 17): ``SEARCH_AGAIN`` waits ``wait_seconds`` (at least 1; the ``SearchLater``
    task's timeout) until ``next_look_at`` (UTC) and searches again as look ``next_look``, in a fresh
    execution named ``continue_as`` when it is set (continue-as-new before the history limit, issue 31;
    :func:`capacity.logic.continuity.keep_looking.successor_name`). A dry run that found nothing fitting says
    in ``next_look_at`` when the workflow would look again (null otherwise).
    """

    decision: Decision
    reason: str
    offering: OfferingSummary | None
    approval_timeout_seconds: int
    look: int = 0
    next_look: int = 1
    next_look_at: UtcDatetime | None = None
    wait_seconds: int = 0
    continue_as: str | None = None
