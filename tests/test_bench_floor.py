"""Benchmark 2's libraries floor: a child lists what an import loaded that is not ours, and a fresh
interpreter imports exactly that."""

from __future__ import annotations

from pathlib import Path

from bench import shipped

LAYER = Path(__file__).resolve().parents[1] / "layers/capacity"


def test_the_floor_lists_the_libraries_an_import_loaded_but_none_of_ours() -> None:
    body = (
        "import json\n"
        "before = set(sys.modules)\n"
        "import capacity.timeutil, fractions\n"
        "print(json.dumps(_libraries(before, 'app')))\n"
    )
    loaded = shipped.run(shipped.command([str(LAYER)], body))
    assert "fractions" in loaded
    assert not [name for name in loaded if name.split(".")[0] in {"capacity", "servingsim", "app"}]


def test_the_floor_imports_each_library_and_skips_a_name_that_cannot_be_imported_alone() -> None:
    statement = shipped.floor_statement(["fractions", "no_such_module.inner"])
    wanted = "{'fractions', 'no_such_module'}"
    body = statement + f"print(json.dumps({{'loaded': sorted(set(sys.modules) & {wanted})}}))\n"
    assert shipped.run(shipped.command([], "import json\n" + body)) == {"loaded": ["fractions"]}
    assert shipped.import_cpu([], statement) >= 0
