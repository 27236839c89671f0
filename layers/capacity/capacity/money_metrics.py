"""The money as CloudWatch metrics (Powertools Metrics, embedded metric format; issue 16).

Namespace: env ``POWERTOOLS_METRICS_NAMESPACE`` (``CapacityOrchestrator`` in template.yaml). Each metric is
flushed at once (``single_metric``: one EMF line in the function's log, which CloudWatch turns into the
metric; no ``PutMetricData`` call, so no IAM grant): ``UsdCommitted`` (USD, an upfront fee bought) and
``UsdUsedOnDemandEquivalent`` (USD, what ran at the on-demand price) with dimension ``team``, and
``UtilisationPercent`` (used / reserved instance-hours, at the release). Emitting is best effort: a metric
never fails a step.
"""

from __future__ import annotations

import logging
import os
from decimal import Decimal

from aws_lambda_powertools.metrics import MetricUnit, single_metric

logger = logging.getLogger(__name__)
DEFAULT_NAMESPACE = "CapacityOrchestrator"


def emit(name: str, value: Decimal | float, *, unit: MetricUnit, team: str | None) -> None:
    """One metric ``name`` = ``value`` with dimension ``team`` (``none`` when the request had no team)."""
    namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or DEFAULT_NAMESPACE
    try:
        with single_metric(
            name=name,
            unit=unit,
            value=float(value),
            namespace=namespace,
            default_dimensions={"team": team or "none"},
        ):
            pass
    except Exception as exc:
        logger.warning("metric %s not emitted: %s", name, exc)


def committed(team: str | None, usd: Decimal) -> None:
    """An upfront fee was committed (USD)."""
    emit("UsdCommitted", usd, unit=MetricUnit.NoUnit, team=team)


def released(team: str | None, *, utilisation_percent: Decimal, on_demand_used_usd: Decimal | None) -> None:
    """A reservation was released: its utilisation and the on-demand value of what ran."""
    emit("UtilisationPercent", utilisation_percent, unit=MetricUnit.Percent, team=team)
    if on_demand_used_usd is not None:
        emit("UsdUsedOnDemandEquivalent", on_demand_used_usd, unit=MetricUnit.NoUnit, team=team)
