"""The reservation request: its schema, the rules between its fields and its one door,
:func:`parse_request`.

Over 400 lines: one model, :class:`ReservationRequest`, whose cross-field rules each name the field to fix.

:func:`parse_request` is the one door every request goes through (API, Slack, EventBridge): it raises
:class:`~capacity.errors.InvalidRequest` whose errors name the field and what to fix (the wording is
:mod:`capacity.validation`'s). The rules that need the clock are :mod:`capacity.admission`'s; the request id
derived from the content is :mod:`capacity.identity`'s; the parts (models, scaling, idle policy, launch
template) are :mod:`capacity.request_parts`'.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Literal, Self

from pydantic import (
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from capacity.admission import default_strategy, search_until_problem, start_problem
from capacity.base import Model
from capacity.errors import FieldError, InvalidRequest
from capacity.identity import derive_request_id
from capacity.instances import (
    CAPACITY_BLOCK_INSTANCE_TYPES,
    INSTANCE_TYPES,
    TRAINING_PLAN_INSTANCE_TYPES,
    fits,
    spec_for,
)
from capacity.platforms import PlatformName
from capacity.platforms import platform as platform_named
from capacity.pricing import KNOWN_REGIONS
from capacity.request_parts import IdlePolicy, LaunchTemplateRef, LoadSpec, ModelSpec
from capacity.rightsize import RightSizing, size
from capacity.search_schedule import (
    DEFAULT_EVERY_MINUTES,
    MAX_EVERY_MINUTES,
    MIN_EVERY_MINUTES,
)
from capacity.timeutil import iso_z
from capacity.validation import field_errors
from capacity.wire import (
    MAX_REQUEST_USD,
    MONEY_DECIMAL_PLACES,
    Money,
    StrictBool,
    StrictInt,
    UtcDatetime,
    problem,
)

ALLOWED_INSTANCE_COUNTS = (1, 2, 4, 8, 16, 32, 64)
"""Training plan instance counts (AWS_FACTS.md, SageMaker training plans)."""
MIN_DURATION_HOURS = 24
MAX_DURATION_HOURS = 4368  # 182 days, the longest training plan
MAX_CAPACITY_BLOCK_INSTANCES = 64
"""Most instances in one EC2 capacity block (AWS_FACTS.md, EC2 Capacity Blocks for ML)."""

_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
_TRAINING_PLAN_ARN = re.compile(
    r"^arn:aws[a-z-]*:sagemaker:(?P<region>[a-z0-9-]+):(?P<account>[0-9]{12}):training-plan/"
    r"(?P<name>[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63})$"
)
"""botocore's ``TrainingPlanArn`` pattern, with the region, account and plan name captured."""
_CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8,17}$")
SUCCESSOR_ID_END = re.compile(r"-r\d+$")
"""How a successor's request id ends (:func:`capacity.succession.successor_id`: ``<root>-r<n>``): kept for the
orchestrator, so nobody takes a chain's next id at a door first."""
DEFAULT_ROLLOVER_LEAD_HOURS = 48
"""How long before a reservation ends the orchestrator acts for ``serve_until``, by default: capacity starts
at 11:30 UTC day boundaries (capacity blocks; the local cloud's training plans), so the next reservation must
start the day before the current one ends to be ``InService`` in time; 48 hours leaves a day to find,
approve and buy it."""
MIN_ROLLOVER_LEAD_HOURS = 2
MAX_ROLLOVER_LEAD_HOURS = 336
"""At most 14 days ahead (an extension can be bought at most 56 days before the end)."""
MAX_SERVE_DAYS = 365
"""``serve_until`` at most this many days after ``earliest_start``."""


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


Strategy = Literal["on-demand-first", "reserved", "spot-ok"]
"""How much certainty the request needs (seed 000's decision framework): ``on-demand-first`` tries on-demand
capacity region by region before reserving; ``reserved`` always reserves; ``spot-ok`` (EC2 only,
interruption-tolerant work) tries on demand, then spot, then reserves."""

Platform = PlatformName
"""Where the capacity runs (:data:`capacity.platforms.PlatformName`; each one's facts:
:func:`capacity.platforms.platform`)."""


def _now(info: ValidationInfo) -> datetime | None:
    """The validation context's ``now`` (the door's clock), None when the request is read back."""
    now = (info.context or {}).get("now") if isinstance(info.context, dict) else None
    return now if isinstance(now, datetime) else None


class ReservationRequest(Model):
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
    the request (:func:`capacity.logic.governance.checks.brought_reservation`, checked at every door and again
    before it is used). The plan's region (from its ARN) must be one of ``regions``.

    Keep looking (issue 17 item 4): ``search_until`` (UTC) asks the workflow, when nothing fits the rules now
    (no offering, or none within the budget), to search again until that deadline instead of failing at once
    (:mod:`capacity.search_schedule`: every ``search_every_minutes`` at most, default 15, 15..10080, the last
    look at the deadline; issue 31), and to tell the requester at the deadline if nothing
    fitted. It must be in the future (at most 90 days ahead) and no later than the window's latest start
    (``latest_end - duration_hours``).

    Keep serving (issue 17): ``serve_until`` (UTC) asks the orchestrator to keep the models served until then:
    ``rollover_lead_hours`` (default 48) before the reservation ends it extends it in place, or buys the next
    reservation (a successor request, ``rollover_of`` naming this one: set only by the orchestrator) and
    moves the clients onto it (:mod:`capacity.logic.continuity.rollover`). ``PATCH /reservations/{id}`` sets
    or moves it later.

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
    serve_until: UtcDatetime | None = Field(
        default=None,
        description="keep serving until this UTC time (issue 17): ahead of the end the reservation is "
        "extended in place, or the next reservation is bought and the models moved onto it",
    )
    rollover_lead_hours: StrictInt = Field(
        default=DEFAULT_ROLLOVER_LEAD_HOURS,
        ge=MIN_ROLLOVER_LEAD_HOURS,
        le=MAX_ROLLOVER_LEAD_HOURS,
        description="how long before the current end the orchestrator extends or rolls over (serve_until)",
    )
    rollover_of: str | None = Field(
        default=None,
        max_length=64,
        description="set by the orchestrator on the reservation it requests to take over from this one "
        "(serve_until); a caller cannot set it",
    )
    search_until: UtcDatetime | None = Field(
        default=None,
        description="keep looking until this instant (UTC) when nothing fits now, instead of failing at "
        "once; at most the window's latest start (latest_end - duration_hours)",
    )
    search_every_minutes: StrictInt = Field(
        default=DEFAULT_EVERY_MINUTES,
        ge=MIN_EVERY_MINUTES,
        le=MAX_EVERY_MINUTES,
        description="with search_until: the longest wait between two looks (minutes); the workflow looks "
        "again this often until search_until, the last look at the deadline",
    )
    load: LoadSpec | None = Field(
        default=None,
        description="the expected traffic per model and the service target (issue 33): POST /plans "
        "simulates each candidate instance count on it",
    )
    right_size: StrictBool = Field(
        default=False,
        description="with load: buy the smallest instance count that meets load.max_rejected_percent "
        "instead of instance_count (which stays the count asked for in sizing.requested_count)",
    )
    sizing: RightSizing | None = Field(
        default=None,
        description="set by the orchestrator for right_size (the simulated candidates and the count "
        "chosen); a value sent in the body is replaced",
    )

    @field_validator("training_plan_arn")
    @classmethod
    def _training_plan_arn(cls, value: str | None) -> str | None:
        if value is not None and not _TRAINING_PLAN_ARN.match(value):
            raise problem(
                f"{value!r} is not a training plan ARN: give it as DescribeTrainingPlan shows it, "
                "arn:aws:sagemaker:<region>:<account>:training-plan/<name>"
            )
        return value

    @field_validator("capacity_reservation_id")
    @classmethod
    def _capacity_reservation_id(cls, value: str | None) -> str | None:
        if value is not None and not _CAPACITY_RESERVATION_ID.match(value):
            raise problem(
                f"{value!r} is not a capacity reservation id: give the capacity block's id as "
                "DescribeCapacityReservations shows it (cr- and 17 hexadecimal digits)"
            )
        return value

    @field_validator("request_id", "rollover_of")
    @classmethod
    def _request_id(cls, value: str | None) -> str | None:
        if value is not None and not _REQUEST_ID.match(value):
            raise problem(
                f"{value!r} is not a usable request id: 1-64 letters, digits, '.', '_', ':' or '-', "
                "starting with a letter or digit (or leave it out to derive one from the content)"
            )
        return value

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, value: str, info: ValidationInfo) -> str:
        if platform_named(info.data.get("platform")).capacity_blocks:
            if value not in CAPACITY_BLOCK_INSTANCE_TYPES:
                raise problem(
                    f"{value!r} is not an EC2 instance type sold as capacity blocks: use one of "
                    + ", ".join(sorted(CAPACITY_BLOCK_INSTANCE_TYPES))
                )
            return value
        if value not in INSTANCE_TYPES:
            raise problem(
                f"{value!r} is not a supported instance type: training plans reserve "
                + ", ".join(sorted(TRAINING_PLAN_INSTANCE_TYPES))
                + "; on demand only (strategy on-demand-first, no training plan): "
                + ", ".join(sorted(set(INSTANCE_TYPES) - TRAINING_PLAN_INSTANCE_TYPES))
            )
        return value  # a type without training plans is checked against the strategy in _reservable

    @field_validator("instance_count")
    @classmethod
    def _instance_count(cls, value: int, info: ValidationInfo) -> int:
        if platform_named(info.data.get("platform")).capacity_blocks:
            if not 1 <= value <= MAX_CAPACITY_BLOCK_INSTANCES:
                raise problem(
                    f"count {value} is not allowed: a capacity block holds 1 to "
                    f"{MAX_CAPACITY_BLOCK_INSTANCES} instances"
                )
            return value
        if value not in ALLOWED_INSTANCE_COUNTS:
            raise problem(
                f"count {value} is not allowed: training plans reserve "
                + ", ".join(map(str, ALLOWED_INSTANCE_COUNTS))
                + " instances"
            )
        return value

    @field_validator("duration_hours")
    @classmethod
    def _duration(cls, value: int, info: ValidationInfo) -> int:
        if platform_named(info.data.get("platform")).capacity_blocks:
            if not valid_capacity_block_hours(value):
                raise problem(
                    f"unsupported duration {value} h ({value / 24:g} days): capacity blocks last 1 to 14 "
                    "days in 24-hour steps (24..336), then whole weeks up to 182 days (504, 672 ... 4368)"
                )
            return value
        if value % 24 or not MIN_DURATION_HOURS <= value <= MAX_DURATION_HOURS:
            raise problem(
                f"unsupported duration {value} h: training plans last whole days, use a multiple of 24 "
                f"between {MIN_DURATION_HOURS} and {MAX_DURATION_HOURS} (182 days)"
            )
        return value

    @field_validator("regions")
    @classmethod
    def _regions(cls, value: list[str]) -> list[str]:
        unknown = [region for region in value if region not in KNOWN_REGIONS]
        if unknown:
            raise problem(
                f"unknown region(s) {', '.join(map(repr, unknown))}: use AWS region codes such as "
                + ", ".join(sorted(KNOWN_REGIONS))
            )
        if len(set(value)) != len(value):
            raise problem("regions are listed more than once: list each region once, in preference order")
        return value

    @field_validator("search_until")
    @classmethod
    def _search_until_ahead(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        now = _now(info)
        if value is not None and now is not None:
            why = search_until_problem(value, now=now)
            if why is not None:
                raise problem(why)
        return value

    @field_validator("earliest_start")
    @classmethod
    def _not_in_past(cls, value: datetime, info: ValidationInfo) -> datetime:
        now = _now(info)
        if now is not None:
            why = start_problem(value, platform=info.data.get("platform"), now=now)
            if why is not None:
                raise problem(why)
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
        now = _now(info)
        if now is None:
            return None
        runnable = not platform_named(self.platform).launches_instances or self.launch_template is not None
        return default_strategy(self.earliest_start, runnable_on_demand=runnable, now=now)

    @model_validator(mode="after")
    def _default_strategy(self, info: ValidationInfo) -> Self:
        """``on-demand-first`` when the window starts within the next hour (and, for EC2, a launch template
        says what to run), else ``reserved``; a request re-read without ``now`` keeps ``reserved``."""
        if self.strategy is None:
            self.strategy = self._default_for(info) or "reserved"
        return self

    @model_validator(mode="after")
    def _right_size(self, info: ValidationInfo) -> Self:
        """With ``right_size``, simulate the candidates (:func:`capacity.rightsize.size`) and take the
        smallest count meeting the target as ``instance_count``; when none meets it, the count asked for
        stays and ``sizing.text`` says so. Simulated whenever the request is validated with a clock (at a
        door, at intake: a ``sizing`` sent is never trusted, only its ``requested_count`` carried); a request
        re-read from the ledger (no clock) keeps the ``sizing`` recorded."""
        if not self.right_size or self.load is None:
            self.sizing = None
            return self
        if self.sizing is not None and _now(info) is None:
            return self
        self.sizing = self.simulate_load(self.load)
        if self.sizing.instance_count is not None:
            self.instance_count = self.sizing.instance_count
        return self

    def simulate_load(self, load: LoadSpec) -> RightSizing:
        """The candidates of this request simulated on ``load`` from ``earliest_start`` for
        ``duration_hours`` (:func:`capacity.rightsize.size`)."""
        return size(
            instance_type=self.instance_type,
            models=self.models,
            load=load,
            requested_count=max(self.instance_count, self.sizing.requested_count if self.sizing else 0),
            start=self.earliest_start,
            hours=self.duration_hours,
            min_instances=self.min_instance_count,
        )

    def _reservable_problems(self, strategy: Strategy) -> list[tuple[str, str]]:
        """A SageMaker type without training plans (``ml.g6.*``: not in botocore's
        ``ReservedCapacityInstanceType``) runs on demand only: a problem when the (defaulted) strategy
        reserves."""
        if strategy != "reserved" or platform_named(self.platform).reserves(self.instance_type):
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
        problems.extend(self._serve_until_problems())
        problems.extend(self._search_problems())
        problems.extend(self._load_problems())
        names = [model.name for model in self.models]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            problems.append(("models", f"model names must be unique, repeated: {', '.join(duplicates)}"))
        problems.extend(self._fit_problems())
        return problems

    def _platform_problems(self) -> list[tuple[str, str]]:
        runs_on = platform_named(self.platform)
        if self.strategy == "spot-ok" and not runs_on.spot:
            return [("strategy", "spot-ok is for EC2 (platform ec2); use on-demand-first or reserved")]
        if (
            runs_on.launches_instances
            and self.strategy in ("on-demand-first", "spot-ok")
            and not self.launch_template
        ):
            return [
                ("launch_template", f"strategy {self.strategy} launches instances: give the launch template")
            ]
        if runs_on.serves_models:
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
        AWS says of it is :func:`capacity.logic.governance.checks.brought_reservation`)."""
        problems: list[tuple[str, str]] = []
        if self.training_plan_arn is not None and self.capacity_reservation_id is not None:
            problems.append(
                (
                    "capacity_reservation_id",
                    "name one reservation: training_plan_arn (platform sagemaker) or capacity_reservation_id "
                    "(platform ec2), not both",
                )
            )
        if self.training_plan_arn is not None and not platform_named(self.platform).training_plans:
            problems.append(
                (
                    "training_plan_arn",
                    "a training plan serves SageMaker endpoints (platform sagemaker); for platform ec2 name "
                    "a capacity block with capacity_reservation_id",
                )
            )
        if self.capacity_reservation_id is not None and not platform_named(self.platform).capacity_blocks:
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

    def _serve_until_problems(self) -> list[tuple[str, str]]:
        """``serve_until`` must reach past what the request itself can cover (else it is moot) and stay within
        :data:`MAX_SERVE_DAYS`; ``rollover_of`` names another request."""
        problems: list[tuple[str, str]] = []
        if self.serve_until is not None:
            shortest = self.earliest_start + timedelta(hours=self.duration_hours)
            if self.serve_until <= shortest:
                problems.append(
                    (
                        "serve_until",
                        f"{iso_z(self.serve_until)} is not after {iso_z(shortest)}, the earliest the "
                        f"reservation itself ends (earliest_start + duration_hours): it serves until then "
                        "anyway; leave serve_until out or move it later",
                    )
                )
            horizon = self.earliest_start + timedelta(days=MAX_SERVE_DAYS)
            if self.serve_until > horizon:
                problems.append(
                    (
                        "serve_until",
                        f"{iso_z(self.serve_until)} is more than {MAX_SERVE_DAYS} days after earliest_start: "
                        f"use {iso_z(horizon)} or earlier",
                    )
                )
            if self.dry_run:
                problems.append(
                    ("serve_until", "a dry run buys nothing, so nothing is kept serving: remove serve_until")
                )
        if self.rollover_of is not None and self.rollover_of == self.request_id:
            problems.append(
                ("rollover_of", "names the request itself: it must name the reservation it follows")
            )
        return problems

    def _search_problems(self) -> list[tuple[str, str]]:
        """What ``search_until``/``search_every_minutes`` say against the rest of the request (no clock)."""
        if self.search_until is None:
            if self.search_every_minutes != DEFAULT_EVERY_MINUTES:
                return [
                    (
                        "search_every_minutes",
                        "says how often to look again until search_until: give search_until too, or leave "
                        "search_every_minutes out",
                    )
                ]
            return []
        problems: list[tuple[str, str]] = []
        latest_start = self.latest_end - timedelta(hours=self.duration_hours)
        if self.search_until > latest_start:
            problems.append(
                (
                    "search_until",
                    f"{iso_z(self.search_until)} is after the window's latest start {iso_z(latest_start)} "
                    f"(latest_end {iso_z(self.latest_end)} minus duration_hours {self.duration_hours}): a "
                    f"reservation found later could not fit the window; choose {iso_z(latest_start)} or "
                    "earlier, or move latest_end later",
                )
            )
        if self.brought is not None:
            problems.append(
                (
                    "search_until",
                    "the request brings its own reservation, so nothing is searched for: remove search_until",
                )
            )
        if not platform_named(self.platform).reserves(self.instance_type):
            problems.append(
                (
                    "search_until",
                    f"{self.instance_type} has no training plan to look for (it runs on demand only): remove "
                    "search_until, or pick a type training plans reserve",
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

    def _load_problems(self) -> list[tuple[str, str]]:
        """``load`` names models of the request, on SageMaker; ``right_size`` needs a load and buys."""
        problems: list[tuple[str, str]] = []
        if self.right_size and self.load is None:
            problems.append(("right_size", "needs load (the expected traffic and the target) to size on"))
        if self.right_size and self.brought is not None:
            problems.append(("right_size", "sizes a purchase: remove it when bringing your own reservation"))
        if self.load is None:
            return problems
        if not platform_named(self.platform).serves_models or not self.models:
            problems.append(("load", "applies to SageMaker requests with models (inference components)"))
            return problems
        names = {model.name for model in self.models}
        for index, item in enumerate(self.load.models):
            if item.model not in names:
                problems.append(
                    (
                        f"load.models.{index}.model",
                        f"{item.model!r} is not a model of the request ({', '.join(sorted(names))})",
                    )
                )
        return problems

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


def require_not_a_successor(request: ReservationRequest) -> None:
    """Refuse ``rollover_of`` and a successor's id (``...-r<n>``, :data:`SUCCESSOR_ID_END`) at a door (API,
    Slack, schedules): only the orchestrator names a successor (issue 17). An id taken first at a door would
    leave the chain's successor "taken by another request", and the chain would stop serving.

    Raises:
        InvalidRequest: ``rollover_of`` is set, or ``request_id`` ends like a successor's.
    """
    if SUCCESSOR_ID_END.search(request.id):
        raise InvalidRequest(
            [
                FieldError(
                    "request_id",
                    f"{request.id!r} ends like the id of a reservation the orchestrator requests to keep "
                    "another serving (<id>-r<n>, serve_until): choose an id that does not end in -r<n>",
                )
            ]
        )
    if request.rollover_of is not None:
        raise InvalidRequest(
            [
                FieldError(
                    "rollover_of",
                    "is set by the orchestrator on the reservation it requests to keep another serving "
                    "(serve_until); remove it",
                )
            ]
        )
