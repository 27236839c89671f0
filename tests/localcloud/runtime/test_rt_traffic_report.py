"""The traffic profile (validation, batch sizes) and the report's arithmetic, chart and JSON on known data."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from localcloud.chart import ChartWorker
from localcloud.report import build_report, compare, copies_per_instance, instance_hours, write_report
from localcloud.traffic import Deployment, HourCount, Sample, TrafficProfile, TrafficResult

ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 12, 8, 0, 0, tzinfo=UTC)
P5 = "ml.p5.48xlarge"
# The demo's models: 2 accelerators, 16 CPU cores, 128 GiB per copy -> 4 copies per p5.48xlarge (8 GPUs).
LLAMA = (2.0, 16.0, 131072.0)


def _profile(**overrides: object) -> TrafficProfile:
    data: dict[str, object] = {
        "models": [
            {"model": "eu", "requests_per_minute": [5] * 12 + [0] * 12},
            {"model": "us", "requests_per_minute": [0] * 12 + [7] * 12},
        ]
    }
    data.update(overrides)
    return TrafficProfile.model_validate(data)


def test_seed_profile_loads_with_two_models_busy_in_opposite_halves_of_the_day() -> None:
    profile = TrafficProfile.load(ROOT / "events/traffic_two_models.json")

    eu, us = profile.models
    assert (eu.model, us.model) == ("llama-3-8b-eu", "llama-3-8b-us")
    assert all(rate > 0 for rate in eu.requests_per_minute[:12])
    assert all(rate == 0 for rate in eu.requests_per_minute[12:])
    assert all(rate == 0 for rate in us.requests_per_minute[:12])
    assert all(rate > 0 for rate in us.requests_per_minute[12:])
    assert profile.batch_minutes == 1


def test_batch_size_is_the_hours_rate_times_the_batch_minutes() -> None:
    profile = _profile(batch_minutes=5)

    assert profile.batch_size("eu", T0 + timedelta(hours=11, minutes=55)) == 25
    assert profile.batch_size("eu", T0 + timedelta(hours=12)) == 0
    assert profile.batch_size("us", T0 + timedelta(hours=23, minutes=5)) == 35
    with pytest.raises(KeyError):
        profile.rate("nobody", T0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batch_minutes": 7}, "7 does not divide 60"),
        ({"models": [{"model": "a", "requests_per_minute": [1] * 23}]}, "give 24 hourly rates"),
        ({"models": [{"model": "a", "requests_per_minute": [-1] * 24}]}, "0 or more"),
        (
            {"models": [{"model": "a", "requests_per_minute": [1] * 24}] * 2},
            "models listed twice: a",
        ),
    ],
)
def test_invalid_profiles_are_refused_with_what_to_fix(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _profile(**overrides)


def test_a_profile_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{nope")

    with pytest.raises(ValueError, match=r"broken\.json: not JSON"):
        TrafficProfile.load(path)


def test_instance_hours_integrate_the_step_function_of_samples() -> None:
    points = [
        (T0, 1),
        (T0 + timedelta(hours=6), 2),
        (T0 + timedelta(hours=9), 1),
        (T0 + timedelta(hours=12), 0),
    ]

    assert instance_hours(points) == 15.0  # 6 x 1 + 3 x 2 + 3 x 1
    assert instance_hours(points[:1]) == 0.0
    with pytest.raises(ValueError, match="out of order"):
        instance_hours([points[1], points[0]])


def test_copies_per_instance_is_set_by_the_scarcest_resource() -> None:
    assert copies_per_instance(P5, LLAMA) == 4  # 8 GPUs / 2 (CPU would allow 12, memory 16)
    assert copies_per_instance(P5, (0.0, 64.0, 1024.0)) == 3  # 192 vCPUs / 64
    with pytest.raises(ValueError, match="does not fit"):
        copies_per_instance(P5, (16.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="unknown instance type"):
        copies_per_instance("ml.nope.large", LLAMA)


def _samples() -> list[Sample]:
    rows = [(0, 5, 0, 2), (6, 3, 2, 2), (9, 0, 3, 1), (12, 0, 0, 0)]
    return [
        Sample(T0 + timedelta(hours=hour), {"eu": eu, "us": us}, {"eu": eu, "us": us}, instances)
        for hour, eu, us, instances in rows
    ]


def test_comparison_against_one_dedicated_endpoint_per_model_at_its_peak() -> None:
    result = compare(_samples(), P5, {"eu": LLAMA, "us": LLAMA})

    # shared: 6 h x 2 + 3 h x 2 + 3 h x 1 = 21; dedicated: eu peak 5 copies -> 2 instances, us peak 3 -> 1,
    # for the 12 h window: (2 + 1) x 12 = 36; saving 15 instance-hours = 41.7%.
    assert result["window_hours"] == 12.0
    assert result["shared_endpoint"] == 21.0
    assert result["models"]["eu"] == {
        "peak_copies": 5,
        "copies_per_instance": 4,
        "instances": 2,
        "instance_hours": 24.0,
    }
    assert result["models"]["us"]["instances"] == 1
    assert result["dedicated_endpoints"] == 36.0
    assert result["saving_instance_hours"] == 15.0
    assert result["saving_percent"] == 41.7
    assert "ceil(peak copies / copies per instance)" in result["formula"]


def _result() -> TrafficResult:
    samples = _samples()
    result = TrafficResult(
        deployment=Deployment(
            reservation="eval-week-49",
            endpoint="co-eval-week-49",
            variant="main",
            instance_type=P5,
            components={"eu": "co-eval-week-49-eu", "us": "co-eval-week-49-us"},
            requirements={"eu": LLAMA, "us": LLAMA},
        ),
        started=samples[0].at,
        ended=samples[-1].at,
        samples=samples,
        activities=[
            {
                "ResourceId": "inference-component/co-eval-week-49-us",
                "Description": "Setting desired copy count to 3.",
                "Cause": "monitor alarm TargetTracking-inference-component/co-eval-week-49-us-AlarmHigh-1 "
                "in state ALARM triggered policy p",
                "StartTime": T0 + timedelta(hours=7),
                "StatusCode": "Successful",
            }
        ],
    )
    result.hours[("eu", T0)] = HourCount(sent=300, served=290, failed=10)
    return result


def test_report_json_and_png_hold_both_models_series_and_the_comparison(tmp_path: Path) -> None:
    ledger = [
        {
            "sk": "SCALE#2026-12-08T06:01:00.000Z#us#no-capacity",
            "at": "2026-12-08T06:01:00.000Z",
            "model": "us",
            "action": "scale_out_from_zero",
            "from_copies": 0,
            "to_copies": 1,
            "failed_requests": 7,
            "reason": "alarm .../us/no-capacity",
        }
    ]
    report = build_report(_result(), _profile(), ledger=ledger)

    json_path, png_path = write_report(report, tmp_path / "reports")

    assert json_path == tmp_path / "reports/eval-week-49.json"
    saved = json.loads(json_path.read_text())
    assert saved["series"]["copies"] == {"eu": [5, 3, 0, 0], "us": [0, 2, 3, 0]}
    assert saved["series"]["instances"] == [2, 2, 1, 0]
    assert saved["instance_hours"]["saving_percent"] == 41.7
    assert saved["traffic"]["eu"]["failed_no_capacity"] == 10
    events = saved["scale_events"]
    assert [(e["at"], e["model"], e["action"], e["from_copies"], e["to_copies"]) for e in events] == [
        (
            "2026-12-08T06:01:00Z",
            "us",
            "scale_out_from_zero",
            0,
            1,
        ),
        ("2026-12-08T07:00:00Z", "us", "scale", 1, 3),
    ]
    assert events[1]["reason"].startswith("target tracking: invocations per copy above the target")
    png = png_path.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])  # the IHDR chunk
    assert (width, height) == (1100, 600)
    assert len(png) > 20_000  # two panels of lines, legends and labels, not an empty canvas


def test_the_chart_worker_draws_the_png_this_process_draws(tmp_path: Path) -> None:
    report = build_report(_result(), _profile(), ledger=[])
    _json_path, here = write_report(report, tmp_path / "here")

    with ChartWorker() as worker:
        _json_path, there = write_report(report, tmp_path / "worker", chart=worker)

    assert there.read_bytes() == here.read_bytes()


def test_a_chart_worker_that_failed_leaves_the_drawing_to_this_process(tmp_path: Path) -> None:
    report = build_report(_result(), _profile(), ledger=[])
    _json_path, here = write_report(report, tmp_path / "here")
    worker = ChartWorker()
    assert worker._child is not None
    worker._child.kill()  # the child dies before it is asked (a crash, an out-of-memory kill)
    worker._child.wait()

    _json_path, there = write_report(report, tmp_path / "worker", chart=worker)

    assert there.read_bytes() == here.read_bytes()
