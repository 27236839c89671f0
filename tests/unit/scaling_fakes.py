"""In-memory Application Auto Scaling and CloudWatch alarms for unit tests (the ports of
:mod:`capacity.logic.sagemaker.scaling`), recording every call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from capacity.adapters.cloudwatch import AlarmState
from capacity.resources import AlarmSpec


@dataclass
class FakeAutoScaling:
    """Scalable targets {component: {"min", "max", "tags", "scale_in_suspended"}} and policies."""

    region: str
    targets: dict[str, dict[str, Any]] = field(default_factory=dict)
    policies: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def register_component(
        self, component_name: str, *, min_copies: int, max_copies: int, tags: Sequence[Mapping[str, str]]
    ) -> None:
        self.calls.append(("RegisterScalableTarget", component_name))
        target = self.targets.setdefault(component_name, {"scale_in_suspended": False})
        target.update(min=min_copies, max=max_copies, tags={t["Key"]: t["Value"] for t in tags})

    def suspend_scale_in(self, component_name: str, *, suspended: bool) -> None:
        self.calls.append(("SuspendScaleIn" if suspended else "ResumeScaleIn", component_name))
        self.targets[component_name]["scale_in_suspended"] = suspended

    def put_invocations_policy(
        self,
        component_name: str,
        *,
        policy_name: str,
        target_value: float,
        scale_in_cooldown: int,
        scale_out_cooldown: int,
    ) -> str:
        self.calls.append(("PutScalingPolicy", component_name))
        self.policies.setdefault(component_name, {})[policy_name] = {
            "target_value": target_value,
            "scale_in_cooldown": scale_in_cooldown,
            "scale_out_cooldown": scale_out_cooldown,
        }
        return f"arn:aws:autoscaling:{self.region}:123456789012:scalingPolicy:{policy_name}"

    def policy_names(self, component_name: str) -> list[str]:
        return sorted(self.policies.get(component_name, {}))

    def delete_policy(self, component_name: str, policy_name: str) -> bool:
        self.calls.append(("DeleteScalingPolicy", component_name))
        return self.policies.get(component_name, {}).pop(policy_name, None) is not None

    def deregister_component(self, component_name: str) -> bool:
        self.calls.append(("DeregisterScalableTarget", component_name))
        self.policies.pop(component_name, None)
        return self.targets.pop(component_name, None) is not None

    def registered(self, component_names: Sequence[str]) -> list[str]:
        return sorted(name for name in component_names if name in self.targets)


@dataclass
class FakeAlarms:
    """Alarms by name, their tags by ARN, their current ``states`` (what ``DescribeAlarms`` says; an alarm
    without one is ``INSUFFICIENT_DATA`` since the epoch), and ``metric_sums`` answered by metric name."""

    region: str
    alarms: dict[str, AlarmSpec] = field(default_factory=dict)
    states: dict[str, AlarmState] = field(default_factory=dict)
    metric_sums: dict[str, float] = field(default_factory=dict)
    sum_queries: list[tuple[str, datetime, datetime]] = field(default_factory=list)
    resets: list[tuple[str, str]] = field(default_factory=list)

    def alarm_state(self, name: str) -> AlarmState | None:
        if name not in self.alarms:
            return None
        return self.states.get(name, AlarmState("INSUFFICIENT_DATA", datetime.fromtimestamp(0, UTC)))

    def arn(self, name: str) -> str:
        return f"arn:aws:cloudwatch:{self.region}:123456789012:alarm:{name}"

    def put_alarm(self, spec: AlarmSpec) -> None:
        self.alarms[spec.name] = spec

    def alarm_names(self, prefix: str) -> list[str]:
        return sorted(name for name in self.alarms if name.startswith(prefix))

    def delete_alarms(self, names: Sequence[str]) -> None:
        for name in names:
            self.alarms.pop(name, None)

    def reset_alarm(self, name: str, reason: str) -> None:
        self.resets.append((name, reason))
        previous = self.alarm_state(name)
        if previous is not None:  # SetAlarmState: OK from now on (a millisecond later, here)
            self.states[name] = AlarmState("OK", previous.updated + timedelta(milliseconds=1))

    def alarm_tags(self, arn: str) -> dict[str, str] | None:
        for name, spec in self.alarms.items():
            if self.arn(name) == arn:
                return {t["Key"]: t["Value"] for t in spec.tags}
        return None

    def metric_sum(
        self,
        *,
        metric_name: str,
        dimensions: Mapping[str, str],
        start: datetime,
        end: datetime,
        period: int = 60,
        namespace: str = "AWS/SageMaker",
    ) -> float:
        self.sum_queries.append((metric_name, start, end))
        return self.metric_sums.get(metric_name, 0.0)


@dataclass
class ScalingWorld:
    """One fake of each per region (``autoscaling`` and ``alarms`` are the ``Ports`` factories)."""

    by_region: dict[str, tuple[FakeAutoScaling, FakeAlarms]] = field(default_factory=dict)

    def _pair(self, region: str) -> tuple[FakeAutoScaling, FakeAlarms]:
        if region not in self.by_region:
            self.by_region[region] = (FakeAutoScaling(region), FakeAlarms(region))
        return self.by_region[region]

    def autoscaling(self, region: str, *_client: Any) -> FakeAutoScaling:
        """Stands in for ``AutoScalingAdapter(region, client)`` (the client is ignored)."""
        return self._pair(region)[0]

    def alarms(self, region: str, *_client: Any) -> FakeAlarms:
        """Stands in for ``AlarmsAdapter(region, client)`` (the client is ignored)."""
        return self._pair(region)[1]
