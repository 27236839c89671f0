"""``record_request``'s output (its input is the EventBridge event: :mod:`capacity.logic.steps.intake`)."""

from __future__ import annotations

from capacity.contracts.common import StepOut
from capacity.offerings import OfferingSummary
from capacity.platforms import PlatformName as Platform


# 1. record_request: in = the EventBridge event (see capacity.logic.steps.intake)
class RecordRequestOutput(StepOut):
    """``{"request_id", "platform", "duplicate", "regions", "dry_run", "resume_offering", "brought"}``;
    ``duplicate`` ends the workflow quietly; ``resume_offering`` (a resumed workflow whose request has a
    purchase intent) is the offering the intent names: the workflow goes straight back to the purchase.
    ``platform`` is the request's (``sagemaker`` | ``ec2``): the state machine keeps it at ``$.platform``,
    passes it to the steps that route by it and branches on it."""

    request_id: str
    platform: Platform
    duplicate: bool
    regions: list[str]
    dry_run: bool
    resume_offering: OfferingSummary | None = None
    brought: bool = False
    """The request brings its own reservation: the workflow adopts it (``AdoptReservation``) instead of
    searching, choosing and buying."""
    continued: bool = False
    """This execution continues a request that keeps looking (``resume_of.look``: continue-as-new before the
    history limit): it goes straight to look ``look``'s search."""
    look: int = 0
    """The look this execution starts at (0, or the continued one's next look)."""
    invalid: str | None = None
    """Why a request admitted at its door (202) and recorded now is refused (its delivery came after its
    window could start, say): the workflow records ``FAILED`` with this reason and tells the requester
    (``NotifyFailure``), so GET shows an outcome."""
    invalid_error: str = "InvalidRequest"
    """The error name ``FAILED`` records with ``invalid`` (the refusal's own: ``OutOfScope``,
    ``BroughtReservationRefused``...; ``InvalidRequest`` for a delivery too late for its window)."""
