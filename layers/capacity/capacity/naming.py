"""Deterministic AWS resource names derived from the request id.

Deterministic names are what make retries safe: ``CreateTrainingPlan`` takes no client token, so the plan
name *is* the idempotency key (a second create answers ``ResourceInUse``), and endpoint, endpoint config,
inference component and schedule names let a retry find what an earlier attempt created.

SageMaker name rules (botocore model): ``TrainingPlanName`` ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}``;
``EndpointName``/``EndpointConfigName`` ``[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}`` (max 63);
``InferenceComponentName`` ``[a-zA-Z0-9]([\\-a-zA-Z0-9]*[a-zA-Z0-9])?`` (max 63). Scheduler ``Name``
``[0-9a-zA-Z-_.]+`` (max 64). Every name here stays within 63 characters; a request id that sanitizing
changes (case, punctuation) or that is cut is suffixed with a short hash of the raw id, so two ids never
share a name.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63
PREFIX = "co-"
VARIANT_NAME = "main"
"""The endpoint's single production variant (inference components name it in ``VariantName``)."""

_BASE_MAX = 44  # leaves room for "-config" and "-<model name>" suffixes within 63 characters


def _digest(text: str, length: int = 8) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def sanitize(text: str) -> str:
    """Lowercase ``text`` and keep ``[a-z0-9]`` runs joined by single hyphens (no leading/trailing ``-``)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _fit(text: str, limit: int, *, key: str) -> str:
    """``text`` if within ``limit``, else its head plus ``-`` and a hash of ``key`` (total = ``limit``)."""
    if len(text) <= limit:
        return text
    suffix = _digest(key)
    head = text[: limit - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}"


def _injective(text: str, limit: int) -> str:
    """``sanitize(text)`` when that is ``text`` itself and fits ``limit``; else the sanitized head plus
    ``-`` and a hash of the raw ``text``, so two texts that sanitize alike (``Eval.Week_49`` and
    ``eval-week-49``) still get different names."""
    cleaned = sanitize(text)
    if cleaned == text and len(cleaned) <= limit:
        return cleaned
    suffix = _digest(text)
    head = cleaned[: limit - len(suffix) - 1].rstrip("-")
    return f"{head}-{suffix}" if head else suffix


def base_name(request_id: str) -> str:
    """``co-<request id>``, at most 47 characters: the stem of every other name.

    A request id that is not already a clean name (lowercase ``[a-z0-9]`` runs joined by single
    hyphens, at most 44 characters) is sanitized, cut and suffixed with a hash of the raw id.
    """
    return PREFIX + _injective(request_id, _BASE_MAX)


def training_plan_name(request_id: str) -> str:
    """The ``TrainingPlanName`` bought for ``request_id`` (max 63 characters)."""
    return base_name(request_id)


def endpoint_name(request_id: str) -> str:
    """The SageMaker endpoint of the reservation (``co-<id>``)."""
    return base_name(request_id)


def endpoint_config_name(request_id: str) -> str:
    """The endpoint config of the reservation (``co-<id>-config``)."""
    return f"{base_name(request_id)}-config"


def inference_component_name(request_id: str, model_name: str) -> str:
    """The inference component hosting ``model_name`` (``co-<id>-<model name>``, max 63 characters)."""
    full = f"{base_name(request_id)}-{_injective(model_name, MAX_NAME)}"
    return _fit(full, MAX_NAME, key=f"{request_id}/{model_name}")


def release_schedule_name(request_id: str) -> str:
    """The one-time EventBridge Scheduler schedule that releases the reservation."""
    return f"{base_name(request_id)}-release"


def rollover_schedule_name(request_id: str) -> str:
    """The one-time schedule that puts ``RolloverDue`` for the reservation (``serve_until``): at the lead time
    before its end, then at the checks that follow (``co-<id>-rollover``, at most 56 characters)."""
    return f"{base_name(request_id)}-rollover"


PARAMETER_PREFIX = "/capacity-orchestrator/"
_PARAMETER_SEGMENT = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def endpoint_parameter_name(request_id: str) -> str:
    """The SSM parameter where clients read the current endpoint of the chain started by ``request_id``:
    ``/capacity-orchestrator/<request id>/endpoint`` (an id with characters a parameter name cannot hold,
    such as ``:``, is sanitized and suffixed with a hash, as :func:`base_name` does)."""
    segment = request_id if _PARAMETER_SEGMENT.match(request_id) else _injective(request_id, _BASE_MAX)
    return f"{PARAMETER_PREFIX}{segment}/endpoint"


def idle_check_schedule_name(request_id: str, alarm_name: str) -> str:
    """The one-time schedule that tells ``scale_components`` an idle alarm's first window is over
    (``<base>-idle-<10 hex of the alarm name's SHA-256>``, at most 63 characters)."""
    digest = hashlib.sha256(alarm_name.encode("utf-8")).hexdigest()[:10]
    return f"{base_name(request_id)}-idle-{digest}"


ALARM_PREFIX = "capacity-orchestrator/"
"""Every CloudWatch alarm the application creates starts with this (the EventBridge rule of
``scale_components`` matches it); the next segment is :func:`base_name`, so a reservation's alarms are
found by :func:`alarm_prefix` (``/`` cannot occur in a base name: no prefix of one id matches another)."""


def release_retry_schedule_name(request_id: str, attempt: int) -> str:
    """``co-<id>-retry-<attempt>``: the one-time schedule that starts the next release attempt after a failed
    one (within Scheduler's 64 characters)."""
    return f"{base_name(request_id)}-retry-{attempt}"


def alarm_prefix(request_id: str) -> str:
    """``capacity-orchestrator/co-<id>/``: the prefix of every alarm of the reservation."""
    return f"{ALARM_PREFIX}{base_name(request_id)}/"


def no_capacity_alarm_name(request_id: str, model_name: str) -> str:
    """The alarm on ``NoCapacityInvocationFailures`` of one model's component (scale from zero)."""
    return f"{alarm_prefix(request_id)}{model_name}/no-capacity"


def idle_alarm_name(request_id: str, model_name: str) -> str:
    """The alarm on no ``Invocations`` of one model's component for N minutes (scale to zero)."""
    return f"{alarm_prefix(request_id)}{model_name}/idle"


def idle_release_alarm_name(request_id: str) -> str:
    """The alarm on no ``Invocations`` of the endpoint for N hours (idle policy ``release``)."""
    return f"{alarm_prefix(request_id)}idle-release"


def scaling_policy_name(request_id: str, model_name: str) -> str:
    """The target-tracking policy of one model's component (``<component>-invocations-per-copy``)."""
    return f"{inference_component_name(request_id, model_name)}-invocations-per-copy"
