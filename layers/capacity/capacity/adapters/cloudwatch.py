"""CloudWatch adapter: the alarms that drive ``scale_components``, their current state, and the metric
sums it reports (CloudWatch API reference: ``PutMetricAlarm``, ``DescribeAlarms``, ``DeleteAlarms``,
``SetAlarmState``, ``ListTagsForResource``, ``GetMetricStatistics``).

Errors: throttling/5xx/timeouts after botocore's retries become :class:`~capacity.errors.RetryableAwsError`;
``ResourceNotFound`` on tags means the alarm is gone (None); the rest is raised as is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from capacity.adapters import clients
from capacity.adapters.clients import error_code
from capacity.resources import SAGEMAKER_NAMESPACE, AlarmSpec
from capacity.timeutil import as_utc

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

_DELETE_BATCH = 100  # DeleteAlarms takes at most 100 names


@dataclass(frozen=True)
class AlarmState:
    """An alarm's current state (``DescribeAlarms``): ``value`` ``OK``, ``ALARM`` or ``INSUFFICIENT_DATA``
    since ``updated`` (``StateUpdatedTimestamp``, UTC)."""

    value: str
    updated: datetime


class AlarmsAdapter:
    """CloudWatch alarms and metric statistics in one region (alarms live with their metric's region)."""

    def __init__(self, region: str, client: CloudWatchClient | None = None) -> None:
        self.region = region
        self._client = client or clients.cloudwatch(region)

    def _call[T](self, operation: str, function: Callable[[], T]) -> T:
        return clients.call(f"CloudWatch {operation} ({self.region})", function)

    def put_alarm(self, spec: AlarmSpec) -> None:
        """``PutMetricAlarm`` (an upsert by name; ``Tags`` apply when the alarm is created)."""
        self._call(
            "PutMetricAlarm",
            lambda: self._client.put_metric_alarm(
                AlarmName=spec.name,
                AlarmDescription=spec.description,
                ActionsEnabled=True,
                Namespace=spec.namespace,
                MetricName=spec.metric_name,
                Dimensions=[{"Name": key, "Value": value} for key, value in spec.dimensions.items()],
                Statistic=spec.statistic,  # type: ignore[arg-type]
                Period=spec.period,
                EvaluationPeriods=spec.evaluation_periods,
                DatapointsToAlarm=spec.evaluation_periods,
                Threshold=spec.threshold,
                ComparisonOperator=spec.comparison,  # type: ignore[arg-type]
                TreatMissingData=spec.treat_missing,
                Tags=[{"Key": tag["Key"], "Value": tag["Value"]} for tag in spec.tags],
            ),
        )

    def alarm_names(self, prefix: str) -> list[str]:
        """Names of the metric alarms whose name starts with ``prefix`` (all pages)."""
        names: list[str] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"AlarmNamePrefix": prefix, "AlarmTypes": ["MetricAlarm"]}
            if token:
                kwargs["NextToken"] = token
            page = self._call("DescribeAlarms", lambda kw=kwargs: self._client.describe_alarms(**kw))  # type: ignore[misc]
            names.extend(str(alarm["AlarmName"]) for alarm in page.get("MetricAlarms", []))
            token = page.get("NextToken")
            if not token:
                return names

    def alarm_state(self, name: str) -> AlarmState | None:
        """The alarm's current ``StateValue`` and ``StateUpdatedTimestamp``; None when it does not exist."""
        page = self._call(
            "DescribeAlarms",
            lambda: self._client.describe_alarms(AlarmNames=[name], AlarmTypes=["MetricAlarm"]),
        )
        found = [alarm for alarm in page.get("MetricAlarms", []) if alarm.get("AlarmName") == name]
        if not found:
            return None
        return AlarmState(str(found[0]["StateValue"]), as_utc(found[0]["StateUpdatedTimestamp"]))

    def delete_alarms(self, names: Sequence[str]) -> None:
        """``DeleteAlarms`` in batches of 100 (names that do not exist are ignored by CloudWatch)."""
        for start in range(0, len(names), _DELETE_BATCH):
            batch = list(names[start : start + _DELETE_BATCH])
            self._call("DeleteAlarms", lambda b=batch: self._client.delete_alarms(AlarmNames=b))  # type: ignore[misc]

    def reset_alarm(self, name: str, reason: str) -> None:
        """``SetAlarmState`` to ``OK``: CloudWatch evaluates the alarm again at its next period and sends a
        new state-change event if it still breaches."""
        self._call(
            "SetAlarmState",
            lambda: self._client.set_alarm_state(AlarmName=name, StateValue="OK", StateReason=reason[:1023]),
        )

    def alarm_tags(self, arn: str) -> dict[str, str] | None:
        """``ListTagsForResource`` of an alarm ARN as a dict; None when the alarm is gone."""
        try:
            answer = self._call(
                "ListTagsForResource", lambda: self._client.list_tags_for_resource(ResourceARN=arn)
            )
        except ClientError as exc:
            if error_code(exc) in ("ResourceNotFound", "ResourceNotFoundException"):
                return None
            raise
        return {str(tag["Key"]): str(tag["Value"]) for tag in answer.get("Tags", [])}

    def metric_sum(
        self,
        *,
        metric_name: str,
        dimensions: Mapping[str, str],
        start: datetime,
        end: datetime,
        period: int = 60,
        namespace: str = SAGEMAKER_NAMESPACE,
    ) -> float:
        """The ``Sum`` of a metric over ``[start, end)`` (UTC), from ``GetMetricStatistics``."""
        answer = self._call(
            "GetMetricStatistics",
            lambda: self._client.get_metric_statistics(
                Namespace=namespace,
                MetricName=metric_name,
                Dimensions=[{"Name": key, "Value": value} for key, value in dimensions.items()],
                StartTime=start,
                EndTime=end,
                Period=period,
                Statistics=["Sum"],
            ),
        )
        return float(sum(point.get("Sum", 0.0) for point in answer.get("Datapoints", [])))
