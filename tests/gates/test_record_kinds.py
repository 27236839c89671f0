"""Gate: every kind of ledger item is defined once, in the catalogue (capacity/record_kinds.py), with its
docstring; no other module of the layer or of the functions defines a ledger key of its own.

The source is read, not imported: a module-level string constant whose value is a registered kind's (or
shaped like a key prefix, ``NAME#``), a string that starts with a registered kind and its ``#`` (``"SCALE#"``,
``f"USAGE#{...}"``), or a literal ``sk`` passed to the ledger (``ledger.get(rid, "PURCHASE")``) fails it.
The integration tests check the other side: every item their ledgers hold is of a registered kind
(tests/integration/conftest.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from capacity.record_kinds import KINDS, kind_of

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = ROOT / "layers/capacity/capacity/record_kinds.py"
SOURCES = sorted(
    path
    for base in ("layers/capacity/capacity", "functions")
    for path in (ROOT / base).rglob("*.py")
    if path != CATALOGUE
)
PREFIX = re.compile(r"^[A-Z][A-Z0-9_]*#$")
"""A string shaped like a ledger key prefix (``ON_DEMAND_TRY#``)."""
LEDGER_CALLS = frozenset({"get", "put_once", "items"})
"""The ledger's methods that take an ``sk`` (or its prefix) as their second argument."""
HEADS = tuple(sorted({name.rstrip("#") + "#" for name in KINDS}, key=len, reverse=True))
"""Every registered kind as a key starts (``EXTENSION#``, ``STATE#``)."""


def _strings(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Each string constant and each f-string's literal head, with its line; docstrings (a string statement)
    name keys in prose and are left out."""
    prose = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    for node in ast.walk(tree):
        if id(node) in prose:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value
        elif isinstance(node, ast.JoinedStr) and node.values:
            prose |= {id(part) for part in node.values}  # its parts: read as the whole
            head = node.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                yield node.lineno, head.value


def _offences(path: Path, root: Path = ROOT) -> list[str]:
    """What ``path`` defines or spells of the ledger's keys outside the catalogue (``file:line: what``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    where = path.relative_to(root)
    found: list[str] = []
    for statement in tree.body:  # module-level constants
        if isinstance(statement, ast.Assign | ast.AnnAssign) and isinstance(statement.value, ast.Constant):
            value = statement.value.value
            if isinstance(value, str) and (value in KINDS or PREFIX.match(value)):
                found.append(f"{where}:{statement.lineno}: ledger key constant {value!r}")
    for line, text in _strings(tree):  # keys spelled inline
        if text.startswith(HEADS) and not _is_constant(tree, text):
            found.append(f"{where}:{line}: ledger key {text!r} written inline (import it from the catalogue)")
    for node in ast.walk(tree):  # literal keys handed to the ledger
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LEDGER_CALLS
            and _is_ledger(node.func.value)
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and node.args[1].value[:1].isupper()
        ):
            found.append(f"{where}:{node.lineno}: literal sk {node.args[1].value!r} passed to the ledger")
    return found


def _is_ledger(node: ast.expr) -> bool:
    """True for ``ledger`` and ``<anything>.ledger`` (the ports' ledger)."""
    return (isinstance(node, ast.Name) and node.id == "ledger") or (
        isinstance(node, ast.Attribute) and node.attr == "ledger"
    )


def _is_constant(tree: ast.Module, text: str) -> bool:
    """True when ``text`` is a module-level constant's value (reported once, as a constant)."""
    return any(
        isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and node.value.value == text
        for node in tree.body
    )


def test_no_ledger_key_is_defined_outside_the_catalogue() -> None:
    # Given every module of the layer and of the functions but the catalogue
    # When their source is read
    offences = [offence for path in SOURCES for offence in _offences(path)]

    # Then none defines or spells a ledger key of its own
    assert offences == []


def test_the_gate_sees_a_key_defined_elsewhere(tmp_path: Path) -> None:
    # Given a module that defines its own key, spells one inline and hands a literal to the ledger
    module = tmp_path / "rogue.py"
    module.write_text(
        'TRY_PREFIX = "ON_DEMAND_TRY#"\n'
        'NEW = "NEW_KIND#"\n'
        "def f(ports, rid, at):\n"
        '    ports.ledger.put_once(rid, f"USAGE#{at}", {})\n'
        '    return ports.ledger.get(rid, "PURCHASE")\n'
    )

    # When the gate reads it
    offences = _offences(module, root=tmp_path)

    # Then each is named
    assert [offence.split(": ", 1)[1] for offence in offences] == [
        "ledger key constant 'ON_DEMAND_TRY#'",
        "ledger key constant 'NEW_KIND#'",
        "ledger key 'USAGE#' written inline (import it from the catalogue)",
        "literal sk 'PURCHASE' passed to the ledger",
    ]


def test_every_kind_has_its_docstring() -> None:
    # Given the catalogue's source
    body = ast.parse(CATALOGUE.read_text()).body

    # When each registration is paired with the statement after it
    undocumented = [
        node.targets[0].id
        for node, after in zip(body, [*body[1:], None], strict=True)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", "") == "_kind"
        and isinstance(node.targets[0], ast.Name)
        and not (
            isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
            and ("Write-once" in after.value.value or "*replaced*" in after.value.value)
        )
    ]

    # Then every kind says what it records, who writes it and whether it is written once or replaced
    assert undocumented == []
    assert len(KINDS) >= 44


@pytest.mark.parametrize(
    ("request_id", "sk", "kind"),
    [
        ("r-1", "STATE#2026-12-01T10:00:00.000Z#0001", "STATE#"),
        ("r-1", "PURCHASE", "PURCHASE"),
        ("r-1", "PURCHASE_INTENT#2", "PURCHASE_INTENT"),
        ("r-1", "EXTENSION#tpeo-1", "EXTENSION"),
        ("r-1", "EXTENSION_OUTCOME#tpeo-1", "EXTENSION_OUTCOME"),
        ("r-1", "OUTBOX#STATE#2026-12-01T10:00:00.000Z#0003", "OUTBOX"),
        ("r-1", "SCALE#2026-12-01T10:00:00.000Z#-#idle-release", "SCALE#"),
        ("BROUGHT#arn:aws:sagemaker:us-east-1:1:training-plan/p", "r-1", "BROUGHT#"),
        ("r-1", "EXTENSION", None),
        ("r-1", "PURCHASES", None),
    ],
)
def test_kind_of_an_item(request_id: str, sk: str, kind: str | None) -> None:
    # Given an item's keys / When its kind is looked up / Then it is the registered one (None: no such kind)
    found = kind_of(request_id, sk)
    assert (found.name if found else None) == kind
