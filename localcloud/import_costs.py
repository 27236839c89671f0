"""What imports cost a local-cloud process that it never uses, avoided (issue 14: ``make demo`` starts one).
Imported first by ``localcloud/__init__.py``, before anything imports moto or time-machine.

- moto 5.2's task-service factory (``state_task_service_factory``) imports every service integration it knows
at import time; the AWS Batch one imports ``moto.batch.utils``, whose package ``__init__`` imports
``moto.batch.models``, which imports all of ``moto.ec2``: every region's instance-type offerings and a
boto3 session listing the regions, about a second of every process that starts a local cloud (each demo,
each pytest worker). The application's state machines have no Batch task.

:func:`defer_package_init` puts such a package in ``sys.modules`` with its ``__init__`` not yet run: its
submodules import as usual (``moto.batch.utils`` needs nothing of the package), and the first attribute
asked of the package itself (``moto.batch.batch_backends``, as moto's backend registry asks) runs the
``__init__`` then, so whatever uses the package gets all of it.

- time-machine imports pytest for its fixture whenever pytest is installed: 0.2 s of every local-cloud CLI
  start that never runs a test. Outside pytest, :func:`import_time_machine` imports it while ``import pytest``
  fails (its fixture is then not defined; pytest's own plugin loading imports time-machine with pytest
  there). Under pytest nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
from types import ModuleType
from typing import Any

_DEFERRED = ("moto.batch",)
_lock = threading.RLock()


class _DeferredPackage(ModuleType):
    """A package whose ``__init__`` runs on the first attribute asked of it that it does not have yet."""

    def __getattr__(self, name: str) -> Any:
        with _lock:
            if type(self) is _DeferredPackage:
                self.__class__ = ModuleType  # type: ignore[assignment]  # from now on a plain module
                spec = self.__spec__
                if spec is None or spec.loader is None:
                    raise AttributeError(name)
                spec.loader.exec_module(self)
        return getattr(self, name)


def defer_package_init(name: str) -> None:
    """Put package ``name`` in ``sys.modules`` with its ``__init__`` deferred (nothing if already imported
    or not installed)."""
    with _lock:
        if name in sys.modules:
            return
        parent, _, child = name.rpartition(".")
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            return
        module = importlib.util.module_from_spec(spec)
        module.__class__ = _DeferredPackage
        sys.modules[name] = module
        if parent:
            setattr(importlib.import_module(parent), child, module)


def import_time_machine() -> None:
    """Import time-machine without pytest unless pytest is already imported (see the module docstring)."""
    if "time_machine" in sys.modules or "pytest" in sys.modules:
        return
    sys.modules["pytest"] = None  # type: ignore[assignment]  # `import pytest` raises ImportError
    try:
        importlib.import_module("time_machine")
    finally:
        del sys.modules["pytest"]


for _name in _DEFERRED:
    defer_package_init(_name)
import_time_machine()
