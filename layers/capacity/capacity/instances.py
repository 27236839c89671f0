"""Hardware of the ``ml.*`` instance types a reservation can ask for.

Only types SageMaker training plans can reserve are listed: the botocore model's
``ReservedCapacityInstanceType`` enum (p4d, p4de, p5, p5e, p5en, p5.4xlarge, p6-b200, trn1, trn2) plus the
G6 family, which seed 000 names as the one G family available on request; it is not in the enum, so a
request for ``ml.g6.*`` runs on demand only (strategy ``on-demand-first``, no reservation fallback).
UltraServer types (``ml.p6e-gb200.36xlarge``) and types whose specifications are not public yet
(``ml.p6-b300.48xlarge``) are left out: a request for them is rejected with the list of supported types.

Figures are per instance, from the AWS instance type pages (accelerated computing, EC2 equivalents of the
``ml.*`` types): accelerator devices (GPUs; Trainium chips for trn*), vCPUs and memory in MiB. The
inference-component fit check (:func:`fits`) compares one model copy's ``ComputeResourceRequirements``
with these numbers.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    """One instance type: ``accelerators`` devices, ``vcpus`` and ``memory_mib`` per instance."""

    instance_type: str
    accelerators: int
    accelerator_name: str
    vcpus: int
    memory_mib: int


_GIB = 1024

INSTANCE_TYPES: dict[str, InstanceSpec] = {
    spec.instance_type: spec
    for spec in (
        InstanceSpec("ml.p4d.24xlarge", 8, "NVIDIA A100 40GB", 96, 1152 * _GIB),
        InstanceSpec("ml.p4de.24xlarge", 8, "NVIDIA A100 80GB", 96, 1152 * _GIB),
        InstanceSpec("ml.p5.4xlarge", 1, "NVIDIA H100", 16, 256 * _GIB),
        InstanceSpec("ml.p5.48xlarge", 8, "NVIDIA H100", 192, 2048 * _GIB),
        InstanceSpec("ml.p5e.48xlarge", 8, "NVIDIA H200", 192, 2048 * _GIB),
        InstanceSpec("ml.p5en.48xlarge", 8, "NVIDIA H200", 192, 2048 * _GIB),
        InstanceSpec("ml.p6-b200.48xlarge", 8, "NVIDIA B200", 192, 2048 * _GIB),
        InstanceSpec("ml.trn1.32xlarge", 16, "AWS Trainium", 128, 512 * _GIB),
        InstanceSpec("ml.trn2.48xlarge", 16, "AWS Trainium2", 192, 2048 * _GIB),
        InstanceSpec("ml.g6.xlarge", 1, "NVIDIA L4", 4, 16 * _GIB),
        InstanceSpec("ml.g6.2xlarge", 1, "NVIDIA L4", 8, 32 * _GIB),
        InstanceSpec("ml.g6.4xlarge", 1, "NVIDIA L4", 16, 64 * _GIB),
        InstanceSpec("ml.g6.8xlarge", 1, "NVIDIA L4", 32, 128 * _GIB),
        InstanceSpec("ml.g6.12xlarge", 4, "NVIDIA L4", 48, 192 * _GIB),
        InstanceSpec("ml.g6.16xlarge", 1, "NVIDIA L4", 64, 256 * _GIB),
        InstanceSpec("ml.g6.24xlarge", 4, "NVIDIA L4", 96, 384 * _GIB),
        InstanceSpec("ml.g6.48xlarge", 8, "NVIDIA L4", 192, 768 * _GIB),
    )
}


TRAINING_PLAN_INSTANCE_TYPES = frozenset(
    {
        "ml.p4d.24xlarge",
        "ml.p4de.24xlarge",
        "ml.p5.4xlarge",
        "ml.p5.48xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
        "ml.p6-b200.48xlarge",
        "ml.trn1.32xlarge",
        "ml.trn2.48xlarge",
    }
)
"""The listed types a training plan can reserve: those in botocore's ``ReservedCapacityInstanceType`` enum
(the G6 family is not in it, so ``ml.g6.*`` cannot be reserved, only run on demand; a unit test checks the
enum)."""

CAPACITY_BLOCK_INSTANCE_TYPES = frozenset(
    {
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.4xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
    }
)
"""EC2 instance types sold as Capacity Blocks for ML ("Capacity Blocks for ML" in the EC2 user guide:
P4d, P4de, P5, P5e, P5en, P6-B200, Trn1, Trn2; botocore has no narrower enum than ``InstanceType``)."""


def spec_for(instance_type: str) -> InstanceSpec | None:
    """The hardware of ``instance_type``, or None when it is not a supported type."""
    return INSTANCE_TYPES.get(instance_type)


def fits(spec: InstanceSpec, *, accelerators: int, cpu_cores: float, memory_mb: int) -> list[tuple[str, str]]:
    """Why one model copy does not fit on one instance of ``spec`` (empty list: it fits).

    Returns:
        ``(requirement, reason)`` pairs: ``requirement`` is ``accelerators``, ``cpu_cores`` or
        ``memory_mb``; ``reason`` says what the copy needs and what the instance has.
    """
    reasons = []
    if accelerators > spec.accelerators:
        reasons.append(
            (
                "accelerators",
                f"needs {accelerators} accelerator devices but {spec.instance_type} has {spec.accelerators}",
            )
        )
    if cpu_cores > spec.vcpus:
        reasons.append(
            ("cpu_cores", f"needs {cpu_cores:g} CPU cores but {spec.instance_type} has {spec.vcpus} vCPUs")
        )
    if memory_mb > spec.memory_mib:
        reasons.append(
            (
                "memory_mb",
                f"needs {memory_mb} MB of memory but {spec.instance_type} has {spec.memory_mib} MiB",
            )
        )
    return reasons
