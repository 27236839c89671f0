"""Benchmark 3's signed requests: each one passes Slack's verification and none is a replay of another."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

from bench.slack_ack import signed

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-signing-secret"
NOW = 1795953600


def test_requests_signed_at_the_same_second_differ_and_each_verifies() -> None:
    event = json.loads((ROOT / "events/slack_command_help.json").read_text())
    first, second = signed(event, SECRET, NOW), signed(event, SECRET, NOW)
    verifier = SignatureVerifier(SECRET, clock=type("Clock", (), {"now": staticmethod(lambda: NOW)})())
    for request in (first, second):
        assert verifier.is_valid_request(request["body"], request["headers"])
        assert parse_qs(request["body"])["text"] == ["help"]
    assert first["headers"]["X-Slack-Signature"] != second["headers"]["X-Slack-Signature"]


def test_a_base64_sample_body_is_signed_decoded() -> None:
    event = json.loads((ROOT / "events/slack_command_reserve.json").read_text())
    assert event["isBase64Encoded"] is True
    request = signed(event, SECRET, NOW)
    assert request["isBase64Encoded"] is False
    decoded = base64.b64decode(event["body"]).decode()
    assert parse_qs(request["body"])["command"] == parse_qs(decoded)["command"] == ["/gpu"]
