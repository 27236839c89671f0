"""The values the ports speak (issue 15): what an adapter reads from AWS or Slack and what the logic hands
to one, independent of any client. Adapters build and take them; the logic imports them from here, never
from an adapter.

Sources: SageMaker ``DescribeTrainingPlan``/``SearchTrainingPlanOfferings`` (training plans, extensions),
EC2 ``DescribeCapacityReservations``/``DescribeInstances`` (capacity blocks, instances), CloudWatch
``PutMetricAlarm`` (alarms), Slack ``chat.postMessage`` (messages), the policy table's holds
(:mod:`capacity.adapters.policy_store`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any, Literal

from capacity import TAG_REQUEST_ID

SAGEMAKER_NAMESPACE = "AWS/SageMaker"
"""The CloudWatch namespace of SageMaker endpoint and inference component metrics."""

LIVE_INSTANCE_STATES = ("pending", "running", "stopping", "stopped", "shutting-down")
"""Instance states that still bill or may bill (``terminated`` is the only final one)."""


def tags_for(request_id: str) -> list[dict[str, str]]:
    """The tag every resource of a reservation carries (``capacity-orchestrator:request-id``)."""
    return [{"Key": TAG_REQUEST_ID, "Value": request_id}]


@dataclass(frozen=True)
class SlackMessage:
    """A message: ``text`` (mrkdwn, also the notification fallback) and optional Block Kit ``blocks``.

    ``request_id`` names the reservation it is about (so it can land in the requester's thread);
    ``channel`` and ``thread_ts`` route it (None: the notifier's default channel, no thread).
    """

    text: str
    blocks: Sequence[dict[str, Any]] = field(default_factory=tuple)
    request_id: str | None = None
    channel: str | None = None
    thread_ts: str | None = None


@dataclass(frozen=True)
class TrainingPlan:
    """``DescribeTrainingPlan``/``ListTrainingPlans`` essentials (times UTC, fee USD)."""

    arn: str
    name: str
    status: str
    status_message: str | None
    start_time: datetime | None
    end_time: datetime | None
    upfront_fee_usd: Decimal | None
    total_instance_count: int | None
    instance_type: str | None
    in_use_instance_count: int | None = None
    """``InUseInstanceCount``: the plan's instances in use now (None when AWS does not say)."""
    target_resources: tuple[str, ...] = ()
    """``TargetResources``: what the plan's capacity serves (``endpoint``, ``training-job``...)."""


@dataclass(frozen=True)
class Extension:
    """An extension offering or an extension bought, either platform (times UTC, fee USD).

    ``status``: ``offered`` (an offering), ``pending`` (payment processing), ``paid`` or ``failed``.
    """

    offering_id: str
    start_time: datetime
    end_time: datetime
    duration_hours: int
    upfront_fee_usd: Decimal
    availability_zone: str | None
    status: str


@dataclass(frozen=True)
class CapacityReservation:
    """``DescribeCapacityReservations`` essentials of one capacity block's reservation (times UTC).

    ``state``: ``payment-pending``, ``payment-failed``, ``scheduled``, ``active``, ``expired``,
    ``cancelled``, ``failed``, ``unavailable``... (botocore ``CapacityReservationState``).
    """

    reservation_id: str
    arn: str
    state: str
    instance_type: str
    availability_zone: str
    total_instance_count: int
    available_instance_count: int
    start_time: datetime | None
    end_time: datetime | None
    tags: Mapping[str, str]


@dataclass(frozen=True)
class Instance:
    """``DescribeInstances`` essentials: id, state name, type, zone and the capacity reservation it is in."""

    instance_id: str
    state: str
    instance_type: str
    availability_zone: str | None
    capacity_reservation_id: str | None


@dataclass(frozen=True)
class AlarmSpec:
    """One metric alarm as ``PutMetricAlarm`` takes it.

    ``period`` in seconds; ``comparison`` a CloudWatch ``ComparisonOperator``; ``treat_missing`` a
    ``TreatMissingData`` value; ``tags`` ``[{"Key", "Value"}]``.
    """

    name: str
    description: str
    metric_name: str
    dimensions: Mapping[str, str]
    statistic: str
    period: int
    evaluation_periods: int
    threshold: float
    comparison: str
    treat_missing: str
    tags: Sequence[Mapping[str, str]]
    namespace: str = SAGEMAKER_NAMESPACE


Limit = Literal["team", "account", "quota", "hold"]
"""Which condition refused a hold change: the team's month, the account's month, the quota, or the hold
itself (changed by someone else meanwhile)."""


class HoldRefused(Exception):  # noqa: N818 - a refusal, not an error of ours
    """A hold change was refused by the condition on ``limit`` (nothing was written)."""

    def __init__(self, limit: Limit) -> None:
        self.limit = limit
        super().__init__(f"refused by the {limit} limit")


@dataclass(frozen=True)
class Hold:
    """One purchase's hold: ``amount_usd`` of ``team``'s ``month`` and ``instances`` of its ``family``."""

    key: str
    team: str
    month: str
    amount_usd: Decimal
    family: str
    instances: int
    money_returned: bool
    quota_returned: bool


@dataclass(frozen=True)
class Rooms:
    """The most each counter may hold *before* a change for it to pass (USD; instances). None: no limit."""

    team_usd: Decimal
    account_usd: Decimal | None
    quota_instances: int | None
