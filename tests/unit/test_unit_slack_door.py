"""The Slack door: verification (signature, 5-minute window, replay, base64), the /gpu commands, the
approval buttons, the thread routing of progress messages, and logs that never show a secret."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
import time_machine
from capacity.adapters import clients
from capacity.adapters.dynamodb import SignatureLog
from capacity.adapters.scheduler import RequestSchedules
from capacity.logic.doors import schedules, slack_door
from capacity.logic.steps.common import post
from capacity.record_kinds import APPROVAL, APPROVAL_DECISION, SLACK_ROOT, SLACK_THREAD
from capacity.records import State
from capacity.request import parse_request
from capacity.resources import SlackMessage

from events.slack_signed_request import command_body, interaction_body, local_secret, proxy_event, resigned
from tests.ledger_seed import seed
from tests.unit.conftest import Harness
from tests.unit.handler_support import LambdaContext, load_handler
from tests.unit.unit_fakes import request_body

ROOT = Path(__file__).resolve().parents[2]
SIGNED_AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the sample events' X-Slack-Request-Timestamp
STAMP = int(SIGNED_AT.timestamp())
SECRET = local_secret()
BOT_TOKEN = "xoxb-unit-tests-not-a-real-token"  # a fake token the logs must not show


def sample(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((ROOT / "events" / name).read_text())
    return event


@pytest.fixture
def door(harness: Harness) -> tuple[slack_door.Door, list[dict[str, Any]]]:
    """The door with the local secret, the moto idempotency table, approver U0APPROVER; records answers."""
    harness.clock.now = SIGNED_AT
    responses: list[dict[str, Any]] = []

    def respond(url: str, text: str, **kwargs: Any) -> bool:
        responses.append({"url": url, "text": text, **kwargs})
        return True

    return (
        slack_door.Door(
            signing_secret=lambda: SECRET,
            guard=SignatureLog("idempotency", clients.dynamodb("us-east-1")),
            approvers=frozenset({"U0APPROVER"}),
            respond=respond,
        ),
        responses,
    )


def answer_of(result: slack_door.SlackAnswer) -> tuple[int, str]:
    return result.status, str(result.body.get("text") or result.body.get("message") or "")


# ------------------------------------------------------------------------------------------ verification


def test_a_valid_signed_command_is_answered_with_the_usage(harness: Harness, door: Any) -> None:
    status, text = answer_of(slack_door.handle(sample("slack_command_help.json"), harness.ports, door[0]))
    assert status == 200
    assert text == slack_door.USAGE


def test_a_base64_body_is_decoded_before_verifying_and_reserve_puts_one_event(
    harness: Harness, door: Any
) -> None:
    event = sample("slack_command_reserve.json")
    assert event["isBase64Encoded"] is True
    result = slack_door.handle(event, harness.ports, door[0])
    assert result.status == 200
    assert result.body["response_type"] == "ephemeral"
    assert "Reservation `slack-week-49` requested: 2 x ml.p5.48xlarge for 72 h" in result.body["text"]
    assert harness.events.types() == ["ReservationRequested"]
    detail = harness.events.puts[0][1]
    assert detail["slack"] == {"channel_id": "C0CAPACITY", "user_id": "U0REQUESTER", "team_id": "T0LOCALCLD"}
    request = parse_request(detail["request"], now=None)
    assert request.requester == "slack:U0REQUESTER"
    assert request.regions == ["us-east-1", "us-west-2", "us-east-2"]
    assert request.max_upfront_fee_usd == 12000
    assert request.approval_above_usd == 1000
    assert [(m.name, m.model_name) for m in request.models] == [
        ("llama-eu", "llama-eu"),
        ("llama-us", "llama-us"),
    ]


def test_a_forged_signature_is_401_and_runs_nothing(harness: Harness, door: Any) -> None:
    forged = resigned(sample("slack_command_reserve.json"), secret="someone-else", timestamp=STAMP)
    status, text = answer_of(slack_door.handle(forged, harness.ports, door[0]))
    assert (status, text) == (401, "unauthorized: the request signature does not match")
    assert harness.events.puts == []


def test_a_body_changed_after_signing_is_401(harness: Harness, door: Any) -> None:
    event = sample("slack_command_help.json")
    event["body"] = event["body"].replace("help", "cancel+slack-week-49")
    assert answer_of(slack_door.handle(event, harness.ports, door[0]))[0] == 401


@pytest.mark.parametrize("skew", [timedelta(minutes=5, seconds=1), -timedelta(minutes=5, seconds=1)])
def test_a_timestamp_more_than_5_minutes_off_is_401(harness: Harness, door: Any, skew: timedelta) -> None:
    harness.clock.now = SIGNED_AT + skew
    status, text = answer_of(slack_door.handle(sample("slack_command_help.json"), harness.ports, door[0]))
    assert status == 401
    assert "more than 5 minutes" in text


def test_a_timestamp_within_5_minutes_is_accepted(harness: Harness, door: Any) -> None:
    harness.clock.now = SIGNED_AT + timedelta(minutes=4, seconds=59)
    assert answer_of(slack_door.handle(sample("slack_command_help.json"), harness.ports, door[0]))[0] == 200


def test_a_replayed_request_is_401_the_second_time(harness: Harness, door: Any) -> None:
    event = sample("slack_command_reserve.json")
    assert slack_door.handle(event, harness.ports, door[0]).status == 200
    status, text = answer_of(slack_door.handle(event, harness.ports, door[0]))
    assert (status, text) == (401, "unauthorized: this signed request was already received (replay)")
    assert harness.events.types() == ["ReservationRequested"]


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing X-Slack-Request-Timestamp or X-Slack-Signature"),
        ({"X-Slack-Request-Timestamp": "soon", "X-Slack-Signature": "v0=00"}, "not epoch seconds"),
        ({"X-Slack-Request-Timestamp": "9" * 40, "X-Slack-Signature": "v0=00"}, "not epoch seconds"),
        ({"X-Slack-Request-Timestamp": "\u00b2", "X-Slack-Signature": "v0=00"}, "not epoch seconds"),
    ],
)
def test_missing_or_malformed_headers_are_401(
    harness: Harness, door: Any, headers: dict[str, str], reason: str
) -> None:
    event = {**sample("slack_command_help.json"), "headers": headers, "multiValueHeaders": None}
    status, text = answer_of(slack_door.handle(event, harness.ports, door[0]))
    assert status == 401
    assert reason in text


def test_a_body_marked_base64_that_is_not_is_401(harness: Harness, door: Any) -> None:
    event = {**sample("slack_command_help.json"), "isBase64Encoded": True, "body": "%%%not base64"}
    status, text = answer_of(slack_door.handle(event, harness.ports, door[0]))
    assert status == 401
    assert "not base64" in text


# ------------------------------------------------------------------------------------------ the commands


def command(harness: Harness, door: Any, text: str, *, user: str = "U0REQUESTER") -> slack_door.SlackAnswer:
    event = proxy_event("/slack/commands", command_body(text, user_id=user), secret=SECRET, timestamp=STAMP)
    harness.clock.advance(seconds=1)  # a new request each time (the signature differs with the time)
    return slack_door.handle(
        resigned(event, secret=SECRET, timestamp=int(harness.clock.now.timestamp())), harness.ports, door[0]
    )


def test_an_unknown_subcommand_answers_the_usage_naming_it(harness: Harness, door: Any) -> None:
    status, text = answer_of(command(harness, door, "buy 2 gpus"))
    assert status == 200
    assert text.startswith("`buy` is not a /gpu command.")
    assert slack_door.USAGE in text


def test_the_issue_example_parses_into_a_request() -> None:
    words = slack_door.split_words(
        "2 ml.p5.48xlarge 3d from 2026-12-10 regions=us-east-1,us-west-2 models=llama-eu,llama-us max=30000"
    )
    body = slack_door.request_from_words(words, user_id="U1", now=SIGNED_AT, default_region="us-east-1")
    assert body == {
        "requester": "slack:U1",
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 2,
        "duration_hours": 72,
        "earliest_start": "2026-12-10T00:00:00Z",
        "latest_end": "2026-12-14T00:00:00Z",
        "regions": ["us-east-1", "us-west-2"],
        "max_upfront_fee_usd": "30000",
        "models": [
            {"name": "llama-eu", "model_name": "llama-eu"},
            {"name": "llama-us", "model_name": "llama-us"},
        ],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Escaped as Slack expects (&lt; shows as <): the problem text may echo the user's words.
        ("reserve 2 ml.p5.48xlarge", "give at least `&lt;count&gt; &lt;instance type&gt; &lt;duration&gt;`"),
        ("reserve 2 ml.p5.48xlarge 3d models=a", "`max=` is required"),
        ("reserve 2 ml.p5.48xlarge 36x models=a max=1", "`36x` is not a duration"),
        ("reserve 2 ml.p5.48xlarge 3d models=a max=1 colour=red", "`colour=red` is not understood"),
        ("reserve 2 ml.p5.48xlarge 3d from tuesday models=a max=1", "`from tuesday` is not a date"),
        ("reserve 2 ml.p5.48xlarge 3d models=a max=1 max=2", "`max` is given twice"),
        ("status a b", "`status` takes one request id"),
        (
            "reserve 2 ml.p5.48xlarge 3d models=a max=1 search_until=tuesday",
            "`search_until=tuesday` is not a date",
        ),
        (
            "reserve 2 ml.p5.48xlarge 3d models=a max=1 search_every=soon",
            "`search_every=soon` must be minutes",
        ),
        (
            "reserve 2 ml.p5.48xlarge 3d models=a max=1 serve_until=friday",
            "`serve_until=friday` is not a date",
        ),
        ("reserve 2 ml.p5.48xlarge 3d models=a max=1 lead=2d", "give `serve_until=&lt;date&gt;` too"),
        (
            "reserve 2 ml.p5.48xlarge 3d models=a max=1 serve_until=2026-12-20 lead=soon",
            "`lead=soon` must be hours like `36h`",
        ),
    ],
)
def test_usage_errors_say_what_is_wrong(harness: Harness, door: Any, text: str, expected: str) -> None:
    status, answer = answer_of(command(harness, door, text))
    assert status == 200
    assert expected in answer
    assert harness.events.puts == []


def test_keep_looking_words_parse_into_the_request_fields() -> None:
    words = slack_door.split_words(
        "2 ml.p5.48xlarge 3d from 2026-12-10 models=a max=30000 search_until=2026-12-05 search_every=2h"
    )
    body = slack_door.request_from_words(words, user_id="U1", now=SIGNED_AT, default_region="us-east-1")
    assert (body["search_until"], body["search_every_minutes"]) == ("2026-12-05T00:00:00Z", 120)
    words = slack_door.split_words(
        "2 ml.p5.48xlarge 3d models=a max=1 search_until=2026-12-01T10:30Z search_every=45"
    )
    body = slack_door.request_from_words(words, user_id="U1", now=SIGNED_AT, default_region="us-east-1")
    assert (body["search_until"], body["search_every_minutes"]) == ("2026-12-01T10:30:00Z", 45)


def test_a_reserve_that_keeps_looking_is_requested_and_a_late_deadline_is_refused_naming_it(
    harness: Harness, door: Any
) -> None:
    words = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama max=30000"
    status, text = answer_of(command(harness, door, f"{words} search_until=2026-12-05"))
    assert status == 200
    assert text.startswith("Reservation `"), text
    ((kind, detail),) = harness.events.puts
    assert kind == "ReservationRequested"
    assert detail["request"]["search_until"] == "2026-12-05T00:00:00Z"
    status, text = answer_of(command(harness, door, f"{words} search_until=2026-12-12"))
    assert text.startswith("The request is not valid:")
    assert "• `search_until`: 2026-12-12T00:00:00Z is after the window's latest start" in text
    status, text = answer_of(command(harness, door, f"{words} search_until=2026-12-05 search_every=10"))
    assert "• `search_every`: must be at least 15" in text
    assert len(harness.events.puts) == 1


def test_a_reserve_that_keeps_serving_is_requested_and_a_moot_serve_until_is_refused_naming_it(
    harness: Harness, door: Any
) -> None:
    words = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama max=30000"
    status, text = answer_of(command(harness, door, f"{words} serve_until=2026-12-16T10:30Z lead=36"))
    assert status == 200
    assert text.startswith("Reservation `"), text
    ((kind, detail),) = harness.events.puts
    assert kind == "ReservationRequested"
    assert (detail["request"]["serve_until"], detail["request"]["rollover_lead_hours"]) == (
        "2026-12-16T10:30:00Z",
        36,
    )
    status, text = answer_of(command(harness, door, f"{words} serve_until=2026-12-12"))
    assert text.startswith("The request is not valid:")
    assert "• `serve_until`: 2026-12-12T00:00:00Z is not after 2026-12-13T00:00:00Z" in text
    status, text = answer_of(command(harness, door, f"{words} serve_until=2026-12-20 lead=1h"))
    assert "• `lead`:" in text
    assert len(harness.events.puts) == 1


def test_a_reserve_may_not_take_the_id_of_a_chains_next_reservation(harness: Harness, door: Any) -> None:
    words = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama max=30000 id=eval-week-49-r2"
    status, text = answer_of(command(harness, door, words))
    assert status == 200
    assert "• `id`: 'eval-week-49-r2' ends like the id of a reservation the orchestrator requests" in text
    assert harness.events.puts == []


def test_an_invalid_request_names_the_command_words(harness: Harness, door: Any) -> None:
    status, text = answer_of(command(harness, door, "reserve 3 ml.p5.48xlarge 36h models=a max=1000"))
    assert status == 200
    assert text.startswith("The request is not valid:")
    assert "• `count`: count 3 is not allowed" in text
    assert "• `duration`: unsupported duration 36 h" in text
    assert harness.events.puts == []


def test_status_shows_the_state_and_history(harness: Harness, door: Any) -> None:
    request = parse_request(request_body(request_id="slack-1", requester="slack:U0REQUESTER"), now=None)
    harness.ledger.record_request(request, actor="tests")
    status, text = answer_of(command(harness, door, "status slack-1"))
    assert status == 200
    assert text.startswith("*slack-1* is *REQUESTED*.")
    assert "REQUESTED" in text.splitlines()[-1]
    assert answer_of(command(harness, door, "status nope"))[1] == "no reservation 'nope'"
    listed = answer_of(command(harness, door, "status"))[1]
    assert listed.splitlines() == [
        "*The 1 newest reservations*",
        "• `slack-1` *REQUESTED*: 2 x ml.p5.48xlarge from 2026-12-08T11:30:00Z, by <@U0REQUESTER>",
    ]


def test_cancel_is_for_the_requester_or_an_approver(harness: Harness, door: Any) -> None:
    request = parse_request(request_body(request_id="slack-2", requester="slack:U0REQUESTER"), now=None)
    harness.ledger.record_request(request, actor="tests")
    status, text = answer_of(command(harness, door, "cancel slack-2", user="U0STRANGER"))
    assert status == 200
    assert text == "no reservation 'slack-2'"  # a stranger may not see it: its existence is not revealed
    assert harness.ledger.current_state("slack-2") is State.REQUESTED
    status, text = answer_of(command(harness, door, "cancel slack-2", user="U0REQUESTER"))
    assert text.startswith("slack-2 is CANCELLED")
    assert harness.ledger.current_state("slack-2") is State.CANCELLED
    assert harness.events.types() == ["ReleaseRequested"]
    cancelled = harness.ledger.history("slack-2")[-1]
    assert cancelled.actor == "slack:U0REQUESTER"


def test_plan_answers_the_dry_run_with_the_regions_not_searched(harness: Harness, door: Any) -> None:
    seen: list[tuple[dict[str, Any], float, str]] = []

    def planner(body: Any, ports: Any, limit: float, requester: str) -> dict[str, Any]:
        seen.append((dict(body), limit, requester))
        return {
            "request_id": "req-1",
            "decision": "DRY_RUN",
            "reason": "cheapest feasible offering",
            "team": {"team": "ml-platform", "left": "team ml-platform has $2,000.00 left in December 2026"},
            "recommendation": {
                "upfront_fee_usd": "8000",
                "region": "us-east-1",
                "availability_zone": "use1-az2",
            },
            "offerings": [{"upfront_fee_usd": "8000", "region": "us-east-1", "saving_percent": "71.2"}],
            "regions_not_searched": {"eu-west-1": "not searched: the 2 s time limit was reached"},
            "quota_errors": {},
            "advice": {
                "option": "training-plan",
                "on_demand_check": "not tried: strategy reserved always reserves",
                "text": "Recommended: training-plan ($8,000.00). The request needs certainty.",
            },
        }

    planned = slack_door.Door(door[0].signing_secret, door[0].guard, door[0].approvers, planner=planner)
    event = proxy_event(
        "/slack/commands",
        command_body("plan 2 ml.p5.48xlarge 3d from 2026-12-10 models=a max=30000"),
        secret=SECRET,
        timestamp=STAMP,
    )
    status, text = answer_of(slack_door.handle(event, harness.ports, planned))
    assert status == 200
    assert seen[0][0]["dry_run"] is True
    assert seen[0][1] == slack_door.PLAN_TIME_LIMIT_SECONDS
    assert seen[0][2] == "slack:U0REQUESTER"  # the verified Slack user, whose team judges the plan
    assert "\nTeam ml-platform has $2,000.00 left in December 2026.\n" in text
    assert text.startswith("*Plan for req-1: DRY_RUN*")
    assert "Not searched within Slack's 3 seconds: eu-west-1;" in text
    assert "\nRecommended: training-plan ($8,000.00). The request needs certainty.\n" in text
    assert "\nOn-demand capacity: not tried: strategy reserved always reserves.\n" in text
    assert "\nPick: $8000 in us-east-1 (use1-az2)" in text
    assert text.endswith("Nothing was bought.")
    assert harness.events.puts == []


def test_design_example_reserving_g6_weeks_ahead_is_refused_naming_the_training_plan_types(
    harness: Harness, door: Any
) -> None:
    # DESIGN.md's example: a later `from` defaults to strategy reserved, and ml.g6.* has no training plan
    status, text = answer_of(
        command(
            harness,
            door,
            "reserve 4 ml.g6.12xlarge 1d from 2026-12-10 models=llama-eu,llama-us max=5000 accelerators=1 "
            "memory=16384 cpus=4",
        )
    )
    assert status == 200
    assert text.startswith(
        "The request is not valid:\n• `instance type`: ml.g6.12xlarge has no SageMaker training plan"
    )
    assert "training plans reserve ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge" in text
    assert harness.events.puts == []


def test_g6_starting_now_is_requested_on_demand_first(harness: Harness, door: Any) -> None:
    status, text = answer_of(
        command(
            harness,
            door,
            "reserve 4 ml.g6.12xlarge 1d models=llama-eu,llama-us max=5000 accelerators=1 memory=16384 "
            "cpus=4",
        )
    )
    assert status == 200
    assert text.startswith("Reservation `req-"), text
    [put] = harness.events.puts
    assert put[1]["request"]["instance_type"] == "ml.g6.12xlarge"
    assert put[1]["request"]["strategy"] == "on-demand-first"


# ------------------------------------------------------------------------------------------ the buttons


def awaiting(harness: Harness, request_id: str = "slack-week-49") -> None:
    request = parse_request(request_body(request_id=request_id, requester="slack:U0REQUESTER"), now=None)
    harness.ledger.record_request(request, actor="tests")
    harness.ledger.put_once(request_id, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, request_id, State.AWAITING_APPROVAL, actor="tests")


def test_a_non_approver_pressing_approve_gets_an_ephemeral_refusal(harness: Harness, door: Any) -> None:
    awaiting(harness)
    result = slack_door.handle(sample("slack_interaction_approve_not_approver.json"), harness.ports, door[0])
    assert (result.status, result.body) == (200, {})
    assert door[1] == [
        {
            "url": "https://hooks.slack.com/actions/T0LOCALCLD/1/local",
            "text": (
                "Sorry <@U0STRANGER>, only approvers may approve or reject slack-week-49; "
                "nothing was changed."
            ),
            "ephemeral": True,
        }
    ]
    assert harness.tasks.calls == []
    assert harness.ledger.get("slack-week-49", APPROVAL_DECISION) is None


def test_an_approver_pressing_approve_answers_the_task_and_is_recorded(harness: Harness, door: Any) -> None:
    awaiting(harness)
    result = slack_door.handle(sample("slack_interaction_approve.json"), harness.ports, door[0])
    assert result.status == 200
    assert harness.tasks.calls == [
        (
            "success",
            "token-1",
            {
                "approved": True,
                "approver": "slack:U0APPROVER",
                "identity": "slack:U0APPROVER",
                "reason": "pressed in Slack",
            },
        )
    ]
    decision = harness.ledger.get("slack-week-49", APPROVAL_DECISION)
    assert decision is not None
    assert decision["approver"] == "slack:U0APPROVER"
    assert door[1][-1]["replace_original"] is True
    assert door[1][-1]["text"].startswith("*Approved by <@U0APPROVER>*: slack-week-49")


def test_reject_by_an_approver_fails_the_task_and_a_second_press_is_refused(
    harness: Harness, door: Any
) -> None:
    awaiting(harness)
    body = interaction_body("slack-week-49", approve=False, user_id="U0APPROVER")
    reject = proxy_event("/slack/interactions", body, secret=SECRET, timestamp=STAMP)
    assert slack_door.handle(reject, harness.ports, door[0]).status == 200
    assert harness.tasks.calls[0][0:2] == ("failure", "token-1")
    assert harness.tasks.calls[0][2]["error"] == "ApprovalRejected"
    again = resigned(reject, secret=SECRET, timestamp=STAMP + 1)
    harness.clock.advance(seconds=1)
    assert slack_door.handle(again, harness.ports, door[0]).status == 200
    assert "already rejected" in door[1][-1]["text"]
    assert door[1][-1]["ephemeral"] is True
    assert len(harness.tasks.calls) == 1


# ------------------------------------------------------------------------------------------ the thread


def test_progress_of_a_slack_request_goes_to_its_thread(harness: Harness) -> None:
    request = parse_request(request_body(request_id="slack-3", requester="slack:U0REQUESTER"), now=None)
    harness.ledger.record_request(request, actor="tests")
    harness.ledger.put_once("slack-3", SLACK_THREAD, {"channel_id": "C0TEAM", "user_id": "U0REQUESTER"})
    post(harness.ports, SlackMessage("first", request_id="slack-3"))
    post(harness.ports, SlackMessage("second", request_id="slack-3"))
    root, first, second = harness.slack.messages
    assert (root.channel, root.thread_ts) == ("C0TEAM", None)
    assert root.text.startswith("*Reservation slack-3* for <@U0REQUESTER>: 2 x ml.p5.48xlarge for 72 h")
    assert harness.ledger.get("slack-3", SLACK_ROOT) is not None
    assert (first.text, first.channel, first.thread_ts) == ("first", "C0TEAM", "1700000000.000001")
    assert (second.channel, second.thread_ts) == ("C0TEAM", "1700000000.000001")


def test_a_message_whose_thread_cannot_be_read_still_reaches_the_channel(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from capacity.errors import RetryableAwsError

    def throttled(request_id: str, sk: str) -> None:
        raise RetryableAwsError("DynamoDB GetItem: ThrottlingException after retries")

    monkeypatch.setattr(harness.ledger, "get", throttled)
    post(harness.ports, SlackMessage("*soak RELEASE FAILED*", request_id="soak"))
    assert [(m.text, m.channel) for m in harness.slack.messages] == [("*soak RELEASE FAILED*", None)]


def test_progress_of_an_api_request_goes_to_the_default_channel(harness: Harness) -> None:
    request = parse_request(request_body(request_id="api-1"), now=None)
    harness.ledger.record_request(request, actor="tests")
    post(harness.ports, SlackMessage("hello", request_id="api-1"))
    assert [(m.text, m.channel, m.thread_ts) for m in harness.slack.messages] == [("hello", None, None)]


# ------------------------------------------------------------------------------------------ the handler


def test_the_handler_verifies_with_the_secret_from_secrets_manager_and_never_logs_secrets(
    aws: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    signing = secrets.create_secret(Name="signing", SecretString=json.dumps({"signing_secret": SECRET}))[
        "ARN"
    ]
    token = secrets.create_secret(Name="token", SecretString=BOT_TOKEN)["ARN"]
    monkeypatch.setenv("SLACK_SIGNING_SECRET_ARN", signing)
    monkeypatch.setenv("SLACK_BOT_TOKEN_SECRET_ARN", token)
    monkeypatch.setenv("SLACK_APPROVER_IDS", "U0APPROVER")
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")
    caplog.set_level(logging.INFO)  # botocore's own DEBUG wire log prints responses: never on in Lambda
    for name in ("capacity", "slack_sdk", "aws_lambda_powertools"):
        caplog.set_level(logging.DEBUG, logger=name)
    module = load_handler("slack")
    answers = []
    with time_machine.travel(SIGNED_AT, tick=False):
        for name in ("slack_command_reserve.json", "slack_command_reserve.json", "slack_command_help.json"):
            answers.append(module.lambda_handler(sample(name), LambdaContext()))
        forged = resigned(sample("slack_command_status.json"), secret="wrong", timestamp=STAMP)
        answers.append(module.lambda_handler(forged, LambdaContext()))
    assert [a["statusCode"] for a in answers] == [200, 401, 200, 401]
    assert json.loads(answers[0]["body"])["text"].startswith("Reservation `slack-week-49` requested")
    logs = capsys.readouterr()
    everything = logs.out + logs.err + caplog.text
    assert "slack answered" in everything
    assert SECRET not in everything
    assert BOT_TOKEN not in everything
    assert sample("slack_command_reserve.json")["headers"]["X-Slack-Signature"] not in everything


# ------------------------------------------------------------------------------------------ schedules


@pytest.fixture
def request_schedules(harness: Harness) -> RequestSchedules:
    client = boto3.client("scheduler", region_name="us-east-1")
    client.create_schedule_group(Name="requests")
    store = RequestSchedules(
        client,
        group="requests",
        target_arn="arn:aws:lambda:us-east-1:123456789012:function:scheduled-request",
        role_arn="arn:aws:iam::123456789012:role/request-scheduler",
    )
    harness.ports._request_schedules = store
    return store


SCHEDULE = (
    "schedule weekly-eval cron(30 11 ? * MON *) tz=Europe/Paris after=24 window=2d 2 ml.p5.48xlarge 1d "
)
SCHEDULE += "models=llama-eu max=5000"


def test_an_approver_schedules_a_weekly_reservation(
    harness: Harness, door: Any, request_schedules: RequestSchedules
) -> None:
    status, text = answer_of(command(harness, door, SCHEDULE, user="U0APPROVER"))
    assert status == 200, text
    assert text.startswith("Schedule `weekly-eval` created: cron(30 11 ? * MON *) (Europe/Paris)")
    stored = schedules.get_schedule("weekly-eval", harness.ports)
    assert (stored["start_after_hours"], stored["window_hours"]) == (24, 48)
    assert stored["request"]["requester"] == "slack:U0APPROVER"
    assert stored["request"]["duration_hours"] == 24
    assert "earliest_start" not in stored["request"]
    hidden = answer_of(command(harness, door, "schedule list", user="U0STRANGER"))[1]
    assert hidden == "No schedules. `/gpu help` shows how to make one."  # not its own, no team
    listed = answer_of(command(harness, door, "schedule list", user="U0APPROVER"))[1]
    assert "• `weekly-eval` cron(30 11 ? * MON *) (Europe/Paris, ENABLED)" in listed
    deleted = answer_of(command(harness, door, "schedule delete weekly-eval", user="U0APPROVER"))[1]
    assert deleted.startswith("Schedule `weekly-eval` deleted")
    assert request_schedules.get("weekly-eval") is None


def test_only_approvers_create_schedules_and_the_words_are_checked(
    harness: Harness, door: Any, request_schedules: RequestSchedules
) -> None:
    refused = answer_of(command(harness, door, SCHEDULE, user="U0STRANGER"))[1]
    assert refused == "Only approvers may create or delete schedules."
    assert request_schedules.get("weekly-eval") is None
    timed = answer_of(command(harness, door, SCHEDULE + " from 2026-12-10", user="U0APPROVER"))[1]
    assert "`from`: each run's window and request id come from the schedule" in timed
    bad = answer_of(command(harness, door, SCHEDULE.replace("cron(30 11", "cron(30 25"), user="U0APPROVER"))[
        1
    ]
    assert bad.startswith("The request is not valid:\n• `expression`:")
    unknown = answer_of(command(harness, door, "schedule delete nope", user="U0APPROVER"))[1]
    assert unknown == "no schedule 'nope'"


def test_gpu_costs_refuses_unknown_words_with_the_usage() -> None:
    from capacity.logic.doors.slack_door import UsageError, _costs

    with pytest.raises(UsageError, match="by=owner"):
        _costs(["by=owner"], None, None, user_id="U1")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="not a month"):
        _costs(["month=2026-13"], None, None, user_id="U1")  # type: ignore[arg-type]
