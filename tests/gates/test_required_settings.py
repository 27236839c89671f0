"""Each function's required settings are one checked fact (issue 15): every name a handler passes to
``Settings.from_env(require=...)`` (or reads with ``settings.need(...)`` in its own module) is an
environment variable the template gives that function, so a missing one fails here, not at the first
invocation after a deploy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from capacity.settings import _ENV_NAMES

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Stack:
    return Stack.load(ROOT / "template.yaml")


def _required(handler_source: str) -> set[str]:
    """Settings attribute names a handler module requires: ``require=(...)`` and ``.need("...")``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(handler_source)):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg == "require" and isinstance(keyword.value, (ast.Tuple, ast.List)):
                found |= {str(e.value) for e in keyword.value.elts if isinstance(e, ast.Constant)}
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "need" and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
    return found


def test_every_setting_a_handler_requires_is_in_its_environment(stack: Stack) -> None:
    missing: dict[str, list[str]] = {}
    checked = 0
    for spec in stack.functions:
        module = spec.code_dir / f"{spec.handler.split('.')[0]}.py"
        for attribute in sorted(_required(module.read_text())):
            checked += 1
            name = _ENV_NAMES.get(attribute)
            if name is None:
                missing.setdefault(spec.logical_id, []).append(f"{attribute} (not a setting)")
            elif not spec.environment.get(name):
                missing.setdefault(spec.logical_id, []).append(name)
    assert missing == {}
    assert checked >= 30  # the handlers do declare what they need


def test_the_parser_finds_both_ways_of_requiring_a_setting() -> None:
    source = 'Ports(Settings.from_env(require=("ledger_table", "event_bus_name")))\nx.need("policy_table")\n'
    assert _required(source) == {"ledger_table", "event_bus_name", "policy_table"}
