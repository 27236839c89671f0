"""Instance type rules per strategy (ml.g6.* on demand only) and the platform ec2 cross-field rules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from capacity.request import parse_request

from tests.unit.test_unit_ec2_requests import ec2_body, rejection
from tests.unit.unit_fakes import NOW, request_body

SOON = NOW + timedelta(minutes=30)
TRAINING_PLAN_TYPES = (
    "ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge, ml.p5.4xlarge, ml.p5e.48xlarge, ml.p5en.48xlarge, "
    "ml.p6-b200.48xlarge, ml.trn1.32xlarge, ml.trn2.48xlarge"
)


def g6_body(**overrides: Any) -> dict[str, Any]:
    """1 x ml.g6.12xlarge (4 x L4) for 24 h with two one-GPU models, starting in 30 minutes."""
    body = request_body(
        instance_type="ml.g6.12xlarge",
        instance_count=1,
        earliest_start=SOON.isoformat(),
        latest_end=(SOON + timedelta(hours=48)).isoformat(),
        duration_hours=24,
    )
    body["models"] = [{**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in body["models"]]
    return {**body, **overrides}


def test_g6_starting_now_is_accepted_on_demand_first() -> None:
    request = parse_request(g6_body(), now=NOW)
    assert request.strategy == "on-demand-first"
    assert request.instance_type == "ml.g6.12xlarge"


def test_g6_with_an_explicit_on_demand_first_strategy_is_accepted() -> None:
    assert parse_request(g6_body(strategy="on-demand-first"), now=NOW).strategy == "on-demand-first"


def test_g6_reserved_is_rejected_naming_the_training_plan_types() -> None:
    message = rejection(g6_body(strategy="reserved"))["instance_type"]
    assert message.startswith(
        "ml.g6.12xlarge has no SageMaker training plan (botocore's ReservedCapacityInstanceType does not "
        f"list it), so strategy reserved cannot reserve it: training plans reserve {TRAINING_PLAN_TYPES}."
    )
    assert "start the window within the next hour (strategy on-demand-first)" in message


def test_design_example_a_g6_window_weeks_ahead_defaults_to_reserved_and_is_rejected() -> None:
    # DESIGN.md: /gpu reserve 4 ml.g6.12xlarge 1d from 2026-12-10 -> a future window, strategy reserved
    problems = rejection(
        g6_body(
            instance_count=4,
            earliest_start="2026-12-10T00:00:00Z",
            latest_end="2026-12-12T00:00:00Z",
        )
    )
    assert list(problems) == ["instance_type"]
    assert "strategy reserved cannot reserve it" in problems["instance_type"]


def test_g6_problems_are_reported_with_the_other_rule_problems() -> None:
    problems = rejection(g6_body(strategy="reserved", release_margin_minutes=1440))
    assert set(problems) == {"instance_type", "release_margin_minutes"}


def test_an_unknown_sagemaker_type_names_both_lists() -> None:
    message = rejection(g6_body(instance_type="ml.g5.12xlarge"))["instance_type"]
    assert message.startswith(
        f"'ml.g5.12xlarge' is not a supported instance type: training plans reserve {TRAINING_PLAN_TYPES}; "
        "on demand only (strategy on-demand-first, no training plan): ml.g6.12xlarge, "
    )


def test_a_training_plan_type_is_accepted_with_every_sagemaker_strategy() -> None:
    for strategy in ("reserved", "on-demand-first"):
        assert parse_request(request_body(strategy=strategy), now=NOW).strategy == strategy


def test_idle_policy_is_rejected_for_ec2() -> None:
    problems = rejection(ec2_body(idle_policy={"action": "release", "idle_hours": 2}))
    assert problems == {
        "idle_policy": "releases on a SageMaker endpoint's idle invocations; platform ec2 has no endpoint "
        "(its instances are terminated before the capacity block ends): remove idle_policy"
    }


def test_model_scaling_is_rejected_for_ec2() -> None:
    model = {**request_body()["models"][0], "scaling": {"target_invocations_per_copy": 5.0}}
    problems = rejection(ec2_body(models=[model]))
    assert problems["models.0.scaling"] == (
        "scales inference component copies on a SageMaker endpoint; platform ec2 has none: remove scaling"
    )
    assert "models" in problems


def test_idle_policy_and_scaling_stay_valid_for_sagemaker() -> None:
    body = request_body(idle_policy={"action": "release", "idle_hours": 2})
    body["models"][0]["scaling"] = {"target_invocations_per_copy": 5.0}
    request = parse_request(body, now=NOW)
    assert request.idle_policy is not None
    assert request.models[0].scaling is not None
