"""Access to moto's CloudWatch backend: where emulated metrics are written and alarms are read.

moto runs in the same process (the runtime starts ``mock_aws``); its CloudWatch backend for an account and
region is ``moto.cloudwatch.models.cloudwatch_backends[account][region]``. The backend is looked up on each
use, never cached, because ``mock_aws`` resets (replaces) backends when it starts. moto stores metric
timestamps as naive UTC datetimes; this module converts at the boundary.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends

from localcloud.emulator.common import as_utc

SAGEMAKER_NAMESPACE = "AWS/SageMaker"


def backend(account_id: str, region: str) -> Any:
    """moto's CloudWatch backend of (account, region), created on first use."""
    # moto's lookup (``BackendDict.__getitem__``) compares itself with every service's backend dict in use
    # on each call; one that holds the account is in that list (moto's reset empties both together), so an
    # existing backend is read straight from the dicts: the same object, at a fraction of the cost.
    accounts = dict.get(cloudwatch_backends, account_id)
    found = None if accounts is None else dict.get(accounts, region)
    return found if found is not None else cloudwatch_backends[account_id][region]


def backends(account_id: str) -> Iterator[tuple[str, Any]]:
    """Every CloudWatch backend moto has created for the account: (region, backend)."""
    accounts = dict.get(cloudwatch_backends, account_id)  # see backend()
    yield from list((accounts if accounts is not None else cloudwatch_backends[account_id]).items())


def put_metric(
    account_id: str,
    region: str,
    *,
    namespace: str,
    name: str,
    dimensions: dict[str, str],
    value: float,
    at: datetime,
    unit: str | None = None,
) -> None:
    """Write one datapoint, as ``PutMetricData`` would (moto's own ``put_metric_data``)."""
    datum: dict[str, Any] = {
        "MetricName": name,
        "Value": value,
        "Dimensions": [{"Name": key, "Value": item} for key, item in dimensions.items()],
        "Timestamp": as_utc(at).replace(tzinfo=None),
    }
    if unit is not None:
        datum["Unit"] = unit
    backend(account_id, region).put_metric_data(namespace, [datum])


@dataclass(frozen=True)
class Datapoint:
    """One stored value (``sample_count`` 1) or statistic set of a metric, timestamp tz-aware UTC."""

    at: datetime
    total: float
    minimum: float
    maximum: float
    sample_count: float


class MetricIndex:
    """The datapoints of moto's backends grouped by (namespace, name, dimensions), one index per backend (a
    region: alarms of two regions are evaluated in turn), each rebuilt only when its backend's list grows or
    is replaced (``metric_data`` is append-only between resets)."""

    def __init__(self) -> None:
        self._indexes: dict[int, _BackendIndex] = {}

    def series(
        self, cw_backend: Any, namespace: str, name: str, dimensions: dict[str, str]
    ) -> list[Datapoint]:
        """The datapoints of exactly this metric (same dimension set), oldest first (units are ignored)."""
        index = self._indexes.get(id(cw_backend))
        if index is None:
            index = self._indexes[id(cw_backend)] = _BackendIndex()
        data = cw_backend.metric_data
        # Asked for every alarm at every step: nothing to index while the backend's list is the same.
        if len(data) != index.seen or id(data) != index.source_id:
            index.refresh(cw_backend)
        return index.series.get((namespace, name, frozenset(dimensions.items())), [])


class _BackendIndex:
    """:class:`MetricIndex` of one backend."""

    def __init__(self) -> None:
        self.source_id: int | None = None
        self.seen = 0
        self.series: dict[tuple[str, str, frozenset[tuple[str, str]]], list[Datapoint]] = {}

    def refresh(self, cw_backend: Any) -> None:
        data: list[Any] = cw_backend.metric_data
        if id(data) != self.source_id or len(data) < self.seen:
            self.source_id = id(data)
            self.seen = 0
            self.series = {}
        unordered = set()
        for datum in data[self.seen :]:
            key = (
                datum.namespace,
                datum.name,
                frozenset((dimension.name, dimension.value) for dimension in datum.dimensions),
            )
            if hasattr(datum, "value"):
                point = Datapoint(as_utc(datum.timestamp), datum.value, datum.value, datum.value, 1.0)
            else:
                point = Datapoint(
                    as_utc(datum.timestamp), datum.sum, datum.min, datum.max, datum.sample_count
                )
            series = self.series.setdefault(key, [])
            if series and series[-1].at > point.at:
                unordered.add(key)
            series.append(point)
        # Datapoints mostly arrive in time order: sort only the series that a late datapoint disordered
        # (sorting every touched series at every step made a busy metric cost O(history) per datapoint).
        for key in unordered:
            self.series[key].sort(key=lambda point: point.at)
        self.seen = len(data)
