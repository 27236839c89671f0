"""Adapters: exact AWS requests (botocore Stubber) and the translation of AWS errors."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
import time_machine
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from capacity.adapters import clients
from capacity.adapters.events import EventPublisher
from capacity.adapters.sagemaker import SageMakerAdapter
from capacity.adapters.scheduler import ReleaseScheduler
from capacity.adapters.slack import SlackDirectory, SlackNotifier, token_from_secret
from capacity.adapters.stepfunctions import TaskTokens
from capacity.errors import (
    AccessDenied,
    ConfigurationError,
    NotAwaitingApproval,
    OfferingExpired,
    PurchaseFailed,
    QuotaExceeded,
    ResourceBusy,
    RetryableAwsError,
    SlackUnavailable,
    TrainingPlanNameInUse,
)
from capacity.events import ReservationReleasedDetail
from capacity.logic.sagemaker.deploy import component_specification, production_variant
from capacity.request import parse_request
from capacity.resources import SlackMessage, tags_for
from moto import mock_aws
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse

from tests.unit.unit_fakes import NOW, request_body

PLAN_ARN = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/co-demo-1"
ROLE = "arn:aws:iam::123456789012:role/sagemaker-endpoint"


@pytest.fixture
def sagemaker(env: dict[str, str]) -> Iterator[tuple[SageMakerAdapter, Stubber]]:
    client = boto3.client("sagemaker", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield SageMakerAdapter("us-east-1", client), stubber
        stubber.assert_no_pending_responses()


def test_create_endpoint_config_request_is_exactly_what_aws_facts_require(
    sagemaker: tuple[SageMakerAdapter, Stubber],
) -> None:
    adapter, stubber = sagemaker
    request = parse_request(request_body(), now=NOW)
    stubber.add_response(
        "create_endpoint_config",
        {"EndpointConfigArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/co-demo-1-config"},
        {
            "EndpointConfigName": "co-demo-1-config",
            "ExecutionRoleArn": ROLE,
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "demo-1"}],
            "ProductionVariants": [
                {
                    "VariantName": "main",
                    "InstanceType": "ml.p5.48xlarge",
                    "InitialInstanceCount": 2,
                    "CapacityReservationConfig": {
                        "MlReservationArn": PLAN_ARN,
                        "CapacityReservationPreference": "capacity-reservations-only",
                    },
                    "ManagedInstanceScaling": {
                        "Status": "ENABLED",
                        "MinInstanceCount": 1,
                        "MaxInstanceCount": 2,
                    },
                    "RoutingConfig": {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"},
                }
            ],
        },
    )
    created = adapter.create_endpoint_config(
        name="co-demo-1-config",
        variant=production_variant(request, PLAN_ARN),
        execution_role_arn=ROLE,
        tags=tags_for("demo-1"),
    )
    assert created


def test_create_inference_component_request_shapes(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    request = parse_request(request_body(), now=NOW)
    image_model, named_model = request.models
    arn = "arn:aws:sagemaker:us-east-1:123456789012:inference-component/x"
    stubber.add_response(
        "create_inference_component",
        {"InferenceComponentArn": arn},
        {
            "InferenceComponentName": "co-demo-1-llama-eu",
            "EndpointName": "co-demo-1",
            "VariantName": "main",
            "Specification": {
                "Container": {"Image": image_model.image, "ArtifactUrl": "s3://models/llama-eu/model.tar.gz"},
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 4.0,
                    "NumberOfCpuCoresRequired": 16.0,
                    "MinMemoryRequiredInMb": 262144,
                },
            },
            "RuntimeConfig": {"CopyCount": 1},
            "Tags": [{"Key": "capacity-orchestrator:request-id", "Value": "demo-1"}],
        },
    )
    stubber.add_response(
        "create_inference_component",
        {"InferenceComponentArn": arn},
        {
            "InferenceComponentName": "co-demo-1-llama-us",
            "EndpointName": "co-demo-1",
            "VariantName": "main",
            "Specification": {
                "ModelName": "llama-us-v3",
                "ComputeResourceRequirements": {
                    "NumberOfAcceleratorDevicesRequired": 4.0,
                    "NumberOfCpuCoresRequired": 16.0,
                    "MinMemoryRequiredInMb": 262144,
                },
            },
            "RuntimeConfig": {"CopyCount": 1},
            "Tags": ANY,
        },
    )
    for model, name in ((image_model, "co-demo-1-llama-eu"), (named_model, "co-demo-1-llama-us")):
        assert adapter.create_inference_component(
            name=name,
            endpoint_name="co-demo-1",
            variant_name="main",
            specification=component_specification(model),
            copy_count=0,  # never 0 at creation: the adapter sends at least 1
            tags=tags_for("demo-1"),
        )


def test_search_sends_endpoint_target_and_window(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    start, end = datetime(2026, 12, 8, 11, 30, tzinfo=UTC), datetime(2026, 12, 14, 11, 30, tzinfo=UTC)
    stubber.add_response(
        "search_training_plan_offerings",
        {
            "TrainingPlanOfferings": [
                {"TrainingPlanOfferingId": "tpo-1", "TargetResources": ["endpoint"], "UpfrontFee": "8000"}
            ]
        },
        {
            "TargetResources": ["endpoint"],
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 2,
            "StartTimeAfter": start,
            "EndTimeBefore": end,
            "DurationHours": 72,
        },
    )
    found = adapter.search_training_plan_offerings(
        instance_type="ml.p5.48xlarge", instance_count=2, start_after=start, end_before=end, duration_hours=72
    )
    assert found[0]["UpfrontFee"] == "8000"


@pytest.mark.parametrize(
    ("code", "message", "expected"),
    [
        ("ResourceInUse", "Training plan co-demo-1 already exists", TrainingPlanNameInUse),
        ("ValidationException", "The training plan offering tpo-1 has expired", OfferingExpired),
        ("ResourceNotFound", "Offering tpo-1 not found", OfferingExpired),
        ("ResourceLimitExceeded", "limit of 1 plans", QuotaExceeded),
        ("ValidationException", "Payment method declined", PurchaseFailed),
        ("ThrottlingException", "Rate exceeded", RetryableAwsError),
    ],
)
def test_create_training_plan_errors_become_domain_errors(
    sagemaker: tuple[SageMakerAdapter, Stubber], code: str, message: str, expected: type[Exception]
) -> None:
    adapter, stubber = sagemaker
    status = 400
    stubber.add_client_error(
        "create_training_plan", service_error_code=code, service_message=message, http_status_code=status
    )
    with pytest.raises(expected):
        adapter.create_training_plan(name="co-demo-1", offering_id="tpo-1", tags=tags_for("demo-1"))


def test_search_quota_is_a_quota_error(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    stubber.add_client_error("search_training_plan_offerings", "ResourceLimitExceeded", "quota is 1")
    with pytest.raises(QuotaExceeded, match="quota is 1"):
        adapter.search_training_plan_offerings(
            instance_type="ml.p5.48xlarge",
            instance_count=64,
            start_after=NOW,
            end_before=NOW,
            duration_hours=24,
        )


def test_server_errors_are_retryable(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    stubber.add_client_error("describe_endpoint", "InternalFailure", "oops", http_status_code=500)
    with pytest.raises(RetryableAwsError, match="InternalFailure"):
        adapter.describe_endpoint("co-demo-1")


def test_not_found_and_already_exists_are_answers_not_errors(
    sagemaker: tuple[SageMakerAdapter, Stubber],
) -> None:
    adapter, stubber = sagemaker
    stubber.add_client_error(
        "describe_endpoint", "ValidationException", 'Could not find endpoint "co-demo-1".'
    )
    stubber.add_client_error("describe_training_plan", "ResourceNotFound", "Training plan not found")
    stubber.add_client_error(
        "create_endpoint", "ValidationException", "Cannot create already existing endpoint"
    )
    stubber.add_client_error(
        "delete_endpoint_config", "ValidationException", "Could not find endpoint configuration"
    )
    stubber.add_client_error(
        "describe_inference_component", "ValidationException", "Could not find inference component"
    )
    assert adapter.describe_endpoint("co-demo-1") is None
    assert adapter.describe_training_plan("co-demo-1") is None
    assert adapter.create_endpoint(name="co-demo-1", config_name="co-demo-1-config", tags=[]) is False
    assert adapter.delete_endpoint_config("co-demo-1-config") is False
    assert adapter.describe_inference_component("x") is None


def test_delete_while_creating_is_busy(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    stubber.add_client_error(
        "delete_endpoint", "ValidationException", "Cannot update in-progress endpoint co-demo-1"
    )
    with pytest.raises(ResourceBusy):
        adapter.delete_endpoint("co-demo-1")


def test_describe_training_plan_reads_times_and_fee(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    stubber.add_response(
        "describe_training_plan",
        {
            "TrainingPlanArn": PLAN_ARN,
            "TrainingPlanName": "co-demo-1",
            "Status": "Scheduled",
            "StartTime": datetime(2026, 12, 9, 11, 30, tzinfo=UTC),
            "EndTime": datetime(2026, 12, 12, 11, 30, tzinfo=UTC),
            "UpfrontFee": "8000.50",
            "InUseInstanceCount": 0,
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": "arn:aws:sagemaker:us-east-1:123456789012:reserved-capacity/rc-1",
                    "InstanceType": "ml.p5.48xlarge",
                    "TotalInstanceCount": 2,
                    "Status": "Scheduled",
                }
            ],
        },
        {"TrainingPlanName": "co-demo-1"},
    )
    plan = adapter.describe_training_plan("co-demo-1")
    assert plan is not None
    assert (plan.status, str(plan.upfront_fee_usd), plan.instance_type) == (
        "Scheduled",
        "8000.50",
        "ml.p5.48xlarge",
    )
    assert plan.start_time == datetime(2026, 12, 9, 11, 30, tzinfo=UTC)
    assert plan.in_use_instance_count == 0  # InUseInstanceCount, for the cost report's timeline


def test_list_training_plans_pages_until_found(sagemaker: tuple[SageMakerAdapter, Stubber]) -> None:
    adapter, stubber = sagemaker
    other = {
        "TrainingPlanArn": PLAN_ARN.replace("co-demo-1", "other"),
        "TrainingPlanName": "other",
        "Status": "Active",
    }
    mine = {"TrainingPlanArn": PLAN_ARN, "TrainingPlanName": "co-demo-1", "Status": "Pending"}
    stubber.add_response(
        "list_training_plans", {"TrainingPlanSummaries": [other], "NextToken": "t2"}, {"MaxResults": 100}
    )
    stubber.add_response(
        "list_training_plans", {"TrainingPlanSummaries": [mine]}, {"MaxResults": 100, "NextToken": "t2"}
    )
    found = adapter.find_training_plan("co-demo-1")
    assert found is not None
    assert found.arn == PLAN_ARN


# ------------------------------------------------------------------------------- other adapters


def test_release_schedule_request_and_retry(env: dict[str, str]) -> None:
    client = boto3.client("scheduler", region_name="us-east-1")
    scheduler = ReleaseScheduler(
        client,
        group="capacity-orchestrator",
        target_arn=env["RELEASE_TARGET_ARN"],
        role_arn=env["SCHEDULER_ROLE_ARN"],
    )
    expected = {
        "Name": "co-demo-1-release",
        "GroupName": "capacity-orchestrator",
        "ScheduleExpression": "at(2026-12-12T10:30:00)",
        "ScheduleExpressionTimezone": "UTC",
        "FlexibleTimeWindow": {"Mode": "OFF"},
        "ActionAfterCompletion": "DELETE",
        "State": "ENABLED",
        "Description": "Release reservation demo-1 (reservation-end)",
        "Target": {
            "Arn": env["RELEASE_TARGET_ARN"],
            "RoleArn": env["SCHEDULER_ROLE_ARN"],
            "Input": '{"schema_version":1,"request_id":"demo-1","reason":"reservation-end"}',
            "EventBridgeParameters": {"DetailType": "ReleaseRequested", "Source": "capacity.orchestrator"},
        },
    }
    with Stubber(client) as stubber, time_machine.travel(NOW, tick=False):
        stubber.add_response(
            "create_schedule",
            {"ScheduleArn": "arn:aws:scheduler:us-east-1:123456789012:schedule/x/y"},
            expected,
        )
        stubber.add_client_error("create_schedule", "ConflictException", "Schedule already exists", 409)
        at = datetime(2026, 12, 12, 10, 30, tzinfo=UTC)
        assert scheduler.schedule_release(
            name="co-demo-1-release", at=at, request_id="demo-1", reason="reservation-end"
        )
        assert not scheduler.schedule_release(
            name="co-demo-1-release", at=at, request_id="demo-1", reason="reservation-end"
        )


def test_release_schedule_in_the_past_moves_to_a_minute_from_now(env: dict[str, str]) -> None:
    client = boto3.client("scheduler", region_name="us-east-1")
    scheduler = ReleaseScheduler(
        client, group="g", target_arn=env["RELEASE_TARGET_ARN"], role_arn=env["SCHEDULER_ROLE_ARN"]
    )
    sent: dict[str, Any] = {}

    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.update(params)

    client.meta.events.register("provide-client-params.scheduler.CreateSchedule", capture)
    with Stubber(client) as stubber:
        stubber.add_response("create_schedule", {"ScheduleArn": "arn:aws:scheduler:us-east-1:1:schedule/g/x"})
        scheduler.schedule_release(
            name="x", at=datetime(2000, 1, 1, tzinfo=UTC), request_id="r", reason="test"
        )
    expression = sent["ScheduleExpression"]
    assert expression > f"at({datetime.now(UTC):%Y-%m-%dT%H:%M:%S})"


def test_put_events_partial_failure_is_retryable(env: dict[str, str]) -> None:
    client = boto3.client("events", region_name="us-east-1")
    publisher = EventPublisher("capacity-orchestrator", client)
    detail = ReservationReleasedDetail(request_id="demo-1")
    with Stubber(client) as stubber:
        stubber.add_response(
            "put_events",
            {"FailedEntryCount": 0, "Entries": [{"EventId": "e-1"}]},
            {
                "Entries": [
                    {
                        "Source": "capacity.orchestrator",
                        "DetailType": "ReservationReleased",
                        "Detail": '{"schema_version":2,"request_id":"demo-1","reason":null,"summary":null}',
                        "EventBusName": "capacity-orchestrator",
                        "Resources": [],
                    }
                ]
            },
        )
        stubber.add_response(
            "put_events",
            {
                "FailedEntryCount": 1,
                "Entries": [{"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"}],
            },
        )
        assert publisher.put("ReservationReleased", detail) == "e-1"
        with pytest.raises(RetryableAwsError, match="ThrottlingException"):
            publisher.put("ReservationReleased", detail)


def test_used_task_token_means_not_awaiting_approval(env: dict[str, str]) -> None:
    client = boto3.client("stepfunctions", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_response("send_task_success", {}, {"taskToken": "tok", "output": '{"approved": true}'})
        stubber.add_client_error("send_task_failure", "TaskTimedOut", "Task Timed Out")
        tasks = TaskTokens(client)
        tasks.succeed("tok", {"approved": True})
        with pytest.raises(NotAwaitingApproval, match="TaskTimedOut"):
            tasks.fail("tok", error="ApprovalRejected", cause="no")


class FakeWebClient:
    def __init__(self, token: str, fail: bool = False) -> None:
        self.token = token
        self.fail = fail
        self.posts: list[dict[str, Any]] = []

    def chat_postMessage(self, **kwargs: Any) -> dict[str, Any]:  # noqa: N802 - slack_sdk's name
        if self.fail:
            raise SlackApiError("channel_not_found", {"ok": False, "error": "channel_not_found"})  # type: ignore[no-untyped-call]
        self.posts.append(kwargs)
        return {"ok": True}


def test_slack_posts_with_the_token_from_the_provider() -> None:
    made: list[FakeWebClient] = []

    def factory(token: str) -> Any:
        made.append(FakeWebClient(token))
        return made[-1]

    notifier = SlackNotifier("C123", lambda: "xoxb-1", client_factory=factory)
    assert notifier.post(SlackMessage("hello", [{"type": "section"}]))
    assert made[0].token == "xoxb-1"
    assert made[0].posts == [
        {"channel": "C123", "text": "hello", "blocks": [{"type": "section"}], "unfurl_links": False}
    ]


def test_slack_is_a_no_op_without_configuration_and_never_raises() -> None:
    assert not SlackNotifier("", None).post(SlackMessage("x"))
    failing = SlackNotifier("C1", lambda: "t", client_factory=lambda token: FakeWebClient(token, fail=True))  # type: ignore[arg-type,return-value]
    assert not failing.post(SlackMessage("x"))


def test_token_from_secrets_manager_plain_or_json(env: dict[str, str]) -> None:
    with mock_aws():
        secrets = boto3.client("secretsmanager", region_name="us-east-1")
        plain = secrets.create_secret(Name="plain", SecretString="xoxb-plain")["ARN"]
        as_json = secrets.create_secret(Name="json", SecretString='{"bot_token": "xoxb-json"}')["ARN"]
        empty = secrets.create_secret(Name="empty", SecretString='{"other": 1}')["ARN"]
        assert token_from_secret(plain) == "xoxb-plain"
        assert token_from_secret(as_json) == "xoxb-json"
        with pytest.raises(ValueError, match="no Slack bot token"):
            token_from_secret(empty)


def test_resource_tags_raise_a_denial_and_read_only_a_missing_resource_as_none(
    sagemaker: tuple[SageMakerAdapter, Stubber],
) -> None:
    # Issue 12: a denied ListTags read as "no tags" let an ownership check pass.
    adapter, stubber = sagemaker
    arn = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/co-demo-1"
    message = f"User: x is not authorized to perform: sagemaker:ListTags on resource: {arn}"
    stubber.add_client_error("list_tags", "AccessDeniedException", message, http_status_code=400)
    with pytest.raises(AccessDenied, match="sagemaker:ListTags") as denied:
        adapter.resource_tags(arn)
    assert denied.value.retryable is False
    stubber.add_client_error("list_tags", "ValidationException", f"Resource {arn} does not exist.")
    assert adapter.resource_tags(arn) is None
    stubber.add_client_error("list_tags", "ValidationException", "1 validation error detected")
    with pytest.raises(ClientError):
        adapter.resource_tags(arn)


def _slack_answer(status: int, data: dict[str, Any]) -> SlackResponse:
    return SlackResponse(
        client=None, http_verb="GET", api_url="https://slack.com/api/usergroups.users.list", req_args={},
        data=data, headers={}, status_code=status,
    )  # fmt: skip


class _GroupsClient:
    """``WebClient.usergroups_users_list`` answering ``answers`` (an exception is raised) in turn."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    def usergroups_users_list(self, *, usergroup: str) -> Any:
        self.asked.append(usergroup)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_slack_directory_reads_a_user_group_and_names_what_to_fix() -> None:
    ok = _slack_answer(200, {"ok": True, "users": ["U0ERIN", "U0LEAD"]})
    gone = SlackApiError("no_such_subteam", _slack_answer(200, {"ok": False, "error": "no_such_subteam"}))  # type: ignore[no-untyped-call]
    limited = SlackApiError("ratelimited", _slack_answer(429, {"ok": False, "error": "ratelimited"}))  # type: ignore[no-untyped-call]
    scope = SlackApiError(  # type: ignore[no-untyped-call]
        "missing_scope",
        _slack_answer(200, {"ok": False, "error": "missing_scope", "needed": "usergroups:read"}),
    )
    client = _GroupsClient(ok, gone, limited, scope, TimeoutError("timed out"))
    timeouts: list[int] = []

    def factory(token: str, timeout: int) -> Any:
        timeouts.append(timeout)
        return client

    directory = SlackDirectory(lambda: "xoxb-1", timeout_seconds=2, client_factory=factory)
    assert directory.usergroup_users("S0EVALTEAM") == frozenset({"U0ERIN", "U0LEAD"})
    assert directory.usergroup_users("S0GONE") == frozenset()  # a deleted group makes nobody a member
    with pytest.raises(SlackUnavailable, match="ratelimited"):
        directory.usergroup_users("S0EVALTEAM")
    with pytest.raises(ConfigurationError, match="needs the bot scope usergroups:read"):
        directory.usergroup_users("S0EVALTEAM")
    with pytest.raises(SlackUnavailable, match="TimeoutError"):
        directory.usergroup_users("S0EVALTEAM")
    assert client.asked == ["S0EVALTEAM", "S0GONE", "S0EVALTEAM", "S0EVALTEAM", "S0EVALTEAM"]
    assert set(timeouts) == {2}
    with pytest.raises(ConfigurationError, match="SLACK_BOT_TOKEN_SECRET_ARN is not set"):
        SlackDirectory(None).usergroup_users("S0EVALTEAM")


def _failing(code: str, status: int) -> Any:
    def call() -> None:
        response: Any = {
            "Error": {"Code": code, "Message": "m"},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }
        raise ClientError(response, "Op")

    return call


def test_one_translator_asks_the_services_reading_first_then_the_common_one() -> None:
    def capacity(exc: ClientError) -> QuotaExceeded | None:
        return (
            QuotaExceeded("capacity") if clients.error_code(exc) == "InsufficientInstanceCapacity" else None
        )

    # A service's verdict on a 500 wins over "transient"
    with pytest.raises(QuotaExceeded, match="capacity"):
        clients.call("EC2 RunInstances", _failing("InsufficientInstanceCapacity", 500), specific=capacity)
    # then throttling and 5xx are retryable, a denial is AccessDenied, anything else stays the ClientError
    with pytest.raises(RetryableAwsError, match="EC2 RunInstances: ThrottlingException after retries"):
        clients.call("EC2 RunInstances", _failing("ThrottlingException", 400), specific=capacity)
    with pytest.raises(AccessDenied):
        clients.call("EC2 RunInstances", _failing("AccessDeniedException", 400))
    with pytest.raises(ClientError):
        clients.call("EC2 RunInstances", _failing("ValidationException", 400))
    # and with the transient-only translator a denial stays the ClientError
    with pytest.raises(ClientError):
        clients.call("IAM GetInstanceProfile", _failing("AccessDenied", 403), translator=clients.retryable)
    assert clients.call("X", lambda: 42) == 42


def test_terminate_instances_skips_an_instance_ec2_does_not_know_yet_and_terminates_the_others(
    env: dict[str, str],
) -> None:
    from capacity.adapters.ec2 import Ec2Adapter

    client = boto3.client("ec2", region_name="us-east-1")
    not_found: dict[str, Any] = {
        "service_error_code": "InvalidInstanceID.NotFound",
        "service_message": "unknown",
        "http_status_code": 400,
    }
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "terminate_instances", expected_params={"InstanceIds": ["i-new", "i-old"]}, **not_found
        )
        stubber.add_client_error(
            "terminate_instances", expected_params={"InstanceIds": ["i-new"]}, **not_found
        )
        stubber.add_response("terminate_instances", {"TerminatingInstances": []}, {"InstanceIds": ["i-old"]})
        Ec2Adapter("us-east-1", client).terminate_instances(["i-new", "i-old"])
        stubber.assert_no_pending_responses()  # i-old was terminated on its own


def test_terminate_instances_passes_other_errors_on(env: dict[str, str]) -> None:
    from capacity.adapters.ec2 import Ec2Adapter

    client = boto3.client("ec2", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "terminate_instances", service_error_code="UnauthorizedOperation", http_status_code=403
        )
        with pytest.raises(AccessDenied, match="UnauthorizedOperation"):
            Ec2Adapter("us-east-1", client).terminate_instances(["i-old"])
