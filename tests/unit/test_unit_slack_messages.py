"""Block Kit of the progress messages: within Slack's limits, naming the reservation, text as fallback."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from capacity import messages
from capacity.planner import decide
from capacity.ranking import normalise_offering, rank
from capacity.request import parse_request
from capacity.resources import SlackMessage

from tests.unit.unit_fakes import NOW, raw_offering, request_body


def check(message: SlackMessage, request_id: str | None) -> list[dict[str, Any]]:
    """Slack's Block Kit limits and our layout: header first, context (naming the request) last."""
    blocks = list(message.blocks)
    assert message.text
    assert message.request_id == request_id
    assert blocks[0]["type"] == "header"
    assert 0 < len(blocks[0]["text"]["text"]) <= 150
    assert len(blocks) <= 50
    for block in blocks:
        if block["type"] == "section" and "text" in block:
            assert 0 < len(block["text"]["text"]) <= 3000
            assert block["text"]["text"].count("```") % 2 == 0  # code blocks closed in every section
        if block["type"] == "section" and "fields" in block:
            assert 0 < len(block["fields"]) <= 10
            assert all(len(f["text"]) <= 2000 for f in block["fields"])
    if request_id:
        assert blocks[-1] == {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"Reservation `{request_id}`"}],
        }
    return blocks


def test_every_progress_message_has_block_kit_within_limits() -> None:
    cases = [
        messages.purchased(
            "r-1",
            plan_name="co-r-1",
            plan_arn="arn:x",
            region="us-east-1",
            start="s",
            end="e",
            fee=Decimal(9),
        ),
        messages.plan_status("r-1", plan_name="co-r-1", status="Active", start="s", end="e"),
        messages.ready("r-1", region="us-east-1", endpoint="co-r-1", components=["co-r-1-a", "co-r-1-b"]),
        messages.scaled_from_zero("r-1", model="a", component="co-r-1-a", copies=1, failed_requests=3),
        messages.failure("r-1", error="PlanFailed", reason="the plan failed", releasing=True),
        messages.release_failure("r-1", error="ReleaseStuck", reason="still deleting"),
        messages.approval_outcome("r-1", approved=False, reason="no approval arrived"),
        messages.approval_decided("r-1", approved=True, approver="slack:U1"),
        messages.released(None, request_id="r-1", reason="cancelled"),
    ]
    for message in cases:
        check(message, "r-1")


def test_ready_says_how_to_invoke_each_component() -> None:
    message = messages.ready(
        "r-1", region="us-west-2", endpoint="co-r-1", components=["co-r-1-a", "co-r-1-b"]
    )
    blocks = check(message, "r-1")
    how = blocks[1]["text"]["text"]
    assert "aws sagemaker-runtime invoke-endpoint --region us-west-2 --endpoint-name co-r-1" in how
    assert "--inference-component-name co-r-1-a" in how
    fields = [f["text"] for f in blocks[2]["fields"]]
    assert fields == [
        "*Endpoint*\n`co-r-1`",
        "*Region*\nus-west-2",
        "*Inference component*\n`co-r-1-a`",
        "*Inference component*\n`co-r-1-b`",
    ]
    assert message.text.startswith("*r-1 is READY*: endpoint `co-r-1` in us-west-2")


def test_a_long_body_is_split_into_sections_with_closed_code_blocks() -> None:
    rows = [f"{i:>3}  us-east-1  {'x' * 60}" for i in range(100)]
    body = "Offerings:\n```\n" + "\n".join(rows) + "\n```\nDone."
    blocks = messages.blocks("Offerings", body, request_id="r-1")
    check(SlackMessage(body, blocks, request_id="r-1"), "r-1")
    sections = [b["text"]["text"] for b in blocks if b["type"] == "section"]
    assert len(sections) == 3
    joined = "\n".join(sections)
    assert all(row in joined for row in rows)
    assert sections[1].startswith("```\n")


def test_the_offerings_table_keeps_its_rows_in_the_blocks() -> None:
    request = parse_request(request_body(), now=NOW)
    raws = [raw_offering(f"o{i}", fee=str(2000 + i)) for i in range(12)]
    offerings = [
        o
        for o in (
            normalise_offering(
                r, region="us-east-1", request=request, searched_duration_hours=72, searched_count=2
            )
            for r in raws
        )
        if o is not None
    ]
    message = messages.offerings_table(request, decide(request, offerings), rank(offerings, request.regions))
    blocks = check(message, "demo-1")
    sections = "\n".join(b["text"]["text"] for b in blocks if b["type"] == "section")
    assert sections.count(" us-east-1a ") == message.text.count(" us-east-1a ") > 0


def test_the_approval_message_mentions_a_slack_requester_and_keeps_its_buttons() -> None:
    request = parse_request(request_body(requester="slack:U0REQUESTER"), now=NOW)
    message = messages.approval_request(request, None, "above the approval threshold", 7200)
    blocks = check(message, "demo-1")
    assert "(requested by <@U0REQUESTER>)" in message.text
    actions = next(b for b in blocks if b["type"] == "actions")
    assert [(e["action_id"], e["value"]) for e in actions["elements"]] == [
        ("approve_reservation", "demo-1"),
        ("reject_reservation", "demo-1"),
    ]


def test_the_thread_opens_with_who_asked_for_what() -> None:
    request = parse_request(request_body(request_id="slack-1"), now=NOW)
    message = messages.thread_root(request, request_id="slack-1", user_id="U0REQUESTER")
    blocks = check(message, "slack-1")
    fields = dict(f["text"].split("\n", 1) for f in blocks[2]["fields"])
    assert fields["*Capacity*"] == "2 x ml.p5.48xlarge"
    assert fields["*Budget*"] == "$30,000.00"
    assert message.text.startswith("*Reservation slack-1* for <@U0REQUESTER>: 2 x ml.p5.48xlarge for 72 h")


def test_extension_offers_give_a_confirmed_button_only_to_what_the_rules_allow() -> None:
    def offer(offering_id: str, fee: str, *, allowed: bool) -> dict[str, object]:
        return {
            "offering_id": offering_id,
            "availability_zone": "us-east-1a",
            "end_time": "2026-12-12T11:30:00Z",
            "upfront_fee_usd": fee,
            "on_demand_equivalent_usd": "2641.92",
            "allowed": allowed,
            "problem": None if allowed else "above the budget <$12,000.00>; nothing was bought",
        }

    dry_run = {
        "current_end": "2026-12-11T11:30:00Z",
        "offerings": [offer("tpe-1", "663.53", allowed=True), offer("tpe-2", "9999", allowed=False)],
    }

    message = messages.extension_offers("eval-week-49", 24, dry_run)

    assert (
        "1. to 2026-12-12T11:30:00Z in us-east-1a: $663.53 upfront, on demand $2,641.92; allowed"
        in message.text
    )
    assert "2. to 2026-12-12T11:30:00Z in us-east-1a: $9,999.00 upfront" in message.text
    assert "not allowed: above the budget &lt;$12,000.00&gt;" in message.text  # escaped
    (actions,) = [block for block in message.blocks if block["type"] == "actions"]
    (button,) = actions["elements"]  # none for the offering the rules refuse
    assert button["action_id"] == f"{messages.EXTEND_BUTTON}:1"
    assert json.loads(button["value"]) == {
        "request_id": "eval-week-49",
        "offering_id": "tpe-1",
        "duration_hours": 24,
    }
    assert "not refunded" in button["confirm"]["text"]["text"]

    nothing = messages.extension_offers(
        "eval-week-49", 48, {"current_end": "2026-12-11T11:30:00Z", "offerings": []}
    )
    assert "No extension of 48 h is offered now" in nothing.text
    assert not [block for block in nothing.blocks if block["type"] == "actions"]
