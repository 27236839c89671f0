"""No literal platform test outside the descriptor (issue 32 point 2): a platform's name is compared with a
string only in ``capacity/platforms.py``; everywhere else in the layer and the functions the code asks the
:class:`~capacity.platforms.Platform` descriptor (``platform(request.platform).capacity_blocks``) or routes
through its wing (:func:`capacity.logic.wings.wing`), so a third platform is one descriptor and one wing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from capacity.logic.wings import WINGS
from capacity.platforms import PLATFORMS, platform

ROOT = Path(__file__).resolve().parents[2]
CODE = ("layers", "functions")
DESCRIPTOR = ROOT / "layers" / "capacity" / "capacity" / "platforms.py"
_TESTS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def _names(node: ast.expr, names: frozenset[str]) -> bool:
    """Whether ``node`` is a platform name written as a string, or a tuple/list/set holding one."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in names
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names(element, names) for element in node.elts)
    return False


def literal_tests(source: str, names: frozenset[str]) -> list[int]:
    """The lines of ``source`` comparing something with a platform name written as a string (``==``,
    ``!=``, ``in (...)``, ``is``) or matching on one (``case "ec2":``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, _TESTS) for op in node.ops):
            if any(_names(side, names) for side in (node.left, *node.comparators)):
                lines.append(node.lineno)
        elif isinstance(node, ast.MatchValue) and _names(node.value, names):
            lines.append(node.lineno)
    return sorted(lines)


def offenders(paths: list[Path], names: frozenset[str], root: Path = ROOT) -> list[str]:
    """``path:line`` of every literal platform test in ``paths`` but the descriptor's module."""
    return [
        f"{path.relative_to(root)}:{line}"
        for path in paths
        if path != DESCRIPTOR
        for line in literal_tests(path.read_text(encoding="utf-8"), names)
    ]


def test_no_literal_platform_test_outside_the_descriptor() -> None:
    modules = [path for folder in CODE for path in sorted((ROOT / folder).rglob("*.py"))]
    assert len(modules) > 100  # the listing found the code
    assert offenders(modules, frozenset(PLATFORMS)) == []


def test_a_literal_platform_test_is_named(tmp_path: Path) -> None:
    names = frozenset({"sagemaker", "ec2"})
    bad = tmp_path / "bad.py"
    bad.write_text(
        "def f(request, item, p):\n"
        '    if request.platform == "ec2":\n'
        "        return 1\n"
        '    if item.get("platform") != "sagemaker":\n'
        "        return 2\n"
        '    if p in ("ec2", "sagemaker"):\n'
        "        return 3\n"
        "    match p:\n"
        '        case "ec2":\n'
        "            return 4\n"
        "    return 0\n",
        encoding="utf-8",
    )
    good = tmp_path / "good.py"
    good.write_text(
        'def f(platform):\n    return client("ec2") if platform.spot else None\n', encoding="utf-8"
    )
    assert offenders([bad, good], names, tmp_path) == ["bad.py:2", "bad.py:4", "bad.py:6", "bad.py:9"]


def test_every_platform_has_one_wing_and_an_unknown_name_is_refused() -> None:
    assert set(WINGS) == set(PLATFORMS)
    assert all(WINGS[name].platform is PLATFORMS[name] for name in PLATFORMS)
    assert platform(None) is platform("sagemaker")
    with pytest.raises(ValueError, match="unknown platform 'hyperpod'"):
        platform("hyperpod")
