"""Following a reservation until it reaches a state (``capacity watch``, ``reserve --watch``, the MCP tool).

It polls ``GET /reservations/{id}`` and hands over each new history entry as it appears. Between polls it
lets time pass on the target (:meth:`~capacity_cli.api.Transport.pause`): a remote API is polled every
``interval`` seconds; the embedded local cloud runs its simulation to the next state change instead, so a
reservation a week ahead is followed to ``READY`` in seconds.

It stops when the state is one of ``until`` (reached; with ``through``, also when the history shows it went
through one: states do not come back), when no state of ``until`` can come any more (a
final state: after ``CANCELLED``, ``FAILED`` or ``REJECTED`` only the release's ``RELEASING`` and
``RELEASED`` can follow; nothing follows ``RELEASED``), when the local cloud has nothing left to run, or at
``timeout_seconds`` of wall time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from capacity_cli.api import FINAL_STATES, ApiError, CapacityApi

DEFAULT_UNTIL = frozenset({"READY", "AWAITING_APPROVAL"}) | FINAL_STATES
"""Where ``watch`` stops unless told: serving, waiting for a person, or over."""
AFTER_FINAL = frozenset({"RELEASING", "RELEASED"})
"""What may still follow ``CANCELLED``, ``FAILED`` or ``REJECTED``: the release."""
NOT_RECORDED_POLLS = 6
"""A reservation just accepted may answer 404 until the workflow records it (within seconds)."""

Outcome = Literal["reached", "final", "idle", "timeout"]


@dataclass(frozen=True)
class WatchResult:
    """How a watch ended: ``outcome`` (reached, final, idle, timeout), the last ``view`` (the
    ``GET /reservations/{id}`` body) and its ``state``."""

    outcome: Outcome
    view: dict[str, Any]

    @property
    def state(self) -> str | None:
        """The reservation's state when the watch ended."""
        state = self.view.get("state")
        return str(state) if state else None


def can_still_reach(state: str | None, until: Iterable[str]) -> bool:
    """False when the reservation is in a final state from which no state of ``until`` can follow."""
    wanted = set(until)
    if state == "RELEASED":
        return False
    if state in FINAL_STATES:
        return bool(wanted & AFTER_FINAL)
    return True


def follow(
    api: CapacityApi,
    request_id: str,
    *,
    until: Iterable[str] = DEFAULT_UNTIL,
    interval_seconds: float = 10.0,
    timeout_seconds: float | None = None,
    on_entry: Callable[[Mapping[str, Any]], None] = lambda entry: None,
    skip: int = 0,
    monotonic: Callable[[], float] = time.monotonic,
    through: bool = False,
) -> WatchResult:
    """Follow ``request_id`` (see the module docstring).

    Args:
        on_entry: called with each history entry not seen before, oldest first.
        skip: history entries already shown (they are not handed to ``on_entry`` again).
        through: a state of ``until`` in the history counts as reached (``watch --until PURCHASED`` on a
            reservation already ``SCHEDULED``); for states asked for by name, not the default ones.

    Raises:
        ApiError: the API refused (404 after the reservation stayed unknown for several polls).
    """
    wanted = frozenset(until)
    seen = skip
    unknown = 0
    started = monotonic()
    while True:
        try:
            view = api.reservation(request_id)
        except ApiError as exc:
            if exc.status != 404 or unknown >= NOT_RECORDED_POLLS:
                raise
            unknown += 1
            api.transport.pause(min(interval_seconds, 5.0))
            continue
        history = list(view.get("history") or [])
        for entry in history[seen:]:
            on_entry(entry)
        seen = max(seen, len(history))
        state = view.get("state")
        # With through: reached also when it went through a state asked for before or between two polls
        # (PURCHASED is brief on a fast clock): states do not come back, waiting again would wait for the end.
        if state in wanted or (through and any(entry.get("state") in wanted for entry in history)):
            return WatchResult("reached", view)
        if not can_still_reach(state, wanted):
            return WatchResult("final", view)
        if timeout_seconds is not None and monotonic() - started >= timeout_seconds:
            return WatchResult("timeout", view)
        if not api.transport.pause(interval_seconds, request_id=request_id):
            view = api.reservation(request_id)
            for entry in list(view.get("history") or [])[seen:]:
                on_entry(entry)
            outcome: Outcome = "reached" if view.get("state") in wanted else "idle"
            return WatchResult(outcome, view)
