"""Instance types and regions the emulated capacity market knows.

Hardware figures (accelerators, vCPUs, memory) are the published EC2 specifications of each type; the
``ml.`` type of SageMaker has the same hardware. On-demand prices are USD per instance-hour in us-east-1,
anchored on the public figure the project's design uses (p5.48xlarge: $55.04/h, the EC2 price after the
June 2025 reduction) and on EC2's public on-demand prices for the other types (rounded). SageMaker hosting
lists its own, somewhat higher ``ml.`` prices; the emulator uses one figure for both so that the
project's cost facts (capacity blocks 40-50% and training plans 70-75% below on-demand) hold against one
reference. Other regions apply :data:`REGION_PRICE_FACTORS` (a spread of a few percent).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    """One instance type.

    Attributes:
        name: the EC2 name (``p5.48xlarge``); SageMaker uses ``ml.`` + name.
        accelerators: GPUs / Trainium / Inferentia devices per instance (0 for CPU types).
        vcpus: vCPUs per instance.
        memory_gib: memory per instance, GiB.
        on_demand_usd_per_hour: on-demand price in us-east-1, USD per instance-hour.
        capacity_block: offered as an EC2 Capacity Block for ML.
        training_plan: offered as a SageMaker training plan (the botocore enum
            ``ReservedCapacityInstanceType`` is the authority on which types can be).
        regions: regions where reserved capacity (plans, blocks) of this type exists; None means every
            market region.
    """

    name: str
    accelerators: int
    vcpus: int
    memory_gib: int
    on_demand_usd_per_hour: float
    capacity_block: bool = False
    training_plan: bool = False
    regions: frozenset[str] | None = None


_US_ONLY = frozenset({"us-east-1", "us-east-2", "us-west-2"})

INSTANCE_SPECS: dict[str, InstanceSpec] = {
    spec.name: spec
    for spec in (
        # Reserved-capacity GPU and Trainium types (capacity blocks and training plans).
        InstanceSpec("p5.48xlarge", 8, 192, 2048, 55.04, capacity_block=True, training_plan=True),
        InstanceSpec("p5.4xlarge", 1, 16, 256, 6.88, capacity_block=True, training_plan=True),
        InstanceSpec("p5e.48xlarge", 8, 192, 2048, 60.00, capacity_block=True, training_plan=True),
        InstanceSpec("p5en.48xlarge", 8, 192, 2048, 63.30, capacity_block=True, training_plan=True),
        InstanceSpec("p4d.24xlarge", 8, 96, 1152, 21.96, capacity_block=True, training_plan=True),
        InstanceSpec("p4de.24xlarge", 8, 96, 1152, 27.45, capacity_block=True, training_plan=True),
        InstanceSpec("trn1.32xlarge", 16, 128, 512, 21.50, capacity_block=True, training_plan=True),
        InstanceSpec(
            "trn2.48xlarge", 16, 192, 2048, 44.70, capacity_block=True, training_plan=True, regions=_US_ONLY
        ),
        InstanceSpec(
            "p6-b200.48xlarge",
            8,
            192,
            2048,
            113.93,
            capacity_block=True,
            training_plan=True,
            regions=_US_ONLY,
        ),
        # Inference types: on-demand only (no capacity blocks; the training-plan enum excludes them).
        InstanceSpec("g6.xlarge", 1, 4, 16, 0.8048),
        InstanceSpec("g6.2xlarge", 1, 8, 32, 0.9776),
        InstanceSpec("g6.4xlarge", 1, 16, 64, 1.3232),
        InstanceSpec("g6.8xlarge", 1, 32, 128, 2.0144),
        InstanceSpec("g6.12xlarge", 4, 48, 192, 4.6016),
        InstanceSpec("g6.16xlarge", 1, 64, 256, 3.3968),
        InstanceSpec("g6.24xlarge", 4, 96, 384, 6.6752),
        InstanceSpec("g6.48xlarge", 8, 192, 768, 13.3504),
        InstanceSpec("g6e.12xlarge", 4, 48, 384, 10.4926),
        InstanceSpec("g6e.48xlarge", 8, 192, 1536, 30.1310),
        InstanceSpec("g5.xlarge", 1, 4, 16, 1.006),
        InstanceSpec("g5.2xlarge", 1, 8, 32, 1.212),
        InstanceSpec("g5.4xlarge", 1, 16, 64, 1.624),
        InstanceSpec("g5.8xlarge", 1, 32, 128, 2.448),
        InstanceSpec("g5.12xlarge", 4, 48, 192, 5.672),
        InstanceSpec("g5.16xlarge", 1, 64, 256, 4.096),
        InstanceSpec("g5.24xlarge", 4, 96, 384, 8.144),
        InstanceSpec("g5.48xlarge", 8, 192, 768, 16.288),
        InstanceSpec("inf2.xlarge", 1, 4, 16, 0.7582),
        InstanceSpec("inf2.8xlarge", 1, 32, 128, 1.9679),
        InstanceSpec("inf2.24xlarge", 6, 96, 384, 6.4906),
        InstanceSpec("inf2.48xlarge", 12, 192, 768, 12.9813),
        # CPU types, for components that need no accelerator.
        InstanceSpec("m5.xlarge", 0, 4, 16, 0.192),
        InstanceSpec("m5.4xlarge", 0, 16, 64, 0.768),
        InstanceSpec("c5.xlarge", 0, 4, 8, 0.17),
    )
}

REGION_PRICE_FACTORS: dict[str, float] = {
    "us-east-1": 1.000,
    "us-east-2": 1.000,
    "us-west-2": 1.012,
    "eu-west-1": 1.035,
    "eu-central-1": 1.052,
    "ap-northeast-1": 1.064,
}
"""The market's regions and their price factor relative to us-east-1."""

AVAILABILITY_ZONES: dict[str, tuple[str, ...]] = {
    region: (f"{region}a", f"{region}b", f"{region}c") for region in REGION_PRICE_FACTORS
}

_AZ_ID_PREFIX = {
    "us-east-1": "use1",
    "us-east-2": "use2",
    "us-west-2": "usw2",
    "eu-west-1": "euw1",
    "eu-central-1": "euc1",
    "ap-northeast-1": "apne1",
}


def availability_zone_id(zone: str) -> str:
    """The zone id of a zone name (``us-east-1b`` -> ``use1-az2``)."""
    region, letter = zone[:-1], zone[-1]
    return f"{_AZ_ID_PREFIX.get(region, region.replace('-', ''))}-az{ord(letter) - ord('a') + 1}"


def spec_for(instance_type: str) -> InstanceSpec | None:
    """The spec of an EC2 (``p5.48xlarge``) or SageMaker (``ml.p5.48xlarge``) instance type, or None."""
    return INSTANCE_SPECS.get(instance_type.removeprefix("ml."))
