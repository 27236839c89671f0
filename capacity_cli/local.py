"""``--local``: the API of an embedded local cloud (``localcloud/``), in this process, on a virtual clock.

No AWS account and no server: the whole application (template, functions, state machines, the AWS
emulator) runs in the command's process, as ``python -m localcloud run`` does. What this means for a person
at a terminal (docs/cli.md, "The local cloud"):

- every command starts a fresh cloud (a few seconds) whose virtual clock starts at ``--start`` (default:
  the real time now); nothing is kept when the command ends;
- after a request that changes something (``reserve``, ``approve``, ``cancel``...) the simulation runs
  everything due at that instant (the workflow records, searches, decides and buys "at once", as it would in
  the seconds after the call) but time does not move;
- time moves only while the command follows a reservation (``watch``, ``reserve --watch``): it jumps to the
  next state change, so a week-ahead reservation goes ``SCHEDULED`` -> ``ACTIVE`` -> ``READY`` in seconds;
- to keep one cloud between commands (``reserve`` now, ``status`` and ``approve`` later), run ``make serve``
  and point the CLI at it with ``--endpoint http://127.0.0.1:3000``; there virtual time follows real time
  at ``SPEED`` times, and ``capacity mcp --local`` keeps its cloud for the server's life.

The caller's identity is ``--identity`` (default :func:`default_identity`), put in
``requestContext.identity.userArn`` as API Gateway's IAM authorizer would.

The local cloud is not packaged with the CLI: it is found next to this package in the checkout, and needs
the ``dev`` extra (moto, time-machine, aws-sam-translator...).
"""

from __future__ import annotations

import contextlib
import getpass
import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from capacity_cli import __version__
from capacity_cli.api import Answer, CliError, decode_body

if TYPE_CHECKING:
    from localcloud.cloud import LocalCloud

CHECKOUT = Path(__file__).resolve().parents[1]
"""The repository checkout this package lives in (an editable install): ``template.yaml``, ``localcloud/``."""
LOCAL_ACCOUNT = "123456789012"
"""The local cloud's account id (its default)."""


def default_identity(account_id: str = LOCAL_ACCOUNT) -> str:
    """``arn:aws:sts::<account>:assumed-role/MlPlatform/<login name>``: who calls a local API unless
    ``--identity`` says (a member of team ml-platform in ``deploy/policy-seed.json``, as the demo's caller;
    an approver is another identity, e.g. ``--identity arn:aws:sts::123456789012:assumed-role/Approvers/x``).
    """
    try:
        login = getpass.getuser()
    except (OSError, KeyError):  # no login name in a minimal container
        login = "local-user"
    session = re.sub(r"[^\w+=,.@-]", "-", login)[:64] or "local-user"
    return f"arn:aws:sts::{account_id}:assumed-role/MlPlatform/{session}"


def _import_localcloud() -> None:
    """Make ``localcloud`` (and the layer's ``capacity`` package it loads) importable from the checkout.

    Raises:
        CliError: there is no checkout next to the package, or the dev dependencies are missing.
    """
    if importlib.util.find_spec("localcloud") is None:
        if not (CHECKOUT / "localcloud" / "cloud.py").is_file():
            raise CliError(
                "--local needs the repository checkout (localcloud/ next to capacity_cli/): install the CLI "
                "with pip install -e '.[dev]' from a clone, or use --stack/--endpoint"
            )
        sys.path.insert(0, str(CHECKOUT))  # localcloud is run from the checkout, never packaged
    try:
        importlib.import_module("localcloud.cloud")
    except ImportError as exc:
        raise CliError(
            f"the local cloud needs the dev dependencies ({exc.name or exc}): pip install -e '.[dev]' "
            "(or make venv, which creates .venv with them)"
        ) from exc


def template_path(template: Path | None) -> Path:
    """The SAM template to run: ``template`` if given, else the checkout's ``template.yaml``.

    Raises:
        CliError: the file does not exist.
    """
    path = template or CHECKOUT / "template.yaml"
    if not path.is_file():
        raise CliError(f"{path}: no such template (pass --template PATH)")
    return path


@contextlib.contextmanager
def embedded_cloud(
    *,
    template: Path | None = None,
    start: datetime,
    seed: int = 7,
    stack_name: str = "capacity-orchestrator",
    region: str = "us-east-1",
) -> Iterator[LocalCloud]:
    """A started local cloud of the application, stopped on exit.

    Raises:
        CliError: no checkout, missing dev dependencies, or a template the local cloud cannot run.
    """
    _import_localcloud()
    from localcloud.cloud import LocalCloud  # noqa: PLC0415
    from localcloud.template import TemplateError  # noqa: PLC0415

    # moto's ASL interpreter logs every failed state at ERROR with its parse tree (as `localcloud run`).
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    try:
        cloud = LocalCloud(
            template_path(template), start=start, seed=seed, stack_name=stack_name, region=region
        )
    except TemplateError as exc:
        raise CliError(f"the local cloud cannot run the template: {exc}") from exc
    with cloud:
        yield cloud


class EmbeddedTransport:
    """Requests to a running :class:`~localcloud.cloud.LocalCloud` (see the module docstring).

    Args:
        cloud: a started cloud (its clock is driven by the calling thread: the one that started it).
        identity: the caller's IAM principal ARN (``requestContext.identity.userArn``).
    """

    def __init__(self, cloud: LocalCloud, *, identity: str) -> None:
        self.cloud = cloud
        self.identity = identity

    def describe(self) -> str:
        """The embedded cloud, its virtual time and the caller."""
        return (
            f"embedded local cloud (stack {self.cloud.stack.stack_name}, {self.cloud.region}, "
            f"virtual time {self.cloud.now():%Y-%m-%dT%H:%M:%SZ}, as {self.identity})"
        )

    def now(self) -> datetime:
        """The cloud's virtual time."""
        return self.cloud.now()

    def send(
        self, method: str, path: str, *, query: Mapping[str, str] | None = None, body: Any = None
    ) -> Answer:
        """Serve the request as API Gateway would; after one that may change something, run what is due
        at the current instant (time does not move)."""
        from localcloud.proxy import proxy_event  # noqa: PLC0415

        event = proxy_event(
            method=method,
            path=path,
            query=query,
            body=body,
            routes=self.cloud.stack.api_routes,
            account_id=self.cloud.account_id,
            now=self.cloud.now(),
            identity=self.identity,
            user_agent=f"capacity-cli/{__version__}",
        )
        response = self.cloud.api_request(event)
        if method.upper() != "GET":
            self.cloud.run(until=self.cloud.now())
        headers = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        raw = str(response.get("body") or "").encode("utf-8")
        return Answer(int(response["statusCode"]), decode_body(raw, headers.get("Content-Type")), headers)

    def pause(self, seconds: float, *, request_id: str | None = None) -> bool:
        """Run the simulation: until ``request_id``'s history grows (a state change), else for ``seconds``
        of virtual time; False when nothing is left to run (the reservation will not change again)."""
        if request_id is None:
            result = self.cloud.run(until=self.cloud.now() + timedelta(seconds=seconds))
            return result.reason != "idle"
        before = self._states(request_id)
        result = self.cloud.run(stop_when=lambda: self._states(request_id) != before)
        return result.reason == "stop_when"

    def _states(self, request_id: str) -> int:
        """How many state changes the ledger holds for the reservation (read as the cloud's own machinery)."""
        client = self.cloud.client("dynamodb")
        with self.cloud.dispatcher.exempt():
            answer = client.query(
                TableName=self.cloud.stack.physical_id("LedgerTable"),
                KeyConditionExpression="request_id = :r AND begins_with(sk, :s)",
                ExpressionAttributeValues={":r": {"S": request_id}, ":s": {"S": "STATE#"}},
                Select="COUNT",
                ConsistentRead=True,
            )
        return int(answer["Count"])
