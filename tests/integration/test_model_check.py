"""A ``model_name`` that names no SageMaker model in the purchase region fails the reservation before any
money is spent (issue 5 found ``/gpu reserve models=x`` buying a plan, then failing at
CreateInferenceComponent); the same request succeeds once the model exists there."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.support import (
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _with_model_name(name: str) -> dict[str, Any]:
    body = base_request()
    first = body["models"][0]
    for field in ("image", "model_data_url"):
        first.pop(field, None)
    first["model_name"] = name
    return body


def test_a_missing_model_fails_before_the_purchase_and_names_the_model() -> None:
    with make_cloud() as cloud:
        assert post_reservation(cloud, _with_model_name("no-such-model"))["statusCode"] == 202
        cloud.run_until_idle()
        assert training_plans(cloud) == []
        assert not [i for i in ledger_items(cloud, RID) if i["sk"] in ("PURCHASE_INTENT", "PURCHASE")]
        seen = states(cloud, RID)
        assert seen[-1] == "FAILED"
        assert "PURCHASED" not in seen
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "ModelNotFound"
        assert "no-such-model do not exist in us-east-1" in failed["detail"]["reason"]
        assert "no-such-model" in slack_texts(cloud)
        assert cloud.billable_resources() == []
