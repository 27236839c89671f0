"""The workflows are written once, as specs (issue 32): the committed ASL is what the specs generate, and a
spec names policies, never a Retry or Catch of its own.

``make asl`` writes ``statemachines/*.asl.json`` from ``statemachines/<name>.py``; SAM deploys the JSON and
the local cloud runs it, so a hand edit of the JSON (or a spec changed without ``make asl``) fails here.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from typing import Any

import pytest

from statemachines.generate import HERE, WORKFLOWS, generated

ROOT = HERE.parent
SPECS = sorted(WORKFLOWS)
POLICY_WORDS = {"Retrier", "Catch", "Policy", "Persevere"}
"""What only statemachines/policies.py (and the vocabulary, spec.py) may build: a policy is written once."""


@pytest.mark.parametrize("name", SPECS)
def test_the_committed_asl_is_what_its_spec_generates(name: str) -> None:
    path = HERE / f"{name}.asl.json"
    assert path.read_text() == generated()[path], f"{path.name} differs from its spec: run make asl"


def test_every_asl_file_has_a_spec_and_the_template_deploys_them() -> None:
    on_disk = {path.name.removesuffix(".asl.json") for path in HERE.glob("*.asl.json")}
    assert on_disk == set(WORKFLOWS)
    template = (ROOT / "template.yaml").read_text()
    for name in WORKFLOWS:
        assert f"DefinitionUri: statemachines/{name}.asl.json" in template


@pytest.mark.parametrize("name", SPECS)
def test_a_spec_names_its_policies_and_writes_none(name: str) -> None:
    tree = ast.parse((HERE / f"{name}.py").read_text())
    built = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in POLICY_WORDS
    }
    literal = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in {"Retry", "Catch", "ErrorEquals"}
    ]
    assert not built, f"{name}.py builds {sorted(built)}: write the policy once in statemachines/policies.py"
    assert not literal, f"{name}.py writes {literal}: name a policy (statemachines/policies.py) instead"


def _states(states: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    for name, state in states.items():
        yield name, state, states
        processor = state.get("ItemProcessor")
        if processor:
            yield from _states(processor["States"])


def _targets(state: dict[str, Any]) -> Iterator[str]:
    yield from (state[key] for key in ("Next", "Default") if key in state)
    for entry in [*state.get("Choices", []), *state.get("Catch", [])]:
        yield entry["Next"]


@pytest.mark.parametrize("name", SPECS)
def test_every_transition_names_a_state_and_every_state_is_reached(name: str) -> None:
    definition = json.loads(generated()[HERE / f"{name}.asl.json"])
    reached = {definition["StartAt"]}
    for state_name, state, scope in _states(definition["States"]):
        for target in _targets(state):
            assert target in scope, f"{name}: {state_name} goes to {target}, which is not a state"
            reached.add(target)
        if "ItemProcessor" in state:
            reached.add(state["ItemProcessor"]["StartAt"])
    every = {state_name for state_name, _, _ in _states(definition["States"])}
    assert every <= reached, f"{name}: never reached: {sorted(every - reached)}"
