"""SageMaker training plans: ``SearchTrainingPlanOfferings``, ``CreateTrainingPlan``,
``DescribeTrainingPlan``, ``ListTrainingPlans`` (SageMaker API reference, 2017-07-24 model of botocore
1.44.5; "Reserve capacity with training plans" in the SageMaker developer guide).

Over 400 lines: one service's rules (offerings, purchases, states, extensions) over one store.

Rules enforced, with the error AWS sends:

* ``InstanceType`` must be one of the model's ``ReservedCapacityInstanceType`` values
  (``ValidationException``, AWS's enum-constraint message); G-type and other inference types are not.
* ``InstanceCount`` must be 1, 2, 4, 8, 16, 32 or 64 (``ValidationException``); more than the account's
  quota left answers ``ResourceLimitExceeded`` (search and purchase).
* ``TargetResources`` names exactly one pool (``endpoint``, ``training-job``, ``hyperpod-cluster``,
  ``studio-apps``); pools never share capacity.
* Durations are whole days, 1 to 182, and the search matches the duration exactly: any other
  ``DurationHours`` (36 h, 12 h, 183 days) finds nothing (an empty list, not an error).
* An offering id is valid for ``MarketConfig.offering_ttl`` (30 minutes) after the search that returned
  it, once, and while its capacity is free; otherwise ``CreateTrainingPlan`` answers
  ``ValidationException``.
* ``CreateTrainingPlan`` with a name that exists answers ``ResourceInUse``; an unknown plan answers
  ``ResourceNotFound``.

Lifecycle (virtual time): ``Pending`` for ``Timings.plan_pending`` after purchase, ``Scheduled`` until
``StartTime``, ``Active`` until ``EndTime``, then ``Expired``. Faults: ``insufficient_capacity`` on
``SearchTrainingPlanOfferings`` returns no offerings; on ``CreateTrainingPlan`` the plan is created and goes
from ``Pending`` to ``Failed`` (capacity returned, ``StatusMessage`` says why); ``stuck`` on
``CreateTrainingPlan`` leaves the plan ``Pending`` forever.

Extensions (:mod:`localcloud.emulator.extensions` for the rules both kinds share):
``SearchTrainingPlanOfferings(TrainingPlanArn=...)`` answers ``TrainingPlanExtensionOfferings`` (one offering
in the plan's zone starting at its end, ``DurationHours`` rounded up to whole days, default 24; none when the
capacity is taken or under ``insufficient_capacity``); no other search parameter may come with the ARN
(``ValidationException``). ``ExtendTrainingPlan`` buys one (``ResourceNotFound`` for an unknown id,
``ValidationException`` for a stale one: expired, bought, or made stale by another extension); the
extension is ``Pending`` until paid, and the plan's ``EndTime``/``DurationHours`` (and when it expires)
move only then; ``insufficient_capacity`` on it fails the payment like ``payment_failed``.
``DescribeTrainingPlanExtensionHistory`` lists them, oldest first (``PaymentStatus`` ``Pending``,
``Completed`` or ``Failed``). The plan's ``UpfrontFee`` stays the purchase's; each extension has its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import AwsError
from localcloud.emulator import extensions as ext
from localcloud.emulator.common import (
    NEVER,
    Context,
    Handler,
    Params,
    Response,
    Timeline,
    dict_to_tags,
    paginate,
    sort_items,
    tags_to_dict,
    utcnow,
    validation,
)
from localcloud.emulator.instances import availability_zone_id
from localcloud.emulator.market import Offering
from localcloud.emulator.regions import require_known_region
from localcloud.emulator.shapes import check_enum
from localcloud.faults import FaultKind

ALLOWED_INSTANCE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
MAX_DAYS = 182
OFFERINGS_PER_SEARCH = 5
LIVE_STATUSES = frozenset({"Pending", "Scheduled", "Active"})


def quota_error(quota_name: str, limit: int, used: int, delta: int) -> AwsError:
    """SageMaker's ``ResourceLimitExceeded`` for an account-level service quota."""
    return AwsError(
        "ResourceLimitExceeded",
        f"The account-level service limit '{quota_name}' is {limit} Instances, with current utilization of "
        f"{used} Instances and a request delta of {delta} Instances. Please use AWS Service Quotas to "
        "request "
        "an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request "
        "an increase for this quota.",
    )


@dataclass
class TrainingPlan:
    """A purchased plan. ``offering`` holds what was bought (type, count, zone, start, end, fee)."""

    name: str
    arn: str
    region: str
    target: str
    offering: Offering
    reserved_capacity_arn: str
    created: datetime
    timeline: Timeline
    tags: dict[str, str] = field(default_factory=dict)
    status_message: str | None = None
    extensions: list[ext.Extension] = field(default_factory=list)

    @property
    def instance_type(self) -> str:
        """The ``ml.`` instance type."""
        return self.offering.instance_type

    @property
    def total(self) -> int:
        """Instances reserved."""
        return self.offering.count

    def end_at(self, now: datetime) -> datetime:
        """``EndTime`` at ``now``: the purchase's end plus the extensions paid by then."""
        return ext.end_at(self.offering.end, self.extensions, now)

    def status(self, now: datetime) -> str:
        """``Pending``, ``Scheduled``, ``Active``, ``Expired`` or ``Failed`` at ``now`` (a paid extension
        keeps it ``Active`` until the new end)."""
        status = self.timeline.at(now)
        if status in ("Active", "Expired") and self.timeline.phases[-1][1] == "Expired":
            return "Expired" if now >= self.end_at(now) else "Active"
        return status


class TrainingPlans:
    """The training-plan operations and the plans bought, per region.

    ``usage(plan_arn, now)`` (wired by the emulator to the hosting state) tells how many of a plan's
    instances live endpoints hold.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.plans: dict[tuple[str, str], TrainingPlan] = {}
        self.usage: Callable[[str, datetime], int] = lambda _arn, _now: 0
        self._extension_plans: dict[str, str] = {}  # extension offering id -> plan ARN

    def operations(self) -> dict[str, Handler]:
        """Operation name -> handler."""
        return {
            "SearchTrainingPlanOfferings": self.search_offerings,
            "CreateTrainingPlan": self.create_plan,
            "DescribeTrainingPlan": self.describe_plan,
            "ListTrainingPlans": self.list_plans,
            "ExtendTrainingPlan": self.extend_plan,
            "DescribeTrainingPlanExtensionHistory": self.extension_history,
        }

    # -- look-ups used by hosting ----------------------------------------------------------------

    def by_arn(self, arn: str) -> TrainingPlan | None:
        """The plan with this ARN (any region), or None."""
        return next((plan for plan in self.plans.values() if plan.arn == arn), None)

    def get(self, region: str, name_or_arn: str) -> TrainingPlan | None:
        """A plan of ``region`` by name or ARN."""
        name = name_or_arn.rsplit("/", 1)[-1] if name_or_arn.startswith("arn:") else name_or_arn
        for (plan_region, plan_name), plan in self.plans.items():
            if plan_region == region and plan_name.lower() == name.lower():
                return plan
        return None

    def utilization(self, region: str, instance_type: str, now: datetime) -> int:
        """Instances of live plans (``Pending``, ``Scheduled``, ``Active``) of a type in a region."""
        return sum(
            plan.total
            for (plan_region, _name), plan in self.plans.items()
            if plan_region == region
            and plan.instance_type == instance_type
            and plan.status(now) in LIVE_STATUSES
        )

    def _check_quota(self, region: str, instance_type: str, count: int, now: datetime) -> None:
        limit = self.ctx.market.training_plan_quota(region, instance_type)
        used = self.utilization(region, instance_type, now)
        if used + count > limit:
            raise quota_error(f"{instance_type} for training plan usage", limit, used, count)

    # -- operations ------------------------------------------------------------------------------

    def search_offerings(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``SearchTrainingPlanOfferings``: up to five offerings, earliest start first (the first is the best
        match). Raises ``ValidationException`` / ``ResourceLimitExceeded`` as described in the module."""
        require_known_region(region)
        if params.get("TrainingPlanArn"):
            return self._extension_offerings(params, region, faults)
        instance_type = params.get("InstanceType")
        if instance_type is None:
            raise validation("InstanceType is required (UltraServer offerings are not emulated).")
        check_enum("sagemaker", "ReservedCapacityInstanceType", instance_type, "instanceType")
        target = self._single_target(params.get("TargetResources"))
        count = params.get("InstanceCount")
        if count is None:
            raise validation("InstanceCount is required.")
        if count not in ALLOWED_INSTANCE_COUNTS:
            raise validation(
                f"InstanceCount {count} is not supported. Supported instance counts: "
                f"{', '.join(map(str, ALLOWED_INSTANCE_COUNTS))}."
            )
        now = utcnow()
        self._check_quota(region, instance_type, count, now)
        start_after: datetime | None = params.get("StartTimeAfter")
        end_before: datetime | None = params.get("EndTimeBefore")
        hours = params.get("DurationHours")
        if hours is None:
            window_end = end_before or now + self.ctx.market.config.max_lead
            hours = min(MAX_DAYS, int((window_end - max(start_after or now, now)) / timedelta(days=1))) * 24
        if hours % 24 or not 1 <= hours // 24 <= MAX_DAYS:
            return {"TrainingPlanOfferings": []}  # exact-duration match: no whole-day offering has it
        if FaultKind.INSUFFICIENT_CAPACITY in faults or region not in self.ctx.market.regions():
            return {"TrainingPlanOfferings": []}
        market = f"sagemaker:{target}"
        slots = self.ctx.market.slots(
            market,
            region,
            instance_type,
            count=count,
            days=hours // 24,
            earliest_start=start_after or now,
            latest_end=end_before,
            now=now,
        )
        chosen: list[tuple[datetime, str]] = []
        for start, zone in slots:
            if all(start != picked for picked, _zone in chosen):
                chosen.append((start, zone))
            if len(chosen) == OFFERINGS_PER_SEARCH:
                break
        offerings = []
        for start, zone in chosen:
            offering = self.ctx.market.issue(
                prefix="tpo-",
                id_length=40,
                market=market,
                region=region,
                instance_type=instance_type,
                count=count,
                zone=zone,
                start=start,
                days=hours // 24,
                hourly_usd=self.ctx.market.training_plan_usd_per_hour(region, instance_type, start),
                now=now,
                requested_start_after=start_after,
                requested_end_before=end_before,
            )
            offerings.append(self._offering_shape(offering, target))
        return {"TrainingPlanOfferings": offerings}

    @staticmethod
    def _single_target(targets: list[str] | None) -> str:
        if not targets:
            raise validation("TargetResources is required: one of training-job, hyperpod-cluster, endpoint.")
        if len(set(targets)) != 1:
            raise validation(
                "Specify exactly one target resource in TargetResources; each is a separate pool."
            )
        check_enum("sagemaker", "SageMakerResourceName", targets[0], "targetResources.1.member")
        return targets[0]

    @staticmethod
    def _offering_shape(offering: Offering, target: str) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "TrainingPlanOfferingId": offering.offering_id,
            "TargetResources": [target],
            "DurationHours": offering.hours,
            "DurationMinutes": 0,
            "UpfrontFee": f"{offering.fee_usd:.2f}",
            "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [
                {
                    "ReservedCapacityType": "Instance",
                    "InstanceType": offering.instance_type,
                    "InstanceCount": offering.count,
                    "AvailabilityZone": offering.zone,
                    "DurationHours": offering.hours,
                    "DurationMinutes": 0,
                    "StartTime": offering.start,
                    "EndTime": offering.end,
                }
            ],
        }
        if offering.requested_start_after is not None:
            shaped["RequestedStartTimeAfter"] = offering.requested_start_after
        if offering.requested_end_before is not None:
            shaped["RequestedEndTimeBefore"] = offering.requested_end_before
        return shaped

    def create_plan(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``CreateTrainingPlan``: buy an offering. Raises ``ResourceInUse`` (name taken),
        ``ValidationException`` (offering unknown, expired, bought or gone), ``ResourceLimitExceeded``."""
        require_known_region(region)
        name: str = params["TrainingPlanName"]
        now = utcnow()
        existing = self.get(region, name)
        if existing is not None:
            raise AwsError("ResourceInUse", f"Training plan {existing.arn} already exists.")
        offering_id: str = params["TrainingPlanOfferingId"]
        offering = self.ctx.market.offering(offering_id)
        if (
            offering is None
            or not offering.market.startswith("sagemaker:")
            or not self.ctx.market.usable(offering, region, now)
        ):
            raise validation(
                f"The training plan offering {offering_id} is not valid: it has expired or is no longer "
                "available. Search for training plan offerings again and use a new offering ID."
            )
        self._check_quota(region, offering.instance_type, offering.count, now)
        self.ctx.market.take(offering)
        offering.used = True
        timings = self.ctx.market.config.timings
        pending_ends = now + timings.plan_pending
        timeline = Timeline([(now, "Pending")])
        message = None
        if FaultKind.STUCK in faults:
            timeline.add(NEVER, "Scheduled")
        elif FaultKind.INSUFFICIENT_CAPACITY in faults:
            timeline.add(pending_ends, "Failed")
            message = "Training plan creation failed: insufficient capacity to fulfil the reservation."
            self.ctx.market.give_back(offering)
        else:
            timeline.add(pending_ends, "Scheduled")
            timeline.add(max(offering.start, pending_ends), "Active")
            timeline.add(max(offering.end, pending_ends), "Expired")
        arn = f"arn:aws:sagemaker:{region}:{self.ctx.account_id}:training-plan/{name.lower()}"
        plan = TrainingPlan(
            name=name,
            arn=arn,
            region=region,
            target=offering.market.split(":", 1)[1],
            offering=offering,
            reserved_capacity_arn=(
                f"arn:aws:sagemaker:{region}:{self.ctx.account_id}:reserved-capacity/"
                f"{self.ctx.new_id('reserved-capacity', name, length=20)}"
            ),
            created=now,
            timeline=timeline,
            tags=tags_to_dict(params.get("Tags")),
            status_message=message,
        )
        self.plans[(region, name)] = plan
        return {"TrainingPlanArn": arn}

    def _counts(self, plan: TrainingPlan, now: datetime) -> tuple[int, int]:
        """(available, in use) instances of a plan at ``now``."""
        status = plan.status(now)
        if status == "Active":
            in_use = min(plan.total, self.usage(plan.arn, now))
            return plan.total - in_use, in_use
        if status in ("Pending", "Scheduled"):
            return plan.total, 0
        return 0, 0

    def _summary(self, plan: TrainingPlan, now: datetime, *, detail: bool) -> dict[str, Any]:
        status = plan.status(now)
        available, in_use = self._counts(plan, now)
        offering = plan.offering
        end = plan.end_at(now)
        hours = int((end - offering.start).total_seconds() // 3600)
        shaped: dict[str, Any] = {
            "TrainingPlanArn": plan.arn,
            "TrainingPlanName": plan.name,
            "Status": status,
            "DurationHours": hours,
            "DurationMinutes": 0,
            "StartTime": offering.start,
            "EndTime": end,
            "UpfrontFee": f"{offering.fee_usd:.2f}",
            "CurrencyCode": "USD",
            "TotalInstanceCount": plan.total,
            "AvailableInstanceCount": available,
            "InUseInstanceCount": in_use,
            "TargetResources": [plan.target],
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": plan.reserved_capacity_arn,
                    "ReservedCapacityType": "Instance",
                    "InstanceType": plan.instance_type,
                    "TotalInstanceCount": plan.total,
                    "Status": status,
                    "AvailabilityZone": offering.zone,
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "StartTime": offering.start,
                    "EndTime": end,
                }
            ],
        }
        if plan.status_message and status == "Failed":
            shaped["StatusMessage"] = plan.status_message
        if detail:
            shaped["UnhealthyInstanceCount"] = 0
        return shaped

    def describe_plan(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeTrainingPlan`` by name or ARN. Raises ``ResourceNotFound``."""
        del faults
        plan = self.get(region, params["TrainingPlanName"])
        if plan is None:
            raise AwsError("ResourceNotFound", f"Training plan {params['TrainingPlanName']} does not exist.")
        return self._summary(plan, utcnow(), detail=True)

    def list_plans(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ListTrainingPlans`` with ``Filters`` (Status), ``StartTimeAfter/Before``, sorting, pagination."""
        del faults
        now = utcnow()
        plans = [plan for (plan_region, _name), plan in self.plans.items() if plan_region == region]
        for item in params.get("Filters") or []:
            if item["Name"] == "Status":
                plans = [plan for plan in plans if plan.status(now) == item["Value"]]
        if params.get("StartTimeAfter"):
            plans = [plan for plan in plans if plan.offering.start > params["StartTimeAfter"]]
        if params.get("StartTimeBefore"):
            plans = [plan for plan in plans if plan.offering.start < params["StartTimeBefore"]]
        sort_by = params.get("SortBy", "StartTime")
        keys: dict[str, Callable[[TrainingPlan], Any]] = {
            "TrainingPlanName": lambda plan: plan.name,
            "StartTime": lambda plan: plan.offering.start,
            "Status": lambda plan: plan.status(now),
        }
        plans = sort_items(plans, keys[sort_by], params)
        page, token = paginate(plans, params)
        response: Response = {
            "TrainingPlanSummaries": [self._summary(plan, now, detail=False) for plan in page]
        }
        if token:
            response["NextToken"] = token
        return response

    # -- extensions ----------------------------------------------------------------------------------

    def _plan_of_arn(self, arn: str, region: str) -> TrainingPlan:
        plan = self.by_arn(arn)
        if plan is None or plan.region != region:
            raise AwsError("ResourceNotFound", f"Training plan {arn} does not exist.")
        return plan

    def _refusal(self, plan: TrainingPlan, days: int, now: datetime) -> str | None:
        status = plan.status(now)
        end = plan.end_at(now)
        return ext.refusal(
            status_ok=status in ("Active", "Scheduled"),
            status=status,
            extensions=plan.extensions,
            end=end,
            days=days,
            total_days=int((end - plan.offering.start) / timedelta(days=1)),
            now=now,
            what=f"Training plan {plan.arn}",
        )

    def _extension_offerings(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``SearchTrainingPlanOfferings`` with ``TrainingPlanArn``: the extension offering of the plan."""
        for key in (
            "InstanceType",
            "InstanceCount",
            "UltraServerType",
            "UltraServerCount",
            "TargetResources",
        ):
            if params.get(key) is not None:
                raise validation(
                    f"{key} cannot be combined with TrainingPlanArn: an extension keeps the plan's instances."
                )
        plan = self._plan_of_arn(params["TrainingPlanArn"], region)
        now = utcnow()
        days = max(1, -(-int(params.get("DurationHours") or 24) // 24))  # rounded up to whole days
        refused = self._refusal(plan, days, now)
        if refused:
            raise validation(refused)
        start = plan.end_at(now)
        market = f"sagemaker:{plan.target}"
        found: list[dict[str, Any]] = []
        if FaultKind.INSUFFICIENT_CAPACITY not in faults and self.ctx.market.fits(
            market,
            region,
            plan.instance_type,
            plan.offering.zone,
            start=start,
            days=days,
            count=plan.total,
            listed_at=now,
        ):
            offering = self.ctx.market.issue(
                prefix="tpeo-",
                id_length=64,
                market=market,
                region=region,
                instance_type=plan.instance_type,
                count=plan.total,
                zone=plan.offering.zone,
                start=start,
                days=days,
                hourly_usd=self.ctx.market.training_plan_usd_per_hour(region, plan.instance_type, start),
                now=now,
            )
            self._extension_plans[offering.offering_id] = plan.arn
            found.append(
                {
                    "TrainingPlanExtensionOfferingId": offering.offering_id,
                    "AvailabilityZone": offering.zone,
                    "StartDate": offering.start,
                    "EndDate": offering.end,
                    "DurationHours": offering.hours,
                    "UpfrontFee": f"{offering.fee_usd:.2f}",
                    "CurrencyCode": "USD",
                }
            )
        return {"TrainingPlanOfferings": [], "TrainingPlanExtensionOfferings": found}

    def extend_plan(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``ExtendTrainingPlan``: buy an extension offering (no client token: a second call with the same id
        is refused, the offering being bought). Raises ``ResourceNotFound`` (unknown offering) and
        ``ValidationException`` (stale offering, plan not extendable)."""
        offering_id: str = params["TrainingPlanExtensionOfferingId"]
        arn = self._extension_plans.get(offering_id)
        offering = self.ctx.market.offering(offering_id)
        if arn is None or offering is None:
            raise AwsError(
                "ResourceNotFound", f"Training plan extension offering {offering_id} does not exist."
            )
        plan = self._plan_of_arn(arn, region)
        now = utcnow()
        refused = self._refusal(plan, offering.days, now)
        if refused:
            raise validation(refused)
        if not self.ctx.market.usable(offering, region, now) or offering.start != plan.end_at(now):
            raise validation(
                f"The training plan extension offering {offering_id} is not valid: it has expired or is no "
                "longer available. Search for extension offerings again and use a new offering ID."
            )
        self.ctx.market.take(offering)
        offering.used = True
        kinds = faults | ({FaultKind.PAYMENT_FAILED} if FaultKind.INSUFFICIENT_CAPACITY in faults else set())
        extension = ext.Extension(
            offering=offering,
            purchased=now,
            payment=ext.payment(
                now,
                self.ctx.market.extension_payment_pending(
                    offering_id, self.ctx.market.config.timings.plan_pending
                ),
                plan.end_at(now),
                kinds,
            ),
        )
        if not extension.will_succeed:
            self.ctx.market.give_back(offering)
        plan.extensions.append(extension)
        return {"TrainingPlanExtensions": [self._extension_shape(plan, extension, now)]}

    @staticmethod
    def _extension_shape(plan: TrainingPlan, extension: ext.Extension, now: datetime) -> dict[str, Any]:
        offering = extension.offering
        payment = extension.status(now)
        if payment == ext.PENDING:
            status, paid = "Pending", "Pending"
        elif payment == ext.FAILED:
            status, paid = "Failed", "Failed"
        else:
            paid = "Completed"
            status = "Scheduled" if now < offering.start else "Active" if now < offering.end else "Expired"
            if plan.status(now) not in ("Active", "Scheduled", "Expired"):
                status = plan.status(now)
        return {
            "TrainingPlanExtensionOfferingId": offering.offering_id,
            "ExtendedAt": extension.purchased,
            "StartDate": offering.start,
            "EndDate": offering.end,
            "Status": status,
            "PaymentStatus": paid,
            "AvailabilityZone": offering.zone,
            "AvailabilityZoneId": availability_zone_id(offering.zone),
            "DurationHours": offering.hours,
            "UpfrontFee": f"{offering.fee_usd:.2f}",
            "CurrencyCode": "USD",
        }

    def extension_history(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeTrainingPlanExtensionHistory``: the plan's extensions, oldest first, paginated.
        Raises ``ResourceNotFound``."""
        del faults
        plan = self._plan_of_arn(params["TrainingPlanArn"], region)
        now = utcnow()
        page, token = paginate(plan.extensions, params)
        response: Response = {
            "TrainingPlanExtensions": [self._extension_shape(plan, item, now) for item in page]
        }
        if token:
            response["NextToken"] = token
        return response

    def tags_of(self, arn: str) -> list[dict[str, str]] | None:
        """The tags of a plan by ARN (None if no such plan)."""
        plan = self.by_arn(arn)
        return None if plan is None else dict_to_tags(plan.tags)
