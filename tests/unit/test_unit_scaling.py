"""Scaling: what deployment registers, what ``scale_components`` does with alarm events, what release
removes. The alarm events are the samples in ``events/`` (renamed to the harness's reservation)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from capacity.adapters.cloudwatch import AlarmState
from capacity.contracts.finding import ChooseInput, SearchInput
from capacity.contracts.purchase import PurchaseInput
from capacity.contracts.scaling import ScaleOutput
from capacity.contracts.serving import ComponentsInput, EndpointInput
from capacity.errors import InvalidRequest
from capacity.logic.sagemaker.deploy import create_endpoint, create_inference_components
from capacity.logic.sagemaker.scaling import scale_components
from capacity.logic.steps.choose import choose_offering
from capacity.logic.steps.purchase import purchase_capacity
from capacity.logic.steps.search import search_offerings
from capacity.naming import (
    idle_alarm_name,
    idle_check_schedule_name,
    idle_release_alarm_name,
    no_capacity_alarm_name,
)
from capacity.record_kinds import SCALE_PREFIX
from capacity.request import parse_request

from tests.unit.conftest import Harness
from tests.unit.handler_support import invoke, load_handler
from tests.unit.test_unit_release import PLAN_START, deployed, release
from tests.unit.unit_fakes import NOW, FakeSageMaker, raw_offering, request_body

EVENTS = Path(__file__).resolve().parents[2] / "events"
EU = "co-demo-1-llama-eu"
US = "co-demo-1-llama-us"


def alarm_event(
    name: str, *, state: str = "ALARM", at: str = "2026-12-09T12:02:00.000+0000"
) -> dict[str, Any]:
    """A sample alarm event from ``events/``, renamed from eval-week-49/llama-3-8b-eu to the harness's
    demo-1/llama-eu, with another state and time."""
    text = (EVENTS / name).read_text()
    text = text.replace("co-eval-week-49", "co-demo-1").replace("eval-week-49", "demo-1")
    event: dict[str, Any] = json.loads(text.replace("llama-3-8b-eu", "llama-eu"))
    event["detail"]["state"]["value"] = state
    event["detail"]["state"]["timestamp"] = at
    return event


def handle(h: Harness, event: dict[str, Any]) -> ScaleOutput:
    """``scale_components`` on an event CloudWatch just sent: the alarm is in the event's state since the
    event's time (``DescribeAlarms`` says so), as for a fresh delivery."""
    alarms = h.scaling.alarms(event["region"])
    at = datetime.fromisoformat(event["detail"]["state"]["timestamp"].replace("+0000", "+00:00"))
    alarms.states[event["detail"]["alarmName"]] = AlarmState(event["detail"]["state"]["value"], at)
    return scale_components(event, h.ports)


def copies(sm: FakeSageMaker, name: str, count: int) -> None:
    sm.world.components[name] = replace(sm.world.components[name], desired_copies=count)


def scale_items(h: Harness) -> list[dict[str, Any]]:
    return h.ledger.items("demo-1", SCALE_PREFIX)


def test_ready_registers_min_zero_as_zero_with_the_requests_policy_and_alarms(harness: Harness) -> None:
    deployed(harness)
    autoscaling = harness.scaling.autoscaling("us-east-1")
    assert autoscaling.targets[EU]["min"] == 0  # 0 is a value, sent as 0
    assert autoscaling.targets[EU]["max"] == 2
    assert autoscaling.targets[US]["min"] == 1
    assert autoscaling.targets[EU]["tags"] == {"capacity-orchestrator:request-id": "demo-1"}
    assert autoscaling.policies[EU] == {
        f"{EU}-invocations-per-copy": {
            "target_value": 10.0,
            "scale_in_cooldown": 300,
            "scale_out_cooldown": 300,
        }
    }
    alarms = harness.scaling.alarms("us-east-1").alarms
    # Only llama-eu may scale to zero (copies.min 0): its two alarms, none for llama-us.
    assert sorted(alarms) == [
        "capacity-orchestrator/co-demo-1/llama-eu/idle",
        "capacity-orchestrator/co-demo-1/llama-eu/no-capacity",
    ]
    no_capacity = alarms[no_capacity_alarm_name("demo-1", "llama-eu")]
    assert (no_capacity.metric_name, no_capacity.statistic, no_capacity.period) == (
        "NoCapacityInvocationFailures",
        "Sum",
        60,
    )
    assert (no_capacity.threshold, no_capacity.comparison) == (1.0, "GreaterThanOrEqualToThreshold")
    assert dict(no_capacity.dimensions) == {"InferenceComponentName": EU}
    idle = alarms[idle_alarm_name("demo-1", "llama-eu")]
    assert (idle.metric_name, idle.evaluation_periods, idle.treat_missing) == ("Invocations", 15, "breaching")


def test_request_scaling_fields_reach_the_policy_and_the_idle_alarm() -> None:
    body = request_body()
    body["models"][0]["scaling"] = {
        "target_invocations_per_copy": 25.5,
        "scale_in_cooldown_seconds": 600,
        "scale_out_cooldown_seconds": 60,
        "idle_minutes_before_zero": 30,
    }
    body["idle_policy"] = {"action": "release", "idle_hours": 6}
    request = parse_request(body, now=NOW)
    model = request.models[0]
    assert model.scaling_or_default.target_invocations_per_copy == 25.5
    assert model.idle_minutes == 30
    assert request.idle_policy is not None
    assert request.idle_policy.idle_hours == 6


@pytest.mark.parametrize(
    ("change", "field", "phrase"),
    [
        ({"idle_minutes_before_zero": 10}, "models.1", "copies.min is 1"),
        ({"target_invocations_per_copy": 0}, "models.0.scaling.target_invocations_per_copy", "more than 0"),
        ({"scale_in_cooldown_seconds": "300"}, "models.0.scaling.scale_in_cooldown_seconds", "whole number"),
    ],
)
def test_bad_scaling_fields_are_rejected_naming_the_field(
    change: dict[str, Any], field: str, phrase: str
) -> None:
    body = request_body()
    index = 1 if field == "models.1" else 0
    body["models"][index]["scaling"] = change
    with pytest.raises(InvalidRequest) as caught:
        parse_request(body, now=NOW)
    assert [(e.field, phrase in e.message) for e in caught.value.errors] == [(field, True)]


def test_idle_policy_beyond_a_day_is_rejected() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(request_body(idle_policy={"action": "release", "idle_hours": 25}), now=NOW)
    assert [e.field for e in caught.value.errors] == ["idle_policy.idle_hours"]


def test_requests_without_the_new_fields_keep_their_derived_id() -> None:
    body = request_body()
    del body["request_id"]
    # The id this content had before issue 4 added scaling/idle_policy (a new id would re-run old requests).
    assert parse_request(body, now=NOW).id == "req-16afb7bd4c7140ea"
    with_scaling = json.loads(json.dumps(body))
    with_scaling["models"][0]["scaling"] = {"target_invocations_per_copy": 20}
    assert parse_request(with_scaling, now=NOW).id != parse_request(body, now=NOW).id


def test_no_capacity_alarm_starts_one_copy_counts_the_failures_and_notifies(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    harness.scaling.alarms("us-east-1").metric_sums["NoCapacityInvocationFailures"] = 3.0
    harness.clock.now = PLAN_START + timedelta(hours=1)

    out = handle(harness, alarm_event("functions/scale_components.json"))

    assert (out.action, out.from_copies, out.to_copies, out.failed_requests) == (
        "scale_out_from_zero",
        0,
        1,
        3,
    )
    assert sm.world.names("UpdateInferenceComponentRuntimeConfig") == [
        {"region": "us-east-1", "name": EU, "copies": 1}
    ]
    assert harness.scaling.autoscaling("us-east-1").targets[EU]["scale_in_suspended"] is True
    (item,) = scale_items(harness)
    assert item["sk"] == "SCALE#2026-12-09T12:02:00.000Z#llama-eu#no-capacity"
    assert item["action"] == "scale_out_from_zero"
    assert item["failed_requests"] == 3
    assert "3 request(s) failed" in harness.slack.texts()[-1]


def test_the_same_alarm_event_twice_scales_once(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    event = alarm_event("functions/scale_components.json")
    first = handle(harness, event)
    slack_before = len(harness.slack.texts())
    second = handle(harness, event)
    assert first.action == "scale_out_from_zero"
    assert second.action == "ignored"  # the component already has its copy
    assert len(sm.world.names("UpdateInferenceComponentRuntimeConfig")) == 1
    assert len(scale_items(harness)) == 1
    assert len(harness.slack.texts()) == slack_before


def test_scale_out_is_refused_in_the_last_hour_of_the_reservation(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    harness.clock.now = PLAN_START + timedelta(hours=72) - timedelta(minutes=50)
    out = handle(harness, alarm_event("functions/scale_components.json"))
    assert out.action == "refused_scale_out"
    assert sm.world.names("UpdateInferenceComponentRuntimeConfig") == []
    assert [i["action"] for i in scale_items(harness)] == ["refused_scale_out"]
    assert "within the hour" in harness.slack.texts()[-1]


def test_ok_after_a_scale_out_reports_the_cold_start_and_resumes_scale_in(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    alarms = harness.scaling.alarms("us-east-1")
    alarms.metric_sums["NoCapacityInvocationFailures"] = 3.0
    handle(harness, alarm_event("functions/scale_components.json"))
    alarms.metric_sums["NoCapacityInvocationFailures"] = 9.0
    ok = alarm_event("functions/scale_components.json", state="OK", at="2026-12-09T12:05:00.000+0000")
    ok["id"] = "another-delivery"

    out = handle(harness, ok)

    assert (out.action, out.failed_requests) == ("cold_start_ended", 9)
    assert harness.scaling.autoscaling("us-east-1").targets[EU]["scale_in_suspended"] is False
    ended = scale_items(harness)[-1]
    assert ended["cold_start_seconds"] == 180
    assert "9 request(s) failed during its cold start of about 3 minute(s)" in harness.slack.texts()[-1]


def test_idle_alarm_sets_zero_copies_and_an_idle_component_at_zero_is_left_alone(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 2)
    event = alarm_event("eventbridge_alarm_idle.json", at="2026-12-09T12:21:00.000+0000")
    out = handle(harness, event)
    assert (out.action, out.from_copies, out.to_copies) == ("scale_in_to_zero", 2, 0)
    assert sm.world.components[EU].desired_copies == 0
    event["id"], event["detail"]["state"]["timestamp"] = "later", "2026-12-09T13:00:00.000+0000"
    assert handle(harness, event).action == "ignored"


def idle_due_event(alarm_name: str, *, region: str = "us-east-1") -> dict[str, Any]:
    """The ``IdleAlarmDue`` event the idle check's schedule puts on the bus."""
    return {
        "id": "idle-due-1",
        "source": "capacity.orchestrator",
        "detail-type": "IdleAlarmDue",
        "time": "2026-12-09T12:05:00Z",
        "region": "us-east-1",
        "resources": [],
        "detail": {"request_id": "demo-1", "alarm_name": alarm_name, "region": region},
    }


def test_idle_alarm_before_idle_minutes_since_ready_schedules_one_idle_check_and_no_reset(
    harness: Harness,
) -> None:
    """Missing minutes breach the idle alarm, those before it existed too ("How alarm state is evaluated when
    data is missing", CloudWatch user guide): a minute after READY (11:50) it fires. It is left in ALARM (no
    reset, so it does not fire again every minute) and one idle check is scheduled at READY + 15 minutes."""
    sm = deployed(harness)
    copies(sm, EU, 1)
    alarms = harness.scaling.alarms("us-east-1")
    name = idle_alarm_name("demo-1", "llama-eu")
    event = alarm_event("eventbridge_alarm_idle.json", at="2026-12-09T11:51:00.000+0000")
    early = handle(harness, event)
    assert early.action == "idle_check_scheduled"
    assert "served for 1 minute(s), less than the 15 idle minute(s)" in early.reason
    assert "checked again at 2026-12-09T12:05:00Z" in early.reason
    assert alarms.resets == []
    assert sm.world.components[EU].desired_copies == 1
    assert scale_items(harness) == []
    schedule = harness.scheduler.schedules[idle_check_schedule_name("demo-1", name)]
    assert schedule["at"] == datetime(2026, 12, 9, 12, 5, tzinfo=UTC)
    assert schedule["detail_type"] == "IdleAlarmDue"
    assert schedule["detail"] == {"request_id": "demo-1", "alarm_name": name, "region": "us-east-1"}
    # The same ALARM delivered again schedules nothing more.
    event["id"] = "again"
    assert handle(harness, event).duplicate is True
    assert len(harness.scheduler.schedules) == 2  # the release schedule and this idle check

    # At 12:05 the check finds the alarm still in ALARM: back to OK, so CloudWatch evaluates it again over
    # minutes that all follow READY.
    rearmed = scale_components(idle_due_event(name), harness.ports)
    assert rearmed.action == "idle_alarm_rearmed"
    assert [n for n, _reason in alarms.resets] == [name]
    assert sm.world.components[EU].desired_copies == 1

    # CloudWatch fires it again a minute later: now the model has been idle for its whole window.
    event["id"], event["detail"]["state"]["timestamp"] = "later", "2026-12-09T12:06:00.000+0000"
    late = handle(harness, event)
    assert (late.action, late.from_copies, late.to_copies) == ("scale_in_to_zero", 1, 0)


def test_the_idle_check_leaves_an_alarm_that_requests_turned_ok_and_a_releasing_reservation(
    harness: Harness,
) -> None:
    deployed(harness)
    alarms = harness.scaling.alarms("us-east-1")
    name = idle_alarm_name("demo-1", "llama-eu")
    alarms.states[name] = AlarmState("OK", datetime(2026, 12, 9, 11, 58, tzinfo=UTC))
    quiet = scale_components(idle_due_event(name), harness.ports)
    assert quiet.action == "ignored"
    assert "OK since 2026-12-09T11:58:00.000Z (requests came)" in quiet.reason
    gone = scale_components(idle_due_event(idle_alarm_name("demo-1", "no-such-model")), harness.ports)
    assert "the alarm no longer exists" in gone.reason
    foreign = scale_components(idle_due_event("capacity-orchestrator/co-other/x/idle"), harness.ports)
    assert "not an alarm of reservation demo-1" in foreign.reason
    alarms.states[name] = AlarmState("ALARM", datetime(2026, 12, 9, 11, 59, tzinfo=UTC))
    release(harness, "begin", "cancelled")
    stopped = scale_components(idle_due_event(name), harness.ports)
    assert stopped.action == "ignored"
    assert "RELEASING" in stopped.reason
    assert "no idle check" in stopped.reason
    assert alarms.resets == []


@pytest.mark.parametrize(
    ("name", "state", "reason"),
    [
        ("eventbridge_alarm_other_application.json", "ALARM", "not an alarm of this application"),
        ("functions/scale_components.json", "INSUFFICIENT_DATA", "no action needed"),
        ("eventbridge_alarm_idle.json", "OK", "no action needed"),
    ],
)
def test_transitions_that_need_no_action_are_ignored(
    harness: Harness, name: str, state: str, reason: str
) -> None:
    sm = deployed(harness)
    out = handle(harness, alarm_event(name, state=state))
    assert out.action == "ignored"
    assert reason in out.reason
    assert sm.world.names("UpdateInferenceComponentRuntimeConfig") == []
    assert scale_items(harness) == []


def test_no_scaling_once_the_release_began(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    release(harness, "begin", "cancelled")
    out = handle(harness, alarm_event("functions/scale_components.json"))
    assert out.action == "ignored"
    assert "RELEASING" in out.reason
    assert sm.world.names("UpdateInferenceComponentRuntimeConfig") == []


def test_release_removes_policies_targets_and_alarms_before_the_components(harness: Harness) -> None:
    sm = deployed(harness)
    autoscaling = harness.scaling.autoscaling("us-east-1")
    alarms = harness.scaling.alarms("us-east-1")
    for action in ("begin", "delete_scaling", "delete_alarms"):
        release(harness, action, "cancelled")
    assert autoscaling.targets == {}
    assert autoscaling.policies == {}
    assert alarms.alarms == {}
    assert sm.world.names("DeleteInferenceComponent") == []  # components come after


def test_finish_removes_scaling_put_late_by_a_racing_deployment(harness: Harness) -> None:
    sm = deployed(harness)
    for action in ("begin", "delete_scaling", "delete_alarms", "delete_components"):
        release(harness, action, "cancelled")
    sm.finish_deletions()
    release(harness, "delete_endpoint")
    sm.finish_deletions()
    release(harness, "delete_endpoint_config")
    # A deployment still running re-registers a target after delete_scaling (races are real):
    harness.scaling.autoscaling("us-east-1").register_component(EU, min_copies=0, max_copies=2, tags=[])
    out = release(harness, "finish")
    assert out.done is True
    assert out.summary is not None
    assert harness.scaling.autoscaling("us-east-1").targets == {}


def test_handler_answers_the_sample_event_json_safe(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("capacity.adapters.autoscaling.AutoScalingAdapter", harness.scaling.autoscaling)
    monkeypatch.setattr("capacity.adapters.cloudwatch.AlarmsAdapter", harness.scaling.alarms)
    result = invoke(
        load_handler("scale_components"), json.loads((EVENTS / "functions/scale_components.json").read_text())
    )
    # The sample's alarm does not exist in this (fake) account: ignored, and the output says why.
    assert result["action"] == "ignored"
    assert "carries no matching capacity-orchestrator:request-id tag" in result["reason"]


def _deployed_with_idle_policy(h: Harness, hours: int) -> None:
    """Like ``deployed`` but the request has ``idle_policy`` release after ``hours``."""
    request = parse_request(request_body(idle_policy={"action": "release", "idle_hours": hours}), now=NOW)
    h.ledger.record_request(request, actor="test")
    h.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_offerings(SearchInput(request_id=request.id, region="us-east-1"), h.ports)
    plan = choose_offering(ChooseInput(request_id=request.id), h.ports)
    assert plan.offering is not None
    purchase_capacity(PurchaseInput(request_id=request.id, offering=plan.offering), h.ports)
    sm = h.world.client("us-east-1")
    h.clock.now = PLAN_START + timedelta(minutes=5)
    h.activate(request.id)
    create_endpoint(EndpointInput(request_id=request.id, action="create"), h.ports)
    sm.set_endpoint_status("co-demo-1", "InService")
    out = create_inference_components(ComponentsInput(request_id=request.id, action="create"), h.ports)
    for name in out.component_names:
        sm.set_component_status(name, "InService")
    h.clock.now = PLAN_START + timedelta(minutes=20)  # READY here
    create_inference_components(ComponentsInput(request_id=request.id, action="status"), h.ports)


def test_idle_release_waits_for_idle_hours_after_ready_then_requests_the_release(harness: Harness) -> None:
    _deployed_with_idle_policy(harness, hours=2)
    alarms = harness.scaling.alarms("us-east-1")
    name = idle_release_alarm_name("demo-1")
    assert alarms.alarms[name].period == 3600
    assert alarms.alarms[name].evaluation_periods == 2
    event = alarm_event("functions/scale_components.json", at="2026-12-09T13:00:00.000+0000")
    event["detail"]["alarmName"] = name
    event["resources"] = [alarms.arn(name)]

    early = handle(harness, event)  # READY at 11:50, only 1.2 h ago

    assert early.action == "idle_check_scheduled"
    assert alarms.resets == []
    schedule = harness.scheduler.schedules[idle_check_schedule_name("demo-1", name)]
    assert schedule["at"] == datetime(2026, 12, 9, 13, 50, tzinfo=UTC)  # READY + 2 h
    assert "ReleaseRequested" not in harness.events.types()
    assert scale_components(idle_due_event(name), harness.ports).action == "idle_alarm_rearmed"
    assert [n for n, _reason in alarms.resets] == [name]
    event["id"], event["detail"]["state"]["timestamp"] = "an-hour-later", "2026-12-09T14:00:00.000+0000"
    late = handle(harness, event)
    assert late.action == "release_requested_idle"
    assert harness.events.types().count("ReleaseRequested") == 1
    assert harness.events.puts[-1] == (
        "ReleaseRequested",
        {"schema_version": 1, "request_id": "demo-1", "reason": "idle"},
    )


# ------------------------------------------------------------------ stale news (issue 13, item 9)


def _copy_changes(sm: FakeSageMaker, h: Harness) -> tuple[int, int]:
    """(copy count changes made, scale actions recorded that change a copy count)."""
    changes = len(sm.world.names("UpdateInferenceComponentRuntimeConfig"))
    recorded = [i for i in scale_items(h) if i["action"] in ("scale_out_from_zero", "scale_in_to_zero")]
    return changes, len(recorded)


def test_an_idle_alarm_delivered_again_19_minutes_later_does_not_cut_a_busy_model(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 1)
    idle = alarm_event("eventbridge_alarm_idle.json", at="2026-12-09T12:21:00.000+0000")
    assert handle(harness, idle).action == "scale_in_to_zero"
    no_capacity = alarm_event("functions/scale_components.json", at="2026-12-09T12:30:00.000+0000")
    no_capacity["id"] = "no-capacity-1230"
    assert handle(harness, no_capacity).action == "scale_out_from_zero"
    copies(sm, EU, 4)  # target tracking under 20 requests a minute
    alarms = harness.scaling.alarms("us-east-1")
    alarms.states[idle_alarm_name("demo-1", "llama-eu")] = AlarmState(
        "OK", PLAN_START + timedelta(hours=1, minutes=3)
    )
    harness.clock.now = PLAN_START + timedelta(hours=1, minutes=10)  # 12:40: the 12:21 event once more

    again = scale_components(idle, harness.ports)

    assert again.action == "ignored"
    assert "stale news" in again.reason
    assert sm.world.components[EU].desired_copies == 4
    assert _copy_changes(sm, harness) == (2, 2)  # every change made is in the ledger


def test_a_duplicate_idle_alarm_after_a_scale_out_leaves_the_new_copy(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 1)
    idle = alarm_event("eventbridge_alarm_idle.json", at="2026-12-09T12:21:00.000+0000")
    handle(harness, idle)
    no_capacity = alarm_event("functions/scale_components.json", at="2026-12-09T12:30:00.000+0000")
    no_capacity["id"] = "no-capacity-1230"
    handle(harness, no_capacity)

    # The idle alarm is still ALARM (the new copy has not served a minute yet): the duplicate is current
    # news about the alarm, but a later scale action of the model came after it.
    again = scale_components(idle, harness.ports)

    assert again.action == "ignored"
    assert "was scaled since" in again.reason
    assert sm.world.components[EU].desired_copies == 1
    assert _copy_changes(sm, harness) == (2, 2)


def test_a_no_capacity_alarm_handled_after_its_ok_does_not_suspend_scale_in(harness: Harness) -> None:
    sm = deployed(harness)
    copies(sm, EU, 0)
    late = alarm_event("functions/scale_components.json", at="2026-12-09T12:30:00.000+0000")
    ok = alarm_event("functions/scale_components.json", state="OK", at="2026-12-09T12:32:00.000+0000")
    ok["id"] = "ok-1232"
    assert handle(harness, ok).action == "ignored"  # delivered first: no cold start under way
    harness.clock.now = PLAN_START + timedelta(hours=1, minutes=5)

    out = scale_components(late, harness.ports)  # the 12:30 ALARM, overtaken by its OK

    assert out.action == "ignored"
    assert "is OK since 2026-12-09T12:32:00.000Z" in out.reason
    assert harness.scaling.autoscaling("us-east-1").targets[EU]["scale_in_suspended"] is False
    assert sm.world.names("UpdateInferenceComponentRuntimeConfig") == []
    assert scale_items(harness) == []
