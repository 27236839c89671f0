"""``python -m bench [--quick] [--only N ...]``: run the benchmarks, print them, write docs/benchmarks.md.

``make bench`` runs this with the repository and the layer on ``PYTHONPATH``; ``make bench QUICK=1`` passes
``--quick`` (fewer cold-start samples, no test-suite timing). ``--only`` runs some benchmarks and leaves
docs/benchmarks.md alone.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from bench import (
    cold_start,
    costs_read,
    goals,
    keep_looking,
    ranking,
    right_size,
    search_latency,
    slack_ack,
    transitions,
    walltime,
)
from bench.report import Section

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs/benchmarks.md"
KEPT = "<!-- Written by hand below this line: make bench keeps it as it is. -->"
"""docs/benchmarks.md from this line on is prose (decisions and the figures behind them), not a run's output:
:func:`main` rewrites what comes before it and keeps the rest."""
BENCHMARKS: dict[str, Callable[[bool], Section]] = {
    "1": transitions.run,
    "2": cold_start.run,
    "3": slack_ack.run,
    "4": search_latency.run,
    "5": walltime.run,
    "6": ranking.run,
    "7": goals.run,
    "8": right_size.run,
    "9": costs_read.run,
    "10": keep_looking.run,
}


def _machine() -> str:
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPU(s), "
        f"Python {platform.python_version()}, load average {load} at the end (a machine shared with "
        "other work: treat the figures as orders of magnitude, compare rows of one run)"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; returns the exit code (0)."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer samples; skip the test-suite timing")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")
    args = parser.parse_args(argv)
    chosen = args.only or list(BENCHMARKS)
    sections = []
    began = time.perf_counter()
    for key in chosen:
        print(f">> benchmark {key}", flush=True)
        section = BENCHMARKS[key](args.quick)
        print(section.text(), flush=True)
        sections.append(section)
    elapsed = time.perf_counter() - began
    if args.only:
        return 0
    command = "make bench QUICK=1" if args.quick else "make bench"
    header = [
        "# Benchmarks",
        "",
        "Written by `make bench` (`python -m bench`, code in `bench/`); every figure below comes from the "
        "run described here. They are measurements, not tests: nothing fails on a slow figure.",
        "",
        f"- Command: `{command}` ({elapsed:.0f} s)",
        f"- Date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {_machine()}",
        "",
    ]
    old = DOC.read_text() if DOC.is_file() else ""
    kept = old[old.index(KEPT) :] if KEPT in old else ""
    measured = "\n".join(header) + "\n" + "\n".join(s.markdown() for s in sections).rstrip() + "\n"
    DOC.write_text(measured + ("\n" + kept if kept else ""))
    print(f">> wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
