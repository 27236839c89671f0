"""Release: order of deletions, idempotency, verification and the cost summary."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from capacity.contracts.finding import ChooseInput, SearchInput
from capacity.contracts.purchase import PurchaseInput
from capacity.contracts.release import ReleaseInput, ReleaseOutput
from capacity.contracts.serving import ComponentsInput, EndpointInput
from capacity.errors import InvalidRequest, LeftoverResources, ReleaseStuck, ResourceBusy, RetryableAwsError
from capacity.lifecycle import Event
from capacity.logic.sagemaker.deploy import create_endpoint, create_inference_components
from capacity.logic.sagemaker.teardown import MAX_POLL_ATTEMPTS
from capacity.logic.steps.choose import choose_offering
from capacity.logic.steps.purchase import purchase_capacity
from capacity.logic.steps.release import release_capacity, retry_delay
from capacity.logic.steps.search import search_offerings
from capacity.records import State
from capacity.request import parse_request

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
    h.activate(request.id)
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


def delete_everything(h: Harness, sm: FakeSageMaker) -> None:
    """Every release action up to ``finish``, with SageMaker finishing each deletion."""
    for action in ("begin", "delete_components"):
        release(h, action)
    sm.finish_deletions()
    release(h, "delete_endpoint")
    sm.finish_deletions()
    release(h, "delete_endpoint_config")


def test_full_release_deletes_in_order_and_reports_the_cost(harness: Harness) -> None:
    sm = deployed(harness)
    harness.clock.now = PLAN_START + timedelta(hours=71)  # scheduled release: 1 h before the end
    assert release(harness, "begin", "reservation-end") == ReleaseOutput(done=False, platform="sagemaker")
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
    deletes = [(c[0], c[1].get("name")) for c in harness.world.calls if c[0].startswith("Delete")]
    # Each resource is deleted once; once the (eventually consistent) listing or describe no longer shows
    # them, the deterministic names are deleted once more, which answers not-found: gone for sure.
    assert deletes == [
        ("DeleteInferenceComponent", "co-demo-1-llama-eu"),
        ("DeleteInferenceComponent", "co-demo-1-llama-us"),
        ("DeleteInferenceComponent", "co-demo-1-llama-eu"),
        ("DeleteInferenceComponent", "co-demo-1-llama-us"),
        ("DeleteEndpoint", "co-demo-1"),
        ("DeleteEndpoint", "co-demo-1"),
        ("DeleteEndpointConfig", "co-demo-1-config"),
    ]
    history = [e.state for e in harness.ledger.history("demo-1")]
    assert history[-2:] == [State.RELEASING, State.RELEASED]
    assert harness.events.types()[-1] == "ReservationReleased"
    assert "co-demo-1-release" in harness.scheduler.deleted
    assert "RELEASED" in harness.slack.texts()[-1]
    assert "Hours served" in harness.slack.texts()[-1]


def test_release_twice_records_released_once(harness: Harness) -> None:
    sm = deployed(harness)
    delete_everything(harness, sm)
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
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Scheduled")  # paid: nothing to wait for
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


def poll(h: Harness, action: str, attempt: int) -> ReleaseOutput:
    return release_capacity(
        ReleaseInput.model_validate({"request_id": "demo-1", "action": action, "attempt": attempt}), h.ports
    )


def test_components_stuck_deleting_back_off_then_fail_naming_what_still_bills(harness: Harness) -> None:
    deployed(harness)
    waits = []
    attempt = 0
    for _ in range(MAX_POLL_ATTEMPTS):
        out = poll(harness, "delete_components", attempt)
        assert (out.done, out.remaining) == (False, 2)  # Deleting components still bill: still remaining
        waits.append(out.next_wait_seconds)
        attempt = out.attempt
    assert waits[:6] == [30, 60, 120, 240, 300, 300]
    assert attempt == MAX_POLL_ATTEMPTS
    with pytest.raises(ReleaseStuck) as stuck:
        poll(harness, "delete_components", attempt)
    message = str(stuck.value)
    assert "still billing: inference component co-demo-1-" in message
    assert message.count("(Deleting)") == 2
    assert "about 127 minutes" in message


def test_endpoint_stuck_deleting_fails_at_the_deadline(harness: Harness) -> None:
    sm = deployed(harness)
    release(harness, "delete_components")
    sm.finish_deletions()
    first = poll(harness, "delete_endpoint", 0)
    assert (first.done, first.remaining, first.attempt) == (False, 1, 1)
    assert poll(harness, "delete_endpoint", 5).next_wait_seconds == 300
    with pytest.raises(ReleaseStuck, match=r"still billing: endpoint co-demo-1 \(Deleting\)"):
        poll(harness, "delete_endpoint", MAX_POLL_ATTEMPTS)


@pytest.mark.parametrize(
    ("detail", "field"),
    [
        ({"schema_version": 1, "reason": "x"}, "request_id"),
        ({"request_id": 5, "reason": "x"}, "request_id"),
        ({"request_id": "", "reason": "x"}, "request_id"),
    ],
)
def test_begin_rejects_a_bad_release_requested_detail(
    harness: Harness, detail: dict[str, object], field: str
) -> None:
    deployed(harness)
    with pytest.raises(InvalidRequest) as bad:
        release_capacity(
            ReleaseInput.model_validate({"request_id": "", "action": "begin", "detail": detail}),
            harness.ports,
        )
    assert [e.field for e in bad.value.errors] == [field]
    assert State.RELEASING not in [e.state for e in harness.ledger.history("demo-1")]


def test_begin_takes_request_id_and_reason_from_the_detail(harness: Harness) -> None:
    deployed(harness)
    detail = {"schema_version": 1, "request_id": "demo-1", "reason": "cancelled"}
    out = release_capacity(
        ReleaseInput.model_validate({"request_id": "demo-1", "action": "begin", "detail": detail}),
        harness.ports,
    )
    assert out == ReleaseOutput(done=False, platform="sagemaker")
    releasing = harness.ledger.history("demo-1")[-1]
    assert (releasing.state, releasing.detail["reason"]) == (State.RELEASING, "cancelled")


def _attempt_failed(h: Harness, attempt_id: str, error: str = "RetryableAwsError") -> ReleaseOutput:
    return release_capacity(
        ReleaseInput.model_validate(
            {
                "request_id": "demo-1",
                "action": "attempt_failed",
                "attempt_id": attempt_id,
                "error": {"Error": error, "Cause": "DeleteInferenceComponent throttled after retries"},
            }
        ),
        h.ports,
    )


def test_a_failed_attempt_names_every_leftover_schedules_the_next_and_is_told_once(harness: Harness) -> None:
    deployed(harness)
    first = _attempt_failed(harness, "arn:exec:1")
    assert first.attempt == 1
    assert first.retry_at == harness.clock() + timedelta(minutes=10)
    assert set(first.leftovers) >= {
        "endpoint co-demo-1 (InService)",
        "endpoint config co-demo-1-config",
        "inference component co-demo-1-llama-eu (InService)",
        "inference component co-demo-1-llama-us (InService)",
        "scalable target inference-component/co-demo-1-llama-eu",
    }
    assert harness.scheduler.schedules["co-demo-1-retry-1"]["reason"] == "release-retry"
    again = _attempt_failed(harness, "arn:exec:1")  # the task retried: nothing twice
    assert (again.attempt, again.retry_at) == (1, first.retry_at)
    second = _attempt_failed(harness, "arn:exec:2")
    assert (second.attempt, second.retry_at) == (2, harness.clock() + timedelta(minutes=20))
    failed = [e for e in harness.ledger.history("demo-1") if e.detail.get("phase") == "release"]
    assert [e.detail["attempt"] for e in failed] == [1, 2]
    assert harness.events.types().count("ReservationFailed") == 2
    alerts = [t for t in harness.slack.texts() if "RELEASE FAILED" in t]
    assert len(alerts) == 2
    assert "endpoint config co-demo-1-config" in alerts[0]
    assert "tried again at" in alerts[0]


def test_a_listing_that_fails_too_names_what_may_be_left(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    deployed(harness)

    def throttled(*args: object, **kwargs: object) -> None:
        raise RetryableAwsError("SageMaker ListInferenceComponents throttled")

    monkeypatch.setattr(FakeSageMaker, "list_inference_components", throttled)
    out = _attempt_failed(harness, "arn:exec:1")
    assert any(
        "endpoint co-demo-1, endpoint config co-demo-1-config, inference components co-demo-1-llama-eu"
        in left
        and "not checked: SageMaker ListInferenceComponents throttled" in left
        for left in out.leftovers
    )
    assert out.retry_at is not None


def test_retries_back_off_to_hourly_and_never_stop() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 4, 50)] == [
        timedelta(minutes=10),
        timedelta(minutes=20),
        timedelta(minutes=40),
        timedelta(hours=1),
        timedelta(hours=1),
    ]


def test_a_release_that_died_after_its_marker_is_recorded_by_the_next_attempt(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    sm = deployed(harness)
    delete_everything(harness, sm)
    record = harness.ledger.record

    def failing_record(request_id: str, event: Event, **kwargs: object) -> object:
        if event is Event.FINISH_RELEASE:  # DynamoDB answers 5xx after the marker was put
            raise RetryableAwsError("PutItem: ServiceUnavailable")
        return record(request_id, event, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(harness.ledger, "record", failing_record)
    with pytest.raises(RetryableAwsError):
        release(harness, "finish")
    monkeypatch.setattr(harness.ledger, "record", record)
    retried = release(harness, "finish")  # the state machine's retry
    assert not retried.already_released
    assert [e.state for e in harness.ledger.history("demo-1")].count(State.RELEASED) == 1
    assert harness.ledger.history("demo-1")[-1].detail["summary"] == retried.to_json()["summary"]
    assert "co-demo-1-release" in harness.scheduler.deleted
    assert release(harness, "finish").already_released


def test_a_release_after_a_purchase_that_died_unrecorded_records_it_first(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the purchase Lambda bought the plan and died before writing PURCHASE (then a cancel came)
    request = parse_request(request_body(), now=NOW)
    harness.ledger.record_request(request, actor="test")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    search_offerings(SearchInput(request_id=request.id, region="us-east-1"), harness.ports)
    plan = choose_offering(ChooseInput(request_id=request.id), harness.ports)
    assert plan.offering is not None
    put_once = harness.ledger.put_once

    def dying_put_once(request_id: str, sk: str, *args: object, **kwargs: object) -> object:
        if sk == "PURCHASE":
            raise RetryableAwsError("Sandbox.Timedout")  # the Lambda stops here
        return put_once(request_id, sk, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(harness.ledger, "put_once", dying_put_once)
    with pytest.raises(RetryableAwsError):
        purchase_capacity(PurchaseInput(request_id=request.id, offering=plan.offering), harness.ports)
    monkeypatch.setattr(harness.ledger, "put_once", put_once)
    assert harness.ledger.get(request.id, "PURCHASE") is None

    # When the release begins, it asks AWS first: the plan is recorded with its money and release schedule
    waiting = release(harness, "begin", "cancelled")
    purchased = [e for e in harness.ledger.history("demo-1") if e.state is State.PURCHASED]
    assert [e.money_usd for e in purchased] == [Decimal("8000")]
    assert harness.ledger.get(request.id, "PURCHASE") is not None
    # While the plan's payment is Pending the release waits for its outcome (issue 29), then goes on
    assert waiting.payment_wait_seconds > 0
    harness.world.client("us-east-1").set_plan_status("co-demo-1", "Scheduled")
    assert not release(harness, "begin", "cancelled").done
    assert [e.state for e in harness.ledger.history("demo-1")][-1] is State.RELEASING
