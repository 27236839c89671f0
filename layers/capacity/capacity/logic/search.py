"""Step 2, ``search_offerings``: search one region's training plan offerings and store them.

``SearchTrainingPlanOfferings`` matches the duration exactly (a 36 h search finds nothing even when 24 h
and 48 h offerings exist, AWS_FACTS.md), so the requested duration and the nearest other whole-day
durations (one day shorter and longer) are searched and merged; when nothing feasible is found and more
than one instance was asked for, half the count is searched too, for the alternatives message. A
``ResourceLimitExceeded`` is a quota problem, reported in the result rather than raised.
"""

from __future__ import annotations

from capacity.contracts import SearchInput, SearchOutput
from capacity.errors import QuotaExceeded
from capacity.logic.common import load_request
from capacity.models import MAX_DURATION_HOURS, MIN_DURATION_HOURS, Offering, ReservationRequest
from capacity.ports import Ports, SageMakerPort
from capacity.ranking import normalise_offering


def candidate_durations(request: ReservationRequest) -> list[int]:
    """The requested duration first, then one day shorter and one day longer (within 24..4368 h)."""
    durations = [request.duration_hours]
    for other in (request.duration_hours - 24, request.duration_hours + 24):
        if MIN_DURATION_HOURS <= other <= MAX_DURATION_HOURS:
            durations.append(other)
    return durations


def _search(
    sagemaker: SageMakerPort, request: ReservationRequest, *, duration_hours: int, count: int
) -> list[Offering]:
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
                _search(sagemaker, request, duration_hours=duration, count=request.instance_count)
            )
        except QuotaExceeded as exc:
            quota_error = str(exc)
            break  # the same count hits the same quota for every duration
    if request.instance_count > 1 and not any(o.feasible for o in offerings):
        try:
            offerings.extend(
                _search(
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


def search_offerings(step: SearchInput, ports: Ports) -> SearchOutput:
    """Search ``step.region`` for the request's offerings and store them in OFFERINGS_TABLE.

    Returns:
        How many offerings were stored, how many are feasible, and the quota error (if any).

    Raises:
        ReservationNotFound: the request is not recorded.
        RetryableAwsError: throttling/5xx that outlasted botocore's retries.
    """
    request = load_request(ports, step.request_id)
    offerings, quota_error = find_offerings(ports.sagemaker(step.region), request)
    ports.offerings.put_many(request.id, offerings)
    return SearchOutput(
        region=step.region,
        count=len(offerings),
        feasible=sum(1 for o in offerings if o.feasible),
        quota_error=quota_error,
    )
