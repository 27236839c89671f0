"""Packing inference component copies on a variant's instances: each copy needs its
``ComputeResourceRequirements`` (accelerators, CPU cores, memory) on one instance of the variant's type
(table in :mod:`localcloud.emulator.instances`); copies are placed first-fit-decreasing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localcloud.emulator.instances import InstanceSpec, spec_for

FALLBACK_SPEC = InstanceSpec("unknown", 0, 4, 16, 0.0)
"""The instance a variant of an unknown (or no) instance type is taken to run on."""


def spec_of(variant: dict[str, Any]) -> InstanceSpec:
    """The instance type of a production variant (:data:`FALLBACK_SPEC` if unknown)."""
    return spec_for(variant.get("InstanceType") or "") or FALLBACK_SPEC


@dataclass(frozen=True)
class Requirements:
    """What one copy of a component needs on an instance."""

    accelerators: float
    cpus: float
    memory_mib: float

    def fits(self, free: list[float]) -> bool:
        """True if the copy fits in ``free`` = [accelerators, cpus, memory]."""
        return (
            self.accelerators <= free[0] + 1e-9
            and self.cpus <= free[1] + 1e-9
            and self.memory_mib <= free[2] + 1e-9
        )


def pack(
    spec: InstanceSpec, demands: list[tuple[str, Requirements, int]], instances: int | None
) -> tuple[int, dict[str, int]]:
    """Place copies first-fit-decreasing on instances of ``spec``.

    Args:
        spec: the instance type.
        demands: (component name, per-copy requirements, copies).
        instances: how many instances exist (None: open as many as needed).

    Returns:
        (instances used, copies placed per component).
    """
    capacity = [float(spec.accelerators), float(spec.vcpus), float(spec.memory_gib * 1024)]
    # Round-robin over components, so that when room runs out every component keeps its first copies
    # (SageMaker does not evict one model's running copy to start another's); then largest first.
    rounds = max((count for _name, _requirements, count in demands), default=0)
    copies = [
        (name, requirements)
        for index in range(rounds)
        for name, requirements, count in demands
        if index < count and requirements.fits(list(capacity))
    ]
    copies.sort(key=lambda item: (item[1].accelerators, item[1].memory_mib, item[1].cpus), reverse=True)
    free: list[list[float]] = []
    placed = {name: 0 for name, _requirements, _count in demands}
    for name, requirements in copies:
        slot = next((item for item in free if requirements.fits(item)), None)
        if slot is None and (instances is None or len(free) < instances):
            slot = list(capacity)
            free.append(slot)
        if slot is None:
            continue
        slot[0] -= requirements.accelerators
        slot[1] -= requirements.cpus
        slot[2] -= requirements.memory_mib
        placed[name] += 1
    return len(free), placed
