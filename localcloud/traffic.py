"""Traffic replay: end users calling the reservation's inference components, on the virtual clock.

Over 400 lines: one replay (profile, callers, the chain followed across a hand-over) stepping on one clock.

A :class:`TrafficProfile` (a JSON file in ``events/``, e.g. ``events/traffic_two_models.json``) gives, for
each model, its request rate in requests per minute for each hour of the UTC day. Seed 004's example is two
variants of one model, one busy 00:00-11:59 UTC (European visitors) and the other 12:00-23:59 UTC
(American visitors).

:class:`TrafficReplay` is a :class:`~localcloud.contracts.Ticker` registered with the cloud's clock, so it
runs in discrete virtual time without busy loops:

1. **Discovery.** It waits until an inference component for each model of the profile is ``InService``
   (a component named ``<model>`` or ``...-<model>``, as the application names them), then reads each
   component's endpoint and the reservation it belongs to (the ``capacity-orchestrator:request-id`` tag).
2. **Batches.** Every ``batch_minutes`` (aligned on the UTC clock) each model with a non-zero rate gets one
   batch of ``rate x batch_minutes`` requests. One of them is a real SageMaker Runtime ``InvokeEndpoint``
   call with ``InferenceComponentName`` (the emulator answers it and writes its CloudWatch datapoints, or
   refuses it for lack of capacity and writes a ``NoCapacityInvocationFailures`` datapoint): through boto3
   and the dispatcher when fault rules are set, where faults are drawn, else handed to the emulator
   directly, which answers the same without the wire. The other ``n - 1`` requests of the batch would get
   the same answer (the emulator's capacity does not depend on concurrency), so instead of sending them one
   by one the replay writes, next to each datapoint the real call produced, one CloudWatch *statistic set*
   (``SampleCount n - 1``, ``Sum value x (n - 1)``, ``Minimum = Maximum = value``) at the same timestamp.
   Alarms (``Sum`` over 60 s) and target tracking then see exactly what ``n`` calls would have produced.
   Requests refused for lack of capacity (``ValidationError`` "... has no capacity to process this request")
   are counted as failures, per model and hour.
3. **Sampling.** Every ``sample_minutes`` it records each model's ``CurrentCopyCount``
   (``DescribeInferenceComponent``) and the endpoint's ``CurrentInstanceCount`` (``DescribeEndpoint``),
4. **Following the endpoint parameter.** When the application names the endpoint in an SSM parameter (a
   ``/capacity-orchestrator/.../endpoint`` whose JSON value names the endpoint found, issue 17), the replay
   reads it as a client would: every ``refresh_batches`` batches and after any failed request. When it
   names another endpoint (a roll-over: maybe in another region), the replay moves there and records a
   :class:`Switch` with the requests that failed on the old one meanwhile. It learns of a switch only that
   way: it keeps sending to the old endpoint until it fails or the next read, as a client would.
5. **End.** When a component or the endpoint the parameter names (or, without one, the one found) leaves
   service (the release deletes them), the replay stops: the last sample closes the series (instances and
   copies 0), nothing more is sent, and the components' Application Auto Scaling activities are read
   (``DescribeScalingActivities``). While the parameter still names the endpoint that left (a chain whose
   next reservation is not in service yet: a hand-over gap), clients keep reading it: their requests fail
   (``EndpointNotInService``, counted at the switch) until it names the next endpoint; the replay ends as of
   the moment the endpoint left when the parameter is deleted instead, or after :data:`GAP_PATIENCE`.

The replay's own reads (discovery, samples, activities) are exempt from injected faults (they are the
observer, not the application: the emulator answers them directly); ``InvokeEndpoint`` calls are not
(they stand for the end users, and an ``insufficient_capacity`` fault on ``InvokeEndpoint`` is how a test
makes them fail).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from localcloud.contracts import AwsError, Due
from localcloud.emulator import cloudwatch

REQUEST_ID_TAG = "capacity-orchestrator:request-id"
PARAMETER_PATH = "/capacity-orchestrator/"
"""Where the application names its endpoints for clients (SSM parameters ``.../endpoint``, issue 17)."""
"""The tag the application puts on every resource of a reservation (its request id)."""

NO_CAPACITY_PHRASE = "has no capacity to process this request"
"""What SageMaker Runtime says when a component has no running copy (the request is a failure to count)."""

_LIVE = frozenset({"InService", "Updating"})
GAP_PATIENCE = timedelta(hours=6)
"""How long clients keep reading an endpoint parameter that names an endpoint no longer in service (the gap
between a reservation's release and its successor's endpoint in service) before the replay ends."""


class ModelTraffic(BaseModel):
    """The traffic of one model.

    Attributes:
        model: the model's name in the reservation request (its component is ``<model>`` or ``...-<model>``).
        requests_per_minute: 24 rates, requests per minute during each UTC hour (index 0 = 00:00-00:59).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(min_length=1)
    requests_per_minute: tuple[int, ...]

    @field_validator("requests_per_minute")
    @classmethod
    def _day(cls, rates: tuple[int, ...]) -> tuple[int, ...]:
        if len(rates) != 24:
            raise ValueError(f"give 24 hourly rates (00:00 to 23:00 UTC), not {len(rates)}")
        if any(rate < 0 for rate in rates):
            raise ValueError("rates are requests per minute: 0 or more")
        return rates


class TrafficProfile(BaseModel):
    """Per-model request rates over the UTC day (loaded from JSON with :meth:`load`).

    Attributes:
        description: what the profile stands for (printed by the CLI).
        batch_minutes: minutes of traffic per batch (a divisor of 60: batches never straddle an hour);
            1 keeps CloudWatch's one-minute periods exact.
        sample_minutes: virtual minutes between two samples of copies and instances (a divisor of 60).
        models: one entry per model (distinct names).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    batch_minutes: int = Field(default=1, ge=1, le=60)
    sample_minutes: int = Field(default=5, ge=1, le=60)
    models: tuple[ModelTraffic, ...] = Field(min_length=1)

    @field_validator("batch_minutes", "sample_minutes")
    @classmethod
    def _divides_hour(cls, minutes: int) -> int:
        if 60 % minutes:
            raise ValueError(f"{minutes} does not divide 60 (use 1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30 or 60)")
        return minutes

    @model_validator(mode="after")
    def _distinct(self) -> TrafficProfile:
        names = Counter(item.model for item in self.models)
        repeated = sorted(name for name, count in names.items() if count > 1)
        if repeated:
            raise ValueError(f"models listed twice: {', '.join(repeated)}")
        return self

    @classmethod
    def load(cls, path: Path) -> TrafficProfile:
        """Read a profile from a JSON file.

        Raises:
            ValueError: unreadable, not JSON, or not a valid profile (the message names the field).
        """
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"{path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"{path}: not a traffic profile: {exc}") from exc

    def rate(self, model: str, at: datetime) -> int:
        """Requests per minute of ``model`` at the UTC instant ``at``.

        Raises:
            KeyError: the model is not in the profile.
        """
        for item in self.models:
            if item.model == model:
                return item.requests_per_minute[at.astimezone(UTC).hour]
        raise KeyError(model)

    def batch_size(self, model: str, start: datetime) -> int:
        """Requests of ``model`` in the batch starting at ``start`` (rate x ``batch_minutes``)."""
        return self.rate(model, start) * self.batch_minutes


@dataclass(frozen=True)
class Sample:
    """Copies and instances at one virtual instant.

    Attributes:
        at: tz-aware UTC.
        copies: model -> ``CurrentCopyCount`` of its inference component.
        desired: model -> ``DesiredCopyCount``.
        instances: the endpoint variant's ``CurrentInstanceCount``.
    """

    at: datetime
    copies: dict[str, int]
    desired: dict[str, int]
    instances: int


@dataclass(frozen=True)
class Deployment:
    """What the replay found: the reservation (request id), endpoint, variant, instance type, and per model
    its inference component and per-copy needs (accelerators, CPU cores, memory MiB), in ``region``."""

    reservation: str
    endpoint: str
    variant: str
    instance_type: str
    components: dict[str, str]
    requirements: dict[str, tuple[float, float, float]]
    region: str = ""


@dataclass(frozen=True)
class Switch:
    """The replay moved to the endpoint the parameter names now (a roll-over): when, from which reservation
    and endpoint to which, and how many requests failed on the old one before it knew (what was in flight
    at the switch)."""

    at: datetime
    from_reservation: str
    to_reservation: str
    from_endpoint: str
    to_endpoint: str
    failed: int


@dataclass
class HourCount:
    """Requests of one model in one UTC hour: ``sent`` = ``served`` + ``failed`` (no capacity)."""

    sent: int = 0
    served: int = 0
    failed: int = 0


@dataclass
class TrafficResult:
    """Everything the replay observed (read it after the run; :mod:`localcloud.report` turns it into the
    report).

    Attributes:
        deployment: None until the components were found; then the first one found (the report's).
        current: the deployment the requests go to now (the last one switched to).
        deployments: every deployment replayed on, first to current.
        switches: every move to another endpoint the parameter named, oldest first.
        started, ended: the window of traffic (virtual UTC; ``ended`` None while it runs).
        hours: (model, start of the UTC hour) -> counts.
        samples: oldest first; the last one (at ``ended``) has zero copies and instances.
        activities: Application Auto Scaling activities of the components, oldest first, as
            ``DescribeScalingActivities`` answered them (timestamps tz-aware UTC).
        errors: other ``InvokeEndpoint`` errors (code -> count), not counted as requests.
    """

    deployment: Deployment | None = None
    current: Deployment | None = None
    deployments: list[Deployment] = field(default_factory=list)
    switches: list[Switch] = field(default_factory=list)
    started: datetime | None = None
    ended: datetime | None = None
    hours: dict[tuple[str, datetime], HourCount] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    activities: list[dict[str, Any]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def totals(self, model: str) -> HourCount:
        """Sent, served and failed requests of ``model`` over the whole replay."""
        total = HourCount()
        for (name, _hour), count in self.hours.items():
            if name == model:
                total.sent += count.sent
                total.served += count.served
                total.failed += count.failed
        return total


def _refusal(error: AwsError | ClientError) -> tuple[str, str]:
    """(code, message) of a refused call, from the emulator or through boto3."""
    if isinstance(error, AwsError):
        return error.code, error.message
    detail = error.response.get("Error", {})
    return str(detail.get("Code", "Unknown")), str(detail.get("Message", ""))


def _floor(at: datetime, minutes: int) -> datetime:
    """``at`` rounded down to a multiple of ``minutes`` since midnight UTC."""
    at = at.astimezone(UTC)
    midnight = at.replace(hour=0, minute=0, second=0, microsecond=0)
    step = timedelta(minutes=minutes)
    return midnight + step * ((at - midnight) // step)


def _next_boundary(now: datetime, minutes: int) -> datetime:
    """The first multiple of ``minutes`` (since midnight UTC) strictly after ``now``."""
    return _floor(now, minutes) + timedelta(minutes=minutes)


class TrafficReplay:
    """Replays a :class:`TrafficProfile` against the local cloud (see the module docstring).

    Args:
        cloud: a running :class:`localcloud.cloud.LocalCloud` (typed loosely: the cloud imports this
            module's callers, not the other way round).
        profile: the traffic.
        refresh_batches: how many batches the replay sends between two reads of the endpoint parameter.

    Register it with ``cloud.clock.add_ticker(replay)`` (or use :func:`attach`); read ``replay.result``.
    Its work is background: it never keeps ``run_until_idle`` going by itself.
    """

    def __init__(self, cloud: Any, profile: TrafficProfile, *, refresh_batches: int = 5) -> None:
        self.cloud = cloud
        self.profile = profile
        self.refresh_batches = refresh_batches
        self.result = TrafficResult()
        self.parameter: str | None = None
        """The SSM parameter naming the endpoint (None: the application names none; the replay stays)."""
        self._batches_since_read = 0
        self._failed_since_read = 0
        self._gap_since: datetime | None = None
        """When the endpoint in use left service while the parameter still named it (a hand-over gap)."""
        self._gap_lost = 0
        """Requests sent during that gap: failures (``EndpointNotInService``) once a successor takes over;
        forgotten when the chain ends instead (the traffic outlived the reservation, nothing was promised)."""
        # Set for real when the deployment is found (nothing is due before that).
        self._next_batch = self._next_sample = datetime.max.replace(tzinfo=UTC)
        self._clients: dict[str, Any] = {}

    # -- Ticker ---------------------------------------------------------------------------------------

    def next_due(self, now: datetime) -> Due | None:
        """The next batch or sample while traffic runs; before that, at once when every model's component is
        ``InService``, the next minute while some component is being created, and None when the replay has
        ended or no component exists."""
        if self.result.ended is not None:
            return None
        if self.result.deployment is None:
            if self._ready_components(now):
                return Due(now + timedelta(microseconds=1), foreground=False)
            if self._components_creating():
                # Components are coming: look again at the next minute. Nothing being created costs no
                # steps (a reservation that starts in a week is not polled for a week).
                return Due(_next_boundary(now, 1), foreground=False)
            return None
        if self._gap_since is not None:
            # A hand-over gap: clients read the parameter every minute until it names the next endpoint or
            # is deleted; this keeps the run going (at most GAP_PATIENCE), so the replay's end is seen.
            return Due(_next_boundary(now, 1), foreground=True)
        return Due(min(self._next_batch, self._next_sample), foreground=False)

    def advance(self, now: datetime) -> None:
        """Discover the deployment, send the batches and take the samples due at ``now``."""
        if self.result.ended is not None:
            return
        if self.result.deployment is None:
            ready = self._ready_components(now)
            if not ready:
                return
            self._discover(ready, now)
            return
        if not self._live(now) and not self._moved_on(now):
            if self._awaiting_successor(now):
                self._lose_batches(now)
                return
            self._finish(self._gap_since or now)
            return
        if now >= self._next_batch:
            batch = _floor(now, self.profile.batch_minutes)
            for item in self.profile.models:
                self._send(item.model, batch)
            self._next_batch = _next_boundary(now, self.profile.batch_minutes)
            self._batches_since_read += 1
            if self._failed_since_read or self._batches_since_read >= self.refresh_batches:
                self._read_parameter(now)
        if now >= self._next_sample:
            self._sample(now)
            self._next_sample = _next_boundary(now, self.profile.sample_minutes)

    def _deployment(self) -> Deployment:
        if self.result.current is None:
            raise RuntimeError("the traffic replay has not found the deployment yet")
        return self.result.current

    # -- discovery ------------------------------------------------------------------------------------

    def _client(self, service: str, region: str | None = None) -> Any:
        key = f"{service}@{region or self.cloud.region}"
        if key not in self._clients:
            self._clients[key] = self.cloud.client(service, region or self.cloud.region)
        return self._clients[key]

    def _region(self) -> str:
        deployment = self.result.current
        return deployment.region if deployment is not None and deployment.region else self.cloud.region

    def _observe(self, operation: str, *, region: str | None = None, **params: Any) -> dict[str, Any]:
        """A SageMaker read of the observer, answered by the emulator itself: the same answer as through
        boto3 (the emulator conforms it to the output shape), without the wire, and never faulted."""
        answer: dict[str, Any] = self.cloud.emulator.call(
            "sagemaker", operation, params, region=region or self._region()
        )
        return answer

    def _invoke(self, model: str) -> None:
        """One end user's ``InvokeEndpoint`` on ``model``'s component.

        Through boto3 and the dispatcher whenever faults may be injected (they are drawn there); without
        fault rules, straight to the emulator, which answers, writes the datapoints and refuses the same way.

        Raises:
            AwsError: the emulator's refusal (direct path).
            ClientError: the refusal through boto3.
        """
        deployment = self._deployment()
        body = json.dumps({"inputs": f"traffic replay: {model}", "parameters": {"max_new_tokens": 64}})
        params = {
            "EndpointName": deployment.endpoint,
            "InferenceComponentName": deployment.components[model],
            "ContentType": "application/json",
        }
        if not self.cloud.dispatcher.may_inject:
            self.cloud.emulator.call(
                "sagemaker-runtime",
                "InvokeEndpoint",
                {**params, "Body": body.encode()},
                region=self._region(),
            )
            return
        self._client("sagemaker-runtime", self._region()).invoke_endpoint(**params, Body=body)

    def _component_of(self, model: str, names: list[str]) -> str | None:
        matches = [name for name in names if name == model or name.endswith(f"-{model}")]
        return matches[0] if len(matches) == 1 else None

    def _components_creating(self) -> bool:
        emulator = getattr(self.cloud, "emulator", None)
        return emulator is not None and any(
            item.resource_type == "inference-component" and item.status == "Creating"
            for item in emulator.billable_resources(self.cloud.region)
        )

    def _ready_components(self, now: datetime) -> dict[str, str]:
        """model -> component name when every model of the profile has an ``InService`` component."""
        emulator = getattr(self.cloud, "emulator", None)
        if emulator is None:
            return {}
        names = [
            item.name
            for item in emulator.billable_resources(self.cloud.region)
            if item.resource_type == "inference-component" and item.status == "InService"
        ]
        found = {item.model: self._component_of(item.model, names) for item in self.profile.models}
        if any(name is None for name in found.values()):
            return {}
        return {model: name for model, name in found.items() if name is not None}

    def _discover(self, components: dict[str, str], now: datetime) -> None:
        deployment = self._describe(components, self.cloud.region)
        self.result.deployment = self.result.current = deployment
        self.result.deployments.append(deployment)
        self.result.started = now
        self._sample(now)
        # The first batch starts at the first whole batch boundary after the components are ready.
        self._next_batch = _next_boundary(now, self.profile.batch_minutes)
        self._next_sample = _next_boundary(now, self.profile.sample_minutes)
        self.cloud.timeline.add(
            "traffic",
            f"traffic replay started on endpoint {deployment.endpoint} for reservation "
            f"{deployment.reservation}: "
            + ", ".join(f"{model} -> {name}" for model, name in components.items()),
        )

    def _describe(self, components: dict[str, str], region: str) -> Deployment:
        """The deployment of ``components`` (model -> inference component) in ``region``."""
        described = {
            model: self._observe("DescribeInferenceComponent", region=region, InferenceComponentName=name)
            for model, name in components.items()
        }
        endpoints = {answer["EndpointName"] for answer in described.values()}
        if len(endpoints) != 1:
            raise RuntimeError(f"the profile's models are on several endpoints: {sorted(endpoints)}")
        endpoint = endpoints.pop()
        variant = str(next(iter(described.values()))["VariantName"])
        endpoint_answer = self._observe("DescribeEndpoint", region=region, EndpointName=endpoint)
        config = self._observe(
            "DescribeEndpointConfig", region=region, EndpointConfigName=endpoint_answer["EndpointConfigName"]
        )
        tags = self._observe("ListTags", region=region, ResourceArn=endpoint_answer["EndpointArn"])["Tags"]
        instance_type = next(
            str(item["InstanceType"])
            for item in config["ProductionVariants"]
            if item["VariantName"] == variant
        )
        reservation = next((tag["Value"] for tag in tags if tag["Key"] == REQUEST_ID_TAG), endpoint)
        requirements = {}
        for model, answer in described.items():
            compute = answer["Specification"]["ComputeResourceRequirements"]
            requirements[model] = (
                float(compute.get("NumberOfAcceleratorDevicesRequired") or 0),
                float(compute.get("NumberOfCpuCoresRequired") or 0),
                float(compute.get("MinMemoryRequiredInMb") or 0),
            )
        return Deployment(
            reservation=reservation,
            endpoint=endpoint,
            variant=variant,
            instance_type=instance_type,
            components=dict(components),
            requirements=requirements,
            region=region,
        )

    # -- the endpoint parameter ----------------------------------------------------------------------

    def _parameters(self) -> dict[str, dict[str, Any]]:
        """Every endpoint parameter under ``/capacity-orchestrator/`` (name -> its JSON value), in the stack's
        region, as a client's ``GetParametersByPath`` (recursive, without decryption) reads it.

        Answered by moto's SSM backend directly, all pages at once: the replay's reads are never faulted
        (it stands for clients that retry) and the driver thread is no principal IAM evaluates, so boto3
        and the dispatcher would only add their cost (a tenth of the demo's CPU when they did)."""
        from moto.ssm.models import ssm_backends  # noqa: PLC0415 - it imports moto.ec2: a second, when used

        backend = ssm_backends[self.cloud.account_id][self.cloud.region]
        found: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            page, token = backend.get_parameters_by_path(PARAMETER_PATH, True, None, next_token=token)
            for parameter in page:
                try:
                    value = json.loads(parameter.response_object(False, self.cloud.region)["Value"] or "")
                except ValueError:
                    continue
                if isinstance(value, dict):
                    found[str(parameter.name)] = value
            if not token:
                return found

    def _find_parameter(self, deployment: Deployment) -> str | None:
        """The parameter whose value names ``deployment``'s endpoint (None: the application names none)."""
        for name, value in self._parameters().items():
            if value.get("endpoint_name") == deployment.endpoint and value.get("region") == deployment.region:
                return name
        return None

    def _named(self) -> dict[str, Any] | None:
        """What the parameter names now (its JSON value), None without one. The parameter is looked for
        until found: the application writes it when the reservation is ready, maybe after the components
        the replay found came into service."""
        if self.parameter is None:
            self.parameter = self._find_parameter(self._deployment())
            if self.parameter is None:
                return None
            self.cloud.timeline.add(
                "traffic", f"traffic replay: clients read the endpoint from {self.parameter}"
            )
        return self._parameters().get(self.parameter)

    def _moved_on(self, now: datetime) -> bool:
        """The deployment in use left service: True when the parameter names another one (the replay goes
        on: it learns of the move when its next request fails or at its next read); False at the end."""
        named = self._named()
        current = self._deployment()
        return named is not None and (named.get("endpoint_name"), named.get("region")) != (
            current.endpoint,
            current.region,
        )

    def _read_parameter(self, now: datetime) -> None:
        """A client's read of the parameter: move to the endpoint it names if that is another one."""
        failed, self._failed_since_read, self._batches_since_read = self._failed_since_read, 0, 0
        named = self._named()
        current = self._deployment()
        if named is None or (named.get("endpoint_name"), named.get("region")) == (
            current.endpoint,
            current.region,
        ):
            return
        components = named.get("inference_components")
        if not isinstance(components, dict) or set(components) != set(current.components):
            return
        region = str(named.get("region") or self.cloud.region)
        successor = self._describe({str(k): str(v) for k, v in components.items()}, region)
        self.result.current = successor
        self.result.deployments.append(successor)
        gap = ""
        if self._gap_since is not None:
            self.result.errors["EndpointNotInService"] += self._gap_lost
            minutes = int((now - self._gap_since).total_seconds() // 60)
            gap = f" (nothing served them for {minutes} minute(s): a hand-over gap)"
            self._gap_since, self._gap_lost = None, 0
        self.result.switches.append(
            Switch(
                at=now,
                from_reservation=current.reservation,
                to_reservation=successor.reservation,
                from_endpoint=current.endpoint,
                to_endpoint=successor.endpoint,
                failed=failed,
            )
        )
        self.cloud.timeline.add(
            "traffic",
            f"traffic replay moved to endpoint {successor.endpoint} in {region} (reservation "
            f"{successor.reservation}), as {self.parameter} names it now; {failed} request(s) failed on "
            f"{current.endpoint} before it knew{gap}",
        )

    def _awaiting_successor(self, now: datetime) -> bool:
        """The endpoint in use left service but the parameter still names it (a chain whose next reservation
        is not in service yet): clients keep reading the parameter, for at most :data:`GAP_PATIENCE`. False
        when the parameter is gone (the chain ended) or the wait is over: the replay ends."""
        if self._named() is None:
            return False
        if self._gap_since is None:
            self._gap_since = now
        return now - self._gap_since <= GAP_PATIENCE

    def _lose_batches(self, now: datetime) -> None:
        """During a hand-over gap: the batches due fail (nothing serves them; counted as failed on the old
        endpoint at the switch), the copies and instances sampled are 0, and the parameter is read again."""
        if now >= self._next_batch:
            batch = _floor(now, self.profile.batch_minutes)
            lost = sum(self.profile.batch_size(item.model, batch) for item in self.profile.models)
            self._failed_since_read += lost
            self._gap_lost += lost
            self._next_batch = _next_boundary(now, self.profile.batch_minutes)
        self._read_parameter(now)
        if now >= self._next_sample:
            zero = dict.fromkeys(self._deployment().components, 0)
            self.result.samples.append(Sample(now, dict(zero), dict(zero), 0))
            self._next_sample = _next_boundary(now, self.profile.sample_minutes)

    def _live(self, now: datetime) -> bool:
        """True while the endpoint and every component are in service (the release has not begun)."""
        deployment = self._deployment()
        statuses = {
            (item.resource_type, item.name): item.status
            for item in self.cloud.emulator.billable_resources(self._region())
        }
        if statuses.get(("endpoint", deployment.endpoint)) not in _LIVE:
            return False
        return all(
            statuses.get(("inference-component", name)) in _LIVE for name in deployment.components.values()
        )

    # -- traffic --------------------------------------------------------------------------------------

    def _send(self, model: str, batch: datetime) -> None:
        """One batch of ``model``: one real ``InvokeEndpoint``, the rest as statistic sets."""
        size = self.profile.batch_size(model, batch)
        if size == 0:
            return
        metrics = cloudwatch.backend(self.cloud.account_id, self._region())
        before = len(metrics.metric_data)
        try:
            self._invoke(model)
            served = True
        except (AwsError, ClientError) as exc:
            self._failed_since_read += size  # a client reads the endpoint parameter again after a failure
            code, message = _refusal(exc)
            if NO_CAPACITY_PHRASE not in message:
                self.result.errors[code] += size
                return
            served = False
        written = list(metrics.metric_data[before:])
        if size > 1:
            self._replicate(metrics, written, size - 1)
        hour = batch.replace(minute=0, second=0, microsecond=0)
        count = self.result.hours.setdefault((model, hour), HourCount())
        count.sent += size
        if served:
            count.served += size
        else:
            count.failed += size

    @staticmethod
    def _replicate(metrics: Any, written: list[Any], copies: int) -> None:
        """Write, for each datapoint one call wrote, a statistic set standing for ``copies`` more calls."""
        for datum in written:
            value = float(datum.value)
            entry: dict[str, Any] = {
                "MetricName": datum.name,
                "Dimensions": [{"Name": item.name, "Value": item.value} for item in datum.dimensions],
                "Timestamp": datum.timestamp,
                "StatisticValues": {
                    "SampleCount": float(copies),
                    "Sum": value * copies,
                    "Minimum": value,
                    "Maximum": value,
                },
            }
            if getattr(datum, "unit", None):
                entry["Unit"] = datum.unit
            metrics.put_metric_data(datum.namespace, [entry])

    # -- observation ----------------------------------------------------------------------------------

    def _sample(self, now: datetime) -> None:
        deployment = self._deployment()
        copies: dict[str, int] = {}
        desired: dict[str, int] = {}
        for model, name in deployment.components.items():
            runtime = self._observe("DescribeInferenceComponent", InferenceComponentName=name).get(
                "RuntimeConfig", {}
            )
            copies[model] = int(runtime.get("CurrentCopyCount", 0))
            desired[model] = int(runtime.get("DesiredCopyCount", 0))
        answer = self._observe("DescribeEndpoint", EndpointName=deployment.endpoint)
        instances = sum(
            int(item.get("CurrentInstanceCount", 0))
            for item in answer.get("ProductionVariants", [])
            if item.get("VariantName") == deployment.variant
        )
        self.result.samples.append(Sample(now, copies, desired, instances))

    def close(self) -> None:
        """For a run that ends before the release: take a last sample now (if the last one is older) and
        read the activities, so the report covers the run. Nothing to do once the replay has ended."""
        if self.result.deployment is None or self.result.ended is not None:
            return
        now = self.cloud.now()
        if self._gap_since is not None or not self._live(now):  # the release began: it ended then
            self._finish(self._gap_since or now)
            return
        if not self.result.samples or self.result.samples[-1].at < now:
            self._sample(now)
        self.collect_activities()

    def collect_activities(self) -> None:
        """Read the components' Application Auto Scaling activities into ``result.activities`` (oldest
        first), of every deployment replayed on. Done once, when the replay ends (activities outlive the
        scalable target, as on AWS, where they are kept for six weeks); call it yourself to read them while
        the replay still runs."""
        found: list[dict[str, Any]] = []
        with self.cloud.dispatcher.exempt():
            for deployment in self.result.deployments:
                autoscaling = self._client("application-autoscaling", deployment.region or None)
                for name in deployment.components.values():
                    pages = autoscaling.get_paginator("describe_scaling_activities").paginate(
                        ServiceNamespace="sagemaker",
                        ResourceId=f"inference-component/{name}",
                        ScalableDimension="sagemaker:inference-component:DesiredCopyCount",
                    )
                    for page in pages:
                        found.extend(dict(activity) for activity in page.get("ScalingActivities", []))
        found.sort(key=lambda activity: activity["StartTime"])
        self.result.activities = found

    def _finish(self, now: datetime) -> None:
        """End the replay as of ``now`` (when the endpoint left service; the samples of a gap after it are
        dropped)."""
        deployment = self._deployment()
        self.collect_activities()
        zero = dict.fromkeys(deployment.components, 0)
        self.result.samples = [sample for sample in self.result.samples if sample.at < now]
        self.result.samples.append(Sample(now, dict(zero), dict(zero), 0))
        self.result.ended = now
        failed = sum(count.failed for count in self.result.hours.values())
        sent = sum(count.sent for count in self.result.hours.values())
        self.cloud.timeline.add(
            "traffic",
            f"traffic replay ended (the release began): {sent} requests, "
            f"{failed} failed for lack of capacity",
            at=now,
        )


def attach(cloud: Any, profile: TrafficProfile) -> TrafficReplay:
    """Create a :class:`TrafficReplay` and register it with the running cloud's clock."""
    replay = TrafficReplay(cloud, profile)
    cloud.clock.add_ticker(replay)
    return replay
