"""Who is calling: a per-thread stack of principals, inherited by the threads a caller starts.

A Lambda invocation pushes its function's execution role around the handler; a Step Functions
execution's threads carry the state machine's role; a Scheduler firing pushes the schedule's role. The
local cloud's own machinery pushes :data:`MACHINERY` (or runs with an empty stack): its calls are not
evaluated. While a thread is parked in the virtual clock (and may drive it: run tickers, deliver
events) it acts as machinery, not as the principal it was serving (:func:`on_park`/:func:`on_unpark`,
registered as clock park hooks).

:func:`install_thread_inheritance` makes ``threading.Thread.start`` hand the starting thread's stack to
the new thread (as an AWS SDK call made from a worker thread of an invocation still carries the
invocation's credentials).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Principal:
    """A role session making AWS calls.

    Attributes:
        role_arn: the IAM role (``arn:aws:iam::<account>:role/<name>``).
        session_name: the STS session name (a Lambda function's name, an execution's name...).
        kind: what assumed the role, for the timeline (``lambda``, ``states``, ``scheduler``, ``events``).
    """

    role_arn: str
    session_name: str
    kind: str = "lambda"

    @property
    def account(self) -> str:
        """The role's account id."""
        return self.role_arn.split(":")[4]

    @property
    def role_name(self) -> str:
        """The role's name (without its path)."""
        return self.role_arn.rsplit("/", 1)[-1]

    @property
    def arn(self) -> str:
        """The session ARN IAM reports: ``arn:aws:sts::<acct>:assumed-role/<role>/<session>``."""
        partition = self.role_arn.split(":")[1]
        return f"arn:{partition}:sts::{self.account}:assumed-role/{self.role_name}/{self.session_name}"


MACHINERY: Principal | None = None
"""The local cloud itself (deploying, delivering, observing): never evaluated."""

_local = threading.local()


def _stack() -> list[Principal | None]:
    stack: list[Principal | None] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = []
        _local.stack = stack
    return stack


def current() -> Principal | None:
    """The principal the calling thread acts as (None: machinery, not evaluated)."""
    stack: list[Principal | None] | None = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextmanager
def acting_as(principal: Principal | None) -> Iterator[None]:
    """Make the calling thread act as ``principal`` (None: as the local cloud's machinery) in the block."""
    stack = _stack()
    stack.append(principal)
    try:
        yield
    finally:
        stack.pop()


def on_park() -> None:
    """Clock park hook: a parked thread acts as machinery until it resumes."""
    _stack().append(MACHINERY)


def on_unpark() -> None:
    """Clock unpark hook: back to the principal the thread served before it parked."""
    stack = _stack()
    if stack:
        stack.pop()


_original_start: list[Any] = []


def install_thread_inheritance() -> None:
    """Threads started from now on begin with a copy of their starter's principal stack (idempotent)."""
    if _original_start:
        return
    original = threading.Thread.start
    _original_start.append(original)

    def start(thread: threading.Thread) -> None:
        inherited = list(getattr(_local, "stack", None) or [])
        if inherited:
            run = thread.run

            def run_as_starter() -> None:
                _local.stack = list(inherited)
                run()

            thread.run = run_as_starter  # type: ignore[method-assign]
        original(thread)

    threading.Thread.start = start  # type: ignore[method-assign,assignment]


def uninstall_thread_inheritance() -> None:
    """Undo :func:`install_thread_inheritance`."""
    if _original_start:
        threading.Thread.start = _original_start.pop()  # type: ignore[method-assign]
