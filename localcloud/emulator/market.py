"""A seeded, deterministic capacity market for SageMaker training plans and EC2 Capacity Blocks.

Over 400 lines: one model (pools, prices, what is listed, offerings and other buyers) over the same seeded
draws.

Model
-----
Reserved capacity is sold in *pools*: one pool per (market, region, instance type, availability zone, day),
where a day runs from 11:30 UTC to 11:30 UTC the next day (capacity blocks start and end at 11:30 UTC;
the emulator uses the same boundary for training plans). The markets are separate: EC2 Capacity Blocks
(``ec2``) and one SageMaker market per training-plan target resource (``sagemaker:endpoint``,
``sagemaker:training-job``...), so a plan bought for ``endpoint`` never consumes or serves training
capacity.

Each pool holds a number of instances drawn deterministically from the seed, week by week (0 with a
per-(region, type) probability, otherwise 8, 16, 32 or 64), unless :class:`MarketConfig` sets it. An
offering of ``count`` instances for ``days`` days starting on day ``d`` in zone ``z`` exists when every
pool ``(z, d..d+days-1)`` still holds ``count`` instances; a purchase takes them out of every one of those
pools.

Prices (USD) are anchored on public figures: on-demand from :mod:`localcloud.emulator.instances`
(p5.48xlarge in us-east-1: $55.04/h), capacity blocks at $34.608/h for p5.48xlarge in us-east-1 (the same
ratio, 0.6288, for other types) with +-3% day-to-day demand, training plans 70-75% below on-demand. Every
region applies its price factor. Everything is a pure function of the seed and of the purchases made, so
two emulators with the same seed offer the same things.

What is listed moves with virtual time when :class:`MarketConfig` says so (issue 17, keep looking): a pool
is offered only from ``listed_from`` and until ``listed_until`` of its (region, type), and ``churn`` withdraws
each pool from sale during a seeded share of the ``churn_period`` slices of virtual time, so an offering
searched now may be gone an hour later and one missing today may appear tomorrow. A pool not listed at the
instant of a search is not offered; an offering whose pools are no longer listed when it is bought is refused
as no longer available (what AWS answers for a stale offering id). ``taken`` lets other buyers take offerings
between a search and its purchase (issue 29): a seeded share of the offerings issued is bought by someone else
at an instant drawn within ``taken_within`` of the search (at once by default), its id refused from then on
and its instances gone from the pools it spans.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal

from pydantic import BaseModel, ConfigDict, Field

from localcloud.emulator.instances import (
    AVAILABILITY_ZONES,
    REGION_PRICE_FACTORS,
    InstanceSpec,
    spec_for,
)

BLOCK_BOUNDARY = time(11, 30, tzinfo=UTC)
"""Capacity blocks (and the emulator's training plans) start and end at 11:30 UTC."""

CAPACITY_BLOCK_RATIO = Decimal("34.608") / Decimal("55.04")
"""Capacity block price / on-demand price: the seed's p5.48xlarge us-east-1 figures."""

# Probability that a (zone, day) pool of a (region, type) holds nothing. Documented defaults: p5.48xlarge
# is scarce in Europe and absent in ap-northeast-1, so "no offering" and "try another region" are testable.
_SCARCITY: dict[tuple[str, str], float] = {
    ("ap-northeast-1", "p5.48xlarge"): 1.0,
    ("eu-central-1", "p5.48xlarge"): 0.6,
    ("eu-west-1", "p5.48xlarge"): 0.4,
    ("us-east-2", "p5.48xlarge"): 0.3,
}
_DEFAULT_SCARCITY = 0.15
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_POOL_SIZES = (8, 16, 32, 64)


class Timings(BaseModel):
    """How long AWS's transitional states last in the emulator (virtual time).

    Defaults follow what AWS documents or users report, shortened where AWS gives a range: endpoints
    take minutes to reach ``InService`` (4), a training plan's payment is processed in minutes (5).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    plan_pending: timedelta = timedelta(minutes=5)
    block_payment_pending: timedelta = timedelta(minutes=5)
    endpoint_create: timedelta = timedelta(minutes=4)
    endpoint_update: timedelta = timedelta(minutes=4)
    endpoint_delete: timedelta = timedelta(minutes=2)
    component_create: timedelta = timedelta(minutes=3)
    component_scale_out: timedelta = timedelta(minutes=2)
    component_scale_in: timedelta = timedelta(minutes=1)
    component_delete: timedelta = timedelta(minutes=1)
    extension_payment_pending: tuple[timedelta, timedelta] | None = None
    """How long an extension's payment (training plan or capacity block) stays pending: drawn per extension,
    seeded, between the two bounds (AWS: ``payment-pending`` until the bill is paid, ``payment-failed`` after
    12 hours or 35 minutes before the reservation's end, whichever first; AWS_FACTS.md, "Payments").
    None: ``plan_pending`` / ``block_payment_pending`` (5 minutes, for tests and demos that do not study it;
    the soak draws minutes to 12 hours in every lifecycle)."""
    autoscaling_reaction: timedelta = timedelta(seconds=60)
    """Interval between two actions of a policy while its alarm stays in ``ALARM`` (CloudWatch invokes
    Auto Scaling actions on the state change, then once a minute while the state lasts)."""


class MarketConfig(BaseModel):
    """Knobs of the emulated market, for tests and demos. Every field has a realistic default.

    Keys of the per-(region, type) tables are ``"<region>/<instance type>"``, with ``*`` allowed on either
    side (``"*/ml.p5.48xlarge"``, ``"us-east-1/*"``, ``"*"``); the most specific key wins. Instance types are
    written as the API names them: ``ml.p5.48xlarge`` for training plans and endpoints, ``p5.48xlarge``
    for capacity blocks.

    Attributes:
        capacity: instances held by every (zone, day) pool of the matching (region, type), overriding the
            seeded draw (``{"*": 0}``: no capacity anywhere).
        no_capacity_probability: probability that a (zone, day) pool is empty, overriding the defaults
            (p5.48xlarge scarce in eu-central-1/eu-west-1/us-east-2, absent in ap-northeast-1; 0.15 else).
        training_plan_quotas: the account's training-plan instance quota per (region, type): a search or
            purchase beyond it answers ``ResourceLimitExceeded``. Default ``default_training_plan_quota``.
        endpoint_quotas: the account's on-demand endpoint instance quota per (region, type)
            (``ResourceLimitExceeded`` from ``CreateEndpoint``/``UpdateEndpoint``).
        min_instance_count_zero_rejected_regions: regions whose ``CreateEndpointConfig`` rejects
            ``ManagedInstanceScaling.MinInstanceCount = 0`` (``ValidationException``).
        on_demand_capacity: how many instances of the matching (region, type) can run on demand or spot at
            once, in EC2 (``RunInstances``) and in SageMaker endpoints without a capacity reservation; beyond
            it ``InsufficientInstanceCapacity`` (``{"us-east-1/p5.48xlarge": 0}``: none in us-east-1).
            Default unlimited.
        offerings_page_size: offerings per ``DescribeCapacityBlockOfferings`` page when the caller gives no
            ``MaxResults`` (None: all in one page), to make callers follow ``NextToken``.
        sold_out: pools of the matching (region, type) that hold nothing from the first to the last day given
            (UTC pool days, inclusive): another customer bought them (``{"us-east-1/ml.p5.48xlarge":
            ["2026-12-09", "2026-12-31"]}``: no extension or new reservation there on those days).
        offering_ttl: how long an offering id stays valid after the search that returned it.
        max_lead: how far ahead reserved capacity can start (8 weeks).
        timings: durations of transitional states.
        listed_from: per (region, type), the virtual instant from which its pools are offered (before it,
            searches find nothing there): capacity that appears later.
        listed_until: per (region, type), the virtual instant from which its pools are no longer offered.
        churn: probability that a (zone, day) pool is withdrawn from sale during one ``churn_period`` of
            virtual time (seeded per pool and period): offerings appear and vanish as time passes. 0: every
            pool stays listed (the default).
        churn_period: the slices of virtual time churn draws per (UTC, from the epoch).
        taken: probability that another buyer takes an offering between the search that returned it and
            its purchase here (seeded per offering): its id is refused from that instant on (as a stale one)
            and its instances leave the pools, so a fresh search may find that slot gone. 0: nobody else buys
            (the default).
        taken_within: when the other buyer takes it: an instant drawn between the search and this long after
            it; 0 (the default), at once, before any purchase of it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    capacity: dict[str, int] = Field(default_factory=dict)
    no_capacity_probability: dict[str, float] = Field(default_factory=dict)
    training_plan_quotas: dict[str, int] = Field(default_factory=dict)
    default_training_plan_quota: int = 32
    endpoint_quotas: dict[str, int] = Field(default_factory=dict)
    default_endpoint_quota: int = 16
    min_instance_count_zero_rejected_regions: frozenset[str] = frozenset({"ap-northeast-1"})
    on_demand_capacity: dict[str, int] = Field(default_factory=dict)
    offerings_page_size: int | None = Field(default=None, ge=1)
    sold_out: dict[str, tuple[date, date]] = Field(default_factory=dict)
    offering_ttl: timedelta = timedelta(minutes=30)
    max_lead: timedelta = timedelta(weeks=8)
    timings: Timings = Field(default_factory=Timings)
    listed_from: dict[str, datetime] = Field(default_factory=dict)
    listed_until: dict[str, datetime] = Field(default_factory=dict)
    churn: float = Field(default=0.0, ge=0.0, le=1.0)
    churn_period: timedelta = Field(default=timedelta(hours=6), gt=timedelta(0))
    taken: float = Field(default=0.0, ge=0.0, le=1.0)
    taken_within: timedelta = Field(default=timedelta(0), ge=timedelta(0))


def on_demand_limit(config: MarketConfig, region: str, instance_type: str) -> int | None:
    """How many instances of ``instance_type`` can run on demand in ``region`` (None: unlimited)."""
    return _lookup(config.on_demand_capacity, region, instance_type)


def _lookup[T](table: dict[str, T], region: str, instance_type: str) -> T | None:
    for key in (f"{region}/{instance_type}", f"*/{instance_type}", f"{region}/*", "*"):
        if key in table:
            return table[key]
    return None


def next_boundary(moment: datetime) -> datetime:
    """The first 11:30 UTC at or after ``moment`` (UTC)."""
    candidate = datetime.combine(moment.astimezone(UTC).date(), BLOCK_BOUNDARY)
    return candidate if candidate >= moment else candidate + timedelta(days=1)


def money(value: Decimal) -> Decimal:
    """A USD amount rounded to cents."""
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


@dataclass
class Offering:
    """One offering a search returned; its id is valid until ``expires_at`` and until it is bought.

    ``market`` is ``ec2`` or ``sagemaker:<target resource>``; ``fee_usd`` the upfront fee for all
    instances and hours; ``hourly_usd`` the price per instance-hour.
    """

    offering_id: str
    market: str
    region: str
    instance_type: str
    count: int
    zone: str
    start: datetime
    end: datetime
    fee_usd: Decimal
    hourly_usd: Decimal
    issued_at: datetime
    expires_at: datetime
    requested_start_after: datetime | None = None
    requested_end_before: datetime | None = None
    used: bool = False

    @property
    def hours(self) -> int:
        """Whole hours from start to end."""
        return int((self.end - self.start).total_seconds() // 3600)

    @property
    def days(self) -> int:
        """Whole days from start to end."""
        return self.hours // 24


@dataclass
class Market:
    """The capacity market: pools, prices, offerings and what purchases took. Not thread-safe on its own
    (the :class:`~localcloud.emulator.Emulator` serialises calls)."""

    seed: int
    config: MarketConfig = field(default_factory=MarketConfig)
    _consumed: dict[tuple[str, str, str, str, date], int] = field(default_factory=dict)
    _base: dict[tuple[str, str, str, str, date], int] = field(default_factory=dict)
    _offerings: dict[str, Offering] = field(default_factory=dict)
    _issued: dict[tuple[object, ...], int] = field(default_factory=dict)
    _others: dict[tuple[str, str, str, str, date], list[tuple[datetime, int]]] = field(default_factory=dict)
    """What other buyers took (:attr:`MarketConfig.taken`): pool -> (when, instances)."""
    _taken_at: dict[str, datetime] = field(default_factory=dict)
    """Offering id -> when another buyer took it."""
    _taken_slots: set[tuple[object, ...]] = field(default_factory=set)

    # -- deterministic draws ------------------------------------------------------------------------

    def unit(self, *parts: object) -> float:
        """A number in [0, 1) that depends only on the seed and ``parts``."""
        text = "|".join([str(self.seed), *map(str, parts)])
        return int(hashlib.sha256(text.encode()).hexdigest()[:13], 16) / float(16**13)

    def token(self, *parts: object, length: int = 40) -> str:
        """A lowercase hex string that depends only on the seed and ``parts``."""
        text = "|".join([str(self.seed), *map(str, parts)])
        return hashlib.sha256(text.encode()).hexdigest()[:length]

    def extension_payment_pending(self, offering_id: str, default: timedelta) -> timedelta:
        """How long the payment of the extension bought from ``offering_id`` stays pending
        (``Timings.extension_payment_pending``, drawn from the seed and the offering; else ``default``)."""
        bounds = self.config.timings.extension_payment_pending
        if bounds is None:
            return default
        low, high = bounds
        return low + (high - low) * self.unit("extension-payment", offering_id)

    # -- regions, types, prices ---------------------------------------------------------------------

    @staticmethod
    def regions() -> list[str]:
        """The regions where the market sells capacity."""
        return list(REGION_PRICE_FACTORS)

    @staticmethod
    def zones(region: str) -> tuple[str, ...]:
        """The availability zones of a market region (empty for other regions)."""
        return AVAILABILITY_ZONES.get(region, ())

    def on_demand_usd_per_hour(self, region: str, instance_type: str) -> Decimal:
        """The on-demand price of one instance-hour, USD (``ml.`` and EC2 names are both accepted).

        Raises:
            ValueError: a region outside the market or an instance type the emulator does not know.
        """
        spec = self._spec(region, instance_type)
        factor = Decimal(str(REGION_PRICE_FACTORS[region]))
        return (Decimal(str(spec.on_demand_usd_per_hour)) * factor).quantize(Decimal("0.0001"))

    def capacity_block_usd_per_hour(self, region: str, instance_type: str, start: datetime) -> Decimal:
        """The capacity-block price of one instance-hour for a block starting at ``start``, USD.

        $34.608/h for p5.48xlarge in us-east-1 (the seed's figure) times a +-3% demand factor per day.
        """
        demand = Decimal("0.97") + Decimal("0.06") * Decimal(
            str(round(self.unit("cb-price", region, instance_type, start.date()), 6))
        )
        hourly = self.on_demand_usd_per_hour(region, instance_type) * CAPACITY_BLOCK_RATIO * demand
        return hourly.quantize(Decimal("0.0001"))

    def training_plan_usd_per_hour(self, region: str, instance_type: str, start: datetime) -> Decimal:
        """The training-plan price of one instance-hour for a plan starting at ``start``, USD: 70-75%
        below on-demand (the saving drawn per region, type and day)."""
        discount = Decimal("0.70") + Decimal("0.05") * Decimal(
            str(round(self.unit("tp-price", region, instance_type, start.date()), 6))
        )
        hourly = self.on_demand_usd_per_hour(region, instance_type) * (1 - discount)
        return hourly.quantize(Decimal("0.0001"))

    @staticmethod
    def _spec(region: str, instance_type: str) -> InstanceSpec:
        spec = spec_for(instance_type)
        if region not in REGION_PRICE_FACTORS:
            raise ValueError(
                f"region {region!r} is not in the emulated market: {sorted(REGION_PRICE_FACTORS)}"
            )
        if spec is None:
            raise ValueError(f"instance type {instance_type!r} is not known to the emulated market")
        return spec

    # -- quotas ---------------------------------------------------------------------------------

    def training_plan_quota(self, region: str, instance_type: str) -> int:
        """The account's training-plan quota for (region, type), instances."""
        found = _lookup(self.config.training_plan_quotas, region, instance_type)
        return self.config.default_training_plan_quota if found is None else found

    def endpoint_quota(self, region: str, instance_type: str) -> int:
        """The account's on-demand endpoint quota for (region, type), instances."""
        found = _lookup(self.config.endpoint_quotas, region, instance_type)
        return self.config.default_endpoint_quota if found is None else found

    # -- pools -------------------------------------------------------------------------------------

    def pool_size(self, market: str, region: str, instance_type: str, zone: str, day: date) -> int:
        """The instances a (zone, day) pool held before any purchase."""
        key = (market, region, instance_type, zone, day)
        cached = self._base.get(key)
        if cached is not None:
            return cached
        size = self._draw_pool_size(market, region, instance_type, zone, day)
        self._base[key] = size
        return size

    def _draw_pool_size(self, market: str, region: str, instance_type: str, zone: str, day: date) -> int:
        sold = _lookup(self.config.sold_out, region, instance_type)
        if sold is not None and sold[0] <= day <= sold[1]:
            return 0
        explicit = _lookup(self.config.capacity, region, instance_type)
        if explicit is not None:
            return explicit
        spec = spec_for(instance_type)
        if spec is None or (spec.regions is not None and region not in spec.regions):
            return 0
        scarcity = _lookup(self.config.no_capacity_probability, region, instance_type)
        if scarcity is None:
            scarcity = _SCARCITY.get((region, spec.name), _DEFAULT_SCARCITY)
        # Capacity comes and goes by the week (a zone's fleet for a type is busy or free for days on end),
        # so multi-week reservations exist as they do on AWS, if rarely.
        week = day.toordinal() // 7
        if self.unit("empty", market, region, instance_type, zone, week) < scarcity:
            return 0
        pick = self.unit("size", market, region, instance_type, zone, week)
        return _POOL_SIZES[int(pick * len(_POOL_SIZES))]

    def available(
        self,
        market: str,
        region: str,
        instance_type: str,
        zone: str,
        day: date,
        *,
        at: datetime | None = None,
    ) -> int:
        """The instances a (zone, day) pool still holds (at ``at``: less what other buyers took by then;
        None: by the end of time)."""
        key = (market, region, instance_type, zone, day)
        taken = self._consumed.get(key, 0) + sum(
            count for when, count in self._others.get(key, ()) if at is None or when <= at
        )
        return max(0, self.pool_size(market, region, instance_type, zone, day) - taken)

    def listed(
        self, market: str, region: str, instance_type: str, zone: str, day: date, *, now: datetime
    ) -> bool:
        """True if the (zone, day) pool is offered at ``now``: within its (region, type)'s ``listed_from`` /
        ``listed_until`` and not withdrawn by ``churn`` in ``now``'s period."""
        since = _lookup(self.config.listed_from, region, instance_type)
        if since is not None and now < since:
            return False
        until = _lookup(self.config.listed_until, region, instance_type)
        if until is not None and now >= until:
            return False
        if self.config.churn <= 0:
            return True
        period = int((now - _EPOCH) / self.config.churn_period)
        return self.unit("churn", market, region, instance_type, zone, day, period) >= self.config.churn

    def fits(
        self,
        market: str,
        region: str,
        instance_type: str,
        zone: str,
        *,
        start: datetime,
        days: int,
        count: int,
        listed_at: datetime | None = None,
    ) -> bool:
        """True if ``count`` instances are free in ``zone`` for every day of ``[start, start + days)`` (and,
        with ``listed_at``, every one of those pools is offered at that instant: :meth:`listed`)."""
        first = start.date()
        days_wanted = [first + timedelta(days=offset) for offset in range(days)]
        if listed_at is not None and not all(
            self.listed(market, region, instance_type, zone, day, now=listed_at) for day in days_wanted
        ):
            return False
        return all(
            self.available(market, region, instance_type, zone, day, at=listed_at) >= count
            for day in days_wanted
        )

    def take(self, offering: Offering) -> None:
        """Remove an offering's instances from its pools (a purchase)."""
        self._adjust(offering, offering.count)

    def give_back(self, offering: Offering) -> None:
        """Return an offering's instances to its pools (a purchase that failed)."""
        self._adjust(offering, -offering.count)

    def _adjust(self, offering: Offering, delta: int) -> None:
        first = offering.start.date()
        for offset in range(offering.days):
            key = (
                offering.market,
                offering.region,
                offering.instance_type,
                offering.zone,
                first + timedelta(days=offset),
            )
            self._consumed[key] = self._consumed.get(key, 0) + delta

    def slots(
        self,
        market: str,
        region: str,
        instance_type: str,
        *,
        count: int,
        days: int,
        earliest_start: datetime,
        latest_end: datetime | None,
        now: datetime,
    ) -> list[tuple[datetime, str]]:
        """Every (start, zone) where ``count`` instances are free for ``days`` days, earliest first.

        Starts are 11:30 UTC boundaries at least one hour after ``now``, no earlier than
        ``earliest_start``, no later than ``now + max_lead``, and ending no later than ``latest_end``.
        """
        if days <= 0 or count <= 0:
            return []
        start = next_boundary(max(earliest_start, now + timedelta(hours=1)))
        last_start = now + self.config.max_lead
        found: list[tuple[datetime, str]] = []
        while start <= last_start:
            end = start + timedelta(days=days)
            if latest_end is not None and end > latest_end:
                break
            found.extend(
                (start, zone)
                for zone in self.zones(region)
                if self.fits(
                    market, region, instance_type, zone, start=start, days=days, count=count, listed_at=now
                )
            )
            start += timedelta(days=1)
        return found

    # -- offerings ------------------------------------------------------------------------------

    def issue(
        self,
        *,
        prefix: str,
        id_length: int,
        market: str,
        region: str,
        instance_type: str,
        count: int,
        zone: str,
        start: datetime,
        days: int,
        hourly_usd: Decimal,
        now: datetime,
        requested_start_after: datetime | None = None,
        requested_end_before: datetime | None = None,
    ) -> Offering:
        """Register a new offering (valid for ``offering_ttl``) and return it."""
        # Ids depend on what is offered and how many times it was, not on the order of concurrent searches
        # (the application searches regions in parallel): same seed, same calls, same ids.
        key: tuple[object, ...] = (market, region, instance_type, count, zone, start.isoformat(), days)
        self._issued[key] = self._issued.get(key, 0) + 1
        offering_id = prefix + self.token("offering", *key, self._issued[key], length=id_length)
        end = start + timedelta(days=days)
        offering = Offering(
            offering_id=offering_id,
            market=market,
            region=region,
            instance_type=instance_type,
            count=count,
            zone=zone,
            start=start,
            end=end,
            fee_usd=money(hourly_usd * count * days * 24),
            hourly_usd=hourly_usd,
            issued_at=now,
            expires_at=now + self.config.offering_ttl,
            requested_start_after=requested_start_after,
            requested_end_before=requested_end_before,
        )
        self._offerings[offering_id] = offering
        self._compete(offering, key)
        return offering

    def _compete(self, offering: Offering, slot: tuple[object, ...]) -> None:
        """Another buyer takes ``offering`` (:attr:`MarketConfig.taken`, seeded per offering id): at an
        instant drawn within ``taken_within`` of its issue its id is refused from then on, and its instances
        leave its pools (as much as they still hold) the first time its slot (market, region, type, count,
        zone, start, days) is taken: searching the same slot again does not drain the market again."""
        if self.config.taken <= 0 or self.unit("taken", offering.offering_id) >= self.config.taken:
            return
        at = offering.issued_at + self.config.taken_within * self.unit("taken-at", offering.offering_id)
        self._taken_at[offering.offering_id] = at
        if slot in self._taken_slots:
            return
        self._taken_slots.add(slot)
        first = offering.start.date()
        for offset in range(offering.days):
            key = (
                offering.market,
                offering.region,
                offering.instance_type,
                offering.zone,
                first + timedelta(days=offset),
            )
            self._others.setdefault(key, []).append((at, offering.count))

    def taken_by_another(self, offering: Offering, now: datetime) -> bool:
        """True once another buyer has taken ``offering`` (:attr:`MarketConfig.taken`)."""
        at = self._taken_at.get(offering.offering_id)
        return at is not None and now >= at

    def offering(self, offering_id: str) -> Offering | None:
        """A previously issued offering, whatever its state."""
        return self._offerings.get(offering_id)

    def usable(self, offering: Offering, region: str, now: datetime) -> bool:
        """True if ``offering`` can still be bought in ``region`` at ``now``: not expired, not bought, and
        its capacity still free and listed."""
        return (
            offering.region == region
            and not offering.used
            and now <= offering.expires_at
            and offering.start > now
            and not self.taken_by_another(offering, now)
            and self.fits(
                offering.market,
                offering.region,
                offering.instance_type,
                offering.zone,
                start=offering.start,
                days=offering.days,
                count=offering.count,
                listed_at=now,
            )
        )

    def latest_offering(self, prefix: str) -> Offering | None:
        """The most recently issued offering whose id starts with ``prefix`` (for sample requests)."""
        for offering in reversed(self._offerings.values()):
            if offering.offering_id.startswith(prefix):
                return offering
        return None
