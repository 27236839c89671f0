"""The local cloud's IAM policy evaluation (IAM User Guide, "Policy evaluation logic" and "Condition
operators"), on documents written the way the template and AWS managed policies write them."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.iam.policy import (
    Decision,
    PolicyError,
    RequestContext,
    decide,
    glob_match,
    parse_conditions,
    parse_policy,
)

ENDPOINT = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/co-eval"


def _decide(statements: list[dict[str, Any]], action: str, resource: str, **context: Any) -> Decision:
    return decide(parse_policy({"Statement": statements}, "test"), action, resource, RequestContext(context))


def test_an_allow_is_needed() -> None:
    allow = {"Effect": "Allow", "Action": "sagemaker:DescribeEndpoint", "Resource": ENDPOINT}
    assert _decide([allow], "sagemaker:DescribeEndpoint", ENDPOINT) is Decision.ALLOW
    assert _decide([allow], "sagemaker:DeleteEndpoint", ENDPOINT) is Decision.NO_ALLOW
    assert _decide([], "sagemaker:DescribeEndpoint", ENDPOINT) is Decision.NO_ALLOW


def test_an_explicit_deny_wins_over_any_allow() -> None:
    statements = [
        {"Effect": "Allow", "Action": "sagemaker:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "sagemaker:DeleteEndpoint", "Resource": ENDPOINT},
        {"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": ENDPOINT},
    ]
    assert _decide(statements, "sagemaker:DeleteEndpoint", ENDPOINT) is Decision.EXPLICIT_DENY
    assert _decide(statements, "sagemaker:DescribeEndpoint", ENDPOINT) is Decision.ALLOW


def test_not_action_and_not_resource_cover_everything_else() -> None:
    not_action = [{"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}]
    assert _decide(not_action, "sagemaker:ListTags", ENDPOINT) is Decision.ALLOW
    assert _decide(not_action, "iam:PassRole", "arn:aws:iam::123456789012:role/r") is Decision.NO_ALLOW
    not_resource = [
        {"Effect": "Deny", "Action": "sagemaker:*", "NotResource": "arn:aws:sagemaker:*:*:endpoint/co-*"}
    ]
    other = "arn:aws:sagemaker:us-east-1:123456789012:endpoint/theirs"
    assert _decide(not_resource, "sagemaker:DeleteEndpoint", other) is Decision.EXPLICIT_DENY
    assert _decide(not_resource, "sagemaker:DeleteEndpoint", ENDPOINT) is Decision.NO_ALLOW


def test_wildcards_star_and_question_mark_actions_case_insensitive_resources_not() -> None:
    assert glob_match("arn:aws:sagemaker:*:123456789012:endpoint/co-*", ENDPOINT)
    assert glob_match("arn:aws:sagemaker:us-east-?:*:endpoint/co-eval", ENDPOINT)
    assert not glob_match("arn:aws:sagemaker:us-east-?:*:endpoint/co-eval", ENDPOINT.replace("-1:", "-10:"))
    assert not glob_match("arn:aws:sagemaker:*:*:endpoint/CO-*", ENDPOINT)  # resources are case-sensitive
    statement = {"Effect": "Allow", "Action": "SageMaker:describe*", "Resource": "*"}
    assert _decide([statement], "sagemaker:DescribeEndpoint", ENDPOINT) is Decision.ALLOW
    assert not glob_match("a[b]c", "abc")  # only * and ? are special


def _holds(block: dict[str, Any], **context: Any) -> bool:
    (condition,) = parse_conditions(block, "test")
    return condition.holds(RequestContext(context))


@pytest.mark.parametrize(
    ("block", "context", "expected"),
    [
        # iam:PassedToService (the template's PassRole statements)
        (
            {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            {"iam:PassedToService": "scheduler.amazonaws.com"},
            True,
        ),
        (
            {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
            {"iam:PassedToService": "ec2.amazonaws.com"},
            False,
        ),
        ({"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}, {}, False),
        # StringNotEquals: a missing key satisfies a negated operator
        (
            {"StringNotEquals": {"aws:SourceAccount": "123456789012"}},
            {"aws:SourceAccount": "210987654321"},
            True,
        ),
        (
            {"StringNotEquals": {"aws:SourceAccount": "123456789012"}},
            {"aws:SourceAccount": "123456789012"},
            False,
        ),
        ({"StringNotEquals": {"aws:SourceAccount": "123456789012"}}, {}, True),
        # StringLike / StringNotLike (iam:AWSServiceName of CreateServiceLinkedRole)
        (
            {"StringLike": {"iam:AWSServiceName": "sagemaker.application-autoscaling.*"}},
            {"iam:AWSServiceName": "sagemaker.application-autoscaling.amazonaws.com"},
            True,
        ),
        (
            {"StringLike": {"iam:AWSServiceName": "sagemaker.application-autoscaling.*"}},
            {"iam:AWSServiceName": "spot.amazonaws.com"},
            False,
        ),
        (
            {"StringNotLike": {"events:source": "capacity.*"}},
            {"events:source": ["capacity.orchestrator"]},
            False,
        ),
        ({"StringNotLike": {"events:source": "capacity.*"}}, {"events:source": ["aws.ec2"]}, True),
        # ArnEquals / ArnLike: each ARN part separately (Lambda permissions' aws:SourceArn)
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:execute-api:us-east-1:123456789012:api1/*/POST/plans"}},
            {"aws:SourceArn": "arn:aws:execute-api:us-east-1:123456789012:api1/v1/POST/plans"},
            True,
        ),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:execute-api:*:123456789012:api1/*/POST/plans"}},
            {"aws:SourceArn": "arn:aws:execute-api:us-east-1:123456789012:api1/v1/GET/plans"},
            False,
        ),
        (
            {"ArnLike": {"aws:SourceArn": "arn:aws:events:*:123456789012:rule/*"}},
            {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:extra:rule/x"},
            False,
        ),
        (
            {"ArnEquals": {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/r"}},
            {"aws:SourceArn": "arn:aws:events:us-east-1:123456789012:rule/r"},
            True,
        ),
        ({"ArnNotLike": {"aws:SourceArn": "arn:aws:events:*:*:rule/r"}}, {}, True),
        # Null (the template's "only instances tagged with a request id")
        (
            {"Null": {"aws:RequestTag/capacity-orchestrator:request-id": "false"}},
            {"aws:RequestTag/capacity-orchestrator:request-id": "r1"},
            True,
        ),
        ({"Null": {"aws:RequestTag/capacity-orchestrator:request-id": "false"}}, {}, False),
        ({"Null": {"aws:RequestTag/capacity-orchestrator:request-id": "true"}}, {}, True),
        # Bool
        ({"Bool": {"aws:SecureTransport": "true"}}, {"aws:SecureTransport": "true"}, True),
        ({"Bool": {"aws:SecureTransport": True}}, {"aws:SecureTransport": "false"}, False),
        # ec2:CreateAction of tag-on-create
        (
            {"StringEquals": {"ec2:CreateAction": ["RunInstances", "PurchaseCapacityBlock"]}},
            {"ec2:CreateAction": "PurchaseCapacityBlock"},
            True,
        ),
        ({"StringEquals": {"ec2:CreateAction": "RunInstances"}}, {"ec2:CreateAction": "CreateVolume"}, False),
        # ForAnyValue / ForAllValues on aws:TagKeys
        (
            {"ForAnyValue:StringEquals": {"aws:TagKeys": ["capacity-orchestrator:request-id"]}},
            {"aws:TagKeys": ["team", "capacity-orchestrator:request-id"]},
            True,
        ),
        (
            {"ForAnyValue:StringEquals": {"aws:TagKeys": ["capacity-orchestrator:request-id"]}},
            {"aws:TagKeys": ["team"]},
            False,
        ),
        ({"ForAnyValue:StringEquals": {"aws:TagKeys": ["capacity-orchestrator:request-id"]}}, {}, False),
        (
            {"ForAllValues:StringLike": {"aws:TagKeys": ["capacity-orchestrator:*"]}},
            {"aws:TagKeys": ["capacity-orchestrator:request-id", "capacity-orchestrator:model"]},
            True,
        ),
        (
            {"ForAllValues:StringLike": {"aws:TagKeys": ["capacity-orchestrator:*"]}},
            {"aws:TagKeys": ["capacity-orchestrator:request-id", "team"]},
            False,
        ),
        ({"ForAllValues:StringLike": {"aws:TagKeys": ["capacity-orchestrator:*"]}}, {}, True),
        # ...IfExists: absent key passes, present key must match
        ({"StringEqualsIfExists": {"aws:RequestTag/team": "ml"}}, {}, True),
        ({"StringEqualsIfExists": {"aws:RequestTag/team": "ml"}}, {"aws:RequestTag/team": "web"}, False),
        # keys compare case-insensitively
        (
            {"StringEquals": {"AWS:SourceAccount": "123456789012"}},
            {"aws:sourceaccount": "123456789012"},
            True,
        ),
    ],
)
def test_condition_operators(block: dict[str, Any], context: dict[str, Any], expected: bool) -> None:
    assert _holds(block, **context) is expected


def test_resource_tags_are_read_lazily_and_only_when_asked() -> None:
    calls: list[int] = []

    def tags() -> dict[str, str]:
        calls.append(1)
        return {"capacity-orchestrator:request-id": "r1"}

    (tagged,) = parse_conditions({"Null": {"aws:ResourceTag/capacity-orchestrator:request-id": "false"}}, "t")
    (other,) = parse_conditions({"StringEquals": {"aws:SourceAccount": "1"}}, "t")
    context = RequestContext({"aws:SourceAccount": "1"}, tags)
    assert other.holds(context)
    assert calls == []
    assert tagged.holds(context)
    assert calls == [1]
    assert not tagged.holds(RequestContext({}, dict))  # an untagged resource


def test_unknown_operators_and_malformed_statements_are_refused_not_allowed() -> None:
    with pytest.raises(PolicyError, match="DateGreaterThan"):
        parse_conditions({"DateGreaterThan": {"aws:CurrentTime": "2026-01-01T00:00:00Z"}}, "t")
    with pytest.raises(PolicyError, match="exactly one of Action and NotAction"):
        parse_policy({"Statement": [{"Effect": "Allow", "Resource": "*"}]}, "t")
    with pytest.raises(PolicyError, match="Allow or Deny"):
        parse_policy({"Statement": [{"Effect": "allow", "Action": "s3:GetObject", "Resource": "*"}]}, "t")


def test_resource_based_statements_name_their_principals() -> None:
    (statement,) = parse_policy(
        {
            "Statement": {
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "lambda:InvokeFunction",
                "Resource": "arn:aws:lambda:us-east-1:123456789012:function:f",
            }
        },
        "t",
        resource_based=True,
    )
    assert statement.names_principal(
        principal_arn=None, role_arn=None, account=None, service="events.amazonaws.com"
    )
    assert not statement.names_principal(
        principal_arn="arn:aws:sts::123456789012:assumed-role/r/s",
        role_arn="arn:aws:iam::123456789012:role/r",
        account="123456789012",
        service=None,
    )
