"""Function settings: the environment parsed once per invocation into a frozen, typed object.

Never read at import time and never cached across invocations: in the local cloud several functions share
one process and each invocation runs with its own environment variables.

Environment variables (set by ``template.yaml``):

========================== ==========================================================================
``LEDGER_TABLE``           DynamoDB reservations ledger (PK ``request_id``, SK ``sk``)
``OFFERINGS_TABLE``        DynamoDB offerings (PK ``request_id``, SK ``offering_key``, TTL ``ttl``)
``IDEMPOTENCY_TABLE``      Powertools idempotency table (PK ``id``)
``EVENT_BUS_NAME``         the application's EventBridge bus
``SCHEDULE_GROUP``         EventBridge Scheduler group for release schedules
``RELEASE_TARGET_ARN``     ARN the release schedule targets (the event bus ARN)
``SCHEDULER_ROLE_ARN``     role EventBridge Scheduler assumes to put the event
``REQUEST_SCHEDULE_GROUP`` EventBridge Scheduler group of the recurring reservation schedules
``SCHEDULED_REQUEST_FUNCTION_ARN`` the function those schedules invoke (``scheduled_request``)
``REQUEST_SCHEDULER_ROLE_ARN`` role EventBridge Scheduler assumes to invoke it
``ENDPOINT_EXECUTION_ROLE_ARN`` SageMaker execution role of the endpoint config
``SLACK_CHANNEL_ID``       Slack channel for notifications (optional)
``SLACK_BOT_TOKEN_SECRET_ARN`` Secrets Manager secret holding the bot token (optional)
``SLACK_SIGNING_SECRET_ARN`` Secrets Manager secret holding the Slack app's signing secret (Slack door)
``SLACK_APPROVER_IDS``     comma-separated Slack user ids allowed to press Approve/Reject (Slack door)
``OFFERINGS_TTL_DAYS``     days the offerings stay in OFFERINGS_TABLE (default 14)
``MODEL_ARTIFACT_BUCKETS`` comma-separated S3 buckets a model's ``model_data_url`` may name (template
                           parameter ``ModelArtifactBuckets``; empty: none; unset: not checked)
``INSTANCE_ROLE_ARNS``     comma-separated ARNs of the IAM roles EC2 instances may run as, through the
                           instance profile of a request's launch template (``InstanceRoleArns``; empty:
                           none)
``FORWARDING_RULE_NAME``   name of the rule that forwards another region's AWS events to the bus
``FORWARDING_TARGET_ARN``  the application's bus ARN (that rule's cross-region target)
``FORWARDING_ROLE_ARN``    role EventBridge assumes to put the forwarded events on the bus
``POLICY_TABLE``           DynamoDB teams policy, spend and holds (PK ``pk``, SK ``sk``; issue 16)
``AWS_CALL_TIMEOUTS``      ``connect,read,attempts`` of every AWS client (default ``3,10,3``: CallTimeouts)
``AWS_REGION``             the function's region (set by Lambda)
``AWS_LAMBDA_FUNCTION_NAME`` the actor name written in the ledger (set by Lambda)
========================== ==========================================================================
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields

from botocore.config import Config

from capacity.errors import ConfigurationError

_ENV_NAMES: dict[str, str] = {
    "ledger_table": "LEDGER_TABLE",
    "offerings_table": "OFFERINGS_TABLE",
    "idempotency_table": "IDEMPOTENCY_TABLE",
    "event_bus_name": "EVENT_BUS_NAME",
    "schedule_group": "SCHEDULE_GROUP",
    "release_target_arn": "RELEASE_TARGET_ARN",
    "scheduler_role_arn": "SCHEDULER_ROLE_ARN",
    "request_schedule_group": "REQUEST_SCHEDULE_GROUP",
    "scheduled_request_function_arn": "SCHEDULED_REQUEST_FUNCTION_ARN",
    "request_scheduler_role_arn": "REQUEST_SCHEDULER_ROLE_ARN",
    "endpoint_execution_role_arn": "ENDPOINT_EXECUTION_ROLE_ARN",
    "slack_channel_id": "SLACK_CHANNEL_ID",
    "slack_token_secret_arn": "SLACK_BOT_TOKEN_SECRET_ARN",
    "slack_signing_secret_arn": "SLACK_SIGNING_SECRET_ARN",
    "slack_approver_ids": "SLACK_APPROVER_IDS",
    "forwarding_rule_name": "FORWARDING_RULE_NAME",
    "forwarding_target_arn": "FORWARDING_TARGET_ARN",
    "forwarding_role_arn": "FORWARDING_ROLE_ARN",
    "policy_table": "POLICY_TABLE",
}


@dataclass(frozen=True)
class CallTimeouts:
    """How long one AWS call may take: seconds to connect, seconds to wait for the answer, total attempts.

    Parsed from ``AWS_CALL_TIMEOUTS`` (``"connect,read,attempts"``, e.g. ``"3,10,3"``) by the settings.
    """

    connect_seconds: float = 3.0
    read_seconds: float = 10.0
    attempts: int = 3

    def config(self) -> Config:
        """The botocore ``Config``: standard retry mode, ``total_max_attempts``, the two timeouts."""
        return Config(
            connect_timeout=self.connect_seconds,
            read_timeout=self.read_seconds,
            retries={"mode": "standard", "total_max_attempts": self.attempts},
        )

    def single(self) -> CallTimeouts:
        """The same timeouts with one attempt (a call that must never be retried blindly)."""
        return dataclasses.replace(self, attempts=1)

    def worst_case_seconds(self) -> float:
        """The longest one call can take: every attempt times out, plus standard mode's back-off between
        attempts (at most ``min(2 ** attempt, 20)`` seconds each; botocore ``retries/standard.py``)."""
        backoff = sum(min(2.0**attempt, 20.0) for attempt in range(self.attempts - 1))
        return self.attempts * (self.connect_seconds + self.read_seconds) + backoff

    @classmethod
    def parse(cls, text: str) -> CallTimeouts:
        """``"connect,read,attempts"`` -> :class:`CallTimeouts`.

        Raises:
            ValueError: not three positive numbers (the last a whole number of attempts).
        """
        parts = [part.strip() for part in text.split(",")]
        try:
            connect, read, attempts = float(parts[0]), float(parts[1]), int(parts[2])
        except (ValueError, IndexError) as exc:
            raise ValueError(
                f"expected 'connect,read,attempts' (seconds, seconds, count), got {text!r}"
            ) from exc
        if len(parts) != 3 or connect <= 0 or read <= 0 or attempts < 1:
            raise ValueError(f"expected three positive values 'connect,read,attempts', got {text!r}")
        return cls(connect, read, attempts)


@dataclass(frozen=True)
class Settings:
    """The typed view of a function's environment. Empty string = not configured.

    Use :meth:`from_env` with ``require=`` naming what the function cannot work without, and
    :meth:`need` at the point of use for the rest, so a missing variable fails with its name.
    """

    region: str
    function_name: str
    ledger_table: str = ""
    offerings_table: str = ""
    idempotency_table: str = ""
    event_bus_name: str = ""
    schedule_group: str = ""
    release_target_arn: str = ""
    scheduler_role_arn: str = ""
    request_schedule_group: str = ""
    scheduled_request_function_arn: str = ""
    request_scheduler_role_arn: str = ""
    endpoint_execution_role_arn: str = ""
    slack_channel_id: str = ""
    slack_token_secret_arn: str = ""
    slack_signing_secret_arn: str = ""
    slack_approver_ids: str = ""
    forwarding_rule_name: str = ""
    forwarding_target_arn: str = ""
    forwarding_role_arn: str = ""
    policy_table: str = ""
    offerings_ttl_days: int = 14
    model_artifact_buckets: frozenset[str] | None = None
    """The S3 buckets model artifacts may come from; None when ``MODEL_ARTIFACT_BUCKETS`` is not set (not
    checked: the template always sets it, on every function)."""
    instance_role_arns: frozenset[str] | None = None
    """The ARNs of the IAM roles EC2 instances may run as (``INSTANCE_ROLE_ARNS``); None when not set."""
    call_timeouts: CallTimeouts = CallTimeouts()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, require: Iterable[str] = ()) -> Settings:
        """Parse ``env`` (default: ``os.environ``, read now).

        Args:
            env: the environment mapping.
            require: attribute names (``"ledger_table"``...) that must be set.

        Raises:
            ConfigurationError: a required variable is missing or ``OFFERINGS_TTL_DAYS`` is not a
                positive integer; the message names every missing variable.
        """
        source = os.environ if env is None else env
        values = {attr: source.get(name, "").strip() for attr, name in _ENV_NAMES.items()}
        region = (source.get("AWS_REGION") or source.get("AWS_DEFAULT_REGION") or "us-east-1").strip()
        ttl_text = source.get("OFFERINGS_TTL_DAYS", "14").strip() or "14"
        if not ttl_text.isdigit() or int(ttl_text) < 1:
            raise ConfigurationError(f"OFFERINGS_TTL_DAYS must be a positive integer, got {ttl_text!r}")
        timeouts_text = source.get("AWS_CALL_TIMEOUTS", "").strip()
        try:
            timeouts = CallTimeouts.parse(timeouts_text) if timeouts_text else CallTimeouts()
        except ValueError as exc:
            raise ConfigurationError(f"AWS_CALL_TIMEOUTS: {exc}") from exc
        settings = cls(
            region=region,
            function_name=source.get("AWS_LAMBDA_FUNCTION_NAME", "").strip() or "capacity-orchestrator",
            offerings_ttl_days=int(ttl_text),
            model_artifact_buckets=_names(source.get("MODEL_ARTIFACT_BUCKETS")),
            instance_role_arns=_names(source.get("INSTANCE_ROLE_ARNS")),
            call_timeouts=timeouts,
            **values,
        )
        missing = [_ENV_NAMES[attr] for attr in require if not getattr(settings, attr)]
        if missing:
            raise ConfigurationError(f"missing environment variable(s): {', '.join(sorted(missing))}")
        return settings

    def need(self, attr: str) -> str:
        """The value of setting ``attr``.

        Raises:
            ConfigurationError: it is not configured (the message names the environment variable).
        """
        if attr not in {f.name for f in fields(self)}:
            raise ConfigurationError(f"unknown setting {attr!r}")
        value = getattr(self, attr)
        if not value:
            raise ConfigurationError(f"missing environment variable: {_ENV_NAMES.get(attr, attr.upper())}")
        return str(value)

    @property
    def approvers(self) -> frozenset[str]:
        """The Slack user ids in ``SLACK_APPROVER_IDS`` (comma or space separated; empty: nobody)."""
        return frozenset(part for part in self.slack_approver_ids.replace(",", " ").split() if part)

    @property
    def slack_enabled(self) -> bool:
        """True when both the Slack channel and the token secret are configured."""
        return bool(self.slack_channel_id and self.slack_token_secret_arn)


def _names(text: str | None) -> frozenset[str] | None:
    """A comma (or space) separated list as a set; None when the variable is not set at all."""
    if text is None:
        return None
    return frozenset(part for part in text.replace(",", " ").split() if part)
