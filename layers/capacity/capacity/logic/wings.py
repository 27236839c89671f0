"""The platform wings, registered once (issue 32 point 2): each :class:`~capacity.platforms.Platform` of
:data:`capacity.platforms.PLATFORMS` has one :class:`Wing` here, the functions its steps route to.

The steps shared by every platform (:mod:`.purchase`, :mod:`.activation`, :mod:`.extend`, :mod:`.release`)
look a wing up by the request's, step's or ``PURCHASE`` item's ``platform`` (:func:`wing`) instead of keeping
a table each. A new platform is one wing folder (``logic/<name>/``) and one :class:`Wing` in :data:`WINGS`
(docs/architecture.md, "How to add a platform").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, Protocol

from capacity.contracts.activation import ActivationInput
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.logic.ec2 import teardown as ec2_teardown
from capacity.logic.ec2.activation import block_activation
from capacity.logic.ec2.capacity_block import BlockExtender, CapacityBlockBuyer
from capacity.logic.sagemaker import teardown as sagemaker_teardown
from capacity.logic.sagemaker.activation import plan_activation
from capacity.logic.sagemaker.training_plan import PlanExtender, TrainingPlanBuyer
from capacity.logic.steps.buy_once import Buyer
from capacity.logic.steps.common import Purchase, Sighting
from capacity.platforms import EC2, SAGEMAKER, Platform, platform
from capacity.ports import Ports
from capacity.resources import Extension


class Extender(Protocol):
    """One platform's extension calls (the reservation named by the ``PURCHASE`` item)."""

    platform: str
    what: str
    latest_release_before_end: timedelta
    """The release schedule is never later than this before the (new) end (zero: only the request's
    ``release_margin_minutes``)."""

    def offerings(self, purchase: Purchase, ports: Ports, hours: int) -> list[Extension]:
        """The extension offerings of ``hours`` (``ClientError`` when AWS refuses: its message says why)."""
        ...

    def buy(self, purchase: Purchase, ports: Ports, offering_id: str) -> Extension:
        """The purchase call, once (``OfferingExpired`` for a stale offering)."""
        ...

    def history(self, purchase: Purchase, ports: Ports) -> list[Extension]:
        """Every extension bought for the reservation."""
        ...


@dataclass(frozen=True)
class Wing:
    """One platform's steps: what each shared step routes to for a request on it.

    Attributes:
        platform: the platform's descriptor.
        buyer: its part of buying exactly once (:func:`capacity.logic.steps.buy_once.buy_once`).
        extender: its extension calls (:mod:`capacity.logic.continuity.extend`).
        activation: one poll of the reservation bought
            (:func:`capacity.logic.steps.activation.wait_for_activation`).
        release: one release action (``begin`` ... ``finish``) for a purchase on it
            (:func:`capacity.logic.steps.release.release_capacity`).
        still_billing: what of the reservation still exists in the purchase's region, each named.
        leftover_checks: ``(what is looked for, the lookup)`` pairs for
            :func:`capacity.logic.steps.release.named_leftovers`.
    """

    platform: Platform
    buyer: Buyer
    extender: Extender
    activation: Callable[[ActivationInput, Ports], Sighting]
    release: Callable[[ReleaseInput, Ports, Purchase], ReleaseOutput]
    still_billing: Callable[[Ports, str, Purchase], list[str]]
    leftover_checks: Callable[[Ports, str, Purchase], list[tuple[str, Callable[[], list[str]]]]]


WINGS: Final[dict[str, Wing]] = {
    wing.platform.name: wing
    for wing in (
        Wing(
            SAGEMAKER,
            buyer=TrainingPlanBuyer(),
            extender=PlanExtender(),
            activation=plan_activation,
            release=sagemaker_teardown.release_endpoint,
            still_billing=sagemaker_teardown.still_billing,
            leftover_checks=sagemaker_teardown.leftover_checks,
        ),
        Wing(
            EC2,
            buyer=CapacityBlockBuyer(),
            extender=BlockExtender(),
            activation=block_activation,
            release=ec2_teardown.release_block,
            still_billing=ec2_teardown.still_billing,
            leftover_checks=ec2_teardown.leftover_checks,
        ),
    )
}
"""The wing of each platform, by name: one per :data:`capacity.platforms.PLATFORMS` entry (a unit test holds
the two registrations to the same names)."""


def wing(name: str | None) -> Wing:
    """The wing of the platform called ``name`` (None: the default platform's).

    Raises:
        ValueError: no platform has that name.
    """
    return WINGS[platform(name).name]
