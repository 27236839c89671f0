"""Nothing outlives a cancel (the fault soak's race, docs/soak.md): a DELETE that arrives while a deployment
step is between its start-of-step check and its creates. The release then runs to ``RELEASED`` finding
nothing; the step creates the resources afterwards, sees the stop state when it reads the ledger again,
and puts ``ReleaseRequested`` again; that release (past the ``RELEASED`` marker, because something bills)
deletes them, and the ledger keeps one ``RELEASED``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from tests.integration.support import api_event, base_request, make_cloud, post_reservation, states
from tests.integration.test_on_demand_first import sagemaker_now_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"
BACKOFF_SECONDS = 1800.0


def _fired(faults: FaultInjector, operation: str) -> bool:
    return any(f.operation == operation and f.kind is FaultKind.LATENCY for f in faults.fired)


def _cancel(cloud: LocalCloud) -> dict[str, Any]:
    return cloud.api_request(api_event(None, method="DELETE", path=f"/reservations/{RID}"))


def _executions(cloud: LocalCloud, machine: str) -> list[Any]:
    return [e for e in cloud.executions() if e.state_machine.endswith(machine)]


@pytest.mark.parametrize("operation", ["CreateEndpointConfig", "CreateInferenceComponent"])
def test_a_cancel_during_a_create_back_off_leaves_nothing_billing_and_one_released(operation: str) -> None:
    # The create answers after 30 minutes of virtual time (a throttling back-off, a slow call): the cancel
    # and its whole release fit inside it.
    rule = FaultRule(
        service="sagemaker",
        operation=operation,
        kind=FaultKind.LATENCY,
        latency_seconds=BACKOFF_SECONDS,
        times=1,
    )
    faults = FaultInjector([rule])
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: _fired(faults, operation))
        assert _cancel(cloud)["statusCode"] == 202
        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        # The interleaving of the soak: released while the create is still in flight.
        sagemaker = cloud.client("sagemaker")
        if operation == "CreateEndpointConfig":
            assert sagemaker.list_endpoint_configs()["EndpointConfigs"] == []
        else:
            assert sagemaker.list_inference_components()["InferenceComponents"] == []
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert seen.count("RELEASED") == 1
        assert seen.count("CANCELLED") == 1
        assert "READY" not in seen
        assert cloud.billable_resources() == []
        assert sagemaker.list_endpoint_configs()["EndpointConfigs"] == []
        alarms = cloud.client("cloudwatch").describe_alarms()["MetricAlarms"]
        assert [a["AlarmName"] for a in alarms if RID in a["AlarmName"]] == []
        releases = _executions(cloud, "ReleaseCapacityStateMachine")
        assert {e.status for e in releases} == {"SUCCEEDED"}
        if operation == "CreateEndpointConfig":
            # The first release found nothing; the second, requested by create_endpoint after its creates,
            # deleted the endpoint and its config. (A component cannot be created on the deleted endpoint.)
            assert len(releases) >= 2


def test_a_cancel_while_the_on_demand_endpoint_is_created_deletes_it_though_nothing_was_bought() -> None:
    # On demand first: no PURCHASE until the endpoint serves, so no release knows its region; the on-demand
    # step deletes what it created itself, in every candidate region, before it stops.
    def creating() -> bool:
        return any(c.operation == "CreateEndpoint" for c in cloud.dispatcher.calls)

    with make_cloud() as cloud:
        post_reservation(cloud, sagemaker_now_request())
        cloud.run(stop_when=creating)
        assert _cancel(cloud)["statusCode"] == 202
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert "READY" not in seen
        assert [s for s in seen if s in ("CANCELLED", "REJECTED", "FAILED")] == ["CANCELLED"]
        assert cloud.billable_resources() == []
        assert cloud.client("sagemaker").list_endpoint_configs()["EndpointConfigs"] == []


def _intent_written(cloud: LocalCloud) -> bool:
    from tests.integration.support import ledger_items

    return any(i["sk"] == "PURCHASE_INTENT" for i in ledger_items(cloud, RID))


def test_a_cancel_while_the_purchase_call_is_on_its_way_asks_first_and_then_releases_what_it_buys() -> None:
    # Given a purchase whose CreateTrainingPlan call takes 20 s to land (held past the client's read timeout)
    rule = FaultRule(
        service="sagemaker",
        operation="CreateTrainingPlan",
        kind=FaultKind.LATENCY,
        latency_seconds=20,
        times=1,
    )
    with make_cloud(faults=FaultInjector([rule])) as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: _intent_written(cloud))
        # When the requester cancels without confirm while the call is on its way
        asked = cloud.api_request(api_event(None, method="DELETE", path=f"/reservations/{RID}", query={}))

        # Then nothing changes: 409 with the fee about to be paid, not CANCELLED; the purchase lands and the
        # reservation goes on
        body = json.loads(asked["body"])
        assert asked["statusCode"] == 409, body
        assert body["purchase_on_its_way"] is True
        assert body["refunded_usd"] == "0"
        assert "being bought" in body["message"]
        assert "confirm=true" in body["message"]
        assert "CANCELLED" not in states(cloud, RID)
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        assert "CANCELLED" not in states(cloud, RID)
        paid = _cancel(cloud)  # confirm=true now: the fee is sunk, the plan is released
        assert paid["statusCode"] == 202, paid["body"]
        cloud.run_until_idle()
        seen = states(cloud, RID)
        assert seen[-1] == "RELEASED", seen
        assert "CANCELLED" in seen, seen
        assert cloud.billable_resources() == []
