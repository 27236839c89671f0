"""What SageMaker hosting holds: models, endpoint configs, endpoints (with their deployments) and inference
components (with their copy changes). Statuses and counts are functions of virtual time, never of threads."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.emulator.common import (
    Params,
)
from localcloud.emulator.hosting.packing import Requirements

GONE = "Gone"
"""Pseudo-status of a resource whose deletion has completed (it no longer exists)."""
TOMBSTONE_KEPT = timedelta(days=1)
"""How long a deleted endpoint or component stays visible to stale reads (longer than any lag)."""


@dataclass
class Model:
    """A SageMaker model (``CreateModel`` request kept as given)."""

    name: str
    arn: str
    created: datetime
    request: Params
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class EndpointConfig:
    """An endpoint configuration (request kept as given)."""

    name: str
    arn: str
    created: datetime
    request: Params
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def variants(self) -> list[dict[str, Any]]:
        """The production variants."""
        variants: list[dict[str, Any]] = self.request["ProductionVariants"]
        return variants

    def variant(self, name: str) -> dict[str, Any] | None:
        """A production variant by name."""
        return next((variant for variant in self.variants if variant["VariantName"] == name), None)


def plan_arn_of(variant: dict[str, Any]) -> str | None:
    """The training plan a variant runs on, if any."""
    reservation = variant.get("CapacityReservationConfig") or {}
    arn: str | None = reservation.get("MlReservationArn")
    return arn


def mis_enabled(variant: dict[str, Any]) -> bool:
    """True if managed instance scaling is on for the variant."""
    return (variant.get("ManagedInstanceScaling") or {}).get("Status") == "ENABLED"


@dataclass
class Deployment:
    """One ``CreateEndpoint`` or ``UpdateEndpoint``: which config, when it started and completes."""

    config: EndpointConfig
    started: datetime
    completes: datetime
    succeeds: bool = True
    failure_reason: str | None = None


@dataclass
class Endpoint:
    """An endpoint; its status, config and failure reason are functions of virtual time."""

    name: str
    arn: str
    created: datetime
    deployments: list[Deployment]
    tags: dict[str, str] = field(default_factory=dict)
    delete_started: datetime | None = None
    delete_completes: datetime | None = None
    variant_instances: dict[str, int] = field(default_factory=dict)
    """Desired instance counts set through Application Auto Scaling (``sagemaker:variant:...``)."""
    variants_with_components: set[str] = field(default_factory=set)

    def status(self, now: datetime) -> str:
        """``Creating``, ``InService``, ``Updating``, ``Failed``, ``Deleting`` or :data:`GONE`."""
        if self.delete_started is not None and self.delete_completes is not None:
            if now >= self.delete_completes:
                return GONE
            if now >= self.delete_started:
                return "Deleting"
        latest = self.deployments[-1]
        first = self.deployments[0]
        if now < first.completes:
            return "Creating"
        if not first.succeeds:
            return "Failed"
        if latest.started <= now < latest.completes:
            return "Updating"
        return "InService"

    def deployment(self, now: datetime) -> Deployment:
        """The deployment in effect at ``now`` (the first one until it completes)."""
        done = [item for item in self.deployments if item.completes <= now and item.succeeds]
        return done[-1] if done else self.deployments[0]

    def config(self, now: datetime) -> EndpointConfig:
        """The endpoint config in effect at ``now``."""
        return self.deployment(now).config

    def pending(self, now: datetime) -> Deployment | None:
        """The update under way at ``now`` (not the creation)."""
        latest = self.deployments[-1]
        if len(self.deployments) > 1 and latest.started <= now < latest.completes:
            return latest
        return None

    def failure_reason(self, now: datetime) -> str | None:
        """Why the latest completed deployment failed, if it did."""
        done = [item for item in self.deployments if item.completes <= now]
        return done[-1].failure_reason if done and not done[-1].succeeds else None

    def last_modified(self, now: datetime) -> datetime:
        """When the endpoint last changed, at or before ``now``."""
        moments = [self.created]
        for item in self.deployments:
            moments.extend(moment for moment in (item.started, item.completes) if moment <= now)
        if self.delete_started is not None and self.delete_started <= now:
            moments.append(self.delete_started)
        return max(moments)

    def uses_config(self, name: str, now: datetime) -> bool:
        """True if the endpoint is live and runs on, or is being created or updated with, config ``name``."""
        status = self.status(now)
        if status in ("Deleting", GONE):
            return False
        if self.config(now).name == name:
            return True
        pending = self.pending(now)
        return pending is not None and pending.config.name == name


@dataclass
class CopyChange:
    """A requested copy count: asked at ``at``, in effect from ``completes`` unless it ``fails``."""

    at: datetime
    desired: int
    completes: datetime
    fails: bool = False


@dataclass
class Component:
    """An inference component; status and copy counts are functions of virtual time.

    ``changes[0]`` is the creation.
    """

    name: str
    arn: str
    endpoint_name: str
    endpoint_arn: str
    variant_name: str
    created: datetime
    request: Params
    requirements: Requirements
    changes: list[CopyChange]
    tags: dict[str, str] = field(default_factory=dict)
    failure_reason: str | None = None
    delete_started: datetime | None = None
    delete_completes: datetime | None = None

    def status(self, now: datetime) -> str:
        """``Creating``, ``InService``, ``Updating``, ``Failed``, ``Deleting`` or :data:`GONE`."""
        if self.delete_started is not None and self.delete_completes is not None:
            if now >= self.delete_completes:
                return GONE
            if now >= self.delete_started:
                return "Deleting"
        first = self.changes[0]
        if now < first.completes:
            return "Creating"
        if first.fails:
            return "Failed"
        latest = self._latest(now)
        if now < latest.completes:
            return "Updating"
        return "Failed" if latest.fails else "InService"

    def _latest(self, now: datetime) -> CopyChange:
        asked = [change for change in self.changes if change.at <= now]
        return asked[-1] if asked else self.changes[0]

    def desired(self, now: datetime) -> int:
        """The copy count asked for last, at or before ``now``."""
        return self._latest(now).desired

    def effective(self, now: datetime) -> int:
        """The copy count in effect at ``now`` (before packing limits): the latest-asked change that has
        completed. 0 while creating, after a failure, while deleting."""
        if self.status(now) in ("Creating", "Deleting", GONE) or self.changes[0].fails:
            return 0
        done = [change for change in self.changes if change.completes <= now and not change.fails]
        return done[-1].desired if done else 0

    def last_modified(self, now: datetime) -> datetime:
        """When the component last changed, at or before ``now``."""
        moments = [self.created]
        for change in self.changes:
            moments.extend(moment for moment in (change.at, change.completes) if moment <= now)
        if self.delete_started is not None and self.delete_started <= now:
            moments.append(self.delete_started)
        return max(moments)
