"""A request's purchase attempts: a request that keeps looking (``search_until``) may miss the offering a
look chose (another buyer took it, nothing replaced it) and buy at a later look.

The ledger is append-only, so each attempt has its own items rather than rewriting the first one's:
attempt ``n`` (0 first) writes its intent at :func:`intent_key` and holds the team's money under
:func:`hold_key`; its purchase calls carry ``attempt: n``. An attempt that bought nothing (reconciled with
AWS) is closed by ``PURCHASE_MISSED#<n + 1>`` (its offering, when, why), after its hold was given back: the
number of those markers is the live attempt's number. A ``PURCHASE`` is one per request, whichever attempt
bought it, so nothing is ever bought twice.
"""

from __future__ import annotations

from typing import Any

from capacity.lifecycle import PURCHASE_KEY, Event
from capacity.ports import Ports
from capacity.record_kinds import PURCHASE_CALL, PURCHASE_INTENT, PURCHASE_MISSED


def live_attempt(ports: Ports, request_id: str) -> int:
    """The number of the request's live purchase attempt: how many attempts missed (0 until one did)."""
    return len(ports.ledger.items(request_id, f"{PURCHASE_MISSED}#"))


def intent_key(attempt: int) -> str:
    """The ledger ``sk`` of attempt ``attempt``'s purchase intent (``PURCHASE_INTENT``, then
    ``PURCHASE_INTENT#<n>``)."""
    return PURCHASE_INTENT if attempt == 0 else f"{PURCHASE_INTENT}#{attempt}"


def hold_key(request_id: str, attempt: int) -> str:
    """The team hold of attempt ``attempt`` (:func:`~capacity.logic.governance.policy.reserve_spend`'s
    ``key``): the request id for the first, its own for each later one (a given-back hold is never held
    again)."""
    return request_id if attempt == 0 else f"{request_id}#ATTEMPT#{attempt}"


def live_intent(ports: Ports, request_id: str) -> dict[str, Any] | None:
    """The live attempt's purchase intent, or None when it wrote none (nothing may have been bought since
    the last miss)."""
    return ports.ledger.get(request_id, intent_key(live_attempt(ports, request_id)))


def live_hold_key(ports: Ports, request_id: str) -> str:
    """The team hold of the live attempt (the one a failure gives back, or a release's quota)."""
    return hold_key(request_id, live_attempt(ports, request_id))


def attempt_calls(ports: Ports, request_id: str, attempt: int) -> list[dict[str, Any]]:
    """The purchase calls (``PURCHASE_CALL#<time>``) attempt ``attempt`` made, oldest first (a call without
    ``attempt`` is the first attempt's)."""
    calls = ports.ledger.items(request_id, f"{PURCHASE_CALL}#")
    return [call for call in calls if int(call.get("attempt", 0)) == attempt]


def nothing_bought(ports: Ports, request_id: str) -> None:
    """The live attempt is reconciled and bought nothing: its money is no longer in flight
    (:attr:`~capacity.lifecycle.Event.MONEY_SETTLED`; a no-op when it was not), so the release may begin."""
    ports.ledger.record(request_id, Event.MONEY_SETTLED, actor=ports.actor, key=PURCHASE_KEY)
