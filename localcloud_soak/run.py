"""The soak itself (:func:`soak`): many lifecycles over worker processes, the report
(:func:`format_report`), and the command line (``python -m localcloud soak``, ``python -m localcloud_soak``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from localcloud.faults import FaultKind
from localcloud_soak.lifecycle import LifecycleResult, run_lifecycle
from localcloud_soak.scenario import DEFAULT_STALL_SECONDS, make_scenario


@dataclass
class SoakReport:
    """The soak's figures: lifecycles per outcome, faults fired per kind, violations, wall time."""

    seed: int
    results: list[LifecycleResult]
    wall_seconds: float

    @property
    def outcomes(self) -> Counter[str]:
        """Lifecycles per outcome."""
        return Counter(r.outcome for r in self.results)

    @property
    def routes(self) -> Counter[str]:
        """Lifecycles per ``<platform> <strategy> -> <what ran>`` (:func:`route`)."""
        return Counter(r.route for r in self.results)

    @property
    def faults(self) -> Counter[str]:
        """Faults fired per kind, over every lifecycle."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.faults)
        return total

    @property
    def api_statuses(self) -> Counter[str]:
        """API answers and bus deliveries, per kind and status."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.api_statuses)
        return total

    @property
    def failure_errors(self) -> Counter[str]:
        """FAILED ledger entries per error name (why lifecycles failed)."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(f.split(":", 1)[0] for f in r.failures)
        return total

    @property
    def failed(self) -> list[LifecycleResult]:
        """The lifecycles that broke a rule."""
        return [r for r in self.results if r.violations]


def _run_one(args: tuple[int, int, float | None, bool]) -> LifecycleResult:
    seed, index, stall_seconds, timeline = args
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    scenario = make_scenario(seed, index)
    began = time.monotonic()
    try:
        return run_lifecycle(scenario, stall_seconds=stall_seconds, timeline=timeline)
    except Exception as exc:  # the soak's own failure is reported like a violation, not lost
        return LifecycleResult(
            index=index,
            seed=scenario.seed,
            scenario=scenario.describe(),
            outcome="SOAK_ERROR",
            violations=[f"the soak could not run the lifecycle: {type(exc).__name__}: {str(exc)[:500]}"],
            faults={},
            api_statuses={},
            wall_seconds=time.monotonic() - began,
        )


def _worker_init() -> None:
    # A worker's own output is the Lambdas' logs: nobody reads it.
    devnull = Path(os.devnull).open("w")  # noqa: SIM115 - lives as long as the worker process
    sys.stdout = sys.stderr = devnull


def soak(
    seed: int,
    count: int,
    *,
    workers: int = 1,
    only: Sequence[int] | None = None,
    stall_seconds: float | None = DEFAULT_STALL_SECONDS,
    timeline: bool = False,
    progress: Callable[[LifecycleResult, int, int], None] | None = None,
) -> SoakReport:
    """Run lifecycles ``0..count-1`` (or just ``only``) of the soak seeded ``seed``.

    Args:
        workers: processes to run lifecycles in (1: in this process, one after the other).
        stall_seconds: the hang detector's limit in each lifecycle (None: the default).
        timeline: keep each lifecycle's timeline (printed for the lifecycles that broke a rule).
        progress: called after each lifecycle with (result, done, total).
    """
    indexes = list(only) if only else list(range(count))
    began = time.monotonic()
    results: list[LifecycleResult] = []
    jobs = [(seed, index, stall_seconds, timeline) for index in indexes]
    if workers <= 1:
        for job in jobs:
            results.append(_run_one(job))
            if progress:
                progress(results[-1], len(results), len(jobs))
    else:
        import multiprocessing  # noqa: PLC0415

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init) as pool:
            # As each finishes, not in order: one long lifecycle must not hide the others' progress.
            for future in as_completed([pool.submit(_run_one, job) for job in jobs]):
                results.append(future.result())
                if progress:
                    progress(results[-1], len(results), len(jobs))
        results.sort(key=lambda result: result.index)
    return SoakReport(seed=seed, results=results, wall_seconds=time.monotonic() - began)


def format_report(report: SoakReport) -> str:
    """The figures and every violation, with how to reproduce it."""
    n = len(report.results)
    lines = [f"fault soak: seed {report.seed}, {n} lifecycles in {report.wall_seconds:.0f} s wall"]
    if n:
        slowest = max(report.results, key=lambda r: r.wall_seconds)
        mean = sum(r.wall_seconds for r in report.results) / n
        lines.append(
            f"  per lifecycle: mean {mean:.1f} s, slowest {slowest.wall_seconds:.1f} s (#{slowest.index})"
        )
    lines.append("lifecycles per outcome:")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.outcomes.items()))
    lines.append("lifecycles per platform, strategy -> what ran:")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.routes.items()))
    lines.append("faults fired per kind:")
    faults = report.faults
    lines.extend(f"  {kind.value:<34} {faults.get(kind.value, 0):>5}" for kind in FaultKind)
    if report.failure_errors:
        lines.append("FAILED ledger entries per error (failures the faults caused, each notified):")
        lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.failure_errors.items()))
    lines.append("requests (API answers by status, bus deliveries):")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.api_statuses.items()))
    waits = sorted(
        r.cancel_to_released_hours for r in report.results if r.cancel_to_released_hours is not None
    )
    if waits:
        p95 = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))]
        lines.append(
            f"cancel -> released (virtual hours, {len(waits)} cancels of something bought): median "
            f"{waits[len(waits) // 2]:.2f}, p95 {p95:.2f}, max {waits[-1]:.2f}"
        )
    looked = Counter(r.looking for r in report.results if r.looking is not None)
    if looked:
        lines.append("keeping looking (search_until) came to:")
        lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(looked.items()))
    kept = Counter(r.keep_serving for r in report.results if r.keep_serving)
    if kept:
        lines.append("keep serving (serve_until) -> what it led to:")
        lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(kept.items()))
    failed = report.failed
    if not failed:
        lines.append(
            f"invariants: OK in {n} lifecycles (no double purchase or extension, none above budget or the "
            "total budget (extensions included), every extension paid recorded, "
            "the ledger's money equal to what AWS charged, every purchase recorded with its release "
            "schedule, "
            "none without approval or approved by its requester or above the approved fee, no paid "
            "reservation thrown away, no cancel or approval lost, every copy change recorded, nothing "
            "billable left, every lifecycle final, every failure notified, every purchase within its window, "
            "no look after the deadline or the outcome and no giving up before it, nothing bought or charged "
            "for a brought reservation, every roll-over bought once per successor within the chain's budget "
            "and released only after its successor served, no money paid for hours nothing could serve, "
            "no spend approved by whoever caused it, no request changed by an invalid delivery)"
        )
        return "\n".join(lines)
    lines.append(f"INVARIANT VIOLATIONS in {len(failed)} of {n} lifecycles:")
    for r in failed:
        lines.append(f"- lifecycle #{r.index} (seed {r.seed}): {r.outcome}; states {' -> '.join(r.states)}")
        lines.append(f"    scenario: {r.scenario}")
        lines.extend(f"    failure: {f}" for f in r.failures)
        lines.extend(f"    VIOLATION: {v}" for v in r.violations)
        lines.extend(f"    api: {a}" for a in r.answers[:3])
        if r.timeline:
            lines.append("    timeline:")
            lines.extend(f"      {line}" for line in r.timeline.splitlines())
        lines.append(
            f"    reproduce: make soak SEED={report.seed} ONLY={r.index}   "
            f"(python -m localcloud soak --seed {report.seed} --only {r.index})"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The soak's command line (``python -m localcloud soak`` and ``python -m localcloud_soak``)."""
    parser = argparse.ArgumentParser(
        prog="python -m localcloud soak",
        description="Randomized reservation lifecycles with injected faults, checked for the money rules.",
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the soak's options to ``parser``."""
    parser.add_argument(
        "--seed", type=int, default=1, help="the soak's seed (each lifecycle's derives from it)"
    )
    parser.add_argument("--count", type=int, default=200, help="how many lifecycles")
    parser.add_argument(
        "--only", type=int, action="append", metavar="INDEX", help="run just this lifecycle (repeatable)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes running lifecycles (default: 2, or 1 on a 1-CPU machine)",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=DEFAULT_STALL_SECONDS,
        help="hang detector: a lifecycle fails after this many real seconds without progress (virtual time "
        "still, no invocation); default 600, or LOCALCLOUD_STALL_SECONDS. No lifecycle fails for being slow",
    )
    parser.add_argument("--verbose", action="store_true", help="print one line per lifecycle")
    parser.add_argument(
        "--timeline", action="store_true", help="print the whole timeline of each lifecycle that broke a rule"
    )


def run_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the soak from parsed arguments; returns the exit status (0: every invariant held)."""
    stream = out or sys.stdout
    step = max(1, args.count // 10)

    def progress(result: LifecycleResult, done: int, total: int) -> None:
        if args.verbose or result.violations:
            mark = "VIOLATION" if result.violations else "ok"
            print(
                f"  #{result.index:<4} {result.outcome:<28} {result.wall_seconds:5.1f} s  {mark}",
                file=stream,
                flush=True,
            )
        elif done % step == 0 or done == total:
            print(f"  {done}/{total} lifecycles done", file=stream, flush=True)

    logging.getLogger("moto").setLevel(logging.CRITICAL)
    report = soak(
        args.seed,
        args.count,
        workers=args.workers,
        only=args.only,
        stall_seconds=args.stall_seconds,
        timeline=args.timeline,
        progress=progress,
    )
    print(format_report(report), file=stream, flush=True)
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m localcloud_soak``."""
    return run_command(build_parser().parse_args(argv))
