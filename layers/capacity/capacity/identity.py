"""Identity: the request id derived from a request's content, and the explicit, versioned list of the
fields that make it.

A request sent without ``request_id`` gets ``req-`` + 16 hex digits of the sha256 of its canonical JSON, so
the same content sent twice is deduplicated. Which fields count is decided here, field by field, for every
model a request is made of (:data:`IDENTITY`): a field is either part of the identity since version 1, or
was added at a later version and is left out of the hash while it holds its default (so the ids of requests
sent before it existed do not change), or is not part of it at all (``request_id`` itself). A field added to
a request model without an entry here fails ``tests/unit/test_unit_identity.py``: deciding its role is part
of adding it (forgetting one would silently change every id, and break deduplication of resubmissions).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from capacity.search_schedule import DEFAULT_EVERY_MINUTES

IDENTITY_VERSION = 8
"""The latest version of :data:`IDENTITY` (a field added at version ``n`` has ``since=n``)."""


@dataclass(frozen=True)
class Role:
    """A field's part in the request id.

    Attributes:
        since: the identity version that added the field (1: the first request schema).
        omit_when_default: the field was added later: while its value is ``default`` it is left out of the
            hash, so older requests keep their ids (always False for ``since`` 1).
        default: the value it is left out at (None for optional fields).
        excluded: never part of the id (the id itself).
    """

    since: int = 1
    omit_when_default: bool = False
    default: object = None
    excluded: bool = False


ALWAYS = Role()
"""Part of the identity from the first schema: hashed whatever its value."""
EXCLUDED = Role(excluded=True)


def _later(since: int, default: object = None) -> Role:
    return Role(since=since, omit_when_default=True, default=default)


IDENTITY: dict[str, dict[str, Role]] = {
    "ReservationRequest": {
        "schema_version": ALWAYS,
        "request_id": EXCLUDED,
        "requester": ALWAYS,
        "instance_type": ALWAYS,
        "instance_count": ALWAYS,
        "earliest_start": ALWAYS,
        "latest_end": ALWAYS,
        "duration_hours": ALWAYS,
        "regions": ALWAYS,
        "max_upfront_fee_usd": ALWAYS,
        "approval_above_usd": ALWAYS,
        "approval_timeout_hours": ALWAYS,
        "dry_run": ALWAYS,
        "release_margin_minutes": ALWAYS,
        "models": ALWAYS,
        "idle_policy": _later(2),
        "platform": _later(3, "sagemaker"),
        "launch_template": _later(3),
        "strategy": _later(3),  # hashed as sent: a defaulted strategy is set after the id is derived
        "team": _later(4),
        "training_plan_arn": _later(5),
        "capacity_reservation_id": _later(5),
        "search_until": _later(6),
        "search_every_minutes": _later(6, DEFAULT_EVERY_MINUTES),
        "serve_until": _later(7),
        "rollover_lead_hours": _later(7, 48),  # request.DEFAULT_ROLLOVER_LEAD_HOURS (a unit test holds it)
        "rollover_of": _later(7),
        "load": _later(8),
        "right_size": _later(8, False),
        "sizing": EXCLUDED,  # set by the orchestrator from load (right_size), never sent
    },
    "ModelSpec": {
        "name": ALWAYS,
        "image": ALWAYS,
        "model_data_url": ALWAYS,
        "model_name": ALWAYS,
        "accelerators": ALWAYS,
        "cpu_cores": ALWAYS,
        "memory_mb": ALWAYS,
        "copies": ALWAYS,
        "scaling": _later(2),
    },
    "CopyCounts": {"initial": ALWAYS, "min": ALWAYS, "max": ALWAYS},
    "ScalingSpec": {
        "target_invocations_per_copy": ALWAYS,
        "scale_out_cooldown_seconds": ALWAYS,
        "scale_in_cooldown_seconds": ALWAYS,
        "idle_minutes_before_zero": ALWAYS,
    },
    "IdlePolicy": {"action": ALWAYS, "idle_hours": ALWAYS},
    "LaunchTemplateRef": {"id": ALWAYS, "name": ALWAYS, "version": ALWAYS},
    "LoadSpec": {"description": ALWAYS, "models": ALWAYS, "max_rejected_percent": ALWAYS},
    "ModelLoadSpec": {"model": ALWAYS, "requests_per_minute": ALWAYS, "requests_per_minute_per_copy": ALWAYS},
    # sizing is EXCLUDED: its models never reach the hash (listed so that every request model is decided).
    "RightSizing": dict.fromkeys(
        (
            "instance_type",
            "requested_count",
            "instance_count",
            "best",
            "max_rejected_percent",
            "simulated_from",
            "hours",
            "candidates",
            "needed_instances_by_hour",
            "text",
        ),
        ALWAYS,
    ),
    "CandidateFigures": dict.fromkeys(
        (
            "instance_type",
            "instance_count",
            "meets_target",
            "rejected_percent",
            "peak_rejected_percent",
            "worst_hour_rejected_percent",
            "requests",
            "rejected_requests",
            "instance_hours_used",
            "reserved_instance_hours",
            "idle_percent",
            "peak_instances",
            "upfront_fee_usd",
        ),
        ALWAYS,
    ),
}
"""Every field of every model a request is made of, by model class name, with its :class:`Role`. The
derivation applies the roles of ``ReservationRequest`` and of each ``models[]`` item (``ModelSpec``); the
other models' fields are all :data:`ALWAYS` (a later field there needs the derivation to reach it too)."""


def _apply(payload: dict[str, Any], roles: dict[str, Role]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for field, value in payload.items():
        role = roles.get(field, ALWAYS)
        if role.excluded or (role.omit_when_default and value == role.default):
            continue
        kept[field] = value
    return kept


def derive_request_id(request: BaseModel) -> str:
    """``req-`` + 16 hex digits of the sha256 of the request's canonical JSON (the fields of
    :data:`IDENTITY`, sorted keys, no spaces).

    The same content gives the same id, so a resubmission without an id is deduplicated too.
    """
    payload = _apply(request.model_dump(mode="json"), IDENTITY["ReservationRequest"])
    if isinstance(payload.get("models"), list):
        payload["models"] = [_apply(model, IDENTITY["ModelSpec"]) for model in payload["models"]]
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return "req-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]
