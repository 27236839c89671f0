"""On-demand prices and the arithmetic that compares a reservation with them.

Every plan shown to a person states the on-demand equivalent and the break-even utilisation (DESIGN.md
section 2): a reservation that is not used continuously can cost more than on-demand.

Source notes (USD per instance-hour, on-demand, Linux, us-east-1 base):

- ``ml.p5.48xlarge`` **$55.04/h**: seed 000 (AWS blog "securing short-term GPU capacity": "p5.48xlarge
  costs $34.608/h with capacity blocks versus $55.04/h on demand" in US East (N. Virginia)).
- The other types are **approximate** public list prices of the same hardware (EC2 on-demand, us-east-1,
  2025 price pages, rounded), i.e. on the same basis as the seed's anchor. SageMaker-managed ``ml.*``
  hosting is billed at its own, usually higher, rates: check the SageMaker AI pricing page before
  relying on a figure for a real decision. Besides the comparisons shown to people they price what on demand
  may cost before it is launched (judged against the request's budget and approval threshold, and held on
  the team's month and quota: :func:`capacity.recommendation.on_demand_hold_usd`) and what it cost once
  released (:func:`capacity.logic.governance.costs.on_demand_summary`): no reservation is bought or rejected
  because of them.
- Regional prices are the us-east-1 price times an approximate regional multiplier (a few percent in
  the US, more in Europe and Asia Pacific).

All money is :class:`~decimal.Decimal` USD; hours are hours.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")

ON_DEMAND_USD_PER_HOUR_US_EAST_1: dict[str, Decimal] = {
    "ml.p5.48xlarge": Decimal("55.04"),  # seed 000
    "ml.p5.4xlarge": Decimal("6.88"),
    "ml.p5e.48xlarge": Decimal("60.00"),
    "ml.p5en.48xlarge": Decimal("63.30"),
    "ml.p4d.24xlarge": Decimal("21.96"),
    "ml.p4de.24xlarge": Decimal("27.45"),
    "ml.p6-b200.48xlarge": Decimal("113.93"),
    "ml.trn1.32xlarge": Decimal("21.50"),
    "ml.trn2.48xlarge": Decimal("44.70"),
    "ml.g6.xlarge": Decimal("0.8048"),
    "ml.g6.2xlarge": Decimal("0.9776"),
    "ml.g6.4xlarge": Decimal("1.3232"),
    "ml.g6.8xlarge": Decimal("2.0144"),
    "ml.g6.12xlarge": Decimal("4.6016"),
    "ml.g6.16xlarge": Decimal("3.3968"),
    "ml.g6.24xlarge": Decimal("6.6752"),
    "ml.g6.48xlarge": Decimal("13.3504"),
}

REGION_MULTIPLIER: dict[str, Decimal] = {
    "us-east-1": Decimal("1.00"),
    "us-east-2": Decimal("1.00"),
    "us-west-2": Decimal("1.00"),
    "us-west-1": Decimal("1.12"),
    "ca-central-1": Decimal("1.10"),
    "eu-west-1": Decimal("1.08"),
    "eu-west-2": Decimal("1.16"),
    "eu-central-1": Decimal("1.14"),
    "eu-north-1": Decimal("1.05"),
    "ap-northeast-1": Decimal("1.25"),
    "ap-southeast-1": Decimal("1.22"),
    "ap-southeast-2": Decimal("1.25"),
    "ap-south-1": Decimal("1.12"),
    "sa-east-1": Decimal("1.55"),
}
"""Known region codes (a request naming another region is rejected) and their price multipliers."""

KNOWN_REGIONS = frozenset(REGION_MULTIPLIER)


def usd(value: Decimal) -> Decimal:
    """``value`` rounded half-up to cents."""
    return value.quantize(CENT, rounding=ROUND_HALF_UP)


def on_demand_usd_per_hour(region: str, instance_type: str) -> Decimal | None:
    """On-demand USD per instance-hour of ``instance_type`` in ``region``, or None if unknown.

    An EC2 type (``p5.48xlarge``) has the price of its ``ml.`` twin: the figures above are EC2 list
    prices already (see the source notes).
    """
    base = ON_DEMAND_USD_PER_HOUR_US_EAST_1.get(instance_type)
    if base is None and not instance_type.startswith("ml."):
        base = ON_DEMAND_USD_PER_HOUR_US_EAST_1.get("ml." + instance_type)
    multiplier = REGION_MULTIPLIER.get(region)
    if base is None or multiplier is None:
        return None
    return (base * multiplier).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def on_demand_equivalent(rate_per_instance_hour: Decimal, *, instance_count: int, hours: Decimal) -> Decimal:
    """What ``instance_count`` instances for ``hours`` would cost on demand (USD, cents)."""
    return usd(rate_per_instance_hour * instance_count * hours)


def usd_per_instance_hour(upfront_fee: Decimal, *, instance_count: int, hours: Decimal) -> Decimal:
    """Upfront fee spread over the reserved instance-hours (USD per instance-hour, 4 decimals).

    Raises:
        ValueError: no instance-hours (``instance_count`` or ``hours`` not positive).
    """
    if instance_count <= 0 or hours <= 0:
        raise ValueError("a reservation needs at least one instance-hour")
    return (upfront_fee / (instance_count * hours)).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def saving_percent(upfront_fee: Decimal, on_demand_equivalent_usd: Decimal) -> Decimal:
    """Saving of the reservation over on-demand for the same instance-hours, in percent (1 decimal).

    ``(1 - upfront / on_demand_equivalent) * 100``; negative when the reservation costs more.

    Raises:
        ValueError: the on-demand equivalent is not positive.
    """
    if on_demand_equivalent_usd <= 0:
        raise ValueError("on-demand equivalent must be positive")
    return ((1 - upfront_fee / on_demand_equivalent_usd) * 100).quantize(
        Decimal("0.1"), rounding=ROUND_HALF_UP
    )


def break_even_utilisation(upfront_fee: Decimal, on_demand_equivalent_usd: Decimal) -> Decimal:
    """Fraction of the reserved instance-hours that must be used for the reservation to pay off.

    ``upfront / (on-demand rate * instance count * hours)`` = ``upfront / on_demand_equivalent``, 4
    decimals (0.2800 = the reservation beats on-demand if the endpoint serves more than 28% of the time).
    Above 1 the reservation never beats on-demand.

    Raises:
        ValueError: the on-demand equivalent is not positive.
    """
    if on_demand_equivalent_usd <= 0:
        raise ValueError("on-demand equivalent must be positive")
    return (upfront_fee / on_demand_equivalent_usd).quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP)


def format_usd(value: Decimal) -> str:
    """``$12,345.67`` (cents, thousands separators), for messages a person reads."""
    rounded = usd(value)
    sign = "-" if rounded < 0 else ""
    return f"{sign}${abs(rounded):,.2f}"


def money_str(value: Decimal) -> str:
    """The wire form of money: a plain decimal string rounded to cents (``"12345.67"``)."""
    return f"{usd(value):f}"
