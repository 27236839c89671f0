"""The layer has no import circle (issue 15): a module never reaches back into one that imports it, not even
through a late import inside a function (grimp reads those too)."""

from __future__ import annotations

import sys
from pathlib import Path

import grimp

LAYER = Path(__file__).resolve().parents[2] / "layers" / "capacity"


def test_the_layer_has_no_import_cycle() -> None:
    if str(LAYER) not in sys.path:
        sys.path.insert(0, str(LAYER))
    graph = grimp.build_graph("capacity", cache_dir=None)
    cycles = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None:
                cycles.append(" -> ".join([importer, *back]))
    assert not cycles, "import cycles in the layer:\n" + "\n".join(cycles)
