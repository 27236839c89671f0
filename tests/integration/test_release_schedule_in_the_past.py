"""The release schedule created with a purchase is never lost to an ``at()`` that went by (issue 12 item 6):
Scheduler refuses a one-time schedule whose time is not in the future, and a CreateSchedule that arrives
late (90 s of latency on a schedule asked for a minute ahead) meets that refusal. The adapter asks again
from the new now; on the old adapter the purchase step failed with the ValidationException and the money
spent had no release schedule."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from capacity.adapters.scheduler import ReleaseScheduler

from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import make_cloud

pytestmark = pytest.mark.integration


def test_a_release_schedule_that_arrives_after_its_time_is_asked_again_and_fires() -> None:
    late = FaultRule(
        service="scheduler", operation="CreateSchedule", kind=FaultKind.LATENCY, latency_seconds=90, times=1
    )
    with make_cloud(faults=FaultInjector([late], seed=1)) as cloud:
        scheduler = ReleaseScheduler(
            cloud.client("scheduler"),
            group=cloud.stack.physical_id("ReleaseScheduleGroup"),
            target_arn=cloud.stack.arn("EventBus"),
            role_arn=cloud.stack.arn("SchedulerRole"),
        )
        asked_at = cloud.now()

        created = scheduler.schedule_release(
            name="co-late-release", at=asked_at, request_id="late", reason="reservation-end"
        )
        cloud.run(until=asked_at + timedelta(minutes=5))

        assert created is True
        calls = [c for c in cloud.dispatcher.calls if c.operation == "CreateSchedule"]
        # Refused (its at() had gone by on arrival; botocore may also retry the slow call), then created.
        assert len(calls) >= 2
        fired = [f for f in cloud.scheduler.firings if f.name.endswith("/co-late-release")]
        assert len(fired) == 1
        assert fired[0].at > asked_at + timedelta(seconds=60)  # asked again, from a later now
        assert json.loads(fired[0].payload) == {
            "schema_version": 1,
            "request_id": "late",
            "reason": "reservation-end",
        }
