"""The traffic report's chart (``reports/<reservation>.png``), and a worker process that draws it.

matplotlib costs about a second of CPU to import and draw, most of it the import: a tenth of ``make demo``.
:class:`ChartWorker` starts ``python -m localcloud.chart`` when a run begins; the child imports matplotlib
on the machine's other core while the simulation runs, waits, and draws the chart from the report's JSON
file when :meth:`ChartWorker.draw` asks. The PNG is the one :func:`draw_chart` draws in the run's own
process (the same code, from the same values: the JSON file is what the chart reads either way), and a
worker that cannot start or fails leaves the drawing to the run's own process.

This module imports only the standard library at the top: the worker must not load the local cloud.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any


def parse_utc(text: str) -> datetime:
    """An ISO 8601 instant (``...Z`` or with an offset; naive means UTC) as a tz-aware datetime."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _import_pyplot() -> Any:
    import matplotlib  # noqa: PLC0415 - heavy, and only the chart needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def draw_chart(report: dict[str, Any], path: Path) -> None:
    """A PNG with two panels sharing the UTC time axis: copies per model (top) and the endpoint's
    instances (bottom), as step lines; the title gives the instance-hours comparison.

    ``report`` is :func:`localcloud.report.build_report`'s (or its JSON file's) dict."""
    plt = _import_pyplot()
    import matplotlib.dates as mdates  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    series = report["series"]
    times = [parse_utc(text) for text in series["at"]]
    figure, (top, bottom) = plt.subplots(
        2, 1, figsize=(11, 6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    try:
        for model, copies in series["copies"].items():
            top.step(times, copies, where="post", label=model, linewidth=1.6)
        top.set_ylabel("copies (CurrentCopyCount)")
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        top.grid(alpha=0.3)
        top.set_ylim(bottom=0)
        top.yaxis.set_major_locator(MaxNLocator(integer=True))
        bottom.step(
            times, series["instances"], where="post", color="black", linewidth=1.6, label="shared endpoint"
        )
        comparison = report["instance_hours"]
        dedicated = sum(item["instances"] for item in comparison["models"].values())
        bottom.axhline(dedicated, color="tab:red", linestyle="--", label="dedicated\nendpoints (sum)")
        bottom.set_ylabel("instances")
        bottom.set_ylim(0, max([dedicated, *series["instances"]]) + 1)
        bottom.yaxis.set_major_locator(MaxNLocator(integer=True))
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
        bottom.grid(alpha=0.3)
        bottom.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))  # type: ignore[no-untyped-call]
        bottom.set_xlabel("UTC")
        figure.suptitle(
            f"{report['reservation']} on {report['endpoint']} ({report['instance_type']}): "
            f"{comparison['shared_endpoint']:.1f} instance-hours shared vs "
            f"{comparison['dedicated_endpoints']:.1f} dedicated ({comparison['saving_percent']:.1f}% saved)"
        )
        figure.autofmt_xdate()
        figure.tight_layout()
        figure.savefig(path, dpi=100, format="png")
    finally:
        plt.close(figure)


class ChartWorker:
    """A child process that imports matplotlib now and draws one chart later (see the module docstring).

    Use it as a context manager: leaving it ends the child if no chart was asked for.
    """

    def __init__(self) -> None:
        self._child: subprocess.Popen[bytes] | None
        try:
            self._child = subprocess.Popen(
                [sys.executable, "-m", "localcloud.chart"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError:
            self._child = None

    def draw(self, json_path: Path, png_path: Path) -> None:
        """Draw the chart of the report in ``json_path`` into ``png_path``; in this process when the worker
        could not start or failed (its error is then this process's own).

        Raises:
            whatever :func:`draw_chart` raises in this process.
        """
        child, self._child = self._child, None
        if child is not None:
            request = json.dumps({"report": str(json_path), "png": str(png_path)}).encode() + b"\n"
            try:
                child.communicate(request)
            except OSError:
                child.kill()
                child.wait()
            if child.returncode == 0:
                return
        draw_chart(json.loads(Path(json_path).read_text(encoding="utf-8")), png_path)

    def close(self) -> None:
        """End the child without a chart (it exits when its input closes)."""
        child, self._child = self._child, None
        if child is not None:
            child.communicate(b"")

    def __enter__(self) -> ChartWorker:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def _serve() -> int:
    """The child: import matplotlib, then draw the one chart asked on stdin (nothing asked: exit 0)."""
    _import_pyplot()
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    request = json.loads(line)
    draw_chart(json.loads(Path(request["report"]).read_text(encoding="utf-8")), Path(request["png"]))
    return 0


if __name__ == "__main__":
    sys.exit(_serve())
