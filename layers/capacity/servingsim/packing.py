"""Packing inference component copies on an endpoint variant's instances (SageMaker places each copy, with
its ``ComputeResourceRequirements``, on one instance of the variant's type): first-fit-decreasing, after a
round-robin over components so that every component keeps its first copies when room runs out (SageMaker
does not evict one model's running copy to start another's)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hardware:
    """What one instance offers: accelerator devices, vCPUs and memory (MiB)."""

    accelerators: float
    vcpus: float
    memory_mib: float


@dataclass(frozen=True)
class Requirements:
    """What one copy of a component needs on an instance (``NumberOfAcceleratorDevicesRequired``,
    ``NumberOfCpuCoresRequired``, ``MinMemoryRequiredInMb``)."""

    accelerators: float
    cpus: float
    memory_mib: float

    def fits(self, free: list[float]) -> bool:
        """True if the copy fits in ``free`` = [accelerators, cpus, memory MiB]."""
        return (
            self.accelerators <= free[0] + 1e-9
            and self.cpus <= free[1] + 1e-9
            and self.memory_mib <= free[2] + 1e-9
        )


def pack(
    hardware: Hardware, demands: list[tuple[str, Requirements, int]], instances: int | None
) -> tuple[int, dict[str, int]]:
    """Place copies first-fit-decreasing on instances of ``hardware``.

    Args:
        hardware: one instance.
        demands: (component name, per-copy requirements, copies).
        instances: how many instances exist (None: open as many as needed).

    Returns:
        (instances used, copies placed per component). A copy larger than one instance is never placed.
    """
    capacity = [float(hardware.accelerators), float(hardware.vcpus), float(hardware.memory_mib)]
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
