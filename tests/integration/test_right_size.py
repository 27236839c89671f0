"""Right-sizing on the local cloud (issue 33): the demo's request with its traffic as the load, through
POST /plans (each count priced from the market) and POST /reservations with right_size (1 x bought, the
decision saying why)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest

from tests.integration.support import api_event, ledger_items, make_cloud
from tests.unit.test_unit_rightsize import demo_body

pytestmark = pytest.mark.integration


def _json(answer: dict[str, Any]) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(answer["body"])
    return parsed


def test_the_plan_names_one_instance_as_enough_and_the_saving_against_two() -> None:
    with make_cloud() as cloud:
        answer = cloud.api_request(api_event(demo_body(), path="/plans"))
        assert answer["statusCode"] == 200, answer
        sizing = _json(answer)["right_size"]
    assert sizing["instance_count"] == 1
    one, two = sizing["candidates"]
    assert (one["instance_count"], one["rejected_requests"], one["requests"]) == (1, 60, 86_400)
    assert (one["idle_percent"], two["idle_percent"]) == (0, 50)
    assert Decimal(one["upfront_fee_usd"]) == Decimal("995.30")
    assert Decimal(two["upfront_fee_usd"]) == Decimal("1990.60")  # the demo's purchase of 2 x
    assert sizing["text"] == (
        "1 x ml.p5.48xlarge serves this load with 0.07% of requests refused (60 of 86,400; 0% at the peak, "
        "target at most 1%), 100% of its instance-hours used; 2 x costs $995.30 more and is 50% idle "
        "(0.07% refused)."
    )


def test_right_size_buys_the_smallest_count_and_the_decision_says_why() -> None:
    with make_cloud() as cloud:
        answer = cloud.api_request(api_event(demo_body(right_size=True)))
        assert answer["statusCode"] == 202, answer
        cloud.run_until_idle()
        items = ledger_items(cloud, "eval-week-49")
        plans = cloud.client("sagemaker").list_training_plans()["TrainingPlanSummaries"]
    planned = next(item for item in items if item.get("state") == "PLANNED")
    reason = planned["detail"]["reason"]
    assert "Right-size: 1 x instead of the 2 x asked for" in reason
    assert "60 of 86,400" in reason
    assert [plan["TotalInstanceCount"] for plan in plans] == [1]
