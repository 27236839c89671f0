"""A cached boto3 client factory and the translation of transient AWS errors.

Clients use botocore's ``standard`` retry mode with 5 attempts (botocore "Retries" guide): throttling,
5xx and connection errors are retried with backoff by botocore itself; what is still failing after that
becomes :class:`~capacity.errors.RetryableAwsError` so Step Functions retries the whole step.

The cache is keyed on (service, region) only, never on environment values, so it is safe when several
functions share one process (the local cloud); :func:`clear_clients` empties it (tests).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from capacity.errors import AccessDenied, CapacityError, RetryableAwsError

if TYPE_CHECKING:
    from mypy_boto3_application_autoscaling import ApplicationAutoScalingClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_stepfunctions import SFNClient

RETRY_CONFIG = Config(retries={"mode": "standard", "max_attempts": 5})

_lock = threading.Lock()
_cache: dict[tuple[str, str], Any] = {}

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


def client(service: str, region: str) -> Any:
    """A boto3 client for ``service`` in ``region`` (standard retries, 5 attempts), cached per pair."""
    key = (service, region)
    with _lock:
        found = _cache.get(key)
        if found is None:
            found = boto3.client(service, region_name=region, config=RETRY_CONFIG)  # type: ignore[call-overload]
            _cache[key] = found
        return found


def sagemaker(region: str) -> SageMakerClient:
    """A cached SageMaker client for ``region``."""
    result: SageMakerClient = client("sagemaker", region)
    return result


def dynamodb(region: str) -> DynamoDBClient:
    """A cached DynamoDB client for ``region``."""
    result: DynamoDBClient = client("dynamodb", region)
    return result


def events(region: str) -> EventBridgeClient:
    """A cached EventBridge client for ``region``."""
    result: EventBridgeClient = client("events", region)
    return result


def scheduler(region: str) -> EventBridgeSchedulerClient:
    """A cached EventBridge Scheduler client for ``region``."""
    result: EventBridgeSchedulerClient = client("scheduler", region)
    return result


def stepfunctions(region: str) -> SFNClient:
    """A cached Step Functions client for ``region``."""
    result: SFNClient = client("stepfunctions", region)
    return result


def application_autoscaling(region: str) -> ApplicationAutoScalingClient:
    """A cached Application Auto Scaling client for ``region``."""
    result: ApplicationAutoScalingClient = client("application-autoscaling", region)
    return result


def cloudwatch(region: str) -> CloudWatchClient:
    """A cached CloudWatch client for ``region``."""
    result: CloudWatchClient = client("cloudwatch", region)
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


def is_transient(exc: BaseException) -> bool:
    """True for throttling, 5xx and connection/timeouts (what botocore already retried)."""
    if isinstance(exc, ClientError):
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        code = error_code(exc)
        return code in THROTTLING_CODES or code in SERVER_ERROR_CODES or status >= 500
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
