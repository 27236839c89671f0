"""Issue 13, defect 8: a cancel is not a failure.

A normal ``DELETE`` marked the reserve execution ``FAILED`` (the step that found the reservation cancelled
raised ``ReservationCancelled``, caught as any error), which fires ``ReserveFailuresAlarm`` and pages
operations for something a person asked for. The ledger must hold ``CANCELLED`` as the only outcome, the
execution succeed, and the release still run.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from tests.integration.support import api_event, base_request, make_cloud, post_reservation, states

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _cancel(cloud: LocalCloud) -> dict[str, Any]:
    return cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))


def _machine(cloud: LocalCloud, name: str) -> list[Any]:
    return [e for e in cloud.executions() if e.state_machine.endswith(name)]


@pytest.mark.parametrize("when", ["AWAITING_APPROVAL", "DEPLOYING"])
def test_a_cancel_ends_the_reserve_execution_succeeded_with_one_outcome(when: str) -> None:
    body = {**base_request(), "approval_above_usd": "1000"} if when == "AWAITING_APPROVAL" else base_request()
    with make_cloud() as cloud:
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: when in states(cloud, RID))
        assert _cancel(cloud)["statusCode"] == 202
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert [s for s in seen if s in ("CANCELLED", "REJECTED", "FAILED")] == ["CANCELLED"]
        assert [e.status for e in _machine(cloud, "ReserveCapacityStateMachine")] == ["SUCCEEDED"]
        assert "READY" not in seen
        assert cloud.billable_resources() == []
        if when == "DEPLOYING":  # something was bought: its release ran to the end
            assert seen[-1] == "RELEASED"
            assert {e.status for e in _machine(cloud, "ReleaseCapacityStateMachine")} == {"SUCCEEDED"}
        failures = [m.text for m in cloud.outbox.messages if "FAILED" in m.text]
        assert failures == []
