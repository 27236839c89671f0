"""The CLI's story on the local cloud: plan -> reserve (asks) -> watch -> status -> costs -> cancel, and an
approval by another identity. Each command is a real ``capacity`` invocation (Typer's CliRunner)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from localcloud.cloud import LocalCloud
from tests.cli.conftest import APPROVER_ARN, REQUEST, REQUESTER_ARN, START, Cli, ledger, states

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("UPDATE_SNAPSHOTS") == "1"
P5EN = ["--type", "ml.p5en.48xlarge"]  # nothing in this package buys it: the same offerings every time


def _snapshot(name: str, text: str) -> str:
    path = SNAPSHOTS / name
    if UPDATE or not path.exists():
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


def _without_ids(answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with each offering's ``offering_id`` replaced by its position in the ranking."""
    ids = {o["offering_id"]: f"<offering {i}>" for i, o in enumerate(answer["offerings"])}
    return cast(dict[str, Any], json.loads(json.dumps(answer), object_hook=lambda d: _renamed(d, ids)))


def _renamed(item: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    if "offering_id" in item:
        item["offering_id"] = ids.get(item["offering_id"], "<offering ?>")
    return item


def _states_shown(stdout: str) -> list[str]:
    """The states of the history lines ``watch`` printed (CliRunner also echoes typed input to stdout)."""
    return [line.split()[1] for line in stdout.splitlines() if line.startswith("2026-")]


def test_plan_prints_the_ranked_table(cli: Cli, cloud: LocalCloud) -> None:
    assert cloud.now() == START, "the snapshots are of the sample's dates: run them before time moves on"
    result = cli("plan", "-f", str(REQUEST), *P5EN)

    assert result.exit_code == 0, result.stderr
    first = next(line for line in result.stdout.splitlines() if line.strip().startswith("1 *"))
    # rank, zone, window, hours, fee, $/instance-hour, on-demand equivalent, saving, break-even
    assert first.split() == [
        "1", "*", "us-west-2", "/", "us-west-2a", "2026-12-06", "11:30", "2026-12-09", "11:30", "72",
        "$2,359.74", "$16.39", "$9,115.20", "74.1%", "26%",
    ]  # fmt: skip
    assert "Decision DRY_RUN: Dry run: would buy it." in result.stdout
    assert "Why recommended option training-plan" in result.stdout
    assert result.stdout == _snapshot("plan.txt", result.stdout)


def test_plan_json_is_the_apis_answer(cli: Cli, cloud: LocalCloud) -> None:
    result = cli("--output", "json", "plan", "-f", str(REQUEST), *P5EN)

    assert result.exit_code == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["decision"] == "DRY_RUN"
    assert answer["recommendation"]["instance_type"] == "ml.p5en.48xlarge"
    assert answer["offerings"][0] == answer["recommendation"]
    # Offering ids are AWS's opaque ids (the emulator's depend on the searches made before): not snapshotted.
    assert _without_ids(answer) == _without_ids(json.loads(_snapshot("plan.json", result.stdout)))
    assert states(cloud, answer["request_id"]) == []  # a dry run records nothing


def test_reserve_shows_the_price_and_a_no_buys_nothing(cli: Cli, cloud: LocalCloud) -> None:
    result = cli("reserve", "-f", str(REQUEST), "--id", "cli-declined", input="n\n")

    assert result.exit_code == 1
    assert "for $1,990.60 paid upfront, not refundable" in result.stderr
    assert "Reserve it? [y/N]" in result.stderr
    assert "Nothing was done." in result.stderr
    assert ledger(cloud, "cli-declined") == []


def test_reserve_watch_status_costs_cancel(cli: Cli, cloud: LocalCloud) -> None:
    reserved = cli("reserve", "-f", str(REQUEST), "--no-watch", input="y\n")
    assert reserved.exit_code == 0, reserved.stderr
    assert "Reserved eval-week-49: REQUESTED." in reserved.stdout
    # What happens at the request's instant has happened: searched, chosen, bought.
    assert states(cloud, "eval-week-49")[:3] == ["REQUESTED", "PLANNED", "PURCHASED"]

    watched = cli("watch", "eval-week-49", "--until", "READY")
    assert watched.exit_code == 0, watched.stderr
    shown = _states_shown(watched.stdout)
    assert shown == ["REQUESTED", "PLANNED", "PURCHASED", "SCHEDULED", "ACTIVE", "DEPLOYING", "READY"]
    assert "2026-12-08T11:41:00Z  READY" in watched.stdout  # virtual time moved to the plan's start
    assert "eval-week-49 is READY." in watched.stderr

    one = cli("status", "eval-week-49")
    assert one.exit_code == 0, one.stderr
    assert "eval-week-49  READY" in one.stdout
    assert "spend so far  $1,990.60" in one.stdout
    assert (
        "co-eval-week-49 in us-east-1, 2026-12-08 11:30 to 2026-12-11 11:30 UTC, $1,990.60 upfront"
        in one.stdout
    )

    listed = cli("--output", "json", "status")
    assert listed.exit_code == 0, listed.stderr
    rows = {r["request_id"]: r["state"] for r in json.loads(listed.stdout)["reservations"]}
    assert rows["eval-week-49"] == "READY"

    costs = cli("--output", "json", "costs", "--month", "2026-11")  # GET /costs: bought in November
    assert costs.exit_code == 0, costs.stderr
    report = json.loads(costs.stdout)
    assert report["totals"]["paid_usd"] == "1990.60"
    assert [r["request_id"] for r in report["reservations"]] == ["eval-week-49"]

    refused = cli("cancel", "eval-week-49", input="n\n")
    assert refused.exit_code == 1
    assert "the upfront fee of $1,990.60 for co-eval-week-49" in refused.stderr
    assert "is NOT refunded" in refused.stderr
    assert "CANCELLED" not in states(cloud, "eval-week-49")

    cancelled = cli("cancel", "eval-week-49", "--watch", input="y\n")
    assert cancelled.exit_code == 0, cancelled.stderr
    assert _states_shown(cancelled.stdout) == ["CANCELLED", "RELEASING", "RELEASED"]
    cancel_item = next(i for i in ledger(cloud, "eval-week-49") if i.get("state") == "CANCELLED")
    assert cancel_item["actor"] == REQUESTER_ARN  # the caller's identity, as API Gateway passes it
    assert cloud.billable_resources() == []


def test_another_identity_approves_and_is_recorded(cli: Cli, cloud: LocalCloud) -> None:
    window = ["--from", "+2d", "--until", "+7d"]  # from the cloud's clock, wherever earlier tests left it
    reserved = cli(
        "reserve", "-f", str(REQUEST), *window, "--id", "cli-approval", "--approval-above", "1000", "--yes"
    )
    # --local follows it; it stops where a person must act: exit 4, needs approval (capacity_cli/exits.py).
    assert reserved.exit_code == 4, reserved.stderr
    assert "A person must approve" not in reserved.stdout
    assert "cli-approval is AWAITING_APPROVAL." in reserved.stderr
    # The deadline is in the API's clock: 24 h (approval_timeout_hours) after the wait began.
    waiting = next(i for i in ledger(cloud, "cli-approval") if i.get("state") == "AWAITING_APPROVAL")
    asked = datetime.fromisoformat(str(waiting["at"]).replace("Z", "+00:00"))
    now = f"now {cloud.now():%Y-%m-%d %H:%M}"
    assert f"by {asked + timedelta(hours=24):%Y-%m-%d %H:%M} UTC (the API's clock, {now})" in reserved.stderr
    assert "capacity --local --as <approver's principal ARN> approve cli-approval" in reserved.stderr

    approved = cli("approve", "cli-approval", "--reason", "eval budget", input="y\n", identity=APPROVER_ARN)
    assert approved.exit_code == 0, approved.stderr
    assert f"approve by {asked + timedelta(hours=24):%Y-%m-%d %H:%M} UTC (the API's clock)" in approved.stderr
    assert f"cli-approval: APPROVED by {APPROVER_ARN}." in approved.stdout
    decision = next(i for i in ledger(cloud, "cli-approval") if i["sk"] == "APPROVAL_DECISION")
    # The CLI sends no approver: the API records the authenticated caller as both approver and identity.
    assert (decision["approver"], decision["identity"], decision["reason"]) == (
        APPROVER_ARN,
        APPROVER_ARN,
        "eval budget",
    )
    assert "PURCHASED" in states(cloud, "cli-approval")

    again = cli("reject", "cli-approval", identity=APPROVER_ARN)
    assert again.exit_code == 3  # refused: not in a state that allows it
    assert "not awaiting approval" in again.stderr
    cancelled = cli("cancel", "cli-approval", "--yes", "--watch")
    assert cancelled.exit_code == 0, cancelled.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["plan", "-f", str(REQUEST), "--type", "p5.48xlarge"],
            "instance_type: 'p5.48xlarge' is not a supported",
        ),
        (["plan", "-f", str(REQUEST), "--regions", "us-east1"], "did you mean 'us-east-1'?"),
        (
            ["plan", "-f", str(REQUEST), "--platform", "ec3"],
            "platform: Input should be 'sagemaker' or 'ec2' - did you mean 'ec2'?",
        ),
        (
            ["reserve", "-f", str(REQUEST), "--search-until", "2026-12-12"],
            "search_until: 2026-12-12T00:00:00Z is after the window's latest start 2026-12-10T00:00:00Z",
        ),
        (
            ["plan", "-f", str(REQUEST), "--search-until", "+2d", "--search-every", "5m"],
            "search_every_minutes: must be at least 15",
        ),
    ],
)
def test_bad_input_shows_the_field_errors_and_what_was_meant(
    cli: Cli, args: list[str], expected: str
) -> None:
    result = cli(*args)

    assert result.exit_code == 2  # bad input
    assert "The API refused the request (400):" in result.stderr
    assert expected in result.stderr
