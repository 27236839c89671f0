"""A deployed stack's moto state, kept per process and put back instead of deploying the same stack again
(issue 14: a deploy is ~170 AWS calls through botocore and moto, most of a local cloud's start-up).

The first cloud of a process that deploys a given stack deploys it for real (:meth:`Stack.deploy`: every
request serialized and validated by botocore, answered by moto) and keeps, right after the deploy and before
anything runs:

- a deep copy of every moto backend's state (``BackendDict._instances``: IAM roles and their policies,
  tables, buses, rules and targets, topics, queues, secrets, parameters, alarms, state machines, schedules);
- the dispatcher's records of the deploy's calls (tests and cost reports count calls).

A later cloud whose deploy would be the same (:func:`deploy_key`: the resolved resources, the state machine
definitions, names, parameters, local values and the virtual start instant, since moto stamps creation
times) gets a fresh deep copy of that state installed into moto's freshly reset backends, and the same call
records; its after-deploy steps then run as usual (they run scripts whose inputs the key cannot see).
Anything that cannot be deep-copied (a thread, a file) makes that stack deploy for real every time.

Locks in the state (an SQS queue's ``Condition``) are copied as new, free locks: nothing runs during a
deploy, so none is held. ``LOCALCLOUD_NO_DEPLOY_SNAPSHOT=1`` turns the cache off.
"""

from __future__ import annotations

import _thread
import copy
import copyreg
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from moto.core.base_backend import AccountSpecificBackend, BackendDict

if TYPE_CHECKING:
    from localcloud.dispatch import CallRecord
    from localcloud.template import Stack

OFF_ENV = "LOCALCLOUD_NO_DEPLOY_SNAPSHOT"
"""Set to 1 to deploy every stack for real (no snapshot is kept or used)."""

_MAX_SNAPSHOTS = 32


@dataclass(frozen=True)
class _Backend:
    """One moto backend as it was after the deploy: where it lives and its state."""

    backends: BackendDict[Any]
    account_id: str
    region: str
    kept: Any
    """The backend object itself (reset in place by moto since; only its identity is used)."""
    kept_account: AccountSpecificBackend[Any]


@dataclass(frozen=True)
class DeploySnapshot:
    """What a deploy left in moto, and the calls it made (see the module docstring)."""

    backends: tuple[_Backend, ...]
    state: dict[int, dict[str, Any]]
    """``id(backend)`` -> a deep copy of its ``__dict__``."""
    calls: tuple[CallRecord, ...]

    def restore(self) -> list[CallRecord]:
        """Install a fresh copy of the state into moto's backends (``mock_aws`` started, nothing deployed).

        Returns:
            Copies of the deploy's call records, for the dispatcher's books.
        """
        memo: dict[int, Any] = {}
        fresh: dict[int, Any] = {}
        for kept in self.backends:
            account = kept.backends[kept.account_id]  # registers the BackendDict for moto's reset
            memo[id(kept.kept_account)] = account
            backend = object.__new__(type(kept.kept))
            memo[id(kept.kept)] = backend
            fresh[id(kept.kept)] = backend
        for kept in self.backends:
            memo[id(kept.backends)] = kept.backends
        with _fresh_locks():
            state, calls = copy.deepcopy((self.state, self.calls), memo)
        for kept in self.backends:
            backend = fresh[id(kept.kept)]
            backend.__dict__.update(state[id(kept.kept)])
            dict.__setitem__(kept.backends[kept.account_id], kept.region, backend)
        return list(calls)


def deploy_key(stack: Stack, start: datetime) -> str:
    """What a deploy of ``stack`` at the virtual instant ``start`` depends on, as a digest.

    The resources as resolved now (a test may change a policy before the cloud starts), the state machine
    definitions, the pseudo parameters, parameters and local values, and the instant (creation times).
    """
    document = {
        "names": [stack.stack_name, stack.region, stack.account_id, stack.partition],
        "parameters": stack.parameters,
        "local_values": stack.local_values,
        "resources": [[r.logical_id, r.type, r.properties] for r in stack.resources.values()],
        "state_machines": stack.state_machine_definitions,
        "start": start.isoformat(),
    }
    text = json.dumps(document, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


_snapshots: dict[str, DeploySnapshot | None] = {}
_lock = threading.Lock()


def enabled() -> bool:
    """False when ``LOCALCLOUD_NO_DEPLOY_SNAPSHOT=1``."""
    return os.environ.get(OFF_ENV, "") != "1"


def find(key: str) -> DeploySnapshot | None:
    """The snapshot kept for ``key``, or None (none kept, or the state could not be copied)."""
    with _lock:
        return _snapshots.get(key)


def known(key: str) -> bool:
    """True if a deploy with ``key`` was already tried (kept, or found not copyable)."""
    with _lock:
        return key in _snapshots


def keep(key: str, calls: list[CallRecord]) -> DeploySnapshot | None:
    """Copy moto's state now (right after a deploy with ``key``) with the deploy's ``calls``.

    Returns:
        The snapshot, or None if the state cannot be deep-copied (the stack then always deploys).
    """
    backends = tuple(
        _Backend(backends, account_id, region, backend, account)
        for backends in list(_instances())
        for account_id, account in backends.items()
        for region, backend in account.items()
    )
    memo: dict[int, Any] = {}
    for kept in backends:
        memo[id(kept.kept)] = kept.kept
        memo[id(kept.kept_account)] = kept.kept_account
        memo[id(kept.backends)] = kept.backends
    snapshot: DeploySnapshot | None
    try:
        with _fresh_locks():
            state, records = copy.deepcopy(
                ({id(k.kept): k.kept.__dict__ for k in backends}, tuple(calls)), memo
            )
        snapshot = DeploySnapshot(backends, state, records)
    except (TypeError, copy.Error, RecursionError):
        snapshot = None
    with _lock:
        if len(_snapshots) >= _MAX_SNAPSHOTS:
            _snapshots.clear()
        _snapshots[key] = snapshot
    return snapshot


def _instances() -> list[BackendDict[Any]]:
    """Every moto ``BackendDict`` in use (moto's own list, which its reset walks)."""
    instances: list[BackendDict[Any]] = BackendDict._instances  # type: ignore[misc]  # moto's class-level list
    return instances


def _new_condition(condition: threading.Condition) -> tuple[Any, ...]:
    return (threading.Condition, ())


def _new_lock(lock: Any) -> tuple[Any, ...]:
    return (type(lock), ())


@contextmanager
def _fresh_locks() -> Iterator[None]:
    """While copying, a lock or condition copies as a new, free one (threading's own are not copyable; a
    ``Condition`` copied member by member would keep calling the original lock's methods)."""
    table = copyreg.dispatch_table
    added = {threading.Condition: _new_condition, _thread.RLock: _new_lock, _thread.LockType: _new_lock}
    saved = {kind: table.get(kind) for kind in added}
    table.update(added)
    try:
        yield
    finally:
        for kind, reducer in saved.items():
            if reducer is None:
                table.pop(kind, None)
            else:
                table[kind] = reducer
