"""Issue 18: a team without Slack hears that an approval waits, through the operations topic.

``ApprovalRequested`` is turned into a readable notice (request, fee, deadline, the CLI command) by the
``ApprovalRequestedNoticeRule`` input transformer and published to ``OperationsTopic``, which only that
rule and the ReservationFailed one may publish to as ``events.amazonaws.com`` (``OperationsTopicPolicy``,
``aws:SourceArn``). The local cloud evaluates the topic policy and delivers to SNS; an SQS queue subscribed
to the topic reads what an email subscriber would get.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import START, TEMPLATE, base_request, ledger_items, post_reservation, states

RID = "approval-notice-1"
STACK = "capacity-orchestrator"


def _cloud() -> LocalCloud:
    """The template's defaults: no Slack channel, no email (an API-only team)."""
    return LocalCloud(TEMPLATE, start=START)


def _subscribe(cloud: LocalCloud) -> tuple[str, str]:
    """An SQS queue subscribed to the operations topic: (topic ARN, queue URL)."""
    topic = str(cloud.stack.physical_id("OperationsTopic"))
    with cloud.dispatcher.exempt():
        sqs = cloud.client("sqs")
        queue = sqs.create_queue(QueueName="operations-inbox")["QueueUrl"]
        attributes = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]
        queue_arn = attributes["QueueArn"]
        cloud.client("sns").subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn)
    return topic, queue


def _inbox(cloud: LocalCloud, queue: str) -> list[str]:
    """The SNS messages (``Message``) the subscribed queue received."""
    with cloud.dispatcher.exempt():
        sqs = cloud.client("sqs")
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10).get("Messages", [])
    return [json.loads(m["Body"])["Message"] for m in messages]


def _await_approval(cloud: LocalCloud) -> None:
    body = {**base_request(), "request_id": RID, "approval_above_usd": "1000"}
    assert post_reservation(cloud, body)["statusCode"] == 202
    cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))


def _approval_entered(cloud: LocalCloud) -> datetime:
    """When the reserve workflow entered RequestApproval (the approval timeout counts from there)."""
    (execution,) = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
    with cloud.dispatcher.exempt():
        sfn = cloud.client("stepfunctions")
        events = sfn.get_execution_history(executionArn=execution.arn, maxResults=1000)
    entered: list[datetime] = [
        e["timestamp"]
        for e in events["events"]
        if e["type"] == "TaskStateEntered" and e["stateEnteredEventDetails"]["name"] == "RequestApproval"
    ]
    return min(entered)


def test_an_approval_request_reaches_the_operations_topic_as_a_readable_notice() -> None:
    with _cloud() as cloud:
        topic, queue = _subscribe(cloud)
        _await_approval(cloud)
        waiting = next(i for i in ledger_items(cloud, RID) if i.get("state") == "AWAITING_APPROVAL")
        entered = _approval_entered(cloud)
        deliveries = [d for d in cloud.delivery.deliveries if d.target_arn == topic]
        inbox = _inbox(cloud, queue)
        assert cloud.iam is not None
        denials = [d for d in cloud.iam.denials if d.resource == topic]
    detail: dict[str, Any] = waiting["detail"]
    offering = detail["offering"]
    timeout = int(detail["timeout_seconds"])
    assert [(d.detail_type, d.error) for d in deliveries] == [("ApprovalRequested", None)]
    assert denials == []
    (message,) = inbox
    assert message == deliveries[0].payload  # what an email subscriber reads: a JSON string, in quotes
    notice = json.loads(message)
    assert notice.startswith(f"Capacity Orchestrator ({STACK}): reservation {RID} waits for approval.")
    assert f"Upfront fee USD {offering['upfront_fee_usd']} " in notice
    assert "approval is needed above USD 1000" in notice
    what = f"{offering['instance_count']} x {offering['instance_type']} in {offering['region']}"
    assert f"for {what}," in notice
    assert f"capacity --stack {STACK} --region us-east-1 approve {RID}" in notice
    deadline = datetime.fromisoformat(notice.split("Approve before ", 1)[1].split(" ", 1)[0])
    # Never later than the deadline Step Functions keeps, and at most a minute earlier.
    assert entered + timedelta(seconds=timeout) - timedelta(minutes=1) < deadline
    assert deadline <= entered + timedelta(seconds=timeout)


def test_the_topic_policy_lets_only_the_notice_rules_publish() -> None:
    cloud = _cloud()
    policy = cloud.stack.resources["OperationsTopicPolicy"].properties["PolicyDocument"]
    (statement,) = [s for s in policy["Statement"] if s["Sid"] == "NoticeRules"]
    sources = statement["Condition"]["ArnEquals"]["aws:SourceArn"]
    assert len(sources) == 4  # the purchase and extension approvals, the failures, the roll-overs not made
    kept = [s for s in sources if "ApprovalRequested" not in s]
    statement["Condition"]["ArnEquals"]["aws:SourceArn"] = kept
    with cloud:
        topic, queue = _subscribe(cloud)
        _await_approval(cloud)
        deliveries = [d for d in cloud.delivery.deliveries if d.target_arn == topic]
        inbox = _inbox(cloud, queue)
    assert [d.detail_type for d in deliveries] == ["ApprovalRequested"]
    assert "sns:Publish" in (deliveries[0].error or "")
    assert inbox == []


def test_a_failed_reservation_reaches_the_operations_topic_with_its_reason() -> None:
    rid = "failure-notice-1"
    body = {**base_request(), "request_id": rid}
    with LocalCloud(TEMPLATE, start=START, market=MarketConfig(capacity={"*": 0})) as cloud:  # no offering
        topic, queue = _subscribe(cloud)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run(stop_when=lambda: "FAILED" in states(cloud, rid))
        failed = next(i for i in ledger_items(cloud, rid) if i.get("state") == "FAILED")
        deliveries = [d for d in cloud.delivery.deliveries if d.target_arn == topic]
        inbox = _inbox(cloud, queue)
    assert [(d.detail_type, d.error) for d in deliveries] == [("ReservationFailed", None)]
    (message,) = inbox
    notice = json.loads(message)
    reason = failed["detail"]["reason"]
    assert notice == (
        f"Capacity Orchestrator ({STACK}): reservation {rid} failed (OfferingNotFound): {reason} "
        f"Details: capacity --stack {STACK} --region us-east-1 status {rid}"
    )


def test_the_approval_shows_the_teams_threshold_when_it_is_the_one_that_applied() -> None:
    # Given a team that needs an approval above $1,000 and a request that names a higher threshold ($5,000)
    # above the fee of what it will find (about $2,000)
    from decimal import Decimal

    from tests.integration.support import make_cloud, slack_texts
    from tests.integration.test_extension_approval import lower_team_threshold

    with make_cloud() as cloud:  # with a Slack channel: the approval is posted
        topic, queue = _subscribe(cloud)
        lower_team_threshold(cloud, Decimal(1000))
        body = {**base_request(), "request_id": RID, "approval_above_usd": "5000"}
        assert post_reservation(cloud, body)["statusCode"] == 202
        # When the workflow asks for the approval the team's threshold made needed
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, RID))
        waiting = next(i for i in ledger_items(cloud, RID) if i.get("state") == "AWAITING_APPROVAL")
        (delivery,) = [d for d in cloud.delivery.deliveries if d.target_arn == topic]
        (notice,) = _inbox(cloud, queue)
        texts = slack_texts(cloud)

    # Then the event (and the notice made of it), the ledger and the Slack post say $1,000, not $5,000
    assert Decimal(waiting["detail"]["offering"]["upfront_fee_usd"]) < Decimal(5000)
    assert waiting["detail"]["approval_above_usd"] == "1000.00"
    assert delivery.detail_type == "ApprovalRequested"
    assert "approval is needed above USD 1000" in json.loads(notice), notice
    assert "above the approval threshold $1,000.00" in texts, texts
    assert "$5,000" not in texts
