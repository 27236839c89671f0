# ruff: noqa: N818 - class names are Step Functions error names (OfferingNotFound, not OfferingNotFoundError)
"""The application's one exception hierarchy.

A Lambda that raises reaches Step Functions with the exception's class name as its error name (the Lambda
runtime reports ``errorType = type(exc).__name__``), so each class name here is an ASL error name the state
machines can ``Retry`` or ``Catch`` (AWS Step Functions developer guide, "Error handling in Step
Functions"). Rename a class and every state machine that names it must change too.

Retryable errors (``retryable = True``): :class:`ResourceBusy`, :class:`PurchaseUnconfirmed` and
:class:`RetryableAwsError`. Everything
else is final for the step that raised it and is routed to the failure path (notify + release).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem with one field of an input: ``field`` is a dotted path (``models.0.memory_mb``)."""

    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        """The JSON shape used by the API's 400 body: ``{"field": ..., "message": ...}``."""
        return {"field": self.field, "message": self.message}


class CapacityError(Exception):
    """Base class of every error the application raises on purpose.

    ``str(exc)`` is a sentence a person can act on: it reaches Slack and the ledger unchanged.
    """

    retryable = False


class ConfigurationError(CapacityError):
    """An environment variable the function needs is missing or malformed (a deployment bug)."""


class InvalidRequest(CapacityError):
    """A reservation request (or a handler input) failed validation.

    Attributes:
        errors: every problem found, each naming the field and what to fix.
    """

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = list(errors)
        summary = "; ".join(f"{e.field}: {e.message}" for e in self.errors) or "invalid request"
        super().__init__(summary)


class DuplicateRequest(CapacityError):
    """A request with this ``request_id`` was already recorded (its lifecycle is already running)."""


class ReservationNotFound(CapacityError):
    """No reservation with this ``request_id`` is recorded in the ledger."""


class ReservationCancelled(CapacityError):
    """The reservation was cancelled (or otherwise finished) before this step; nothing was bought."""


class TransitionRefused(CapacityError):
    """The lifecycle's table (:mod:`capacity.lifecycle`) does not allow this change from the reservation's
    current state: nothing was recorded (the message names the state and the change)."""


class MoneyInFlight(CapacityError):
    """A purchase or an extension whose AWS call may have committed is not reconciled yet: the release may
    not begin until it is (:mod:`capacity.lifecycle`); the release step waits and tries again."""

    retryable = True


class NotAwaitingApproval(CapacityError):
    """An approval decision arrived for a reservation that is not waiting for one (or was decided)."""


class OfferingNotFound(CapacityError):
    """No offering matches the request (window, duration, count, regions)."""


class CapacityUnavailable(CapacityError):
    """AWS reported no capacity for an operation (e.g. an endpoint could not get instances)."""


class QuotaExceeded(CapacityError):
    """AWS answered ``ResourceLimitExceeded``: a service quota, not a lack of capacity."""


class BudgetExceeded(CapacityError):
    """The only offerings available cost more upfront than ``max_upfront_fee_usd``; nothing was bought."""


class OfferingExpired(CapacityError):
    """The offering id is no longer valid and a fresh search found nothing buyable within budget."""


class PurchaseFailed(CapacityError):
    """``CreateTrainingPlan`` failed for a reason other than an expired offering or a quota."""


class TrainingPlanNameInUse(CapacityError):
    """``CreateTrainingPlan`` answered ``ResourceInUse``: a plan with this name exists (adopt it)."""


class NotDeployable(CapacityError):
    """What the request names cannot be used where the capacity would be bought or launched (checked
    before any approval, purchase or launch, :mod:`capacity.logic.governance.checks`): nothing was bought.

    Attributes:
        errors: every problem, each naming the request's field.
    """

    def __init__(self, message: str, errors: list[FieldError] | None = None) -> None:
        self.errors = list(errors or [])
        super().__init__(message)


class ModelNotFound(NotDeployable):
    """A ``model_name`` of the request names no SageMaker model in the region (nothing bought)."""


class LaunchTemplateNotFound(NotDeployable):
    """The request's launch template (or its version) does not exist in the region, or its instance profile
    runs as a role the deployment does not allow (nothing bought)."""


class OutOfScope(InvalidRequest):
    """The request names something outside what the administrator allows (a model artifact bucket, an
    instance role): the API answers 400 naming the field; nothing is put on the bus."""


class BroughtReservationRefused(InvalidRequest):
    """The reservation a request brings (``training_plan_arn``, ``capacity_reservation_id``) does not exist
    in this account and the request's regions, is not Active or Scheduled, or does not fit the request (type,
    count, window, target): the API answers 422 naming the field; nothing is bought
    (:func:`capacity.logic.governance.checks.brought_reservation`)."""


class PlanFailed(CapacityError):
    """The training plan reached ``Failed`` or ``Expired`` before it could be used."""


class ActivationTimeout(CapacityError):
    """The training plan was not ``Active`` by its deadline (start time + 2 hours)."""


class EndpointFailed(CapacityError):
    """The endpoint reached ``Failed`` (the message carries SageMaker's ``FailureReason``) or timed out."""


class LaunchFailed(CapacityError):
    """Instances launched into a capacity block stopped, terminated or never ran (ids in the message)."""


class ComponentFailed(CapacityError):
    """An inference component reached ``Failed`` (with SageMaker's ``FailureReason``) or timed out."""


class ResourceBusy(CapacityError):
    """The endpoint (or component) is ``Creating``/``Updating``: SageMaker rejects changes; retry later."""

    retryable = True


class PurchaseUnconfirmed(CapacityError):
    """An earlier purchase call may have committed and is not visible in AWS yet: look again before buying."""

    retryable = True


class PurchaseInProgress(CapacityError):
    """Another execution owns this request's purchase: this one must not buy (it ends quietly)."""


class RetryableAwsError(CapacityError):
    """Throttling, a 5xx or a timeout that outlasted botocore's own retries (standard mode, 5 attempts)."""

    retryable = True


class SlackUnavailable(RetryableAwsError):
    """Slack's Web API did not answer a read the policy needs (rate limited, timed out, a 5xx): try again.
    A subclass of :class:`RetryableAwsError` so every door treats it as a transient fault."""


class AccessDenied(CapacityError):
    """AWS refused a call for lack of permission (IAM ``AccessDenied``/``UnauthorizedOperation``...).

    A deployment defect, never a transient fault and never "not found": the step stops and names the
    action and resource AWS refused, so the role can be fixed. Not retryable.
    """


class LeftoverResources(CapacityError):
    """Release finished but resources tagged with the reservation still exist (names in the message)."""


class ApprovalRejected(CapacityError):
    """A person rejected the purchase: the ``SendTaskFailure`` error name; never raised by a Lambda."""


class ReservationClosed(CapacityError):
    """The reservation is already released; it cannot be cancelled or changed any more."""


class NameCollision(CapacityError):
    """A SageMaker resource with this reservation's name is tagged with another request id (never adopted)."""


class ReleaseStuck(CapacityError):
    """Release polled past its deadline: resources are still deleting (names and statuses in the message)."""


class SlackUnauthorized(CapacityError):
    """A request to the Slack door failed verification (signature, timestamp window or replay): HTTP 401.

    The message says which check failed, never the secret or the expected signature.
    """


class ScheduleNotFound(CapacityError):
    """No recurring reservation schedule with this name exists (HTTP 404)."""


class ScheduleExists(CapacityError):
    """A recurring reservation schedule with this name already exists (HTTP 409): delete it first."""


class TeamLimitExceeded(CapacityError):
    """A purchase would take its team (or the account) past a limit an administrator set: the monthly
    budget, the account-wide cap or the instance quota; nothing was bought. The message names what is
    left (``team ml-eval has $812.40 left in December 2026``)."""


class NotPermitted(CapacityError):
    """The authenticated caller may not do this (API 403, Slack ephemeral refusal): not a member of the team
    it asks for, not an approver of the request's team, or the request's own requester approving it."""


class PaidReservation(CapacityError):
    """``DELETE`` of a reservation whose upfront fee is paid, without ``confirm=true`` (API 409): the fee is
    not refunded. ``details`` holds the sunk fee and what cancelling still saves."""

    def __init__(self, message: str, details: dict[str, object]) -> None:
        self.details = details
        super().__init__(message)


class TeamNotFound(CapacityError):
    """No team with this name is in the policy table (admin routes: 404)."""


class ExtensionPending(CapacityError):
    """An extension's payment is still processing (retryable: look again later)."""


class ExtensionRefused(CapacityError):
    """The reservation cannot be extended now (not bought, released, approval needed, stale offering with no
    replacement...): the message says why and what to do."""


class ExtensionApprovalRequired(ExtensionRefused):
    """An extension above the approval threshold that no approver has approved (yet): the doors ask for the
    approval (API 202 ``APPROVAL_REQUIRED``, Slack buttons); the workflow refuses to buy it."""
