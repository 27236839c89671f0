"""IAM: the roles of an instance profile, so a request's launch template is checked against the roles an
administrator allows EC2 instances to run as (template parameter ``InstanceRoleArns``).

``GetInstanceProfile(InstanceProfileName)`` (IAM API reference) answers the profile with its ``Roles``; an
unknown profile is ``NoSuchEntity``. IAM is global: one client, in the function's region.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code


class IamAdapter:
    """Reads instance profiles.

    Args:
        region: the function's region (IAM itself is global).
        client: an IAM client; default the cached one of :mod:`capacity.adapters.clients`.
    """

    def __init__(self, region: str, client: Any = None) -> None:
        self._client = client or clients.client("iam", region)

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        try:
            return function()
        except (ClientError, BotoCoreError) as exc:
            translated = clients.retryable(exc, f"IAM {operation}")
            if translated is not None:
                raise translated from exc
            raise

    def instance_profile_roles(self, profile: str) -> list[str] | None:
        """The ARNs of the roles of instance profile ``profile`` (its name, or an ARN
        ``arn:aws:iam::<account>:instance-profile/<path>/<name>``); None when it does not exist.

        Raises:
            RetryableAwsError: throttling/5xx after retries.
        """
        name = profile.rsplit("/", 1)[-1] if profile.startswith("arn:") else profile
        try:
            answer = self._call(
                "GetInstanceProfile", lambda: self._client.get_instance_profile(InstanceProfileName=name)
            )
        except ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return None
            raise
        return [str(role["Arn"]) for role in answer["InstanceProfile"].get("Roles", [])]
