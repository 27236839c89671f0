"""The traffic replay on the local cloud: invocations per model and hour as the profile says, counted in
CloudWatch as that many calls, failures for lack of capacity counted apart, the end at the release; and the
demo's command printing the instance-hours comparison and writing the report and chart."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from localcloud import cli
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.traffic import TrafficProfile, TrafficReplay, attach
from tests.integration.support import ROOT, START, api_event, base_request, make_cloud

pytestmark = pytest.mark.integration

ROLE = "arn:aws:iam::123456789012:role/SageMakerExecution"
ENDPOINT = "co-traffic"
A, B = "co-traffic-model-a", "co-traffic-model-b"


def _deploy(cloud: LocalCloud) -> None:
    """An on-demand endpoint (ml.g6.12xlarge, 4 GPUs) with two one-GPU components, tagged as the
    application tags a reservation, InService by START + 7 min."""
    sagemaker = cloud.client("sagemaker")
    tags = [{"Key": "capacity-orchestrator:request-id", "Value": "traffic-test"}]
    sagemaker.create_endpoint_config(
        EndpointConfigName=f"{ENDPOINT}-config",
        ExecutionRoleArn=ROLE,
        ProductionVariants=[
            {"VariantName": "main", "InstanceType": "ml.g6.12xlarge", "InitialInstanceCount": 1}
        ],
    )
    sagemaker.create_endpoint(EndpointName=ENDPOINT, EndpointConfigName=f"{ENDPOINT}-config", Tags=tags)
    cloud.run(until=START + timedelta(minutes=4))
    for name in (A, B):
        sagemaker.create_inference_component(
            InferenceComponentName=name,
            EndpointName=ENDPOINT,
            VariantName="main",
            Specification={
                "Container": {"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tgi:latest"},
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 1,
                    "MinMemoryRequiredInMb": 1024,
                },
            },
            RuntimeConfig={"CopyCount": 1},
            Tags=tags,
        )


@pytest.fixture
def replayed() -> Iterator[tuple[LocalCloud, TrafficReplay]]:
    """Model a at 3 requests/minute, model b at 2 (every call of b refused for lack of capacity), for the
    hours 12:00-14:59 UTC; components ready at 12:07; run until 15:00, then b deleted; run to 15:02."""
    profile = TrafficProfile.model_validate(
        {
            "models": [
                {"model": "model-a", "requests_per_minute": [0] * 12 + [3] * 3 + [0] * 9},
                {"model": "model-b", "requests_per_minute": [0] * 12 + [2] * 3 + [0] * 9},
            ]
        }
    )
    refuse_b = FaultRule(
        service="sagemaker-runtime",
        operation="InvokeEndpoint",
        kind=FaultKind.INSUFFICIENT_CAPACITY,
        match={"InferenceComponentName": B},
    )
    cloud = make_cloud(faults=FaultInjector([refuse_b]))
    with cloud:
        replay = attach(cloud, profile)
        _deploy(cloud)
        cloud.run(until=START + timedelta(hours=3))
        cloud.client("sagemaker").delete_inference_component(InferenceComponentName=B)
        cloud.run(until=START + timedelta(hours=3, minutes=2))
        yield cloud, replay


def _sum(cloud: LocalCloud, metric: str, component: str, hour: int) -> float:
    begin = START.replace(hour=hour)
    answer = cloud.client("cloudwatch").get_metric_statistics(
        Namespace="AWS/SageMaker",
        MetricName=metric,
        Dimensions=[{"Name": "InferenceComponentName", "Value": component}],
        StartTime=begin,
        EndTime=begin + timedelta(hours=1),
        Period=3600,
        Statistics=["Sum"],
    )
    return float(sum(point["Sum"] for point in answer["Datapoints"]))


def test_each_model_gets_its_rate_times_sixty_invocations_per_whole_hour(
    replayed: tuple[LocalCloud, TrafficReplay],
) -> None:
    cloud, replay = replayed
    result = replay.result
    hour13, hour14 = START.replace(hour=13), START.replace(hour=14)

    assert result.started == START + timedelta(minutes=7)
    for hour in (hour13, hour14):
        a, b = result.hours[("model-a", hour)], result.hours[("model-b", hour)]
        assert (a.sent, a.served, a.failed) == (180, 180, 0)
        assert (b.sent, b.served, b.failed) == (120, 0, 120)
    # 12:08 to 12:59: 52 one-minute batches.
    assert result.hours[("model-a", START)].sent == 52 * 3
    assert result.totals("model-a").sent == 52 * 3 + 2 * 180
    # CloudWatch saw as many calls as were replayed (one real call per batch plus statistic sets).
    assert _sum(cloud, "Invocations", A, 13) == 180.0
    assert _sum(cloud, "NoCapacityInvocationFailures", B, 14) == 120.0
    assert _sum(cloud, "Invocations", B, 14) == 0.0


def test_samples_follow_the_deployment_and_the_replay_ends_when_the_release_begins(
    replayed: tuple[LocalCloud, TrafficReplay],
) -> None:
    _cloud, replay = replayed
    result = replay.result

    assert result.deployment is not None
    assert result.deployment.reservation == "traffic-test"
    assert result.deployment.components == {"model-a": A, "model-b": B}
    assert result.deployment.requirements["model-a"] == (1.0, 0.0, 1024.0)
    first, last = result.samples[0], result.samples[-1]
    assert (first.at, first.copies, first.instances) == (
        START + timedelta(minutes=7),
        {"model-a": 1, "model-b": 1},
        1,
    )
    assert result.ended == START + timedelta(hours=3, minutes=1)
    assert (last.at, last.copies, last.instances) == (result.ended, {"model-a": 0, "model-b": 0}, 0)
    # Every five minutes between (12:10 ... 15:00), then the closing sample.
    assert [sample.at.minute % 5 for sample in result.samples[1:-1]] == [0] * 35


def test_demo_prints_the_instance_hours_comparison_and_writes_both_models_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = base_request() | {"duration_hours": 24}  # one day keeps the test short; both halves of the day
    event = tmp_path / "post.json"
    event.write_text(json.dumps(api_event(body)))
    reports = tmp_path / "reports"

    status = cli.main(
        [
            "run",
            str(event),
            "--template",
            str(ROOT / "template.yaml"),
            "--traffic",
            str(ROOT / "events/traffic_two_models.json"),
            "--reports-dir",
            str(reports),
        ]
    )

    out = capsys.readouterr().out
    assert status == cli.EXIT_OK, out
    assert "== Traffic and scaling: eval-week-49 on co-eval-week-49" in out
    assert "dedicated endpoints (total)" in out
    assert "more without sharing" in out
    assert "not dollars saved" in out
    # The last section: the corrected cost summary, from what ran (issue 16).
    last = out.rstrip().rsplit("\n== ", 1)[-1]
    assert last.startswith("Cost summary"), last
    # One day of 2 x ml.p5.48xlarge with one instance serving: about half the instance-hours were used
    # (make demo's three days: 70.82 of 144.00, $28.11, 48.9% saved; tests/unit/test_unit_costs.py).
    assert "22.82 of 48.00 instance-hours used (47.5%)" in last
    assert "$29.02 per used instance-hour" in last
    assert "saved $593.61 (47.3%)" in last
    assert "== Billable resources left\n  none" in out
    report = json.loads((reports / "eval-week-49.json").read_text())
    copies = report["series"]["copies"]
    assert set(copies) == {"llama-3-8b-eu", "llama-3-8b-us"}
    # Each model's busy half-day scales it out under load (target tracking on invocations per copy).
    assert max(copies["llama-3-8b-eu"]) >= 2
    assert max(copies["llama-3-8b-us"]) >= 2
    comparison = report["instance_hours"]
    assert comparison["shared_endpoint"] < comparison["dedicated_endpoints"]
    assert f"Chart:  {reports / 'eval-week-49.png'}" in out
    assert (reports / "eval-week-49.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
