"""The Slack outbox: outbound Slack calls are captured and answered locally; nothing leaves the machine.

:meth:`Outbox.install` replaces the one method of each slack_sdk (3.47) client that opens the HTTP
connection:

- ``slack_sdk.web.base_client.BaseClient._perform_urllib_http_request_internal`` (``WebClient``: Web
  API methods such as ``chat.postMessage``, ``chat.update``, ``chat.postEphemeral``);
- ``slack_sdk.webhook.client.WebhookClient._perform_http_request_internal`` (``WebhookClient``: incoming
  webhooks and the ``response_url`` of slash commands and interactions).

Each call is recorded as an :class:`OutboxMessage` and answered as Slack answers it (Web API:
``{"ok": true, "channel": ..., "ts": ...}``; webhooks: HTTP 200 with body ``ok``). The asyncio clients
(``AsyncWebClient``) and ``LegacyWebClient`` (both need aiohttp, not installed) are not patched.

The workspace's user groups (``local_values.json`` ``Slack.UserGroups``: group id -> user ids) answer
``usergroups.users.list`` (``{"ok": true, "users": [...]}``; an unknown id ``no_such_subteam``), and the
bot scopes are those the app manifest grants (``Slack.AppManifest``, ``docs/slack-app-manifest.yaml``): a
method whose scope it lacks answers ``missing_scope`` with ``needed``, as Slack does.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit
from urllib.request import Request

from slack_sdk.web.base_client import BaseClient
from slack_sdk.webhook.client import WebhookClient
from slack_sdk.webhook.webhook_response import WebhookResponse

_BOT = {"team_id": "T0LOCALCLD", "user_id": "U0LOCALBOT", "bot_id": "B0LOCALBOT"}
SCOPES_NEEDED = {
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "usergroups.users.list": "usergroups:read",
}
"""The bot scope each Web API method the product calls needs (https://docs.slack.dev/reference/methods)."""


@dataclass(frozen=True)
class OutboxMessage:
    """One captured outbound Slack call.

    Attributes:
        at: virtual UTC time of the call.
        kind: the Web API method (``chat.postMessage``, ``chat.update``...), ``response_url`` (a post to a
            slash command's or interaction's ``response_url``) or ``webhook`` (an incoming webhook).
        channel: the ``channel`` argument (None for webhooks and methods without one).
        text: the ``text`` argument (the notification fallback text), or "".
        blocks: the Block Kit ``blocks`` (decoded from JSON when sent as a form field).
        url: the URL the call would have gone to.
        payload: every argument sent, decoded.
        ts: the message timestamp answered (Web API messages), else None.
    """

    at: datetime
    kind: str
    channel: str | None
    text: str
    blocks: list[dict[str, Any]]
    url: str
    payload: dict[str, Any] = field(default_factory=dict)
    ts: str | None = None


class Outbox:
    """Captures outbound Slack calls (see the module docstring). Thread-safe.

    Args:
        user_groups: the workspace's user groups, id (``S...``) -> member user ids.
        scopes: the bot scopes the app is installed with (None: every scope).

    Attributes:
        messages: every captured call, in order.
    """

    def __init__(
        self,
        *,
        user_groups: Mapping[str, Sequence[str]] | None = None,
        scopes: frozenset[str] | None = None,
    ) -> None:
        self.user_groups = {group: list(users) for group, users in (user_groups or {}).items()}
        self.scopes = scopes
        self.messages: list[OutboxMessage] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._saved: list[tuple[type, str, Any]] = []

    # -- wiring ----------------------------------------------------------------------------------------

    def install(self) -> None:
        """Patch slack_sdk's HTTP layer (idempotent)."""
        if self._saved:
            return
        outbox = self

        def web_internal(client: Any, url: str, req: Request) -> dict[str, Any]:
            body = outbox._answer_web(url, _request_payload(req))
            return {"status": 200, "headers": _json_headers(), "body": body}

        def webhook_internal(client: Any, url: str, req: Request) -> Any:
            outbox._record_webhook(url, _request_payload(req))
            return WebhookResponse(url=url, status_code=200, body="ok", headers={"content-type": "text/html"})

        for owner, name, replacement in (
            (BaseClient, "_perform_urllib_http_request_internal", web_internal),
            (WebhookClient, "_perform_http_request_internal", webhook_internal),
        ):
            self._saved.append((owner, name, owner.__dict__[name]))
            setattr(owner, name, replacement)

    def uninstall(self) -> None:
        """Put slack_sdk back."""
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

    # -- reading ---------------------------------------------------------------------------------------

    def texts(self) -> list[str]:
        """The ``text`` of every captured message, in order."""
        with self._lock:
            return [message.text for message in self.messages]

    def clear(self) -> None:
        """Forget the captured messages."""
        with self._lock:
            self.messages.clear()

    # -- answering -------------------------------------------------------------------------------------

    def _answer_web(self, url: str, payload: dict[str, Any]) -> str:
        parts = urlsplit(url)
        method = parts.path.rsplit("/", 1)[-1] or "api.test"
        payload = {**dict(parse_qsl(parts.query, keep_blank_values=True)), **payload}  # GET methods' params
        now = datetime.now(UTC)
        channel = payload.get("channel")
        with self._lock:
            ts = f"{int(now.timestamp())}.{next(self._counter):06d}"
            self.messages.append(
                OutboxMessage(
                    at=now,
                    kind=method,
                    channel=None if channel is None else str(channel),
                    text=str(payload.get("text") or ""),
                    blocks=_blocks(payload.get("blocks")),
                    url=url,
                    payload=payload,
                    ts=ts if method.startswith("chat.") else None,
                )
            )
        needed = SCOPES_NEEDED.get(method)
        if needed is not None and self.scopes is not None and needed not in self.scopes:
            return json.dumps(
                {
                    "ok": False,
                    "error": "missing_scope",
                    "needed": needed,
                    "provided": ",".join(sorted(self.scopes)),
                }
            )
        if method == "usergroups.users.list":
            users = self.user_groups.get(str(payload.get("usergroup") or ""))
            if users is None:
                return json.dumps({"ok": False, "error": "no_such_subteam"})
            return json.dumps({"ok": True, "users": users})
        return json.dumps(_web_answer(method, payload, ts))

    def _record_webhook(self, url: str, payload: dict[str, Any]) -> None:
        path = urlsplit(url).path
        kind = "response_url" if ("/commands/" in path or "/actions/" in path) else "webhook"
        with self._lock:
            self.messages.append(
                OutboxMessage(
                    at=datetime.now(UTC),
                    kind=kind,
                    channel=None,
                    text=str(payload.get("text") or ""),
                    blocks=_blocks(payload.get("blocks")),
                    url=url,
                    payload=payload,
                )
            )


def _web_answer(method: str, payload: dict[str, Any], ts: str) -> dict[str, Any]:
    """Slack's answer to a Web API method (the fields callers read; https://api.slack.com/methods)."""
    channel = str(payload.get("channel") or "C0LOCALCLD")
    if method == "chat.postMessage":
        message = {"type": "message", "text": payload.get("text", ""), "ts": ts, "bot_id": _BOT["bot_id"]}
        if payload.get("blocks") is not None:
            message["blocks"] = _blocks(payload.get("blocks"))
        return {"ok": True, "channel": channel, "ts": ts, "message": message}
    if method == "chat.update":
        return {"ok": True, "channel": channel, "ts": payload.get("ts", ts), "text": payload.get("text", "")}
    if method == "chat.postEphemeral":
        return {"ok": True, "message_ts": ts}
    if method == "auth.test":
        return {
            "ok": True,
            "url": "https://localcloud.slack.com/",
            "team": "localcloud",
            "user": "capacity-bot",
            **_BOT,
        }
    if method == "conversations.open":
        return {"ok": True, "channel": {"id": "D0LOCALCLD"}}
    return {"ok": True}


def _request_payload(req: Request) -> dict[str, Any]:
    """The arguments of a urllib request built by slack_sdk (JSON body or form-encoded)."""
    data = req.data
    if data is None:
        return {}
    raw = data if isinstance(data, bytes) else str(data).encode("utf-8")
    content_type = str(req.get_header("Content-type") or req.get_header("Content-Type") or "")
    text = raw.decode("utf-8", errors="replace")
    if "json" in content_type or text.lstrip().startswith("{"):
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            return {"body": text}
        return decoded if isinstance(decoded, dict) else {"body": decoded}
    if "multipart/form-data" in content_type:
        return {"body": "(multipart upload)"}
    return _decode_fields(dict(parse_qsl(text, keep_blank_values=True)))


def _decode_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """Form fields as Slack reads them: ``blocks``/``attachments`` hold JSON text."""
    decoded = dict(fields)
    for key in ("blocks", "attachments", "metadata"):
        value = decoded.get(key)
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):
                decoded[key] = json.loads(value)
    return decoded


def _blocks(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    if isinstance(value, list):
        return [block if isinstance(block, dict) else _to_dict(block) for block in value]
    return []


def _to_dict(block: Any) -> dict[str, Any]:
    to_dict = getattr(block, "to_dict", None)
    result = to_dict() if callable(to_dict) else {"value": str(block)}
    return result if isinstance(result, dict) else {"value": result}


def _json_headers() -> Message:
    headers = Message()
    headers["content-type"] = "application/json; charset=utf-8"
    return headers


def workspace(local_values: Mapping[str, Any], root: Path) -> dict[str, Any]:
    """The :class:`Outbox` arguments from ``local_values.json``'s ``Slack`` section: ``user_groups`` from
    ``UserGroups`` (keys starting with ``_`` are comments) and ``scopes`` from the bot scopes of the app
    manifest ``AppManifest`` (a path under ``root``); empty without the section."""
    section = local_values.get("Slack") or {}
    groups = {k: list(v) for k, v in (section.get("UserGroups") or {}).items() if not str(k).startswith("_")}
    scopes: frozenset[str] | None = None
    manifest = section.get("AppManifest")
    if manifest:
        import yaml  # noqa: PLC0415 - PyYAML only for the manifest

        document = yaml.safe_load((root / str(manifest)).read_text()) or {}
        bot = ((document.get("oauth_config") or {}).get("scopes") or {}).get("bot") or []
        scopes = frozenset(str(scope) for scope in bot)
    return {"user_groups": groups, "scopes": scopes}
