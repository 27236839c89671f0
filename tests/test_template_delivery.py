"""template.yaml for delivery: the workflow rules' retry policy and dead-letter queue (with its policy and
alarm), and the cross-region forwarding role and grants (least privilege)."""

from __future__ import annotations

import json
from typing import Any

from capacity.logic.steps import outbox
from capacity.logic.steps.forwarding import FORWARDED_PATTERN

from tests.test_template import _template
from tests.test_template_doors import _statements

FORWARDING_RULE = {
    "Sub": "arn:${AWS::Partition}:events:*:${AWS::AccountId}:rule/${AWS::StackName}-forward-aws-events"
}


def test_workflow_rules_retry_for_a_day_then_dead_letter_to_an_alarmed_queue() -> None:
    resources = _template()["Resources"]
    for source, event in (
        ("ReserveCapacityStateMachine", "ReservationRequested"),
        ("ReleaseCapacityStateMachine", "ReleaseRequested"),
        ("WorkflowStoppedStateMachine", "WorkflowStopped"),
    ):
        rule = resources[source]["Properties"]["Events"][event]["Properties"]
        assert rule["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
        assert rule["DeadLetterConfig"] == {"Arn": {"GetAtt": "WorkflowDeliveryFailuresQueue.Arn"}}
    (statement,) = resources["WorkflowDeliveryFailuresQueuePolicy"]["Properties"]["PolicyDocument"][
        "Statement"
    ]
    # EventBridge sends dead letters as events.amazonaws.com, for these three rules only.
    assert statement["Principal"] == {"Service": "events.amazonaws.com"}
    assert statement["Action"] == "sqs:SendMessage"
    assert statement["Condition"]["ArnEquals"]["aws:SourceArn"] == [
        {"GetAtt": "ReserveCapacityStateMachineReservationRequested.Arn"},
        {"GetAtt": "ReleaseCapacityStateMachineReleaseRequested.Arn"},
        {"GetAtt": "WorkflowStoppedStateMachineWorkflowStopped.Arn"},
    ]
    alarm = resources["WorkflowDeliveryFailuresAlarm"]["Properties"]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"GetAtt": "WorkflowDeliveryFailuresQueue.QueueName"}}
    ]
    assert alarm["AlarmActions"] == [{"Ref": "OperationsTopic"}]


def test_the_forwarder_role_may_only_put_events_on_the_app_bus() -> None:
    role = _template()["Resources"]["ForwarderRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "events.amazonaws.com"}
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    (policy,) = role["Policies"]
    assert policy["PolicyDocument"]["Statement"] == [
        {"Effect": "Allow", "Action": "events:PutEvents", "Resource": {"GetAtt": "EventBus.Arn"}}
    ]


def _by_action(function: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for statement in _statements(function):
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        for action in actions:
            found.setdefault(action, []).append(statement)
    return found


def test_forwarding_grants_are_scoped_to_the_rule_the_bus_and_the_role() -> None:
    resources = _template()["Resources"]
    for name, actions in (
        ("CreateInferenceComponentsFunction", ("events:PutRule", "events:PutTargets")),
        ("PurchaseCapacityFunction", ("events:PutRule", "events:PutTargets")),
        (
            "ReleaseCapacityFunction",
            ("events:PutRule", "events:PutTargets", "events:RemoveTargets", "events:DeleteRule"),
        ),
    ):
        function = resources[name]
        grants = _by_action(function)
        for action in actions:
            assert [s["Resource"] for s in grants[action]] == [FORWARDING_RULE], (name, action)
        (targets,) = grants["events:PutTargets"]
        # Every target of the call must be the bus (PutTargets takes several: a set operator).
        assert targets["Condition"] == {
            "ForAllValues:ArnEquals": {"events:TargetArn": {"GetAtt": "EventBus.Arn"}}
        }
        passes = [s for s in grants["iam:PassRole"] if s["Resource"] == {"GetAtt": "ForwarderRole.Arn"}]
        assert [s["Condition"] for s in passes] == [
            {"StringEquals": {"iam:PassedToService": "events.amazonaws.com"}}
        ]
        env = function["Properties"]["Environment"]["Variables"]
        assert env["FORWARDING_TARGET_ARN"] == {"GetAtt": "EventBus.Arn"}
        assert env["FORWARDING_ROLE_ARN"] == {"GetAtt": "ForwarderRole.Arn"}
        assert env["FORWARDING_RULE_NAME"] == {"Sub": "${AWS::StackName}-forward-aws-events"}


def test_forwarded_events_have_matching_rules_on_the_app_bus() -> None:
    resources = _template()["Resources"]
    for function, home, forwarded in (
        ("ScaleComponentsFunction", "AlarmStateChange", "ForwardedAlarmStateChange"),
        (
            "CapacityBlockEventsFunction",
            "CapacityBlockExpirationWarning",
            "ForwardedCapacityBlockExpirationWarning",
        ),
    ):
        events = resources[function]["Properties"]["Events"]
        assert events[forwarded]["Properties"]["EventBusName"] == {"Ref": "EventBus"}
        assert "EventBusName" not in events[home]["Properties"]  # the stack region's default bus
        assert events[forwarded]["Properties"]["Pattern"] == events[home]["Properties"]["Pattern"]


def test_the_forwarding_rule_matches_exactly_what_the_stack_rules_match() -> None:
    events = {
        name: e["Properties"]["Pattern"]
        for function in ("ScaleComponentsFunction", "CapacityBlockEventsFunction")
        for name, e in _template()["Resources"][function]["Properties"]["Events"].items()
        if "EventBusName" not in e["Properties"]
    }
    stack_rules = {"$or": [events["AlarmStateChange"], events["CapacityBlockExpirationWarning"]]}
    assert stack_rules == FORWARDED_PATTERN


def test_the_ledger_stream_reaches_the_outbox_with_exactly_the_decisions_and_an_alarmed_dead_letter() -> None:
    resources = _template()["Resources"]
    assert resources["LedgerTable"]["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    mapping = resources["OutboxStreamMapping"]["Properties"]
    assert mapping["FunctionName"] == {"Ref": "OutboxFunction"}
    assert mapping["EventSourceArn"] == {"GetAtt": "LedgerTable.StreamArn"}
    patterns = [json.loads(f["Pattern"]) for f in mapping["FilterCriteria"]["Filters"]]
    assert patterns == list(
        outbox.FILTERS
    )  # the one definition of a decision item: capacity.logic.steps.outbox
    assert mapping["BisectBatchOnFunctionError"] is True
    assert mapping["StartingPosition"] == "TRIM_HORIZON"  # nothing recorded before the mapping is lost
    assert mapping["DestinationConfig"] == {
        "OnFailure": {"Destination": {"GetAtt": "OutboxFailuresQueue.Arn"}}
    }
    alarm = resources["OutboxFailuresAlarm"]["Properties"]
    assert alarm["Dimensions"] == [
        {"Name": "QueueName", "Value": {"GetAtt": "OutboxFailuresQueue.QueueName"}}
    ]
    assert alarm["AlarmActions"] == [{"Ref": "OperationsTopic"}]
    # Least privilege: this one stream (not AWSLambdaDynamoDBExecutionRole's every stream), this one queue.
    grants = _by_action(resources["OutboxFunction"])
    assert [g["Resource"] for g in grants["dynamodb:GetRecords"]] == [{"GetAtt": "LedgerTable.StreamArn"}]
    assert [g["Resource"] for g in grants["sqs:SendMessage"]] == [{"GetAtt": "OutboxFailuresQueue.Arn"}]
    assert "dynamodb:UpdateItem" not in grants
    assert "ManagedPolicyArns" not in resources["OutboxFunction"]["Properties"]
