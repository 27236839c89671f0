"""The template loader: SAM transform, intrinsics, physical names, FunctionSpecs, routes, deploy to moto."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import botocore.session
import pytest

from localcloud.template import ApiRoute, Stack, TemplateError, conform

FIXTURES = Path(__file__).parent / "fixtures"
STACK_NAME = "fixture"


@pytest.fixture(scope="module")
def stack() -> Stack:
    return Stack.load(FIXTURES / "template.yaml", stack_name=STACK_NAME)


def write_template(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "template.yaml"
    path.write_text(body, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ load


def test_functions_get_globals_layers_and_resolved_environment(stack: Stack) -> None:
    step_one = stack.function("StepOneFunction")

    assert step_one.name == "fixture-StepOneFunction"
    assert step_one.arn == "arn:aws:lambda:us-east-1:123456789012:function:fixture-StepOneFunction"
    assert step_one.code_dir == (FIXTURES / "functions" / "step_one").resolve()
    assert step_one.layer_dirs == ((FIXTURES / "layers" / "common").resolve(),)
    assert (step_one.handler, step_one.runtime, step_one.timeout_seconds, step_one.memory_mb) == (
        "app.lambda_handler",
        "python3.13",
        10,
        256,
    )
    assert step_one.environment == {
        "TABLE_NAME": "fixture-StateTable",
        "EVENT_BUS_NAME": "fixture-bus",
        "STAGE": "dev",
        "LOG_LEVEL": "DEBUG",
        "TOKEN_SECRET_ARN": stack.physical_id("TokenSecret"),
    }
    assert stack.function("FlakyFunction").environment["FAIL_TIMES"] == "2"


def test_every_function_of_the_template_has_a_spec(stack: Stack) -> None:
    assert sorted(spec.logical_id for spec in stack.functions) == [
        "ApiFunction",
        "DatetimeFunction",
        "FlakyFunction",
        "NotifyFunction",
        "RecorderFunction",
        "StepOneFunction",
        "StepTwoFunction",
        "TickFunction",
    ]


def test_ref_and_getatt_follow_cloudformation_return_values(stack: Stack) -> None:
    assert stack.physical_id("Bus") == "fixture-bus"
    assert stack.arn("Bus") == "arn:aws:events:us-east-1:123456789012:event-bus/fixture-bus"
    assert stack.physical_id("PipelineStateMachine") == (
        "arn:aws:states:us-east-1:123456789012:stateMachine:fixture-PipelineStateMachine"
    )
    assert stack.physical_id("AlertsTopic") == "arn:aws:sns:us-east-1:123456789012:fixture-AlertsTopic"
    assert stack.physical_id("StateTable") == "fixture-StateTable"
    assert stack.physical_id("RecorderRule") == "fixture-bus|fixture-RecorderRule"
    assert (
        stack.arn("RecorderRule")
        == "arn:aws:events:us-east-1:123456789012:rule/fixture-bus/fixture-RecorderRule"
    )
    assert stack.physical_id("TokenSecret").startswith(
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:fixture-TokenSecret-"
    )


def test_definition_substitutions_are_applied(stack: Stack) -> None:
    definition = json.loads(stack.state_machine_definitions["PipelineStateMachine"])

    assert (
        definition["States"]["StepOne"]["Parameters"]["FunctionName"] == stack.function("StepOneFunction").arn
    )
    assert definition["States"]["StepTwo"]["Resource"] == stack.function("StepTwoFunction").arn
    assert definition["States"]["WaitThirtyDays"]["Seconds"] == 2_592_000


def test_api_routes_come_from_api_events(stack: Stack) -> None:
    routes = sorted(stack.api_routes, key=lambda r: r.path)

    assert [(r.method, r.path, r.function, r.stage) for r in routes] == [
        ("POST", "/items", "ApiFunction", "Prod"),
        ("GET", "/items/{id}", "ApiFunction", "Prod"),
    ]
    assert routes[1].matches("GET", "/items/42") == {"id": "42"}
    assert routes[1].matches("POST", "/items/42") is None
    assert routes[0].matches("POST", "/items/42") is None


def test_greedy_and_any_routes_match() -> None:
    route = ApiRoute(method="ANY", path="/files/{proxy+}", function="F", api="A", api_id="x", stage="v1")

    assert route.matches("DELETE", "/files/a/b/c.txt") == {"proxy": "a/b/c.txt"}
    assert route.matches("GET", "/files") is None


def test_outputs_are_resolved_and_conditions_apply(stack: Stack) -> None:
    assert stack.outputs["BusName"] == "fixture-bus"
    assert stack.outputs["PipelineArn"] == stack.physical_id("PipelineStateMachine")
    api_id = stack.api_routes[0].api_id
    assert stack.outputs["ApiUrl"] == f"https://{api_id}.execute-api.us-east-1.amazonaws.com/Prod"
    assert "ArtifactsBucketName" not in stack.outputs
    assert "ArtifactsBucket" not in stack.resources


def test_parameter_overrides_switch_conditions_and_mappings() -> None:
    prod = Stack.load(
        FIXTURES / "template.yaml", stack_name="prodstack", parameter_overrides={"Stage": "prod"}
    )

    assert prod.outputs["ArtifactsBucketName"] == "prodstack-artifactsbucket"
    assert prod.function("StepOneFunction").environment["LOG_LEVEL"] == "INFO"
    assert prod.function("StepOneFunction").name == "prodstack-StepOneFunction"


def test_parameter_values_are_checked() -> None:
    with pytest.raises(TemplateError, match=r"Parameters\.Stage: 'qa' is not one of AllowedValues"):
        Stack.load(FIXTURES / "template.yaml", parameter_overrides={"Stage": "qa"})
    with pytest.raises(TemplateError, match=r"Parameters\.FailTimes: 11 is above MaxValue 10"):
        Stack.load(FIXTURES / "template.yaml", parameter_overrides={"FailTimes": "11"})
    with pytest.raises(TemplateError, match=r"unknown parameters \['Nope'\]"):
        Stack.load(FIXTURES / "template.yaml", parameter_overrides={"Nope": "1"})


def test_sub_join_select_split_if_and_pseudo_parameters(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Parameters:
  Names: {Type: CommaDelimitedList, Default: "a,b,c"}
Conditions:
  Never: !Equals [x, y]
Resources:
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      TopicName: !Join
        - "-"
        - - !Select [1, !Ref Names]
          - !Select [0, !Split [":", "left:right"]]
          - !If [Never, "no", !Ref "AWS::Region"]
          - !Sub ["${A}-${AWS::AccountId}-${!Literal}", {A: !Ref "AWS::StackName"}]
      DisplayName: !If [Never, "shown", !Ref "AWS::NoValue"]
""",
    )
    stack = Stack.load(path, stack_name="s1", region="eu-west-1", account_id="111122223333")

    assert stack.resources["Topic"].properties == {"TopicName": "b-left-eu-west-1-s1-111122223333-${Literal}"}
    assert (
        stack.physical_id("Topic")
        == "arn:aws:sns:eu-west-1:111122223333:b-left-eu-west-1-s1-111122223333-${Literal}"
    )


def test_unsupported_getatt_names_resource_and_attribute(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Resources:
  Topic:
    Type: AWS::SNS::Topic
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: !GetAtt Topic.Colour
""",
    )
    with pytest.raises(
        TemplateError, match=r"Resources\.Param\.Properties\.Value.*Topic\.Colour \(AWS::SNS::Topic\)"
    ):
        Stack.load(path)


def test_missing_code_uri_is_named(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Transform: AWS::Serverless-2016-10-31
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: functions/missing/
      Handler: app.handler
      Runtime: python3.13
""",
    )
    with pytest.raises(
        TemplateError, match=r"Resources\.Fn\.Properties\.CodeUri: local path 'functions/missing/'"
    ):
        Stack.load(path)


def test_unknown_resource_types_are_warned_not_fatal(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Resources:
  Queue:
    Type: AWS::Kinesis::Stream
    Properties: {ShardCount: 1}
""",
    )
    stack = Stack.load(path)

    assert stack.physical_id("Queue") == "capacity-orchestrator-Queue"
    assert any("AWS::Kinesis::Stream is not emulated" in warning for warning in stack.warnings)


def test_conform_coerces_cloudformation_strings_to_api_types() -> None:
    model = botocore.session.get_session().get_service_model("cloudwatch")
    shape = model.operation_model("PutMetricAlarm").input_shape

    result = conform(shape, {"Period": "300", "Threshold": "1", "ActionsEnabled": "false"}, "here")

    assert result == {"Period": 300, "Threshold": 1.0, "ActionsEnabled": False}


# ---------------------------------------------------------------------------------------------- deploy


@pytest.mark.usefixtures("aws")
def test_deploy_creates_the_resources_in_moto(stack: Stack) -> None:
    stack.deploy()

    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    table = dynamodb.describe_table(TableName="fixture-StateTable")["Table"]
    assert [index["IndexName"] for index in table["GlobalSecondaryIndexes"]] == ["byKind"]
    ttl = dynamodb.describe_time_to_live(TableName="fixture-StateTable")["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": "expires_at"}

    events = boto3.client("events", region_name="us-east-1")
    rules = {rule["Name"]: rule for rule in events.list_rules(EventBusName="fixture-bus")["Rules"]}
    assert set(rules) == {"fixture-RecorderRule", "fixture-PipelineStateMachinePipelineRequested"}
    assert json.loads(rules["fixture-PipelineStateMachinePipelineRequested"]["EventPattern"]) == {
        "source": ["test.app"],
        "detail-type": ["PipelineRequested"],
    }
    targets = events.list_targets_by_rule(
        Rule="fixture-PipelineStateMachinePipelineRequested", EventBusName="fixture-bus"
    )
    assert targets["Targets"][0]["Arn"] == stack.physical_id("PipelineStateMachine")
    assert targets["Targets"][0]["InputPath"] == "$.detail"
    scheduled = events.describe_rule(Name="fixture-TickFunctionEverySixHours")
    assert scheduled["ScheduleExpression"] == "rate(6 hours)"

    sfn = boto3.client("stepfunctions", region_name="us-east-1")
    machine = sfn.describe_state_machine(stateMachineArn=stack.physical_id("PipelineStateMachine"))
    assert stack.function("StepOneFunction").arn in machine["definition"]

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    cron = scheduler.get_schedule(Name="TickFunctionWeekdayMorning")
    assert (cron["ScheduleExpression"], cron["ScheduleExpressionTimezone"]) == (
        "cron(0 9 ? * MON-FRI *)",
        "Europe/Paris",
    )

    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    secret = secrets.get_secret_value(SecretId=stack.physical_id("TokenSecret"))
    assert secret["ARN"] == stack.physical_id("TokenSecret")
    assert secret["SecretString"].startswith("local-")

    ssm = boto3.client("ssm", region_name="us-east-1")
    assert ssm.get_parameter(Name=stack.physical_id("ConfigParameter"))["Parameter"]["Value"] == "dev-config"

    alarms = boto3.client("cloudwatch", region_name="us-east-1").describe_alarms()["MetricAlarms"]
    assert [(a["AlarmName"], a["Period"], a["AlarmActions"]) for a in alarms] == [
        ("fixture-ErrorsAlarm", 300, [stack.physical_id("AlertsTopic")])
    ]
    roles = boto3.client("iam", region_name="us-east-1").list_roles()["Roles"]
    assert "fixture-PipelineStateMachineRole" in {role["RoleName"] for role in roles}


@pytest.mark.usefixtures("aws")
def test_local_values_supply_secrets(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Resources:
  SlackToken:
    Type: AWS::SecretsManager::Secret
""",
    )
    stack = Stack(
        path,
        stack_name="s",
        region="us-east-1",
        account_id="123456789012",
        local_values={"SecretsManager": {"SlackToken": {"token": "xoxb-test"}}},
    )
    stack.deploy()

    value = boto3.client("secretsmanager", region_name="us-east-1").get_secret_value(SecretId="s-SlackToken")
    assert json.loads(value["SecretString"]) == {"token": "xoxb-test"}


@pytest.mark.usefixtures("aws")
def test_stream_arn_and_dynamic_references_resolve_to_what_moto_holds(tmp_path: Path) -> None:
    path = write_template(
        tmp_path,
        """
Resources:
  Table:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
      StreamSpecification: {StreamViewType: NEW_IMAGE}
  Stream:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: !GetAtt Table.StreamArn
  Token:
    Type: AWS::SSM::Parameter
    Properties:
      Type: String
      Value: "{{resolve:secretsmanager:slack:SecretString:token}} / {{resolve:ssm:/team/channel}}"
""",
    )
    stack = Stack(
        path,
        stack_name="s",
        region="us-east-1",
        account_id="123456789012",
        local_values={"SecretsManager": {"slack": {"token": "xoxb-1"}}, "SSM": {"/team/channel": "C123"}},
    )
    stack.deploy()

    table = boto3.client("dynamodb", region_name="us-east-1").describe_table(TableName="s-Table")["Table"]
    assert stack.resources["Stream"].properties["Value"] == table["LatestStreamArn"]
    assert stack.resources["Token"].properties["Value"] == "xoxb-1 / C123"


def test_a_serverless_api_with_a_local_openapi_file_and_unsupported_event_sources(tmp_path: Path) -> None:
    (tmp_path / "fn").mkdir()
    (tmp_path / "fn" / "app.py").write_text("def handler(event, context):\n    return {}\n", encoding="utf-8")
    (tmp_path / "api.yaml").write_text(
        """
openapi: "3.0.1"
info: {title: t, version: "1"}
paths:
  /things/{proxy+}:
    x-amazon-apigateway-any-method:
      x-amazon-apigateway-integration:
        type: aws_proxy
        httpMethod: POST
        uri:
          Fn::Sub: arn:aws:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${Fn.Arn}/invocations
""",
        encoding="utf-8",
    )
    path = write_template(
        tmp_path,
        """
Transform: AWS::Serverless-2016-10-31
Resources:
  Api:
    Type: AWS::Serverless::Api
    Properties:
      StageName: v2
      DefinitionUri: api.yaml
  Queue:
    Type: AWS::SQS::Queue
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn/
      Handler: app.handler
      Runtime: python3.13
      Events:
        FromQueue:
          Type: SQS
          Properties:
            Queue: !GetAtt Queue.Arn
""",
    )
    stack = Stack.load(path, stack_name="s")

    (route,) = stack.api_routes
    assert (route.method, route.path, route.function, route.stage) == ("ANY", "/things/{proxy+}", "Fn", "v2")
    assert route.matches("PATCH", "/things/a/b") == {"proxy": "a/b"}
    assert any("event source mappings" in warning for warning in stack.warnings)
