"""Step 2, ``search_offerings``: search one region's training plan offerings and store them.

``SearchTrainingPlanOfferings`` matches the duration exactly (a 36 h search finds nothing even when 24 h
and 48 h offerings exist, AWS_FACTS.md), so the requested duration and the nearest other whole-day
durations (one day shorter and longer) are searched and merged; when nothing feasible is found and more
than one instance was asked for, half the count is searched too, for the alternatives message. A
``ResourceLimitExceeded`` is a quota problem, reported in the result rather than raised.

A ``platform`` ``ec2`` request searches ``DescribeCapacityBlockOfferings`` instead (:func:`search_blocks`):
the requested duration and every other capacity block duration that fits in the window, every page.
"""

from __future__ import annotations

from capacity.contracts.finding import SearchInput, SearchOutput
from capacity.errors import CapacityUnavailable, QuotaExceeded
from capacity.logic.steps.common import load_request
from capacity.offerings import Offering
from capacity.platforms import platform
from capacity.ports import Ec2Port, Ports, SageMakerPort
from capacity.ranking import normalise_block_offering, normalise_offering
from capacity.request import (
    MAX_DURATION_HOURS,
    MIN_DURATION_HOURS,
    ReservationRequest,
    capacity_block_durations,
)


def candidate_durations(request: ReservationRequest) -> list[int]:
    """The requested duration first, then one day shorter and one day longer (within 24..4368 h)."""
    durations = [request.duration_hours]
    for other in (request.duration_hours - 24, request.duration_hours + 24):
        if MIN_DURATION_HOURS <= other <= MAX_DURATION_HOURS:
            durations.append(other)
    return durations


def search_plans(
    sagemaker: SageMakerPort, request: ReservationRequest, *, duration_hours: int, count: int
) -> list[Offering]:
    """One ``SearchTrainingPlanOfferings`` of ``count`` x the request's type for ``duration_hours`` in the
    request's window, normalised (feasible or not).

    Raises:
        QuotaExceeded, RetryableAwsError: from the search.
    """
    raw = sagemaker.search_training_plan_offerings(
        instance_type=request.instance_type,
        instance_count=count,
        start_after=request.earliest_start,
        end_before=request.latest_end,
        duration_hours=duration_hours,
    )
    found = (
        normalise_offering(
            item,
            region=sagemaker.region,
            request=request,
            searched_duration_hours=duration_hours,
            searched_count=count,
        )
        for item in raw
    )
    return [offering for offering in found if offering is not None]


def block_durations(request: ReservationRequest) -> list[int]:
    """The requested duration first, then every other capacity block duration that fits in the window
    (24-hour steps to 14 days, then 7-day steps), nearest to the requested one first."""
    window_hours = int((request.latest_end - request.earliest_start).total_seconds() // 3600)
    others = [h for h in capacity_block_durations(window_hours) if h != request.duration_hours]
    return [request.duration_hours, *sorted(others, key=lambda h: (abs(h - request.duration_hours), h))]


def search_block_duration(ec2: Ec2Port, request: ReservationRequest, duration_hours: int) -> list[Offering]:
    """One paginated ``DescribeCapacityBlockOfferings`` of the request's count and type for
    ``duration_hours`` in the request's window, normalised (feasible or not).

    Raises:
        QuotaExceeded, CapacityUnavailable, RetryableAwsError: from the search.
    """
    raw = ec2.describe_capacity_block_offerings(
        instance_type=request.instance_type,
        instance_count=request.instance_count,
        start_after=request.earliest_start,
        end_before=request.latest_end,
        duration_hours=duration_hours,
    )
    found = (
        normalise_block_offering(
            item,
            region=ec2.region,
            request=request,
            searched_duration_hours=duration_hours,
            searched_count=request.instance_count,
        )
        for item in raw
    )
    return [offering for offering in found if offering is not None]


def search_blocks(ec2: Ec2Port, request: ReservationRequest) -> tuple[list[Offering], str | None]:
    """Every capacity block offering of ``request`` in ``ec2.region``: one paginated
    ``DescribeCapacityBlockOfferings`` per duration of :func:`block_durations`.

    Returns:
        The normalised offerings (feasible or not) and the quota error, if a search hit one.
    """
    offerings: list[Offering] = []
    for duration in block_durations(request):
        try:
            offerings.extend(search_block_duration(ec2, request, duration))
        except QuotaExceeded as exc:
            return offerings, str(exc)
        except CapacityUnavailable:
            continue  # no capacity for this duration: the others may have some
    return offerings, None


def find_offerings(
    sagemaker: SageMakerPort, request: ReservationRequest
) -> tuple[list[Offering], str | None]:
    """Every offering of one region for ``request``, deduplicated (feasible or not), and its quota error.

    Searches the requested duration and its neighbours (:func:`candidate_durations`), then half the count
    when nothing feasible was found. Stores nothing (the workflow step and the dry run both use it).

    Returns:
        ``(offerings, quota_error)``: ``quota_error`` is the ``ResourceLimitExceeded`` message, or None.

    Raises:
        RetryableAwsError: throttling/5xx that outlasted botocore's retries.
    """
    offerings: list[Offering] = []
    quota_error: str | None = None
    for duration in candidate_durations(request):
        try:
            offerings.extend(
                search_plans(sagemaker, request, duration_hours=duration, count=request.instance_count)
            )
        except QuotaExceeded as exc:
            quota_error = str(exc)
            break  # the same count hits the same quota for every duration
    if request.instance_count > 1 and not any(o.feasible for o in offerings):
        try:
            offerings.extend(
                search_plans(
                    sagemaker,
                    request,
                    duration_hours=request.duration_hours,
                    count=request.instance_count // 2,
                )
            )
        except QuotaExceeded as exc:
            quota_error = quota_error or str(exc)
    unique = {offering.key: offering for offering in offerings}
    return list(unique.values()), quota_error


def region_offerings(
    ports: Ports, region: str, request: ReservationRequest
) -> tuple[list[Offering], str | None]:
    """Every offering of ``region`` for ``request`` on its platform (capacity blocks for ``ec2``, training
    plans otherwise), deduplicated, and the quota error if a search hit one. Stores nothing. A SageMaker type
    without training plans (``ml.g6.*``) finds nothing without calling AWS.

    Raises:
        RetryableAwsError: throttling/5xx that outlasted botocore's retries.
    """
    runs_on = platform(request.platform)
    if runs_on.capacity_blocks:
        blocks, quota_error = search_blocks(ports.ec2(region), request)
        return list({offering.key: offering for offering in blocks}.values()), quota_error
    if not runs_on.reserves(request.instance_type):
        # ml.g6.* (on-demand-first only): SearchTrainingPlanOfferings would answer ValidationException
        return [], None
    return find_offerings(ports.sagemaker(region), request)


def search_offerings(step: SearchInput, ports: Ports) -> SearchOutput:
    """Search ``step.region`` for the request's offerings and store them in OFFERINGS_TABLE.

    Returns:
        How many offerings were stored, how many are feasible, and the quota error (if any).

    Raises:
        ReservationNotFound: the request is not recorded.
        RetryableAwsError: throttling/5xx that outlasted botocore's retries.
    """
    request = load_request(ports, step.request_id)
    offerings, quota_error = region_offerings(ports, step.region, request)
    ports.offerings.put_many(request.id, offerings, look=step.look)
    return SearchOutput(
        region=step.region,
        count=len(offerings),
        feasible=sum(1 for o in offerings if o.feasible),
        quota_error=quota_error,
    )
