"""IAM bites: take one grant a principal needs out of the loaded template and its call is denied, named.

Each case removes an action from the role's statements (the template as the SAM transform produced it,
changed in ``cloud.stack`` before the cloud starts), makes one invocation, and checks the invocation fails
with AWS's denial for that action and that the denial is on the timeline with the role. Issue 12's first
bullet: with ``sagemaker:ListTags`` denied, a purchase must not adopt a plan another request bought.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from events.slack_signed_request import local_secret, resigned
from localcloud.cloud import LocalCloud
from tests.integration.support import (
    ROOT,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
)

FUNCTIONS = ROOT / "events/functions"


def revoke(cloud: LocalCloud, role: str, action: str) -> int:
    """Remove ``action`` from every inline statement of ``role`` (logical id); returns how many it left."""
    removed = 0
    properties = cloud.stack.resources[role].properties
    for policy in properties.get("Policies") or []:
        statements = policy["PolicyDocument"]["Statement"]
        statements = statements if isinstance(statements, list) else [statements]
        kept = []
        for statement in statements:
            actions = statement.get("Action")
            listed = actions if isinstance(actions, list) else [actions]
            if action not in listed:
                kept.append(statement)
                continue
            removed += 1
            rest = [a for a in listed if a != action]
            if rest:
                kept.append({**statement, "Action": rest})
        policy["PolicyDocument"] = {**policy["PolicyDocument"], "Statement": kept}
    properties["Policies"] = [p for p in properties.get("Policies") or [] if p["PolicyDocument"]["Statement"]]
    return removed


def _invoke(cloud: LocalCloud, function: str, event: str) -> dict[str, Any]:
    spec = cloud.stack.function(function)
    result = cloud.lambdas.invoke(spec.arn, (FUNCTIONS / event).read_bytes())
    payload: dict[str, Any] = json.loads(result.payload or b"{}")
    return {"error": result.function_error, **payload}


def _record(cloud: LocalCloud) -> None:
    answer = _invoke(cloud, "RecordRequestFunction", "record_request.json")
    assert answer["error"] is None, answer


def _denied(cloud: LocalCloud, role: str, action: str) -> list[dict[str, Any]]:
    assert cloud.iam is not None
    return [
        {"resource": d.resource, "message": d.message}
        for d in cloud.iam.denials
        if d.action == action and d.role == cloud.stack.physical_id(role)
    ]


# (function, the action taken from its role, needs the request recorded first, its input)
SINGLE_INVOCATIONS = [
    ("RecordRequestFunction", "dynamodb:PutItem", False, "record_request.json"),
    ("SearchOfferingsFunction", "sagemaker:SearchTrainingPlanOfferings", True, "search_offerings.json"),
    ("ChooseOfferingFunction", "events:PutEvents", True, "choose_offering.json"),
    ("NotifyFunction", "events:PutEvents", True, "notify.json"),
    ("PurchaseCapacityFunction", "sagemaker:CreateTrainingPlan", True, "purchase_capacity.json"),
    # Dependent actions of CreateTrainingPlan (Service Authorization Reference): without either, AWS refuses
    # the purchase, so the local cloud does.
    ("PurchaseCapacityFunction", "sagemaker:CreateReservedCapacity", True, "purchase_capacity.json"),
    ("PurchaseCapacityFunction", "sagemaker:AddTags", True, "purchase_capacity.json"),
    ("WaitForActivationFunction", "sagemaker:DescribeTrainingPlan", True, "wait_for_activation.json"),
    ("CreateEndpointFunction", "dynamodb:GetItem", True, "create_endpoint.json"),
    ("CreateInferenceComponentsFunction", "dynamodb:GetItem", True, "create_inference_components.json"),
    ("LaunchInstancesFunction", "dynamodb:GetItem", False, "launch_instances.json"),
    ("OnDemandFunction", "dynamodb:GetItem", False, "on_demand.json"),
    ("ReleaseCapacityFunction", "dynamodb:GetItem", True, "release_capacity.json"),
    ("ScaleComponentsFunction", "cloudwatch:ListTagsForResource", False, "scale_components.json"),
    ("CapacityBlockEventsFunction", "ec2:DescribeCapacityReservations", False, "capacity_block_events.json"),
    ("ScheduledRequestFunction", "events:PutEvents", False, "scheduled_request.json"),
]


@pytest.mark.parametrize(("function", "action", "recorded", "event"), SINGLE_INVOCATIONS)
def test_a_function_without_a_grant_it_needs_is_denied(
    function: str, action: str, recorded: bool, event: str
) -> None:
    cloud = make_cloud()
    role = f"{function}Role"
    assert revoke(cloud, role, action) >= 1
    with cloud:
        if recorded:
            _record(cloud)
        answer = _invoke(cloud, function, event)
        denials = _denied(cloud, role, action)
        denial_lines = [e.text for e in cloud.timeline.entries("iam")]
    assert answer["error"] == "Unhandled", answer
    assert f"is not authorized to perform: {action} on resource:" in answer["errorMessage"]
    assert denials, f"no {action} denial recorded for {role}"
    assert any(cloud.stack.physical_id(role) in line and action in line for line in denial_lines)


def test_the_api_without_sagemaker_search_cannot_plan() -> None:
    cloud = make_cloud()
    assert revoke(cloud, "ApiFunctionRole", "sagemaker:SearchTrainingPlanOfferings") == 1
    with cloud:
        answer = cloud.api_request(api_event(base_request(), path="/plans"))
        denials = _denied(cloud, "ApiFunctionRole", "sagemaker:SearchTrainingPlanOfferings")
    assert answer["statusCode"] >= 500, answer
    assert denials
    assert denials[0]["resource"] == "*"


def test_the_slack_door_without_its_signing_secret_answers_no_command() -> None:
    cloud = make_cloud()
    assert revoke(cloud, "SlackFunctionRole", "secretsmanager:GetSecretValue") >= 1
    with cloud:
        event = json.loads((ROOT / "events/slack_command_help.json").read_text())
        answer = cloud.api_request(
            resigned(event, secret=local_secret(), timestamp=int(cloud.now().timestamp()))
        )
        denials = _denied(cloud, "SlackFunctionRole", "secretsmanager:GetSecretValue")
    assert answer["statusCode"] != 200 or "help" not in answer["body"].lower(), answer
    assert denials
    assert denials[0]["resource"] == cloud.stack.physical_id("SlackSigningSecret")


def test_a_state_machine_role_without_invoke_fails_the_execution_at_its_first_task() -> None:
    cloud = make_cloud()
    revoke(cloud, "ReserveCapacityStateMachineRole", "lambda:InvokeFunction")
    with cloud:
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run_until_idle()
        (execution,) = [
            e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")
        ]
        denials = _denied(cloud, "ReserveCapacityStateMachineRole", "lambda:InvokeFunction")
        items = ledger_items(cloud, "eval-week-49")
    assert execution.status == "FAILED"  # the RecordRequest task failed with Lambda's AccessDeniedException
    assert denials[0]["resource"] == cloud.stack.function("RecordRequestFunction").arn
    # RecordRequest never ran; the stopped workflow failed the request its door accepted (a 202 always ends
    # in an outcome someone is told about). OUTBOX#SUBMITTED: the door's ReservationRequested was put.
    assert sorted(item["sk"].split("#")[0] for item in items) == [
        "CURRENT",
        "OUTBOX",
        "OUTCOME",
        "STATE",
        "SUBMITTED",
    ]
    assert {item.get("state") for item in items if item["sk"].startswith("STATE#")} == {"FAILED"}


def test_a_rule_target_role_without_start_execution_starts_nothing() -> None:
    cloud = make_cloud()
    role = "ReserveCapacityStateMachineReservationRequestedRole"
    assert revoke(cloud, role, "states:StartExecution") == 1
    with cloud:
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run_until_idle()
        executions = cloud.executions()
        not_reached = [d for d in cloud.delivery.deliveries if d.error]
    assert executions == []
    assert any("states:StartExecution" in (d.error or "") for d in not_reached)


def test_api_gateway_without_the_lambda_permission_answers_500() -> None:
    cloud = make_cloud()
    del cloud.stack.resources["ApiFunctionPostReservationPermissionv1"]
    with cloud:
        answer = post_reservation(cloud, base_request())
        other = cloud.api_request(api_event({}, method="GET", path="/reservations/eval-week-49"))
        assert cloud.iam is not None
        denials = [d for d in cloud.iam.denials if d.principal == "apigateway.amazonaws.com"]
    assert answer["statusCode"] == 500
    assert answer["json"] == {"message": "Internal server error"}
    assert other["statusCode"] == 404  # the other routes keep their permission
    assert [d.action for d in denials] == ["lambda:InvokeFunction"]


def _plan_of_another_request(cloud: LocalCloud) -> str:
    """A plan with eval-week-49's deterministic name, bought for another request (by the machinery)."""
    sagemaker = cloud.client("sagemaker")
    request = base_request()
    offerings = sagemaker.search_training_plan_offerings(
        InstanceType=request["instance_type"],
        InstanceCount=request["instance_count"],
        DurationHours=request["duration_hours"],
        TargetResources=["endpoint"],
    )["TrainingPlanOfferings"]
    answer = sagemaker.create_training_plan(
        TrainingPlanName="co-eval-week-49",
        TrainingPlanOfferingId=offerings[0]["TrainingPlanOfferingId"],
        Tags=[{"Key": "capacity-orchestrator:request-id", "Value": "another-request"}],
    )
    return str(answer["TrainingPlanArn"])


def _purchases(cloud: LocalCloud) -> list[dict[str, Any]]:
    return [item for item in ledger_items(cloud, "eval-week-49") if item["sk"] == "PURCHASE"]


def test_a_denied_list_tags_never_lets_a_purchase_adopt_another_requests_plan() -> None:
    # Issue 12: with ListTags denied, resource_tags read "no tags" and the ownership check passed.
    cloud = make_cloud()
    assert revoke(cloud, "PurchaseCapacityFunctionRole", "sagemaker:ListTags") == 1
    with cloud:
        theirs = _plan_of_another_request(cloud)
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run_until_idle()
        purchases = _purchases(cloud)
        failures = [
            r
            for r in cloud.lambdas.records
            if r.function.endswith("PurchaseCapacityFunction") and r.error_type
        ]
    assert purchases == [], f"adopted {theirs}: {purchases}"
    assert failures
    assert {r.error_type for r in failures} == {"AccessDenied"}
    assert "sagemaker:ListTags" in json.loads(failures[0].payload)["errorMessage"]


def test_with_list_tags_granted_the_other_requests_plan_is_refused_by_name() -> None:
    with make_cloud() as cloud:
        _plan_of_another_request(cloud)
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run_until_idle()
        purchases = _purchases(cloud)
        failures = [
            r
            for r in cloud.lambdas.records
            if r.function.endswith("PurchaseCapacityFunction") and r.error_type
        ]
        assert cloud.iam is not None
        assert cloud.iam.denials == []
    assert purchases == []
    assert {r.error_type for r in failures} == {"NameCollision"}


def test_without_create_reserved_capacity_nothing_is_bought_and_the_denial_names_it() -> None:
    cloud = make_cloud()
    assert revoke(cloud, "PurchaseCapacityFunctionRole", "sagemaker:CreateReservedCapacity") == 1
    with cloud:
        _record(cloud)
        answer = _invoke(cloud, "PurchaseCapacityFunction", "purchase_capacity.json")
        denials = _denied(cloud, "PurchaseCapacityFunctionRole", "sagemaker:CreateReservedCapacity")
        plans = cloud.client("sagemaker").list_training_plans()["TrainingPlanSummaries"]
    role = cloud.stack.physical_id("PurchaseCapacityFunctionRole")
    session = cloud.stack.function("PurchaseCapacityFunction").name
    expected = (
        f"User: arn:aws:sts::123456789012:assumed-role/{role}/{session}"
        " is not authorized to perform: sagemaker:CreateReservedCapacity on resource: "
        "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/* because no identity-based policy "
        "allows the sagemaker:CreateReservedCapacity action"
    )
    assert expected in answer["errorMessage"], answer
    assert [d["resource"] for d in denials] == [
        "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/*"
    ]
    assert plans == []
