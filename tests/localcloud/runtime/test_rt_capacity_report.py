"""Reserved capacity against what ran, from ledger items (localcloud/capacity_report.py): the series, the
marks, the sizing line of the cost summary, the chart's capacity panel, and one file per demo."""

from __future__ import annotations

import json
import re
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localcloud.capacity_report import capacity_view, format_capacity, sizing_lines
from localcloud.report import write_report

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 12, 20, tzinfo=UTC)


def _state(
    at: str, state: str, detail: dict[str, Any] | None = None, money: str | None = None
) -> dict[str, Any]:
    return {"sk": f"STATE#{at}#0000", "state": state, "at": at, "detail": detail or {}, "money_usd": money}


def _usage(at: str, instances: int) -> dict[str, Any]:
    return {"sk": f"USAGE#{at}#abc123", "instances": instances, "source": "scale"}


def _purchase(start: str, end: str, fee: str, region: str = "us-east-1") -> dict[str, Any]:
    return {
        "sk": "PURCHASE",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 2,
        "region": region,
        "start_time": start,
        "end_time": end,
        "upfront_fee_usd": fee,
    }


# The demo-extend story in small: 2 instances reserved 12-06 11:30 -> 12-09 11:30, extended a day, then
# rolled over to a successor in us-west-2; one instance at most ever serves (the models share it).
LEDGERS = {
    "eval": [
        _purchase("2026-12-06T11:30:00Z", "2026-12-09T11:30:00Z", "2170.12"),
        _state("2026-11-29T12:00:00.000Z", "PURCHASED"),
        _state("2026-12-06T11:41:00.000Z", "READY"),
        _state("2026-12-07T11:35:00.000Z", "EXTENDED", {"end_time": "2026-12-10T11:30:00Z"}, money="764.25"),
        _state("2026-12-10T10:30:00.000Z", "RELEASING"),
        _usage("2026-12-06T11:30:00.000Z", 0),  # the plan at activation: before service, not counted
        _usage("2026-12-06T11:41:00.000Z", 1),
        {
            "sk": "ROLLED_OVER",
            "successor_id": "eval-r2",
            "region": "us-west-2",
            "written_at": "2026-12-10T11:41:00.000Z",
        },
    ],
    "eval-r2": [
        _purchase("2026-12-10T11:30:00Z", "2026-12-12T11:30:00Z", "1371.78", region="us-west-2"),
        _state("2026-12-08T11:30:00.000Z", "PURCHASED"),
        _state("2026-12-10T11:41:00.000Z", "READY"),
        _state("2026-12-12T10:30:00.000Z", "RELEASING"),
        _usage("2026-12-10T11:41:00.000Z", 1),
    ],
    "searching": [_state("2026-11-29T12:00:00.000Z", "SEARCHING")],  # nothing bought: not shown
}


def test_reserved_against_ran_with_the_extension_and_the_roll_over() -> None:
    view = capacity_view(LEDGERS, now=NOW)

    series = view["series"]
    assert list(zip(series["at"], series["reserved"], series["ran"], strict=True)) == [
        ("2026-12-06T11:30:00Z", 2, 0),
        ("2026-12-06T11:41:00Z", 2, 1),
        ("2026-12-10T10:30:00Z", 2, 0),  # released an hour before its extended end: paid, nothing serves
        ("2026-12-10T11:30:00Z", 2, 0),  # the successor's hours begin where the first's end
        ("2026-12-10T11:41:00Z", 2, 1),
        ("2026-12-12T10:30:00Z", 2, 0),
        ("2026-12-12T11:30:00Z", 0, 0),
    ]
    assert view["instance_hours"] == {"reserved": 288.0, "ran": 141.63, "idle": 146.37}
    assert [(m["at"], m["kind"], m["request_id"]) for m in view["marks"]] == [
        ("2026-11-29T12:00:00Z", "purchase", "eval"),
        ("2026-12-07T11:35:00Z", "extension", "eval"),
        ("2026-12-08T11:30:00Z", "purchase", "eval-r2"),
        ("2026-12-10T10:30:00Z", "release", "eval"),
        ("2026-12-10T11:41:00Z", "roll-over", "eval"),
        ("2026-12-12T10:30:00Z", "release", "eval-r2"),
    ]
    first = view["reservations"][0]
    assert (first["end"], first["fee_usd"], first["peak_in_service"]) == (
        "2026-12-10T11:30:00Z",
        "2934.37",
        1,
    )


def test_the_cost_summary_says_the_reservation_was_larger_than_its_peak_and_by_how_much() -> None:
    view = capacity_view(LEDGERS, now=NOW)

    assert sizing_lines(view, "eval") == [
        "    larger than its peak: 2 x ml.p5.48xlarge reserved, at most 1 in service (first at 12-06 11:41 "
        "UTC): 1 instance(s) more than ever ran, 96.00 of its 192.00 reserved instance-hours (50%, about "
        "$1,467.18 of the fee) could never be used; 1 x would have served what ran"
    ]
    assert sizing_lines(view, "searching") == []  # nothing bought


def test_a_reservation_sized_to_its_peak_says_nothing_more() -> None:
    ledgers = {
        "ec2": [
            _purchase("2026-12-07T11:30:00Z", "2026-12-10T11:30:00Z", "4871.56"),
            _state("2026-12-01T08:00:00.000Z", "PURCHASED"),
            _state("2026-12-07T11:30:30.000Z", "READY"),
            _state("2026-12-10T10:50:00.000Z", "RELEASING"),
            _usage("2026-12-07T11:30:30.000Z", 2),
        ]
    }

    view = capacity_view(ledgers, now=NOW)

    assert sizing_lines(view, "ec2") == []
    assert view["reservations"][0]["peak_in_service"] == 2
    assert "instance-hours: 144.00 reserved, 142.65 ran, 1.35 idle (1%)" in format_capacity(view)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def test_a_run_without_traffic_gets_the_capacity_chart_under_its_own_name(tmp_path: Path) -> None:
    view = capacity_view(LEDGERS, now=NOW)
    report = {"name": "demo-extend", "reservation": "eval", "capacity": view}

    json_path, png_path = write_report(report, tmp_path, name="demo-extend")

    assert (json_path.name, png_path.name) == ("demo-extend.json", "demo-extend.png")
    assert json.loads(json_path.read_text())["capacity"]["instance_hours"]["idle"] == 146.37
    assert _png_size(png_path) == (1100, 450)
    assert png_path.stat().st_size > 20_000  # lines, shading, marks and legend: not an empty canvas


def test_each_demo_writes_its_own_report() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    names = {}
    for target in ("demo", "demo-ec2", "demo-extend"):
        recipe = re.search(rf"^{target}: venv\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE)
        assert recipe is not None, target
        found = re.search(r"--report-name (\S+)", recipe.group(1))
        assert found is not None, f"make {target} names no report"
        names[target] = found.group(1)

    assert names == {"demo": "demo", "demo-ec2": "demo-ec2", "demo-extend": "demo-extend"}
