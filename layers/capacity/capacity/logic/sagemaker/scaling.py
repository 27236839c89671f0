"""Scaling inference components: what deployment sets up, what release tears down, and ``scale_components``
(seed 004; AWS_FACTS.md "Scaling inference components"; issue 4).

Over 400 lines: the spec table at the top and the alarm handler that follows it belong on one page.

Set up (:func:`setup_scaling`, by ``create_inference_components`` once every component is ``InService``):

* per component a scalable target (``MinCapacity`` = ``copies.min``, 0 included; ``MaxCapacity`` =
  ``copies.max``) and a target-tracking policy :func:`~capacity.naming.scaling_policy_name` on
  ``SageMakerInferenceComponentInvocationsPerCopy`` with the model's target value and cooldowns;
* per model that may scale to zero (``copies.min == 0``) two alarms: ``.../<model>/no-capacity``
  (``NoCapacityInvocationFailures`` Sum over 60 s >= 1: target tracking never scales out from zero) and
  ``.../<model>/idle`` (no ``Invocations`` for ``idle_minutes_before_zero`` minutes);
* with ``idle_policy.action == "release"`` the alarm ``.../idle-release`` (no endpoint ``Invocations`` for
  ``idle_hours`` hours).

Every alarm is named under :func:`~capacity.naming.alarm_prefix` and tagged with the request id, the
model and the alarm kind, so ``scale_components`` knows whose alarm fired and release finds them all.

:func:`scale_components` handles ``CloudWatch Alarm State Change`` events (source ``aws.cloudwatch``):

============== ======= ===============================================================================
alarm kind     state   action
============== ======= ===============================================================================
no-capacity    ALARM   copy count 0 -> 1 with target-tracking scale-in suspended, notify (refused
                       within the last hour of the reservation)
no-capacity    OK      after a scale-out from zero: resume scale-in, record and notify the cold start's
                       failed requests
idle           ALARM   copy count -> 0; before ``idle_minutes_before_zero`` minutes have passed since
                       ``READY`` (the alarm counts the minutes before it existed as idle: missing data
                       breaches) it is left in ``ALARM`` and an *idle check* is scheduled for then
idle-release   ALARM   put ``ReleaseRequested`` (reason ``idle``), notify; before ``idle_hours`` have passed
                       since ``READY``, an idle check is scheduled for then, the same way
============== ======= ===============================================================================

The idle check (:func:`idle_check`) is a one-time EventBridge Scheduler schedule putting ``IdleAlarmDue``
(``{request_id, alarm_name, region}``) on the application's bus at ``READY`` + the idle window; the same
function receives it. If the alarm is still in ``ALARM`` then, it is set to ``OK`` (``SetAlarmState``), so
CloudWatch evaluates it again at the next period, over a window that now lies wholly after ``READY``, and
tells us again if the model is still idle. So an alarm that fires early costs one schedule and one
``SetAlarmState``, not one reset (and one invocation) per period until the window has passed: the alarm
never flaps after ``READY``.

Anything else is ignored with a reason (other applications' alarms, other states, a component already at
the wanted count, a reservation already releasing).

EventBridge delivers at least once and may reorder (an idle ``ALARM`` delivered again 19 minutes later, an
``ALARM`` handled after its ``OK``), so the event is news to check, never an order: the alarm's current
state (``DescribeAlarms`` ``StateValue``/``StateUpdatedTimestamp``) must still be the one the event reports,
from the event's time; and no later scale action of the same model may be recorded (a later transition
was acted on already). A stale event is ignored with the reason. Each action is an append-only ledger item
``SCALE#<alarm state time>#<model>#<kind>`` written before acting with the event id as its write id, and
the copy count changes only when this delivery wrote the item and the count is still the one it records:
every copy count this function changes is in the ledger, once.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import ConfigDict, Field

from capacity import EVENT_SOURCE, TAG_REQUEST_ID, messages
from capacity.base import Model
from capacity.contracts.scaling import ScaleOutput
from capacity.events import ReleaseRequestedDetail
from capacity.logic.governance.costs import record_usage
from capacity.logic.steps.common import Purchase, first_entry, load_purchase, post, states
from capacity.logic.steps.forwarding import ensure_forwarding
from capacity.naming import (
    ALARM_PREFIX,
    VARIANT_NAME,
    alarm_prefix,
    endpoint_name,
    idle_alarm_name,
    idle_check_schedule_name,
    idle_release_alarm_name,
    inference_component_name,
    no_capacity_alarm_name,
    scaling_policy_name,
)
from capacity.ports import Ports
from capacity.record_kinds import SCALE_PREFIX
from capacity.records import State
from capacity.request import ReservationRequest
from capacity.request_parts import ModelSpec
from capacity.resources import AlarmSpec, tags_for
from capacity.timeutil import as_utc, iso_ms, iso_z
from capacity.validation import parse_model

logger = logging.getLogger(__name__)

TAG_MODEL = "capacity-orchestrator:model"
"""Tag on per-model alarms: the model name."""
TAG_ALARM = "capacity-orchestrator:alarm"
"""Tag on every alarm: its kind (``no-capacity``, ``idle``, ``idle-release``)."""
NO_CAPACITY, IDLE, IDLE_RELEASE = "no-capacity", "idle", "idle-release"
NO_SCALE_OUT_WINDOW = timedelta(hours=1)
"""No scale-out from zero this close to the end of the reservation: the copy would barely start."""
_STOPPED = frozenset({State.RELEASING, State.RELEASED, State.CANCELLED, State.REJECTED, State.FAILED})
IDLE_ALARM_DUE = "IdleAlarmDue"
"""Detail type of the idle check the one-time schedule puts on the bus (see the module docstring)."""


class IdleAlarmDueDetail(Model):
    """``detail`` of ``IdleAlarmDue``: the reservation, the alarm (name, region) whose first full window
    after ``READY`` has passed."""

    model_config = ConfigDict(extra="ignore")

    request_id: str
    alarm_name: str
    region: str


# ------------------------------------------------------------------------------------------- set up


def alarm_specs(request: ReservationRequest) -> list[AlarmSpec]:
    """Every alarm :func:`setup_scaling` puts for ``request`` (see the module docstring)."""
    rid = request.id
    specs: list[AlarmSpec] = []
    for model in request.models:
        if not model.scales_to_zero:
            continue
        component = inference_component_name(rid, model.name)
        tags = [*tags_for(rid), {"Key": TAG_MODEL, "Value": model.name}]
        specs.append(
            AlarmSpec(
                name=no_capacity_alarm_name(rid, model.name),
                description=(
                    f"Capacity Orchestrator {rid}: requests to {component} failed for lack of copies; "
                    "scale_components starts one copy."
                ),
                metric_name="NoCapacityInvocationFailures",
                dimensions={"InferenceComponentName": component},
                statistic="Sum",
                period=60,
                evaluation_periods=1,
                threshold=1.0,
                comparison="GreaterThanOrEqualToThreshold",
                treat_missing="notBreaching",
                tags=[*tags, {"Key": TAG_ALARM, "Value": NO_CAPACITY}],
            )
        )
        specs.append(
            AlarmSpec(
                name=idle_alarm_name(rid, model.name),
                description=(
                    f"Capacity Orchestrator {rid}: {component} served no request for {model.idle_minutes} "
                    "minutes; scale_components sets its copy count to 0."
                ),
                metric_name="Invocations",
                dimensions={"InferenceComponentName": component},
                statistic="Sum",
                period=60,
                evaluation_periods=model.idle_minutes,
                threshold=1.0,
                comparison="LessThanThreshold",
                treat_missing="breaching",
                tags=[*tags, {"Key": TAG_ALARM, "Value": IDLE}],
            )
        )
    if request.idle_policy is not None and request.idle_policy.action == "release":
        hours = request.idle_policy.idle_hours
        specs.append(
            AlarmSpec(
                name=idle_release_alarm_name(rid),
                description=(
                    f"Capacity Orchestrator {rid}: the endpoint served no request for {hours} hour(s); "
                    "the reservation is released (idle policy)."
                ),
                metric_name="Invocations",
                dimensions={"EndpointName": endpoint_name(rid), "VariantName": VARIANT_NAME},
                statistic="Sum",
                period=3600,
                evaluation_periods=hours,
                threshold=1.0,
                comparison="LessThanThreshold",
                treat_missing="breaching",
                tags=[*tags_for(rid), {"Key": TAG_ALARM, "Value": IDLE_RELEASE}],
            )
        )
    return specs


def setup_scaling(ports: Ports, request: ReservationRequest, region: str) -> None:
    """Register every component's scalable target and policy, then put the alarms (all upserts: safe to
    repeat). Application Auto Scaling receives ``MinCapacity`` 0 as 0. In a region other than the stack's,
    the rule forwarding that region's alarm events to the application's bus is put before and after the
    alarms (:mod:`capacity.logic.steps.forwarding`).

    Raises:
        ConfigurationError: the forwarding settings are missing (a region other than the stack's).
        RetryableAwsError: throttling/5xx after retries.
        ResourceBusy: another scaling change of a target is under way.
    """
    autoscaling = ports.autoscaling(region)
    for model in request.models:
        component = inference_component_name(request.id, model.name)
        scaling = model.scaling_or_default
        autoscaling.register_component(
            component, min_copies=model.copies.min, max_copies=model.copies.max, tags=tags_for(request.id)
        )
        autoscaling.put_invocations_policy(
            component,
            policy_name=scaling_policy_name(request.id, model.name),
            target_value=scaling.target_invocations_per_copy,
            scale_in_cooldown=scaling.scale_in_cooldown_seconds,
            scale_out_cooldown=scaling.scale_out_cooldown_seconds,
        )
    specs = alarm_specs(request)
    if specs:
        ensure_forwarding(ports, region)
    alarms = ports.alarms(region)
    for spec in specs:
        alarms.put_alarm(spec)
    if specs:
        ensure_forwarding(ports, region)


# ------------------------------------------------------------------------------------------ tear down


def stop_scaling(ports: Ports, request_id: str, model_names: Sequence[str], region: str) -> list[str]:
    """Delete every scaling policy of the reservation's components and deregister their targets.

    Returns:
        What was removed (``scaling policy <name>``, ``scalable target inference-component/<name>``).
    """
    autoscaling = ports.autoscaling(region)
    removed: list[str] = []
    for model in model_names:
        component = inference_component_name(request_id, model)
        for policy in autoscaling.policy_names(component):
            if autoscaling.delete_policy(component, policy):
                removed.append(f"scaling policy {policy}")
        if autoscaling.deregister_component(component):
            removed.append(f"scalable target inference-component/{component}")
    return removed


def delete_alarms(ports: Ports, request_id: str, region: str) -> list[str]:
    """Delete every alarm named under :func:`~capacity.naming.alarm_prefix` of the reservation.

    Returns:
        The names deleted.
    """
    alarms = ports.alarms(region)
    names = alarms.alarm_names(alarm_prefix(request_id))
    if names:
        alarms.delete_alarms(names)
    return names


def scaling_leftovers(ports: Ports, request_id: str, model_names: Sequence[str], region: str) -> list[str]:
    """Scalable targets, scaling policies and alarms of the reservation that still exist."""
    autoscaling = ports.autoscaling(region)
    components = [inference_component_name(request_id, model) for model in model_names]
    found = [f"scalable target inference-component/{c}" for c in autoscaling.registered(components)]
    for component in components:
        found.extend(f"scaling policy {p}" for p in autoscaling.policy_names(component))
    found.extend(f"alarm {name}" for name in ports.alarms(region).alarm_names(alarm_prefix(request_id)))
    return found


# ------------------------------------------------------------------------------------ scale_components


class _AlarmState(Model):
    model_config = ConfigDict(extra="ignore")

    value: str
    timestamp: str | None = None


class _AlarmDetail(Model):
    model_config = ConfigDict(extra="ignore")

    alarmName: str  # noqa: N815 - the event's own field name
    state: _AlarmState
    previousState: _AlarmState | None = None  # noqa: N815


class AlarmStateChange(Model):
    """The ``CloudWatch Alarm State Change`` event (source ``aws.cloudwatch``; "Alarm events and
    EventBridge", CloudWatch user guide): ``id``, ``time``, ``region``, ``resources`` (the alarm ARN) and
    ``detail`` {``alarmName``, ``state`` {``value``, ``timestamp``}, ``previousState``}."""

    model_config = ConfigDict(extra="ignore")

    id: str
    source: str
    detail_type: str = Field(alias="detail-type")
    time: str
    region: str
    resources: list[str] = Field(default_factory=list)
    detail: _AlarmDetail


def _parse_time(text: str | None) -> datetime | None:
    """CloudWatch's ``2019-10-02T17:04:40.985+0000`` (or any ISO-8601 with a zone) as UTC."""
    if not text:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        return None


def _ignore(reason: str, request_id: str | None = None, model: str | None = None) -> ScaleOutput:
    logger.info("alarm ignored: %s", reason)
    return ScaleOutput(action="ignored", reason=reason, request_id=request_id, model=model)


def scale_components(event: Mapping[str, Any], ports: Ports) -> ScaleOutput:
    """Act on one ``CloudWatch Alarm State Change`` event (see the module docstring).

    Returns:
        What was done: ``action`` (``ignored``, ``scale_out_from_zero``, ``refused_scale_out``,
        ``scale_in_to_zero``, ``cold_start_ended``, ``release_requested_idle``) and why; ``duplicate`` when
        the event had been handled before.

    Raises:
        InvalidRequest: the event is neither a CloudWatch alarm state change nor an idle check.
        ResourceBusy: the component is being updated (the asynchronous invocation is retried).
        RetryableAwsError: throttling/5xx after retries.
    """
    if event.get("source") == EVENT_SOURCE and event.get("detail-type") == IDLE_ALARM_DUE:
        return idle_check(parse_model(IdleAlarmDueDetail, event.get("detail")), ports)
    change = parse_model(AlarmStateChange, event)
    kind = _kind(change)
    if isinstance(kind, ScaleOutput):
        return kind
    found = _reservation(change, ports)
    if isinstance(found, ScaleOutput):
        return found
    request, purchase, tags = found
    at = _parse_time(change.detail.state.timestamp) or _parse_time(change.time) or ports.clock()
    stale = _stale(change, ports, at, request.id)
    if stale is not None:
        return stale
    if kind == IDLE_RELEASE:
        return _idle_release(change, ports, request, at)
    return _scale_model(change, ports, request, purchase, tags=tags, at=at, kind=kind)


def _scale_model(
    change: AlarmStateChange,
    ports: Ports,
    request: ReservationRequest,
    purchase: Purchase,
    *,
    tags: Mapping[str, str],
    at: datetime,
    kind: str,
) -> ScaleOutput:
    """The no-capacity or idle alarm of one model: scale out, end the cold start, or scale in."""
    model = next((m for m in request.models if m.name == tags.get(TAG_MODEL)), None)
    if model is None or not model.scales_to_zero:
        return _ignore(
            f"alarm {change.detail.alarmName} names no model of {request.id} that may scale to zero",
            request.id,
        )
    ending = kind == NO_CAPACITY and change.detail.state.value == "OK"
    # A cold start's end always resumes scale-in; a scale-out or scale-in is old news after a later action.
    superseded = None if ending else _superseded(ports, request.id, model.name, at, change.detail.alarmName)
    if superseded is not None:
        return superseded
    context = _Context(
        change=change, ports=ports, request=request, purchase=purchase, model=model, at=at, kind=kind
    )
    if kind == IDLE:
        return _scale_in(context)
    return _cold_start_ended(context) if ending else _scale_out(context)


def _kind(change: AlarmStateChange) -> str | ScaleOutput:
    """The alarm kind this function acts on, or why the event is ignored."""
    name, state = change.detail.alarmName, change.detail.state.value
    kind = name.rsplit("/", 1)[-1]
    if not name.startswith(ALARM_PREFIX):
        return _ignore(f"alarm {name} is not an alarm of this application")
    if kind not in (NO_CAPACITY, IDLE, IDLE_RELEASE):
        return _ignore(f"alarm {name} is of no kind this function acts on")
    if state != "ALARM" and not (kind == NO_CAPACITY and state == "OK"):
        return _ignore(f"alarm {name} went {state}: no action needed")
    return kind


def _millis(moment: datetime) -> datetime:
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _stale(change: AlarmStateChange, ports: Ports, at: datetime, request_id: str) -> ScaleOutput | None:
    """Why the event no longer describes the alarm (``DescribeAlarms`` now), or None when it still does.

    The alarm must be in the event's state since the event's time (to the millisecond CloudWatch writes):
    a later transition, or the alarm gone, makes the event stale news.
    """
    name, value = change.detail.alarmName, change.detail.state.value
    current = ports.alarms(change.region).alarm_state(name)
    if current is None:
        return _ignore(f"alarm {name} no longer exists: its {value} of {iso_ms(at)} is stale", request_id)
    if current.value != value or _millis(current.updated) > _millis(at):
        return _ignore(
            f"alarm {name} is {current.value} since {iso_ms(current.updated)}: its {value} of {iso_ms(at)} "
            "is stale news (delivered late or again)",
            request_id,
        )
    return None


def _superseded(
    ports: Ports, request_id: str, model: str, at: datetime, alarm_name: str
) -> ScaleOutput | None:
    """Why a later scale action of ``model`` makes this transition old news, or None."""
    later = [
        item
        for item in ports.ledger.items(request_id, SCALE_PREFIX)
        if item.get("model") == model and (_parse_time(str(item.get("at") or "")) or at) > at
    ]
    if not later:
        return None
    last = later[-1]
    return _ignore(
        f"alarm {alarm_name} of {iso_ms(at)}: {model} was scaled since ({last.get('action')} at "
        f"{last.get('at')}); nothing to do",
        request_id,
        model,
    )


def _reservation(
    change: AlarmStateChange, ports: Ports
) -> tuple[ReservationRequest, Purchase, dict[str, str]] | ScaleOutput:
    """The reservation whose tag the alarm carries (request, purchase, alarm tags), or why it is ignored."""
    name = change.detail.alarmName
    tags = ports.alarms(change.region).alarm_tags(change.resources[0]) if change.resources else None
    request_id = (tags or {}).get(TAG_REQUEST_ID)
    if tags is None or not request_id or not name.startswith(alarm_prefix(request_id)):
        return _ignore(f"alarm {name} carries no matching {TAG_REQUEST_ID} tag (gone, or not ours)")
    request = ports.ledger.get_request(request_id)
    purchase = load_purchase(ports, request_id)
    if request is None or purchase is None:
        return _ignore(f"reservation {request_id} has no recorded request or purchase", request_id)
    stopped = states(ports.ledger.history(request_id)) & _STOPPED
    if stopped:
        return _ignore(
            f"reservation {request_id} is {', '.join(sorted(s.value for s in stopped))}: no scaling",
            request_id,
        )
    return request, purchase, tags


class _Context:
    """What every action needs: the event, the reservation, the model and its component."""

    def __init__(
        self,
        *,
        change: AlarmStateChange,
        ports: Ports,
        request: ReservationRequest,
        purchase: Purchase,
        model: ModelSpec,
        at: datetime,
        kind: str,
    ) -> None:
        self.change, self.ports, self.request, self.purchase = change, ports, request, purchase
        self.model, self.at, self.kind = model, at, kind
        self.component = inference_component_name(request.id, model.name)
        self.sagemaker = ports.sagemaker(purchase.region)
        self.alarms = ports.alarms(purchase.region)

    def record(self, action: str, *, reason: str, **values: Any) -> tuple[bool, ScaleOutput]:
        """Put the ``SCALE#`` item (once per alarm transition); (created, output)."""
        sk = f"{SCALE_PREFIX}{iso_ms(self.at)}#{self.model.name}#{self.kind}"
        attributes = {
            "action": action,
            "model": self.model.name,
            "inference_component_name": self.component,
            "alarm_name": self.change.detail.alarmName,
            "at": iso_ms(self.at),
            "actor": self.ports.actor,
            "reason": reason,
            **values,
        }
        created, item = self.ports.ledger.put_once(self.request.id, sk, attributes, write_id=self.change.id)
        output = ScaleOutput(
            action=str(item.get("action", action)),
            reason=str(item.get("reason", reason)),
            request_id=self.request.id,
            model=self.model.name,
            from_copies=_int(item.get("from_copies")),
            to_copies=_int(item.get("to_copies")),
            failed_requests=_int(item.get("failed_requests")),
            duplicate=not created,
        )
        return created, output

    def failures(self, start: datetime, end: datetime) -> int:
        """``NoCapacityInvocationFailures`` of the component over ``[start, end)``."""
        total = self.alarms.metric_sum(
            metric_name="NoCapacityInvocationFailures",
            dimensions={"InferenceComponentName": self.component},
            start=start,
            end=end,
        )
        return round(total)


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None


def _scale_out(ctx: _Context) -> ScaleOutput:
    info = ctx.sagemaker.describe_inference_component(ctx.component)
    if info is None:
        return _ignore(f"inference component {ctx.component} does not exist", ctx.request.id, ctx.model.name)
    desired = info.desired_copies or 0
    if desired >= 1:
        return _ignore(
            f"inference component {ctx.component} already has {desired} desired copies",
            ctx.request.id,
            ctx.model.name,
        )
    now = ctx.ports.clock()
    failed = ctx.failures(ctx.at - timedelta(minutes=1), now + timedelta(seconds=1))
    ends = ctx.purchase.end_time
    if now >= ends - NO_SCALE_OUT_WINDOW:
        created, output = ctx.record(
            "refused_scale_out",
            reason=(
                f"{failed} request(s) failed for lack of copies, but the reservation ends at {iso_z(ends)}: "
                "no scale-out within its last hour"
            ),
            from_copies=0,
            to_copies=0,
            failed_requests=failed,
        )
        if created:
            post(
                ctx.ports,
                messages.scale_out_refused(ctx.request.id, model=ctx.model.name, ends_at=iso_z(ends)),
            )
        return output
    copies = 1
    created, output = ctx.record(
        "scale_out_from_zero",
        reason=(
            f"alarm {ctx.change.detail.alarmName}: {failed} request(s) failed for lack of copies "
            "(NoCapacityInvocationFailures >= 1 in a minute); target tracking cannot scale out from zero"
        ),
        from_copies=0,
        to_copies=copies,
        failed_requests=failed,
    )
    if not created or output.from_copies != desired:
        return output  # another delivery of this transition acted, or the count it recorded changed
    # Target tracking sees the starting copy serve nothing and would scale it straight back in: hold its
    # scale-in until the cold start is over (resumed when the no-capacity alarm returns to OK).
    ctx.ports.autoscaling(ctx.purchase.region).suspend_scale_in(ctx.component, suspended=True)
    ctx.sagemaker.update_inference_component_copies(ctx.component, copies)
    _observe(ctx)
    if created:
        post(
            ctx.ports,
            messages.scaled_from_zero(
                ctx.request.id,
                model=ctx.model.name,
                component=ctx.component,
                copies=copies,
                failed_requests=failed,
            ),
        )
    return output


def _cold_start_ended(ctx: _Context) -> ScaleOutput:
    items = ctx.ports.ledger.items(ctx.request.id, SCALE_PREFIX)
    mine = [
        i
        for i in items
        if i.get("model") == ctx.model.name and i.get("sk", "") < f"{SCALE_PREFIX}{iso_ms(ctx.at)}~"
    ]
    last = mine[-1] if mine else None
    if last is None or last.get("action") != "scale_out_from_zero":
        return _ignore(
            f"alarm {ctx.change.detail.alarmName} went OK with no cold start under way",
            ctx.request.id,
            ctx.model.name,
        )
    ctx.ports.autoscaling(ctx.purchase.region).suspend_scale_in(ctx.component, suspended=False)
    began = _parse_time(str(last["at"])) or ctx.at
    failed = ctx.failures(began - timedelta(minutes=1), ctx.at)
    minutes = max(0.0, (ctx.at - began).total_seconds() / 60)
    created, output = ctx.record(
        "cold_start_ended",
        reason=(
            f"alarm {ctx.change.detail.alarmName} back to OK: no request failed for lack of copies in the "
            f"last minute; {failed} failed during the cold start of about {minutes:.0f} minute(s)"
        ),
        from_copies=_int(last.get("to_copies")),
        to_copies=_int(last.get("to_copies")),
        failed_requests=failed,
        cold_start_seconds=round(minutes * 60),
    )
    if created:
        post(
            ctx.ports,
            messages.cold_start_ended(
                ctx.request.id, model=ctx.model.name, failed_requests=failed, minutes=minutes
            ),
        )
    return output


def _scale_in(ctx: _Context) -> ScaleOutput:
    ready = first_entry(ctx.ports.ledger.history(ctx.request.id), State.READY)
    serving = ctx.at - ready.at if ready is not None else timedelta(0)
    window = timedelta(minutes=ctx.model.idle_minutes)
    if serving < window:
        # The alarm counts the minutes before it existed as idle (missing data breaches): not idle long
        # enough yet. It stays in ALARM (no flapping); the idle check at READY + the window sets it to OK
        # so CloudWatch evaluates it again over minutes that all follow READY.
        return _schedule_idle_check(
            ctx.ports,
            request_id=ctx.request.id,
            alarm_name=ctx.change.detail.alarmName,
            region=ctx.purchase.region,
            due=(ready.at if ready is not None else ctx.at) + window,
            why=(
                f"{ctx.component} has served for {int(serving.total_seconds() // 60)} minute(s), less than "
                f"the {ctx.model.idle_minutes} idle minute(s) before zero"
            ),
            model=ctx.model.name,
        )
    info = ctx.sagemaker.describe_inference_component(ctx.component)
    if info is None:
        return _ignore(f"inference component {ctx.component} does not exist", ctx.request.id, ctx.model.name)
    desired = info.desired_copies or 0
    if desired == 0:
        return _ignore(
            f"inference component {ctx.component} is already at 0 copies", ctx.request.id, ctx.model.name
        )
    created, output = ctx.record(
        "scale_in_to_zero",
        reason=(
            f"alarm {ctx.change.detail.alarmName}: no request for {ctx.model.idle_minutes} minute(s); "
            "0 copies frees the accelerators for the other models"
        ),
        from_copies=desired,
        to_copies=0,
    )
    if not created or output.from_copies != desired:
        return output  # another delivery of this transition acted, or the count it recorded changed
    ctx.sagemaker.update_inference_component_copies(ctx.component, 0)
    _observe(ctx)
    return output


def _observe(ctx: _Context) -> None:
    """The endpoint's instance count when the scaler acts (``DescribeEndpoint`` ``CurrentInstanceCount``),
    for the cost report (:mod:`capacity.logic.governance.costs`); best effort."""
    try:
        info = ctx.sagemaker.describe_endpoint(endpoint_name(ctx.request.id))
    except Exception:
        return
    record_usage(ctx.ports, ctx.request.id, info.instance_count if info else None, source="scale")


def _idle_release(
    change: AlarmStateChange, ports: Ports, request: ReservationRequest, at: datetime
) -> ScaleOutput:
    policy = request.idle_policy
    if policy is None or policy.action != "release":
        return _ignore(f"reservation {request.id} has no idle policy 'release'", request.id)
    ready = first_entry(ports.ledger.history(request.id), State.READY)
    serving = at - ready.at if ready is not None else timedelta(0)
    window = timedelta(hours=policy.idle_hours)
    if serving < window:
        # The alarm counts the hours before it existed as idle (missing data breaches): not idle long
        # enough yet. It stays in ALARM; the idle check at READY + the window re-arms it.
        return _schedule_idle_check(
            ports,
            request_id=request.id,
            alarm_name=change.detail.alarmName,
            region=change.region,
            due=(ready.at if ready is not None else at) + window,
            why=(
                f"the endpoint has served for {serving.total_seconds() / 3600:.1f} h, less than the idle "
                f"policy's {policy.idle_hours} h"
            ),
        )
    reason = (
        f"alarm {change.detail.alarmName}: the endpoint served no request for {policy.idle_hours} hour(s)"
    )
    created, _item = ports.ledger.put_once(
        request.id,
        f"{SCALE_PREFIX}{iso_ms(at)}#-#{IDLE_RELEASE}",
        {
            "action": "release_requested_idle",
            "alarm_name": change.detail.alarmName,
            "at": iso_ms(at),
            "actor": ports.actor,
            "reason": reason,
        },
        write_id=change.id,
    )
    if created:
        ports.events.put("ReleaseRequested", ReleaseRequestedDetail(request_id=request.id, reason="idle"))
        post(ports, messages.idle_release(request.id, idle_hours=policy.idle_hours))
    return ScaleOutput(
        action="release_requested_idle", reason=reason, request_id=request.id, duplicate=not created
    )


# ------------------------------------------------------------------------------------------ idle check


def _schedule_idle_check(
    ports: Ports,
    *,
    request_id: str,
    alarm_name: str,
    region: str,
    due: datetime,
    why: str,
    model: str | None = None,
) -> ScaleOutput:
    """Schedule the idle check of ``alarm_name`` at ``due`` (once: a second delivery finds the schedule)."""
    name = idle_check_schedule_name(request_id, alarm_name)
    created = ports.scheduler.schedule_event(
        name=name,
        at=due,
        detail_type=IDLE_ALARM_DUE,
        detail=IdleAlarmDueDetail(request_id=request_id, alarm_name=alarm_name, region=region),
        description=f"Idle check of {alarm_name} ({request_id}) once its first window after READY is over",
    )
    reason = (
        f"{why}: the alarm stays in ALARM and is checked again at {iso_z(due)} (schedule {name}"
        f"{'' if created else ', already scheduled'})"
    )
    logger.info("idle check scheduled: %s", reason)
    return ScaleOutput(
        action="idle_check_scheduled",
        reason=reason,
        request_id=request_id,
        model=model,
        duplicate=not created,
    )


def idle_check(detail: IdleAlarmDueDetail, ports: Ports) -> ScaleOutput:
    """The idle check (``IdleAlarmDue``, see the module docstring): an alarm still in ``ALARM`` once its first
    window after ``READY`` is over is set to ``OK``, so CloudWatch evaluates it again at its next period.

    Returns:
        ``idle_alarm_rearmed``, or ``ignored`` with the reason (the alarm is gone or no longer in
        ``ALARM``: traffic came, and it fires again after a whole idle window; the reservation is releasing).

    Raises:
        RetryableAwsError: throttling/5xx after retries.
    """
    rid, name = detail.request_id, detail.alarm_name
    if not name.startswith(alarm_prefix(rid)):
        return _ignore(f"idle check of {name}: not an alarm of reservation {rid}", rid)
    stopped = states(ports.ledger.history(rid)) & _STOPPED
    if stopped:
        return _ignore(
            f"reservation {rid} is {', '.join(sorted(s.value for s in stopped))}: no idle check", rid
        )
    alarms = ports.alarms(detail.region)
    current = alarms.alarm_state(name)
    if current is None:
        return _ignore(f"idle check of {name}: the alarm no longer exists", rid)
    if current.value != "ALARM":
        return _ignore(
            f"idle check of {name}: {current.value} since {iso_ms(current.updated)} (requests came); it "
            "fires again after a whole idle window",
            rid,
        )
    reason = (
        f"idle check of {name}: its first window after READY is over; set to OK so CloudWatch evaluates it "
        "again at its next period"
    )
    alarms.reset_alarm(name, reason)
    return ScaleOutput(action="idle_alarm_rearmed", reason=reason, request_id=rid)
