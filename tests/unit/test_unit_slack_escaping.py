"""Issue 13, defect 13 (part): text from requests is escaped wherever it is posted to Slack.

A requester of ``<!channel> <https://evil.example|Approve>`` was posted as live markup: the approval
message pinged the whole channel and carried a fake "Approve" link. Slack's rule (``&amp; &lt; &gt;``) is
applied to every value a person or AWS chose, in the text and in every block.
"""

from __future__ import annotations

import json
from typing import Any

from capacity import messages
from capacity.contracts.common import StepError
from capacity.contracts.finding import ChooseInput
from capacity.contracts.notify import NotifyInput
from capacity.logic.doors import slack_door
from capacity.logic.doors.api import decide_approval
from capacity.logic.steps.choose import choose_offering
from capacity.logic.steps.notify import notify
from capacity.record_kinds import APPROVAL, APPROVAL_REFUSED
from capacity.records import State
from capacity.request import parse_request
from capacity.resources import SlackMessage

from events.slack_signed_request import command_body, interaction_body, local_secret, proxy_event
from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.test_unit_slack_door import SIGNED_AT, STAMP
from tests.unit.test_unit_steps import search_all
from tests.unit.unit_fakes import raw_offering, request_body

EVIL = "<!channel> <https://evil.example|Approve>"
LIVE = ("<!channel>", "<https://evil.example", "<!here>")


def _everything(message: SlackMessage) -> str:
    return message.text + json.dumps(message.blocks)


def _assert_inert(text: str) -> None:
    for markup in LIVE:
        assert markup not in text
    assert "&lt;!channel&gt;" in text or "&lt;!here&gt;" in text


def test_a_requester_with_slack_markup_is_posted_escaped_in_the_approval_request(harness: Harness) -> None:
    request = parse_request(request_body(requester=EVIL, approval_above_usd="5000"), now=harness.clock())
    harness.ledger.record_request(request, actor="tests")
    harness.world.add_offerings("us-east-1", raw_offering("tpo-1", fee="8000"))
    plan = choose_offering(
        ChooseInput(request_id=request.id, searches=search_all(harness, request)), harness.ports
    )
    notify(
        NotifyInput(kind="approval_request", request_id=request.id, task_token="tok-1", plan=plan),
        harness.ports,
    )
    approval = harness.slack.messages[-1]
    _assert_inert(_everything(approval))
    assert "&lt;https://evil.example|Approve&gt;" in approval.text


def test_an_approver_and_reason_with_markup_are_escaped_in_the_outcome(harness: Harness) -> None:
    reason = "rejected by <!here>: <https://evil.example|click>"
    seed(harness.ledger, "demo-1", State.AWAITING_APPROVAL)
    notify(
        NotifyInput(
            kind="approval_outcome",
            request_id="demo-1",
            approved=False,
            reason="ApprovalRejected",
            error=StepError(Error="ApprovalRejected", Cause=reason),
        ),
        harness.ports,
    )
    _assert_inert(_everything(harness.slack.messages[-1]))
    decided = messages.approval_decided("demo-1", approved=True, approver="<!here>")
    _assert_inert(_everything(decided))


def test_failure_reasons_are_escaped() -> None:
    message = messages.failure(
        "r-1", error="LaunchFailed", reason=f"template {EVIL} not found", releasing=False
    )
    _assert_inert(_everything(message))
    _assert_inert(_everything(messages.release_failure("r-1", error="X", reason=EVIL)))
    _assert_inert(_everything(messages.release_rejected(EVIL, reason=EVIL)))
    assert messages.mention("slack:U0APPROVER") == "<@U0APPROVER>"
    assert messages.mention("slack:<!channel>") == "slack:&lt;!channel&gt;"


def test_the_slack_door_escapes_what_it_echoes(harness: Harness) -> None:
    harness.clock.now = SIGNED_AT
    door = slack_door.Door(signing_secret=local_secret, guard=_Guard(), approvers=frozenset({"U0APPROVER"}))
    request = parse_request(request_body(requester=EVIL), now=None)
    harness.ledger.record_request(request, actor="tests")
    answers: list[str] = []
    for number, text in enumerate(
        ["status", "reserve 2 ml.p5.48xlarge <!channel> models=a max=1", f"status {request.id}"]
    ):
        event = proxy_event(
            # the approver lists what it may see (every reservation: Slack's approvers see all)
            "/slack/commands",
            command_body(text, user_id="U0APPROVER"),
            secret=local_secret(),
            timestamp=STAMP + number,
        )
        answers.append(str(slack_door.handle(event, harness.ports, door).body["text"]))
    assert "&lt;!channel&gt;" in answers[0]  # the listing names the requester
    assert "&lt;!channel&gt;" in answers[1]  # the usage error echoes the word
    for answer in answers:
        assert "<!channel>" not in answer


def test_a_decision_recorded_by_an_approver_with_markup_is_echoed_escaped(harness: Harness) -> None:
    responses: list[dict[str, Any]] = []

    def respond(url: str, text: str, **kwargs: Any) -> bool:
        responses.append({"text": text})
        return True

    harness.clock.now = SIGNED_AT
    request = parse_request(request_body(), now=None)
    harness.ledger.record_request(request, actor="tests")
    harness.ledger.put_once(request.id, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, request.id, State.AWAITING_APPROVAL, actor="tests")
    decide_approval(request.id, {"approved": True}, harness.ports, identity="<!here>")
    door = slack_door.Door(
        signing_secret=local_secret,
        guard=_Guard(),
        approvers=frozenset({"U0APPROVER"}),
        respond=respond,
    )
    body = interaction_body(request.id, approve=False, user_id="U0APPROVER")
    slack_door.handle(
        proxy_event("/slack/interactions", body, secret=local_secret(), timestamp=STAMP), harness.ports, door
    )
    assert responses
    assert "<!here>" not in responses[-1]["text"]
    assert "&lt;!here&gt;" in responses[-1]["text"]


class _Guard:
    def first_use(self, key: str, *, expires_at: Any) -> bool:
        return True


def test_a_slack_requester_pressing_approve_on_its_own_request_gets_an_ephemeral_refusal(
    harness: Harness,
) -> None:
    responses: list[dict[str, Any]] = []

    def respond(url: str, text: str, **kwargs: Any) -> bool:
        responses.append({"text": text, **kwargs})
        return True

    harness.clock.now = SIGNED_AT
    request = parse_request(request_body(requester="slack:U0APPROVER"), now=None)
    harness.ledger.record_request(request, actor="tests")
    harness.ledger.put_once(request.id, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, request.id, State.AWAITING_APPROVAL, actor="tests")
    door = slack_door.Door(
        signing_secret=local_secret, guard=_Guard(), approvers=frozenset({"U0APPROVER"}), respond=respond
    )
    body = interaction_body(request.id, approve=True, user_id="U0APPROVER")
    slack_door.handle(
        proxy_event("/slack/interactions", body, secret=local_secret(), timestamp=STAMP), harness.ports, door
    )
    (answer,) = responses
    assert answer["ephemeral"] is True
    assert "requested this reservation and cannot approve or reject it" in answer["text"]
    assert harness.tasks.calls == []  # nothing handed to the workflow
    assert [i["identity"] for i in harness.ledger.items(request.id, f"{APPROVAL_REFUSED}#")] == [
        "slack:U0APPROVER"
    ]
