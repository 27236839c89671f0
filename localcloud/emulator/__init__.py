"""The AWS emulator of the local cloud: an in-memory, deterministic emulation of the AWS APIs moto lacks or
gets wrong, called by the runtime's dispatcher for every botocore request to these operations.

The dispatcher parses the wire request (so handlers receive API parameters as a boto3 caller passed them,
timestamps as ``datetime``, blobs as ``bytes``), runs botocore's request validation, applies the wire-level
faults, and serialises what the emulator returns through the operation's output shape. The emulator
enforces the service-side rules (with the error codes AWS uses), derives every lifecycle from the virtual
clock (``datetime.now(UTC)``, moved by time-machine), and exposes what must happen *at* an instant as
:class:`~localcloud.contracts.Ticker` objects the runtime's clock drives.

See ``docs/localcloud-emulator.md`` for what each API does, how faithfully, and the market model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from localcloud.contracts import EventSink, Ticker
from localcloud.emulator.alarms import AlarmEvaluator
from localcloud.emulator.autoscaling import AutoScaling
from localcloud.emulator.common import Context, Handler, as_utc, utcnow
from localcloud.emulator.ec2 import CapacityBlocks
from localcloud.emulator.ec2_instances import Instances
from localcloud.emulator.hosting import Hosting
from localcloud.emulator.market import Market, MarketConfig, Timings
from localcloud.emulator.samples import LIFECYCLE_ORDER, sample_request
from localcloud.emulator.training_plans import TrainingPlans
from localcloud.faults import EMULATOR_KINDS, FaultKind, FaultRule

__all__ = ["BillableResource", "Emulator", "MarketConfig", "Timings"]

_ALIASES = {"application-autoscaling": "application-auto-scaling"}
STALE_READ_SECONDS = 60.0
"""How old a ``stale_listing`` answer is when the fault comes as a bare kind (a rule says its own)."""
STALE_READS = frozenset(
    {
        "DescribeEndpoint",
        "ListEndpoints",
        "DescribeInferenceComponent",
        "ListInferenceComponents",
        "DescribeInstances",
        "DescribeCapacityReservations",
        "DescribeCapacityBlockExtensionHistory",
    }
)
"""The reads ``stale_listing`` makes eventually consistent (other operations ignore it)."""


def _utc(value: Any) -> Any:
    """``value`` with every ``datetime`` made tz-aware UTC (wire parsers give naive UTC values)."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, dict):
        return {key: _utc(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_utc(item) for item in value]
    return value


@dataclass(frozen=True)
class BillableResource:
    """A resource that costs money while it exists, for "nothing is left" checks.

    Attributes:
        service: hyphenated service id (``sagemaker``, ``application-auto-scaling``).
        resource_type: ``endpoint``, ``endpoint-config``, ``inference-component``, ``scalable-target``,
            ``scaling-policy`` or ``instance`` (EC2).
        name: the resource name (a ``ResourceId`` for scalable targets).
        arn: its ARN.
        region: its region.
        status: its status now (``InService``, ``Deleting``...; ``Created`` for configs, ``Registered`` for
            scalable targets and policies).
    """

    service: str
    resource_type: str
    name: str
    arn: str
    region: str
    status: str


class Emulator:
    """Entry point the runtime's dispatcher calls.

    Args:
        seed: seeds the capacity market and every generated id (same seed, same calls: same answers).
        events: where AWS-originated events go (``events.put_aws_event``).
        account_id: the emulated account.
        market: market knobs (capacity, quotas, timings); defaults are realistic.

    Thread-safe: every call and every ticker step holds one re-entrant lock.
    """

    def __init__(
        self,
        *,
        seed: int = 7,
        events: EventSink,
        account_id: str = "123456789012",
        market: MarketConfig | None = None,
    ) -> None:
        self.market = Market(seed=seed, config=market or MarketConfig())
        self.ctx = Context(account_id=account_id, market=self.market, events=events)
        self.training_plans = TrainingPlans(self.ctx)
        self.hosting = Hosting(self.ctx, self.training_plans)
        self.capacity_blocks = CapacityBlocks(self.ctx)
        self.instances = Instances(self.ctx, self.capacity_blocks)
        self.alarms = AlarmEvaluator(self.ctx)
        self.autoscaling = AutoScaling(self.ctx, self.hosting, self.alarms)
        self.alarms.on_alarm = self.autoscaling.alarm_fired
        self._handlers: dict[tuple[str, str], Handler] = {}
        for service, table in (
            ("sagemaker", self.training_plans.operations()),
            ("sagemaker", self.hosting.sagemaker_operations()),
            ("sagemaker-runtime", self.hosting.runtime_operations()),
            ("ec2", self.capacity_blocks.operations()),
            ("ec2", self.instances.operations()),
            ("application-auto-scaling", self.autoscaling.operations()),
        ):
            for operation, handler in table.items():
                self._handlers[(service, operation)] = handler

    @staticmethod
    def _service(service: str) -> str:
        return _ALIASES.get(service, service)

    def handles(self, service: str, operation: str) -> bool:
        """True if the emulator answers ``operation`` of ``service`` (botocore's hyphenated service id;
        ``application-autoscaling``, the client name, is accepted too)."""
        return (self._service(service), operation) in self._handlers

    def call(
        self,
        service: str,
        operation: str,
        params: dict[str, Any],
        *,
        region: str,
        faults: Iterable[FaultKind | FaultRule] = frozenset(),
    ) -> dict[str, Any]:
        """Answer one request.

        Args:
            service: hyphenated service id.
            operation: API operation name (``CreateTrainingPlan``).
            params: the request parameters as the caller passed them (validated by botocore).
            region: the client's region.
            faults: behavioural faults drawn for this call (``insufficient_capacity``, ``stuck``,
                ``payment_failed``, ``stale_listing``), as :class:`FaultKind` values or the
                :class:`FaultRule` objects that fired (other kinds are ignored; a ``stale_listing`` rule's
                ``delay_seconds`` is how old the answer is, :data:`STALE_READ_SECONDS` for a bare kind);
                what each does per operation is in ``docs/localcloud-emulator.md``.

        Returns:
            The response as a plain dict (tz-aware ``datetime`` timestamps, ``str`` fees, ``bytes``
            blobs) that conforms to the operation's output shape.

        Raises:
            localcloud.contracts.AwsError: the error AWS would answer (code, message, HTTP status).
            KeyError: an operation the emulator does not handle (check :meth:`handles` first).
        """
        handler = self._handlers[(self._service(service), operation)]
        faults = list(faults)
        kinds = frozenset(item if isinstance(item, FaultKind) else item.kind for item in faults)
        lag = max(
            (
                item.delay_seconds if isinstance(item, FaultRule) else STALE_READ_SECONDS
                for item in faults
                if (item if isinstance(item, FaultKind) else item.kind) is FaultKind.STALE_LISTING
            ),
            default=0.0,
        )
        if operation not in STALE_READS:
            lag = 0.0
        with self.ctx.lock:
            self.ctx.read_lag_seconds = lag
            try:
                return handler(_utc(params), region, kinds & EMULATOR_KINDS)
            finally:
                self.ctx.read_lag_seconds = 0.0

    @property
    def tickers(self) -> list[Ticker]:
        """What changes by itself as virtual time passes: capacity-block events and SageMaker endpoint
        state-change events (foreground), CloudWatch alarm evaluation and Application Auto Scaling actions
        (background), in that order."""
        return [self.capacity_blocks, self.hosting, self.alarms, self.autoscaling]

    def billable_resources(self, region: str | None = None) -> list[BillableResource]:
        """Live endpoints, endpoint configs, inference components, scalable targets, scaling policies and
        EC2 instances not yet ``terminated`` (optionally of one region). Training plans and capacity blocks
        are paid upfront and cannot be deleted, so they are not listed; models cost nothing and are not
        listed either."""
        with self.ctx.lock:
            found = [
                BillableResource("sagemaker", kind, name, arn, resource_region, status)
                for kind, name, arn, resource_region, status in self.hosting.billable(utcnow())
            ]
            found.extend(
                BillableResource("application-auto-scaling", kind, name, arn, resource_region, "Registered")
                for kind, name, arn, resource_region in self.autoscaling.billable()
            )
            now = utcnow()
            found.extend(
                BillableResource(
                    "ec2",
                    "instance",
                    item.instance_id,
                    f"arn:aws:ec2:{item.region}:{self.ctx.account_id}:instance/{item.instance_id}",
                    item.region,
                    item.state(now),
                )
                for item in self.instances.billable(now)
            )
        return [item for item in found if region is None or item.region == region]

    def operations(self) -> list[tuple[str, str]]:
        """Every (service, operation) the emulator answers, in an order in which a lifecycle can call
        them (search, buy, deploy, describe, scale, invoke, release)."""
        ordered = [item for item in LIFECYCLE_ORDER if item in self._handlers]
        return ordered + [item for item in self._handlers if item not in ordered]

    def sample_request(self, service: str, operation: str) -> dict[str, Any]:
        """A valid request for ``operation`` that refers to what the emulator holds now (the latest
        offering, plan, endpoint...). For the shape-walk test; see :mod:`localcloud.emulator.samples`."""
        with self.ctx.lock:
            return sample_request(self, self._service(service), operation)
