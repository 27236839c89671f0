"""Slack notifications through ``slack_sdk``'s ``WebClient.chat_postMessage`` (Slack Web API).

A message may name its own ``channel`` and ``thread_ts`` (a reply in the requester's thread, see
:func:`capacity.logic.steps.common.post`); otherwise it goes to env ``SLACK_CHANNEL_ID``. The Slack door also
answers interactions through their ``response_url`` (:func:`respond`, ``slack_sdk``'s ``WebhookClient``)
and reads the app's signing secret (:func:`signing_secret_from_secret`). :class:`SlackDirectory` reads
who is in a Slack user group (``usergroups.users.list``) for the teams policy.

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
from typing import Any
from urllib.parse import urlsplit

from aws_lambda_powertools.utilities.parameters import get_secret
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.webhook import WebhookClient

from capacity.errors import ConfigurationError, SlackUnavailable
from capacity.resources import SlackMessage

logger = logging.getLogger(__name__)


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


def signing_secret_from_secret(secret_arn: str) -> str:
    """Read the Slack app's signing secret from Secrets Manager (Powertools ``get_secret``, cached 300 s).

    The secret holds the signing secret itself or a JSON object with ``signing_secret``.

    Raises:
        ValueError: the secret is empty or its JSON has no ``signing_secret``.
    """
    value = get_secret(secret_arn, max_age=300)
    text = (value.decode() if isinstance(value, bytes) else str(value or "")).strip()
    if text.startswith("{"):
        text = str(json.loads(text).get("signing_secret") or "")
    if not text:
        raise ValueError(f"secret {secret_arn} holds no Slack signing secret")
    return text


SLACK_RESPONSE_HOSTS = frozenset({"hooks.slack.com"})
"""Where a ``response_url`` may point (Slack sends ``https://hooks.slack.com/...``)."""


def respond(
    response_url: str,
    text: str,
    *,
    blocks: Sequence[dict[str, Any]] = (),
    ephemeral: bool = True,
    replace_original: bool = False,
) -> bool:
    """Answer a slash command or an interaction through its ``response_url`` (valid 30 minutes, 5 uses).

    ``ephemeral`` shows the answer to the user who acted only; ``replace_original`` replaces the message
    whose button was pressed. Only ``https://hooks.slack.com/`` URLs are called. Errors are logged and
    answered False, never raised.
    """
    parts = urlsplit(response_url)
    if parts.scheme != "https" or parts.hostname not in SLACK_RESPONSE_HOSTS:
        logger.warning("response_url is not a Slack URL; not answered: %s", parts.hostname)
        return False
    try:
        answer = WebhookClient(response_url).send(
            text=text,
            blocks=list(blocks) or None,
            response_type="ephemeral" if ephemeral else "in_channel",
            replace_original=replace_original,
        )
    except (SlackClientError, ValueError, OSError) as exc:
        logger.warning("Slack response_url failed (%s): %s", type(exc).__name__, exc)
        return False
    if answer.status_code != 200:
        logger.warning("Slack response_url answered %s", answer.status_code)
        return False
    return True


class SlackNotifier:
    """Posts messages to one channel, or to the message's own channel and thread.

    Args:
        channel_id: the default channel (empty: only messages naming their channel are posted).
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
        return self.publish(message) is not None

    def publish(self, message: SlackMessage) -> str | None:
        """Post ``message``; the posted message's ``ts`` (thread id), or None when disabled or failed."""
        channel = message.channel or self._channel
        if not channel or self._token_provider is None:
            logger.info("Slack not configured; message not sent: %s", message.text.splitlines()[0][:200])
            return None
        try:
            client = self._client_factory(self._token_provider())
            thread: dict[str, Any] = {"thread_ts": message.thread_ts} if message.thread_ts else {}
            answer = client.chat_postMessage(
                channel=channel,
                text=message.text,
                blocks=list(message.blocks) or None,
                unfurl_links=False,
                **thread,
            )
        except (SlackApiError, SlackClientError, ValueError, OSError) as exc:
            logger.warning("Slack post failed (%s): %s", type(exc).__name__, exc)
            return None
        except Exception as exc:  # a notification must never fail the workflow
            logger.warning("Slack post failed unexpectedly (%s): %s", type(exc).__name__, exc)
            return None
        ts = answer.get("ts") if answer is not None else None
        return str(ts) if ts else ""


_TRANSIENT_SLACK_ERRORS = frozenset(
    {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}
)
"""Web API ``error`` values that a later attempt may not meet (https://docs.slack.dev/apis/web-api/)."""


class SlackDirectory:
    """Who is in a Slack user group: Web API ``usergroups.users.list`` (bot scope ``usergroups:read``;
    rate tier 2, about 20 calls a minute), with the bot token.

    Args:
        token_provider: returns the bot token (None: Slack is not configured, every lookup raises).
        timeout_seconds: the socket timeout of one call (the Slack door answers within 3 s).
        client_factory: builds the ``WebClient`` from a token and a timeout (tests).
    """

    def __init__(
        self,
        token_provider: Callable[[], str] | None,
        *,
        timeout_seconds: int = 3,
        client_factory: Callable[[str, int], WebClient] = lambda token, timeout: WebClient(
            token=token, timeout=timeout
        ),
    ) -> None:
        self._token_provider = token_provider
        self._timeout = timeout_seconds
        self._client_factory = client_factory

    def usergroup_users(self, usergroup: str) -> frozenset[str]:
        """The Slack user ids (``U...``) in user group ``usergroup`` (``S...``); empty when Slack knows no
        such group (``no_such_subteam``: a deleted group gives nobody membership).

        Raises:
            ConfigurationError: no bot token is configured, or Slack refused the token or its scopes
                (``missing_scope``: the app needs ``usergroups:read``; ``plan_upgrade_required``: the
                workspace's plan has no user groups); the message names the fix.
            SlackUnavailable: rate limited, timed out, unreachable or a Slack-side error: try again.
        """
        if self._token_provider is None:
            raise ConfigurationError(
                f"Slack user group {usergroup} cannot be read: SLACK_BOT_TOKEN_SECRET_ARN is not set"
            )
        try:
            client = self._client_factory(self._token_provider(), self._timeout)
            answer = client.usergroups_users_list(usergroup=usergroup)
        except SlackApiError as exc:
            error = str(exc.response.get("error") or "unknown_error")
            if error == "no_such_subteam":
                return frozenset()
            status = int(getattr(exc.response, "status_code", 0) or 0)
            if error in _TRANSIENT_SLACK_ERRORS or status >= 500:
                raise SlackUnavailable(f"Slack usergroups.users.list {usergroup}: {error}") from exc
            needed = exc.response.get("needed")
            raise ConfigurationError(
                f"Slack refused usergroups.users.list for {usergroup}: {error}"
                + (
                    f" (the app needs the bot scope {needed}: reinstall it with docs/slack-app-manifest.yaml)"
                    if needed
                    else ""
                )
            ) from exc
        except ValueError as exc:  # no token in the secret
            raise ConfigurationError(f"Slack user group {usergroup} cannot be read: {exc}") from exc
        except (SlackClientError, OSError) as exc:
            raise SlackUnavailable(
                f"Slack usergroups.users.list {usergroup} failed ({type(exc).__name__}): {exc}"
            ) from exc
        users = answer.get("users") or []
        return frozenset(str(user) for user in users if isinstance(user, str))
