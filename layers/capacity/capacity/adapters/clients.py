"""A cached boto3 client factory and the translation of transient AWS errors.

Clients use botocore's ``standard`` retry mode (botocore "Retries" guide) with the function's
:class:`CallTimeouts`: connect and read timeouts and a number of attempts sized so that one call, retries
and back-off included, fits well inside the function's own timeout (a gate test holds every function of
the template to it). Throttling, 5xx and connection errors are retried with backoff by botocore itself;
what is still failing after that (or timed out) becomes :class:`~capacity.errors.RetryableAwsError`, a named
error Step Functions retries, instead of a Lambda stopped at its timeout.

The cache is keyed on (service, region, timeouts), never read from the environment, so it is safe when
several functions share one process (the local cloud); :func:`clear_clients` empties it (tests).

A door must answer before its caller stops waiting (API Gateway: 29 s, the API function's timeout): one
call fits, but several slow ones do not, and a Lambda stopped at its timeout is a 502 that says nothing.
Inside :func:`answer_within`, an attempt that could not finish before the invocation's end (less time left
than its connect and read timeouts plus a margin) is not started: :class:`RetryableAwsError` instead, which
the door answers 503 "try again".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from capacity.errors import AccessDenied, CapacityError, RetryableAwsError
from capacity.settings import CallTimeouts

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_stepfunctions import SFNClient


DEFAULT_TIMEOUTS = CallTimeouts()
"""What a client gets when the caller gives no timeouts (tests, the local cloud's tools)."""

_lock = threading.Lock()
_cache: dict[tuple[str, str, CallTimeouts], Any] = {}

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "RequestThrottled",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "SlowDown",
    }
)
ACCESS_DENIED_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AuthorizationError",
        "UnauthorizedException",
    }
)
"""The codes AWS services answer a call IAM refused with (EC2 ``UnauthorizedOperation``, SNS
``AuthorizationError``, CloudWatch/IAM/S3 ``AccessDenied``, most JSON services ``AccessDeniedException``)."""
SERVER_ERROR_CODES = frozenset(
    {
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "InternalServerException",
        "InternalException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


DEADLINE_MARGIN_SECONDS = 1.0
"""Time kept after the last attempt for the answer itself (serialising it, logging)."""

_remaining_ms: ContextVar[Callable[[], int] | None] = ContextVar("remaining_ms", default=None)


@contextmanager
def answer_within(remaining_ms: Callable[[], int]) -> Iterator[None]:
    """Within the block, an AWS call attempt that could outlast the invocation is refused before it starts.

    Args:
        remaining_ms: the invocation's time left in milliseconds
            (``LambdaContext.get_remaining_time_in_millis``).

    Raises (from a call inside the block):
        RetryableAwsError: less than the attempt's connect and read timeouts plus
            :data:`DEADLINE_MARGIN_SECONDS` is left.
    """
    token = _remaining_ms.set(remaining_ms)
    try:
        yield
    finally:
        _remaining_ms.reset(token)


def _refuse_past_deadline(timeouts: CallTimeouts, operation_name: str = "", **_: Any) -> None:
    """botocore's ``request-created`` handler (every attempt, retries included): see :func:`answer_within`."""
    remaining_ms = _remaining_ms.get()
    if remaining_ms is None:
        return
    left = remaining_ms() / 1000
    needed = timeouts.connect_seconds + timeouts.read_seconds + DEADLINE_MARGIN_SECONDS
    if left < needed:
        raise RetryableAwsError(
            f"{operation_name}: not started with {left:.1f} s left of the invocation (an attempt may take "
            f"{needed:.0f} s)"
        )


def client(service: str, region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> Any:
    """A boto3 client for ``service`` in ``region`` (standard retries, ``timeouts``), cached per triple."""
    key = (service, region, timeouts)
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = boto3.client(service, region_name=region, config=timeouts.config())  # type: ignore[call-overload]
            found.meta.events.register("request-created", partial(_refuse_past_deadline, timeouts))
            _cache[key] = found
        return found


def sagemaker(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> SageMakerClient:
    """A cached SageMaker client for ``region``."""
    result: SageMakerClient = client("sagemaker", region, timeouts)
    return result


def dynamodb(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> DynamoDBClient:
    """A cached DynamoDB client for ``region``."""
    result: DynamoDBClient = client("dynamodb", region, timeouts)
    return result


def events(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> EventBridgeClient:
    """A cached EventBridge client for ``region``."""
    result: EventBridgeClient = client("events", region, timeouts)
    return result


def scheduler(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> EventBridgeSchedulerClient:
    """A cached EventBridge Scheduler client for ``region``."""
    result: EventBridgeSchedulerClient = client("scheduler", region, timeouts)
    return result


def stepfunctions(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> SFNClient:
    """A cached Step Functions client for ``region``."""
    result: SFNClient = client("stepfunctions", region, timeouts)
    return result


def application_autoscaling(
    region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS
) -> ApplicationAutoScalingClient:
    """A cached Application Auto Scaling client for ``region``."""
    result: ApplicationAutoScalingClient = client("application-autoscaling", region, timeouts)
    return result


def cloudwatch(region: str, timeouts: CallTimeouts = DEFAULT_TIMEOUTS) -> CloudWatchClient:
    """A cached CloudWatch client for ``region``."""
    result: CloudWatchClient = client("cloudwatch", region, timeouts)
    return result


def clear_clients() -> None:
    """Forget every cached client (tests: a new moto mock or Stubber per test)."""
    with _lock:
        _cache.clear()


def error_code(exc: ClientError) -> str:
    """The AWS error code of a botocore ``ClientError`` (``""`` if absent)."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def error_message(exc: ClientError) -> str:
    """The AWS error message of a botocore ``ClientError`` (``""`` if absent)."""
    return str(exc.response.get("Error", {}).get("Message", ""))


CONFLICT_CODES = frozenset({"TransactionConflictException", "TransactionInProgressException"})
"""DynamoDB's answers to a write that met a concurrent transaction on its item (AWS_FACTS.md: two writers of
one item at once): nothing was written, and the same write tried again may succeed."""


def is_transient(exc: BaseException) -> bool:
    """True for throttling, 5xx, DynamoDB's transaction conflicts of a single write (:data:`CONFLICT_CODES`)
    and connection/timeouts (what botocore already retried, or a race of the moment)."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        code = error_code(exc)
        return (
            code in THROTTLING_CODES or code in SERVER_ERROR_CODES or code in CONFLICT_CODES or status >= 500
        )
    return isinstance(
        exc, ReadTimeoutError | ConnectTimeoutError | EndpointConnectionError | ConnectionClosedError
    )


def retryable(exc: BaseException, operation: str) -> RetryableAwsError | None:
    """A :class:`RetryableAwsError` describing ``exc`` if it is transient, else None."""
    if not is_transient(exc):
        return None
    if isinstance(exc, ClientError):
        return RetryableAwsError(f"{operation}: {error_code(exc)} after retries: {error_message(exc)}")
    if isinstance(exc, BotoCoreError):
        return RetryableAwsError(f"{operation}: {type(exc).__name__} after retries: {exc}")
    return RetryableAwsError(f"{operation}: {exc}")  # pragma: no cover - is_transient covers the rest


def access_denied(exc: BaseException, operation: str) -> AccessDenied | None:
    """An :class:`AccessDenied` naming what IAM refused if ``exc`` is a denial, else None."""
    if isinstance(exc, ClientError) and error_code(exc) in ACCESS_DENIED_CODES:
        return AccessDenied(f"{operation}: {error_code(exc)}: {error_message(exc)}")
    return None


def translate(exc: BaseException, operation: str) -> CapacityError | None:
    """The domain error for ``exc``: :class:`RetryableAwsError` if transient, :class:`AccessDenied` if IAM
    refused it, else None (the caller decides, or re-raises the ``ClientError``)."""
    return retryable(exc, operation) or access_denied(exc, operation)


def call[T](
    where: str,
    function: Callable[[], T],
    *,
    specific: Callable[[ClientError], CapacityError | None] | None = None,
    translator: Callable[[BaseException, str], CapacityError | None] = translate,
) -> T:
    """Run one AWS call, raising the domain error for what it failed with: the one error translator of the
    adapters.

    Args:
        where: names the call in messages (``"SageMaker CreateTrainingPlan (us-east-1)"``).
        specific: a service's own reading of a ``ClientError`` (a quota, a capacity verdict), asked first:
            EC2 answers ``InsufficientInstanceCapacity`` with HTTP 500, which is not a transient fault.
        translator: :func:`translate` (transient or denied), or :func:`retryable` (transient only).

    Raises:
        CapacityError: what ``specific`` or ``translator`` made of the failure.
        ClientError: any other rejection, unchanged (the caller decides).
        BotoCoreError: a client-side failure that is not transient.
    """
    try:
        return function()
    except (ClientError, BotoCoreError) as exc:
        mapped = specific(exc) if specific is not None and isinstance(exc, ClientError) else None
        translated = mapped or translator(exc, where)
        if translated is not None:
            raise translated from exc
        raise
