"""SageMaker reads are eventually consistent (the ``stale_listing`` fault kind: a Describe/List answers as
of ``delay_seconds`` ago): the lifecycle neither fails a paid reservation nor leaves an endpoint billing.

On the old code a 2-minute lag failed the reservation ``EndpointFailed`` ("does not exist") right after
``CreateEndpoint``, and its release, seeing nothing, recorded ``RELEASED`` with the endpoint still
creating, then billing for three days.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import (
    LIFECYCLE,
    api_event,
    base_request,
    in_order,
    make_cloud,
    post_reservation,
    states,
)

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _stale(seconds: float) -> FaultInjector:
    return FaultInjector(
        [FaultRule(service="sagemaker", kind=FaultKind.STALE_LISTING, delay_seconds=seconds)], seed=1
    )


def test_a_lifecycle_on_reads_two_minutes_stale_serves_and_releases_everything() -> None:
    with make_cloud(faults=_stale(120)) as cloud:
        post_reservation(cloud, base_request())
        cloud.run_until_idle()

        assert in_order(states(cloud, RID), LIFECYCLE), states(cloud, RID)
        assert "FAILED" not in states(cloud, RID)
        assert cloud.billable_resources() == []
        assert {e.status for e in cloud.executions()} == {"SUCCEEDED"}
        assert any(f.kind is FaultKind.STALE_LISTING for f in cloud.faults.fired)


def test_a_cancel_right_after_create_endpoint_on_stale_reads_leaves_nothing_billing() -> None:
    with make_cloud(faults=_stale(300)) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "DEPLOYING" in states(cloud, RID))
        answer: dict[str, Any] = cloud.api_request(
            api_event(None, method="DELETE", path=f"/reservations/{RID}")
        )
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()

        assert states(cloud, RID)[-1] == "RELEASED"
        assert cloud.billable_resources() == []
