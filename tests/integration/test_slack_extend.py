"""``/gpu extend`` on the local cloud (issue 17): the extension offerings with an Extend button each, for
the requester's side only, and a press (after Slack's confirm dialog) that buys the extension once, however
often it is pressed."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import EXTENSION_DECISION, EXTENSION_OFFER, SERVE_UNTIL, STATE_PREFIX

from events.slack_signed_request import button_body, command_body, local_secret, proxy_event
from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.integration.support import START, TEMPLATE, base_request, ledger_items, post_reservation, states

pytestmark = pytest.mark.integration
RID = "eval-week-49"
APPROVER, STRANGER = "U0APPROVER", "U0STRANGER"


def _cloud() -> LocalCloud:
    return LocalCloud(
        TEMPLATE,
        start=START,
        seed=7,
        market=MarketConfig(capacity={"*": 8}),  # the plan can always be extended by a day
        parameter_overrides={"SlackChannelId": "C0TESTS", "SlackApproverIds": APPROVER},
    )


def _slack(cloud: LocalCloud, path: str, body: str) -> dict[str, Any]:
    event = proxy_event(path, body, secret=local_secret(), timestamp=int(cloud.now().timestamp()))
    answer = cloud.api_request(event)
    assert answer["statusCode"] == 200, answer
    return json.loads(answer["body"]) if answer.get("body") else {}


def _extend(cloud: LocalCloud, user: str, text: str = f"extend {RID} 1d") -> dict[str, Any]:
    return _slack(cloud, "/slack/commands", command_body(text, user_id=user))


def _press(cloud: LocalCloud, user: str, button: dict[str, Any]) -> str:
    """``user`` presses ``button``; what Slack's response_url received."""
    _slack(cloud, "/slack/interactions", button_body(button["action_id"], button["value"], user_id=user))
    told = cloud.outbox.messages[-1]
    assert told.kind == "response_url"
    return str(told.text)


def _extend_calls(cloud: LocalCloud) -> list[Any]:
    return [
        c for c in cloud.dispatcher.calls if c.operation == "ExtendTrainingPlan" and (c.status or 500) < 300
    ]


def test_gpu_extend_lists_the_offerings_and_a_press_buys_the_extension_once() -> None:
    with _cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))

        # Someone who is neither the requester's side nor an approver: refused as if it did not exist (reads
        # are scoped: issue 29), nothing searched or bought
        refused = _extend(cloud, STRANGER)
        assert refused["response_type"] == "ephemeral"
        assert f"no reservation '{RID}'" in refused["text"]
        assert not [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{EXTENSION_OFFER}#")]

        offers = _extend(cloud, APPROVER)
        assert offers["response_type"] == "ephemeral"
        assert f"Extensions of {RID} by 24 h" in offers["text"]
        assert "allowed" in offers["text"]
        (actions,) = [block for block in offers["blocks"] if block["type"] == "actions"]
        (button,) = actions["elements"]
        assert button["confirm"]["title"]["text"] == "Buy this extension?"
        chosen = json.loads(button["value"])
        assert (chosen["request_id"], chosen["duration_hours"]) == (RID, 24)
        assert _extend_calls(cloud) == []  # the dry run bought nothing

        # The stranger presses the approver's button: refused
        assert f"no reservation '{RID}'" in _press(cloud, STRANGER, button)  # a stranger's press
        told = _press(cloud, APPROVER, button)
        assert f"asked to extend *{RID}*" in told
        cloud.run(until=cloud.now() + timedelta(seconds=5))  # a second press, signed at another instant
        again = _press(cloud, APPROVER, button)  # pressed twice: the workflow buys once
        assert f"asked to extend *{RID}*" in again

        cloud.run(stop_when=lambda: "EXTENDED" in states(cloud, RID))
        cloud.run(until=cloud.now().replace(hour=23))
        assert len(_extend_calls(cloud)) == 1
        extended = [
            i
            for i in ledger_items(cloud, RID)
            if i["sk"].startswith(STATE_PREFIX) and i["state"] == "EXTENDED"
        ]
        assert len(extended) == 1
        purchase = next(i for i in ledger_items(cloud, RID) if i["sk"] == "PURCHASE")
        day_later = datetime.fromisoformat(purchase["end_time"]) + timedelta(days=1)
        assert datetime.fromisoformat(extended[0]["detail"]["end_time"]) == day_later


def test_gpu_extend_without_an_id_or_with_a_bad_duration_says_what_to_fix() -> None:
    with _cloud() as cloud:
        assert "/gpu extend &lt;request id&gt; 1d" in _extend(cloud, APPROVER, "extend")["text"]
        assert "`soon` is not a duration" in _extend(cloud, APPROVER, f"extend {RID} soon")["text"]
        assert (
            _extend(cloud, APPROVER, "extend no-such-request 1d")["text"]
            == "no reservation 'no-such-request'"
        )


def test_an_extension_above_the_threshold_waits_for_an_approver_press_and_is_bought_once() -> None:
    from tests.integration.test_extension_approval import lower_team_threshold

    member = "U1"  # a member of team ml-platform, not an approver
    with _cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        lower_team_threshold(cloud, Decimal(10))
        offers = _extend(cloud, member)
        assert "allowed once an approver of the team approves it" in offers["text"]
        (actions,) = [block for block in offers["blocks"] if block["type"] == "actions"]
        (button,) = actions["elements"]
        assert "an approver of the team was asked" in _press(cloud, member, button)
        cloud.run(until=cloud.now() + timedelta(minutes=10))
        assert _extend_calls(cloud) == []  # nothing bought before the approval

        (asked,) = [m for m in cloud.outbox.messages if "Approval needed to extend" in str(m.text)]
        (choice,) = [block for block in asked.blocks if block["type"] == "actions"]
        approve, _reject = choice["elements"]
        assert "only approvers may approve" in _press(cloud, member, approve)
        assert "Approved by" in _press(cloud, APPROVER, approve)
        cloud.run(stop_when=lambda: "EXTENDED" in states(cloud, RID))
        cloud.run(until=cloud.now() + timedelta(hours=1))
        assert len(_extend_calls(cloud)) == 1
        (decision,) = [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{EXTENSION_DECISION}#")]
        assert (decision["approved"], decision["approver"]) == (True, f"slack:{APPROVER}")


def test_gpu_serve_until_sets_and_clears_it_for_the_requesters_side_only() -> None:
    with _cloud() as cloud:
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        stranger = _extend(cloud, STRANGER, f"serve {RID} until 2026-12-14T10:30Z")
        assert f"no reservation '{RID}'" in stranger["text"]  # a stranger is not told it exists
        kept = _extend(cloud, APPROVER, f"serve {RID} until 2026-12-14T10:30Z lead=3d")
        assert kept["text"].startswith(f"{RID} is kept serving until 2026-12-14T10:30:00Z: at ")
        assert "(72 h before its end)" in kept["text"]
        bad = _extend(cloud, APPROVER, f"serve {RID} until tomorrow")
        assert "`until tomorrow` is not a date" in bad["text"]
        cleared = _extend(cloud, APPROVER, f"serve {RID} until none")
        assert "no longer than the reservations bought so far" in cleared["text"]
        changes = [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{SERVE_UNTIL}#")]
        assert [(c["actor"], c["rollover_lead_hours"]) for c in changes] == [
            (f"slack:{APPROVER}", "72"),
            (f"slack:{APPROVER}", "72"),
        ]
