"""Deploying a :class:`~localcloud.template.stack.Stack` into moto: one boto3 call per resource (so botocore
validates every request), in dependency-safe order by type, property values conformed to each operation's
input shape.

Over 400 lines: one deployer: a creator per resource type in one dependency-ordered table."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3
import botocore.exceptions
from botocore.model import ListShape, MapShape, Shape, StructureShape
from moto.dynamodb.models import dynamodb_backends
from moto.secretsmanager.models import secretsmanager_backends

from localcloud.template.model import Resource, TemplateError
from localcloud.template.naming import STREAM_LABEL, short_hash

if TYPE_CHECKING:
    from localcloud.template.stack import Stack

_SESSIONS: dict[str, boto3.session.Session] = {}


def deploy_session(region: str) -> boto3.session.Session:
    """A cached boto3 session with fake credentials (clients made from it reuse loaded service models)."""
    session = _SESSIONS.get(region)
    if session is None:
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - moto's fake credentials
            region_name=region,
        )
        _SESSIONS[region] = session
    return session


def conform(shape: Shape | None, value: Any, where: str) -> Any:  # noqa: PLR0911
    """Coerce a CloudFormation property value to a botocore input shape.

    CloudFormation accepts ``"300"`` for an integer, ``"true"`` for a boolean and a JSON object where the
    API wants a JSON string (``EventPattern``, policy documents); botocore does not. Walks the shape.

    Raises:
        TemplateError: a value cannot be converted (names ``where``).
    """
    if shape is None or value is None:
        return value
    kind = shape.type_name
    try:
        if isinstance(shape, StructureShape) and isinstance(value, dict):
            return {k: conform(shape.members.get(k), v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(shape, ListShape) and isinstance(value, list):
            return [conform(shape.member, v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(shape, MapShape) and isinstance(value, dict):
            return {k: conform(shape.value, v, f"{where}.{k}") for k, v in value.items()}
        if kind in ("integer", "long") and isinstance(value, (str, float)):
            return int(float(value))
        if kind in ("float", "double") and isinstance(value, (str, int)):
            return float(value)
        if kind == "boolean" and isinstance(value, str):
            return value.lower() == "true"
        if kind == "string" and isinstance(value, (dict, list)):
            return json.dumps(value)
        if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if kind == "timestamp" and isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except ValueError as exc:
        raise TemplateError(f"{where}: cannot use {value!r} as {kind}: {exc}") from exc
    return value


def client_error_text(exc: Exception) -> str:
    """A short text for a botocore error (code and message)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code')}: {error.get('Message')}"
    return str(exc)


# ------------------------------------------------------------------------------------------------ deploy

CREATED_TYPES = (
    "AWS::IAM::Role",
    "AWS::DynamoDB::Table",
    "AWS::Events::EventBus",
    "AWS::SNS::Topic",
    "AWS::SQS::Queue",
    "AWS::SecretsManager::Secret",
    "AWS::SSM::Parameter",
    "AWS::S3::Bucket",
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    "AWS::StepFunctions::StateMachine",
    "AWS::Events::Rule",
    "AWS::Scheduler::ScheduleGroup",
    "AWS::Scheduler::Schedule",
)
"""The resource types :meth:`Stack.deploy` creates, in the order it creates them."""


def _tags(value: Any, *, key: str = "Key", val: str = "Value") -> list[dict[str, str]]:
    """CloudFormation ``Tags`` (a list of Key/Value, or a map for SAM-style types) as an API tag list."""
    if isinstance(value, dict):
        return [{key: str(k), val: str(v)} for k, v in value.items()]
    return [{key: str(t["Key"]), val: str(t["Value"])} for t in value or []]


def _pick(props: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: props[name] for name in names if name in props}


class Deployer:
    """Creates a :class:`Stack`'s resources with boto3 calls (one client per service, made once)."""

    def __init__(self, stack: Stack, session: boto3.session.Session) -> None:
        self.stack = stack
        self.session = session
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        """The boto3 client of ``service`` (made once per deploy)."""
        if service not in self._clients:
            session: Any = self.session  # boto3-stubs overloads want a literal service name
            self._clients[service] = session.client(service, region_name=self.stack.region)
        return self._clients[service]

    def call(self, resource: Resource, service: str, operation: str, params: dict[str, Any]) -> Any:
        """Call ``service.operation`` with params conformed to its input shape; errors name the resource."""
        client = self.client(service)
        model = client.meta.service_model.operation_model(operation)
        where = f"{self.stack._source}: Resources.{resource.logical_id} ({resource.type})"
        params = conform(model.input_shape, {k: v for k, v in params.items() if v is not None}, where)
        try:
            return getattr(client, botocore.xform_name(operation))(**params)
        except (botocore.exceptions.ClientError, botocore.exceptions.ParamValidationError) as exc:
            raise TemplateError(f"{where}: {service} {operation} failed: {client_error_text(exc)}") from exc

    def run(self) -> None:
        """Create every resource of a created type, type by type in :data:`CREATED_TYPES` order."""
        creators = {
            "AWS::IAM::Role": self.role,
            "AWS::DynamoDB::Table": self.table,
            "AWS::Events::EventBus": self.event_bus,
            "AWS::SNS::Topic": self.topic,
            "AWS::SQS::Queue": self.queue,
            "AWS::SecretsManager::Secret": self.secret,
            "AWS::SSM::Parameter": self.parameter,
            "AWS::S3::Bucket": self.bucket,
            "AWS::CloudWatch::Alarm": self.alarm,
            "AWS::CloudWatch::Dashboard": self.dashboard,
            "AWS::StepFunctions::StateMachine": self.state_machine,
            "AWS::Events::Rule": self.rule,
            "AWS::Scheduler::ScheduleGroup": self.schedule_group,
            "AWS::Scheduler::Schedule": self.schedule,
        }
        for kind in CREATED_TYPES:
            for resource in self.stack.resources_of_type(kind):
                creators[kind](resource, self.stack._name(resource.logical_id))

    # ------------------------------------------------------------------------------------------ creators
    # One per type of CREATED_TYPES: (resource, physical name) -> the boto3 calls CloudFormation would make.

    def role(self, resource: Resource, name: str) -> None:
        props = resource.properties
        self.call(
            resource,
            "iam",
            "CreateRole",
            {
                "RoleName": name,
                "AssumeRolePolicyDocument": props.get("AssumeRolePolicyDocument", {}),
                "Path": props.get("Path"),
                "Description": props.get("Description"),
                "MaxSessionDuration": props.get("MaxSessionDuration"),
                "PermissionsBoundary": props.get("PermissionsBoundary"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        # Inline policies are kept (the ledger of what each function may do); managed policy ARNs are not
        # attached: moto does not enforce IAM, so they would change nothing locally.
        for policy in props.get("Policies") or []:
            document = policy["PolicyDocument"]
            if isinstance(document, dict) and "Version" not in document:
                # IAM defaults a missing Version to 2008-10-17 (SAM's generated policies omit it); moto
                # rejects it, and the version changes nothing here, so state the current one.
                document = {"Version": "2012-10-17", **document}
            self.call(
                resource,
                "iam",
                "PutRolePolicy",
                {"RoleName": name, "PolicyName": policy["PolicyName"], "PolicyDocument": document},
            )

    def table(self, resource: Resource, name: str) -> None:
        props = resource.properties
        params = _pick(
            props,
            "AttributeDefinitions",
            "KeySchema",
            "BillingMode",
            "ProvisionedThroughput",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "TableClass",
            "DeletionProtectionEnabled",
            "OnDemandThroughput",
        )
        params["TableName"] = name
        if "StreamSpecification" in props:
            params["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": props["StreamSpecification"]["StreamViewType"],
            }
        if "SSESpecification" in props:
            sse = props["SSESpecification"]
            params["SSESpecification"] = {
                "Enabled": sse.get("SSEEnabled", False),
                **_pick(sse, "SSEType", "KMSMasterKeyId"),
            }
        if props.get("Tags"):
            params["Tags"] = _tags(props["Tags"])
        if "BillingMode" not in params and "ProvisionedThroughput" not in params:
            raise TemplateError(
                f"{self.stack._source}: Resources.{resource.logical_id}.Properties: set BillingMode: "
                "PAY_PER_REQUEST or ProvisionedThroughput (CloudFormation requires one)"
            )
        self.call(resource, "dynamodb", "CreateTable", params)
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled") in (True, "true"):
            self.call(
                resource,
                "dynamodb",
                "UpdateTimeToLive",
                {
                    "TableName": name,
                    "TimeToLiveSpecification": {"Enabled": True, "AttributeName": ttl["AttributeName"]},
                },
            )
        pitr = props.get("PointInTimeRecoverySpecification")
        if pitr and pitr.get("PointInTimeRecoveryEnabled") in (True, "true"):
            self.call(
                resource,
                "dynamodb",
                "UpdateContinuousBackups",
                {"TableName": name, "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}},
            )
        if "StreamSpecification" in props:
            table = dynamodb_backends[self.stack.account_id][self.stack.region].get_table(name)
            table.latest_stream_label = STREAM_LABEL  # the label Fn::GetAtt StreamArn already returned

    def event_bus(self, resource: Resource, name: str) -> None:
        if name == "default":
            return
        props = resource.properties
        params: dict[str, Any] = {
            "Name": name,
            **_pick(props, "Description", "KmsKeyIdentifier", "DeadLetterConfig"),
        }
        if props.get("Tags"):
            params["Tags"] = _tags(props["Tags"])
        self.call(resource, "events", "CreateEventBus", params)

    def topic(self, resource: Resource, name: str) -> None:
        props = resource.properties
        attributes = {
            key: props[key]
            for key in ("DisplayName", "FifoTopic", "ContentBasedDeduplication", "KmsMasterKeyId")
            if key in props
        }
        result = self.call(
            resource,
            "sns",
            "CreateTopic",
            {
                "Name": name,
                "Attributes": {
                    k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in attributes.items()
                }
                or None,
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        for subscription in props.get("Subscription") or []:
            self.call(
                resource,
                "sns",
                "Subscribe",
                {
                    "TopicArn": result["TopicArn"],
                    "Protocol": subscription["Protocol"],
                    "Endpoint": subscription["Endpoint"],
                },
            )

    def queue(self, resource: Resource, name: str) -> None:
        props = resource.properties
        attributes = {
            key: json.dumps(value)
            if isinstance(value, dict)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value)
            for key, value in props.items()
            if key not in ("QueueName", "Tags")
        }
        self.call(
            resource,
            "sqs",
            "CreateQueue",
            {
                "QueueName": name,
                "Attributes": attributes or None,
                "tags": {t["Key"]: t["Value"] for t in _tags(props.get("Tags"))} or None,
            },
        )

    def secret(self, resource: Resource, name: str) -> None:
        props = resource.properties
        value = self.stack._local_secret(resource.logical_id) or self.stack._local_secret(name)
        if value is None:
            value = props.get("SecretString")
        if value is None:
            generate = props.get("GenerateSecretString") or {}
            generated = "local-" + short_hash(self.stack.stack_name, resource.logical_id, length=24)
            template = generate.get("SecretStringTemplate")
            if template and generate.get("GenerateStringKey"):
                document = json.loads(template)
                document[generate["GenerateStringKey"]] = generated
                value = json.dumps(document)
            else:
                value = generated
        self.call(
            resource,
            "secretsmanager",
            "CreateSecret",
            {
                "Name": name,
                "Description": props.get("Description"),
                "SecretString": value,
                "KmsKeyId": props.get("KmsKeyId"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        # CloudFormation's ARN suffix is random; Ref already returned a deterministic one: make moto agree.
        stored = secretsmanager_backends[self.stack.account_id][self.stack.region].secrets[name]
        stored.arn = str(self.stack._arn_of(resource.logical_id, resource.type, name))

    def parameter(self, resource: Resource, name: str) -> None:
        props = resource.properties
        ssm: dict[str, Any] = self.stack.local_values.get("SSM", {})
        value = ssm.get(name, ssm.get(resource.logical_id, props.get("Value")))
        self.call(
            resource,
            "ssm",
            "PutParameter",
            {
                "Name": name,
                "Value": ",".join(value) if isinstance(value, list) else str(value),
                "Type": props.get("Type", "String"),
                **_pick(props, "Description", "Tier", "AllowedPattern", "DataType", "Policies"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )

    def bucket(self, resource: Resource, name: str) -> None:
        params: dict[str, Any] = {"Bucket": name}
        if self.stack.region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": self.stack.region}
        self.call(resource, "s3", "CreateBucket", params)

    def alarm(self, resource: Resource, name: str) -> None:
        props = dict(resource.properties)
        props["AlarmName"] = name
        if props.get("Tags"):
            props["Tags"] = _tags(props["Tags"])
        self.call(resource, "cloudwatch", "PutMetricAlarm", props)

    def dashboard(self, resource: Resource, name: str) -> None:
        self.call(
            resource,
            "cloudwatch",
            "PutDashboard",
            {"DashboardName": name, "DashboardBody": resource.properties.get("DashboardBody", "{}")},
        )

    def state_machine(self, resource: Resource, name: str) -> None:
        props = resource.properties
        role = props.get("RoleArn") or f"arn:{self.stack.partition}:iam::{self.stack.account_id}:role/{name}"
        self.call(
            resource,
            "stepfunctions",
            "CreateStateMachine",
            {
                "name": name,
                "definition": self.stack.state_machine_definitions[resource.logical_id],
                "roleArn": role,
                "type": props.get("StateMachineType", "STANDARD"),
                "loggingConfiguration": _lower_keys(props.get("LoggingConfiguration")),
                "tracingConfiguration": _lower_keys(props.get("TracingConfiguration")),
                "tags": _tags(props.get("Tags"), key="key", val="value") or None,
            },
        )

    def rule(self, resource: Resource, name: str) -> None:
        props = resource.properties
        bus = props.get("EventBusName")
        pattern = props.get("EventPattern")
        self.call(
            resource,
            "events",
            "PutRule",
            {
                "Name": name,
                "EventBusName": bus,
                "EventPattern": pattern
                if isinstance(pattern, str) or pattern is None
                else json.dumps(pattern),
                "ScheduleExpression": props.get("ScheduleExpression"),
                "State": props.get("State"),
                "Description": props.get("Description"),
                "RoleArn": props.get("RoleArn"),
            },
        )
        targets = props.get("Targets") or []
        if targets:
            self.call(
                resource, "events", "PutTargets", {"Rule": name, "EventBusName": bus, "Targets": targets}
            )

    def schedule_group(self, resource: Resource, name: str) -> None:
        if name == "default":
            return
        self.call(
            resource,
            "scheduler",
            "CreateScheduleGroup",
            {"Name": name, "Tags": _tags(resource.properties.get("Tags")) or None},
        )

    def schedule(self, resource: Resource, name: str) -> None:
        props = resource.properties
        self.call(
            resource,
            "scheduler",
            "CreateSchedule",
            {
                "Name": name,
                **_pick(
                    props,
                    "GroupName",
                    "ScheduleExpression",
                    "ScheduleExpressionTimezone",
                    "FlexibleTimeWindow",
                    "Target",
                    "State",
                    "StartDate",
                    "EndDate",
                    "Description",
                    "KmsKeyArn",
                    "ActionAfterCompletion",
                ),
            },
        )


def _lower_keys(value: Any) -> Any:
    """Step Functions' API spells ``loggingConfiguration.level``; CloudFormation spells ``Level``."""
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: _lower_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower_keys(v) for v in value]
    return value
