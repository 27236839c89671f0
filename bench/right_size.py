"""Benchmark 8: the serving simulation of one candidate over a 72-hour profile (issue 33).

``servingsim.simulate`` on the demo's load (``events/traffic_two_models.json``: two models, 2 accelerators
a copy, up to 4 copies each) on 1 and on 2 x ml.p5.48xlarge for 72 h, and on a busy profile (10,000
requests a minute every hour, a per-copy capacity): the median of repeated runs, in milliseconds. Then
``capacity.rightsize.size`` of the demo's request (every candidate count, what ``POST /plans`` and a
``right_size`` purchase run). The goal: well under a second per candidate (it steps by CloudWatch's
one-minute periods, 4,320 for 72 h, whatever the rate).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from capacity.request import parse_request

from bench.report import Section, ms
from servingsim import Hardware, ModelLoad, Requirements, simulate

ROOT = Path(__file__).resolve().parents[1]
START = datetime(2026, 12, 6, tzinfo=UTC)
P5 = Hardware(8, 192, 2048 * 1024)
LLAMA = Requirements(2, 16, 131072)


def _median_seconds(run: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def _one(loads: list[ModelLoad], count: int) -> Callable[[], object]:
    return lambda: simulate(P5, count, loads, start=START, hours=72)


def run(quick: bool) -> Section:
    """Time the simulation (see the module docstring)."""
    repeat = 5 if quick else 21
    profile = json.loads((ROOT / "events/traffic_two_models.json").read_text())
    demo = [ModelLoad(m["model"], LLAMA, 1, 0, 4, m["requests_per_minute"]) for m in profile["models"]]
    busy = [ModelLoad("busy", LLAMA, 1, 1, 4, [10_000.0] * 24, requests_per_minute_per_copy=100.0)]
    event = json.loads((ROOT / "events/api_post_reservation.json").read_text())
    body = json.loads(event["body"])
    body["load"] = {
        "models": [
            {"model": m["model"], "requests_per_minute": m["requests_per_minute"]} for m in profile["models"]
        ]
    }
    request = parse_request(body, now=None)
    assert request.load is not None  # noqa: S101 - the body above sets it
    load = request.load
    rows = [["what", "candidates", "median (ms)", "per candidate (ms)"]]
    for label, loads, count in (
        ("demo load, 1 x ml.p5.48xlarge, 72 h", demo, 1),
        ("demo load, 2 x ml.p5.48xlarge, 72 h", demo, 2),
        ("10,000 requests/min, 1 x, 72 h", busy, 1),
    ):
        seconds = _median_seconds(_one(loads, count), repeat)
        rows.append([label, "1", ms(seconds), ms(seconds)])
    candidates = len(request.simulate_load(load).candidates)
    seconds = _median_seconds(lambda: request.simulate_load(load), repeat)
    rows.append(
        ["rightsize.size of the demo's request", str(candidates), ms(seconds), ms(seconds / candidates)]
    )
    return Section(
        title="8. Right-size: one candidate over a 72-hour profile",
        method=__doc__.split("\n\n", 1)[1].strip() if __doc__ else "",
        table=rows,
        notes=[f"Median of {repeat} runs each. Goal: well under 1 s per candidate."],
    )
