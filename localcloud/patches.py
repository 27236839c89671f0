"""Every monkeypatch the local cloud's runtime needs, installed and removed in one place.

``install(clock, dispatcher)`` (with moto's ``mock_aws`` already started and the clock started):

- the dispatcher wraps moto's botocore ``before-send`` handler (:meth:`Dispatcher.install`);
- moto's Step Functions interpreter waits on the virtual clock (:mod:`localcloud.stepfunctions`);
- botocore's retry back-off (``time.sleep`` in ``botocore.endpoint``), waiters (``botocore.waiter``) and
  the adaptive-mode token bucket (``botocore.retries.bucket``) sleep on the virtual clock;
- the standard retry mode's jitter (``botocore.retries.standard.ExponentialBackoff``, for clients
  created from now on) draws from a seeded generator, so back-off delays are reproducible;
- moto's DynamoDB ``Query`` reads only the queried partition instead of sorting the whole table
  (:mod:`localcloud.dynamodb_queries`), and DynamoDB answers are written to JSON without moto's generic
  serializer (:mod:`localcloud.dynamodb_answers`);
- what moto recomputes on every call (a handler class's method list, a state machine's syntax tree) is
  computed once (:mod:`localcloud.moto_costs`);
- optionally, Slack's HTTP layer answers from the outbox (:meth:`Outbox.install`).

``uninstall()`` reverts all of it, in reverse order.
"""

from __future__ import annotations

import importlib
import random
import time
from types import ModuleType
from typing import Any

from botocore.retries.standard import ExponentialBackoff

from localcloud import dynamodb_answers, dynamodb_queries, moto_costs, stepfunctions
from localcloud.clock import VirtualClock
from localcloud.dispatch import Dispatcher
from localcloud.slack import Outbox


class _ClockTime(ModuleType):
    """The ``time`` module with ``sleep`` on a virtual clock (when it runs)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__("time")
        self._clock = clock

    def sleep(self, seconds: float) -> None:
        # Not started: a real sleep; stopped: a simulation thread is abandoned there (VirtualClock.sleep).
        self._clock.sleep(seconds)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


_BOTOCORE_TIME_MODULES = ("botocore.endpoint", "botocore.waiter", "botocore.retries.bucket")

_installed: list[tuple[str, Any]] = []
_saved_backoff_defaults: list[Any] = []
_saved_time: list[tuple[ModuleType, Any]] = []


def install(
    clock: VirtualClock, dispatcher: Dispatcher, *, outbox: Outbox | None = None, seed: int = 0
) -> None:
    """Install the runtime's patches (see the module docstring).

    Args:
        clock: the started virtual clock.
        dispatcher: the request dispatcher to put in front of moto.
        outbox: the Slack outbox to install, if any.
        seed: seeds botocore's retry jitter.

    Raises:
        RuntimeError: already installed (call :func:`uninstall` first).
    """
    if _installed:
        raise RuntimeError("the local cloud's patches are already installed")
    dispatcher.install()
    _installed.append(("dispatcher", dispatcher))
    stepfunctions.install(clock)
    _installed.append(("stepfunctions", None))
    dynamodb_queries.install()
    _installed.append(("dynamodb-queries", None))
    dynamodb_answers.install()
    _installed.append(("dynamodb-answers", None))
    moto_costs.install()
    _installed.append(("moto-costs", None))
    shim = _ClockTime(clock)
    for name in _BOTOCORE_TIME_MODULES:
        module = importlib.import_module(name)
        _saved_time.append((module, module.time))
        module.time = shim  # type: ignore[attr-defined]
    _installed.append(("botocore-time", None))
    defaults = ExponentialBackoff.__init__.__defaults__ or ()
    _saved_backoff_defaults.append(defaults)
    jitter = random.Random(seed)
    # The defaults are max_backoff, random, service_name and throttling_detector, in that order.
    ExponentialBackoff.__init__.__defaults__ = (defaults[0], jitter.random, *defaults[2:])
    _installed.append(("backoff", None))
    if outbox is not None:
        outbox.install()
        _installed.append(("outbox", outbox))


def uninstall() -> None:
    """Remove every patch :func:`install` put in place (safe to call twice)."""
    while _installed:
        kind, target = _installed.pop()
        if kind == "dispatcher":
            target.uninstall()
        elif kind == "stepfunctions":
            stepfunctions.uninstall()
        elif kind == "dynamodb-queries":
            dynamodb_queries.uninstall()
        elif kind == "dynamodb-answers":
            dynamodb_answers.uninstall()
        elif kind == "moto-costs":
            moto_costs.uninstall()
        elif kind == "botocore-time":
            while _saved_time:
                module, original = _saved_time.pop()
                module.time = original  # type: ignore[attr-defined]
        elif kind == "backoff":
            ExponentialBackoff.__init__.__defaults__ = _saved_backoff_defaults.pop()
        elif kind == "outbox":
            target.uninstall()


def installed() -> bool:
    """True while the patches are in place."""
    return bool(_installed)
