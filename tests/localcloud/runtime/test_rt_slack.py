"""The Slack outbox: slack_sdk calls are captured and answered; no socket is opened (pytest-socket)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
import time_machine
from slack_sdk import WebClient
from slack_sdk.webhook import WebhookClient

from localcloud.slack import Outbox
from tests.localcloud.runtime.rt_support import START

BLOCKS = [{"type": "section", "text": {"type": "mrkdwn", "text": "*2 x ml.p5.48xlarge* purchased"}}]


@pytest.fixture
def outbox() -> Iterator[Outbox]:
    captured = Outbox()
    captured.install()
    try:
        with time_machine.travel(START, tick=False):
            yield captured
    finally:
        captured.uninstall()


def test_chat_post_message_is_captured_and_answered_like_slack(outbox: Outbox) -> None:
    client = WebClient(token="xoxb-local")

    answer = client.chat_postMessage(channel="C0GPU", text="Plan purchased", blocks=BLOCKS)

    assert answer["ok"] is True
    assert answer["channel"] == "C0GPU"
    assert answer["ts"] == f"{int(START.timestamp())}.000001"
    assert answer["message"]["text"] == "Plan purchased"
    [message] = outbox.messages
    assert (message.kind, message.channel, message.text, message.blocks) == (
        "chat.postMessage",
        "C0GPU",
        "Plan purchased",
        BLOCKS,
    )
    assert message.at == START
    assert message.url == "https://slack.com/api/chat.postMessage"


def test_form_encoded_methods_decode_their_blocks(outbox: Outbox) -> None:
    client = WebClient(token="xoxb-local")
    posted = client.chat_postMessage(channel="C0GPU", text="first")

    client.chat_update(channel="C0GPU", ts=posted["ts"], text="edited", blocks=json.dumps(BLOCKS))

    assert [m.kind for m in outbox.messages] == ["chat.postMessage", "chat.update"]
    assert outbox.messages[1].blocks == BLOCKS
    assert outbox.texts() == ["first", "edited"]


def test_response_url_posts_are_captured(outbox: Outbox) -> None:
    url = "https://hooks.slack.com/commands/T0LOCAL/123/abc"

    answer = WebhookClient(url).send(text="Searching 3 regions...", response_type="ephemeral")

    assert answer.status_code == 200
    assert answer.body == "ok"
    [message] = outbox.messages
    assert (message.kind, message.text, message.payload["response_type"]) == (
        "response_url",
        "Searching 3 regions...",
        "ephemeral",
    )


def test_incoming_webhooks_are_their_own_kind(outbox: Outbox) -> None:
    WebhookClient("https://hooks.slack.com/services/T0/B0/xyz").send(text="weekly report")

    assert outbox.messages[0].kind == "webhook"


def test_uninstall_puts_slack_sdk_back() -> None:
    original = WebClient._perform_urllib_http_request_internal
    captured = Outbox()

    captured.install()
    patched = WebClient._perform_urllib_http_request_internal
    captured.uninstall()

    assert patched is not original
    assert WebClient._perform_urllib_http_request_internal is original


def test_the_suite_cannot_open_a_non_loopback_connection() -> None:
    # pytest-socket (pyproject addopts) guards every test: only 127.0.0.1/localhost/::1 are allowed.
    from pytest_socket import SocketConnectBlockedError

    with pytest.raises(SocketConnectBlockedError), pytest.warns(UserWarning, match="192.0.2.1"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1, never routable
