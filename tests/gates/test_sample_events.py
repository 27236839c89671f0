"""Gate: every function in template.yaml has a sample event in events/ and a test that uses it.

A function whose ``CodeUri`` is ``functions/<name>/`` owns the files ``events/<name>*.json`` and
``events/**/<name>*.json``; at least one must exist, and each must be named (by its path relative to the
repository, e.g. ``events/functions/notify.json``) in some test under tests/ other than this gate.
Functions added by later work are picked up from the template.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"


def _function_names() -> list[tuple[str, str]]:
    stack = Stack.load(ROOT / "template.yaml")
    return sorted((spec.logical_id, spec.code_dir.name) for spec in stack.functions)


def sample_events(name: str) -> list[Path]:
    """The sample events of the function whose code lives in ``functions/<name>/``."""
    found = set(EVENTS.glob(f"{name}*.json")) | set(EVENTS.glob(f"**/{name}*.json"))
    return sorted(found)


def _test_sources() -> str:
    here = Path(__file__).resolve()
    return "\n".join(p.read_text() for p in (ROOT / "tests").rglob("*.py") if p.resolve() != here)


FUNCTIONS = _function_names()


def test_the_template_has_functions() -> None:
    assert len(FUNCTIONS) >= 9


@pytest.mark.parametrize(("logical_id", "name"), FUNCTIONS)
def test_function_has_a_sample_event_that_a_test_uses(logical_id: str, name: str) -> None:
    events = sample_events(name)
    assert events, f"{logical_id}: no sample event: add events/{name}*.json or events/functions/{name}.json"
    sources = _test_sources()
    unused = [str(p.relative_to(ROOT)) for p in events if str(p.relative_to(ROOT)) not in sources]
    assert unused == [], (
        f"{logical_id}: sample events that no test names: {unused} "
        "(add them to tests/unit/test_unit_sample_events.py)"
    )


def test_sample_events_are_json_objects() -> None:
    for path in EVENTS.rglob("*.json"):
        loaded: Any = json.loads(path.read_text())
        assert isinstance(loaded, dict), path
