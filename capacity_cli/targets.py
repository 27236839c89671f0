"""Which API a command talks to, and how (docs/cli.md, "Targets").

In order of precedence:

1. ``--local``: the embedded local cloud (:mod:`capacity_cli.local`);
2. ``--endpoint URL``: an API base URL (``make serve``'s ``http://127.0.0.1:3000``, or a stage URL);
   signed with SigV4 when AWS credentials are found (``make serve --sigv4`` checks them), else unsigned;
3. ``--stack NAME``: a deployed stack, its ``ApiUrl`` output read with CloudFormation ``DescribeStacks``,
   every request SigV4-signed with the profile's credentials;
4. ``endpoint`` or ``stack`` in the configuration file;
5. nothing configured: the embedded local cloud, so a fresh clone works without an AWS account.

``--region`` and ``--profile`` (or the configuration file, or the AWS profile's own region) say where the
stack is and whose credentials sign.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from capacity_cli.api import CliError, Transport
from capacity_cli.config import Config

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class TargetOptions:
    """The command line's target options (None: not given)."""

    local: bool = False
    endpoint: str | None = None
    stack: str | None = None
    region: str | None = None
    profile: str | None = None
    identity: str | None = None
    start: str | None = None
    seed: int = 7
    template: Path | None = None


def kind_of(options: TargetOptions, config: Config) -> str:
    """``local``, ``endpoint`` or ``stack`` (see the module docstring).

    Raises:
        CliError: ``--local`` together with ``--endpoint`` or ``--stack``, or both of those.
    """
    if options.local and (options.endpoint or options.stack):
        raise CliError("--local runs the embedded local cloud: leave out --endpoint and --stack")
    if options.endpoint and options.stack:
        raise CliError("give --endpoint URL or --stack NAME, not both")
    if options.local:
        return "local"
    if options.endpoint:
        return "endpoint"
    if options.stack:
        return "stack"
    if config.endpoint:
        return "endpoint"
    if config.stack:
        return "stack"
    return "local"


def region_of(options: TargetOptions, config: Config, session_region: str | None = None) -> str:
    """``--region``, else the configuration's, else the AWS profile's, else us-east-1."""
    return options.region or config.region or session_region or DEFAULT_REGION


def open_transport(
    options: TargetOptions,
    config: Config,
    resources: contextlib.ExitStack,
    *,
    cloud: Any | None = None,
    note: Callable[[str], None] = lambda line: None,
) -> Transport:
    """The transport for the resolved target; an embedded cloud is entered on ``resources``.

    Args:
        cloud: a running :class:`~localcloud.cloud.LocalCloud` to use for ``local`` instead of starting one
            (tests, and the MCP server's long-lived cloud).
        note: tells the user which target was chosen when nothing was configured.

    Raises:
        CliError: a bad option, no credentials for a stack, no such stack or profile, no local cloud.
    """
    kind = kind_of(options, config)
    if kind == "local":
        from capacity_cli.local import EmbeddedTransport, default_identity, embedded_cloud  # noqa: PLC0415
        from capacity_cli.request import parse_time  # noqa: PLC0415

        if cloud is None:
            if not (options.local or config.endpoint or config.stack):
                note("no stack configured: using the embedded local cloud (--local; see docs/cli.md)")
            now = datetime.now(UTC).replace(second=0, microsecond=0)
            start = parse_time(options.start, now=now) if options.start else now
            cloud = resources.enter_context(
                embedded_cloud(
                    template=options.template,
                    start=start,
                    seed=options.seed,
                    region=options.region or config.region or DEFAULT_REGION,
                )
            )
        identity = options.identity or config.identity or default_identity(cloud.account_id)
        return EmbeddedTransport(cloud, identity=identity)
    from capacity_cli.http import HttpTransport, aws_session, credentials_of, stack_api_url  # noqa: PLC0415

    profile = options.profile or config.profile
    if options.identity:
        raise CliError("--identity is for --local only: over HTTP the caller is whoever signs (--profile)")
    if kind == "endpoint":
        url = str(options.endpoint or config.endpoint)
        session = aws_session(profile=profile, region=options.region or config.region)
        region = region_of(options, config, session.region_name)
        credentials = session.get_credentials()
        if credentials is None and url.startswith("https://"):
            credentials = credentials_of(session)  # raises: a deployed API needs a signature
        return HttpTransport(url, credentials=credentials, region=region)
    session = aws_session(profile=profile, region=options.region or config.region)
    region = region_of(options, config, session.region_name)
    stack = str(options.stack or config.stack)
    credentials = credentials_of(session)
    regional = aws_session(profile=profile, region=region)
    url = stack_api_url(regional, stack)
    return HttpTransport(
        url, credentials=credentials, region=region, label=f"stack {stack} in {region} ({url})"
    )
