"""``python -m localcloud run`` with ``--report-name``: the sample request's run writes its own report of
reserved capacity against what ran, and its cost summary says the reservation was larger than the most that
ever ran on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localcloud.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_the_sample_run_reports_reserved_against_ran_and_its_oversize(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "run",
            str(ROOT / "events" / "api_post_reservation.json"),
            "--template",
            str(ROOT / "template.yaml"),
            "--report-name",
            "sample",
            "--reports-dir",
            str(tmp_path),
            "--progress",
            "never",
        ]
    )
    out = capsys.readouterr().out

    assert status == 0, out
    capacity = json.loads((tmp_path / "sample.json").read_text())["capacity"]
    assert (tmp_path / "sample.png").read_bytes()[:4] == b"\x89PNG"
    assert max(capacity["series"]["reserved"]) == 2
    assert max(capacity["series"]["ran"]) == 1  # the two models share one instance of the two bought
    assert [m["kind"] for m in capacity["marks"]] == ["purchase", "release"]
    assert "== Reserved against what ran (the chart's top panel)" in out
    assert "The sharing comparison above" not in out  # no traffic, no sharing comparison to explain
    assert (
        "    larger than its peak: 2 x ml.p5.48xlarge reserved, at most 1 in service (first at 12-08 11:41 "
        "UTC): 1 instance(s) more than ever ran, 72.00 of its 144.00 reserved instance-hours (50%, about "
        "$995.30 of the fee) could never be used; 1 x would have served what ran"
    ) in out
