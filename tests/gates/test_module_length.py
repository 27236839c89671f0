"""Modules over 400 lines say why at the top (issue 32 point 4): their docstring holds "Over 400 lines:" or
"Kept whole" with the reason, in the layer, the functions, the CLI, the local cloud and the soak alike."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 400
REASONS = ("Over 400 lines:", "Kept whole")
CODE = (
    "layers/capacity/capacity",
    "functions",
    "capacity_cli",
    "localcloud",
    "localcloud_soak",
    "statemachines",
    "bench",
    "scripts",
)


def unexplained(paths: list[Path], root: Path = ROOT) -> list[str]:
    """The modules of ``paths`` over :data:`LIMIT` lines whose docstring gives no reason, relative to
    ``root`` with their line count."""
    found = []
    for path in paths:
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n")
        if lines > LIMIT and not any(r in (ast.get_docstring(ast.parse(source)) or "") for r in REASONS):
            found.append(f"{path.relative_to(root)} ({lines} lines)")
    return found


def test_every_module_over_400_lines_says_why_at_the_top() -> None:
    modules = [path for folder in CODE for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(modules) > 100  # the listing found the code
    assert unexplained(modules) == []


def test_a_long_module_without_a_reason_is_named(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text('"""A module."""\n' + "x = 1\n" * LIMIT, encoding="utf-8")
    short = tmp_path / "short.py"
    short.write_text('"""A module."""\nx = 1\n', encoding="utf-8")
    kept = tmp_path / "kept.py"
    kept.write_text('"""A module.\n\nKept whole: one loop."""\n' + "x = 1\n" * LIMIT, encoding="utf-8")
    assert unexplained([long, short, kept], tmp_path) == [f"long.py ({LIMIT + 1} lines)"]
