"""Scaling on the local cloud (issue 4): scale from zero on NoCapacityInvocationFailures, idle to zero,
target tracking under load, and scale-to-zero instances where the region refuses them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from capacity.record_kinds import SCALE_PREFIX

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import base_request, ledger_items, make_cloud, post_reservation, states

pytestmark = pytest.mark.integration

RID = "eval-week-49"
ENDPOINT = "co-eval-week-49"
EU = "co-eval-week-49-llama-3-8b-eu"
US = "co-eval-week-49-llama-3-8b-us"


def _ready(cloud: LocalCloud, body: dict[str, Any]) -> datetime:
    post_reservation(cloud, body)
    cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
    assert "READY" in states(cloud, RID)
    return cloud.now()


def _invoke(cloud: LocalCloud, component: str, count: int) -> tuple[int, int]:
    """``count`` InvokeEndpoint calls now: (succeeded, failed for lack of capacity)."""
    runtime = cloud.client("sagemaker-runtime")
    ok = failed = 0
    for _ in range(count):
        try:
            runtime.invoke_endpoint(
                EndpointName=ENDPOINT,
                InferenceComponentName=component,
                Body=b"{}",
                ContentType="application/json",
            )
            ok += 1
        except runtime.exceptions.ClientError as exc:
            if "no capacity" not in str(exc):
                raise
            failed += 1
    return ok, failed


def _desired(cloud: LocalCloud, component: str) -> int:
    config = cloud.client("sagemaker").describe_inference_component(InferenceComponentName=component)
    return int(config["RuntimeConfig"]["DesiredCopyCount"])


def _scale_items(cloud: LocalCloud) -> list[dict[str, Any]]:
    return [i for i in ledger_items(cloud, RID) if i["sk"].startswith(SCALE_PREFIX)]


def _minutes(cloud: LocalCloud, n: int) -> None:
    cloud.run(until=cloud.now() + timedelta(minutes=n))


def test_first_request_at_zero_copies_scales_out_counts_the_cold_start_then_idles_back_to_zero() -> None:
    body = base_request()
    for model in body["models"]:
        model["scaling"] = {"target_invocations_per_copy": 5, "idle_minutes_before_zero": 5}
    with make_cloud() as cloud:
        ready = _ready(cloud, body)
        _minutes(cloud, 20)
        targets = cloud.client("application-autoscaling").describe_scalable_targets(
            ServiceNamespace="sagemaker", ResourceIds=[f"inference-component/{EU}"]
        )["ScalableTargets"]
        assert [(t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [(0, 4)]  # 0 reached AAS as 0
        assert _desired(cloud, EU) == 0  # idle since READY: no copy

        failed = 0
        ok, f = _invoke(cloud, EU, 3)
        failed += f
        assert (ok, f) == (0, 3)  # the first requests find no copy
        served_at = None
        for _ in range(10):  # a client retrying 3 times a minute
            _minutes(cloud, 1)
            ok, f = _invoke(cloud, EU, 3)
            failed += f
            if ok:
                served_at = cloud.now()
                break
        assert served_at is not None, "a repeated request never succeeded"
        assert _desired(cloud, EU) == 1
        for _ in range(3):  # keep serving a little, then stop
            _minutes(cloud, 1)
            assert _invoke(cloud, EU, 3) == (3, 0)
        _minutes(cloud, 12)

        items = _scale_items(cloud)
        actions = [(i["action"], i["model"]) for i in items]
        assert actions == [
            ("scale_in_to_zero", "llama-3-8b-eu"),
            ("scale_in_to_zero", "llama-3-8b-us"),
            ("scale_out_from_zero", "llama-3-8b-eu"),
            ("cold_start_ended", "llama-3-8b-eu"),
            ("scale_in_to_zero", "llama-3-8b-eu"),
        ]
        first_idle, _us_idle, out, ended, idle = items
        # The idle alarm, not target tracking (no datapoints: INSUFFICIENT_DATA), brings the copy to 0, once
        # the component has served idle_minutes_before_zero minutes (the minutes before READY are no idle
        # ones): AWS_FACTS.md, CloudWatch "How alarm state is evaluated when data is missing".
        idle_at = datetime.fromisoformat(first_idle["at"].replace("Z", "+00:00"))
        assert timedelta(minutes=5) <= idle_at - ready <= timedelta(minutes=6)
        assert (int(out["from_copies"]), int(out["to_copies"]), int(out["failed_requests"])) == (0, 1, 3)
        assert int(ended["failed_requests"]) == failed  # every failure of the cold start, counted
        assert failed > 3
        assert "no request for 5 minute(s)" in idle["reason"]
        assert _desired(cloud, EU) == 0
        texts = [m.text for m in cloud.outbox.messages]
        assert any("`llama-3-8b-eu` had 0 copies" in t and "3 request(s) failed so far" in t for t in texts)
        assert any(f"{failed} request(s) failed during its cold start" in t for t in texts)

        cloud.run_until_idle()
        assert states(cloud, RID)[-1] == "RELEASED"
        assert cloud.billable_resources() == []
        alarms = cloud.client("cloudwatch").describe_alarms(AlarmNamePrefix="capacity-orchestrator/")
        assert alarms["MetricAlarms"] == []


def test_target_tracking_raises_copies_under_load_and_lowers_them_after_the_cooldowns() -> None:
    body = base_request()
    body["models"][0]["copies"] = {"initial": 1, "min": 1, "max": 4}
    body["models"][0]["scaling"] = {
        "target_invocations_per_copy": 5,
        "scale_out_cooldown_seconds": 60,
        "scale_in_cooldown_seconds": 600,
    }
    body["models"][1]["copies"] = {"initial": 1, "min": 1, "max": 1}
    with make_cloud() as cloud:
        ready = _ready(cloud, body)
        for _ in range(8):  # 20 invocations a minute against a target of 5 per copy
            assert _invoke(cloud, EU, 20)[0] == 20
            _minutes(cloud, 1)
        peak = _desired(cloud, EU)
        assert peak == 4  # ceil(1 * 20 / 5) = 4 = max
        # Light traffic: below 90% of the target for 15 minutes, then the cooldown. (No traffic at all
        # would be no datapoints: INSUFFICIENT_DATA, and target tracking does not scale in.)
        for _ in range(30):
            assert _invoke(cloud, EU, 2)[0] == 2
            _minutes(cloud, 1)
        assert _desired(cloud, EU) == 1  # ceil(4 * 0.5 / 5), and the min

        activities = cloud.client("application-autoscaling").describe_scaling_activities(
            ServiceNamespace="sagemaker", ResourceId=f"inference-component/{EU}"
        )["ScalingActivities"]
        changes = [
            (a["Description"], "AlarmHigh" in a["Cause"], a["StartTime"]) for a in reversed(activities)
        ]
        assert [c[:2] for c in changes] == [
            ("Setting desired copy count to 4.", True),
            ("Setting desired copy count to 1.", False),
        ]
        scale_out_at, scale_in_at = changes[0][2], changes[1][2]
        assert scale_out_at - ready <= timedelta(minutes=5)  # 3 one-minute datapoints, then a reaction
        assert scale_in_at - scale_out_at >= timedelta(seconds=600)  # not within the scale-in cooldown
        assert _scale_items(cloud) == []  # target tracking alone, no alarm of ours acted


def test_scale_to_zero_instances_rejected_by_the_region_is_reported_clearly_and_not_retried() -> None:
    market = MarketConfig(
        min_instance_count_zero_rejected_regions=frozenset({"us-east-1", "us-west-2", "us-east-2"})
    )
    with make_cloud(market=market) as cloud:
        post_reservation(cloud, base_request())  # both models have copies.min 0 -> MinInstanceCount 0
        cloud.run(stop_when=lambda: "FAILED" in states(cloud, RID))
        calls = [r for r in cloud.lambdas.records if r.function.endswith("CreateEndpointFunction")]
        assert len(calls) == 1  # a validation error is not retried
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert "MinInstanceCount 0 is not supported in region" in failed["detail"]["reason"]
        texts = "\n".join(m.text for m in cloud.outbox.messages)
        assert "MinInstanceCount 0 is not supported in region" in texts
        cloud.run_until_idle()
        assert cloud.billable_resources() == []
