"""EC2 Capacity Blocks for ML: ``DescribeCapacityBlockOfferings``, ``PurchaseCapacityBlock``,
``DescribeCapacityReservations`` (EC2 API reference; "Capacity Blocks for ML" in the EC2 user guide), and
the EventBridge events a block sends as it starts and ends.

Kept whole: one service (offerings, purchases, reservations and their events) over one store.

Rules enforced (EC2 error codes, HTTP 400):

* ``InstanceType`` and ``InstanceCount`` are required (``MissingParameter``); the type must be one sold as
  capacity blocks (p5, p5e, p5en, p4d, p4de, trn1, trn2, p6-b200; ``InvalidParameterValue``); 1 to 64
  instances (``InvalidParameterValue``).
* ``CapacityDurationHours``: 24-hour steps up to 14 days (336 h), then 7-day steps up to 182 days
  (4368 h); anything else answers ``InvalidParameterValue``.
* Blocks start and end at 11:30 UTC and start at most 8 weeks ahead.
* An offering id is valid for ``MarketConfig.offering_ttl`` after the search, once, while its capacity is
  free (else ``InvalidParameterValue``).
* ``DryRun`` answers ``DryRunOperation``.

Reservation lifecycle (virtual time): ``payment-pending`` for ``Timings.block_payment_pending``,
``scheduled`` until the start, ``active`` until the end, ``expired`` after. ``AvailableInstanceCount`` is 0
except while ``active`` (before the start it reads 0: that is not a failure). Events (source ``aws.ec2``,
detail ``capacity-reservation-id`` and ``end-date``, the reservation ARN in ``resources``):
``Capacity Block Delivered`` at the start, ``Capacity Block Expiration Warning`` 40 minutes before the end.

Faults: ``insufficient_capacity`` empties ``DescribeCapacityBlockOfferings`` and makes
``PurchaseCapacityBlock`` answer ``InsufficientInstanceCapacity`` (HTTP 500, nothing bought); ``stuck``
leaves a purchased reservation ``payment-pending`` forever (and sends no events); ``payment_failed`` turns
it ``payment-failed`` after ``Timings.block_payment_pending`` (no events; it never starts); ``stale_listing``
makes ``DescribeCapacityReservations`` and ``DescribeCapacityBlockExtensionHistory`` answer as of
``delay_seconds`` ago (EC2's eventual consistency: a block or extension just bought is not there yet).

Extensions (:mod:`localcloud.emulator.extensions` for the rules): ``DescribeCapacityBlockExtensionOfferings``
(``CapacityReservationId``, ``CapacityBlockExtensionDurationHours`` in the durations blocks are sold in)
answers one offering starting at the block's end in its zone, or none (capacity taken,
``insufficient_capacity``); an unknown reservation is ``InvalidCapacityReservationId.NotFound``, one that
cannot be extended ``IncorrectState`` (state, pending payment) or ``InvalidParameterValue`` (window, total
duration). ``PurchaseCapacityBlockExtension`` buys it (``InvalidParameterValue`` for a stale offering or one
of another reservation; ``insufficient_capacity``: ``InsufficientInstanceCapacity``, nothing bought): the
extension is ``payment-pending``, then ``payment-succeeded`` (the block's ``EndDate`` moves, the instances in
it are reclaimed 30 minutes before the new end, the ``Capacity Block Expiration Warning`` comes 40 minutes
before it) or ``payment-failed`` (``payment_failed``, ``stuck``: nothing moves).
``DescribeCapacityBlockExtensionHistory`` lists them (``CapacityReservationIds``, paginated).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import AwsError, Due
from localcloud.emulator import extensions as ext
from localcloud.emulator.common import (
    Context,
    Handler,
    Params,
    Response,
    Timeline,
    dict_to_tags,
    iso_z,
    paginate,
    utcnow,
)
from localcloud.emulator.instances import availability_zone_id, spec_for
from localcloud.emulator.market import Offering
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.shapes import check_enum
from localcloud.faults import FaultKind

MAX_INSTANCES = 64
EXPIRY_WARNING = timedelta(minutes=40)
DELIVERED = "Capacity Block Delivered"
_FILTERS = frozenset(
    {
        "tag-key",
        "state",
        "instance-type",
        "availability-zone",
        "reservation-type",
        "instance-platform",
        "tenancy",
        "owner-id",
    }
)
EXPIRATION_WARNING = "Capacity Block Expiration Warning"


def valid_duration(hours: int) -> bool:
    """True for the capacity-block durations EC2 sells: 1-14 days by day, then by week to 182 days."""
    if hours <= 0 or hours % 24:
        return False
    days = hours // 24
    return days <= 14 or (days <= 182 and days % 7 == 0)


def invalid(message: str) -> AwsError:
    """EC2's ``InvalidParameterValue``."""
    return AwsError("InvalidParameterValue", message)


@dataclass
class Reservation:
    """A capacity reservation created by ``PurchaseCapacityBlock``."""

    reservation_id: str
    block_id: str
    arn: str
    region: str
    offering: Offering
    platform: str
    created: datetime
    timeline: Timeline
    tags: dict[str, str] = field(default_factory=dict)
    block_tags: dict[str, str] = field(default_factory=dict)
    sent: set[str] = field(default_factory=set)
    extensions: list[ext.Extension] = field(default_factory=list)

    def end_at(self, now: datetime) -> datetime:
        """``EndDate`` at ``now``: the purchase's end plus the extensions paid by then."""
        return ext.end_at(self.offering.end, self.extensions, now)

    def final_end(self) -> datetime:
        """The end once every extension payment has completed (instances are reclaimed before it)."""
        return ext.final_end(self.offering.end, self.extensions)

    def state(self, now: datetime) -> str:
        """``payment-pending``, ``scheduled``, ``active`` or ``expired`` at ``now`` (a paid extension keeps it
        ``active`` until the new end)."""
        state = self.timeline.at(now)
        if state in ("active", "expired") and self.timeline.phases[-1][1] == "expired":
            return "expired" if now >= self.end_at(now) else "active"
        return state

    def events(self, now: datetime) -> list[tuple[datetime, str, str]]:
        """The events this block sends, when, and the key they are recorded as sent under (none for a
        reservation stuck in or failing its payment). The expiration warning is for the end as it is at
        ``now``: a block extended after its warning warns again for its new end."""
        if self.timeline.phases[-1][1] in ("payment-pending", "payment-failed"):
            return []
        end = self.end_at(now)
        return [
            (self.offering.start, DELIVERED, DELIVERED),
            (end - EXPIRY_WARNING, EXPIRATION_WARNING, f"{EXPIRATION_WARNING}@{iso_z(end)}"),
        ]

    def wake_ups(self, now: datetime) -> list[datetime]:
        """When a pending extension payment completes or fails (the expiry warning may move then)."""
        return [at for item in self.extensions if (at := item.payment.next_change(now)) is not None]


class CapacityBlocks:
    """The capacity-block operations, the reservations bought, and the :class:`~localcloud.contracts.Ticker`
    that sends their EventBridge events (foreground work: a block start keeps a run going)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.reservations: dict[str, Reservation] = {}
        self._pages: dict[str, list[Offering]] = {}
        self._extension_blocks: dict[str, str] = {}  # extension offering id -> reservation id
        self.on_extended: Callable[[Reservation], None] = lambda _reservation: None
        """Called when an extension that will be paid is bought (the instances' reclaim moves)."""

    def operations(self) -> dict[str, Handler]:
        """Operation name -> handler."""
        return {
            "DescribeCapacityBlockOfferings": self.describe_offerings,
            "PurchaseCapacityBlock": self.purchase,
            "DescribeCapacityReservations": self.describe_reservations,
            "DescribeCapacityBlockExtensionOfferings": self.describe_extension_offerings,
            "PurchaseCapacityBlockExtension": self.purchase_extension,
            "DescribeCapacityBlockExtensionHistory": self.extension_history,
        }

    @staticmethod
    def _dry_run(params: Params) -> None:
        if params.get("DryRun"):
            raise AwsError("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)

    def describe_offerings(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeCapacityBlockOfferings``: every (start day, zone) that fits, earliest first, paginated
        with ``MaxResults``/``NextToken``."""
        require_known_region(region)
        self._dry_run(params)
        token = params.get("NextToken")
        if token:
            remaining = self._pages.pop(token, None)
            if remaining is None:
                raise invalid(f"The token '{token}' is invalid.")
            return self._page(remaining, params)
        instance_type = params.get("InstanceType")
        count = params.get("InstanceCount")
        if instance_type is None:
            raise AwsError("MissingParameter", "The request must contain the parameter InstanceType.")
        if count is None:
            raise AwsError("MissingParameter", "The request must contain the parameter InstanceCount.")
        spec = spec_for(instance_type)
        if spec is None or instance_type.startswith("ml.") or not spec.capacity_block:
            raise invalid(f"The instance type '{instance_type}' is not supported for Capacity Blocks.")
        if not 1 <= count <= MAX_INSTANCES:
            raise invalid(
                f"{count} is an invalid value for InstanceCount. InstanceCount must be between 1 and "
                f"{MAX_INSTANCES}."
            )
        hours = int(params["CapacityDurationHours"])
        if not valid_duration(hours):
            raise invalid(
                f"The requested capacity duration of {hours} hours is not supported. Capacity Block "
                "durations are 24-hour increments up to 14 days (336 hours), then 7-day increments up to "
                "182 days (4368 hours)."
            )
        if FaultKind.INSUFFICIENT_CAPACITY in faults or region not in self.ctx.market.regions():
            return {"CapacityBlockOfferings": []}
        now = utcnow()
        market = self.ctx.market
        offerings = [
            market.issue(
                prefix="cb-",
                id_length=17,
                market="ec2",
                region=region,
                instance_type=instance_type,
                count=count,
                zone=zone,
                start=start,
                days=hours // 24,
                hourly_usd=market.capacity_block_usd_per_hour(region, instance_type, start),
                now=now,
            )
            for start, zone in market.slots(
                "ec2",
                region,
                instance_type,
                count=count,
                days=hours // 24,
                earliest_start=params.get("StartDateRange") or now,
                latest_end=params.get("EndDateRange"),
                now=now,
            )
        ]
        return self._page(offerings, params)

    def _page(self, offerings: list[Offering], params: Params) -> Response:
        # Without MaxResults the page size is AWS's choice (undocumented): MarketConfig.offerings_page_size.
        limit = int(
            params.get("MaxResults") or self.ctx.market.config.offerings_page_size or len(offerings) or 1
        )
        page, rest = offerings[:limit], offerings[limit:]
        response: Response = {"CapacityBlockOfferings": [self._offering_shape(item) for item in page]}
        if rest:
            token = f"cbo-page-{self.ctx.new_id('page')}"
            self._pages[token] = rest
            response["NextToken"] = token
        return response

    @staticmethod
    def _offering_shape(offering: Offering) -> dict[str, Any]:
        return {
            "CapacityBlockOfferingId": offering.offering_id,
            "InstanceType": offering.instance_type,
            "AvailabilityZone": offering.zone,
            "InstanceCount": offering.count,
            "StartDate": offering.start,
            "EndDate": offering.end,
            "CapacityBlockDurationHours": offering.hours,
            "CapacityBlockDurationMinutes": 0,
            "UpfrontFee": f"{offering.fee_usd:.2f}",
            "CurrencyCode": "USD",
            "Tenancy": "default",
        }

    def purchase(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``PurchaseCapacityBlock``: creates the capacity reservation (tags from ``TagSpecifications`` of
        resource type ``capacity-reservation``; ``capacity-block`` tags go to the block)."""
        require_known_region(region)
        self._dry_run(params)
        check_enum(
            "ec2", "CapacityReservationInstancePlatform", params["InstancePlatform"], "InstancePlatform"
        )
        now = utcnow()
        offering_id = params["CapacityBlockOfferingId"]
        offering = self.ctx.market.offering(offering_id)
        if offering is None or offering.market != "ec2" or not self.ctx.market.usable(offering, region, now):
            raise invalid(
                f"The Capacity Block offering ID '{offering_id}' is not valid: it has expired or is no "
                "longer available. Describe Capacity Block offerings again."
            )
        if FaultKind.INSUFFICIENT_CAPACITY in faults:
            raise AwsError(
                "InsufficientInstanceCapacity",
                "There is not enough capacity to fulfill your Capacity Block purchase request.",
                500,
            )
        self.ctx.market.take(offering)
        offering.used = True
        tags: dict[str, str] = {}
        block_tags: dict[str, str] = {}
        for spec in params.get("TagSpecifications") or []:
            target = {"capacity-reservation": tags, "capacity-block": block_tags}.get(
                spec.get("ResourceType", "")
            )
            if target is None:
                raise invalid(
                    f"'{spec.get('ResourceType')}' is not a valid taggable resource type for this operation."
                )
            target.update({tag["Key"]: tag.get("Value", "") for tag in spec.get("Tags") or []})
        reservation_id = f"cr-{self.ctx.new_id('capacity-reservation', offering_id)}"
        timings = self.ctx.market.config.timings
        timeline = Timeline([(now, "payment-pending")])
        if FaultKind.PAYMENT_FAILED in faults:
            timeline.add(now + timings.block_payment_pending, "payment-failed")
        elif FaultKind.STUCK not in faults:
            timeline.add(now + timings.block_payment_pending, "scheduled")
            timeline.add(offering.start, "active")
            timeline.add(offering.end, "expired")
        reservation = Reservation(
            reservation_id=reservation_id,
            block_id=f"cbr-{self.ctx.new_id('capacity-block', offering_id)}",
            arn=f"arn:aws:ec2:{region}:{self.ctx.account_id}:capacity-reservation/{reservation_id}",
            region=region,
            offering=offering,
            platform=params["InstancePlatform"],
            created=now,
            timeline=timeline,
            tags=tags,
            block_tags=block_tags,
        )
        self.reservations[reservation_id] = reservation
        return {
            "CapacityReservation": self._reservation_shape(reservation, now),
            "CapacityBlocks": [self._block_shape(reservation, now)],
        }

    def _reservation_shape(self, reservation: Reservation, now: datetime) -> dict[str, Any]:
        offering = reservation.offering
        state = reservation.state(now)
        shaped: dict[str, Any] = {
            "CapacityReservationId": reservation.reservation_id,
            "OwnerId": self.ctx.account_id,
            "CapacityReservationArn": reservation.arn,
            "AvailabilityZoneId": availability_zone_id(offering.zone),
            "InstanceType": offering.instance_type,
            "InstancePlatform": reservation.platform,
            "AvailabilityZone": offering.zone,
            "Tenancy": "default",
            "TotalInstanceCount": offering.count,
            "AvailableInstanceCount": offering.count if state == "active" else 0,
            "EbsOptimized": True,
            "EphemeralStorage": False,
            "State": state,
            "StartDate": offering.start,
            "EndDate": reservation.end_at(now),
            "EndDateType": "limited",
            "InstanceMatchCriteria": "targeted",
            "CreateDate": reservation.created,
            "Tags": dict_to_tags(reservation.tags),
            "ReservationType": "capacity-block",
            "CapacityBlockId": reservation.block_id,
        }
        return shaped

    @staticmethod
    def _block_shape(reservation: Reservation, now: datetime) -> dict[str, Any]:
        offering = reservation.offering
        return {
            "CapacityBlockId": reservation.block_id,
            "AvailabilityZone": offering.zone,
            "AvailabilityZoneId": availability_zone_id(offering.zone),
            "CapacityReservationIds": [reservation.reservation_id],
            "StartDate": offering.start,
            "EndDate": reservation.end_at(now),
            "CreateDate": reservation.created,
            "State": reservation.state(now),
            "Tags": dict_to_tags(reservation.block_tags),
        }

    def describe_reservations(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeCapacityReservations`` by ids and ``Filters`` (``tag:<key>``, ``tag-key``, ``state``,
        ``instance-type``, ``availability-zone``, ``reservation-type``, ``instance-platform``, ``tenancy``,
        ``owner-id``; ``*``/``?`` wildcards), paginated. Raises ``InvalidCapacityReservationId.NotFound`` and
        ``InvalidParameterValue`` (unknown filter).

        Under ``stale_listing`` the answer is as of ``read_lag_seconds`` ago (EC2's eventual consistency,
        AWS_FACTS.md "Payments, listings, limits"): a block bought since is neither listed nor found by id
        (``InvalidCapacityReservationId.NotFound``, as EC2 answers an id that has not propagated), and the
        others are in their state of then (``payment-pending`` a while longer, the end before a later paid
        extension)."""
        del faults
        self._dry_run(params)
        now = self._read_time()
        found = [item for item in self.reservations.values() if item.region == region and item.created <= now]
        ids = params.get("CapacityReservationIds") or []
        for wanted in ids:
            if not any(item.reservation_id == wanted for item in found):
                raise AwsError(
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacity reservation ID '{wanted}' does not exist.",
                )
        if ids:
            found = [item for item in found if item.reservation_id in ids]
        for spec in params.get("Filters") or []:
            if not spec["Name"].startswith("tag:") and spec["Name"] not in _FILTERS:
                raise invalid(f"The filter '{spec['Name']}' is invalid")
            found = [
                item for item in found if self._matches(item, spec["Name"], spec.get("Values") or [], now)
            ]
        page, token = paginate(found, params, default_max=1000)
        response: Response = {"CapacityReservations": [self._reservation_shape(item, now) for item in page]}
        if token:
            response["NextToken"] = token
        return response

    def _matches(self, item: Reservation, name: str, values: list[str], now: datetime) -> bool:
        offering = item.offering
        if name.startswith("tag:"):
            actual = item.tags.get(name[4:])
            return actual is not None and any(fnmatch.fnmatchcase(actual, value) for value in values)
        if name == "tag-key":
            return any(fnmatch.fnmatchcase(key, value) for key in item.tags for value in values)
        fields = {
            "state": item.state(now),
            "instance-type": offering.instance_type,
            "availability-zone": offering.zone,
            "reservation-type": "capacity-block",
            "instance-platform": item.platform,
            "tenancy": "default",
            "owner-id": self.ctx.account_id,
        }
        return any(fnmatch.fnmatchcase(fields[name], value) for value in values)

    # -- extensions -----------------------------------------------------------------------------------

    def _extendable(self, reservation_id: str, region: str, hours: int, now: datetime) -> Reservation:
        """The reservation, if it can be extended by ``hours`` now. Raises
        ``InvalidCapacityReservationId.NotFound``, ``IncorrectState``, ``InvalidParameterValue``."""
        reservation = self.reservations.get(reservation_id)
        if reservation is None or reservation.region != region:
            raise AwsError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{reservation_id}' does not exist.",
            )
        if not valid_duration(hours):
            raise invalid(
                f"The requested extension duration of {hours} hours is not supported. Capacity Block "
                "extensions are 24-hour increments up to 14 days (336 hours), then 7-day increments up to "
                "182 days (4368 hours)."
            )
        state = reservation.state(now)
        end = reservation.end_at(now)
        refused = ext.refusal(
            status_ok=state in ("active", "scheduled"),
            status=state,
            extensions=reservation.extensions,
            end=end,
            days=hours // 24,
            total_days=int((end - reservation.offering.start) / timedelta(days=1)),
            now=now,
            what=f"Capacity Block {reservation_id}",
        )
        if refused:
            pending = state not in ("active", "scheduled") or "pending" in refused
            raise AwsError("IncorrectState", refused) if pending else invalid(refused)
        return reservation

    def describe_extension_offerings(
        self, params: Params, region: str, faults: frozenset[FaultKind]
    ) -> Response:
        """``DescribeCapacityBlockExtensionOfferings``: the one extension the block's zone has room for."""
        require_known_region(region)
        self._dry_run(params)
        now = utcnow()
        hours = int(params["CapacityBlockExtensionDurationHours"])
        reservation = self._extendable(params["CapacityReservationId"], region, hours, now)
        offering = reservation.offering
        start = reservation.end_at(now)
        found: list[dict[str, Any]] = []
        if FaultKind.INSUFFICIENT_CAPACITY not in faults and self.ctx.market.fits(
            "ec2",
            region,
            offering.instance_type,
            offering.zone,
            start=start,
            days=hours // 24,
            count=offering.count,
            listed_at=now,
        ):
            extension = self.ctx.market.issue(
                prefix="cbe-",
                id_length=17,
                market="ec2",
                region=region,
                instance_type=offering.instance_type,
                count=offering.count,
                zone=offering.zone,
                start=start,
                days=hours // 24,
                hourly_usd=self.ctx.market.capacity_block_usd_per_hour(region, offering.instance_type, start),
                now=now,
            )
            self._extension_blocks[extension.offering_id] = reservation.reservation_id
            found.append(
                {
                    "CapacityBlockExtensionOfferingId": extension.offering_id,
                    "InstanceType": extension.instance_type,
                    "InstanceCount": extension.count,
                    "AvailabilityZone": extension.zone,
                    "AvailabilityZoneId": availability_zone_id(extension.zone),
                    "StartDate": offering.start,
                    "CapacityBlockExtensionStartDate": extension.start,
                    "CapacityBlockExtensionEndDate": extension.end,
                    "CapacityBlockExtensionDurationHours": extension.hours,
                    "UpfrontFee": f"{extension.fee_usd:.2f}",
                    "CurrencyCode": "USD",
                    "Tenancy": "default",
                }
            )
        return {"CapacityBlockExtensionOfferings": found}

    def purchase_extension(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``PurchaseCapacityBlockExtension`` (no client token: the offering can be bought once)."""
        require_known_region(region)
        self._dry_run(params)
        now = utcnow()
        offering_id = params["CapacityBlockExtensionOfferingId"]
        reservation_id = params["CapacityReservationId"]
        offering = self.ctx.market.offering(offering_id)
        stale = invalid(
            f"The Capacity Block extension offering ID '{offering_id}' is not valid: it has expired, is no "
            "longer available or is not for this Capacity Block. Describe Capacity Block extension "
            "offerings again."
        )
        if offering is None or self._extension_blocks.get(offering_id) != reservation_id:
            self._extendable(reservation_id, region, 24, now)  # an unknown reservation says so first
            raise stale
        reservation = self._extendable(reservation_id, region, offering.hours, now)
        if not self.ctx.market.usable(offering, region, now) or offering.start != reservation.end_at(now):
            raise stale
        if FaultKind.INSUFFICIENT_CAPACITY in faults:
            raise AwsError(
                "InsufficientInstanceCapacity",
                "There is not enough capacity to fulfill your Capacity Block extension request.",
                500,
            )
        self.ctx.market.take(offering)
        offering.used = True
        extension = ext.Extension(
            offering=offering,
            purchased=now,
            payment=ext.payment(
                now,
                self.ctx.market.extension_payment_pending(
                    offering.offering_id, self.ctx.market.config.timings.block_payment_pending
                ),
                reservation.end_at(now),
                faults,
            ),
        )
        reservation.extensions.append(extension)
        if extension.will_succeed:
            self.on_extended(reservation)
        else:
            self.ctx.market.give_back(offering)
        return {"CapacityBlockExtensions": [self._extension_shape(reservation, extension, now)]}

    @staticmethod
    def _extension_shape(reservation: Reservation, extension: ext.Extension, now: datetime) -> dict[str, Any]:
        offering = extension.offering
        return {
            "CapacityReservationId": reservation.reservation_id,
            "InstanceType": offering.instance_type,
            "InstanceCount": offering.count,
            "AvailabilityZone": offering.zone,
            "AvailabilityZoneId": availability_zone_id(offering.zone),
            "CapacityBlockExtensionOfferingId": offering.offering_id,
            "CapacityBlockExtensionDurationHours": offering.hours,
            "CapacityBlockExtensionStatus": f"payment-{extension.status(now)}",
            "CapacityBlockExtensionPurchaseDate": extension.purchased,
            "CapacityBlockExtensionStartDate": offering.start,
            "CapacityBlockExtensionEndDate": offering.end,
            "UpfrontFee": f"{offering.fee_usd:.2f}",
            "CurrencyCode": "USD",
        }

    def _read_time(self) -> datetime:
        """The instant a read answers for: now, or ``read_lag_seconds`` ago (``stale_listing``)."""
        lag = self.ctx.read_lag_seconds
        return utcnow() - timedelta(seconds=lag) if lag > 0 else utcnow()

    def extension_history(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeCapacityBlockExtensionHistory``: every extension of the region's blocks (or of
        ``CapacityReservationIds``), oldest first, paginated; under ``stale_listing`` as of
        ``read_lag_seconds`` ago (an extension bought since is not listed, a payment is in its state of then).

        Raises ``InvalidCapacityReservationId.NotFound``."""
        del faults
        self._dry_run(params)
        now = self._read_time()
        ids = params.get("CapacityReservationIds") or []
        for wanted in ids:
            found = self.reservations.get(wanted)
            if found is None or found.region != region or found.created > now:
                raise AwsError(
                    "InvalidCapacityReservationId.NotFound",
                    f"The capacity reservation ID '{wanted}' does not exist.",
                )
        if params.get("Filters"):
            raise invalid(
                "Filters are not supported by the local cloud's DescribeCapacityBlockExtensionHistory."
            )
        rows = [
            self._extension_shape(item, extension, now)
            for item in self.reservations.values()
            if item.region == region and item.created <= now and (not ids or item.reservation_id in ids)
            for extension in item.extensions
            if extension.purchased <= now
        ]
        page, token = paginate(rows, params, default_max=1000)
        response: Response = {"CapacityBlockExtensions": page}
        if token:
            response["NextToken"] = token
        return response

    # -- Ticker -------------------------------------------------------------------------------------

    def next_due(self, now: datetime) -> Due | None:
        """The next block start or expiry warning not yet sent, or extension payment outcome (foreground)."""
        with self.ctx.lock:
            pending = [
                at
                for item in self.reservations.values()
                for at, _kind, key in item.events(now)
                if key not in item.sent
            ]
            pending.extend(at for item in self.reservations.values() for at in item.wake_ups(now))
        if not pending:
            return None
        return Due(max(min(pending), now + timedelta(microseconds=1)), foreground=True)

    def advance(self, now: datetime) -> None:
        """Send every block event due at or before ``now`` (outside the lock: delivery may call back)."""
        with self.ctx.lock:
            due = sorted(
                (
                    (at, kind, key, item)
                    for item in self.reservations.values()
                    for at, kind, key in item.events(now)
                    if key not in item.sent and at <= now
                ),
                key=lambda entry: entry[0],
            )
            for _at, _kind, key, item in due:
                item.sent.add(key)
        for _at, kind, _key, item in due:
            self.ctx.events.put_aws_event(
                source="aws.ec2",
                detail_type=kind,
                detail={"capacity-reservation-id": item.reservation_id, "end-date": iso_z(item.end_at(now))},
                resources=[item.arn],
                region=item.region,
            )

    def billable(self) -> list[Reservation]:
        """Every reservation bought (paid upfront; they cannot be cancelled)."""
        return list(self.reservations.values())
