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


MARK_COLOURS = {
    "purchase": "tab:green",
    "extension": "tab:orange",
    "roll-over": "tab:purple",
    "release": "tab:red",
}
"""The colour of each kind of mark on the capacity panel."""
SHORT = {"purchase": "bought", "extension": "extended", "roll-over": "moved off", "release": "released"}
"""The label of each kind of mark beside its line (the JSON's ``marks`` say it in full)."""


def draw_chart(report: dict[str, Any], path: Path) -> None:
    """A PNG of the run. With traffic (``series``): copies per model and the endpoint's instances, as step
    lines sharing the UTC time axis, the title giving the instance-hours comparison. With ``capacity``
    (:func:`localcloud.capacity_report.capacity_view`): a panel of reserved instances against instances in
    service, the idle reserved capacity between them shaded, and the purchases, extensions, roll-overs and
    releases marked; above the traffic panels, or alone for a run without traffic.

    ``report`` is :func:`localcloud.report.build_report`'s (or its JSON file's) dict."""
    plt = _import_pyplot()
    capacity = report.get("capacity") or {}
    if not capacity.get("reservations"):
        capacity = {}
    if "series" not in report:
        figure, axis = plt.subplots(1, 1, figsize=(11, 4.5))
        try:
            _capacity_panel(axis, capacity)
            figure.suptitle(str(report.get("name") or report.get("reservation") or ""))
            figure.tight_layout()
            figure.savefig(path, dpi=100, format="png")
        finally:
            plt.close(figure)
        return
    if capacity:
        figure = plt.figure(figsize=(11, 9))
        grid = figure.add_gridspec(3, 1, height_ratios=[2.5, 3, 2])
        _capacity_panel(figure.add_subplot(grid[0]), capacity)
        top = figure.add_subplot(grid[1])
        bottom = figure.add_subplot(grid[2], sharex=top)
    else:
        figure, (top, bottom) = plt.subplots(
            2, 1, figsize=(11, 6), sharex=True, gridspec_kw={"height_ratios": [3, 2]}
        )
    try:
        _traffic_panels(report, figure, top, bottom)
        figure.tight_layout()
        figure.savefig(path, dpi=100, format="png")
    finally:
        plt.close(figure)


def _capacity_panel(axis: Any, capacity: dict[str, Any]) -> None:
    """Reserved (thick, pale) against in service (thin, black), idle capacity shaded, the marks as vertical
    lines; a mark before the panel's window (a purchase days ahead) is written at its left edge."""
    import matplotlib.dates as mdates  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    if not capacity:
        axis.text(0.5, 0.5, "nothing was bought", ha="center", va="center", transform=axis.transAxes)
        axis.set_axis_off()
        return
    series = capacity["series"]
    times = [parse_utc(text) for text in series["at"]]
    reserved, ran = series["reserved"], series["ran"]
    axis.step(
        times, reserved, where="post", color="tab:blue", alpha=0.6, linewidth=3, label="reserved (paid)"
    )
    axis.step(times, ran, where="post", color="black", linewidth=1.6, label="in service (ran)")
    axis.fill_between(
        times,
        ran,
        reserved,
        where=[r > u for r, u in zip(reserved, ran, strict=True)],
        step="post",
        color="tab:orange",
        alpha=0.3,
        label="idle: reserved, not used",
    )
    starts = [parse_utc(r["start"]) for r in capacity["reservations"]]
    ends = [parse_utc(r["end"]) for r in capacity["reservations"]]
    margin = (max(ends) - min(starts)) / 40
    left, right = min(starts) - margin, max(ends) + margin
    top = max([*reserved, *ran, 1]) + 1
    axis.set_xlim(left, right)
    axis.set_ylim(0, top)
    earlier: list[str] = []
    for mark in capacity.get("marks") or []:
        at = parse_utc(mark["at"])
        colour = MARK_COLOURS.get(mark["kind"], "grey")
        if at < left:
            earlier.append(f"{at:%m-%d %H:%M} {mark['text']}")
            continue
        axis.axvline(at, color=colour, linestyle=":", linewidth=1.2)
        label = f" {SHORT.get(mark['kind'], mark['kind'])} {mark['request_id']}"
        axis.text(
            at, top * 0.97, label, rotation=90, va="top", ha="right", fontsize=7, color=colour, clip_on=True
        )
    if earlier:
        axis.text(
            0.005, 0.55, "earlier: " + "; ".join(earlier), transform=axis.transAxes, va="center", fontsize=7,
            color=MARK_COLOURS["purchase"],
        )  # fmt: skip
    for kind, colour in MARK_COLOURS.items():
        axis.plot([], [], color=colour, linestyle=":", label=kind)
    axis.set_ylabel("instances")
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    axis.grid(alpha=0.3)
    axis.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M", tz=UTC))  # type: ignore[no-untyped-call]
    hours = capacity.get("instance_hours") or {}
    reserved_hours, idle = float(hours.get("reserved") or 0), float(hours.get("idle") or 0)
    share = f" ({100 * idle / reserved_hours:.0f}%)" if reserved_hours else ""
    axis.set_title(
        f"Reserved capacity against what ran (UTC): {reserved_hours:.1f} instance-hours reserved, "
        f"{float(hours.get('ran') or 0):.1f} ran, {idle:.1f} idle{share}",
        fontsize="medium",
        loc="left",
    )


def _traffic_panels(report: dict[str, Any], figure: Any, top: Any, bottom: Any) -> None:
    """Copies per model (``top``) and the endpoint's instances (``bottom``) over the traffic window."""
    import matplotlib.dates as mdates  # noqa: PLC0415
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415

    series = report["series"]
    times = [parse_utc(text) for text in series["at"]]
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
    for axis in (top, bottom):
        for label in axis.get_xticklabels():
            label.set_rotation(30)
            label.set_horizontalalignment("right")
    top.tick_params(labelbottom=False)


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
