"""Issue 13, defect 10: everything checkable is checked before approval and before purchase, in the regions
that matter, and the dry run reports it.

Before: an EC2 request naming a launch template or version that does not exist was bought and failed 12
days later at ``RunInstances``; models that do not exist got an approval request and then failed
``ModelNotFound`` (the README's own Slack example does this); ``POST /plans`` said "would buy" without
checking either.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from capacity.record_kinds import ON_DEMAND_TRY_PREFIX

from events.slack_signed_request import command_body, local_secret, proxy_event
from localcloud.cloud import LocalCloud
from tests.integration.support import (
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_ec2_capacity_blocks import blocks, create_launch_templates, ec2_request

pytestmark = pytest.mark.integration

RID = "eval-week-49"


def _with_model_name(name: str, **overrides: Any) -> dict[str, Any]:
    body = {**base_request(), **overrides}
    first = body["models"][0]
    for key in ("image", "model_data_url"):
        first.pop(key, None)
    first["model_name"] = name
    return body


def _create_model(cloud: LocalCloud, name: str, region: str) -> None:
    cloud.client("sagemaker", region).create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
        PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tgi:latest"},
    )


def _nothing_bought(cloud: LocalCloud, request_id: str) -> None:
    assert training_plans(cloud) == []
    assert blocks(cloud) == []
    assert not [i for i in ledger_items(cloud, request_id) if i["sk"] in ("PURCHASE_INTENT", "PURCHASE")]
    assert cloud.billable_resources() == []


@pytest.mark.parametrize(
    ("launch_template", "missing"),
    [
        ({"id": "lt-0123456789abcdef0"}, "launch template 'lt-0123456789abcdef0' version $Default"),
        ({"name": "gpu-workers", "version": "7"}, "launch template 'gpu-workers' version 7"),
    ],
)
def test_an_ec2_request_whose_launch_template_does_not_exist_buys_nothing(
    launch_template: dict[str, str], missing: str
) -> None:
    with make_cloud() as cloud:
        create_launch_templates(cloud)  # gpu-workers, version 1 only
        body = {**ec2_request(), "launch_template": launch_template, "approval_above_usd": "1"}
        assert post_reservation(cloud, body)["statusCode"] == 202
        request_id = body["request_id"]
        cloud.run_until_idle()
        _nothing_bought(cloud, request_id)
        seen = states(cloud, request_id)
        assert "AWAITING_APPROVAL" not in seen  # nobody is asked to approve what cannot run
        assert seen[-1] == "FAILED"
        failed = next(i for i in ledger_items(cloud, request_id) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "LaunchTemplateNotFound"
        assert f"{missing} does not exist in" in failed["detail"]["reason"]
        assert missing in slack_texts(cloud)


def test_a_missing_model_fails_before_anyone_is_asked_to_approve() -> None:
    with make_cloud() as cloud:
        assert post_reservation(cloud, _with_model_name("no-such-model"))["statusCode"] == 202
        cloud.run_until_idle()
        _nothing_bought(cloud, RID)
        seen = states(cloud, RID)
        assert "AWAITING_APPROVAL" not in seen  # the demo request asks approval above $6,000
        assert "PLANNED" not in seen
        failed = next(i for i in ledger_items(cloud, RID) if i.get("state") == "FAILED")
        assert failed["detail"]["error"] == "ModelNotFound"
        assert "no-such-model do not exist in" in failed["detail"]["reason"]
        assert "Approval needed" not in slack_texts(cloud)


def test_the_readme_slack_example_is_refused_before_approval_when_its_models_do_not_exist() -> None:
    text = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama-eu,llama-us max=30000 approval=1000"
    with make_cloud() as cloud:
        stamp = int(cloud.now().timestamp())
        answer = cloud.api_request(
            proxy_event("/slack/commands", command_body(text), secret=local_secret(), timestamp=stamp)
        )
        assert answer["statusCode"] == 200
        request_id = json.loads(answer["body"])["text"].split("`")[1]
        cloud.run_until_idle()
        seen = states(cloud, request_id)
        assert "AWAITING_APPROVAL" not in seen
        assert seen[-1] == "FAILED"
        assert training_plans(cloud) == []
        assert "llama-eu, llama-us do not exist in" in slack_texts(cloud)


def test_only_regions_where_the_model_exists_are_chosen() -> None:
    with make_cloud() as cloud:
        _create_model(cloud, "llama-west", "us-west-2")
        body = _with_model_name("llama-west")
        body.pop("approval_above_usd", None)
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        (plan,) = training_plans(cloud)
        assert ":us-west-2:" in plan["TrainingPlanArn"]
        planned = next(i for i in ledger_items(cloud, RID) if i.get("state") == "PLANNED")
        assert (
            "Not considered: us-east-1 (SageMaker model 'llama-west' does not exist in us-east-1"
            in (planned["detail"]["reason"])
        )


def _plan(cloud: LocalCloud, body: dict[str, Any]) -> dict[str, Any]:
    answer = cloud.api_request(api_event(body, path="/plans"))
    assert answer["statusCode"] == 200, answer
    result: dict[str, Any] = json.loads(answer["body"])
    return result


def test_the_dry_run_reports_what_does_not_exist_and_would_buy_nothing() -> None:
    with make_cloud() as cloud:
        missing = _plan(cloud, _with_model_name("no-such-model"))
        assert missing["decision"] == "NOT_DEPLOYABLE"
        assert missing["recommendation"] is None
        assert "would buy it" not in missing["reason"].lower()
        assert "no-such-model do not exist in" in missing["reason"]
        assert set(missing["unusable_regions"]) == {"us-east-1", "us-west-2", "us-east-2"}
        create_launch_templates(cloud)
        ec2 = _plan(cloud, {**ec2_request(), "launch_template": {"name": "gpu-workers", "version": "7"}})
        assert ec2["decision"] == "NOT_DEPLOYABLE"
        assert "launch template 'gpu-workers' version 7 does not exist in" in ec2["reason"]
        _create_model(cloud, "llama-west", "us-west-2")
        some = _plan(cloud, _with_model_name("llama-west"))
        assert some["decision"] == "DRY_RUN"
        assert some["recommendation"]["region"] == "us-west-2"
        assert set(some["unusable_regions"]) == {"us-east-1", "us-east-2"}
        assert training_plans(cloud) == []


def test_slack_plan_reports_the_missing_models() -> None:
    text = "plan 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama-eu max=30000"
    with make_cloud() as cloud:
        stamp = int(cloud.now().timestamp())
        answer = cloud.api_request(
            proxy_event("/slack/commands", command_body(text), secret=local_secret(), timestamp=stamp)
        )
        reply = json.loads(answer["body"])["text"]
        assert "NOT_DEPLOYABLE" in reply
        assert "llama-eu do not exist in" in reply


def test_on_demand_skips_a_region_without_the_model_and_serves_from_one_with_it() -> None:
    body = _with_model_name(
        "llama-west", earliest_start="2026-11-29T12:00:00Z", latest_end="2026-12-03T12:00:00Z"
    )
    body.pop("approval_above_usd", None)  # on demand for the window costs more than the demo's threshold
    with make_cloud() as cloud:
        _create_model(cloud, "llama-west", "us-west-2")
        post_reservation(cloud, body)
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        tries = sorted(
            (i for i in ledger_items(cloud, RID) if i["sk"].startswith(ON_DEMAND_TRY_PREFIX)),
            key=lambda t: int(t["order"]),
        )
        assert [(t["region"], t["outcome"]) for t in tries] == [
            ("us-east-1", "not-usable"),
            ("us-west-2", "in-service"),
        ]
        assert "llama-west' does not exist in us-east-1" in tries[0]["error"]
        created = [c.region for c in cloud.dispatcher.calls if c.operation == "CreateEndpoint"]
        assert created == ["us-west-2"]
        assert training_plans(cloud) == []
