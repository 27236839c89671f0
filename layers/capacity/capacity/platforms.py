"""One descriptor per platform (issue 32 point 2): what it reserves, what runs on it, and the facts the rest
of the layer asks of a platform, written once.

A platform is a :class:`Platform` registered in :data:`PLATFORMS` (looked up with :func:`platform`); its
steps are its wing (``capacity/logic/<name>/``), registered once in :mod:`capacity.logic.wings`. No other
module compares a platform's name with a literal (``tests/gates/test_platform_literals.py``): it asks the
descriptor (``platform(request.platform).capacity_blocks``, ``.reserved_noun``, ...).

This module is the domain's: it imports nothing of the layer but the instance catalogue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from capacity.instances import TRAINING_PLAN_INSTANCE_TYPES

PlatformName = Literal["sagemaker", "ec2"]
"""Where the capacity runs: ``sagemaker`` (training plan + endpoint, ``ml.*`` types) or ``ec2`` (capacity
block + instances from a launch template, EC2 types). A request's ``platform``, a step's, a record's."""

Reserved = Literal["training-plan", "capacity-block", "none"]
"""What a platform reserves: the ``kind`` of its reserved ``PURCHASE`` (``none``: it runs on demand only)."""

Runs = Literal["endpoint", "instances"]
"""What runs on a platform's capacity: a SageMaker endpoint with inference components, or EC2 instances
launched from the request's launch template."""


@dataclass(frozen=True)
class Platform:
    """A platform: what it reserves, what runs on it, and how the layer words and checks it.

    Attributes:
        name: the ``platform`` of requests, steps and records.
        display_name: how messages name the platform (``SageMaker``, ``EC2``).
        reserved: what is reserved (the reserved ``PURCHASE`` ``kind``).
        runs: what runs on the capacity.
        reserved_noun: how messages name what is reserved (``training plan``, ``capacity block``).
        reserved_short: the same in one word (``plan``, ``block``).
        on_demand_kind: the ``kind`` of its ``PURCHASE`` run on demand.
        launch_call: the AWS call that launches what runs (the only way to learn whether on-demand
            capacity is free).
        reservable_types: the instance types it can reserve; None when every type it accepts can be.
        spot: whether interruption-tolerant work may run on spot (strategy ``spot-ok``).
        purchase_name_unique: whether its purchase call is unique by name, so a lookup answers whether it
            committed (a training plan's name); False when a call may commit unseen (EC2's eventually
            consistent reads).
        brought_states: the states a brought reservation may be in (paid, and not over), in AWS's spelling.
    """

    name: PlatformName
    display_name: str
    reserved: Reserved
    runs: Runs
    reserved_noun: str
    reserved_short: str
    on_demand_kind: str
    launch_call: str
    reservable_types: frozenset[str] | None
    spot: bool
    purchase_name_unique: bool
    brought_states: tuple[str, ...]

    @property
    def capacity_blocks(self) -> bool:
        """Whether it reserves EC2 Capacity Blocks (their durations, counts, types and 8-week horizon)."""
        return self.reserved == "capacity-block"

    @property
    def training_plans(self) -> bool:
        """Whether it reserves SageMaker training plans (their counts and instance types)."""
        return self.reserved == "training-plan"

    @property
    def serves_models(self) -> bool:
        """Whether an endpoint with inference components runs on it (``models``, ``load``, scaling, idle)."""
        return self.runs == "endpoint"

    @property
    def launches_instances(self) -> bool:
        """Whether instances from the request's launch template run on it (needed to launch on demand)."""
        return self.runs == "instances"

    def reserves(self, instance_type: str) -> bool:
        """Whether ``instance_type`` can be reserved on this platform (``ml.g6.*`` has no training plan)."""
        if self.reserved == "none":
            return False
        return self.reservable_types is None or instance_type in self.reservable_types

    def kind(self, market: str) -> str:
        """The ``PURCHASE`` ``kind`` of capacity bought on ``market`` (``reserved``, ``on-demand``,
        ``spot``)."""
        return self.reserved if market == "reserved" else self.on_demand_kind


SAGEMAKER: Final = Platform(
    name="sagemaker",
    display_name="SageMaker",
    reserved="training-plan",
    runs="endpoint",
    reserved_noun="training plan",
    reserved_short="plan",
    on_demand_kind="on-demand-endpoint",
    launch_call="CreateEndpoint",
    reservable_types=TRAINING_PLAN_INSTANCE_TYPES,
    spot=False,
    purchase_name_unique=True,
    brought_states=("Active", "Scheduled"),
)
"""SageMaker AI: a training plan, an endpoint with inference components on it (``logic/sagemaker/``)."""

EC2: Final = Platform(
    name="ec2",
    display_name="EC2",
    reserved="capacity-block",
    runs="instances",
    reserved_noun="capacity block",
    reserved_short="block",
    on_demand_kind="on-demand-instances",
    launch_call="RunInstances",
    reservable_types=None,
    spot=True,
    purchase_name_unique=False,
    brought_states=("active", "scheduled"),
)
"""EC2: a Capacity Block for ML, instances from the request's launch template (``logic/ec2/``)."""

PLATFORMS: Final[dict[str, Platform]] = {p.name: p for p in (SAGEMAKER, EC2)}
"""Every platform, by name: the one registration (its wing: :data:`capacity.logic.wings.WINGS`)."""

DEFAULT: Final = SAGEMAKER
"""The platform of a request, step or record that names none (recorded before EC2 existed)."""


def platform(name: str | None) -> Platform:
    """The platform called ``name`` (None or empty: :data:`DEFAULT`, what a record written before
    platforms means).

    Raises:
        ValueError: no platform has that name.
    """
    if not name:
        return DEFAULT
    found = PLATFORMS.get(name)
    if found is None:
        raise ValueError(f"unknown platform {name!r}: one of {', '.join(sorted(PLATFORMS))}")
    return found
