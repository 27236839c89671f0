"""Write (or check) every ``statemachines/*.asl.json`` from its spec: ``python -m statemachines [--check]``.

``make asl`` writes them; ``--check`` writes nothing and exits 1 naming each file that is not what its spec
generates (``tests/gates/test_workflow_specs.py`` holds the same rule).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from statemachines import extend_capacity, release_capacity, reserve_capacity, workflow_stopped
from statemachines.spec import Workflow, render

HERE = Path(__file__).resolve().parent

WORKFLOWS: Mapping[str, Workflow] = {
    "reserve_capacity": reserve_capacity.WORKFLOW,
    "release_capacity": release_capacity.WORKFLOW,
    "extend_capacity": extend_capacity.WORKFLOW,
    "workflow_stopped": workflow_stopped.WORKFLOW,
}
"""Each workflow by the name of its file (``statemachines/<name>.asl.json``, the template's DefinitionUri)."""


def generated() -> dict[Path, str]:
    """Each ASL file's path and the text its spec generates."""
    return {HERE / f"{name}.asl.json": render(workflow) for name, workflow in WORKFLOWS.items()}


def stale() -> list[Path]:
    """The ASL files whose committed text is not what their spec generates (or that are missing)."""
    return [path for path, text in generated().items() if not path.is_file() or path.read_text() != text]


def main(argv: Sequence[str] | None = None) -> int:
    """Write the ASL files (or, ``--check``, name those that differ); 0 when they are as generated."""
    parser = argparse.ArgumentParser(prog="python -m statemachines", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file differs")
    options = parser.parse_args(argv)
    if options.check:
        differing = stale()
        for path in differing:
            sys.stderr.write(
                f"{path.relative_to(HERE.parent)} is not what its spec generates: run make asl\n"
            )
        return 1 if differing else 0
    for path, text in generated().items():
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
            sys.stderr.write(f"wrote {path.relative_to(HERE.parent)}\n")
    return 0
