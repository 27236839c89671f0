"""The API over HTTP: a deployed stack (SigV4 with the caller's AWS credentials) or ``make serve``.

Signing is botocore's own :class:`~botocore.auth.SigV4Auth` for service ``execute-api`` (what API Gateway's
``AWS_IAM`` authorizer verifies: "Signing AWS API requests" in the IAM user guide), and requests go out
through botocore's :class:`~botocore.httpsession.URLLib3Session` (its CA bundle, proxies and timeouts); no
home-made signing and no extra HTTP library.

A deployed stack's base URL is its ``ApiUrl`` output (CloudFormation ``DescribeStacks``), e.g.
``https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com/v1``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import boto3
import botocore.exceptions
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from botocore.httpsession import URLLib3Session

from capacity_cli import __version__
from capacity_cli.api import Answer, CliError, NotFoundError, UnreachableError, date_header, decode_body

SERVICE = "execute-api"
"""The SigV4 service name of API Gateway's execute-api endpoints."""
RETRIED_STATUSES = frozenset({429, 503})
"""API Gateway throttling (429) and the API's own "AWS throttled, try again" (503): retried with back-off."""
RETRY_DELAYS_SECONDS = (0.5, 1.0, 2.0)
TIMEOUT_SECONDS = 35
"""Above API Gateway's 29 s integration timeout, so its own 504 arrives first."""
CALLER_HEADER = "X-Localcloud-Caller"
"""The header ``make serve`` (without ``--sigv4``) reads the caller's IAM principal ARN from
(``localcloud/http_api.py``); API Gateway has no such thing, so the CLI sends it only with ``--as``."""


class HttpTransport:
    """Requests to an API base URL, signed with SigV4 when ``credentials`` are given.

    Args:
        base_url: the API's base URL including the stage (``https://.../v1``, ``http://127.0.0.1:3000``).
        credentials: botocore credentials (refreshed by botocore when they are temporary); None sends
            unsigned requests (only ``make serve`` without ``--sigv4`` accepts them).
        region: the region the signature is scoped to (the stack's).
        label: how :meth:`describe` names the target.
        session: the HTTP session (tests may pass one).
        sleep: how to wait between retries and in :meth:`pause` (tests may pass one).
        caller: ``--as``: the IAM principal ARN ``make serve`` attributes the requests to (its
            :data:`CALLER_HEADER`); only for a local ``http://`` API (see :mod:`capacity_cli.targets`).
        retry_delays: the waits before each retry of a 429 or 503 (none: no retry).
    """

    def __init__(
        self,
        base_url: str,
        *,
        credentials: Credentials | None,
        region: str,
        label: str | None = None,
        session: URLLib3Session | None = None,
        sleep: Any = time.sleep,
        caller: str | None = None,
        retry_delays: Sequence[float] = RETRY_DELAYS_SECONDS,
    ) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CliError(f"{base_url!r} is not an http(s) URL of the API (e.g. http://127.0.0.1:3000)")
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.region = region
        self.label = label or base_url
        self._session = session or URLLib3Session(timeout=TIMEOUT_SECONDS)
        self._sleep = sleep
        self.caller = caller
        self.retry_delays = tuple(retry_delays)

    def describe(self) -> str:
        """The target, whether requests are signed, and as whom (``--as``)."""
        signed = f"SigV4-signed ({SERVICE}, {self.region})" if self.credentials is not None else "unsigned"
        who = f", as {self.caller}" if self.caller else ""
        return f"{self.label} ({signed}{who})"

    def now(self) -> datetime:
        """The API's clock: the ``Date`` header of an answer to ``GET`` on the base URL (API Gateway answers
        any path, a route or not, with its time; ``make serve`` with its virtual time). The machine's own
        clock only when the answer carries no ``Date``.

        Raises:
            UnreachableError: the API did not answer.
        """
        answer = self._send_once("GET", self.base_url + "/", None)
        return date_header(answer.headers) or datetime.now(UTC)

    def pause(self, seconds: float, *, request_id: str | None = None) -> bool:
        """Sleep for real; a remote target always may change."""
        self._sleep(seconds)
        return True

    def sign(self, request: AWSRequest) -> None:
        """Add SigV4 headers (``Authorization``, ``X-Amz-Date``, ``X-Amz-Security-Token``) to ``request``."""
        if self.credentials is None:
            return
        frozen: ReadOnlyCredentials = self.credentials.get_frozen_credentials()
        SigV4Auth(frozen, SERVICE, self.region).add_auth(request)

    def send(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None
    ) -> Answer:
        """One request (retried on 429 and 503); see :class:`~capacity_cli.api.Transport`.

        Raises:
            UnreachableError: the connection failed or timed out.
        """
        url = self.base_url + path
        if query:
            # Encoded as SigV4's canonical query string expects (RFC 3986, sorted): what is signed is sent.
            url += "?" + urlencode(sorted(query.items()), quote_via=quote)
        data = None if body is None else _json_bytes(body)
        for attempt in range(len(self.retry_delays) + 1):
            answer = self._send_once(method, url, data)
            if answer.status not in RETRIED_STATUSES or attempt == len(self.retry_delays):
                return answer
            self._sleep(self.retry_delays[attempt])
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns

    def _send_once(self, method: str, url: str, data: bytes | None) -> Answer:
        headers = {"Accept": "application/json", "User-Agent": f"capacity-cli/{__version__}"}
        if self.caller:
            headers[CALLER_HEADER] = self.caller
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = AWSRequest(method=method, url=url, data=data, headers=headers)
        self.sign(request)  # signed again on each attempt: a fresh X-Amz-Date
        try:
            response = self._session.send(request.prepare())
        except (botocore.exceptions.HTTPClientError, botocore.exceptions.ConnectionError) as exc:
            raise UnreachableError(f"{self.label} did not answer {method} {url}: {exc}") from exc
        content_type = response.headers.get("Content-Type")
        return Answer(
            status=int(response.status_code),
            body=decode_body(bytes(response.content or b""), content_type),
            headers={str(k): str(v) for k, v in response.headers.items()},
        )


def _json_bytes(body: Any) -> bytes:
    import json  # noqa: PLC0415 - only for requests with a body

    return json.dumps(body, default=str, separators=(",", ":")).encode("utf-8")


def aws_session(*, profile: str | None, region: str | None) -> boto3.session.Session:
    """A boto3 session of the user's profile.

    Raises:
        CliError: the profile is not configured (the message lists those that are).
    """
    try:
        return boto3.session.Session(profile_name=profile, region_name=region)
    except botocore.exceptions.ProfileNotFound as exc:
        from capacity_cli.suggest import closest  # noqa: PLC0415

        known = boto3.session.Session().available_profiles
        hint = closest(profile or "", known)
        raise CliError(
            f"AWS profile {profile!r} is not configured"
            + (f"; did you mean {hint!r}?" if hint else "")
            + (f" (configured: {', '.join(sorted(known))})" if known else " (none is: run aws configure)")
        ) from exc


def credentials_of(session: boto3.session.Session) -> Credentials:
    """The session's credentials.

    Raises:
        CliError: none found (no profile, no environment variables, no instance role).
    """
    credentials = session.get_credentials()
    if credentials is None:
        raise CliError(
            "no AWS credentials found: configure a profile (aws configure, or aws sso login --profile NAME) "
            "and pass --profile NAME (or set profile in the config file, or AWS_PROFILE)"
        )
    return credentials


def stack_api_url(session: boto3.session.Session, stack: str, *, timeout: float | None = None) -> str:
    """The ``ApiUrl`` output of ``stack`` (CloudFormation ``DescribeStacks``); ``timeout``: give up after this
    many seconds, without retries (shell completion).

    Raises:
        CliError: no credentials, no such stack in the region, or the stack has no ``ApiUrl`` output.
    """
    region = session.region_name or "us-east-1"
    config = None
    if timeout is not None:
        from botocore.config import Config  # noqa: PLC0415

        config = Config(connect_timeout=timeout, read_timeout=timeout, retries={"total_max_attempts": 1})
    client = session.client("cloudformation", region_name=region, config=config)
    try:
        stacks = client.describe_stacks(StackName=stack)["Stacks"]
    except botocore.exceptions.NoCredentialsError as exc:
        raise CliError(f"no AWS credentials found to read stack {stack!r}: {exc}") from exc
    except botocore.exceptions.ClientError as exc:
        message = str(exc.response.get("Error", {}).get("Message", exc))
        if "does not exist" in message:
            raise NotFoundError(
                f"no stack {stack!r} in {region}: deploy it (make deploy STACK={stack}) or pass "
                "--stack NAME/--region of the deployment"
            ) from exc
        raise CliError(f"cannot read stack {stack!r} in {region}: {message}") from exc
    except botocore.exceptions.BotoCoreError as exc:
        raise UnreachableError(f"cannot read stack {stack!r} in {region}: {exc}") from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in (stacks[0].get("Outputs") or [])} if stacks else {}
    if "ApiUrl" not in outputs:
        raise CliError(
            f"stack {stack!r} in {region} has no ApiUrl output: is it a Capacity Orchestrator stack?"
        )
    return str(outputs["ApiUrl"])
