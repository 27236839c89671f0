"""EC2 instances: ``RunInstances``, ``DescribeInstances``, ``TerminateInstances`` (EC2 API reference), on
demand, spot, or into a capacity block the emulator sold (moto cannot honour a capacity block target: it
does not know the emulator's reservations).

Rules enforced (EC2 error codes):

* ``MinCount``/``MaxCount`` 1 <= min <= max (``InvalidParameterValue``); ``ImageId`` and ``InstanceType``
  from the request or its launch template (``MissingParameter``). ``LaunchTemplate`` (id or name, version
  number, ``$Latest``, ``$Default``) is read from moto's EC2 backend, where ``CreateLaunchTemplate`` put it
  (``InvalidLaunchTemplateId.NotFound`` / ``InvalidLaunchTemplateName.NotFoundException``).
* ``ClientToken``: the same token in the same region answers the first launch again (idempotent).
* ``InstanceMarketOptions.MarketType = capacity-block`` needs ``CapacityReservationSpecification.
  CapacityReservationTarget.CapacityReservationId`` of a capacity block in this region
  (``InvalidCapacityReservationId.NotFound``), ``active`` (else ``InvalidParameterValue``: a block serves
  only between its start and end), of the same instance type, with room for ``MinCount`` more instances
  (``ReservationCapacityExceeded``). A capacity block target without that market type is
  ``InvalidParameterCombination``. Instances launched into a block start terminating when AWS reclaims
  it, 30 minutes before its end (``Capacity Block Expiration Warning`` + 10 minutes, AWS_FACTS.md).
* On demand and spot: the ``insufficient_capacity`` fault answers ``InsufficientInstanceCapacity`` (HTTP
  500, nothing launched); ``MarketConfig.on_demand_capacity`` says how many instances of a type a region
  can run on demand (default: unlimited; beyond it ``InsufficientInstanceCapacity``).

Lifecycle (virtual time): ``pending`` for 30 s, ``running``; ``TerminateInstances`` -> ``shutting-down``
for 60 s -> ``terminated`` (still listed, as on AWS, but no longer billed).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from localcloud.contracts import AwsError
from localcloud.emulator.common import Context, Params, Response, Timeline, dict_to_tags, paginate, utcnow
from localcloud.emulator.ec2 import CapacityBlocks, Reservation, invalid
from localcloud.emulator.market import on_demand_limit
from localcloud.emulator.regions import require_known_region
from localcloud.faults import FaultKind

BOOT = timedelta(seconds=30)
SHUTDOWN = timedelta(seconds=60)
RECLAIM_BEFORE_END = timedelta(minutes=30)
STATE_CODES = {
    "pending": 0,
    "running": 16,
    "shutting-down": 32,
    "terminated": 48,
    "stopping": 64,
    "stopped": 80,
}
_FILTERS = frozenset({"instance-id", "instance-state-name", "instance-type", "availability-zone", "tag-key"})


@dataclass
class Ec2Instance:
    """One instance the emulator launched."""

    instance_id: str
    region: str
    zone: str
    instance_type: str
    image_id: str
    launched: datetime
    timeline: Timeline
    reservation_group: str
    client_token: str | None
    lifecycle: str | None = None
    capacity_reservation_id: str | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def state(self, now: datetime) -> str:
        """``pending``, ``running``, ``shutting-down`` or ``terminated`` at ``now``."""
        return self.timeline.at(now)

    def reclaim_at(self, reclaim: datetime, now: datetime) -> None:
        """Move a capacity block's reclaim (the block was extended); one already stopping keeps going."""
        if self.state(now) in ("shutting-down", "terminated"):
            return
        self.timeline.phases = [
            p for p in self.timeline.phases if p[1] not in ("shutting-down", "terminated")
        ]
        self.timeline.add(reclaim, "shutting-down")
        self.timeline.add(reclaim + SHUTDOWN, "terminated")

    def terminate(self, now: datetime) -> None:
        """Start terminating now (later phases, such as a block's reclaim, are dropped)."""
        if self.state(now) in ("shutting-down", "terminated"):
            return
        self.timeline.phases = [p for p in self.timeline.phases if p[0] <= now]
        self.timeline.add(now, "shutting-down")
        self.timeline.add(now + SHUTDOWN, "terminated")


class Instances:
    """The instance operations and the instances launched (for "nothing left" checks)."""

    def __init__(self, ctx: Context, blocks: CapacityBlocks) -> None:
        self.ctx = ctx
        self.blocks = blocks
        self.instances: dict[str, Ec2Instance] = {}
        blocks.on_extended = self.block_extended

    def block_extended(self, block: Reservation) -> None:
        """A block was extended: its instances are reclaimed before its new end (the payment completes at
        least 35 minutes before the old end, before the old reclaim: moving it now changes nothing
        earlier)."""
        now = utcnow()
        for instance in self.instances.values():
            if instance.capacity_reservation_id == block.reservation_id:
                instance.reclaim_at(block.final_end() - RECLAIM_BEFORE_END, now)

    def operations(self) -> dict[str, Any]:
        """Operation name -> handler."""
        return {
            "RunInstances": self.run_instances,
            "DescribeInstances": self.describe_instances,
            "TerminateInstances": self.terminate_instances,
        }

    # -- RunInstances --------------------------------------------------------------------------------

    def _template_data(self, spec: dict[str, Any], region: str) -> dict[str, Any]:
        # Imported here: moto's EC2 models load every region's instance types (~1 s), needed only by EC2 runs.
        from moto.ec2.models import ec2_backends  # noqa: PLC0415

        backend = ec2_backends[self.ctx.account_id][region]
        template_id = spec.get("LaunchTemplateId")
        name = spec.get("LaunchTemplateName")
        if template_id is None and name is not None:
            template_id = backend.launch_template_name_to_ids.get(name)
            if template_id is None:
                raise AwsError(
                    "InvalidLaunchTemplateName.NotFoundException",
                    f"The specified launch template, with template name {name}, does not exist.",
                )
        if template_id is None or template_id not in backend.launch_templates:
            raise AwsError(
                "InvalidLaunchTemplateId.NotFound",
                f"The specified launch template, with template ID {template_id}, does not exist.",
            )
        template = backend.launch_templates[template_id]
        try:
            version = template.get_version(spec.get("Version") or "$Default")
        except Exception as exc:
            raise AwsError(
                "InvalidLaunchTemplateId.VersionNotFound",
                f"Could not find launch template version {spec.get('Version')} of {template_id}.",
            ) from exc
        return dict(version.data)

    def run_instances(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``RunInstances``: launch ``MinCount`` instances (all or nothing) and answer the reservation."""
        require_known_region(region)
        if params.get("DryRun"):
            raise AwsError("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
        now = utcnow()
        token = params.get("ClientToken")
        if token:
            earlier = [i for i in self.instances.values() if i.client_token == token and i.region == region]
            if earlier:
                return self._reservation_shape(earlier, now)
        data = self._template_data(params["LaunchTemplate"], region) if params.get("LaunchTemplate") else {}
        instance_type = params.get("InstanceType") or data.get("InstanceType")
        image_id = params.get("ImageId") or data.get("ImageId")
        if not instance_type:
            raise AwsError("MissingParameter", "The request must contain the parameter InstanceType.")
        if not image_id:
            raise AwsError("MissingParameter", "The request must contain the parameter ImageId.")
        low, high = int(params["MinCount"]), int(params["MaxCount"])
        if not 1 <= low <= high:
            raise invalid(f"MinCount {low} and MaxCount {high} must satisfy 1 <= MinCount <= MaxCount.")
        market = (params.get("InstanceMarketOptions") or {}).get("MarketType") or "on-demand"
        target = (
            (params.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
        ).get("CapacityReservationId")
        zone, reclaim, lifecycle = f"{region}a", None, None
        if market == "capacity-block":
            zone, reclaim = self._check_block(target, region, instance_type, low, now)
            lifecycle = "capacity-block"
        else:
            if target and target in self.blocks.reservations:
                raise AwsError(
                    "InvalidParameterCombination",
                    "Instances can be launched into a Capacity Block only with InstanceMarketOptions "
                    "MarketType capacity-block.",
                )
            if FaultKind.INSUFFICIENT_CAPACITY in faults or not self._on_demand_room(
                region, instance_type, low, now
            ):
                raise AwsError(
                    "InsufficientInstanceCapacity",
                    f"We currently do not have sufficient {instance_type} capacity in the Availability Zone "
                    "you requested. Our system will be working on provisioning additional capacity.",
                    500,
                )
            lifecycle = "spot" if market == "spot" else None
        tags: dict[str, str] = {
            tag["Key"]: tag.get("Value", "")
            for spec in (params.get("TagSpecifications") or data.get("TagSpecifications") or [])
            if spec.get("ResourceType") == "instance"
            for tag in spec.get("Tags") or []
        }
        group = f"r-{self.ctx.new_id('ec2-reservation', region)}"
        launched: list[Ec2Instance] = []
        for _ in range(low):
            timeline = Timeline([(now, "pending")])
            timeline.add(now + BOOT, "running")
            if reclaim is not None:
                timeline.add(reclaim, "shutting-down")
                timeline.add(reclaim + SHUTDOWN, "terminated")
            instance = Ec2Instance(
                instance_id=f"i-{self.ctx.new_id('instance', region)}",
                region=region,
                zone=zone,
                instance_type=instance_type,
                image_id=image_id,
                launched=now,
                timeline=timeline,
                reservation_group=group,
                client_token=token,
                lifecycle=lifecycle,
                capacity_reservation_id=target if market == "capacity-block" else None,
                tags=tags,
            )
            self.instances[instance.instance_id] = instance
            launched.append(instance)
        return self._reservation_shape(launched, now)

    def _check_block(
        self, target: str | None, region: str, instance_type: str, count: int, now: datetime
    ) -> tuple[str, datetime]:
        if not target:
            raise AwsError(
                "MissingParameter",
                "MarketType capacity-block requires CapacityReservationSpecification."
                "CapacityReservationTarget.CapacityReservationId.",
            )
        block = self.blocks.reservations.get(target)
        if block is None or block.region != region:
            raise AwsError(
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{target}' does not exist.",
            )
        state = block.state(now)
        if state != "active":
            raise invalid(
                f"The Capacity Block {target} is {state}: instances can be launched into it only while it is "
                "active."
            )
        if block.offering.instance_type != instance_type:
            raise invalid(
                f"The instance type {instance_type} does not match the Capacity Block's instance type "
                f"{block.offering.instance_type}."
            )
        used = sum(
            1
            for i in self.instances.values()
            if i.capacity_reservation_id == target and i.state(now) not in ("terminated",)
        )
        if used + count > block.offering.count:
            raise AwsError(
                "ReservationCapacityExceeded",
                f"The requested {count} instances exceed the {block.offering.count - used} available in "
                f"capacity reservation {target}.",
            )
        return block.offering.zone, block.final_end() - RECLAIM_BEFORE_END

    def _on_demand_room(self, region: str, instance_type: str, count: int, now: datetime) -> bool:
        limit = on_demand_limit(self.ctx.market.config, region, instance_type)
        if limit is None:
            return True
        used = sum(
            1
            for i in self.instances.values()
            if i.region == region
            and i.instance_type == instance_type
            and i.capacity_reservation_id is None
            and i.state(now) != "terminated"
        )
        return used + count <= limit

    # -- shapes ---------------------------------------------------------------------------------------

    def _instance_shape(self, item: Ec2Instance, now: datetime) -> dict[str, Any]:
        state = item.state(now)
        shaped: dict[str, Any] = {
            "InstanceId": item.instance_id,
            "ImageId": item.image_id,
            "State": {"Code": STATE_CODES[state], "Name": state},
            "InstanceType": item.instance_type,
            "LaunchTime": item.launched,
            "Placement": {"AvailabilityZone": item.zone, "Tenancy": "default"},
            "Tags": dict_to_tags(item.tags),
            "AmiLaunchIndex": 0,
        }
        if item.client_token:
            shaped["ClientToken"] = item.client_token
        if item.lifecycle:
            shaped["InstanceLifecycle"] = item.lifecycle
        if item.capacity_reservation_id:
            shaped["CapacityReservationId"] = item.capacity_reservation_id
            shaped["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": item.capacity_reservation_id}
            }
        return shaped

    def _reservation_shape(self, items: list[Ec2Instance], now: datetime) -> dict[str, Any]:
        return {
            "ReservationId": items[0].reservation_group,
            "OwnerId": self.ctx.account_id,
            "Groups": [],
            "Instances": [self._instance_shape(item, now) for item in items],
        }

    # -- DescribeInstances / TerminateInstances --------------------------------------------------------

    def _matches(self, item: Ec2Instance, name: str, values: list[str], now: datetime) -> bool:
        if name.startswith("tag:"):
            actual = item.tags.get(name[4:])
            return actual is not None and any(fnmatch.fnmatchcase(actual, v) for v in values)
        if name == "tag-key":
            return any(fnmatch.fnmatchcase(key, v) for key in item.tags for v in values)
        fields = {
            "instance-id": item.instance_id,
            "instance-state-name": item.state(now),
            "instance-type": item.instance_type,
            "availability-zone": item.zone,
        }
        return any(fnmatch.fnmatchcase(fields[name], v) for v in values)

    def describe_instances(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``DescribeInstances`` by ``InstanceIds`` and ``Filters`` (``tag:<key>``, ``tag-key``,
        ``instance-id``, ``instance-state-name``, ``instance-type``, ``availability-zone``), paginated; one
        reservation per launch. Raises ``InvalidInstanceID.NotFound`` and ``InvalidParameterValue``.

        Under ``stale_listing`` the answer is as of ``read_lag_seconds`` ago (EC2's eventual consistency: an
        instance just launched is not listed yet, nor found by id; one just terminated still runs)."""
        del faults
        lag = self.ctx.read_lag_seconds
        now = utcnow() - timedelta(seconds=lag) if lag > 0 else utcnow()
        found = [item for item in self.instances.values() if item.region == region and item.launched <= now]
        ids = params.get("InstanceIds") or []
        missing = [wanted for wanted in ids if not any(item.instance_id == wanted for item in found)]
        if missing:
            raise AwsError(
                "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(missing)}' do not exist"
            )
        if ids:
            found = [item for item in found if item.instance_id in ids]
        for spec in params.get("Filters") or []:
            if not spec["Name"].startswith("tag:") and spec["Name"] not in _FILTERS:
                raise invalid(f"The filter '{spec['Name']}' is invalid")
            found = [
                item for item in found if self._matches(item, spec["Name"], spec.get("Values") or [], now)
            ]
        page, token = paginate(found, params, default_max=1000)
        groups: dict[str, list[Ec2Instance]] = {}
        for item in page:
            groups.setdefault(item.reservation_group, []).append(item)
        response: Response = {
            "Reservations": [self._reservation_shape(items, now) for items in groups.values()]
        }
        if token:
            response["NextToken"] = token
        return response

    def terminate_instances(self, params: Params, region: str, faults: frozenset[FaultKind]) -> Response:
        """``TerminateInstances``: ``shutting-down`` now, ``terminated`` 60 s later (idempotent)."""
        del faults
        if params.get("DryRun"):
            raise AwsError("DryRunOperation", "Request would have succeeded, but DryRun flag is set.", 412)
        now = utcnow()
        ids = params["InstanceIds"]
        missing = [i for i in ids if i not in self.instances or self.instances[i].region != region]
        if missing:
            raise AwsError(
                "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(missing)}' do not exist"
            )
        changes = []
        for instance_id in ids:
            item = self.instances[instance_id]
            before = item.state(now)
            item.terminate(now)
            after = item.state(now)
            changes.append(
                {
                    "InstanceId": instance_id,
                    "PreviousState": {"Code": STATE_CODES[before], "Name": before},
                    "CurrentState": {"Code": STATE_CODES[after], "Name": after},
                }
            )
        return {"TerminatingInstances": changes}

    def billable(self, now: datetime) -> list[Ec2Instance]:
        """Instances not ``terminated`` at ``now`` (they bill, or would on AWS)."""
        return [item for item in self.instances.values() if item.state(now) != "terminated"]
