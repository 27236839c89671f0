"""Physical names, ids and ARNs the local cloud gives resources: deterministic, as CloudFormation's are
not (its ids are random), so that two runs of one template name everything alike."""

from __future__ import annotations

import hashlib

# Per resource type: the property naming the resource, the maximum physical name length, and whether
# ``Ref`` returns the ARN (else the name). CloudFormation resource reference, "Return values".
NAME_PROPERTY: dict[str, tuple[str, int]] = {
    "AWS::Lambda::Function": ("FunctionName", 64),
    "AWS::Lambda::LayerVersion": ("LayerName", 140),
    "AWS::DynamoDB::Table": ("TableName", 255),
    "AWS::Events::EventBus": ("Name", 256),
    "AWS::Events::Rule": ("Name", 64),
    "AWS::StepFunctions::StateMachine": ("StateMachineName", 80),
    "AWS::Scheduler::Schedule": ("Name", 64),
    "AWS::Scheduler::ScheduleGroup": ("Name", 64),
    "AWS::SNS::Topic": ("TopicName", 256),
    "AWS::SQS::Queue": ("QueueName", 80),
    "AWS::SecretsManager::Secret": ("Name", 512),
    "AWS::SSM::Parameter": ("Name", 1011),
    "AWS::IAM::Role": ("RoleName", 64),
    "AWS::IAM::ManagedPolicy": ("ManagedPolicyName", 128),
    "AWS::IAM::Policy": ("PolicyName", 128),
    "AWS::S3::Bucket": ("BucketName", 63),
    "AWS::CloudWatch::Alarm": ("AlarmName", 255),
    "AWS::CloudWatch::CompositeAlarm": ("AlarmName", 255),
    "AWS::CloudWatch::Dashboard": ("DashboardName", 255),
    "AWS::Logs::LogGroup": ("LogGroupName", 512),
    "AWS::ApiGateway::RestApi": ("Name", 1024),
}


def short_hash(*parts: str, length: int = 10, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
    """A short deterministic id of ``parts`` (``length`` characters of ``alphabet``)."""
    digest = int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16)
    chars = []
    for _ in range(length):
        digest, index = divmod(digest, len(alphabet))
        chars.append(alphabet[index])
    return "".join(chars)


def uuid_like(*parts: str) -> str:
    """A deterministic UUID-shaped id of ``parts`` (stack ids, KMS key ids, subscription ids)."""
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


STREAM_LABEL = "2020-01-01T00:00:00.000"
"""The DynamoDB stream label used in ``StreamArn`` (deterministic; CloudFormation's is the creation time)."""


# ARNs that follow from the partition, region, account and physical name alone (the AWS ARN formats).
ARN_FORMATS: dict[str, str] = {
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{name}",
    "AWS::Lambda::LayerVersion": "arn:{p}:lambda:{r}:{a}:layer:{name}:1",
    "AWS::Lambda::Version": "arn:{p}:lambda:{r}:{a}:function:{name}:1",
    "AWS::DynamoDB::Table": "arn:{p}:dynamodb:{r}:{a}:table/{name}",
    "AWS::Events::EventBus": "arn:{p}:events:{r}:{a}:event-bus/{name}",
    "AWS::StepFunctions::StateMachine": "arn:{p}:states:{r}:{a}:stateMachine:{name}",
    "AWS::Scheduler::ScheduleGroup": "arn:{p}:scheduler:{r}:{a}:schedule-group/{name}",
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{name}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{name}",
    "AWS::SSM::Parameter": "arn:{p}:ssm:{r}:{a}:parameter/{ssm_name}",
    "AWS::IAM::ManagedPolicy": "arn:{p}:iam::{a}:policy/{name}",
    "AWS::S3::Bucket": "arn:{p}:s3:::{name}",
    "AWS::CloudWatch::Alarm": "arn:{p}:cloudwatch:{r}:{a}:alarm:{name}",
    "AWS::CloudWatch::CompositeAlarm": "arn:{p}:cloudwatch:{r}:{a}:alarm:{name}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{name}:*",
}
