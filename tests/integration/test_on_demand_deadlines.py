"""Issue 13, defect 5: the on-demand tries have a deadline, a ledger record, a message and a release.

A SageMaker on-demand endpoint stuck ``Creating`` was polled every 4 minutes with no deadline (2,719 calls
over 6 days): the ledger stayed ``REQUESTED``, nobody was told and the endpoint billed. The EC2 path stopped
after 20 polls but released nothing until the reservation's end.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from capacity.record_kinds import ON_DEMAND_TRY_PREFIX
from capacity.timeutil import parse_utc

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import api_event, ledger_items, make_cloud, post_reservation, states
from tests.integration.test_on_demand_first import sagemaker_now_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _on_demand_calls(cloud: LocalCloud) -> int:
    return sum(1 for r in cloud.lambdas.records if r.function.endswith("OnDemandFunction"))


def test_an_on_demand_endpoint_stuck_creating_fails_at_the_deadline_is_told_and_released() -> None:
    faults = FaultInjector([FaultRule(service="sagemaker", operation="CreateEndpoint", kind=FaultKind.STUCK)])
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())
        began = cloud.now()
        cloud.run(until=began + timedelta(hours=6))
        seen = states(cloud, RID)
        assert "FAILED" in seen  # was REQUESTED for six days
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "EndpointFailed"
        assert "still Creating" in failed["detail"]["reason"]
        assert parse_utc(failed["at"]) - began <= timedelta(
            hours=2
        )  # the deadline: 90 minutes after creation
        tries = [i for i in ledger_items(cloud, RID) if i["sk"].startswith(ON_DEMAND_TRY_PREFIX)]
        assert [(t["region"], t["outcome"]) for t in tries] == [("us-east-1", "timed-out")]
        assert _on_demand_calls(cloud) < 40  # was one every 4 minutes, forever
        assert any(f"{RID} FAILED" in m.text and "still Creating" in m.text for m in cloud.outbox.messages)
        # The release was requested and keeps trying while SageMaker refuses to delete a Creating endpoint.
        assert "RELEASING" in seen
        releases = [e for e in cloud.executions() if e.state_machine.endswith("ReleaseCapacityStateMachine")]
        assert releases
        alerts = [m.text for m in cloud.outbox.messages if "RELEASE FAILED" in m.text]
        assert any("endpoint co-eval-week-49 (Creating)" in alert for alert in alerts)


def test_a_cancel_while_the_on_demand_endpoint_is_stuck_creating_hands_it_to_the_release() -> None:
    faults = FaultInjector([FaultRule(service="sagemaker", operation="CreateEndpoint", kind=FaultKind.STUCK)])
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run(until=cloud.now() + timedelta(minutes=20))
        assert (
            cloud.api_request(api_event({}, method="DELETE", path=f"/reservations/{RID}"))["statusCode"]
            == 202
        )
        cloud.run(until=cloud.now() + timedelta(hours=6))
        seen = states(cloud, RID)
        assert [s for s in seen if s in ("CANCELLED", "REJECTED")] == ["CANCELLED"]
        assert "RELEASING" in seen  # the release owns the endpoint that cannot be deleted yet
        assert _on_demand_calls(cloud) < 60
        reserve = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
        assert [e.status for e in reserve] == ["SUCCEEDED"]  # stopped by the cancel: not a failure
