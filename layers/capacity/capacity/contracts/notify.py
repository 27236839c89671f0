"""``notify``: approvals, outcomes, failures, waits between looks and a step that keeps failing
(``degraded``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from capacity.contracts.common import StepError, StepIn, StepOut
from capacity.contracts.finding import ChooseOutput
from capacity.wire import UtcDatetime


# 4. notify
class DegradedStreak(StepIn):
    """How long a step has been failing on transient faults (kept in the ledger's ``DEGRADED#<time>`` items
    by ``notify`` kind ``degraded``). Times are ``YYYY-MM-DDTHH:MM:SSZ`` (``""`` before the first fault)."""

    state: str = ""
    since: str = ""
    last_at: str = ""
    attempt: int = Field(default=0, ge=0)
    told: int = Field(default=0, ge=0)
    """How many times a person was told about this streak."""


class DegradedOutput(StepOut):
    """What the reserve workflow does about a step that keeps failing on transient faults.

    ``action``: ``wait`` (``wait_seconds``, then the step again), ``fail`` (no money at stake: the failure
    path) or ``end`` (the reservation ended or is being released: the release owns what is left); plus the
    streak (:class:`DegradedStreak`'s fields) for the next fault.
    """

    action: Literal["wait", "fail", "end"]
    wait_seconds: int
    state: str
    since: str
    last_at: str
    attempt: int
    told: int


class NotifyInput(StepIn):
    """``kind`` ``search_wait`` (``task_token``: the wait between two looks of a request that keeps looking,
    :mod:`capacity.logic.continuity.keep_looking`), ``offering_taken`` (``error``, ``look``: a look's offering
    was taken before the purchase; answers a :class:`ChooseOutput`), ``approval_request`` (``task_token``,
    ``plan``), ``approval_outcome`` (``approved``, ``reason``, optional ``error``), ``failure``
    (``error``; ``phase`` ``release`` when the release workflow itself failed, so no new release is
    requested), ``degraded`` (``state``: the step that keeps failing, ``error``: its last transient fault)
    or ``workflow_stopped`` (``workflow``: Step Functions' execution status change event, from the default
    bus; ``request_id`` empty)."""

    kind: Literal[
        "search_wait",
        "offering_taken",
        "approval_request",
        "approval_outcome",
        "failure",
        "degraded",
        "workflow_stopped",
    ]
    request_id: str
    state: str | None = None
    task_token: str | None = None
    plan: ChooseOutput | None = None
    approved: bool | None = None
    reason: str | None = None
    approver: str | None = None
    error: StepError | None = None
    phase: Literal["reserve", "release"] | None = None
    attempt_id: str | None = Field(default=None, max_length=256)
    """``failure`` of ``phase`` ``release``: the release execution's name (one record per attempt)."""
    workflow: dict[str, Any] | None = None
    """``workflow_stopped``: the EventBridge event (``detail``: ``executionArn``, ``status``, ``input``)."""
    entered_at: UtcDatetime | None = None
    """``approval_request``: when the approval state was entered (``$$.State.EnteredTime``, UTC): the
    approval timeout (``TimeoutSecondsPath``) counts from no earlier than this instant."""
    look: int = Field(default=0, ge=0)
    """``offering_taken``: the look whose offering was taken (its answer waits for look ``look + 1``)."""


class NotifyOutput(StepOut):
    """``{"notified": true, "state": "<state recorded or current>"}``."""

    notified: bool
    state: str | None
