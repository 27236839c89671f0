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
    ledger_items,
    make_cloud,
    post_reservation,
    states,
)
from tests.integration.test_on_demand_first import sagemaker_now_request

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


def test_a_cancel_during_the_on_demand_create_on_stale_reads_leaves_no_endpoint_billing() -> None:
    # Soak seed 308, lifecycle 43: the cancel lands while the on-demand step creates its endpoint; the
    # release ran before there was anything to see, and the step, asking DescribeEndpoint right after
    # CreateEndpoint on lagging reads, found nothing, said "nothing launched on demand is left" and ended:
    # the endpoint billed on with no one to delete it.
    faults = FaultInjector(
        [
            FaultRule(service="sagemaker", kind=FaultKind.STALE_LISTING, delay_seconds=300),
            FaultRule(
                service="sagemaker",
                operation="CreateEndpointConfig",
                kind=FaultKind.LATENCY,
                latency_seconds=5,  # under the read timeout: the call answers, late
            ),
        ],
        seed=1,
    )
    with make_cloud(faults=faults) as cloud:
        post_reservation(cloud, sagemaker_now_request())  # from now: on demand is tried first
        cloud.run(
            stop_when=lambda: any(c.operation == "CreateEndpointConfig" for c in cloud.dispatcher.calls)
        )
        answer: dict[str, Any] = cloud.api_request(
            api_event(None, method="DELETE", path=f"/reservations/{RID}")
        )
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()

        created = [
            c for c in cloud.dispatcher.calls if c.operation == "CreateEndpoint" and (c.status or 500) < 300
        ]
        assert len(created) == 1  # the step did create it after the cancel was recorded
        assert cloud.billable_resources() == []
        assert "CANCELLED" in states(cloud, RID)
        assert "PURCHASED" not in states(cloud, RID)  # it was the on-demand path


def _ec2_stale(seconds: float) -> FaultInjector:
    return FaultInjector(
        [
            FaultRule(
                service="ec2",
                operation="DescribeInstances",
                kind=FaultKind.STALE_LISTING,
                delay_seconds=seconds,
            )
        ],
        seed=1,
    )


def test_a_cancel_right_after_the_on_demand_launch_on_stale_reads_leaves_no_instance_running() -> None:
    # EC2 reads lag too (DescribeInstances does not list an instance launched seconds ago): a release right
    # after the on-demand launch must still terminate what the PURCHASE names, not declare RELEASED on what
    # the listing shows.
    from tests.integration.test_ec2_capacity_blocks import create_launch_templates
    from tests.integration.test_on_demand_first import REQUEST_ID, now_request

    with make_cloud(faults=_ec2_stale(300)) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, now_request())
        cloud.run(stop_when=lambda: "DEPLOYING" in states(cloud, REQUEST_ID))
        answer: dict[str, Any] = cloud.api_request(
            api_event(None, method="DELETE", path=f"/reservations/{REQUEST_ID}")
        )
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()

        launched = [
            c for c in cloud.dispatcher.calls if c.operation == "RunInstances" and (c.status or 500) < 300
        ]
        assert len(launched) == 1
        assert states(cloud, REQUEST_ID)[-1] == "RELEASED"
        assert cloud.billable_resources() == []
        assert any(f.kind is FaultKind.STALE_LISTING for f in cloud.faults.fired)


def test_a_cancel_during_the_on_demand_launch_on_stale_reads_leaves_no_instance_running() -> None:
    # The cancel lands while RunInstances is in flight (answered late): the step, asking DescribeInstances
    # right after, sees nothing on lagging reads; nothing may be left running with no one to terminate it.
    from tests.integration.test_ec2_capacity_blocks import create_launch_templates
    from tests.integration.test_on_demand_first import REQUEST_ID, now_request

    faults = FaultInjector(
        [
            FaultRule(
                service="ec2", operation="DescribeInstances", kind=FaultKind.STALE_LISTING, delay_seconds=300
            ),
            FaultRule(service="ec2", operation="RunInstances", kind=FaultKind.LATENCY, latency_seconds=5),
        ],
        seed=1,
    )
    with make_cloud(faults=faults) as cloud:
        create_launch_templates(cloud)
        post_reservation(cloud, now_request())
        cloud.run(stop_when=lambda: any(c.operation == "RunInstances" for c in cloud.dispatcher.calls))
        answer: dict[str, Any] = cloud.api_request(
            api_event(None, method="DELETE", path=f"/reservations/{REQUEST_ID}")
        )
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()

        assert cloud.billable_resources() == []
        assert "CANCELLED" in states(cloud, REQUEST_ID)


def test_a_cancel_right_after_the_block_launch_on_stale_reads_terminates_what_was_launched() -> None:
    # Soak seed 601 #191: the launch into a capacity block saw its instances running (a fresh read), the
    # cancel came at READY, and the release's reads, lagging five minutes, listed none: RELEASED, with four
    # p4d.24xlarge running to the block's end. The release terminates what RunInstances answered (LAUNCHED).
    from tests.integration.test_ec2_capacity_blocks import create_launch_templates, ec2_request

    faults = FaultInjector([], seed=1)
    with make_cloud(faults=faults) as cloud:
        create_launch_templates(cloud)
        body = ec2_request()
        post_reservation(cloud, body)
        rid = body["request_id"]
        cloud.run(stop_when=lambda: "READY" in states(cloud, rid))
        faults.add(
            FaultRule(
                service="ec2", operation="DescribeInstances", kind=FaultKind.STALE_LISTING, delay_seconds=300
            )
        )
        answer: dict[str, Any] = cloud.api_request(
            api_event(None, method="DELETE", path=f"/reservations/{rid}")
        )
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()

        launched = next(i for i in ledger_items(cloud, rid) if i["sk"] == "LAUNCHED")["instance_ids"]
        assert len(launched) == body["instance_count"]
        terminated = {
            instance_id
            for call in cloud.dispatcher.calls
            if call.operation == "TerminateInstances" and (call.status or 500) < 300
            for instance_id in call.params["InstanceIds"]
        }
        assert terminated == set(launched)
        assert states(cloud, rid)[-1] == "RELEASED"
        assert cloud.billable_resources() == []
        assert any(f.kind is FaultKind.STALE_LISTING for f in cloud.faults.fired)
