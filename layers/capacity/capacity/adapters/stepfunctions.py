"""Step Functions task tokens: answer a ``.waitForTaskToken`` approval task.

``SendTaskSuccess(taskToken, output)`` / ``SendTaskFailure(taskToken, error, cause)`` (Step Functions API
reference). A token that was already used, timed out or is unknown answers ``TaskTimedOut``,
``InvalidToken`` or ``TaskDoesNotExist``: raised as :class:`~capacity.errors.NotAwaitingApproval`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code, error_message
from capacity.errors import NotAwaitingApproval

if TYPE_CHECKING:
    from mypy_boto3_stepfunctions import SFNClient

_GONE = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


class TaskTokens:
    """Completes waiting Step Functions tasks.

    Args:
        client: a Step Functions client.
    """

    def __init__(self, client: SFNClient) -> None:
        self._client = client

    def succeed(self, token: str, output: Mapping[str, Any]) -> None:
        """``SendTaskSuccess`` with ``output`` as JSON.

        Raises:
            NotAwaitingApproval: the task no longer waits (timed out, already answered, unknown).
            RetryableAwsError: throttling/5xx after retries.
        """
        self._send(
            "SendTaskSuccess",
            lambda: self._client.send_task_success(taskToken=token, output=json.dumps(output)),
        )

    def fail(self, token: str, *, error: str, cause: str) -> None:
        """``SendTaskFailure`` with ``error`` (an ASL error name) and ``cause``.

        Raises:
            NotAwaitingApproval: the task no longer waits.
            RetryableAwsError: throttling/5xx after retries.
        """
        self._send(
            "SendTaskFailure",
            lambda: self._client.send_task_failure(taskToken=token, error=error[:256], cause=cause[:32768]),
        )

    def _send(self, operation: str, function: Any) -> None:
        def gone(exc: ClientError) -> NotAwaitingApproval | None:
            if error_code(exc) in _GONE:
                return NotAwaitingApproval(
                    f"the approval task no longer waits ({error_code(exc)}: {error_message(exc)})"
                )
            return None

        clients.call(f"Step Functions {operation}", function, specific=gone)
