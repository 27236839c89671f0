"""Sign Slack requests with a local signing secret and post them to ``make serve`` (or write them as events).

Slack signs each request: ``X-Slack-Signature = v0=HMAC-SHA256(signing secret, "v0:{timestamp}:{body}")``
with ``X-Slack-Request-Timestamp`` (Slack's "Verifying requests from Slack"). This script does the same
with the local secret (``localcloud/local_values.json``, ``SecretsManager.SlackSigningSecret``), so the
Slack door can be driven without Slack:

    make serve            # in another terminal (it creates the models llama-eu and llama-us first)
    .venv/bin/python events/slack_signed_request.py command "help"
    .venv/bin/python events/slack_signed_request.py command \\
        "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama-eu,llama-us max=30000 id=slack-eval"
    .venv/bin/python events/slack_signed_request.py command "status slack-eval"
    .venv/bin/python events/slack_signed_request.py --user U0APPROVER approve slack-eval

The timestamp is this machine's clock, as Slack signs with its own: ``serve`` re-signs a request carrying
the local signature at the virtual instant as old as the request is in real time
(:class:`localcloud.serving.SlackClock`), so Slack's 5-minute window holds at any ``SPEED``.
``--replay`` sends the same signed request twice (the second answers 401),
``--forge`` signs with a wrong secret (401). ``--write-event FILE`` writes the API Gateway proxy event
instead of posting it (``events/slack_*.json`` were made so, with ``--at``; ``--base64`` encodes its body
as API Gateway may).
"""

from __future__ import annotations

import argparse
import base64
import copy
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

ROOT = Path(__file__).resolve().parents[1]
LOCAL_VALUES = ROOT / "localcloud/local_values.json"
COMMAND_PATH = "/slack/commands"
INTERACTION_PATH = "/slack/interactions"
TEAM = "T0LOCALCLD"
CHANNEL = "C0CAPACITY"
USER = "U0REQUESTER"


def local_secret() -> str:
    """The local signing secret (``localcloud/local_values.json``)."""
    values: dict[str, Any] = json.loads(LOCAL_VALUES.read_text())
    return str(values["SecretsManager"]["SlackSigningSecret"])


def sign(body: str, *, secret: str, timestamp: int) -> str:
    """``v0=...``: Slack's signature of ``body`` sent at ``timestamp`` (epoch seconds)."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    return signature or ""


def command_body(text: str, *, user_id: str = USER, channel_id: str = CHANNEL) -> str:
    """A slash command's form body as Slack posts it (``application/x-www-form-urlencoded``)."""
    return urlencode(
        {
            "token": "deprecated-verification-token",
            "team_id": TEAM,
            "team_domain": "localcloud",
            "channel_id": channel_id,
            "channel_name": "gpu-capacity",
            "user_id": user_id,
            "user_name": "local.user",
            "command": "/gpu",
            "text": text,
            "api_app_id": "A0LOCALAPP",
            "response_url": f"https://hooks.slack.com/commands/{TEAM}/1/local",
            "trigger_id": "1.2.local",
        }
    )


def interaction_body(
    request_id: str, *, approve: bool, user_id: str, channel_id: str = CHANNEL, message_ts: str = "1.000001"
) -> str:
    """A ``block_actions`` interaction (the Approve or Reject button of the approval message)."""
    return button_body(
        "approve_reservation" if approve else "reject_reservation",
        request_id,
        user_id=user_id,
        label="Approve" if approve else "Reject",
        block_id=f"approval:{request_id}",
        channel_id=channel_id,
        message_ts=message_ts,
    )


def button_body(
    action_id: str,
    value: str,
    *,
    user_id: str,
    label: str = "Button",
    block_id: str = "actions",
    channel_id: str = CHANNEL,
    message_ts: str = "1.000001",
) -> str:
    """A ``block_actions`` interaction: ``user_id`` pressed the button ``action_id`` carrying ``value``."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "localcloud"},
        "user": {"id": user_id, "username": "local.user", "team_id": TEAM},
        "api_app_id": "A0LOCALAPP",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel_id},
        "channel": {"id": channel_id, "name": "gpu-capacity"},
        "trigger_id": "1.2.local",
        "response_url": f"https://hooks.slack.com/actions/{TEAM}/1/local",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "value": value,
                "text": {"type": "plain_text", "text": label},
                "action_ts": "1.000002",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def headers(body: str, *, secret: str, timestamp: int) -> dict[str, str]:
    """The headers Slack sends with a signed request."""
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": sign(body, secret=secret, timestamp=timestamp),
    }


def proxy_event(path: str, body: str, *, secret: str, timestamp: int, encode: bool = False) -> dict[str, Any]:
    """The API Gateway REST proxy event of a signed Slack request (``encode``: body in base64)."""
    sent = headers(body, secret=secret, timestamp=timestamp)
    return {
        "resource": path,
        "path": path,
        "httpMethod": "POST",
        "headers": sent,
        "multiValueHeaders": {key: [value] for key, value in sent.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": path,
            "httpMethod": "POST",
            "path": f"/v1{path}",
            "stage": "v1",
            "accountId": "123456789012",
            "requestId": "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
            "requestTimeEpoch": timestamp * 1000,
            "identity": {"sourceIp": "54.80.0.10", "userAgent": sent["User-Agent"]},
            "protocol": "HTTP/1.1",
        },
        "body": base64.b64encode(body.encode()).decode() if encode else body,
        "isBase64Encoded": encode,
    }


def resigned(event: dict[str, Any], *, secret: str, timestamp: int) -> dict[str, Any]:
    """``event`` signed again at ``timestamp`` (tests: the sample events at another time)."""
    fresh = copy.deepcopy(event)
    body = str(fresh["body"])
    raw = base64.b64decode(body).decode() if fresh.get("isBase64Encoded") else body
    sent = headers(raw, secret=secret, timestamp=timestamp)
    fresh["headers"] = sent
    fresh["multiValueHeaders"] = {key: [value] for key, value in sent.items()}
    return fresh


def post(url: str, path: str, body: str, sent: dict[str, str]) -> tuple[int, str]:
    """POST ``body`` with ``sent`` headers; returns the status and the answer's body."""
    target = url.rstrip("/") + path
    request = urllib.request.Request(target, data=body.encode(), headers=sent, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - a local URL
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def main(argv: list[str] | None = None) -> int:
    """Sign and post (or write) one Slack request; prints the answer. Exit 0 on HTTP 200."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    port = os.environ.get("LOCALCLOUD_PORT") or "3000"
    parser.add_argument(
        "--url",
        default=f"http://127.0.0.1:{port}",
        help="the local API (make serve; default port: LOCALCLOUD_PORT, else 3000)",
    )
    parser.add_argument("--user", default=USER, help="the Slack user id who acts")
    parser.add_argument("--channel", default=CHANNEL, help="the Slack channel id")
    parser.add_argument("--at", type=int, help="timestamp (epoch seconds) instead of the server's clock")
    parser.add_argument("--base64", action="store_true", help="send the body base64-encoded")
    parser.add_argument("--forge", action="store_true", help="sign with a wrong secret (expect 401)")
    parser.add_argument("--replay", action="store_true", help="send the same request twice (expect 401)")
    parser.add_argument("--write-event", type=Path, help="write the API Gateway event here, do not post")
    sub = parser.add_subparsers(dest="kind", required=True)
    slash = sub.add_parser("command", help="a /gpu slash command")
    slash.add_argument("text", help='the words after /gpu, e.g. "help"')
    for name in ("approve", "reject"):
        button = sub.add_parser(name, help=f"press {name.title()} on an approval message")
        button.add_argument("request_id")
    args = parser.parse_args(argv)
    if args.kind == "command":
        path, body = COMMAND_PATH, command_body(args.text, user_id=args.user, channel_id=args.channel)
    else:
        path = INTERACTION_PATH
        body = interaction_body(args.request_id, approve=args.kind == "approve", user_id=args.user)
    secret = "not-the-signing-secret" if args.forge else local_secret()
    if args.write_event:
        timestamp = args.at or 0
        event = proxy_event(path, body, secret=secret, timestamp=timestamp, encode=args.base64)
        args.write_event.write_text(json.dumps(event, indent=2) + "\n")
        print(f"wrote {args.write_event}")
        return 0
    if args.base64:
        parser.error("--base64 goes with --write-event: the local API base64-encodes only non-UTF-8 bodies")
    timestamp = args.at or int(time.time())
    sent = headers(body, secret=secret, timestamp=timestamp)
    status = 0
    for _ in range(2 if args.replay else 1):
        status, answer = post(args.url, path, body, sent)
        print(status, answer)
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
