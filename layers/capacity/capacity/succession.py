"""Keeping a model served past its reservation (issue 17, ``serve_until``): the rules that need no AWS call.

A request with ``serve_until`` is a *chain*: the reservation bought for it (the root) and, when no extension
in place fits, the *successors* the orchestrator requests to take over, each a request of its own
(``rollover_of`` names the one it follows; its id is :func:`successor_id`). This module decides, from values
alone:

- whether an end covers ``serve_until`` (:func:`covered`: the release starts ``margin`` before the end, so
  the end must be at least ``serve_until + margin``) and when to act (:func:`rollover_due`: the lead time
  before the end);
- how long an extension in place must be (:func:`extension_hours`);
- the successor's window (:func:`successor_window`): it must start early enough to be ``Active`` and
  ``InService`` before the current reservation's release (:data:`DEPLOY_ALLOWANCE`), and last until
  ``serve_until`` whatever start in its window is offered: the shortest such duration first;
- the successor's request (:func:`successor_request`): the predecessor's, with that window, the budget left
  on the chain and ``strategy`` ``reserved``.

Times are UTC; money USD; hours whole hours.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from math import ceil
from typing import Any

from capacity.platforms import platform as platform_named
from capacity.request import (
    MAX_DURATION_HOURS,
    ReservationRequest,
    capacity_block_durations,
    valid_capacity_block_hours,
)
from capacity.timeutil import iso_z

DEPLOY_ALLOWANCE = timedelta(hours=2)
"""How long a successor is given, from its start, to be ``Active`` with its endpoint and inference components
``InService`` (the activation poll, ``CreateEndpoint`` and ``CreateInferenceComponent`` take minutes on AWS;
the rest is margin)."""
START_SLACK = timedelta(hours=24)
"""How much earlier than needed a successor may start: capacity blocks (and the local cloud's training plans)
start at 11:30 UTC day boundaries, so a one-day window of starts always holds one."""
BUY_AHEAD = timedelta(hours=1)
"""A successor's window opens at least this long after the decision (capacity is sold to start later than
now; the local cloud's market offers starts an hour ahead at the earliest)."""
MAX_GENERATIONS = 20
"""The longest chain (root and successors) the orchestrator builds; past it a person is told."""
APPROVAL_WAIT = timedelta(hours=6)
"""How long an automatic extension above the approval threshold waits for an approver (at most a quarter of
the lead time) before it is taken as declined and the roll-over goes on."""
MAX_REQUEST_ID = 64


def covered(end: datetime, margin: timedelta, serve_until: datetime) -> bool:
    """True when a reservation ending at ``end`` (released ``margin`` before it) serves until
    ``serve_until``."""
    return end - margin >= serve_until


def rollover_due(end: datetime, lead_hours: int) -> datetime:
    """When the orchestrator acts for a reservation ending at ``end``: ``lead_hours`` before it."""
    return end - timedelta(hours=lead_hours)


def approval_deadline(due: datetime, lead_hours: int) -> datetime:
    """Until when an automatic extension asked for at ``due`` waits for an approver (:data:`APPROVAL_WAIT`,
    at most a quarter of the lead time)."""
    return due + min(APPROVAL_WAIT, timedelta(hours=lead_hours) / 4)


def _days_reaching(start: datetime, target: datetime) -> int:
    """Whole hours, in 24-hour steps, from ``start`` to at least ``target`` (at least one day)."""
    return max(24, ceil((target - start) / timedelta(days=1)) * 24)


def _block_hours(hours: int) -> int:
    """The shortest capacity block duration of at least ``hours`` (the longest one past 182 days)."""
    return next((h for h in capacity_block_durations(MAX_DURATION_HOURS) if h >= hours), MAX_DURATION_HOURS)


def extension_hours(
    end: datetime, margin: timedelta, serve_until: datetime, *, platform: str, max_hours: int
) -> int:
    """The extension in place (hours) that makes a reservation ending at ``end`` serve until
    ``serve_until``: whole days (capacity blocks: a duration EC2 sells), at most ``max_hours``."""
    hours = _days_reaching(end, serve_until + margin)
    if platform_named(platform).capacity_blocks and not valid_capacity_block_hours(hours):
        hours = _block_hours(hours)
    return min(hours, max_hours)


def successor_id(root_id: str, generation: int) -> str:
    """The request id of the ``generation``-th reservation of the chain started by ``root_id`` (the root is
    the first): ``<root>-r<generation>``, cut and suffixed with a hash of the root when longer than 64
    characters. Deterministic, so a trigger delivered twice names one successor; the doors refuse ids that end
    this way (:data:`capacity.request.SUCCESSOR_ID_END`)."""
    suffix = f"-r{generation}"
    text = f"{root_id}{suffix}"
    if len(text) <= MAX_REQUEST_ID:
        return text
    digest = hashlib.sha256(root_id.encode()).hexdigest()[:8]
    head = root_id[: MAX_REQUEST_ID - len(suffix) - len(digest) - 1]
    return f"{head}-{digest}{suffix}"


@dataclass(frozen=True)
class Window:
    """A successor's window (UTC): it starts no earlier than ``earliest_start`` and no later than
    ``latest_start`` (so it is ``InService`` before the current reservation's release), and lasts
    ``duration_hours``; ``latest_end`` = ``latest_start`` + the duration. Any start in it serves until
    ``serve_until`` (``covers``), unless the duration was capped at the longest reservation."""

    earliest_start: datetime
    latest_start: datetime
    duration_hours: int
    latest_end: datetime
    covers: bool


class NoSuccessorError(ValueError):
    """No successor can be requested; the message says why, for a person."""


def successor_window(
    *,
    end: datetime,
    margin: timedelta,
    serve_until: datetime,
    now: datetime,
    platform: str,
    extra_days: int = 0,
    after_paid_hours: bool = False,
) -> Window:
    """The window of the reservation that takes over from one ending at ``end`` (released ``margin`` before):
    the shortest duration that serves until ``serve_until`` from a start early enough to be in service
    before that release (plus ``extra_days``: a longer one, when the shortest finds nothing), with the starts
    that cover it. An offering ``(start, hours)`` covers when ``start <= latest_start`` and ``start + hours >=
    serve_until + margin``: the window ``[max(now + 1 h, latest_start - 1 day, serve_until + margin - hours),
    latest_start + hours]`` holds exactly those.

    ``after_paid_hours``: the reservation's last hours were bought as an extension for this continuity
    (:func:`_window_after`): the successor never pays for them.

    Raises:
        NoSuccessorError: it is too late to start one before the release, or ``serve_until`` is covered.
    """
    if covered(end, margin, serve_until):
        raise NoSuccessorError(f"the reservation already serves until {iso_z(serve_until)}")
    if after_paid_hours:
        return _window_after(
            end=end, margin=margin, serve_until=serve_until, now=now, platform=platform, extra_days=extra_days
        )
    latest_start = end - margin - DEPLOY_ALLOWANCE
    opens = max(now + BUY_AHEAD, latest_start - START_SLACK)
    if opens > latest_start:
        raise NoSuccessorError(
            f"it is too late to roll over: a successor must start by {iso_z(latest_start)} to be in service "
            f"before the release at {iso_z(end - margin)}, and capacity bought now starts after "
            f"{iso_z(now + BUY_AHEAD)}; set rollover_lead_hours longer next time"
        )
    goal = serve_until + margin
    hours = _days_reaching(latest_start, goal) + 24 * extra_days
    if platform_named(platform).capacity_blocks and not valid_capacity_block_hours(hours):
        hours = _block_hours(hours)
    covers = hours <= MAX_DURATION_HOURS
    hours = min(hours, MAX_DURATION_HOURS)
    earliest = max(opens, goal - timedelta(hours=hours)) if covers else opens
    return Window(
        earliest_start=earliest,
        latest_start=latest_start,
        duration_hours=hours,
        latest_end=latest_start + timedelta(hours=hours),
        covers=covers,
    )


def _window_after(
    *, end: datetime, margin: timedelta, serve_until: datetime, now: datetime, platform: str, extra_days: int
) -> Window:
    """The successor of a reservation whose end an extension in place moved (issue 28: one continuity
    decision per lead time, never two fees for the same hours): it starts between the hand-over before the
    end (``end - margin -`` :data:`DEPLOY_ALLOWANCE`) and the end itself, so it pays for none of the hours the
    extension bought. On a market whose starts fall on the hour the reservation ends (11:30 UTC) it starts
    there: the clients move once it serves, after a gap of at most the release margin and its deployment.

    Raises:
        NoSuccessorError: capacity bought now cannot start by ``end``.
    """
    opens = max(now + BUY_AHEAD, end - margin - DEPLOY_ALLOWANCE)
    if opens > end:
        raise NoSuccessorError(
            f"it is too late to roll over: a successor must start by {iso_z(end)}, and capacity bought now "
            f"starts after {iso_z(now + BUY_AHEAD)}; set rollover_lead_hours longer next time"
        )
    goal = serve_until + margin
    hours = _days_reaching(end, goal) + 24 * extra_days
    if platform_named(platform).capacity_blocks and not valid_capacity_block_hours(hours):
        hours = _block_hours(hours)
    covers = hours <= MAX_DURATION_HOURS
    hours = min(hours, MAX_DURATION_HOURS)
    earliest = max(opens, goal - timedelta(hours=hours)) if covers else opens
    return Window(
        earliest_start=earliest,
        latest_start=end,
        duration_hours=hours,
        latest_end=end + timedelta(hours=hours),
        covers=covers,
    )


def successor_request(
    predecessor: ReservationRequest,
    *,
    request_id: str,
    window: Window,
    budget_left_usd: Decimal,
    serve_until: datetime,
    lead_hours: int,
    now: datetime,
) -> dict[str, Any]:
    """The successor's request body (to put as ``ReservationRequested``): ``predecessor``'s models, type,
    count, regions, team, requester and release margin, with ``window``, ``max_upfront_fee_usd`` the budget
    left on the chain (the approval threshold kept while below it), ``strategy`` ``reserved``, the
    approval given until the window's latest start, and ``rollover_of`` the predecessor. ``serve_until`` (and
    the lead) are carried only when the window's duration, capped at the longest reservation, does not reach
    it (the successor then keeps going itself).

    Raises:
        NoSuccessorError: no budget is left on the chain.
    """
    if budget_left_usd <= 0:
        raise NoSuccessorError(
            f"the chain has spent its whole budget max_upfront_fee_usd ({predecessor.max_upfront_fee_usd:f} "
            "USD): nothing more can be bought"
        )
    threshold = predecessor.approval_above_usd
    hours_to_decide = int((window.latest_start - now) / timedelta(hours=1)) - 1
    body = predecessor.model_dump(mode="json", exclude_none=True)
    for field in ("training_plan_arn", "capacity_reservation_id", "search_until", "search_every_minutes"):
        body.pop(field, None)  # the successor is bought, now or never: it does not keep looking
    body |= {
        "request_id": request_id,
        "earliest_start": iso_z(window.earliest_start),
        "latest_end": iso_z(window.latest_end),
        "duration_hours": window.duration_hours,
        "max_upfront_fee_usd": f"{budget_left_usd:f}",
        "approval_timeout_hours": max(1, min(predecessor.approval_timeout_hours, hours_to_decide)),
        "strategy": "reserved",
        "dry_run": False,
        "rollover_of": predecessor.id,
    }
    body.pop("serve_until", None)
    body.pop("rollover_lead_hours", None)
    if not window.covers:  # capped at the longest reservation: it keeps going after its own end
        body |= {"serve_until": iso_z(serve_until), "rollover_lead_hours": lead_hours}
    if threshold is not None and threshold < budget_left_usd:
        body["approval_above_usd"] = f"{threshold:f}"
    else:
        body.pop("approval_above_usd", None)  # nothing within the budget left needs it
    return body
