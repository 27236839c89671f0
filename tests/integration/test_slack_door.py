"""The Slack door on the local cloud (issue 5's Slack acceptance): a signed ``/gpu reserve`` starts the
lifecycle, progress lands in the requester's thread, a non-approver's button press is refused, an
approver's resumes the waiting workflow and the approver is in the ledger."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events.slack_signed_request import command_body, local_secret, proxy_event, resigned
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector
from tests.integration.support import REGIONS, START, TEMPLATE, ledger_items, states, training_plans

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
REQUEST_ID = "slack-week-49"


def _event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((ROOT / "events" / name).read_text())
    return event


def _cloud() -> LocalCloud:
    return LocalCloud(
        TEMPLATE,
        start=START,
        seed=7,
        faults=FaultInjector(),
        parameter_overrides={"SlackChannelId": "C0TESTS", "SlackApproverIds": "U0APPROVER,U0OTHER"},
    )


def _models(cloud: LocalCloud) -> None:
    """The SageMaker models ``/gpu reserve ... models=llama-eu,llama-us`` names, in every region."""
    for region in REGIONS:
        client = cloud.client("sagemaker", region)
        for name in ("llama-eu", "llama-us"):
            client.create_model(
                ModelName=name,
                ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker",
                PrimaryContainer={"Image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/tgi:latest"},
            )


def _now_signed(cloud: LocalCloud, name: str) -> dict[str, Any]:
    """The sample event signed at the cloud's current (virtual) time, as Slack would sign it now."""
    return resigned(_event(name), secret=local_secret(), timestamp=int(cloud.now().timestamp()))


def test_reserve_in_slack_then_approval_by_an_approver_resumes_the_lifecycle() -> None:
    with _cloud() as cloud:
        _models(cloud)
        answer = cloud.api_request(_event("slack_command_reserve.json"))  # signed at START, base64 body
        assert answer["statusCode"] == 200, answer
        ack = json.loads(answer["body"])
        assert ack["response_type"] == "ephemeral"
        assert f"Reservation `{REQUEST_ID}` requested" in ack["text"]

        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, REQUEST_ID))
        posts = [m for m in cloud.outbox.messages if m.kind == "chat.postMessage"]
        root = posts[0]
        assert root.channel == "C0CAPACITY"
        assert "thread_ts" not in root.payload
        assert f"*Reservation {REQUEST_ID}* for <@U0REQUESTER>" in root.text
        replies = posts[1:]
        assert replies
        assert {m.payload.get("thread_ts") for m in replies} == {root.ts}
        approval = replies[-1]
        assert "Approval needed" in approval.text
        assert "<@U0REQUESTER>" in approval.text
        kinds = [b["type"] for b in approval.blocks]
        assert (kinds[0], kinds[-2], kinds[-1]) == ("header", "actions", "context")

        # Someone not on the approver list presses Approve: refused, nothing changes.
        refused = cloud.api_request(_now_signed(cloud, "slack_interaction_approve_not_approver.json"))
        assert refused["statusCode"] == 200
        ephemeral = cloud.outbox.messages[-1]
        assert ephemeral.kind == "response_url"
        assert ephemeral.payload["response_type"] == "ephemeral"
        assert "only approvers" in ephemeral.text
        assert states(cloud, REQUEST_ID)[-1] == "AWAITING_APPROVAL"

        approved = cloud.api_request(_now_signed(cloud, "slack_interaction_approve.json"))
        assert approved["statusCode"] == 200
        replaced = cloud.outbox.messages[-1]
        assert replaced.kind == "response_url"
        assert replaced.payload["replace_original"] is True
        assert "Approved by <@U0APPROVER>" in replaced.text

        cloud.run_until_idle()
        seen = states(cloud, REQUEST_ID)
        assert "PURCHASED" in seen
        assert seen[-1] == "RELEASED"
        assert len(training_plans(cloud)) == 1
        decision = next(i for i in ledger_items(cloud, REQUEST_ID) if i["sk"] == "APPROVAL_DECISION")
        assert decision["approver"] == "slack:U0APPROVER"
        assert decision["approved"] is True
        assert cloud.billable_resources() == []
        _all_in_one_thread(cloud)


def _all_in_one_thread(cloud: LocalCloud) -> None:
    """Every progress message after the first is a reply under it, and the timeline shows it so."""
    root, *replies = [m for m in cloud.outbox.messages if m.kind == "chat.postMessage"]
    assert {m.payload.get("thread_ts") for m in replies} == {root.ts}
    texts = [m.text for m in replies]
    assert any("is READY" in t for t in texts)
    assert any("RELEASED" in t for t in texts)
    shown = [e.text for e in cloud.timeline.entries() if e.kind == "slack"]
    assert shown[0].startswith("[chat.postMessage C0CAPACITY] RESERVATION SLACK-WEEK-49")
    assert sum("[chat.postMessage C0CAPACITY, in thread]" in text for text in shown) == len(replies)


def test_a_replayed_or_stale_slack_request_is_refused_and_puts_nothing() -> None:
    with _cloud() as cloud:
        event = _event("slack_command_reserve.json")
        assert cloud.api_request(event)["statusCode"] == 200
        replay = cloud.api_request(event)
        assert replay["statusCode"] == 401
        assert "replay" in json.loads(replay["body"])["message"]
        cloud.run(until=cloud.now().replace(minute=6))
        stale = cloud.api_request(_event("slack_command_help.json"))  # signed at START, 6 minutes ago
        assert stale["statusCode"] == 401
        assert "5 minutes" in json.loads(stale["body"])["message"]
        cloud.run_until_idle()
        starts = [e for e in cloud.executions() if e.state_machine.endswith("ReserveCapacityStateMachine")]
        assert len(starts) == 1


def test_plan_in_slack_answers_a_dry_run_and_buys_nothing() -> None:
    with _cloud() as cloud:
        _models(
            cloud
        )  # a plan checks them where it would buy (tests/integration/test_checked_before_money.py)
        body = command_body(
            "plan 2 ml.p5.48xlarge 3d from 2026-12-06 until 2026-12-13 models=llama-eu max=12000"
        )
        event = proxy_event(
            "/slack/commands", body, secret=local_secret(), timestamp=int(cloud.now().timestamp())
        )
        answer = cloud.api_request(event)
        assert answer["statusCode"] == 200, answer
        text = json.loads(answer["body"])["text"]
        assert text.startswith("*Plan for req-")
        assert "Pick: $" in text
        assert text.endswith("Nothing was bought.")
        cloud.run_until_idle()
        assert training_plans(cloud) == []
        assert cloud.executions() == []


def test_an_approver_schedules_from_slack_on_the_local_cloud() -> None:
    words = "schedule weekly-eval cron(30 11 ? * MON *) tz=UTC 2 ml.p5.48xlarge 1d models=llama-eu max=5000"
    with _cloud() as cloud:
        event = proxy_event(
            "/slack/commands",
            command_body(words, user_id="U0APPROVER"),
            secret=local_secret(),
            timestamp=int(cloud.now().timestamp()),
        )
        answer = cloud.api_request(event)
        assert answer["statusCode"] == 200, answer
        assert json.loads(answer["body"])["text"].startswith("Schedule `weekly-eval` created")
        group = cloud.stack.physical_id("RequestScheduleGroup")
        stored = cloud.client("scheduler").get_schedule(Name="weekly-eval", GroupName=group)
        assert stored["ScheduleExpression"] == "cron(30 11 ? * MON *)"
        assert "slack:U0APPROVER" in stored["Target"]["Input"]
