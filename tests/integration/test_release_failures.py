"""Release failures on the local cloud: stuck deletions end at a deadline and are always reported."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import base_request, ledger_items, make_cloud, post_reservation, states

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _release_executions(cloud: LocalCloud) -> list[Any]:
    return [e for e in cloud.executions() if e.state_machine.endswith("ReleaseCapacityStateMachine")]


@pytest.mark.parametrize(
    ("operation", "still"),
    [
        ("DeleteInferenceComponent", "inference component co-eval-week-49-"),
        ("DeleteEndpoint", "endpoint co-eval-week-49 (Deleting)"),
    ],
)
def test_a_deletion_stuck_deleting_ends_each_attempt_at_its_deadline_and_every_attempt_is_reported(
    operation: str, still: str
) -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation=operation, kind=FaultKind.STUCK, times=1)]
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "RELEASING" in states(cloud, RID))
        began = cloud.now()
        # Three attempts of about 2 h of polls each, 10 and 20 minutes apart, end within 9 hours.
        cloud.run(until=began + timedelta(hours=9))
        release = _release_executions(cloud)
        done = [e for e in release if e.status != "RUNNING"]
        assert len(done) >= 3  # each attempt gives up at its deadline; the next one was scheduled
        assert all(e.status == "FAILED" for e in done)  # every failed attempt pages operations
        assert all(e.events < 500 for e in release)  # was 25,000+ and still running
        calls = [r for r in cloud.lambdas.records if r.function.endswith("ReleaseCapacityFunction")]
        assert len(calls) < 60 * len(release)  # was 2,882 in a day, in one execution
        assert "RELEASED" not in states(cloud, RID)
        failed = [
            i
            for i in ledger_items(cloud, RID)
            if i.get("state") == "FAILED" and i["detail"].get("phase") == "release"
        ]
        assert len(failed) == len(done)
        assert {f["detail"]["error"] for f in failed} == {"ReleaseStuck"}
        assert all(still in f["detail"]["reason"] for f in failed)
        alerts = [m.text for m in cloud.outbox.messages if "RELEASE FAILED" in m.text]
        assert len(alerts) == len(failed)
        assert all(still in alert and "a person must delete them" in alert for alert in alerts)


def test_a_failed_release_after_a_failed_reservation_is_still_reported() -> None:
    faults = FaultInjector([FaultRule(service="sagemaker", operation="CreateEndpoint", kind=FaultKind.STUCK)])
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "RELEASING" in states(cloud, RID))
        cloud.run(until=cloud.now() + timedelta(hours=6))
        seen = states(cloud, RID)
        assert seen.index("FAILED") < seen.index("RELEASING")  # the reservation failed first
        assert seen[-1] == "FAILED"
        release_failed = [
            i
            for i in ledger_items(cloud, RID)
            if i.get("state") == "FAILED" and i["detail"].get("phase") == "release"
        ]
        assert release_failed
        assert "endpoint co-eval-week-49 is Creating" in release_failed[0]["detail"]["reason"]
        assert "endpoint co-eval-week-49 (Creating)" in release_failed[0]["detail"]["leftovers"]
        alerts = [m.text for m in cloud.outbox.messages if "RELEASE FAILED" in m.text]
        assert alerts
        assert "endpoint co-eval-week-49 is Creating" in alerts[0]


def test_a_release_requested_without_a_string_request_id_is_rejected_clearly() -> None:
    with make_cloud() as cloud:
        bus = cloud.stack.physical_id("EventBus")
        for detail in ({"schema_version": 1}, {"request_id": 5, "reason": None}):
            cloud.put_events(
                [
                    {
                        "Source": "capacity.orchestrator",
                        "DetailType": "ReleaseRequested",
                        "Detail": json.dumps(detail),
                        "EventBusName": bus,
                    }
                ]
            )
        cloud.run_until_idle()
        release = _release_executions(cloud)
        assert [e.status for e in release] == ["FAILED", "FAILED"]
        assert all(e.error == "ReleaseFailed" for e in release)
        texts = [m.text for m in cloud.outbox.messages]
        rejected = [t for t in texts if "rejected* (InvalidRequest)" in t]
        assert len(rejected) == 2
        assert "request_id" in rejected[0]
        assert all("billing" not in t for t in rejected)
