"""Benchmark 5: wall time of the demo and of the test suite.

The demo is ``make demo``'s command (``python -m localcloud run events/api_post_reservation.json``: the
whole reservation, from POST /reservations to the release, on the local cloud). The suite is one plain
``pytest`` run of tests/ (what ``make test`` runs, without its coverage measurement and the lint, type and
template steps before it). ``make bench QUICK=1`` skips the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from bench.report import Section

ROOT = Path(__file__).resolve().parents[1]


def _timed(command: list[str]) -> tuple[float, int, str]:
    """(wall seconds, exit code, last line of output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "layers/capacity")])
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    elapsed = time.perf_counter() - began
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return elapsed, done.returncode, lines[-1].strip("= ") if lines else ""


def run(quick: bool = False) -> Section:
    """Time the demo, and the test suite unless ``quick``."""
    rows = [["what", "command", "wall time (s)", "exit", "last line"]]
    demo = [sys.executable, "-m", "localcloud", "run", "events/api_post_reservation.json"]
    elapsed, code, last = _timed(demo)
    print(f"   demo: {elapsed:.1f} s (exit {code})")
    rows.append(["demo", "`make demo`", f"{elapsed:.1f}", str(code), last])
    notes = []
    if quick:
        notes.append("Test suite not timed (`make bench QUICK=1`).")
    else:
        suite = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        elapsed, code, last = _timed(suite)
        print(f"   test suite: {elapsed:.1f} s (exit {code}: {last})")
        rows.append(["test suite", "`pytest -q` (tests/)", f"{elapsed:.1f}", str(code), last])
    return Section(
        title="5. Demo and test suite wall time",
        method=(
            "One run each, as subprocesses of the benchmark. The demo is the whole reservation from POST "
            "/reservations to the release on the local cloud (simulated time: the week of waiting costs "
            "nothing). The suite is one plain `pytest` over tests/ (`make test` adds coverage measurement, "
            "lint, types and the template checks)."
        ),
        table=rows,
        notes=notes,
    )
