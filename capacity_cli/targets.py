"""Which API a command talks to, and how (docs/cli.md, "Targets").

In order of precedence:

1. ``--local``: the embedded local cloud (:mod:`capacity_cli.local`), its virtual clock starting at the
   sample events' epoch (``--start`` says otherwise; ``--start now`` is the real time);
2. ``--endpoint URL``: an API base URL (``make serve``'s ``http://127.0.0.1:3000``, or a stage URL);
   signed with SigV4 when AWS credentials are found (``make serve --sigv4`` checks them), else unsigned;
3. ``--stack NAME``: a deployed stack, its ``ApiUrl`` output read with CloudFormation ``DescribeStacks``,
   every request SigV4-signed with the profile's credentials;
4. ``endpoint`` or ``stack`` in the configuration file;
5. nothing configured: the embedded local cloud, so a fresh clone works without an AWS account.

``--region`` and ``--profile`` (or the configuration file, or the AWS profile's own region) say where the
stack is and whose credentials sign.

``--as ARN`` (or ``identity`` in the configuration file) acts as another IAM principal where that means
something without AWS: on the embedded local cloud it is the caller API Gateway would pass; on a local
``http://`` endpoint (``make serve``) it is sent as the ``X-Localcloud-Caller`` header ``serve`` reads, and
the request is signed with that principal's local key when ``localcloud/local_values.json``'s
``ApiCallers`` has one (so ``serve --sigv4`` sees the same caller), else sent unsigned. On AWS the caller is
whoever signs: ``--as`` with ``--stack`` or an ``https://`` endpoint is refused (use ``--profile``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capacity_cli.api import CliError, Transport
from capacity_cli.config import Config

if TYPE_CHECKING:
    from botocore.credentials import Credentials

DEFAULT_REGION = "us-east-1"
SAMPLE_EPOCH = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
"""The instant the sample events are written at (``events/``: ``requestTimeEpoch`` 1795953600000): where
``capacity --local`` starts its virtual clock unless ``--start`` says otherwise, as ``make serve`` does
(``localcloud.serving.SAMPLE_EPOCH``, the same instant), so the samples' and the docs' dates are ahead of it
on any day."""
LOCAL_VALUES = Path(__file__).resolve().parents[1] / "localcloud" / "local_values.json"
"""The local cloud's settings in the checkout: its ``ApiCallers`` are the principals ``make serve`` knows."""


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
    quick_timeout: float | None = None,
) -> Transport:
    """The transport for the resolved target; an embedded cloud is entered on ``resources``.

    Args:
        cloud: a running :class:`~localcloud.cloud.LocalCloud` to use for ``local`` instead of starting one
            (tests, and the MCP server's long-lived cloud).
        note: tells the user which target was chosen when nothing was configured.
        quick_timeout: over HTTP, give up after this many seconds and never retry (shell completion).

    Raises:
        CliError: a bad option, no credentials for a stack, no such stack or profile, no local cloud.
    """
    kind = kind_of(options, config)
    if kind == "local":
        from capacity_cli.local import EmbeddedTransport, default_identity, embedded_cloud  # noqa: PLC0415

        if cloud is None:
            if not (options.local or config.endpoint or config.stack):
                note("no stack configured: using the embedded local cloud (--local; see docs/cli.md)")
            start = local_start(options.start)
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

    quick: dict[str, Any] = {}
    if quick_timeout is not None:
        from botocore.httpsession import URLLib3Session  # noqa: PLC0415

        quick = {"session": URLLib3Session(timeout=max(1, round(quick_timeout))), "retry_delays": ()}
    profile = options.profile or config.profile
    if kind == "endpoint":
        url = str(options.endpoint or config.endpoint)
        caller = options.identity or config.identity
        if caller and not url.startswith("http://"):
            raise CliError(
                f"--as is for the local cloud and make serve (http://): {url} is signed by whoever calls it, "
                "so choose the caller with --profile"
            )
        session = aws_session(profile=profile, region=options.region or config.region)
        region = region_of(options, config, session.region_name)
        if caller:
            return HttpTransport(
                url, credentials=local_credentials(caller), region=region, caller=caller, **quick
            )
        credentials = session.get_credentials()
        if credentials is None and url.startswith("https://"):
            credentials = credentials_of(session)  # raises: a deployed API needs a signature
        return HttpTransport(url, credentials=credentials, region=region, **quick)
    if options.identity:
        raise CliError(
            "--as is for --local and make serve: on a stack the caller is whoever signs (--profile)"
        )
    session = aws_session(profile=profile, region=options.region or config.region)
    region = region_of(options, config, session.region_name)
    stack = str(options.stack or config.stack)
    credentials = credentials_of(session)
    regional = aws_session(profile=profile, region=region)
    url = stack_api_url(regional, stack, timeout=quick_timeout)
    return HttpTransport(
        url, credentials=credentials, region=region, label=f"stack {stack} in {region} ({url})", **quick
    )


def local_start(text: str | None, *, now: datetime | None = None) -> datetime:
    """The embedded cloud's virtual start: :data:`SAMPLE_EPOCH` unless ``--start`` gives a time (``now``: the
    real time, to the minute; ``+2d``: from the real time).

    Raises:
        CliError: ``--start`` is not a time.
    """
    from capacity_cli.request import parse_time  # noqa: PLC0415

    if not text:
        return SAMPLE_EPOCH
    real = (now or datetime.now(UTC)).replace(second=0, microsecond=0)
    return parse_time(text, now=real)


def local_credentials(arn: str, path: Path = LOCAL_VALUES) -> Credentials | None:
    """The local access key of ``arn`` among ``ApiCallers`` (``localcloud/local_values.json``: what
    ``serve --sigv4`` accepts), or None when the checkout has no such caller (then the request goes unsigned
    with the ``X-Localcloud-Caller`` header alone)."""
    from botocore.credentials import Credentials  # noqa: PLC0415

    try:
        callers = json.loads(path.read_text(encoding="utf-8")).get("ApiCallers") or {}
    except (OSError, ValueError):
        return None
    for key, entry in callers.items():
        if isinstance(entry, dict) and entry.get("Arn") == arn and entry.get("SecretAccessKey"):
            return Credentials(str(key), str(entry["SecretAccessKey"]))
    return None
