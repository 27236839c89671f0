"""Release: order of deletions, idempotency, verification and the cost summary."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from capacity.contracts import (
    ChooseInput,
    ComponentsInput,
    EndpointInput,
    PurchaseInput,
    ReleaseInput,
    ReleaseOutput,
    SearchInput,
)
from capacity.errors import LeftoverResources, ResourceBusy
from capacity.logic.choose import choose_offering
from capacity.logic.deploy import create_endpoint, create_inference_components
from capacity.logic.purchase import purchase_capacity
from capacity.logic.release import release_capacity
from capacity.logic.search import search_offerings
from capacity.models import State, parse_request

from tests.unit.conftest import Harness
from tests.unit.unit_fakes import NOW, WINDOW_START, FakeSageMaker, raw_offering, request_body

PLAN_START = WINDOW_START + timedelta(days=1)


def deployed(h: Harness) -> FakeSageMaker:
    """Request recorded, plan bought ($8,000, 72 h, 2 x p5), endpoint and both components InService."""
    request = parse_request(request_body(), now=NOW)
    h.ledger.record_request(request, actor="test")
    h.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_offerings(SearchInput(request_id=request.id, region="us-east-1"), h.ports)
    plan = choose_offering(ChooseInput(request_id=request.id), h.ports)
    assert plan.offering is not None
    purchase_capacity(PurchaseInput(request_id=request.id, offering=plan.offering), h.ports)
    sm = h.world.client("us-east-1")
    h.clock.now = PLAN_START + timedelta(minutes=5)
    create_endpoint(EndpointInput(request_id=request.id, action="create"), h.ports)
    sm.set_endpoint_status("co-demo-1", "InService")
    h.clock.now = PLAN_START + timedelta(minutes=15)
    out = create_inference_components(ComponentsInput(request_id=request.id, action="create"), h.ports)
    for name in out.component_names:
        sm.set_component_status(name, "InService")
    h.clock.now = PLAN_START + timedelta(minutes=20)
    create_inference_components(ComponentsInput(request_id=request.id, action="status"), h.ports)
    return sm


def release(h: Harness, action: str, reason: str | None = None) -> ReleaseOutput:
    return release_capacity(
        ReleaseInput.model_validate({"request_id": "demo-1", "action": action, "reason": reason}), h.ports
    )


def test_full_release_deletes_in_order_and_reports_the_cost(harness: Harness) -> None:
    sm = deployed(harness)
    harness.clock.now = PLAN_START + timedelta(hours=71)  # scheduled release: 1 h before the end
    assert release(harness, "begin", "reservation-end") == ReleaseOutput(done=False)
    # the endpoint refuses to go while components remain
    with pytest.raises(ResourceBusy, match="still hosts 2 inference component"):
        release(harness, "delete_endpoint")
    first = release(harness, "delete_components")
    assert (first.done, first.remaining, first.next_wait_seconds) == (False, 2, 30)
    sm.finish_deletions()
    assert release(harness, "delete_components").done
    deleting = release(harness, "delete_endpoint")
    assert (deleting.done, deleting.remaining) == (False, 1)
    with pytest.raises(ResourceBusy, match="still exists"):
        release(harness, "delete_endpoint_config")
    sm.finish_deletions()
    assert release(harness, "delete_endpoint").done
    assert release(harness, "delete_endpoint_config").done
    harness.clock.advance(minutes=5)
    out = release(harness, "finish")
    assert out.done
    assert not out.already_released
    summary = out.to_json()["summary"]
    # 72 h reserved; served from READY (plan start + 20 min) to RELEASING (start + 71 h) = 70.67 h
    assert summary["upfront_fee_usd"] == "8000"
    assert summary["hours_reserved"] == "72.00"
    assert summary["hours_served"] == "70.67"
    assert summary["on_demand_equivalent_reserved_usd"] == "7925.76"
    # 2 x 70.6667 h x $55.04 = $7,778.99 on demand for the hours served, against an $8,000 fee
    assert summary["on_demand_equivalent_served_usd"] == "7778.99"
    assert summary["saving_usd"] == "-221.01"
    assert summary["utilisation_percent"] == "98.1"
    assert summary["break_even_utilisation_percent"] == "100.9"
    assert [c[0] for c in harness.world.calls if c[0].startswith("Delete")] == [
        "DeleteInferenceComponent",
        "DeleteInferenceComponent",
        "DeleteEndpoint",
        "DeleteEndpointConfig",
    ]
    history = [e.state for e in harness.ledger.history("demo-1")]
    assert history[-2:] == [State.RELEASING, State.RELEASED]
    assert harness.events.types()[-1] == "ReservationReleased"
    assert "co-demo-1-release" in harness.scheduler.deleted
    assert "RELEASED" in harness.slack.texts()[-1]
    assert "Hours served" in harness.slack.texts()[-1]


def test_release_twice_records_released_once(harness: Harness) -> None:
    sm = deployed(harness)
    for action in ("begin", "delete_components"):
        release(harness, action)
    sm.finish_deletions()
    release(harness, "delete_endpoint")
    sm.finish_deletions()
    release(harness, "delete_endpoint_config")
    first = release(harness, "finish")
    # a second release (e.g. the schedule fires after a cancel) finds it released at once
    again = release(harness, "begin", "reservation-end")
    finish_again = release(harness, "finish")
    assert again.already_released
    assert again.summary == first.summary
    assert finish_again.already_released
    assert [e.state for e in harness.ledger.history("demo-1")].count(State.RELEASED) == 1
    assert harness.events.types().count("ReservationReleased") == 1


def test_release_is_a_no_op_when_nothing_was_bought(harness: Harness) -> None:
    request = parse_request(request_body(), now=NOW)
    harness.ledger.record_request(request, actor="test")
    for action in ("begin", "delete_components", "delete_endpoint", "delete_endpoint_config", "finish"):
        out = release(harness, action)
        assert out == ReleaseOutput(done=True)
    assert [e.state for e in harness.ledger.history("demo-1")] == [State.REQUESTED]
    assert harness.world.calls == []


def test_release_after_purchase_but_before_deployment_reports_zero_served_hours(harness: Harness) -> None:
    request = parse_request(request_body(), now=NOW)
    harness.ledger.record_request(request, actor="test")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_offerings(SearchInput(request_id=request.id, region="us-east-1"), harness.ports)
    plan = choose_offering(ChooseInput(request_id=request.id), harness.ports)
    assert plan.offering is not None
    purchase_capacity(PurchaseInput(request_id=request.id, offering=plan.offering), harness.ports)
    for action in ("begin", "delete_components", "delete_endpoint", "delete_endpoint_config"):
        assert release(harness, action).done in (True, False)
    out = release(harness, "finish")
    assert out.summary is not None
    assert out.summary.hours_served == Decimal("0.00")
    assert out.summary.effective_usd_per_served_instance_hour is None


def test_busy_endpoint_is_retried_not_deleted(harness: Harness) -> None:
    sm = deployed(harness)
    release(harness, "delete_components")
    sm.finish_deletions()
    sm.set_endpoint_status("co-demo-1", "Updating")
    with pytest.raises(ResourceBusy, match="Updating"):
        release(harness, "delete_endpoint")
    assert harness.world.names("DeleteEndpoint") == []


def test_finish_refuses_when_tagged_resources_remain(harness: Harness) -> None:
    deployed(harness)
    with pytest.raises(LeftoverResources, match="co-demo-1-config"):
        release(harness, "finish")
    assert State.RELEASED not in [e.state for e in harness.ledger.history("demo-1")]
