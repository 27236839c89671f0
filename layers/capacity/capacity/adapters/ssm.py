"""Systems Manager Parameter Store: the parameter clients read to find a reservation's current endpoint
(issue 17, keep serving): ``GetParameter``, ``PutParameter`` (``Type`` ``String``, ``Overwrite``) and
``DeleteParameter`` once nothing it could name serves (SSM API reference). A standard parameter costs
nothing; each put is a new version, so the writer puts only what differs from the stored value
(:meth:`Parameters.put`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code

if TYPE_CHECKING:
    from mypy_boto3_ssm import SSMClient


class Parameters:
    """Reads and writes parameters of one region.

    Args:
        region: the stack's region (clients read the parameter there).
        client: an SSM client.
    """

    def __init__(self, region: str, client: SSMClient) -> None:
        self.region = region
        self._client = client

    def get(self, name: str) -> str | None:
        """The value of ``name``, or None when it does not exist (``ParameterNotFound``).

        Raises:
            RetryableAwsError, AccessDenied: throttling/5xx after retries; IAM refused it.
        """
        where = f"SSM GetParameter {name}"
        try:
            answer = clients.call(where, lambda: self._client.get_parameter(Name=name))
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return None
            raise
        return str(answer["Parameter"].get("Value", ""))

    def put(self, name: str, value: str, *, description: str) -> bool:
        """Put ``value`` in ``name`` (a ``String``, overwriting) unless it holds it already.

        Returns:
            True when a new version was written.

        Raises:
            RetryableAwsError, AccessDenied: throttling/5xx after retries; IAM refused it.
        """
        if self.get(name) == value:
            return False
        clients.call(
            f"SSM PutParameter {name}",
            lambda: self._client.put_parameter(
                Name=name, Value=value, Type="String", Overwrite=True, Description=description[:1024]
            ),
        )
        return True

    def delete(self, name: str) -> bool:
        """Delete ``name``.

        Returns:
            True when it was deleted, False when it did not exist (``ParameterNotFound``).

        Raises:
            RetryableAwsError, AccessDenied: throttling/5xx after retries; IAM refused it.
        """
        try:
            clients.call(f"SSM DeleteParameter {name}", lambda: self._client.delete_parameter(Name=name))
        except ClientError as exc:
            if error_code(exc) == "ParameterNotFound":
                return False
            raise
        return True
