"""The ``SageMaker Endpoint State Change`` events an endpoint's transitions send (a Ticker of the clock)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import Due
from localcloud.emulator.common import (
    NEVER,
)
from localcloud.emulator.hosting.records import Deployment, Endpoint
from localcloud.emulator.hosting.state import HostingState


class EndpointEvents(HostingState):
    """Queues an endpoint's state changes as they are decided and sends each when virtual time reaches it."""

    def _announce(self, region: str, endpoint: Endpoint, at: datetime, status: str) -> None:
        """Queue the ``SageMaker Endpoint State Change`` event AWS sends when the endpoint reaches ``status``
        at ``at`` (nothing for a transition that never happens)."""
        if at < NEVER:
            self._outbox.append((at, region, endpoint, status))

    def _announce_deployment(self, region: str, endpoint: Endpoint, deployment: Deployment) -> None:
        first = deployment is endpoint.deployments[0]
        # A failed update rolls back: the endpoint is in service again on its old configuration.
        status = "FAILED" if first and not deployment.succeeds else "IN_SERVICE"
        self._announce(region, endpoint, deployment.completes, status)

    def next_due(self, now: datetime) -> Due | None:
        """The next endpoint state-change event to send (foreground: it follows from a call just made)."""
        with self.ctx.lock:
            pending = [at for at, _region, _endpoint, _status in self._outbox]
        if not pending:
            return None
        return Due(max(min(pending), now + timedelta(microseconds=1)), foreground=True)

    def advance(self, now: datetime) -> None:
        """Send every endpoint state-change event due at or before ``now`` (source ``aws.sagemaker``; detail
        as in "Events that Amazon SageMaker AI sends to Amazon EventBridge")."""
        with self.ctx.lock:
            due = sorted((item for item in self._outbox if item[0] <= now), key=lambda item: item[0])
            self._outbox = [item for item in self._outbox if item[0] > now]
            events = [
                (region, endpoint, self._event_detail(endpoint, at, status))
                for at, region, endpoint, status in due
            ]
        for region, endpoint, detail in events:
            self.ctx.events.put_aws_event(
                source="aws.sagemaker",
                detail_type="SageMaker Endpoint State Change",
                detail=detail,
                resources=[endpoint.arn],
                region=region,
            )

    @staticmethod
    def _event_detail(endpoint: Endpoint, at: datetime, status: str) -> dict[str, Any]:
        config = endpoint.config(at)
        detail: dict[str, Any] = {
            "EndpointName": endpoint.name,
            "EndpointArn": endpoint.arn,
            "EndpointConfigName": config.name,
            "ProductionVariants": [
                {
                    "DesiredWeight": float(variant.get("InitialVariantWeight", 1.0)),
                    "DesiredInstanceCount": float(variant.get("InitialInstanceCount") or 1),
                }
                for variant in config.variants
            ],
            "EndpointStatus": status,
            "CreationTime": endpoint.created.timestamp() * 1000,
            "LastModifiedTime": at.timestamp() * 1000,
            "Tags": dict(endpoint.tags),
        }
        reason = endpoint.failure_reason(at)
        if status == "FAILED" and reason:
            detail["FailureReason"] = reason
        return detail
