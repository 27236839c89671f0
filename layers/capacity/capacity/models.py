"""Pydantic v2 models: the reservation request, offerings, ledger entries and event details.

Over 400 lines: the split by concept (request, admission, identity, offerings, ledger, events) is to come.

Wire conventions (every model, ``model_dump(mode="json")``): timestamps are ``YYYY-MM-DDTHH:MM:SSZ``
strings (UTC), money is a decimal string in USD, hours are integers or decimal strings. Every event
``detail`` carries ``schema_version`` (:data:`capacity.SCHEMA_VERSION`); a breaking change bumps it.

:func:`parse_request` is the one door every request goes through (API, Slack, EventBridge): it raises
:class:`~capacity.errors.InvalidRequest` whose errors name the field and what to fix.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from capacity.errors import FieldError, InvalidRequest
from capacity.instances import (
    CAPACITY_BLOCK_INSTANCE_TYPES,
    INSTANCE_TYPES,
    TRAINING_PLAN_INSTANCE_TYPES,
    fits,
    spec_for,
)
from capacity.pricing import KNOWN_REGIONS
from capacity.timeutil import as_utc, iso_z

# --------------------------------------------------------------------------------------------- types


def _money_json(value: Decimal) -> str:
    return f"{value:f}"


def _iso_text(value: Any) -> Any:
    """Timestamps arrive as ISO-8601 strings (or datetimes from code), never as epoch numbers."""
    if not isinstance(value, str | datetime):
        raise PydanticCustomError(
            "datetime_type", "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z"
        )
    return value


UtcDatetime = Annotated[
    AwareDatetime,
    BeforeValidator(_iso_text),
    AfterValidator(as_utc),
    PlainSerializer(iso_z, return_type=str, when_used="json"),
]
"""A tz-aware timestamp normalised to UTC; JSON form ``YYYY-MM-DDTHH:MM:SSZ``. Naive input is rejected."""

StrictInt = Annotated[int, Strict()]
"""A JSON integer: no booleans, no numeric strings, no fractions."""
StrictBool = Annotated[bool, Strict()]
"""A JSON boolean: ``true`` or ``false``, nothing that looks like one."""

Money = Annotated[Decimal, PlainSerializer(_money_json, return_type=str, when_used="json")]
"""USD as :class:`~decimal.Decimal`; JSON form a plain decimal string (``"30000"``, ``"8523.65"``)."""

MAX_REQUEST_USD = Decimal("100000000")
"""The largest amount a request may name (USD 100 million): 64 x ml.p5.48xlarge on demand for the longest
plan, 182 days, is about USD 15 million. Beyond it an amount is a typo or an attack (``1e400`` once reached
``decimal.InvalidOperation`` in the planner), refused at the door naming the field."""
MONEY_DECIMAL_PLACES = 2
"""Request amounts are whole cents."""

ALLOWED_INSTANCE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""Training plan instance counts (AWS_FACTS.md, SageMaker training plans)."""
MIN_DURATION_HOURS = 24
MAX_DURATION_HOURS = 4368  # 182 days, the longest training plan
START_GRACE = timedelta(minutes=15)
MAX_CAPACITY_BLOCK_INSTANCES = 64
"""Most instances in one EC2 capacity block (AWS_FACTS.md, EC2 Capacity Blocks for ML)."""
CAPACITY_BLOCK_HORIZON = timedelta(weeks=8)
"""Capacity blocks can be bought at most 8 weeks ahead (AWS_FACTS.md)."""
"""How far in the past ``earliest_start`` may be at intake (delivery delays, clock skew)."""

_SAGEMAKER_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_ARTIFACT_URL = re.compile(r"^(https|s3)://[^/]+/?.*$")
_TRAINING_PLAN_ARN = re.compile(
    r"^arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):training-plan/"
    r"(?P<name>[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63})$"
)
"""botocore's ``TrainingPlanArn`` pattern, with the region, account and plan name captured."""
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")


def _problem(message: str) -> PydanticCustomError:
    """A validation error whose message is shown to the user as is."""
    return PydanticCustomError("invalid_value", message)


# -------------------------------------------------------------------------------------------- request


def valid_capacity_block_hours(hours: int) -> bool:
    """True for the capacity block durations EC2 sells: 24-hour steps up to 14 days, then 7-day steps up to
    182 days (AWS_FACTS.md, EC2 Capacity Blocks for ML)."""
    if hours <= 0 or hours % 24:
        return False
    days = hours // 24
    return days <= 14 or (days <= 182 and days % 7 == 0)


def capacity_block_durations(max_hours: int) -> list[int]:
    """Every capacity block duration (hours) up to ``max_hours``, shortest first."""
    return [
        hours
        for hours in range(24, min(max_hours, MAX_DURATION_HOURS) + 1, 24)
        if valid_capacity_block_hours(hours)
    ]


class CopyCounts(BaseModel):
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
            raise _problem(
                f"copies must satisfy min <= initial <= max, got min={self.min}, initial={self.initial}, "
                f"max={self.max}: raise max or lower initial/min"
            )
        return self


class ScalingSpec(BaseModel):
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


class IdlePolicy(BaseModel):
    """What to do with a reservation whose endpoint serves nothing for ``idle_hours`` (1..24) hours.

    ``action`` ``release``: release the whole reservation (endpoint, components, scaling) early; the
    upfront fee is not refunded, but nothing keeps running (CloudWatch alarm periods x count must stay
    within one day, hence at most 24 hours).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    action: Literal["release"]
    idle_hours: StrictInt = Field(ge=1, le=24)


class ModelSpec(BaseModel):
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
            raise _problem(
                f"{value!r} breaks SageMaker's name rules: 1-63 letters, digits and hyphens, starting and "
                "ending with a letter or digit (e.g. llama-eu)"
            )
        return value

    @field_validator("model_data_url")
    @classmethod
    def _artifact_url(cls, value: str | None) -> str | None:
        if value is not None and not _ARTIFACT_URL.match(value):
            raise _problem(f"{value!r} is not an s3:// or https:// URL of the model artifact")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.image is None) == (self.model_name is None):
            raise _problem(
                "give either image (a container image URI, with model_data_url for the artifact) "
                "or model_name (an existing SageMaker model), not both and not neither"
            )
        if self.model_name is not None and self.model_data_url is not None:
            raise _problem("model_data_url goes with image; remove it when model_name is given")
        if self.scaling is not None and self.scaling.idle_minutes_before_zero is not None and self.copies.min:
            raise _problem(
                f"scaling.idle_minutes_before_zero applies only to a model that may scale to zero, but "
                f"copies.min is {self.copies.min}: set copies.min to 0 or remove idle_minutes_before_zero"
            )
        return self


class LaunchTemplateRef(BaseModel):
    """The EC2 launch template instances start from (``RunInstances`` ``LaunchTemplate``): ``id``
    (``lt-...``) or ``name``, and ``version`` (a number, ``$Latest`` or ``$Default``, the default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(default=None, pattern=r"^lt-[0-9a-f]{8,17}$")
    name: str | None = Field(default=None, min_length=3, max_length=128)
    version: str = Field(default="$Default", pattern=r"^(\$Latest|\$Default|[1-9][0-9]{0,8})$")

    @model_validator(mode="after")
    def _one_reference(self) -> Self:
        if (self.id is None) == (self.name is None):
            raise _problem("give the launch template's id (lt-...) or its name, not both and not neither")
        return self

    def as_aws(self) -> dict[str, str]:
        """The ``LaunchTemplate`` parameter of ``RunInstances``."""
        ref = {"LaunchTemplateId": self.id} if self.id else {"LaunchTemplateName": str(self.name)}
        return {**ref, "Version": self.version}


Strategy = Literal["on-demand-first", "reserved", "spot-ok"]
"""How much certainty the request needs (seed 000's decision framework): ``on-demand-first`` tries on-demand
capacity region by region before reserving; ``reserved`` always reserves; ``spot-ok`` (EC2 only,
interruption-tolerant work) tries on demand, then spot, then reserves."""
ON_DEMAND_FIRST_HORIZON = timedelta(hours=1)
"""``strategy`` defaults to ``on-demand-first`` when the window starts within this long from now."""

Platform = Literal["sagemaker", "ec2"]
"""Where the capacity runs: ``sagemaker`` (training plan + endpoint, ``ml.*`` types) or ``ec2`` (capacity
block + instances from a launch template, EC2 types)."""


class ReservationRequest(BaseModel):
    """A request for GPU capacity and the models to serve on it (issue 3, "Request").

    Fields: ``request_id`` (idempotency key; derived from the content when absent), ``requester`` (the
    authenticated caller, set by the door), ``team`` (who pays; issue 16),
    ``instance_type`` (``ml.*``, see :mod:`capacity.instances`), ``instance_count`` (1, 2, 4 ... 64),
    ``earliest_start``/``latest_end`` (UTC window), ``duration_hours`` (whole days, 24..4368),
    ``regions`` (preference order), ``max_upfront_fee_usd`` (USD, required), ``approval_above_usd``
    (USD, optional), ``approval_timeout_hours`` (default 24), ``dry_run``, ``release_margin_minutes``
    (release starts this long before the plan ends, default 60), ``models`` (1..10, each with optional
    ``scaling``) and ``idle_policy`` (optional: release after N idle hours).

    ``platform`` ``ec2`` (issue 6) asks for an EC2 Capacity Block for ML instead: ``instance_type`` is an EC2
    type sold as capacity blocks (``p5.48xlarge``...), ``instance_count`` 1..64, ``duration_hours`` a
    capacity block duration (24-hour steps to 14 days, then 7-day steps to 182 days), ``earliest_start``
    at most 8 weeks ahead, optional ``launch_template`` (instances start from it when the block is active),
    and no ``models``. Its instances are terminated on the block's expiration warning or at
    ``end - max(release_margin_minutes, 35)`` minutes, whichever comes first (AWS reclaims them 30 minutes
    before the end).

    ``strategy`` (issue 6): ``on-demand-first`` (default when the window starts within the next hour),
    ``reserved`` (the default otherwise) or ``spot-ok`` (EC2 only). Validation always sets it.

    Bring your own reservation (issue 17): ``training_plan_arn`` (platform ``sagemaker``) or
    ``capacity_reservation_id`` (platform ``ec2``, a capacity block ``cr-...``) names a reservation someone
    else bought; nothing is searched or bought, ``strategy`` is ``reserved``, and the reservation must fit
    the request (:func:`capacity.logic.checks.brought_reservation`, checked at every door and again before it
    is used). The plan's region (from its ARN) must be one of ``regions``.

    Validate through :func:`parse_request`, which also checks that the window does not start in the past.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    request_id: str | None = None
    requester: str | None = Field(
        default=None,
        min_length=1,
        max_length=2048,
        description="set by the door to the authenticated caller (IAM principal ARN, slack:<user id>, the "
        "schedule's owner); a value sent in the body is replaced",
    )
    team: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,62}$",
        description="the team that pays (issue 16); default the caller's only team",
    )
    platform: Platform = "sagemaker"
    instance_type: str
    instance_count: StrictInt
    earliest_start: UtcDatetime
    latest_end: UtcDatetime
    duration_hours: StrictInt
    regions: list[str] = Field(min_length=1, max_length=10)
    max_upfront_fee_usd: Money = Field(gt=0, le=MAX_REQUEST_USD, decimal_places=MONEY_DECIMAL_PLACES)
    approval_above_usd: Money | None = Field(
        default=None, ge=0, le=MAX_REQUEST_USD, decimal_places=MONEY_DECIMAL_PLACES
    )
    approval_timeout_hours: StrictInt = Field(default=24, ge=1, le=168)
    dry_run: StrictBool = False
    release_margin_minutes: StrictInt = Field(default=60, ge=5, le=1440)
    models: list[ModelSpec] = Field(default_factory=list, max_length=10)
    idle_policy: IdlePolicy | None = None
    launch_template: LaunchTemplateRef | None = None
    strategy: Strategy | None = None
    training_plan_arn: str | None = Field(
        default=None,
        max_length=2048,
        description="a training plan bought by someone else (arn:aws:sagemaker:<region>:<account>:"
        "training-plan/<name>): serve on it instead of buying one",
    )
    capacity_reservation_id: str | None = Field(
        default=None,
        max_length=64,
        description="a capacity block bought by someone else (cr-...): run on it instead of buying one",
    )

    @field_validator("training_plan_arn")
    @classmethod
    def _training_plan_arn(cls, value: str | None) -> str | None:
        if value is not None and not _TRAINING_PLAN_ARN.match(value):
            raise _problem(
                f"{value!r} is not a training plan ARN: give it as DescribeTrainingPlan shows it, "
                "arn:aws:sagemaker:<region>:<account>:training-plan/<name>"
            )
        return value

    @field_validator("capacity_reservation_id")
    @classmethod
    def _capacity_reservation_id(cls, value: str | None) -> str | None:
        if value is not None and not _CAPACITY_RESERVATION_ID.match(value):
            raise _problem(
                f"{value!r} is not a capacity reservation id: give the capacity block's id as "
                "DescribeCapacityReservations shows it (cr- and 17 hexadecimal digits)"
            )
        return value

    @field_validator("request_id")
    @classmethod
    def _request_id(cls, value: str | None) -> str | None:
        if value is not None and not _REQUEST_ID.match(value):
            raise _problem(
                f"{value!r} is not a usable request id: 1-64 letters, digits, '.', '_', ':' or '-', "
                "starting with a letter or digit (or leave it out to derive one from the content)"
            )
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str, info: ValidationInfo) -> str:
        if info.data.get("platform") == "ec2":
            if value not in CAPACITY_BLOCK_INSTANCE_TYPES:
                raise _problem(
                    f"{value!r} is not an EC2 instance type sold as capacity blocks: use one of "
                    + ", ".join(sorted(CAPACITY_BLOCK_INSTANCE_TYPES))
                )
            return value
        if value not in INSTANCE_TYPES:
            raise _problem(
                f"{value!r} is not a supported instance type: training plans reserve "
                + ", ".join(sorted(TRAINING_PLAN_INSTANCE_TYPES))
                + "; on demand only (strategy on-demand-first, no training plan): "
                + ", ".join(sorted(set(INSTANCE_TYPES) - TRAINING_PLAN_INSTANCE_TYPES))
            )
        return value  # a type without training plans is checked against the strategy in _reservable

    @field_validator("instance_count")
    @classmethod
    def _instance_count(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("platform") == "ec2":
            if not 1 <= value <= MAX_CAPACITY_BLOCK_INSTANCES:
                raise _problem(
                    f"count {value} is not allowed: a capacity block holds 1 to "
                    f"{MAX_CAPACITY_BLOCK_INSTANCES} instances"
                )
            return value
        if value not in ALLOWED_INSTANCE_COUNTS:
            raise _problem(
                f"count {value} is not allowed: training plans reserve "
                + ", ".join(map(str, ALLOWED_INSTANCE_COUNTS))
                + " instances"
            )
        return value

    @field_validator("duration_hours")
    @classmethod
    def _duration(cls, value: int, info: ValidationInfo) -> int:
        if info.data.get("platform") == "ec2":
            if not valid_capacity_block_hours(value):
                raise _problem(
                    f"unsupported duration {value} h ({value / 24:g} days): capacity blocks last 1 to 14 "
                    "days in 24-hour steps (24..336), then whole weeks up to 182 days (504, 672 ... 4368)"
                )
            return value
        if value % 24 or not MIN_DURATION_HOURS <= value <= MAX_DURATION_HOURS:
            raise _problem(
                f"unsupported duration {value} h: training plans last whole days, use a multiple of 24 "
                f"between {MIN_DURATION_HOURS} and {MAX_DURATION_HOURS} (182 days)"
            )
        return value

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        unknown = [region for region in value if region not in KNOWN_REGIONS]
        if unknown:
            raise _problem(
                f"unknown region(s) {', '.join(map(repr, unknown))}: use AWS region codes such as "
                + ", ".join(sorted(KNOWN_REGIONS))
            )
        if len(set(value)) != len(value):
            raise _problem("regions are listed more than once: list each region once, in preference order")
        return value

    @field_validator("earliest_start")
    @classmethod
    def _not_in_past(cls, value: datetime, info: ValidationInfo) -> datetime:
        now = (info.context or {}).get("now") if isinstance(info.context, dict) else None
        if isinstance(now, datetime) and value < as_utc(now) - START_GRACE:
            raise _problem(
                f"start {iso_z(value)} is in the past (now {iso_z(now)}): choose a start time in the future"
            )
        if (
            isinstance(now, datetime)
            and info.data.get("platform") == "ec2"
            and value > as_utc(now) + CAPACITY_BLOCK_HORIZON
        ):
            raise _problem(
                f"start {iso_z(value)} is more than 8 weeks after now ({iso_z(now)}): capacity blocks can "
                "be bought at most 8 weeks ahead; choose a start before "
                + iso_z(as_utc(now) + CAPACITY_BLOCK_HORIZON)
            )
        return value

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> Self:
        problems = self._cross_field_problems()
        # Without a clock (a schema check at the API door) the default is unknown: parse_request checks it.
        strategy = self.strategy or self._default_for(info)
        if strategy is not None:
            problems.extend(self._reservable_problems(strategy))
        if problems:
            raise PydanticCustomError(
                "request_rules",
                "{summary}",
                {"summary": "; ".join(f"{f}: {m}" for f, m in problems), "problems": problems},
            )
        if self.request_id is None:
            self.request_id = derive_request_id(self)
        return self

    def _default_for(self, info: ValidationInfo) -> Strategy | None:
        """The default strategy at the validation context's ``now`` (None without one)."""
        if self.brought is not None:  # nothing to launch on demand: the reservation exists
            return "reserved"
        now = (info.context or {}).get("now") if isinstance(info.context, dict) else None
        if not isinstance(now, datetime):
            return None
        soon = self.earliest_start <= as_utc(now) + ON_DEMAND_FIRST_HORIZON
        runnable = self.platform == "sagemaker" or self.launch_template is not None
        return "on-demand-first" if soon and runnable else "reserved"

    @model_validator(mode="after")
    def _default_strategy(self, info: ValidationInfo) -> Self:
        """``on-demand-first`` when the window starts within the next hour (and, for EC2, a launch template
        says what to run), else ``reserved``; a request re-read without ``now`` keeps ``reserved``."""
        if self.strategy is None:
            self.strategy = self._default_for(info) or "reserved"
        return self

    def _reservable_problems(self, strategy: Strategy) -> list[tuple[str, str]]:
        """A SageMaker type without training plans (``ml.g6.*``: not in botocore's
        ``ReservedCapacityInstanceType``) runs on demand only: a problem when the (defaulted) strategy
        reserves."""
        if (
            self.platform != "sagemaker"
            or strategy != "reserved"
            or self.instance_type in TRAINING_PLAN_INSTANCE_TYPES
        ):
            return []
        return [
            (
                "instance_type",
                f"{self.instance_type} has no SageMaker training plan (botocore's "
                "ReservedCapacityInstanceType does not list it), so strategy reserved cannot reserve it: "
                "training plans reserve "
                + ", ".join(sorted(TRAINING_PLAN_INSTANCE_TYPES))
                + f". To run {self.instance_type} on demand only, start the window within the next hour "
                "(strategy on-demand-first): there is then no reservation fallback",
            )
        ]

    def _cross_field_problems(self) -> list[tuple[str, str]]:
        problems: list[tuple[str, str]] = []
        window_hours = (self.latest_end - self.earliest_start).total_seconds() / 3600
        if window_hours < self.duration_hours:
            problems.append(
                (
                    "latest_end",
                    f"the window {iso_z(self.earliest_start)} to {iso_z(self.latest_end)} lasts "
                    f"{window_hours:g} h, shorter than duration_hours {self.duration_hours}: move latest_end "
                    f"to {iso_z(self.earliest_start + timedelta(hours=self.duration_hours))} or later",
                )
            )
        if self.release_margin_minutes >= self.duration_hours * 60:
            problems.append(
                (
                    "release_margin_minutes",
                    f"{self.release_margin_minutes} minutes is not shorter than the reservation: use less "
                    f"than {self.duration_hours * 60}",
                )
            )
        if self.approval_above_usd is not None and self.approval_above_usd > self.max_upfront_fee_usd:
            problems.append(
                (
                    "approval_above_usd",
                    f"approval threshold {self.approval_above_usd:f} is above the budget "
                    f"max_upfront_fee_usd {self.max_upfront_fee_usd:f}: it would never apply; lower it or "
                    "leave it out",
                )
            )
        problems.extend(self._platform_problems())
        problems.extend(self._brought_problems())
        names = [model.name for model in self.models]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            problems.append(("models", f"model names must be unique, repeated: {', '.join(duplicates)}"))
        problems.extend(self._fit_problems())
        return problems

    def _platform_problems(self) -> list[tuple[str, str]]:
        if self.strategy == "spot-ok" and self.platform != "ec2":
            return [("strategy", "spot-ok is for EC2 (platform ec2); use on-demand-first or reserved")]
        if (
            self.platform == "ec2"
            and self.strategy in ("on-demand-first", "spot-ok")
            and not self.launch_template
        ):
            return [
                ("launch_template", f"strategy {self.strategy} launches instances: give the launch template")
            ]
        if self.platform == "sagemaker":
            problems = [] if self.models else [("models", "is required: list at least one model to serve")]
            if self.launch_template is not None:
                problems.append(
                    ("launch_template", "goes with platform ec2 (capacity blocks); remove it for SageMaker")
                )
            return problems
        problems = []
        if self.idle_policy is not None:  # the idle alarm watches endpoint invocations
            problems.append(
                (
                    "idle_policy",
                    "releases on a SageMaker endpoint's idle invocations; platform ec2 has no endpoint (its "
                    "instances are terminated before the capacity block ends): remove idle_policy",
                )
            )
        if self.models:
            problems.append(
                (
                    "models",
                    "platform ec2 runs your own instances from launch_template; models are served only on "
                    "SageMaker endpoints: remove models or use platform sagemaker",
                )
            )
        problems.extend(
            (
                f"models.{index}.scaling",
                "scales inference component copies on a SageMaker endpoint; platform ec2 has none: remove "
                "scaling",
            )
            for index, model in enumerate(self.models)
            if model.scaling is not None
        )
        return problems

    def _brought_problems(self) -> list[tuple[str, str]]:
        """What a brought reservation's reference says against the rest of the request (no AWS call; what
        AWS says of it is :func:`capacity.logic.checks.brought_reservation`)."""
        problems: list[tuple[str, str]] = []
        if self.training_plan_arn is not None and self.capacity_reservation_id is not None:
            problems.append(
                (
                    "capacity_reservation_id",
                    "name one reservation: training_plan_arn (platform sagemaker) or capacity_reservation_id "
                    "(platform ec2), not both",
                )
            )
        if self.training_plan_arn is not None and self.platform != "sagemaker":
            problems.append(
                (
                    "training_plan_arn",
                    "a training plan serves SageMaker endpoints (platform sagemaker); for platform ec2 name "
                    "a capacity block with capacity_reservation_id",
                )
            )
        if self.capacity_reservation_id is not None and self.platform != "ec2":
            problems.append(
                (
                    "capacity_reservation_id",
                    "a capacity block runs EC2 instances (platform ec2); for platform sagemaker name a "
                    "training plan with training_plan_arn",
                )
            )
        match = _TRAINING_PLAN_ARN.match(self.training_plan_arn or "")
        if match is not None and match["region"] not in self.regions:
            problems.append(
                (
                    "training_plan_arn",
                    f"the training plan is in {match['region']}, which regions ({', '.join(self.regions)}) "
                    f"does not list: add {match['region']} to regions or name a plan in one of them",
                )
            )
        if self.brought is not None and self.strategy not in (None, "reserved"):
            problems.append(
                (
                    "strategy",
                    f"{self.strategy} launches on demand first, but the request brings its own reservation: "
                    "use strategy reserved (the default) or leave it out",
                )
            )
        if self.brought is not None and self.dry_run:
            problems.append(
                (
                    "dry_run",
                    "a brought reservation is checked when the request is sent (the answer names what does "
                    "not fit) and nothing is bought, so there is nothing to plan: remove dry_run",
                )
            )
        return problems

    @property
    def brought(self) -> str | None:
        """The reservation the request brings (``training_plan_arn`` or ``capacity_reservation_id``), or None
        when it is to be bought."""
        return self.training_plan_arn or self.capacity_reservation_id

    @property
    def brought_plan_name(self) -> str | None:
        """The ``TrainingPlanName`` of ``training_plan_arn`` (None without one)."""
        match = _TRAINING_PLAN_ARN.match(self.training_plan_arn or "")
        return match["name"] if match else None

    @property
    def brought_plan_region(self) -> str | None:
        """The region of ``training_plan_arn`` (None without one)."""
        match = _TRAINING_PLAN_ARN.match(self.training_plan_arn or "")
        return match["region"] if match else None

    def _fit_problems(self) -> list[tuple[str, str]]:
        spec = spec_for(self.instance_type)
        if spec is None:  # already reported by the field validator
            return []
        problems: list[tuple[str, str]] = []
        for index, model in enumerate(self.models):
            for attr, reason in fits(
                spec, accelerators=model.accelerators, cpu_cores=model.cpu_cores, memory_mb=model.memory_mb
            ):
                problems.append(
                    (
                        f"models.{index}.{attr}",
                        f"model {model.name!r} cannot fit on one {self.instance_type}: one copy {reason}; "
                        "lower the requirement or pick a larger instance type",
                    )
                )
        total_accelerators = sum(m.accelerators * m.copies.initial for m in self.models)
        available = spec.accelerators * self.instance_count
        if not problems and total_accelerators > available:
            problems.append(
                (
                    "models",
                    f"the initial copies need {total_accelerators} accelerator devices but "
                    f"{self.instance_count} x {self.instance_type} have {available}: lower copies.initial "
                    "or raise instance_count",
                )
            )
        return problems

    @property
    def id(self) -> str:
        """The request id (always set after validation)."""
        if self.request_id is None:  # pragma: no cover - the validator always sets it
            raise ValueError("request_id not derived")
        return self.request_id

    @property
    def min_instance_count(self) -> int:
        """``ManagedInstanceScaling.MinInstanceCount``: 0 when every model may scale to 0 copies, else 1."""
        return 0 if all(model.copies.min == 0 for model in self.models) else 1


def derive_request_id(request: ReservationRequest) -> str:
    """``req-`` + 16 hex digits of the sha256 of the request's canonical JSON (without ``request_id``).

    The same content gives the same id, so a resubmission without an id is deduplicated too.
    """
    payload = request.model_dump(mode="json", exclude={"request_id"})
    # Fields added later are left out while unset, so requests without them keep their ids.
    if payload.get("idle_policy") is None:
        payload.pop("idle_policy", None)
    for model in payload.get("models", []):
        if model.get("scaling") is None:
            model.pop("scaling", None)
    # Fields added later are left out at their defaults, so the ids of older requests do not change.
    if payload.get("platform") == "sagemaker":
        del payload["platform"]
    if payload.get("launch_template") is None:
        payload.pop("launch_template", None)
    if payload.get("strategy") is None:
        payload.pop("strategy", None)
    for late in ("team", "training_plan_arn", "capacity_reservation_id"):
        if payload.get(late) is None:
            payload.pop(late, None)
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return "req-" + hashlib.sha256(canonical.encode()).hexdigest()[:16]


_FRIENDLY = {
    "missing": "is required",
    "extra_forbidden": "is not a known field: remove it or fix its spelling",
    "timezone_aware": "must include a time zone: give UTC like 2026-12-10T11:30:00Z (naive times rejected)",
    "datetime_parsing": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "datetime_from_date_parsing": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "datetime_type": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "int_type": "must be a whole number (a JSON integer, not a string, a boolean or a fraction)",
    "bool_type": "must be true or false (a JSON boolean, not a string or a number)",
    "decimal_parsing": 'must be an amount in US dollars, like "30000" or "12500.50"',
    "decimal_type": 'must be an amount in US dollars, like "30000" or "12500.50"',
    "finite_number": 'must be a finite amount in US dollars, like "30000" (not NaN or Infinity)',
    "decimal_max_places": 'must be whole cents: at most 2 decimal places, like "12500.50"',
    "decimal_max_digits": f"must be at most {MAX_REQUEST_USD:,f} US dollars",
    "decimal_whole_digits": f"must be at most {MAX_REQUEST_USD:,f} US dollars",
}
_MISSING_HINT = {
    "max_upfront_fee_usd": 'is required: set the budget, the most to pay upfront in USD (e.g. "30000")',
    "models": "is required: list at least one model to serve",
    "regions": 'is required: list candidate regions in order of preference (e.g. ["us-east-1"])',
}


def field_errors(exc: ValidationError) -> list[FieldError]:
    """Turn pydantic errors into :class:`FieldError` items that name the field and the fix."""
    return field_problems(exc.errors(include_url=False))


_DOOR_PARTS = ("body", "query", "path", "header")


def field_problems(errors: Sequence[Mapping[str, Any]]) -> list[FieldError]:
    """pydantic error dicts (``ValidationError.errors()``, or Powertools'
    ``RequestValidationError.errors()``) as :class:`FieldError` items that name the field and the fix: the
    one wording of every door.

    A ``loc`` that starts with ``body``, ``query``, ``path`` or ``header`` (the API door's) names the rest
    (``instance_count``, ``models.0.memory_mb``), or the parameter (``limit``), or ``body`` for the body as a
    whole.
    """
    result: list[FieldError] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = loc[0] if loc else ""
        rest = loc[1:] if where in _DOOR_PARTS else loc
        field = ".".join(rest) or where or "request"
        ctx = error.get("ctx") or {}
        kind = str(error.get("type", ""))
        if kind == "request_rules" and isinstance(ctx.get("problems"), list):
            prefix = f"{field}." if rest else ""
            result.extend(FieldError(prefix + f, m) for f, m in ctx["problems"])
            continue
        if kind == "missing":
            message = _MISSING_HINT.get(field, _FRIENDLY["missing"])
        elif kind == "json_invalid":
            field, message = "body", f"is not valid JSON: {ctx.get('error') or error.get('msg')}"
        else:
            message = _bound_message(kind, ctx) or _FRIENDLY.get(kind) or _plain(str(error.get("msg", "")))
        result.append(FieldError(field, message))
    return result


def _plain(message: str) -> str:
    """pydantic's ``Value error, <ours>`` prefix removed: our validators already say what to fix."""
    return message.removeprefix("Value error, ") or "is invalid"


def _bound_message(kind: str, ctx: Mapping[str, Any]) -> str | None:
    """Limits phrased as the fix ("must be at least 1") rather than as pydantic's complaint."""
    bounds = {
        "greater_than_equal": ("ge", "must be at least {}"),
        "greater_than": ("gt", "must be more than {}"),
        "less_than_equal": ("le", "must be at most {}"),
        "less_than": ("lt", "must be less than {}"),
        "too_short": ("min_length", "needs at least {} item(s) (or characters)"),
        "too_long": ("max_length", "allows at most {} item(s) (or characters)"),
    }
    if kind not in bounds or bounds[kind][0] not in ctx:
        return None
    key, template = bounds[kind]
    return template.format(ctx[key])


def parse_request(data: Mapping[str, Any], *, now: datetime | None) -> ReservationRequest:
    """Validate a raw request (a JSON object) at a door.

    Args:
        data: the request as sent (strings for timestamps and money are fine).
        now: the current UTC time; when given, ``earliest_start`` more than 15 minutes before it is
            rejected. Pass None to re-read a request already accepted (e.g. from the ledger).

    Raises:
        InvalidRequest: every problem, each naming the field and what to fix.
    """
    if not isinstance(data, Mapping):
        raise InvalidRequest([FieldError("request", "must be a JSON object")])
    try:
        return ReservationRequest.model_validate(dict(data), context={"now": now} if now else None)
    except ValidationError as exc:
        raise InvalidRequest(field_errors(exc)) from exc


def parse_model[M: BaseModel](model: type[M], data: Any) -> M:
    """Validate a handler input against ``model``.

    Raises:
        InvalidRequest: naming each bad field.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(field_errors(exc)) from exc


# ------------------------------------------------------------------------------------------ offerings


class OfferingSummary(BaseModel):
    """The offering fields the workflow passes between steps (choose -> approval -> purchase)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    offering_id: str
    region: str
    availability_zone: str
    instance_type: str
    instance_count: int
    start_time: UtcDatetime
    end_time: UtcDatetime
    duration_hours: int
    upfront_fee_usd: Money


class Offering(OfferingSummary):
    """A training plan offering normalised for comparison (one per ``TrainingPlanOfferingId``).

    Money in USD: ``upfront_fee_usd`` (AWS ``UpfrontFee``), ``usd_per_instance_hour`` (fee over
    reserved instance-hours), ``on_demand_usd_per_hour`` (per instance, :mod:`capacity.pricing`),
    ``on_demand_equivalent_usd`` (same instance-hours on demand), ``saving_percent`` and
    ``break_even_utilisation`` (fraction of the time the capacity must be used to beat on-demand).
    ``feasible`` says whether it satisfies the request (window, duration, count); if not,
    ``infeasible_reason`` says why (it is then an *alternative* to show). ``searched_duration_hours``
    and ``searched_count`` record the search that returned it.
    """

    currency: str = "USD"
    usd_per_instance_hour: Money
    on_demand_usd_per_hour: Money | None = None
    on_demand_equivalent_usd: Money | None = None
    saving_percent: Money | None = None
    break_even_utilisation: Money | None = None
    searched_duration_hours: int
    searched_count: int
    feasible: bool
    infeasible_reason: str | None = None

    @property
    def key(self) -> str:
        """Sort key in OFFERINGS_TABLE: region, duration, count and id (unique per search)."""
        return (
            f"{self.region}#{self.searched_duration_hours:05d}#{self.searched_count:02d}#{self.offering_id}"
        )

    def summary(self) -> OfferingSummary:
        """The small form passed through the state machine."""
        return OfferingSummary.model_validate(self.model_dump())


# ------------------------------------------------------------------------------------------- ledger


class State(StrEnum):
    """Reservation states recorded in the ledger (DESIGN.md section 4)."""

    REQUESTED = "REQUESTED"
    PLANNED = "PLANNED"
    AWAITING_APPROVAL = "AWAITING_APPROVAL"
    PURCHASED = "PURCHASED"
    SCHEDULED = "SCHEDULED"
    ACTIVE = "ACTIVE"
    DEPLOYING = "DEPLOYING"
    READY = "READY"
    RELEASING = "RELEASING"
    RELEASED = "RELEASED"
    REJECTED = "REJECTED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    EXTENDED = "EXTENDED"
    """An extension in place was paid: ``money_usd`` its fee, ``detail.end_time`` the new end."""


FINAL_STATES = frozenset({State.RELEASED, State.REJECTED, State.FAILED, State.CANCELLED})
"""States after which the reserve workflow must not buy or deploy anything."""


class LedgerEntry(BaseModel):
    """One state change of a reservation: an append-only ledger item ``sk = STATE#<time>#<seq>``.

    ``at`` is UTC; ``actor`` the function or person; ``detail`` a small JSON map; ``money_usd`` set when
    money moves (the purchase).
    """

    model_config = ConfigDict(frozen=True)

    request_id: str
    sk: str
    state: State
    at: UtcDatetime
    actor: str
    detail: dict[str, Any] = Field(default_factory=dict)
    money_usd: Money | None = None


# --------------------------------------------------------------------------------------- cost summary


class CostSummary(BaseModel):
    """What a reservation cost and what it would have cost on demand (recorded with ``RELEASED``).

    Since issue 16 the use is what ran: ``instance_hours_used`` (instance counts over time) against
    ``instance_hours_reserved``; ``on_demand_equivalent_served_usd``, ``saving_usd``/``saving_percent``,
    ``utilisation_percent`` and ``effective_usd_per_served_instance_hour`` (USD per *used* instance-hour)
    follow from it.

    Hours are decimal hours; ``hours_served`` runs from the endpoint's READY (or DEPLOYING) time to the
    start of the release, within the plan. On-demand equivalents use :mod:`capacity.pricing` and the
    instance count; ``saving_usd``/``saving_percent`` compare the upfront fee with the on-demand cost of
    the hours served (negative when it did not pay off; no percentage when it never served);
    ``utilisation_percent`` is served/reserved; ``break_even_utilisation_percent`` is the utilisation at
    which the reservation equals on-demand.
    """

    request_id: str
    training_plan_name: str
    region: str
    instance_type: str
    instance_count: int
    upfront_fee_usd: Money
    hours_reserved: Money
    hours_served: Money
    on_demand_usd_per_instance_hour: Money | None = None
    on_demand_equivalent_reserved_usd: Money | None = None
    on_demand_equivalent_served_usd: Money | None = None
    saving_usd: Money | None = None
    saving_percent: Money | None = None
    utilisation_percent: Money
    break_even_utilisation_percent: Money | None = None
    effective_usd_per_served_instance_hour: Money | None = None
    instance_hours_reserved: Money | None = None
    """Instances x hours the reservation holds (issue 16)."""
    instance_hours_used: Money | None = None
    """Instance-hours in service, from the instance counts the product recorded (:mod:`capacity.logic.costs`);
    ``utilisation_percent``, the on-demand equivalent of what was used, the saving (negative: a loss against
    on-demand) and the price per used instance-hour are computed from it."""
    usage_observed: bool | None = None
    """False when no instance count was recorded and every instance is assumed to have served."""
    brought: bool = False
    """True when the request brought a reservation someone else bought (issue 17): this request paid
    nothing for it (``upfront_fee_usd`` 0); the on-demand equivalents still say what the use was worth."""


# ------------------------------------------------------------------------------------- event details


class _Detail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1


class SlackOrigin(BaseModel):
    """Where a request made in Slack came from: progress is posted in a thread in ``channel_id``.

    ``user_id`` is the requester's Slack user id (``U...``); ``team_id`` the workspace (``T...``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    channel_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z0-9]+$")
    user_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Z0-9]+$")
    team_id: str | None = Field(default=None, max_length=64)


class ResumeOf(BaseModel):
    """The stopped reserve execution a ``ReservationRequested`` resumes (:mod:`capacity.logic.stopped`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(min_length=1, max_length=128)
    execution: str = Field(min_length=1, max_length=2048)
    """The ARN of the execution that was stopped (timed out, aborted, failed outside its failure path)."""


class ReservationRequestedDetail(_Detail):
    """``ReservationRequested``: ``request`` is the raw request (validated by ``record_request``);
    ``slack`` (optional) is the Slack channel and user of a request made with ``/gpu reserve``;
    ``resume_of`` (put by the application only) names the stopped execution this one carries on."""

    request: dict[str, Any]
    slack: SlackOrigin | None = None
    resume_of: ResumeOf | None = None


class ReservationPlannedDetail(_Detail):
    """``ReservationPlanned``: the decision (``PURCHASE``, ``APPROVAL_REQUIRED``...), why, and the pick."""

    request_id: str
    decision: str
    reason: str
    offering: OfferingSummary | None = None
    offerings_considered: int = 0


class ApprovalRequestedDetail(_Detail):
    """``ApprovalRequested``: a person must approve ``offering`` (fee above ``approval_above_usd``).

    ``approval_deadline`` (UTC, rounded down to the minute) is when the approval wait of ``timeout_seconds``
    ends, counted from when the approval state was entered: never later than the state machine's (the
    operations topic's notice quotes it; template.yaml).
    """

    request_id: str
    offering: OfferingSummary | None
    approval_above_usd: Money | None
    timeout_seconds: int
    approval_deadline: UtcDatetime | None = None


class ReservationPurchasedDetail(_Detail):
    """``ReservationPurchased``: the training plan bought (upfront fee in USD)."""

    request_id: str
    training_plan_arn: str
    training_plan_name: str
    region: str
    start_time: UtcDatetime
    end_time: UtcDatetime
    upfront_fee_usd: Money


class ReservationActiveDetail(_Detail):
    """``ReservationActive``: the plan is ``Active``; endpoints can be created on it."""

    request_id: str
    training_plan_name: str
    region: str
    start_time: UtcDatetime | None
    end_time: UtcDatetime | None


class ReservationReadyDetail(_Detail):
    """``ReservationReady``: the endpoint and every inference component are ``InService`` (SageMaker), or the
    capacity block is active and its instances run (``platform`` ``ec2``: ``capacity_reservation_id``,
    ``availability_zone``, ``instance_ids``; no endpoint)."""

    request_id: str
    region: str
    endpoint_name: str = ""
    inference_component_names: list[str] = Field(default_factory=list)
    capacity_reservation_id: str | None = None
    availability_zone: str | None = None
    instance_ids: list[str] = Field(default_factory=list)


class ExtensionOffering(BaseModel):
    """One way to extend a reservation in place (``TrainingPlanExtensionOfferings`` of
    ``SearchTrainingPlanOfferings(TrainingPlanArn)``, ``DescribeCapacityBlockExtensionOfferings``).

    ``start_time`` is the reservation's current end, ``end_time`` its end once extended (UTC);
    ``upfront_fee_usd`` the extension's fee (USD); ``on_demand_equivalent_usd`` the same instance-hours on
    demand (None when the price is unknown).
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    offering_id: str
    region: str
    availability_zone: str | None = None
    start_time: UtcDatetime
    end_time: UtcDatetime
    duration_hours: int
    upfront_fee_usd: Money
    on_demand_equivalent_usd: Money | None = None


class ExtensionRequestedDetail(_Detail):
    """``ExtensionRequested``: buy ``offering`` for ``request_id`` (``extension_id`` names this extension:
    a second delivery of the same one buys nothing); ``requester`` who asked."""

    request_id: str
    extension_id: str
    offering: ExtensionOffering
    requester: str


class ReservationExtendedDetail(_Detail):
    """``ReservationExtended``: the extension is paid; the reservation now ends at ``end_time``."""

    request_id: str
    extension_id: str
    offering_id: str
    end_time: UtcDatetime
    upfront_fee_usd: Money


class ExtensionFailedDetail(_Detail):
    """``ExtensionFailed``: nothing was extended (payment failed, refused); it still ends at ``end_time``."""

    request_id: str
    extension_id: str
    reason: str
    end_time: UtcDatetime | None = None


class ReleaseRequestedDetail(_Detail):
    """``ReleaseRequested``: release the reservation (``reason``: reservation-end, cancelled, failed...)."""

    request_id: str
    reason: str


class ReservationReleasedDetail(_Detail):
    """``ReservationReleased``: everything was deleted; ``summary`` is the cost summary."""

    request_id: str
    reason: str | None = None
    summary: CostSummary | None = None


class ReservationFailedDetail(_Detail):
    """``ReservationFailed``: ``error`` is the error name, ``reason`` a sentence a person can act on."""

    request_id: str
    error: str
    reason: str
