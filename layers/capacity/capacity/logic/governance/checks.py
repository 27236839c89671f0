"""What a request names, checked before any money moves (issue 13, defects 10 and 13).

Over 400 lines: every check made before money moves, in one place so none is skipped.

Two kinds of check, each written once and used by every door and step that needs it:

- **Scopes** (:func:`scope_problems`, :func:`require_in_scope`): what an administrator allows. A model
  artifact (``model_data_url``) must be in one of the buckets of ``MODEL_ARTIFACT_BUCKETS`` (template
  parameter ``ModelArtifactBuckets``; the endpoint role may read only those), and the instance profile of an
  EC2 request's launch template must run as a role of ``INSTANCE_ROLE_ARNS`` (``InstanceRoleArns``;
  ``launch_instances`` and ``on_demand`` may pass only those roles to EC2). Checked at the doors (API
  ``POST /reservations``, ``POST /plans``, ``POST /schedules``, Slack, and ``record_request`` for events):
  :class:`~capacity.errors.OutOfScope`, a 400 naming the field. Not configured (the variable unset, as in
  the unit tests): not checked; the template always sets both, empty by default (nothing allowed).
- **Existence where it would run** (:func:`region_problems`, :func:`require_deployable`): every
  ``model_name`` exists in the region (``DescribeModel``), and the launch template and its version exist
  there (``DescribeLaunchTemplateVersions``; launch templates are regional) with an allowed instance role.
  Checked before approval (``choose_offering`` considers only the offerings of regions that pass), before
  each purchase and on-demand launch (in its region), and reported by the dry run (``POST /plans``, Slack
  ``plan``) per region: :class:`~capacity.errors.NotDeployable` (``ModelNotFound``,
  ``LaunchTemplateNotFound``) in the workflow, recorded ``FAILED`` with nothing bought.
- **A brought reservation** (:func:`brought_reservation`, issue 17): the training plan or capacity block a
  request names instead of buying one must exist in this account in one of its regions, be Active or
  Scheduled, fit the request (instance type, at least its count, the window, target ``endpoint``), and be
  nobody else's here: not bought by the orchestrator for another request (its ``request-id`` tag), and not
  adopted by another request that has not ended (the ledger's claims, :meth:`~capacity.ledger.Ledger.
  claim_brought`).
  Checked at every door (with the scopes, :func:`require_in_scope`: a 422 naming the field) and again by the
  workflow before it is used (``adopt_reservation``): :class:`~capacity.errors.BroughtReservationRefused`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from capacity import TAG_REQUEST_ID
from capacity.errors import (
    BroughtReservationRefused,
    FieldError,
    LaunchTemplateNotFound,
    ModelNotFound,
    NotDeployable,
    OutOfScope,
)
from capacity.offerings import Offering
from capacity.platforms import platform
from capacity.ports import Ports
from capacity.records import FINAL_STATES
from capacity.request import ReservationRequest
from capacity.settings import Settings
from capacity.timeutil import iso_z


def _bucket(url: str) -> str | None:
    """The bucket of ``s3://bucket/key`` (None for another scheme)."""
    if not url.startswith("s3://"):
        return None
    return url.removeprefix("s3://").split("/", 1)[0]


def _allowed(names: Iterable[str]) -> str:
    return ", ".join(sorted(names)) or "none"


def scope_problems(request: ReservationRequest, settings: Settings) -> list[FieldError]:
    """Model artifacts outside ``MODEL_ARTIFACT_BUCKETS`` (no AWS call); [] when not configured."""
    buckets = settings.model_artifact_buckets
    if buckets is None:
        return []
    problems: list[FieldError] = []
    for index, model in enumerate(request.models):
        if not model.model_data_url:
            continue
        bucket = _bucket(model.model_data_url)
        if bucket is None:
            message = (
                f"{model.model_data_url!r} is not in S3: SageMaker reads inference component artifacts from "
                f"S3, and this deployment only from the buckets {_allowed(buckets)} (ModelArtifactBuckets)"
            )
        elif bucket not in buckets:
            message = (
                f"bucket {bucket!r} is not one this deployment may read model artifacts from "
                f"(ModelArtifactBuckets: {_allowed(buckets)}): put the artifact in one of them, or ask an "
                "administrator to add the bucket"
            )
        else:
            continue
        problems.append(FieldError(f"models.{index}.model_data_url", message))
    return problems


def _role_problem(request: ReservationRequest, ports: Ports, profile: str, region: str) -> str | None:
    """Why the instance profile ``profile`` of the launch template may not be used, or None."""
    allowed = ports.settings.instance_role_arns
    if allowed is None:
        return None
    roles = ports.iam.instance_profile_roles(profile)
    if roles is None:
        return (
            f"the instance profile {profile!r} of launch template {_template(request)} in {region} does not "
            "exist: fix the launch template"
        )
    outside = sorted(set(roles) - allowed)
    if not outside and roles:
        return None
    return (
        f"launch template {_template(request)} in {region} gives its instances the instance profile "
        f"{profile!r} (role {', '.join(outside or roles) or 'none'}), which this deployment may not pass to "
        f"EC2 (InstanceRoleArns: {_allowed(allowed)}): use a launch template whose instance profile runs as "
        "one of those roles, or none"
    )


def _template(request: ReservationRequest) -> str:
    ref = request.launch_template
    if ref is None:  # pragma: no cover - callers check
        return "(none)"
    return f"{ref.id or ref.name!r} version {ref.version}"


def instance_role_problems(request: ReservationRequest, ports: Ports) -> list[FieldError]:
    """An EC2 request's launch template whose instance profile runs as a role outside
    ``INSTANCE_ROLE_ARNS``, in any of the request's regions where the template exists; [] when not
    configured or without a launch template. (A template missing everywhere is found by
    :func:`region_problems` before anything is bought.)"""
    if request.launch_template is None or ports.settings.instance_role_arns is None:
        return []
    for region in request.regions:
        version = ports.ec2(region).launch_template_version(request.launch_template.as_aws())
        if version is None or version.instance_profile is None:
            continue
        problem = _role_problem(request, ports, version.instance_profile, region)
        if problem is not None:
            return [FieldError("launch_template", problem)]
    return []


def require_in_scope(request: ReservationRequest, ports: Ports) -> None:
    """Refuse a request naming what the administrator does not allow (see the module docstring).

    Raises:
        OutOfScope: naming each field (an API 400).
        RetryableAwsError: EC2 or IAM throttled while the launch template was read.
    """
    problems = scope_problems(request, ports.settings) + instance_role_problems(request, ports)
    if problems:
        raise OutOfScope(problems)
    if request.brought is not None:
        brought_reservation(request, ports)


BROUGHT_TARGET = "endpoint"
"""The ``TargetResources`` a brought training plan must serve (its capacity is a separate pool per target)."""


@dataclass(frozen=True)
class BroughtReservation:
    """A reservation someone else bought, as AWS describes it, checked against the request.

    Attributes:
        arn: the training plan ARN or the capacity reservation ARN.
        name: the training plan name or the capacity reservation id (``cr-...``).
        region, availability_zone: where it is (the zone may be None for a training plan).
        start_time, end_time: UTC.
        instance_type, instance_count: what it holds.
    """

    arn: str
    name: str
    region: str
    availability_zone: str | None
    start_time: datetime
    end_time: datetime
    instance_type: str
    instance_count: int
    status: str
    """``Status`` of the plan (``Active``...) or ``State`` of the block (``active``...)."""
    tagged_for: str | None = None
    """The ``capacity-orchestrator:request-id`` tag: set when the orchestrator bought it for a request."""


def brought_reservation(request: ReservationRequest, ports: Ports) -> BroughtReservation:
    """The reservation ``request`` brings, after checking it fits (see the module docstring).

    Window rule: it must end by ``latest_end`` and hold ``duration_hours`` from the later of its start and
    ``earliest_start`` (an Active plan started before the request).

    Raises:
        BroughtReservationRefused: naming ``training_plan_arn`` or ``capacity_reservation_id`` (or
            ``instance_type``, ``instance_count``, ``duration_hours``, ``latest_end``) and what to fix.
        ValueError: the request brings nothing.
        RetryableAwsError: throttling/5xx after retries.
    """
    if request.training_plan_arn is not None:
        found = _brought_plan(request, ports)
    elif request.capacity_reservation_id is not None:
        found = _brought_block(request, ports)
    else:
        raise ValueError(f"request {request.id} brings no reservation")
    field = "training_plan_arn" if request.training_plan_arn is not None else "capacity_reservation_id"
    _nobody_elses(request, ports, field, found)
    runs_on = platform(request.platform)  # its brought_states: DescribeTrainingPlan/CapacityReservations
    if found.status not in runs_on.brought_states:
        what = runs_on.reserved_short
        raise _refuse(
            field,
            f"{found.name} is {found.status}: only an {' or '.join(runs_on.brought_states)} "
            f"{what} can be used; name another {what} or leave {field} out to buy one",
        )
    return _fits(request, field, found)


def live_claimants(ports: Ports, reference: str, *, besides: str | None = None) -> list[str]:
    """The requests (other than ``besides``) that adopted the brought reservation ``reference`` (training
    plan ARN or capacity block id) and have not ended, in id order."""
    return [
        other
        for other in ports.ledger.brought_by(reference)
        if other != besides and ports.ledger.current_state(other) not in FINAL_STATES
    ]


def _nobody_elses(request: ReservationRequest, ports: Ports, field: str, found: BroughtReservation) -> None:
    """Refuse a reservation the orchestrator bought for another request, or one another live request uses."""
    if found.tagged_for is not None and found.tagged_for != request.id:
        raise _refuse(
            field,
            f"{found.name} was bought by this orchestrator for request {found.tagged_for}: it is that "
            f"request's to serve and release; bring a reservation bought outside the orchestrator, or leave "
            f"{field} out to buy one",
        )
    others = live_claimants(ports, str(request.brought), besides=request.id)
    if others:
        raise _refuse(
            field,
            f"{found.name} is already in use by request {others[0]}, which has not ended: one request at a "
            f"time serves on a brought reservation; wait until {others[0]} is released or name another",
        )


def _refuse(field: str, message: str) -> BroughtReservationRefused:
    return BroughtReservationRefused([FieldError(field, message + "; nothing was bought")])


def _brought_plan(request: ReservationRequest, ports: Ports) -> BroughtReservation:
    field, arn = "training_plan_arn", str(request.training_plan_arn)
    region, name = str(request.brought_plan_region), str(request.brought_plan_name)
    plan = ports.sagemaker(region).describe_training_plan(name)
    if plan is None or plan.arn != arn:
        raise _refuse(
            field,
            f"no training plan {arn} exists in this account (DescribeTrainingPlan {name} in {region}"
            + (f" finds {plan.arn}" if plan is not None else " finds none")
            + "): check the ARN, or ask its owner to share a plan of this account",
        )
    if BROUGHT_TARGET not in plan.target_resources:
        raise _refuse(
            field,
            f"training plan {name} reserves capacity for {', '.join(plan.target_resources) or 'nothing'}, "
            "not SageMaker endpoints (TargetResources endpoint): name a plan bought for endpoints",
        )
    if plan.start_time is None or plan.end_time is None:  # pragma: no cover - AWS always says
        raise _refuse(field, f"training plan {name} has no start or end time yet: try again later")
    return BroughtReservation(
        arn=plan.arn,
        name=plan.name,
        region=region,
        availability_zone=None,
        start_time=plan.start_time,
        end_time=plan.end_time,
        instance_type=str(plan.instance_type),
        instance_count=plan.total_instance_count or 0,
        status=plan.status,
        tagged_for=(ports.sagemaker(region).resource_tags(plan.arn) or {}).get(TAG_REQUEST_ID),
    )


def _brought_block(request: ReservationRequest, ports: Ports) -> BroughtReservation:
    field, cr_id = "capacity_reservation_id", str(request.capacity_reservation_id)
    for region in request.regions:
        block = ports.ec2(region).describe_capacity_reservation(cr_id)
        if block is None:
            continue
        if block.start_time is None or block.end_time is None:
            raise _refuse(
                field,
                f"capacity reservation {cr_id} has no end date: it is not a capacity block; name a capacity "
                "block (ReservationType capacity-block)",
            )
        return BroughtReservation(
            arn=block.arn,
            name=block.reservation_id,
            region=region,
            availability_zone=block.availability_zone,
            start_time=block.start_time,
            end_time=block.end_time,
            instance_type=block.instance_type,
            instance_count=block.total_instance_count,
            status=block.state,
            tagged_for=block.tags.get(TAG_REQUEST_ID),
        )
    raise _refuse(
        field,
        f"no capacity block {cr_id} exists in this account in {', '.join(request.regions)} "
        "(DescribeCapacityReservations): check the id, or add the region it is in to regions",
    )


def _fits(request: ReservationRequest, field: str, found: BroughtReservation) -> BroughtReservation:
    """``found`` if its type, count and window fit ``request`` (see :func:`brought_reservation`)."""
    what = f"{found.name} ({found.instance_count} x {found.instance_type})"
    if found.instance_type != request.instance_type:
        raise _refuse(
            "instance_type",
            f"{field} {what} holds {found.instance_type}, not {request.instance_type}: set instance_type "
            f"to {found.instance_type} (and fit the models to it) or name a reservation of "
            f"{request.instance_type}",
        )
    if found.instance_count < request.instance_count:
        raise _refuse(
            "instance_count",
            f"{field} {what} holds {found.instance_count} instance(s), fewer than instance_count "
            f"{request.instance_count}: lower instance_count to {found.instance_count} or name a larger one",
        )
    if found.end_time > request.latest_end:
        raise _refuse(
            "latest_end",
            f"{field} {what} ends {iso_z(found.end_time)}, after latest_end {iso_z(request.latest_end)}: "
            f"move latest_end to {iso_z(found.end_time)} or later",
        )
    usable_from = max(found.start_time, request.earliest_start)
    if usable_from + timedelta(hours=request.duration_hours) > found.end_time:
        hours = max(0, int((found.end_time - usable_from).total_seconds() // 3600))
        raise _refuse(
            "duration_hours",
            f"{field} {what} runs {iso_z(found.start_time)} to {iso_z(found.end_time)}: from "
            f"{iso_z(usable_from)} it holds {hours} h, less than duration_hours {request.duration_hours}: "
            f"lower duration_hours to {hours // 24 * 24} or less, or start earlier",
        )
    return found


def region_problems(request: ReservationRequest, ports: Ports, region: str) -> list[FieldError]:
    """What the request names that does not exist (or may not be used) in ``region``: ``model_name``
    models (``DescribeModel``), the launch template and its version (``DescribeLaunchTemplateVersions``)
    and its instance role; [] when the capacity can be used there.

    Raises:
        RetryableAwsError: throttling/5xx after retries.
    """
    problems: list[FieldError] = []
    sagemaker = None
    for index, model in enumerate(request.models):
        if model.model_name is None:
            continue
        sagemaker = sagemaker or ports.sagemaker(region)
        if not sagemaker.model_exists(model.model_name):
            problems.append(
                FieldError(
                    f"models.{index}.model_name",
                    f"SageMaker model {model.model_name!r} does not exist in {region}: create it there "
                    "(CreateModel) or give image and model_data_url instead",
                )
            )
    if platform(request.platform).launches_instances and request.launch_template is not None:
        version = ports.ec2(region).launch_template_version(request.launch_template.as_aws())
        problem = None
        if version is None:
            problem = (
                f"launch template {_template(request)} does not exist in {region} "
                "(DescribeLaunchTemplateVersions; launch templates are regional): create it there, or fix "
                "its id, name or version"
            )
        elif version.instance_profile is not None:
            problem = _role_problem(request, ports, version.instance_profile, region)
        if problem is not None:
            problems.append(FieldError("launch_template", problem))
    return problems


def not_deployable(request: ReservationRequest, blocked: Mapping[str, list[FieldError]]) -> NotDeployable:
    """The error for the problems of each region in ``blocked`` (``ModelNotFound`` when only models are
    missing, else ``LaunchTemplateNotFound``); its message says that nothing was bought."""
    sentences = []
    for region, problems in blocked.items():
        models = [
            str(request.models[int(p.field.split(".")[1])].model_name)
            for p in problems
            if p.field.startswith("models.")
        ]
        others = [p.message for p in problems if not p.field.startswith("models.")]
        if models:
            sentences.append(
                f"SageMaker model(s) {', '.join(models)} do not exist in {region}, where the capacity would "
                "be bought or launched: create them there (CreateModel) or give image and model_data_url "
                "instead"
            )
        sentences.extend(others)
    message = "; ".join(sentences) + "; nothing was bought: fix the request and send it again."
    every = [p for problems in blocked.values() for p in problems]
    if all(p.field.startswith("models.") for p in every):
        return ModelNotFound(message, every)
    return LaunchTemplateNotFound(message, every)


def require_deployable(request: ReservationRequest, ports: Ports, region: str) -> None:
    """Refuse to buy or launch in ``region`` what could not be used there (see :func:`region_problems`).

    Raises:
        ModelNotFound: a ``model_name`` is missing in ``region``.
        LaunchTemplateNotFound: the launch template or its version is missing there, or its instance role
            is not allowed.
        RetryableAwsError: throttling/5xx after retries.
    """
    problems = region_problems(request, ports, region)
    if problems:
        raise not_deployable(request, {region: problems})


def deployable_offerings(
    request: ReservationRequest, ports: Ports, offerings: Sequence[Offering]
) -> tuple[list[Offering], dict[str, list[FieldError]]]:
    """The offerings of the regions where the capacity could be used (:func:`region_problems`, checked in
    each region that has a feasible offering), and the problems of the other regions.

    Raises:
        ModelNotFound, LaunchTemplateNotFound: every region with a feasible offering has problems.
        RetryableAwsError: throttling/5xx after retries.
    """
    regions = [r for r in request.regions if any(o.feasible and o.region == r for o in offerings)]
    blocked = {r: found for r in regions if (found := region_problems(request, ports, r))}
    if regions and len(blocked) == len(regions):
        raise not_deployable(request, blocked)
    return [o for o in offerings if o.region not in blocked], blocked


def not_considered(blocked: Mapping[str, list[FieldError]]) -> str:
    """The sentence saying which regions' offerings were left out, and why."""
    return (
        "Not considered: "
        + "; ".join(
            f"{region} ({'; '.join(p.message for p in problems)})" for region, problems in blocked.items()
        )
        + "."
    )
