"""Slack notifications through ``slack_sdk``'s ``WebClient.chat_postMessage`` (Slack Web API).

The bot token comes from Secrets Manager (env ``SLACK_BOT_TOKEN_SECRET_ARN``) through Powertools
Parameters (``get_secret``, cached 5 minutes); the secret holds the token itself or a JSON object with
``bot_token``. The channel is env ``SLACK_CHANNEL_ID``. With either missing the notifier is a no-op that
logs one line, so the workflow never depends on Slack. Posting errors are logged, never raised:
notifications are best effort.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.utilities.parameters import get_secret
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SlackMessage:
    """A message: ``text`` (mrkdwn, also the notification fallback) and optional Block Kit ``blocks``."""

    text: str
    blocks: Sequence[dict[str, Any]] = field(default_factory=tuple)


def token_from_secret(secret_arn: str) -> str:
    """Read the bot token from Secrets Manager (Powertools ``get_secret``, cached for 300 s).

    Raises:
        ValueError: the secret is empty or its JSON has no ``bot_token``.
    """
    value = get_secret(secret_arn, max_age=300)
    text = value.decode() if isinstance(value, bytes) else str(value or "")
    text = text.strip()
    if text.startswith("{"):
        data = json.loads(text)
        text = str(data.get("bot_token") or data.get("token") or "")
    if not text:
        raise ValueError(f"secret {secret_arn} holds no Slack bot token")
    return text


class SlackNotifier:
    """Posts messages to one channel.

    Args:
        channel_id: the channel (empty: notifications disabled).
        token_provider: returns the bot token (None: notifications disabled).
        client_factory: builds the ``WebClient`` from a token (tests).
    """

    def __init__(
        self,
        channel_id: str,
        token_provider: Callable[[], str] | None,
        *,
        client_factory: Callable[[str], WebClient] = lambda token: WebClient(token=token),
    ) -> None:
        self._channel = channel_id
        self._token_provider = token_provider
        self._client_factory = client_factory

    @property
    def enabled(self) -> bool:
        """True when a channel and a token source are configured."""
        return bool(self._channel and self._token_provider)

    def post(self, message: SlackMessage) -> bool:
        """Post ``message``; True when Slack accepted it, False when disabled or it failed (logged)."""
        if not self.enabled or self._token_provider is None:
            logger.info("Slack not configured; message not sent: %s", message.text.splitlines()[0][:200])
            return False
        try:
            client = self._client_factory(self._token_provider())
            client.chat_postMessage(
                channel=self._channel,
                text=message.text,
                blocks=list(message.blocks) or None,
                unfurl_links=False,
            )
        except (SlackApiError, SlackClientError, ValueError, OSError) as exc:
            logger.warning("Slack post failed (%s): %s", type(exc).__name__, exc)
            return False
        except Exception as exc:  # a notification must never fail the workflow
            logger.warning("Slack post failed unexpectedly (%s): %s", type(exc).__name__, exc)
            return False
        return True
