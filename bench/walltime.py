"""Benchmark 5: wall time of the demo and of the test suite.

The demo is ``make demo``'s command (``python -m localcloud run events/api_post_reservation.json --traffic
events/traffic_two_models.json``: the whole reservation, from POST /reservations to the release, with a
week of traffic replayed, on the local cloud). The suite is ``make test`` itself, what CI runs: lint, types,
template checks, the IaC scan and pytest on every core with line coverage. ``make bench QUICK=1`` skips
the suite.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench.report import Section

ROOT = Path(__file__).resolve().parents[1]
PYTEST_SECONDS: list[float] = []
"""pytest's own seconds from the last ``make test`` this process timed (benchmark 7 reads it)."""


_PYTEST_SUMMARY = re.compile(r"=+ (?P<counts>\d+ passed.*?) in (?P<seconds>[\d.]+)s")


def _timed(command: list[str]) -> tuple[float, int, str, str]:
    """(wall seconds, exit code, last line of output, whole output)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "layers/capacity")])
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    elapsed = time.perf_counter() - began
    output = done.stdout + done.stderr
    lines = [line for line in output.splitlines() if line.strip()]
    return elapsed, done.returncode, lines[-1].strip("= ") if lines else "", output


def pytest_summary(output: str) -> tuple[float, str] | None:
    """(seconds, counts) of pytest's last summary line in ``output`` ("1225 passed, 1 skipped in 513.2s"),
    or None when pytest did not get that far."""
    found = list(_PYTEST_SUMMARY.finditer(output))
    return (float(found[-1]["seconds"]), found[-1]["counts"]) if found else None


def run(quick: bool = False) -> Section:
    """Time the demo, and the test suite unless ``quick``."""
    rows = [["what", "command", "wall time (s)", "exit", "last line"]]
    demo = [
        sys.executable,
        "-m",
        "localcloud",
        "run",
        "events/api_post_reservation.json",
        "--traffic",
        "events/traffic_two_models.json",
    ]
    elapsed, code, last, _output = _timed(demo)
    print(f"   demo: {elapsed:.1f} s (exit {code})")
    rows.append(["demo", "`make demo`", f"{elapsed:.1f}", str(code), last])
    notes = []
    if quick:
        notes.append("Test suite not timed (`make bench QUICK=1`).")
    else:
        elapsed, code, last, output = _timed(["make", "--no-print-directory", "test"])
        print(f"   make test: {elapsed:.1f} s (exit {code}: {last})")
        rows.append(["test suite and gates", "`make test`", f"{elapsed:.1f}", str(code), last])
        summary = pytest_summary(output)
        if summary is not None:
            PYTEST_SECONDS.append(summary[0])
            rows.append(
                ["pytest alone (inside `make test`)", "`make unit`", f"{summary[0]:.1f}", "-", summary[1]]
            )
    return Section(
        title="5. Demo and test suite wall time",
        method=(
            "One run each, as subprocesses of the benchmark. The demo is the whole reservation from POST "
            "/reservations to the release on the local cloud (simulated time: the week of waiting costs "
            "nothing), with a week of traffic replayed. The suite is `make test`, what CI runs: ruff, mypy, "
            "cfn-lint, `sam validate --lint`, `sam build`, checkov and pytest on every core with line "
            "coverage; CI's budget for it is 10 minutes."
        ),
        table=rows,
        notes=notes,
    )
