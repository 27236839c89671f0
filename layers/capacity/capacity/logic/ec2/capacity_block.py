"""The capacity block purchase (``platform`` ``ec2``, issue 6): EC2's part of the one exactly-once skeleton
(:mod:`capacity.logic.steps.buy_once`).

``PurchaseCapacityBlock`` takes no client token, so it is never retried blindly: the reservation is tagged
with the request id (``TagSpecifications``) and, before any retry (intent already recorded, or a timeout
that may have committed), looked up by that tag (``DescribeCapacityReservations``) and adopted.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from capacity import TAG_REQUEST_ID, messages
from capacity.contracts.purchase import CapacityBlockOutput, PurchaseOutput
from capacity.errors import (
    PurchaseFailed,
    RetryableAwsError,
)
from capacity.logic.governance.checks import require_deployable
from capacity.logic.steps.buy_once import Bought, Purchased
from capacity.logic.steps.common import Purchase
from capacity.logic.steps.forwarding import ensure_forwarding
from capacity.logic.steps.search import search_block_duration
from capacity.offerings import OfferingSummary
from capacity.platforms import EC2
from capacity.ports import Ec2Port, Ports
from capacity.purchases import PurchaseKind
from capacity.ranking import replacement
from capacity.request import ReservationRequest
from capacity.resources import CapacityReservation, Extension, tags_for

logger = logging.getLogger(__name__)


LATEST_RELEASE_BEFORE_END = timedelta(minutes=35)
"""AWS starts terminating a block's instances 30 minutes before its end (10 minutes after the expiration
warning, AWS_FACTS.md): the scheduled release is never later than 35 minutes before the end."""


def _adopt(ec2: Ec2Port, request_id: str) -> CapacityReservation | None:
    """The reservation already bought for ``request_id`` (tagged with it), if any."""
    found = [
        r for r in ec2.find_capacity_reservations(request_id) if r.tags.get(TAG_REQUEST_ID) == request_id
    ]
    if len(found) > 1:  # never expected: tell a person, keep the first
        logger.error("request %s owns %d capacity blocks: %s", request_id, len(found), found)
    return found[0] if found else None


class CapacityBlockBuyer:
    """The capacity block part of :func:`~capacity.logic.steps.buy_once.buy_once` (``PurchaseCapacityBlock``).

    The ``PURCHASE`` item names the capacity reservation in its own words
    (:class:`~capacity.purchases.CapacityBlockPurchase`: ``capacity_reservation_arn``,
    ``capacity_reservation_id`` ``cr-...``, ``availability_zone``).
    """

    platform: str = EC2.name
    kind: PurchaseKind = "capacity-block"
    what = EC2.reserved_noun
    unique_call = EC2.purchase_name_unique  # no client token, no name: a second call buys a second block

    def preflight(self, request: ReservationRequest, ports: Ports, region: str) -> None:
        """The launch template and its version exist in the block's region, and its instance profile runs as
        an allowed role (``LaunchTemplateNotFound``;
        :func:`~capacity.logic.governance.checks.require_deployable`): the instances start from it days later,
        when nothing can be undone."""
        require_deployable(request, ports, region)

    def find(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought | None:
        """The reservation tagged with the request id in ``region`` (``DescribeCapacityReservations``)."""
        found = _adopt(ports.ec2(region), request.id)
        return None if found is None else _bought(found, offering)

    def buy(
        self, request: ReservationRequest, ports: Ports, region: str, offering: OfferingSummary
    ) -> Bought:
        """``PurchaseCapacityBlock`` once (a client without botocore retries), tagged with the request id.

        Raises:
            RetryableAwsError: throttling, a 5xx or a timeout (it may have committed: the step is retried
                and looks the block up first).
            PurchaseFailed: EC2 returned no capacity reservation.
        """
        ec2 = ports.ec2(region)
        try:
            reservation = ec2.purchase_capacity_block(
                offering_id=offering.offering_id, tags=tags_for(request.id)
            )
        except RetryableAwsError:
            found = _adopt(ec2, request.id)  # the timeout may have committed: adopt what is visible already
            if found is None:
                raise
            reservation = found
        if not reservation.reservation_id:
            raise PurchaseFailed(f"PurchaseCapacityBlock in {region} returned no capacity reservation")
        return _bought(reservation, offering)

    def names(self, arn: str, name: str, zone: str | None) -> dict[str, str]:
        """The block ``arn`` (id ``name``, in ``zone``) in the ``PURCHASE`` item's words."""
        return block_names(arn, name, zone)

    def research(
        self, request: ReservationRequest, ports: Ports, region: str, stale: OfferingSummary
    ) -> OfferingSummary | None:
        """One fresh search like the stale offering's; the cheapest within the rules, or None."""
        best = replacement(
            search_block_duration(ports.ec2(region), request, request.duration_hours), request, stale
        )
        return best.summary() if best is not None else None

    def purchased(self, request: ReservationRequest, output: PurchaseOutput, ports: Ports) -> Purchased:
        """Released 35 minutes before the end at the latest; the block's id, ARN and zone in ``PURCHASED``.

        Raises:
            TypeError: ``output`` is not a capacity block's.
        """
        if not isinstance(output, CapacityBlockOutput):
            raise TypeError(f"a capacity block buyer was handed a {output.platform} purchase")
        margin = max(timedelta(minutes=request.release_margin_minutes), LATEST_RELEASE_BEFORE_END)
        release_at = output.end_time - margin
        # The expiry warning (40 minutes before the end) is the release's other trigger: outside the stack's
        # region it reaches us through a forwarding rule, put now (an upsert: every retry puts it again).
        ensure_forwarding(ports, output.region)
        zone = output.availability_zone
        message = messages.block_purchased(
            request, output, where=zone or output.region, release_at=release_at
        )
        return Purchased(
            release_at,
            {
                "platform": EC2.name,
                "capacity_reservation_id": output.capacity_reservation_id,
                "availability_zone": zone,
                "capacity_reservation_arn": output.capacity_reservation_arn,
            },
            message,
        )


def _bought(reservation: CapacityReservation, offering: OfferingSummary) -> Bought:
    return Bought(
        names=block_names(
            reservation.arn,
            reservation.reservation_id,
            reservation.availability_zone or offering.availability_zone,
        ),
        start_time=reservation.start_time,
        end_time=reservation.end_time,
        upfront_fee_usd=None,  # a capacity reservation does not carry its fee: the offering's is recorded
        offering=offering,
    )


def block_names(arn: str, reservation_id: str, zone: str | None) -> dict[str, str]:
    """A capacity block in the ``PURCHASE`` item's words
    (:class:`~capacity.purchases.CapacityBlockPurchase`)."""
    return {
        "capacity_reservation_arn": arn,
        "capacity_reservation_id": reservation_id,
        "availability_zone": zone or "",
    }


class BlockExtender:
    """Capacity blocks: ``DescribeCapacityBlockExtensionOfferings``, ``PurchaseCapacityBlockExtension``,
    ``DescribeCapacityBlockExtensionHistory`` (the ``PURCHASE``'s ``capacity_reservation_id``)."""

    platform: str = EC2.name
    what = EC2.reserved_noun
    latest_release_before_end = LATEST_RELEASE_BEFORE_END  # AWS terminates a block's instances 30 min early

    def offerings(self, purchase: Purchase, ports: Ports, hours: int) -> list[Extension]:
        """Extension offerings of the block."""
        return ports.ec2(purchase.region).describe_block_extension_offerings(
            purchase.capacity_block().capacity_reservation_id, hours
        )

    def buy(self, purchase: Purchase, ports: Ports, offering_id: str) -> Extension:
        """``PurchaseCapacityBlockExtension``."""
        return ports.ec2(purchase.region).purchase_block_extension(
            offering_id=offering_id, reservation_id=purchase.capacity_block().capacity_reservation_id
        )

    def history(self, purchase: Purchase, ports: Ports) -> list[Extension]:
        """The block's extension history."""
        return ports.ec2(purchase.region).block_extension_history(
            purchase.capacity_block().capacity_reservation_id
        )
