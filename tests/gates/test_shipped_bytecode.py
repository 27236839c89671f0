"""What ``make build`` ships is compiled (issue 14): every ``.py`` of the layer and of each function has the
checked-hash pyc of its own bytes for Python 3.13 (PEP 552), so Lambda, whose ``/opt`` and ``/var/task`` are
read-only, never compiles a module at a cold start (SAM's python3.13 builder shipped none: 3x a bare
``import boto3`` for boto3 alone). ``layers/capacity/Makefile`` says why checked-hash.

Reads ``.aws-sam/build`` as ``make build`` left it (``make test`` builds before pytest); skipped when nothing
is built.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam/build"
LAYER = BUILD / "CapacityLayer/python"
CHECKED_HASH = 0b11
"""PEP 552 flags of a checked-hash pyc: hash-based (bit 0) and checked against its source (bit 1)."""


def _shipped_sources() -> list[Path]:
    functions = [path for path in BUILD.iterdir() if (path / "app.py").is_file()]
    return sorted(LAYER.rglob("*.py")) + sorted(source for path in functions for source in path.glob("*.py"))


def _problem(source: Path) -> str | None:
    """Why ``source``'s pyc would not be used on Lambda, or None."""
    pyc = Path(importlib.util.cache_from_source(str(source)))  # __pycache__/<name>.cpython-313.pyc
    if not pyc.is_file():
        return "no pyc"
    header = pyc.read_bytes()[:16]
    if header[:4] != importlib.util.MAGIC_NUMBER:
        return "another Python's pyc"
    if int.from_bytes(header[4:8], "little") != CHECKED_HASH:
        return f"flags {int.from_bytes(header[4:8], 'little')}, not checked-hash"
    if header[8:16] != importlib.util.source_hash(source.read_bytes()):
        return "stale: compiled from other bytes"
    return None


@pytest.mark.skipif(not LAYER.is_dir(), reason="nothing built in .aws-sam/build (make build)")
def test_every_shipped_module_has_the_checked_hash_pyc_of_its_source() -> None:
    sources = _shipped_sources()
    problems = {str(source.relative_to(BUILD)): why for source in sources if (why := _problem(source))}

    assert len(sources) > 800  # boto3, botocore, pydantic, Powertools, slack_sdk, capacity and 17 handlers
    assert any(source.parent.name == "ApiFunction" for source in sources)
    assert problems == {}, f"{len(problems)} shipped modules would compile at a cold start: run make build"
