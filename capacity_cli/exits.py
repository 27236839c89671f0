"""The CLI's exit statuses and its error document: the one place both are defined (docs/cli.md, "Exit
statuses and errors").

Every command ends with one of :class:`ExitStatus`; a script can tell a refusal from a request that waits
for a person, from a typo, from an outage, without reading the message:

====  ==================  ===================================================================================
code  name                when
====  ==================  ===================================================================================
0     ``ok``              done (a followed reservation reached the state asked for)
1     ``failed``          the command ran and the outcome is not the one asked for: a followed reservation
                          ended ``FAILED``/``CANCELLED`` or cannot reach the state any more, a timeout, a
                          question answered no, ``smoke`` found a route that does not answer,
                          ``status --fail-if-any`` listed something
2     ``bad_input``       usage (an unknown command or option, a value Click refuses), a file, flag or
                          configuration the CLI cannot use, the API's 400, 413 and 422
3     ``refused``         the API refused what it understood: 401/403 (not in the team, over budget, the
                          four-eyes rule, a signature API Gateway does not accept), 409 (the reservation is
                          not in a state that allows it); a followed reservation ended ``REJECTED``
4     ``needs_approval``  a person must decide first: a followed reservation stopped at ``AWAITING_APPROVAL``
                          without being asked to, an extension waits for an approver
5     ``not_found``       404 (no such reservation, schedule or stack), or a route this deployment lacks
6     ``unavailable``     the API answered 5xx or 429 after the retries, or did not answer (network, timeout)
130   ``interrupted``     Ctrl-C
====  ==================  ===================================================================================

Under ``--output json`` (or ``yaml``) an error is a document on **standard error** (standard output keeps
only data), always of this shape::

    {"error": {"code": "not_found", "exit_status": 5, "message": "...", "http_status": 404,
               "problems": [{"field": "...", "message": "...", "suggestion": "..."}], "hint": "..."}}

``http_status`` is null when no answer came (usage, a bad file, no network); ``problems`` is the API's field
errors (empty otherwise); ``hint`` is null or one sentence of what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import IntEnum
from typing import Any


class ExitStatus(IntEnum):
    """The exit statuses of ``capacity`` (see the module docstring)."""

    OK = 0
    FAILED = 1
    BAD_INPUT = 2
    REFUSED = 3
    NEEDS_APPROVAL = 4
    NOT_FOUND = 5
    UNAVAILABLE = 6
    INTERRUPTED = 130

    @property
    def code(self) -> str:
        """The stable name in the error document (``not_found``)."""
        return self.name.lower()


def status_for_http(status: int) -> ExitStatus:
    """The exit status of an API answer ``status`` that is not a success."""
    if status == 404:
        return ExitStatus.NOT_FOUND
    if status in (401, 403, 409):
        return ExitStatus.REFUSED
    if status == 429 or status >= 500:
        return ExitStatus.UNAVAILABLE
    return ExitStatus.BAD_INPUT  # 400, 405, 413, 415, 422: what was sent cannot be used as it is


FOLLOWED_STATES: Mapping[str, ExitStatus] = {
    "REJECTED": ExitStatus.REFUSED,
    "AWAITING_APPROVAL": ExitStatus.NEEDS_APPROVAL,
}
"""How a followed reservation that stopped short of what was asked ends, by its state (else ``failed``)."""


def status_for_state(state: str | None) -> ExitStatus:
    """The exit status of a watch that ended at ``state`` without reaching a state it was asked for."""
    return FOLLOWED_STATES.get(str(state), ExitStatus.FAILED)


def error_document(
    status: ExitStatus,
    message: str,
    *,
    http_status: int | None = None,
    problems: Sequence[Mapping[str, Any]] = (),
    hint: str | None = None,
) -> dict[str, Any]:
    """The error document printed under ``--output json|yaml`` (see the module docstring)."""
    return {
        "error": {
            "code": status.code,
            "exit_status": int(status),
            "message": message,
            "http_status": http_status,
            "problems": [dict(problem) for problem in problems],
            "hint": hint,
        }
    }
