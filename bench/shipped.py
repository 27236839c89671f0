"""What ships, imported in fresh interpreters: the cold-init figures of benchmarks 2 and 7.

Lambda puts the layer on ``sys.path`` at ``/opt/python`` and the function's code at ``/var/task``, both
read-only. The figures here import what ``sam build`` writes (``make build``): ``.aws-sam/build/CapacityLayer/
python`` (the layer, compiled by ``layers/capacity/Makefile``) and ``.aws-sam/build/<LogicalId>`` (the
function), in ``python -I -S -B``: no site-packages of the venv, no ``PYTHONPATH``, nothing written. The one
difference from Lambda's files: the layer's extension modules are built for arm64, so a package holding one
(pydantic-core) is imported from a copy with this machine's build of the same version (:func:`_native`);
its Python files and their pycs are the layer's.

Times are the child's CPU time (``time.process_time``: user + system), not wall time: on a machine shared
with other work the wall clock also counts the waits for a core (paired wall-clock ratios of one handler
ranged from 1.4x to 4.6x at a load average of 5 on 2 cores), while the import work itself is CPU. A child
also counts the modules it compiled from source (a ``.py`` without a valid pyc: Python compiles it at every
cold start, since it cannot write its pyc to a read-only directory).
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / ".aws-sam/build"
LAYER = BUILD / "CapacityLayer/python"
VENV_PACKAGES = Path(sysconfig.get_paths()["purelib"])

COUNT_COMPILED = r"""
import _frozen_importlib_external as _bootstrap
_COMPILED = []
_source_to_code = _bootstrap.SourceLoader.source_to_code
def _counted(self, data, path, *args, **kwargs):
    _COMPILED.append(path)
    return _source_to_code(self, data, path, *args, **kwargs)
_bootstrap.SourceLoader.source_to_code = _counted
"""
"""Child prologue: ``_COMPILED`` lists the files compiled from source (Python calls ``source_to_code`` only
when a module has no valid pyc)."""


def ensure_built() -> None:
    """Run ``make build`` (``sam build``, cached) when ``.aws-sam/build`` has no layer yet."""
    if not LAYER.is_dir():
        print("   no .aws-sam/build/CapacityLayer: make build", flush=True)
        subprocess.run(["make", "--no-print-directory", "build"], cwd=ROOT, check=True)  # noqa: S607 - as make bench


@functools.cache
def _native() -> Path:
    """A directory holding a copy of each layer package that has a foreign extension module (an arm64
    ``.so`` on another machine), with this machine's build of it from the venv; put before the layer.
    Raises ``RuntimeError`` when the venv has no build of the same version."""
    ours = str(sysconfig.get_config_var("EXT_SUFFIX"))  # e.g. .cpython-313-x86_64-linux-gnu.so
    overlay = ROOT / ".aws-sam/bench-native"
    shutil.rmtree(overlay, ignore_errors=True)
    overlay.mkdir(parents=True)
    for extension in LAYER.rglob("*.cpython-*.so"):
        if extension.name.endswith(ours):
            continue
        relative = extension.relative_to(LAYER)
        package = relative.parts[0]
        found = VENV_PACKAGES / relative.parent / (extension.name.split(".", 1)[0] + ours)
        if not found.is_file() or not _same_versions(package):
            raise RuntimeError(f"{relative} is built for another CPU and the venv has no same-version build")
        if not (overlay / package).exists():
            shutil.copytree(LAYER / package, overlay / package)
        (overlay / relative).unlink()
        shutil.copy2(found, overlay / relative.parent / found.name)
    return overlay


def _same_versions(package: str) -> bool:
    """Whether the venv holds the same distribution version (``<dist>-<version>.dist-info``) as the layer."""
    layer = {p.name for p in LAYER.glob(f"{package}-*.dist-info")}
    return bool(layer) and layer <= {p.name for p in VENV_PACKAGES.glob(f"{package}-*.dist-info")}


def layer_path() -> list[str]:
    """``sys.path`` entries of the shipped layer (the native overlay first)."""
    ensure_built()
    return [str(_native()), str(LAYER)]


def function_dir(logical_id: str) -> Path:
    """The function's built code (``.aws-sam/build/<LogicalId>``, what ``sam deploy`` zips)."""
    ensure_built()
    return BUILD / logical_id


def command(path: Iterable[str], body: str) -> list[str]:
    """A fresh interpreter that puts ``path`` first on ``sys.path`` and runs ``body`` (after
    :data:`COUNT_COMPILED`): ``-I`` (no ``PYTHONPATH``, no script directory), ``-S`` (no site-packages),
    ``-B`` (writes no pyc, as on Lambda's read-only directories)."""
    prologue = f"import sys\nsys.path[:0] = {list(path)!r}\n"
    return [sys.executable, "-I", "-S", "-B", "-c", COUNT_COMPILED + LIBRARIES + prologue + body]


def run(command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a child; returns its last output line, a JSON object. Raises ``RuntimeError`` (its stderr) if it
    fails."""
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=ROOT, check=False, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"a benchmark child failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


LIBRARIES = r"""
def _libraries(before, module):
    # What an import pulled in that is not ours: every module it added to sys.modules, in load order, but the
    # handler's own module and the layer's packages (capacity, servingsim).
    ours = {"capacity", "servingsim", module.split(".")[0]}
    return [name for name in sys.modules if name not in before and name.split(".")[0] not in ours]
"""
"""Child helper: ``_libraries(before, module)``, the modules added since ``before`` (a set of names) that are
neither ``module`` nor under ``capacity`` or ``servingsim``: what a handler's import loads of Python's and
the libraries' (Powertools, pydantic, boto3, slack_sdk and what they import)."""


def floor_statement(libraries: Iterable[str]) -> str:
    """A child statement importing ``libraries`` (dotted names, in load order) and nothing of ours: a
    handler's libraries floor. A name that cannot be imported by itself (a module a package registers under
    another name) is skipped: its package's import loads it anyway."""
    return (
        "import importlib\n"
        f"for _name in {list(libraries)!r}:\n"
        "    try:\n"
        "        importlib.import_module(_name)\n"
        "    except Exception:\n"
        "        pass\n"
    )


def import_cpu(path: Iterable[str], statement: str, env: dict[str, str] | None = None) -> float:
    """CPU seconds (user + system, ``time.process_time``) ``statement`` takes in a fresh interpreter with
    ``path`` first on ``sys.path``: the work of the imports, not the wait for a core on a busy machine."""
    body = (
        "import json, time\n"
        "began = time.process_time()\n"
        f"{statement}\n"
        "print(json.dumps({'cpu': time.process_time() - began}))\n"
    )
    return float(run(command(path, body), env)["cpu"])


@dataclass(frozen=True)
class Boto3:
    """A bare ``import boto3`` in CPU seconds: from the built layer, and from the venv (compiled by pip)."""

    shipped: float
    venv: float


def bare_boto3() -> Boto3:
    """One sample of each, in fresh interpreters (the baseline paired with one handler import)."""
    return Boto3(
        shipped=import_cpu(layer_path(), "import boto3"),
        venv=import_cpu([str(VENV_PACKAGES)], "import boto3"),
    )
