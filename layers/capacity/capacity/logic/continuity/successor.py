"""Whether a chain kept serving needs a reservation after a given one (issue 26's ``serve_until``): the
rule both the roll-over's intake (a successor no longer needed is stopped before anything is bought,
:mod:`capacity.logic.steps.intake`) and the serve_until door (:mod:`capacity.logic.doors.serve_until`:
successors not needed any more are cancelled) apply."""

from __future__ import annotations

from datetime import datetime

from capacity.logic.continuity import extend
from capacity.logic.steps.common import load_purchase, load_request
from capacity.ports import Ports
from capacity.succession import covered


def successor_needed(ports: Ports, previous: str, until: datetime | None) -> bool:
    """Whether keeping serving until ``until`` (UTC; None: no longer kept serving) needs a reservation after
    ``previous``: ``until`` is set and not covered by ``previous``'s own end (less its release margin); a
    ``previous`` not bought yet needs one.

    Raises:
        ReservationNotFound: ``previous`` is not recorded.
        RetryableAwsError: the ledger failed.
    """
    if until is None:
        return False
    before = load_purchase(ports, previous)
    margin = extend.release_margin(load_request(ports, previous))
    return before is None or not covered(before.end_time, margin, until)
