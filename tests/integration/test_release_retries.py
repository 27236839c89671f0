"""Issue 13, defect 4: a release that hits trouble retries until nothing bills, and every failed attempt is
recorded and alerted with every leftover named.

Before: a release that met throttling (or a stuck component) beyond the state machine's retries failed once
and left the endpoint up for days; its alert named only the component; the end-of-reservation release that
failed the same way later was neither recorded nor alerted.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    states,
)

pytestmark = pytest.mark.integration

RID = "eval-week-49"
ENDPOINT = "co-eval-week-49"
COMPONENTS = ("co-eval-week-49-llama-3-8b-eu", "co-eval-week-49-llama-3-8b-us")


def _release_failures(cloud: LocalCloud) -> list[dict[str, Any]]:
    return [
        item
        for item in ledger_items(cloud, RID)
        if item.get("state") == "FAILED" and item["detail"].get("phase") == "release"
    ]


def _alerts(cloud: LocalCloud) -> list[str]:
    return [m.text for m in cloud.outbox.messages if "RELEASE FAILED" in m.text]


def _releases(cloud: LocalCloud) -> list[Any]:
    return [e for e in cloud.executions() if e.state_machine.endswith("ReleaseCapacityStateMachine")]


def _names_every_leftover(text: str) -> None:
    assert f"endpoint {ENDPOINT} (" in text
    assert f"endpoint config {ENDPOINT}-config" in text
    for component in COMPONENTS:
        assert f"inference component {component}" in text


def test_a_release_throttled_for_hours_retries_reports_each_attempt_and_releases_once_aws_recovers() -> None:
    faults = FaultInjector()
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        # SageMaker refuses every deletion (throttled beyond botocore's and the state machine's retries).
        for operation in ("DeleteInferenceComponent", "DeleteEndpoint", "DeleteEndpointConfig"):
            faults.add(FaultRule(service="sagemaker", operation=operation, kind=FaultKind.THROTTLE))
        cancel = cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))
        assert cancel["statusCode"] == 202
        trouble = cloud.now()
        cloud.run(until=trouble + timedelta(hours=4))
        failures = _release_failures(cloud)
        assert len(failures) >= 3  # the first attempt and the retries it scheduled, each recorded
        assert [int(f["detail"]["attempt"]) for f in failures] == list(range(1, len(failures) + 1))
        assert len({f["detail"]["attempt_id"] for f in failures}) == len(failures)
        for failure in failures:
            _names_every_leftover(", ".join(failure["detail"]["leftovers"]))
            assert failure["detail"]["retry_at"]
        alerts = _alerts(cloud)
        assert len(alerts) == len(failures)
        for alert in alerts:
            _names_every_leftover(alert)
            assert "tried again at" in alert
        assert all(e.status == "FAILED" for e in _releases(cloud) if e.status != "RUNNING")  # each pages ops
        assert cloud.billable_resources() != []
        # AWS recovers: the next scheduled attempt deletes everything, well before the reservation's end.
        faults.clear()
        recovered = cloud.now()
        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        assert cloud.now() - recovered <= timedelta(hours=2)
        assert states(cloud, RID).count("RELEASED") == 1
        assert cloud.billable_resources() == []


def test_after_a_failed_cancel_release_the_end_of_reservation_release_failing_too_is_reported() -> None:
    faults = FaultInjector(
        [FaultRule(service="sagemaker", operation="DeleteInferenceComponent", kind=FaultKind.STUCK, times=1)]
    )
    # A one-day reservation: every hourly retry until its end is simulated, so a shorter one tests the same.
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, {**base_request(), "duration_hours": 24})
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        assert (
            cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))["statusCode"]
            == 202
        )
        # Past the end-of-reservation release (a day later): it fails the same way and is reported.
        cloud.run(until=cloud.now() + timedelta(days=1, hours=4))
        releases = _releases(cloud)
        end = next(e for e in releases if '"reservation-end"' in (e.input or ""))
        assert end.status == "FAILED"
        failures = _release_failures(cloud)
        # The end-of-reservation attempt is recorded and told like the first one (it used to be neither).
        assert end.arn in {f["detail"].get("attempt_id") for f in failures}
        assert sum(e.status == "FAILED" for e in releases) == len(failures) == len(_alerts(cloud))
        assert len({f["detail"]["attempt_id"] for f in failures}) == len(failures)
        by_reason = {json.loads(e.input or "{}").get("detail", {}).get("reason") for e in releases}
        assert {"cancelled", "release-retry", "reservation-end"} <= by_reason
        assert all(e.events < 500 for e in releases)  # each attempt is a short execution
        for failure in failures:
            assert f"inference component {COMPONENTS[0]} (Deleting)" in failure["detail"]["leftovers"]
        assert all(f"endpoint {ENDPOINT} (" in alert for alert in _alerts(cloud))
        assert "RELEASED" not in states(cloud, RID)  # nothing pretends it is over while it bills
