"""Signed requests: the CLI signs with botocore's SigV4 from an AWS profile; the local HTTP API checks the
signature as API Gateway's AWS_IAM authorizer does and passes the caller's identity to the function."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials, ReadOnlyCredentials
from typer.testing import CliRunner, Result

from capacity_cli.api import CapacityApi
from capacity_cli.app import app
from capacity_cli.http import HttpTransport
from localcloud.cloud import LocalCloud
from localcloud.http_api import LocalApiServer, SignatureRejected, SigV4Verifier
from tests.cli.conftest import ENV, REQUEST, ledger, states

CALLERS = json.loads((Path(__file__).resolve().parents[2] / "localcloud" / "local_values.json").read_text())[
    "ApiCallers"
]
REQUESTER = ("LOCALREQUESTERKEY", CALLERS["LOCALREQUESTERKEY"])
APPROVER = ("LOCALAPPROVERKEY", CALLERS["LOCALAPPROVERKEY"])


@pytest.fixture(scope="module")
def port(cloud: LocalCloud) -> Iterator[int]:
    """``make serve --sigv4`` on a free port of the shared cloud; its clock checks the request times."""
    verifier = SigV4Verifier.from_local_values(cloud.stack.local_values, region=cloud.region, now=cloud.now)
    server = LocalApiServer(
        port=0,
        routes=cloud.stack.api_routes,
        serve=cloud.api_request,
        account_id=cloud.account_id,
        now=cloud.now,
        verifier=verifier,
    )
    cloud.clock.ignore_thread(server.start())
    try:
        yield int(server.server_address[1])
    finally:
        server.stop()


@pytest.fixture
def profiles(tmp_path: Path) -> dict[str, str]:
    """An AWS shared credentials file with the two local callers as profiles (what a user would set up)."""
    lines = []
    for name, (key, entry) in {"local-requester": REQUESTER, "local-approver": APPROVER}.items():
        lines += [
            f"[{name}]",
            f"aws_access_key_id = {key}",
            f"aws_secret_access_key = {entry['SecretAccessKey']}",
        ]
    (tmp_path / "credentials").write_text("\n".join(lines) + "\n")
    (tmp_path / "config").write_text("[default]\nregion = us-east-1\n")
    return {
        **ENV,
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
    }


def capacity(port: int, env: dict[str, str], profile: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(
        app,
        ["--endpoint", f"http://127.0.0.1:{port}", "--profile", profile, "--region", "us-east-1", *args],
        input=input,
        env=env,
        catch_exceptions=False,
    )


def test_signed_cli_requests_carry_the_signers_identity(
    cloud: LocalCloud, port: int, profiles: dict[str, str]
) -> None:
    planned = capacity(
        port, profiles, "local-requester", "plan", "-f", str(REQUEST), "--from", "+2d", "--until", "+7d"
    )
    assert planned.exit_code == 0, planned.stderr
    assert "Decision DRY_RUN" in planned.stdout

    window = ["--from", "+3d", "--until", "+8d", "--approval-above", "1000"]
    reserved = capacity(
        port,
        profiles,
        "local-requester",
        "reserve",
        "-f",
        str(REQUEST),
        *window,
        "--id",
        "cli-signed",
        "--yes",
    )
    assert reserved.exit_code == 0, reserved.stderr
    cloud.run(until=cloud.now())  # what make serve's clock would do: the workflow runs to the approval
    assert states(cloud, "cli-signed")[-1] == "AWAITING_APPROVAL"

    approved = capacity(port, profiles, "local-approver", "approve", "cli-signed", "--yes")
    assert approved.exit_code == 0, approved.stderr
    decision = next(i for i in ledger(cloud, "cli-signed") if i["sk"] == "APPROVAL_DECISION")
    assert decision["identity"] == APPROVER[1]["Arn"]  # from the verified signature, not from the body
    assert decision["approver"] == APPROVER[1]["Arn"]

    cancelled = capacity(port, profiles, "local-requester", "cancel", "cli-signed", "--yes")
    assert cancelled.exit_code == 0, cancelled.stderr
    actor = next(i for i in ledger(cloud, "cli-signed") if i.get("state") == "CANCELLED")["actor"]
    assert actor == REQUESTER[1]["Arn"]
    cloud.run(stop_when=lambda: "RELEASED" in states(cloud, "cli-signed"))


def _api(port: int, key: str, secret: str | None, region: str = "us-east-1") -> CapacityApi:
    credentials = Credentials(key, secret) if secret is not None else None
    return CapacityApi(HttpTransport(f"http://127.0.0.1:{port}", credentials=credentials, region=region))


@pytest.mark.parametrize(
    ("key", "secret", "region", "message", "error_type"),
    [
        (
            "LOCALREQUESTERKEY",
            None,
            "us-east-1",
            "Missing Authentication Token",
            "MissingAuthenticationTokenException",
        ),
        (
            "LOCALREQUESTERKEY",
            "not-the-secret",
            "us-east-1",
            "The request signature we calculated does not match the signature you provided.",
            "InvalidSignatureException",
        ),
        (
            "AKIAUNKNOWN",
            "x",
            "us-east-1",
            "The security token included in the request is invalid.",
            "UnrecognizedClientException",
        ),
        (
            "LOCALREQUESTERKEY",
            REQUESTER[1]["SecretAccessKey"],
            "eu-west-1",
            "Credential should be scoped to a valid region",
            "InvalidSignatureException",
        ),
    ],
)
def test_the_local_api_refuses_what_api_gateway_refuses(  # noqa: PLR0917 - the parameters of a table
    port: int, key: str, secret: str | None, region: str, message: str, error_type: str
) -> None:
    answer = _api(port, key, secret, region).transport.send("GET", "/reservations", query={"limit": "1"})

    assert answer.status == 403
    assert str(answer.body["message"]).startswith(message)
    assert answer.headers["x-amzn-ErrorType"] == error_type


def test_a_route_without_iam_auth_is_not_checked(port: int) -> None:
    # The Slack door has no IAM authorizer: Slack's own signature is what it checks (401 unsigned).
    answer = _api(port, "LOCALREQUESTERKEY", None).transport.send("POST", "/slack/commands", body={})

    assert answer.status == 401


def test_the_signature_is_botocores_and_expires_after_five_minutes() -> None:
    key, entry = REQUESTER
    request = AWSRequest(
        method="POST",
        url="http://127.0.0.1:3000/plans?limit=1&a=b%20c",
        data=b'{"x": 1}',
        headers={"Content-Type": "application/json"},
    )
    SigV4Auth(ReadOnlyCredentials(key, entry["SecretAccessKey"], None), "execute-api", "us-east-1").add_auth(
        request
    )
    headers = [*request.headers.items(), ("Host", "127.0.0.1:3000")]
    signed_at = datetime.strptime(request.headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)

    def verifier(now: datetime) -> SigV4Verifier:
        return SigV4Verifier.from_local_values({"ApiCallers": CALLERS}, region="us-east-1", now=lambda: now)

    caller = verifier(signed_at + timedelta(minutes=4)).verify(
        method="POST", raw_path="/plans?limit=1&a=b%20c", headers=headers, body=b'{"x": 1}'
    )
    assert caller.arn == entry["Arn"]
    with pytest.raises(SignatureRejected, match="does not match"):  # the body was changed on the way
        verifier(signed_at).verify(
            method="POST", raw_path="/plans?limit=1&a=b%20c", headers=headers, body=b"{}"
        )
    with pytest.raises(SignatureRejected, match=r"^Signature expired: .* \(.* - 5 min\.\)$"):
        verifier(signed_at + timedelta(minutes=6)).verify(
            method="POST", raw_path="/plans?limit=1&a=b%20c", headers=headers, body=b'{"x": 1}'
        )
