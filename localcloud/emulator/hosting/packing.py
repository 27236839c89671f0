"""Packing inference component copies on a variant's instances: each copy needs its
``ComputeResourceRequirements`` (accelerators, CPU cores, memory) on one instance of the variant's type
(table in :mod:`localcloud.emulator.instances`). The placement itself is :mod:`servingsim`'s (issue 33):
the planner predicts with the same model of copies and instances the emulated endpoints run."""

from __future__ import annotations

from typing import Any

from localcloud.emulator.instances import InstanceSpec, spec_for
from servingsim.packing import Hardware, Requirements
from servingsim.packing import pack as _pack

__all__ = ["FALLBACK_SPEC", "Requirements", "pack", "spec_of"]

FALLBACK_SPEC = InstanceSpec("unknown", 0, 4, 16, 0.0)
"""The instance a variant of an unknown (or no) instance type is taken to run on."""


def spec_of(variant: dict[str, Any]) -> InstanceSpec:
    """The instance type of a production variant (:data:`FALLBACK_SPEC` if unknown)."""
    return spec_for(variant.get("InstanceType") or "") or FALLBACK_SPEC


def pack(
    spec: InstanceSpec, demands: list[tuple[str, Requirements, int]], instances: int | None
) -> tuple[int, dict[str, int]]:
    """Place copies first-fit-decreasing on instances of ``spec`` (:func:`servingsim.packing.pack`).

    Returns:
        (instances used, copies placed per component).
    """
    hardware = Hardware(float(spec.accelerators), float(spec.vcpus), float(spec.memory_gib * 1024))
    return _pack(hardware, demands, instances)
