"""IAM: the roles of an instance profile, so a request's launch template is checked against the roles an
administrator allows EC2 instances to run as (template parameter ``InstanceRoleArns``).

``GetInstanceProfile(InstanceProfileName)`` (IAM API reference) answers the profile with its ``Roles``; an
unknown profile is ``NoSuchEntity``. IAM is global: one client, in the function's region.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

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
        return clients.call(f"IAM {operation}", function, translator=clients.retryable)

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

    def principal_tags(self, arn: str) -> dict[str, str] | None:
        """The tags of the IAM role or user behind principal ``arn`` (``ListRoleTags``/``ListUserTags``):
        an assumed-role session ``arn:aws:sts::<account>:assumed-role/<role>/<session>`` is its role's, a
        user ``arn:aws:iam::<account>:user/<path>/<name>`` its own. None for another kind of principal or one
        that does not exist (a team's tag rule then does not match). Session tags are not visible here.

        Raises:
            RetryableAwsError: throttling/5xx after retries.
        """
        parts = arn.split(":", 5)
        if len(parts) != 6:
            return None
        resource = parts[5]
        if resource.startswith("assumed-role/"):
            role = resource.split("/")[1]
            call = ("ListRoleTags", lambda: self._client.list_role_tags(RoleName=role))
        elif resource.startswith("role/"):
            role = resource.rsplit("/", 1)[-1]
            call = ("ListRoleTags", lambda: self._client.list_role_tags(RoleName=role))
        elif resource.startswith("user/"):
            user = resource.rsplit("/", 1)[-1]
            call = ("ListUserTags", lambda: self._client.list_user_tags(UserName=user))
        else:
            return None
        try:
            answer = self._call(*call)
        except ClientError as exc:
            if error_code(exc) == "NoSuchEntity":
                return None
            raise
        return {str(tag["Key"]): str(tag["Value"]) for tag in answer.get("Tags", [])}
