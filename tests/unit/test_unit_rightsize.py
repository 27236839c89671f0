"""Right-sizing (issue 33): the serving simulation (servingsim) and the request's load / right_size."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from capacity.errors import InvalidRequest
from capacity.planner import right_size_note
from capacity.request import parse_request
from capacity.rightsize import candidate_counts, describe

from servingsim import Hardware, ModelLoad, Requirements, simulate

ROOT = Path(__file__).resolve().parents[2]
P5 = Hardware(8, 192, 2048 * 1024)
LLAMA = Requirements(2, 16, 131072)


def demo_body(**overrides: Any) -> dict[str, Any]:
    """The demo's request (events/api_post_reservation.json) with the demo's traffic as its load."""
    event = json.loads((ROOT / "events" / "api_post_reservation.json").read_text())
    profile = json.loads((ROOT / "events" / "traffic_two_models.json").read_text())
    body: dict[str, Any] = json.loads(event["body"])
    load = {
        "models": [
            {"model": m["model"], "requests_per_minute": m["requests_per_minute"]} for m in profile["models"]
        ]
    }
    return {**body, "load": load, **overrides}


def test_the_demo_load_fits_on_one_instance_and_two_are_half_idle() -> None:
    """Seed 004's two models, one busy 00:00-11:59 UTC, the other 12:00-23:59, for 72 h: each peaks at 4
    copies of 2 accelerators, which one ml.p5.48xlarge (8) holds; the only refusals are the cold starts
    (3 minutes at 4 requests a minute, when a model comes back from zero copies), the same on 1 or 2."""
    request = parse_request(demo_body(right_size=True), now=None)

    sizing = request.sizing
    assert sizing is not None
    assert (sizing.requested_count, sizing.instance_count, request.instance_count) == (2, 1, 1)
    one, two = sizing.candidates
    assert (one.instance_count, one.requests, one.rejected_requests) == (1, 86_400, 60)
    assert (one.rejected_percent, one.peak_rejected_percent, one.worst_hour_rejected_percent) == (0.069, 0, 5)
    assert (one.instance_hours_used, one.idle_percent, one.peak_instances) == (72, 0, 1)
    assert (two.rejected_requests, two.instance_hours_used, two.idle_percent) == (60, 72, 50)
    assert one.meets_target
    assert two.meets_target
    assert sizing.needed_instances_by_hour == [1] * 72
    assert sizing.text == (
        "1 x ml.p5.48xlarge serves this load with 0.07% of requests refused (60 of 86,400; 0% at the peak, "
        "target at most 1%), 100% of its instance-hours used; 2 x is 50% idle (0.07% refused)."
    )
    from decimal import Decimal

    priced = describe(sizing, {1: Decimal("995.30"), 2: Decimal("1990.60")})
    assert priced.endswith("; 2 x costs $995.30 more and is 50% idle (0.07% refused).")
    note = right_size_note(request)
    assert note.startswith(
        " Right-size: 1 x instead of the 2 x asked for, the smallest count meeting the target"
    )
    assert "simulated from 2026-12-06T00:00:00Z for 72 h" in note


def test_a_request_re_read_keeps_its_sizing_and_a_door_replaces_a_sent_one() -> None:
    first = parse_request(demo_body(right_size=True), now=None)
    stored = first.model_dump(mode="json")
    again = parse_request(stored, now=None)
    assert again.sizing == first.sizing
    assert again.instance_count == 1
    assert again.request_id == first.request_id
    forged = {**demo_body(right_size=True), "sizing": {**stored["sizing"], "instance_count": 64}}
    at_door = parse_request(forged, now=datetime(2026, 11, 29, 12, tzinfo=UTC))
    assert at_door.sizing is not None
    assert at_door.sizing.instance_count == 1


def test_a_load_without_right_size_sizes_nothing_at_parse() -> None:
    request = parse_request(demo_body(), now=None)
    assert request.sizing is None
    assert request.instance_count == 2
    assert request.load is not None
    assert request.simulate_load(request.load).instance_count == 1


def test_a_peak_that_needs_two_instances_gets_two() -> None:
    """One model at 70 requests a minute, 10 per copy at most: target tracking asks 7 copies, 4 fit on one
    instance, so one instance refuses 30 of every 70 and two serve all but the first minutes."""
    body = demo_body(right_size=True)
    body["models"] = [{**body["models"][0], "copies": {"initial": 1, "min": 1, "max": 8}}]
    body["load"] = {
        "models": [
            {
                "model": body["models"][0]["name"],
                "requests_per_minute": [70] * 24,
                "requests_per_minute_per_copy": 10,
            }
        ],
        "max_rejected_percent": 1,
    }
    request = parse_request(body, now=None)
    sizing = request.sizing
    assert sizing is not None
    assert request.instance_count == sizing.instance_count == 2
    one, two = sizing.candidates
    assert not one.meets_target
    assert one.rejected_percent == pytest.approx(42.9, abs=0.1)  # 30 of 70 once the 4 copies run
    assert two.meets_target
    assert two.rejected_percent < 1
    assert two.peak_instances == 2


def test_a_target_no_count_meets_is_said_plainly_with_the_best_that_exists() -> None:
    """Four copies of 5 requests a minute serve 20 of each model's 100: no instance count helps."""
    body = demo_body(right_size=True)
    body["load"] = {
        "models": [
            {"model": model["name"], "requests_per_minute": [100] * 24, "requests_per_minute_per_copy": 5}
            for model in body["models"]
        ],
        "max_rejected_percent": 1,
    }
    request = parse_request(body, now=None)
    sizing = request.sizing
    assert sizing is not None
    assert sizing.instance_count is None
    assert request.instance_count == 2  # the count asked for stays
    assert sizing.best == 2  # 8 copies (4 a model, both at once) need 2 instances; 1 holds 4 (90% refused)
    assert sizing.text.startswith(
        "No instance count of ml.p5.48xlarge meets the target of at most 1% of requests refused: the best, "
        "2 x ml.p5.48xlarge, refuses 80."
    )
    assert "More instances would not help" in sizing.text
    assert "So the count asked for, 2 x, is searched." in right_size_note(request)


def test_candidates_reach_the_count_every_copy_at_once_needs() -> None:
    request = parse_request(demo_body(), now=None)
    assert candidate_counts(request.instance_type, request.models, 2) == [1, 2]
    models = [m.model_copy(update={"copies": m.copies.model_copy(update={"max": 6})}) for m in request.models]
    assert candidate_counts(request.instance_type, models, 1) == [1, 2, 4]  # 12 copies need 3: 4 is sold


def test_load_names_models_of_the_request_and_right_size_needs_a_load() -> None:
    body = demo_body(right_size=True)
    body["load"]["models"][0]["model"] = "llama-3-8b-fr"
    with pytest.raises(InvalidRequest) as raised:
        parse_request(body, now=None)
    assert "'llama-3-8b-fr' is not a model of the request" in str(raised.value)
    without = {key: value for key, value in demo_body(right_size=True).items() if key != "load"}
    with pytest.raises(InvalidRequest) as raised:
        parse_request(without, now=None)
    assert "right_size: needs load" in str(raised.value)


def test_one_candidate_over_72_hours_is_stepped_by_minute_whatever_the_rate() -> None:
    """4,320 steps for 72 h; a busy profile counts requests, it does not draw them."""
    busy = ModelLoad("m", LLAMA, 1, 0, 4, [10_000.0] * 24, requests_per_minute_per_copy=100.0)
    outcome = simulate(P5, 1, [busy], start=datetime(2026, 12, 6, tzinfo=UTC), hours=72)
    assert outcome.sent == 10_000 * 60 * 72
    assert outcome.models[0].peak_copies == 4
    assert len(outcome.needed) == 72
