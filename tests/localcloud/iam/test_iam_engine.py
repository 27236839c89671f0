"""The local cloud's IAM engine: what a call is authorized for (Service Authorization Reference), the
extra authorizations AWS makes, resource-based policies, and who is calling."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from localcloud.iam import Iam, IamEvaluationError, Principal, TargetCaller, acting_as, current
from localcloud.iam import context as iam_context
from localcloud.iam.requests import Call, checks_for
from localcloud.iam.sar import reference
from localcloud.template import Resource

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/app-FunctionRole"
BUS = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/app-bus"
FUNCTION = f"arn:aws:lambda:us-east-1:{ACCOUNT}:function:app-Function"


class FakeLookups:
    """Lookups over fixed state: tags per ARN, one launch template."""

    def __init__(self, tags: dict[str, dict[str, str]] | None = None) -> None:
        self.tags = tags or {}

    def resource_tags(self, arn: str) -> dict[str, str] | None:
        return self.tags.get(arn)

    def scalable_target_arn(
        self, region: str, namespace: str, resource_id: str, dimension: str
    ) -> str | None:
        return None

    def launch_template(self, region: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        return ("lt-0abc", {"ImageId": "ami-1", "IamInstanceProfile": {"Name": "workers"}})

    def instance_profile_role(self, profile: dict[str, Any]) -> str | None:
        return f"arn:aws:iam::{ACCOUNT}:role/workers" if profile.get("Name") == "workers" else None

    def function_arn(self, name_or_arn: str, region: str) -> str:
        return (
            name_or_arn
            if name_or_arn.startswith("arn:")
            else f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name_or_arn}"
        )

    def queue_arn(self, queue_url: str) -> str:
        return f"arn:aws:sqs:us-east-1:{ACCOUNT}:{queue_url.rsplit('/', 1)[-1]}"


@dataclass
class FakeStack:
    """The part of :class:`localcloud.template.Stack` IAM reads."""

    resources: dict[str, Resource] = field(default_factory=dict)
    account_id: str = ACCOUNT
    region: str = "us-east-1"
    partition: str = "aws"

    def arn(self, logical_id: str) -> str:
        return f"arn:aws:iam::{ACCOUNT}:role/app-{logical_id}"

    def physical_id(self, logical_id: str) -> str:
        if self.resources[logical_id].type == "AWS::Lambda::Function":
            return "app-Function"
        return f"app-{logical_id}"


def _role(*statements: dict[str, Any], trust: str = "lambda.amazonaws.com") -> Resource:
    return Resource(
        "FunctionRole",
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": trust}, "Action": "sts:AssumeRole"}
                ]
            },
            "Policies": [{"PolicyName": "p", "PolicyDocument": {"Statement": list(statements)}}],
        },
    )


def _iam(*statements: dict[str, Any], extra: dict[str, Resource] | None = None, tags: Any = None) -> Iam:
    resources = {"FunctionRole": _role(*statements), **(extra or {})}
    return Iam(FakeStack(resources), lookups=FakeLookups(tags), now=lambda: datetime(2026, 12, 1, tzinfo=UTC))


def _authorize(iam: Iam, service: str, operation: str, params: dict[str, Any]) -> Any:
    with acting_as(Principal(ROLE, "app-Function")):
        return iam.authorize(service, operation, lambda: params, "us-east-1")


def _call(service: str, operation: str, params: dict[str, Any]) -> Call:
    return Call(service, operation, params, "us-east-1", ACCOUNT, "aws", FakeLookups())


def test_actions_and_resources_come_from_the_service_authorization_reference() -> None:
    checks = checks_for(_call("sagemaker", "DescribeEndpoint", {"EndpointName": "co-x"}), reference())
    assert [(c.action, c.resource) for c in checks] == [
        ("sagemaker:DescribeEndpoint", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/co-x")
    ]
    # SAR: CreateEndpoint needs endpoint* and endpoint-config*.
    checks = checks_for(
        _call("sagemaker", "CreateEndpoint", {"EndpointName": "co-x", "EndpointConfigName": "co-x-config"}),
        reference(),
    )
    assert {c.resource.rsplit(":", 1)[-1] for c in checks} == {"endpoint/co-x", "endpoint-config/co-x-config"}


@pytest.mark.parametrize(
    ("service", "operation", "params", "expected"),
    [
        # SAR, AWS Step Functions: SendTaskSuccess/SendTaskFailure have no resource type: only "*".
        ("sfn", "SendTaskSuccess", {"taskToken": "t", "output": "{}"}, [("states:SendTaskSuccess", "*")]),
        # SAR, AWS Lambda: the Invoke API is authorized as lambda:InvokeFunction on the function.
        ("lambda", "Invoke", {"FunctionName": "app-Function"}, [("lambda:InvokeFunction", FUNCTION)]),
        # SAR, Amazon SageMaker: SageMaker Runtime's InvokeEndpoint is sagemaker:InvokeEndpoint.
        (
            "sagemaker-runtime",
            "InvokeEndpoint",
            {"EndpointName": "co-x", "InferenceComponentName": "co-x-m", "Body": b"{}"},
            [
                ("sagemaker:InvokeEndpoint", f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/co-x"),
                (
                    "sagemaker:InvokeEndpoint",
                    f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:inference-component/co-x-m",
                ),
            ],
        ),
        # Amazon S3: ListObjectsV2 is authorized as s3:ListBucket on the bucket.
        ("s3", "ListObjectsV2", {"Bucket": "models"}, [("s3:ListBucket", "arn:aws:s3:::models")]),
        # DynamoDB: each item of a transaction is its own action on its table.
        (
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": "ledger", "Item": {}}},
                    {"ConditionCheck": {"TableName": "ledger", "Key": {}, "ConditionExpression": "x"}},
                ]
            },
            [
                ("dynamodb:PutItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/ledger"),
                ("dynamodb:ConditionCheckItem", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/ledger"),
            ],
        ),
        # An index is its own resource.
        (
            "dynamodb",
            "Query",
            {"TableName": "ledger", "IndexName": "listing"},
            [("dynamodb:Query", f"arn:aws:dynamodb:us-east-1:{ACCOUNT}:table/ledger/index/listing")],
        ),
        # Scheduler: the group defaults to "default".
        (
            "scheduler",
            "GetSchedule",
            {"Name": "s1"},
            [("scheduler:GetSchedule", f"arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/default/s1")],
        ),
        # EventBridge: one check per bus, the default bus when none is named.
        (
            "eventbridge",
            "PutEvents",
            {"Entries": [{"Source": "s", "DetailType": "d", "Detail": "{}"}]},
            [("events:PutEvents", f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/default")],
        ),
    ],
)
def test_operations_authorized_under_another_action(
    service: str, operation: str, params: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    checks = checks_for(_call(service, operation, params), reference())
    assert [(c.action, c.resource) for c in checks] == expected


def test_a_call_whose_resource_cannot_be_derived_fails_loudly() -> None:
    iam = _iam({"Effect": "Allow", "Action": "*", "Resource": "*"})
    with pytest.raises(IamEvaluationError, match="sagemaker DescribeEndpoint"):
        _authorize(iam, "sagemaker", "DescribeEndpoint", {})
    with pytest.raises(IamEvaluationError, match="no IAM service prefix"):
        _authorize(iam, "braket", "SearchDevices", {})


def test_pass_role_is_authorized_with_the_service_it_is_passed_to() -> None:
    schedule = f"arn:aws:scheduler:us-east-1:{ACCOUNT}:schedule/default/*"
    passed = f"arn:aws:iam::{ACCOUNT}:role/app-SchedulerRole"
    params = {
        "Name": "s1",
        "ScheduleExpression": "at(2026-12-01T00:00:00)",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "Target": {"Arn": BUS, "RoleArn": passed},
    }
    create = {"Effect": "Allow", "Action": "scheduler:CreateSchedule", "Resource": schedule}
    assert _authorize(_iam(create), "scheduler", "CreateSchedule", params).message.startswith(
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/app-FunctionRole/app-Function is not authorized to "
        f"perform: iam:PassRole on resource: {passed} "
        "because no identity-based policy allows the iam:PassRole action"
    )
    to_ec2 = {
        "Effect": "Allow",
        "Action": "iam:PassRole",
        "Resource": passed,
        "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
    }
    assert _authorize(_iam(create, to_ec2), "scheduler", "CreateSchedule", params) is not None
    to_scheduler = {
        **to_ec2,
        "Condition": {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
    }
    assert _authorize(_iam(create, to_scheduler), "scheduler", "CreateSchedule", params) is None


def test_tag_on_create_needs_add_tags_for_sagemaker_and_create_tags_with_create_action_for_ec2() -> None:
    endpoint = {"Effect": "Allow", "Action": "sagemaker:CreateEndpoint", "Resource": "*"}
    params = {"EndpointName": "co-x", "EndpointConfigName": "co-x", "Tags": [{"Key": "k", "Value": "v"}]}
    denied = _authorize(_iam(endpoint), "sagemaker", "CreateEndpoint", params)
    assert denied is not None
    assert "sagemaker:AddTags on resource: arn:aws:sagemaker:us-east-1" in denied.message
    add_tags = {"Effect": "Allow", "Action": "sagemaker:AddTags", "Resource": "*"}
    assert _authorize(_iam(endpoint, add_tags), "sagemaker", "CreateEndpoint", params) is None
    untagged = {k: v for k, v in params.items() if k != "Tags"}
    assert _authorize(_iam(endpoint), "sagemaker", "CreateEndpoint", untagged) is None

    purchase = {"Effect": "Allow", "Action": "ec2:PurchaseCapacityBlock", "Resource": "*"}
    block = {
        "CapacityBlockOfferingId": "cb-1",
        "InstancePlatform": "Linux/UNIX",
        "TagSpecifications": [
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "r"}],
            }
        ],
    }
    tags_for_run = {
        "Effect": "Allow",
        "Action": "ec2:CreateTags",
        "Resource": "*",
        "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
    }
    denied = _authorize(_iam(purchase, tags_for_run), "ec2", "PurchaseCapacityBlock", block)
    assert denied is not None
    assert denied.code == "UnauthorizedOperation"
    assert "ec2:CreateTags" in denied.message
    tags_for_purchase = {
        **tags_for_run,
        "Condition": {"StringEquals": {"ec2:CreateAction": "PurchaseCapacityBlock"}},
    }
    assert _authorize(_iam(purchase, tags_for_purchase), "ec2", "PurchaseCapacityBlock", block) is None


def test_run_instances_authorizes_every_resource_of_the_launch_and_the_instance_profile() -> None:
    checks = checks_for(
        _call(
            "ec2",
            "RunInstances",
            {"MinCount": 1, "MaxCount": 1, "LaunchTemplate": {"LaunchTemplateName": "w"}},
        ),
        reference(),
    )
    run = {c.resource.split(":", 5)[5] for c in checks if c.action == "ec2:RunInstances"}
    assert run == {
        "image/ami-1",
        "instance/*",
        "network-interface/*",
        "volume/*",
        "subnet/*",
        "security-group/*",
        "launch-template/lt-0abc",
    }
    (pass_role,) = [c for c in checks if c.action == "iam:PassRole"]
    assert pass_role.resource == f"arn:aws:iam::{ACCOUNT}:role/workers"
    assert pass_role.context["iam:passedtoservice"] == "ec2.amazonaws.com"


def test_resource_tags_condition_reads_the_current_tags() -> None:
    instance = f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/i-1"
    statement = {
        "Effect": "Allow",
        "Action": "ec2:TerminateInstances",
        "Resource": f"arn:aws:ec2:*:{ACCOUNT}:instance/*",
        "Condition": {"Null": {"aws:ResourceTag/capacity-orchestrator:request-id": "false"}},
    }
    params = {"InstanceIds": ["i-1"]}
    tagged = _iam(statement, tags={instance: {"capacity-orchestrator:request-id": "r1"}})
    assert _authorize(tagged, "ec2", "TerminateInstances", params) is None
    untagged = _iam(statement, tags={instance: {"team": "other"}})
    assert _authorize(untagged, "ec2", "TerminateInstances", params) is not None


def _bus_policy(effect: str, condition: dict[str, Any] | None = None) -> Resource:
    statement: dict[str, Any] = {
        "Effect": effect,
        "Principal": {"AWS": ROLE},
        "Action": "events:PutEvents",
        "Resource": BUS,
    }
    if condition:
        statement["Condition"] = condition
    return Resource(
        "BusPolicy",
        "AWS::Events::EventBusPolicy",
        {"EventBusName": "app-bus", "StatementId": "s", "Statement": statement},
    )


def test_event_bus_policy_same_account_identity_or_resource_allows_and_an_explicit_deny_wins() -> None:
    entries = {
        "Entries": [
            {"Source": "capacity.orchestrator", "DetailType": "d", "Detail": "{}", "EventBusName": "app-bus"}
        ]
    }
    assert _authorize(_iam(), "eventbridge", "PutEvents", entries) is not None  # nothing allows
    allow_by_bus = _iam(extra={"BusPolicy": _bus_policy("Allow")})
    assert _authorize(allow_by_bus, "eventbridge", "PutEvents", entries) is None  # the resource policy alone
    identity = {"Effect": "Allow", "Action": "events:PutEvents", "Resource": BUS}
    deny_by_bus = _iam(
        identity,
        extra={
            "BusPolicy": _bus_policy("Deny", {"StringEquals": {"events:source": "capacity.orchestrator"}})
        },
    )
    denied = _authorize(deny_by_bus, "eventbridge", "PutEvents", entries)
    assert denied is not None
    assert "with an explicit deny in a resource-based policy" in denied.message
    other_source = {"Entries": [{**entries["Entries"][0], "Source": "someone.else"}]}
    assert _authorize(deny_by_bus, "eventbridge", "PutEvents", other_source) is None


def test_lambda_permissions_let_a_service_invoke_only_from_their_source_arn() -> None:
    rule = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/app-rule"
    permission = Resource(
        "Permission",
        "AWS::Lambda::Permission",
        {
            "Action": "lambda:InvokeFunction",
            "FunctionName": "app-Function",
            "Principal": "events.amazonaws.com",
            "SourceArn": rule,
        },
    )
    iam = _iam(extra={"Permission": permission})
    assert iam.authorize_target(TargetCaller("events.amazonaws.com", rule, None), FUNCTION) is None
    other_rule = rule.replace("app-rule", "other-rule")
    denial = iam.authorize_target(TargetCaller("events.amazonaws.com", other_rule, None), FUNCTION)
    assert denial is not None
    assert denial.message == (
        "User: events.amazonaws.com is not authorized to perform: lambda:InvokeFunction on resource: "
        f"{FUNCTION} because no resource-based policy allows the lambda:InvokeFunction action"
    )


def test_a_target_role_must_trust_the_service_and_allow_the_delivery() -> None:
    machine = f"arn:aws:states:us-east-1:{ACCOUNT}:stateMachine:app-machine"
    start = {"Effect": "Allow", "Action": "states:StartExecution", "Resource": machine}
    iam = Iam(
        FakeStack({"FunctionRole": _role(start, trust="events.amazonaws.com")}),
        lookups=FakeLookups(),
        now=lambda: datetime(2026, 12, 1, tzinfo=UTC),
    )
    rule = f"arn:aws:events:us-east-1:{ACCOUNT}:rule/r"
    assert iam.authorize_target(TargetCaller("events.amazonaws.com", rule, ROLE), machine) is None
    untrusted = iam.authorize_target(TargetCaller("scheduler.amazonaws.com", rule, ROLE), machine)
    assert untrusted is not None
    assert untrusted.action == "sts:AssumeRole"
    other = machine.replace("app-machine", "other")
    refused = iam.authorize_target(TargetCaller("events.amazonaws.com", rule, ROLE), other)
    assert refused is not None
    assert refused.action == "states:StartExecution"


def test_machinery_is_not_evaluated_and_denials_are_recorded_with_role_action_resource() -> None:
    iam = _iam()
    assert iam.authorize("sagemaker", "DescribeEndpoint", lambda: {"EndpointName": "x"}, "us-east-1") is None
    assert iam.denials == []
    _authorize(iam, "sagemaker", "DescribeEndpoint", {"EndpointName": "x"})
    (denial,) = iam.denials
    assert (denial.role, denial.action, denial.resource) == (
        "app-FunctionRole",
        "sagemaker:DescribeEndpoint",
        f"arn:aws:sagemaker:us-east-1:{ACCOUNT}:endpoint/x",
    )


@pytest.mark.parametrize(
    ("service", "code", "status"),
    [
        ("sagemaker", "AccessDeniedException", 400),
        ("dynamodb", "AccessDeniedException", 400),
        ("scheduler", "AccessDeniedException", 400),
        ("sfn", "AccessDeniedException", 400),
        ("eventbridge", "AccessDeniedException", 400),
        ("ec2", "UnauthorizedOperation", 403),
        ("cloudwatch", "AccessDenied", 403),
        ("lambda", "AccessDeniedException", 403),
    ],
)
def test_denials_answer_each_services_own_error(service: str, code: str, status: int) -> None:
    from localcloud.iam import denied_error

    error = denied_error(service, "User: x is not authorized to perform: a on resource: r because ...")
    assert (error.code, error.status) == (code, status)
    if service == "ec2":
        assert error.message.startswith("You are not authorized to perform this operation. User: x")


def test_principals_stack_per_thread_inherited_by_started_threads_and_machinery_while_parked() -> None:
    principal = Principal(ROLE, "app-Function")
    seen: list[Principal | None] = []
    iam_context.install_thread_inheritance()
    try:
        with acting_as(principal):
            assert current() == principal
            thread = threading.Thread(target=lambda: seen.append(current()))
            thread.start()
            thread.join()
            iam_context.on_park()
            assert current() is None  # parked: the thread may drive the clock for others
            iam_context.on_unpark()
            assert current() == principal
            with acting_as(None):
                assert current() is None
        assert current() is None
    finally:
        iam_context.uninstall_thread_inheritance()
    other: list[Principal | None] = []
    with acting_as(principal):
        thread = threading.Thread(target=lambda: other.append(current()))
        thread.start()
        thread.join()
    assert seen == [principal]
    assert other == [None]  # without inheritance installed, a new thread starts as nobody
    assert principal.arn == f"arn:aws:sts::{ACCOUNT}:assumed-role/app-FunctionRole/app-Function"
