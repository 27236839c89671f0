"""Handlers end to end on moto (DynamoDB, EventBridge, Scheduler) with a fake SageMaker.

Every output must survive ``json.dumps`` without ``default`` (as the Lambda runtime serialises it), carry
timestamps as ``...Z`` strings and money as strings, and stay far below Step Functions' 256 KB.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import boto3
import pytest
import time_machine
from capacity.record_kinds import STATE_PREFIX
from capacity.records import State

from tests.unit.conftest import REGION
from tests.unit.handler_support import bus_queue, drain, invoke, load_handler
from tests.unit.scaling_fakes import ScalingWorld
from tests.unit.unit_fakes import NOW, WINDOW_START, World, raw_offering, request_body

LIMIT = 256 * 1024


@pytest.fixture
def world(aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """A fake SageMaker behind the handlers (``Ports`` builds ``SageMakerAdapter(region)``)."""
    fake = World()
    monkeypatch.setattr("capacity.adapters.sagemaker.SageMakerAdapter", fake.client)
    scaling = ScalingWorld()
    monkeypatch.setattr("capacity.adapters.autoscaling.AutoScalingAdapter", scaling.autoscaling)
    monkeypatch.setattr("capacity.adapters.cloudwatch.AlarmsAdapter", scaling.alarms)
    boto3.client("scheduler", region_name=REGION).create_schedule_group(Name="capacity-orchestrator")
    with time_machine.travel(NOW, tick=False):
        yield fake


def requested_event(**overrides: Any) -> dict[str, Any]:
    return {
        "version": "0",
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "detail-type": "ReservationRequested",
        "source": "capacity.orchestrator",
        "account": "123456789012",
        "time": "2026-12-01T09:00:00Z",
        "region": REGION,
        "resources": [],
        "detail": {"schema_version": 1, "request": request_body(**overrides)},
    }


def states() -> list[str]:
    table = boto3.client("dynamodb", region_name=REGION)
    items = table.query(
        TableName="ledger",
        KeyConditionExpression="request_id = :r AND begins_with(sk, :p)",
        ExpressionAttributeValues={":r": {"S": "demo-1"}, ":p": {"S": STATE_PREFIX}},
    )["Items"]
    return [item["state"]["S"] for item in items]


def test_record_request_handler_validates_and_dedupes(world: World) -> None:
    handler = load_handler("record_request")
    first = invoke(handler, requested_event())
    assert first == {
        "request_id": "demo-1",
        "platform": "sagemaker",
        "duplicate": False,
        "regions": ["us-east-1", "us-west-2"],
        "dry_run": False,
        "resume_offering": None,
        "brought": False,
        "continued": False,
        "look": 0,
        "invalid": None,
        "invalid_error": "InvalidRequest",
    }
    retry = invoke(handler, requested_event())  # the same delivery again (same event id)
    other = requested_event()
    other["id"] = "another-delivery"
    duplicate = invoke(handler, other)
    assert retry["duplicate"] is False
    assert duplicate["duplicate"] is True
    assert states() == ["REQUESTED"]


def test_record_request_rejects_with_field_names(world: World) -> None:
    handler = load_handler("record_request")
    from capacity.errors import InvalidRequest

    with pytest.raises(InvalidRequest) as caught:
        invoke(handler, requested_event(duration_hours=30))
    assert [e.field for e in caught.value.errors] == ["request.duration_hours"]


def test_whole_lifecycle_through_the_handlers_is_json_safe(world: World) -> None:
    world.add_offerings(REGION, raw_offering("tpo-1", fee="8000"))
    h = {
        name: load_handler(name)
        for name in (
            "record_request",
            "search_offerings",
            "choose_offering",
            "purchase_capacity",
            "wait_for_activation",
            "create_endpoint",
            "create_inference_components",
            "release_capacity",
        )
    }
    outputs: list[Any] = [invoke(h["record_request"], requested_event())]
    searches = [
        invoke(h["search_offerings"], {"request_id": "demo-1", "region": r})
        for r in ("us-east-1", "us-west-2")
    ]
    choice = invoke(h["choose_offering"], {"request_id": "demo-1", "searches": searches})
    assert choice["decision"] == "PURCHASE"
    purchase = invoke(h["purchase_capacity"], {"request_id": "demo-1", "offering": choice["offering"]})
    assert purchase["start_time"] == "2026-12-09T11:30:00Z"
    assert purchase["upfront_fee_usd"] == "8000"
    schedules = boto3.client("scheduler", region_name=REGION).list_schedules(
        GroupName="capacity-orchestrator"
    )
    assert [s["Name"] for s in schedules["Schedules"]] == ["co-demo-1-release"]

    sm = world.client(REGION)
    sm.set_plan_status("co-demo-1", "Active")
    activation = invoke(
        h["wait_for_activation"],
        {"request_id": "demo-1", "platform": "sagemaker", "purchase": purchase, "attempt": 0},
    )
    assert activation == {"status": "Active", "attempt": 1, "next_wait_seconds": 60, "platform": "sagemaker"}
    endpoint = invoke(h["create_endpoint"], {"request_id": "demo-1", "action": "create"})
    sm.set_endpoint_status("co-demo-1", "InService")
    status = invoke(h["create_endpoint"], {"request_id": "demo-1", "action": "status", "attempt": 1})
    assert status["status"] == "InService"
    components = invoke(h["create_inference_components"], {"request_id": "demo-1", "action": "create"})
    for name in components["component_names"]:
        sm.set_component_status(name, "InService")
    ready = invoke(
        h["create_inference_components"], {"request_id": "demo-1", "action": "status", "attempt": 1}
    )
    assert ready["status"] == "InService"

    release = []
    for action in ("begin", "delete_components", "delete_endpoint", "delete_endpoint_config", "finish"):
        release.append(
            invoke(h["release_capacity"], {"request_id": "demo-1", "action": action, "reason": "cancelled"})
        )
        sm.finish_deletions()
    assert release[-1]["done"] is True
    assert release[-1]["summary"]["hours_reserved"] == "72.00"
    outputs += [*searches, choice, purchase, activation, endpoint, status, components, ready, *release]
    for output in outputs:
        text = json.dumps(output)
        assert "ResponseMetadata" not in text
        assert len(text) < 4096
    assert states() == [
        "REQUESTED",
        "PLANNED",
        "PURCHASED",
        "SCHEDULED",
        "ACTIVE",
        "DEPLOYING",
        "READY",
        "RELEASING",
        "RELEASED",
    ]


def test_outputs_stay_small_with_500_offerings(world: World) -> None:
    items = [
        raw_offering(f"tpo-{i:03d}", fee=str(9000 - i), start=WINDOW_START + timedelta(hours=i % 70))
        for i in range(500)
    ]
    world.add_offerings(REGION, *items)
    invoke(load_handler("record_request"), requested_event())
    search = invoke(load_handler("search_offerings"), {"request_id": "demo-1", "region": REGION})
    choice = invoke(load_handler("choose_offering"), {"request_id": "demo-1", "searches": [search] * 2})
    assert search["count"] == 500
    assert len(json.dumps(search)) < LIMIT // 100
    assert len(json.dumps(choice)) < LIMIT // 100
    assert choice["offering"]["upfront_fee_usd"] == "8501"


def test_handler_without_its_environment_fails_with_the_variable_name(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity.errors import ConfigurationError

    monkeypatch.delenv("OFFERINGS_TABLE")
    with pytest.raises(ConfigurationError, match="OFFERINGS_TABLE"):
        invoke(load_handler("search_offerings"), {"request_id": "demo-1", "region": REGION})


def test_notify_failure_handler_records_failed(world: World) -> None:
    invoke(load_handler("record_request"), requested_event())
    tap = bus_queue("capacity-orchestrator")
    out = invoke(
        load_handler("notify"),
        {"kind": "failure", "request_id": "demo-1", "error": {"Error": "States.Timeout", "Cause": None}},
    )
    assert out == {"notified": True, "state": State.FAILED.value}
    assert [e["detail-type"] for e in drain(tap)] == ["ReservationFailed"]
