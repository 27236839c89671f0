"""What scripts and people expect of a CLI like ``aws``, ``sky`` or ``dstack``: ``--version``, ``list`` with
filters and the API's paging, ``reserve --dry-run``, a ``costs`` table, errors as one JSON document on
stderr with exit statuses that tell refused from not found from bad input (capacity_cli/exits.py and the
table in docs/cli.md), ``--as`` on ``make serve``, and "now" read from the API's own clock."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from capacity_cli import __version__
from capacity_cli.app import app
from capacity_cli.exits import ExitStatus
from capacity_cli.http import HttpTransport
from localcloud.cloud import LocalCloud
from tests.cli.conftest import APPROVER_ARN, ENV, REQUEST, REQUESTER_ARN, Cli, ledger, states

ROOT = Path(__file__).resolve().parents[2]
EVAL_ARN = "arn:aws:sts::123456789012:assumed-role/MlEval/eve"
"""A member of team ml-eval (deploy/policy-seed.json), not of ml-platform."""
WINDOW = ["--from", "+2d", "--until", "+7d"]  # from the cloud's clock, wherever earlier tests left it


def capacity(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
    """``capacity ARGS`` as a person types it (no injected cloud)."""
    return CliRunner().invoke(app, list(args), input=input, env=env or ENV, catch_exceptions=False)


def _error(result: Result) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(result.stderr)
    return document


# ------------------------------------------------------------------------------------------- version


def test_version_prints_the_version_and_exits_0() -> None:
    result = capacity("--version")

    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"capacity {__version__}\n"


# --------------------------------------------------------------------------------------- dry run


def test_reserve_dry_run_quotes_and_buys_nothing(cli: Cli, cloud: LocalCloud) -> None:
    result = cli("reserve", "-f", str(REQUEST), *WINDOW, "--id", "cli-dry-run", "--dry-run")

    assert result.exit_code == 0, result.stderr
    assert "It would buy 2 x ml.p5.48xlarge in " in result.stderr
    assert "Dry run: nothing was submitted or bought." in result.stderr
    assert "Reserve it?" not in result.stderr  # nothing to confirm
    assert "Offerings, best first (nothing is bought)" in result.stdout
    assert ledger(cloud, "cli-dry-run") == []

    quoted = cli("-o", "json", "reserve", "-f", str(REQUEST), *WINDOW, "--id", "cli-dry-run", "--dry-run")
    assert quoted.exit_code == 0, quoted.stderr
    answer = json.loads(quoted.stdout)
    assert (answer["decision"], answer["recommendation"]["instance_count"]) == ("DRY_RUN", 2)
    assert ledger(cloud, "cli-dry-run") == []


# ------------------------------------------------------------------------------------------- list


def test_list_filters_by_team_and_pages_as_the_api_pages(cli: Cli, cloud: LocalCloud) -> None:
    for request_id, identity in (
        ("cli-list-a", REQUESTER_ARN),
        ("cli-list-b", REQUESTER_ARN),
        ("cli-list-eval", EVAL_ARN),
    ):
        body = ["-f", str(REQUEST), *WINDOW, "--id", request_id, "--requester", "x"]
        reserved = cli("reserve", *body, "--yes", "--no-watch", identity=identity)
        assert reserved.exit_code == 0, reserved.stderr

    # A member of ml-eval lists its team; ml-platform's requester may not (issue 29: one's own teams only)
    evals = cli("-o", "json", "list", "--team", "ml-eval", "--all", identity=EVAL_ARN)
    assert evals.exit_code == 0, evals.stderr
    refused = cli("-o", "json", "list", "--team", "ml-eval", "--all")
    assert refused.exit_code == 3, refused.stderr
    assert "may not see team 'ml-eval'" in refused.stderr
    assert [(r["request_id"], r["team"]) for r in json.loads(evals.stdout)["reservations"]] == [
        ("cli-list-eval", "ml-eval")
    ]

    first = cli("-o", "json", "list", "--team", "ml-platform", "--limit", "1")
    assert first.exit_code == 0, first.stderr
    page = json.loads(first.stdout)
    assert len(page["reservations"]) == 1
    token = page["next_token"]
    assert token  # more pages, as the API said
    second = cli("-o", "json", "list", "--team", "ml-platform", "--limit", "1", "--next-token", token)
    assert second.exit_code == 0, second.stderr
    assert json.loads(second.stdout)["reservations"][0]["request_id"] != page["reservations"][0]["request_id"]

    every = cli("-o", "json", "list", "--team", "ml-platform", "--limit", "1", "--all")
    ids = {r["request_id"] for r in json.loads(every.stdout)["reservations"]}
    assert {"cli-list-a", "cli-list-b"} <= ids
    assert "cli-list-eval" not in ids
    assert json.loads(every.stdout)["next_token"] is None

    table = cli("list", "--team", "ml-platform", "--limit", "1")
    assert table.exit_code == 0, table.stderr
    assert f"More: --next-token {token}" in table.stderr
    assert " ml-platform " in table.stdout


def test_list_refuses_a_page_larger_than_the_apis_as_usage(cli: Cli) -> None:
    result = cli("-o", "json", "list", "--limit", "500")

    assert result.exit_code == 2
    assert result.stdout == ""
    error = _error(result)["error"]
    assert (error["code"], error["exit_status"], error["http_status"]) == ("bad_input", 2, None)
    assert "--limit" in error["message"]


# ------------------------------------------------------------------------------------------ costs


def test_costs_is_a_table_per_reservation_and_the_total(cli: Cli, cloud: LocalCloud) -> None:
    reserved = cli("reserve", "-f", str(REQUEST), *WINDOW, "--id", "cli-costs", "--yes", "--no-watch")
    assert reserved.exit_code == 0, reserved.stderr
    assert "PURCHASED" in states(cloud, "cli-costs")
    report = json.loads(cli("-o", "json", "costs").stdout)
    row = next(r for r in report["reservations"] if r["request_id"] == "cli-costs")

    table = cli("costs")

    assert table.exit_code == 0, table.stderr
    line = next(line for line in table.stdout.splitlines() if line.strip().startswith("cli-costs "))
    fee = f"${float(row['paid_usd']):,.2f}"
    assert line.split()[:5] == ["cli-costs", "ml-platform", "ml.p5.48xlarge", row["region"], fee]
    total = next(line for line in table.stdout.splitlines() if line.strip().startswith("total "))
    assert f"${float(report['totals']['paid_usd']):,.2f}" in total
    assert f"{report['totals']['reservations']} reservation(s)" in table.stdout


# ------------------------------------------------------------------------------ errors, exit statuses


def test_an_unknown_reservation_is_a_json_error_on_stderr_with_status_5(cli: Cli) -> None:
    result = cli("-o", "json", "status", "no-such-reservation")

    assert result.exit_code == 5  # ExitStatus.NOT_FOUND
    assert result.stdout == ""  # data only: a script piping stdout to jq never reads an error
    assert _error(result) == {
        "error": {
            "code": "not_found",
            "exit_status": 5,
            "message": "no reservation 'no-such-reservation'",
            "http_status": 404,
            "problems": [],
            "hint": None,
        }
    }


def test_field_errors_come_with_their_suggestion_in_the_document(cli: Cli) -> None:
    result = cli("-o", "json", "plan", "-f", str(REQUEST), "--regions", "us-east1")

    assert result.exit_code == 2
    error = _error(result)["error"]
    assert (error["code"], error["http_status"]) == ("bad_input", 400)
    (problem,) = error["problems"]
    assert problem["field"].startswith("regions")
    assert problem["suggestion"] == "did you mean 'us-east-1'?"


def test_a_usage_error_is_the_same_document_under_json(cli: Cli) -> None:
    result = cli("-o", "json", "reserv")

    assert result.exit_code == 2
    assert _error(result)["error"] | {"message": "-"} == {
        "code": "bad_input",
        "exit_status": 2,
        "message": "-",
        "http_status": None,
        "problems": [],
        "hint": None,
    }
    assert _error(result)["error"]["message"] == "No such command 'reserv'. Did you mean 'reserve'?"


def test_a_refusal_is_status_3_and_waiting_for_a_person_is_4(cli: Cli, cloud: LocalCloud) -> None:
    waiting = cli(
        "-o", "json", "reserve", "-f", str(REQUEST), *WINDOW, "--id", "cli-exit-4",
        "--approval-above", "1000", "--yes",
    )  # fmt: skip
    assert waiting.exit_code == 4  # ExitStatus.NEEDS_APPROVAL
    assert _error(waiting)["error"]["code"] == "needs_approval"

    own = cli("approve", "cli-exit-4", "--yes")  # the requester: four eyes

    assert own.exit_code == 3  # ExitStatus.REFUSED
    assert "PURCHASED" not in states(cloud, "cli-exit-4")
    cli("cancel", "cli-exit-4", "--yes")


def test_the_exit_statuses_in_docs_cli_md_are_the_codes() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (\d+) \| `([a-z_]+)` \|", text, flags=re.MULTILINE))

    assert {int(code): name for code, name in rows.items()} == {int(s): s.code for s in ExitStatus}


# ---------------------------------------------------------------------------------- --as, make serve


def test_as_on_make_serve_acts_as_another_principal(cloud: LocalCloud, endpoint: str) -> None:
    reserved = capacity(
        "--endpoint", endpoint, "reserve", "-f", str(REQUEST), *WINDOW, "--id", "cli-as",
        "--approval-above", "1000", "--yes",
    )  # fmt: skip
    assert reserved.exit_code == 0, reserved.stderr
    cloud.run(until=cloud.now())  # what make serve's clock does meanwhile: the workflow asks for approval
    assert states(cloud, "cli-as")[-1] == "AWAITING_APPROVAL"

    refused = capacity("--endpoint", endpoint, "approve", "cli-as", "--yes")  # make serve's first caller
    approved = capacity("--endpoint", endpoint, "--as", APPROVER_ARN, "approve", "cli-as", "--yes")

    assert refused.exit_code == 3, refused.stderr
    assert approved.exit_code == 0, approved.stderr
    assert f"cli-as: APPROVED by {APPROVER_ARN}." in approved.stdout
    decision = next(i for i in ledger(cloud, "cli-as") if i["sk"] == "APPROVAL_DECISION")
    assert (decision["approver"], decision["identity"]) == (APPROVER_ARN, APPROVER_ARN)
    capacity("--endpoint", endpoint, "cancel", "cli-as", "--yes")


@pytest.mark.parametrize(
    "target", [["--endpoint", "https://abc.execute-api.us-east-1.amazonaws.com/v1"], ["--stack", "prod"]]
)
def test_as_is_refused_where_aws_says_who_signs(target: list[str]) -> None:
    result = capacity(*target, "--as", APPROVER_ARN, "list")

    assert result.exit_code == 2
    assert "--as is for " in result.stderr
    assert "--profile" in result.stderr


# ------------------------------------------------------------------------------------ the API's clock


@pytest.fixture
def dated_api() -> Iterator[str]:
    """An HTTP server whose clock (its ``Date`` header) says 2031-05-17 08:30:00 UTC, whatever today is."""

    class Dated(BaseHTTPRequestHandler):
        def date_time_string(self, timestamp: float | None = None) -> str:
            return format_datetime(datetime(2031, 5, 17, 8, 30, tzinfo=UTC), usegmt=True)

        def do_GET(self) -> None:
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = HTTPServer(("127.0.0.1", 0), Dated)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_now_is_the_apis_clock_from_its_date_header(dated_api: str) -> None:
    transport = HttpTransport(dated_api, credentials=None, region="us-east-1")

    assert transport.now() == datetime(2031, 5, 17, 8, 30, tzinfo=UTC)
