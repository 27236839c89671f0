"""What every benchmark returns: a titled Markdown section, also printed as it is measured."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class Section:
    """One benchmark's result.

    Attributes:
        title: the heading in docs/benchmarks.md.
        method: how it was measured (one paragraph, Markdown).
        table: rows of a Markdown table, the first row being the header.
        notes: sentences after the table (findings, caveats).
        skipped: why the benchmark did not run (then ``table`` is empty).
    """

    title: str
    method: str
    table: list[list[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None

    def markdown(self) -> str:
        """The section as Markdown (``## title``, method, table, notes)."""
        lines = [f"## {self.title}", "", self.method, ""]
        if self.skipped:
            lines += [f"**Skipped:** {self.skipped}", ""]
        if self.table:
            header, *rows = self.table
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            lines += ["| " + " | ".join(row) + " |" for row in rows]
            lines.append("")
        lines += [f"{note}" for note in self.notes]
        if self.notes:
            lines.append("")
        return "\n".join(lines)

    def text(self) -> str:
        """The section for the terminal (the table as aligned columns)."""
        out = [f"== {self.title}"]
        if self.skipped:
            out.append(f"   skipped: {self.skipped}")
        if self.table:
            widths = [max(len(row[i]) for row in self.table) for i in range(len(self.table[0]))]
            out += [
                "   " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
                for row in self.table
            ]
        out += [f"   {note}" for note in self.notes]
        return "\n".join(out)


def ms(seconds: float) -> str:
    """Seconds as milliseconds, one decimal (``"12.3"``)."""
    return f"{seconds * 1000:.1f}"


def percentile(values: list[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) by linear interpolation (``statistics.quantiles`` inclusive)."""
    if len(values) == 1:
        return values[0]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    index = min(max(round(pct) - 1, 0), len(cuts) - 1)
    return cuts[index]
