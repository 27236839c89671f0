"""Ledger records: the reservation states, one state change (``STATE#`` item) and the cost summary recorded
with ``RELEASED``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, model_validator

from capacity.base import Model
from capacity.wire import Money, UtcDatetime


class State(StrEnum):
    """Reservation states recorded in the ledger (DESIGN.md section 4)."""

    REQUESTED = "REQUESTED"
    SEARCHING = "SEARCHING"
    """Nothing fits the rules yet; the request keeps looking until ``search_until`` (``detail.next_look_at``,
    issue 17). Recorded once per look."""
    PLANNED = "PLANNED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PURCHASED = "PURCHASED"
    SCHEDULED = "SCHEDULED"
    ACTIVE = "ACTIVE"
    DEPLOYING = "DEPLOYING"
    READY = "READY"
    RELEASING = "RELEASING"
    RELEASED = "RELEASED"
    REJECTED = "REJECTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    EXTENDED = "EXTENDED"
    """An extension in place was paid: ``money_usd`` its fee, ``detail.end_time`` the new end."""


FINAL_STATES = frozenset({State.RELEASED, State.REJECTED, State.FAILED, State.CANCELLED})
"""States after which the reserve workflow must not buy or deploy anything."""


class LedgerEntry(Model):
    """One state change of a reservation: an append-only ledger item ``sk = STATE#<time>#<seq>``.

    ``at`` is UTC; ``actor`` the function or person; ``detail`` a small JSON map; ``money_usd`` set when
    money moves (the purchase).
    """

    model_config = ConfigDict(frozen=True)

    request_id: str
    sk: str
    state: State
    at: UtcDatetime
    actor: str
    detail: dict[str, Any] = Field(default_factory=dict)
    money_usd: Money | None = None


# --------------------------------------------------------------------------------------- cost summary


class CostSummary(Model):
    """What a reservation cost and what it would have cost on demand (recorded with ``RELEASED``).

    Since issue 16 the use is what ran: ``instance_hours_used`` (instance counts over time) against
    ``instance_hours_reserved``; ``on_demand_equivalent_served_usd``, ``saving_usd``/``saving_percent``,
    ``utilisation_percent`` and ``effective_usd_per_served_instance_hour`` (USD per *used* instance-hour)
    follow from it.

    Hours are decimal hours; ``hours_served`` runs from the endpoint's READY (or DEPLOYING) time to the
    start of the release, within the plan. On-demand equivalents use :mod:`capacity.pricing` and the
    instance count; ``saving_usd``/``saving_percent`` compare the upfront fee with the on-demand cost of
    the hours served (negative when it did not pay off; no percentage when it never served);
    ``utilisation_percent`` is served/reserved; ``break_even_utilisation_percent`` is the utilisation at
    which the reservation equals on-demand.

    What was released is named in its platform's words (issue 28): ``training_plan_name`` for a training plan,
    ``capacity_reservation_id`` for a capacity block, neither for capacity run on demand (``market``). A
    summary recorded before named all three ``training_plan_name`` (a block's ``cr-...``, ``on-demand
    instances``, ``spot instances``): it reads as the kind that name says.
    """

    request_id: str
    market: Literal["reserved", "on-demand", "spot"] = "reserved"
    """``reserved`` (a training plan or a capacity block, bought upfront or brought), ``on-demand`` or
    ``spot``."""
    training_plan_name: str | None = None
    """The training plan's ``TrainingPlanName`` (SageMaker, reserved); None otherwise."""
    capacity_reservation_id: str | None = None
    """The capacity block's ``CapacityReservationId`` (``cr-...``; EC2, reserved); None otherwise."""
    region: str
    instance_type: str
    instance_count: int
    upfront_fee_usd: Money
    hours_reserved: Money
    hours_served: Money
    on_demand_usd_per_instance_hour: Money | None = None
    on_demand_equivalent_reserved_usd: Money | None = None
    on_demand_equivalent_served_usd: Money | None = None
    saving_usd: Money | None = None
    saving_percent: Money | None = None
    utilisation_percent: Money
    break_even_utilisation_percent: Money | None = None
    effective_usd_per_served_instance_hour: Money | None = None
    instance_hours_reserved: Money | None = None
    """Instances x hours the reservation holds (issue 16)."""
    instance_hours_used: Money | None = None
    """Instance-hours in service, from the instance counts the product recorded
    (:mod:`capacity.logic.governance.costs`); ``utilisation_percent``, the on-demand equivalent of what was
    used, the saving (negative: a loss against on-demand) and the price per used instance-hour are computed
    from it."""
    usage_observed: bool | None = None
    """False when no instance count was recorded and every instance is assumed to have served."""
    brought: bool = False
    """True when the request brought a reservation someone else bought (issue 17): this request paid
    nothing for it (``upfront_fee_usd`` 0); the on-demand equivalents still say what the use was worth, but
    there is no saving, break-even or price per used instance-hour (null): the fee is its buyer's, unknown
    to this request, which saved nothing."""

    @model_validator(mode="before")
    @classmethod
    def _recorded_before_issue_28(cls, data: Any) -> Any:
        """A summary without ``market`` named everything ``training_plan_name``: read it as what it names."""
        if not isinstance(data, Mapping) or "market" in data:
            return data
        name = str(data.get("training_plan_name") or "")
        market, _, rest = name.partition(" ")
        if rest == "instances" and market in ("on-demand", "spot"):
            return {**data, "market": market, "training_plan_name": None}
        if _CAPACITY_RESERVATION_ID.fullmatch(name):
            return {**data, "capacity_reservation_id": name, "training_plan_name": None}
        return data


_CAPACITY_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{8,17}")
"""An EC2 capacity reservation id (``cr-`` and 8 or 17 hexadecimal digits)."""
