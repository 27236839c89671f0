"""The parts of a reservation request: the models to serve (copies, scaling), the idle policy and the EC2
launch template (:class:`capacity.request.ReservationRequest` holds them)."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Self

from pydantic import ConfigDict, Field, Strict, field_validator, model_validator

from capacity.base import Model
from capacity.wire import StrictInt, problem

_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_ARTIFACT_URL = re.compile(r"^(https|s3)://[^/]+/?.*$")


class CopyCounts(Model):
    """Copies of one model (inference component ``CopyCount``): start with ``initial``, scale in [min, max].

    ``initial >= 1`` because ``CreateInferenceComponent`` needs ``CopyCount >= 1``; ``min`` may be 0
    (scale to zero, reached by scaling, AWS_FACTS.md "Inference components").
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    initial: StrictInt = Field(ge=1, le=1000)
    min: StrictInt = Field(ge=0, le=1000)
    max: StrictInt = Field(ge=1, le=1000)

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not self.min <= self.initial <= self.max:
            raise problem(
                f"copies must satisfy min <= initial <= max, got min={self.min}, initial={self.initial}, "
                f"max={self.max}: raise max or lower initial/min"
            )
        return self


class ScalingSpec(Model):
    """How one model's copies scale (Application Auto Scaling target tracking, seed 004; AWS_FACTS.md
    "Scaling inference components").

    ``target_invocations_per_copy``: ``TargetValue`` of the policy on
    ``SageMakerInferenceComponentInvocationsPerCopy`` (invocations per copy per minute).
    ``scale_out_cooldown_seconds`` / ``scale_in_cooldown_seconds``: ``ScaleOutCooldown`` /
    ``ScaleInCooldown`` (AWS default 300 s). ``idle_minutes_before_zero``: with ``copies.min == 0``, the
    idle alarm (no invocations for this many minutes) sets the copy count to 0; default
    :data:`DEFAULT_IDLE_MINUTES`. Only allowed when the model may scale to zero.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    target_invocations_per_copy: Annotated[float, Strict()] = Field(default=10.0, gt=0, le=1_000_000)
    scale_out_cooldown_seconds: StrictInt = Field(default=300, ge=0, le=86_400)
    scale_in_cooldown_seconds: StrictInt = Field(default=300, ge=0, le=86_400)
    idle_minutes_before_zero: StrictInt | None = Field(default=None, ge=1, le=1440)


DEFAULT_IDLE_MINUTES = 15
"""Idle minutes before a model that may scale to zero goes to 0 copies, when the request does not say."""


class IdlePolicy(Model):
    """What to do with a reservation whose endpoint serves nothing for ``idle_hours`` (1..24) hours.

    ``action`` ``release``: release the whole reservation (endpoint, components, scaling) early; the
    upfront fee is not refunded, but nothing keeps running (CloudWatch alarm periods x count must stay
    within one day, hence at most 24 hours).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["release"]
    idle_hours: StrictInt = Field(ge=1, le=24)


class ModelSpec(Model):
    """One model to serve as an inference component.

    Either ``image`` (a container image URI, with an optional ``model_data_url`` S3/HTTPS artifact) or
    ``model_name`` (an existing SageMaker model). Per copy it needs ``accelerators`` devices,
    ``cpu_cores`` and ``memory_mb`` (``ComputeResourceRequirements`` of ``CreateInferenceComponent``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    image: str | None = Field(default=None, min_length=1, max_length=255)
    model_data_url: str | None = Field(default=None, max_length=1024)
    model_name: str | None = None
    accelerators: StrictInt = Field(default=1, ge=0, le=64)
    cpu_cores: float = Field(default=1.0, ge=0.25, le=512)
    memory_mb: StrictInt = Field(default=1024, ge=128)
    copies: CopyCounts = Field(default_factory=lambda: CopyCounts(initial=1, min=1, max=1))
    scaling: ScalingSpec | None = None

    @property
    def scales_to_zero(self) -> bool:
        """True when the model may scale to 0 copies (``copies.min == 0``)."""
        return self.copies.min == 0

    @property
    def scaling_or_default(self) -> ScalingSpec:
        """``scaling`` or the defaults (target 10 invocations per copy, cooldowns 300 s)."""
        return self.scaling or ScalingSpec()

    @property
    def idle_minutes(self) -> int:
        """Idle minutes before 0 copies (``scaling.idle_minutes_before_zero``, default
        :data:`DEFAULT_IDLE_MINUTES`)."""
        return self.scaling_or_default.idle_minutes_before_zero or DEFAULT_IDLE_MINUTES

    @field_validator("name", "model_name")
    @classmethod
    def _sagemaker_name(cls, value: str | None) -> str | None:
        if value is not None and not _SAGEMAKER_NAME.match(value):
            raise problem(
                f"{value!r} breaks SageMaker's name rules: 1-63 letters, digits and hyphens, starting and "
                "ending with a letter or digit (e.g. llama-eu)"
            )
        return value

    @field_validator("model_data_url")
    @classmethod
    def _artifact_url(cls, value: str | None) -> str | None:
        if value is not None and not _ARTIFACT_URL.match(value):
            raise problem(f"{value!r} is not an s3:// or https:// URL of the model artifact")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.image is None) == (self.model_name is None):
            raise problem(
                "give either image (a container image URI, with model_data_url for the artifact) "
                "or model_name (an existing SageMaker model), not both and not neither"
            )
        if self.model_name is not None and self.model_data_url is not None:
            raise problem("model_data_url goes with image; remove it when model_name is given")
        if self.scaling is not None and self.scaling.idle_minutes_before_zero is not None and self.copies.min:
            raise problem(
                f"scaling.idle_minutes_before_zero applies only to a model that may scale to zero, but "
                f"copies.min is {self.copies.min}: set copies.min to 0 or remove idle_minutes_before_zero"
            )
        return self


class LaunchTemplateRef(Model):
    """The EC2 launch template instances start from (``RunInstances`` ``LaunchTemplate``): ``id``
    (``lt-...``) or ``name``, and ``version`` (a number, ``$Latest`` or ``$Default``, the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(default=None, pattern=r"^lt-[0-9a-f]{8,17}$")
    name: str | None = Field(default=None, min_length=3, max_length=128)
    version: str = Field(default="$Default", pattern=r"^(\$Latest|\$Default|[1-9][0-9]{0,8})$")

    @model_validator(mode="after")
    def _one_reference(self) -> Self:
        if (self.id is None) == (self.name is None):
            raise problem("give the launch template's id (lt-...) or its name, not both and not neither")
        return self

    def as_aws(self) -> dict[str, str]:
        """The ``LaunchTemplate`` parameter of ``RunInstances``."""
        ref = {"LaunchTemplateId": self.id} if self.id else {"LaunchTemplateName": str(self.name)}
        return {**ref, "Version": self.version}


class ModelLoadSpec(Model):
    """The expected traffic of one model (issue 33), as ``events/traffic_two_models.json`` gives it.

    ``requests_per_minute``: 24 rates, requests per minute during each UTC hour (index 0 = 00:00-00:59),
    repeated every day of the reservation. ``requests_per_minute_per_copy`` (optional): the most requests
    one copy serves in a minute, its concurrency x 60 / seconds per request; requests beyond it are
    counted as refused. Without it a copy serves whatever reaches it (only a model with no copy refuses).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="a model of the request (models[].name)")
    requests_per_minute: list[Annotated[float, Field(ge=0, le=1_000_000)]] = Field(
        min_length=24, max_length=24, description="requests per minute in each UTC hour, 00:00 first"
    )
    requests_per_minute_per_copy: float | None = Field(
        default=None, gt=0, le=1_000_000, description="the most requests one copy serves per minute"
    )


class LoadSpec(Model):
    """The load a reservation must serve and the service target (issue 33): per model a daily traffic
    profile, and ``max_rejected_percent``, the most requests (percent of all, over the reservation)
    refused for lack of capacity. The planner simulates each candidate count on it
    (:mod:`capacity.rightsize`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = Field(default="", max_length=1000)
    models: list[ModelLoadSpec] = Field(min_length=1, max_length=10)
    max_rejected_percent: float = Field(default=1.0, ge=0, le=100)

    @model_validator(mode="after")
    def _distinct(self) -> Self:
        names = [item.model for item in self.models]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise problem(f"load lists models twice: {', '.join(repeated)}; give one profile per model")
        return self
