"""``capacity serve-until`` (issue 17): keep a reservation served until a time, through PATCH
/reservations/{id}; the answer says when the orchestrator acts and shows the chain."""

from __future__ import annotations

import json
from typing import Any

from localcloud.cloud import LocalCloud
from tests.cli.conftest import REQUEST, Cli, ledger


def test_serve_until_sets_moves_and_clears_the_time_and_shows_when_it_acts(
    cli: Cli, cloud: LocalCloud
) -> None:
    reserved = cli("reserve", "-f", str(REQUEST), "--yes", "--no-watch")
    assert reserved.exit_code == 0, reserved.stderr
    assert cli("watch", "eval-week-49", "--until", "PURCHASED").exit_code == 0

    kept = cli("serve-until", "eval-week-49", "2026-12-14T10:30Z")
    assert kept.exit_code == 0, kept.stderr
    assert "eval-week-49 is kept serving until 2026-12-14 10:30 UTC" in kept.stdout
    assert "at 2026-12-09 11:30 UTC (48 h before the end)" in kept.stdout  # the plan ends 12-11 11:30
    assert "us-east-1" in kept.stdout

    moved = json.loads(cli("--output", "json", "serve-until", "eval-week-49", "+10d", "--lead", "3d").stdout)
    assert (moved["rollover_lead_hours"], moved["next_check"]) == (72, "2026-12-08T11:30:00Z")
    cleared = cli("serve-until", "eval-week-49", "none")
    assert "no longer than the reservations bought so far" in cleared.stdout
    changes = [i for i in ledger(cloud, "eval-week-49") if str(i["sk"]).startswith("SERVE_UNTIL#")]
    assert len(changes) == 3  # three changes in one instant: each recorded, in order
    assert changes[0]["serve_until"] == "2026-12-14T10:30:00Z"
    assert changes[-1]["serve_until"] is True  # DynamoDB's NULL, as the plain reader shows it

    refused = cli("serve-until", "eval-week-49", "2025-01-01")
    assert refused.exit_code != 0
    assert "serve_until" in refused.stderr
    assert "not in the future" in refused.stderr


def test_reserve_keeps_serving_from_the_start_and_names_a_bad_flag(cli: Cli, cloud: LocalCloud) -> None:
    def reserve(*flags: str) -> Any:
        return cli("reserve", "-f", str(REQUEST), "--id", "kept-cli", *flags, "--yes", "--no-watch")

    # --rollover-lead alone, or a lead that is not a duration: refused naming the flag, nothing sent.
    alone = reserve("--rollover-lead", "2d")
    assert alone.exit_code != 0
    assert "--rollover-lead is when to act for --serve-until: give --serve-until too" in alone.stderr
    bad = reserve("--serve-until", "2026-12-20", "--rollover-lead", "soon")
    assert bad.exit_code != 0
    assert "--rollover-lead 'soon': write whole days or hours" in bad.stderr
    # A serve_until the reservation covers anyway: the API's 422 names the field (after the price shown).
    moot = reserve("--serve-until", "2026-12-07")
    assert moot.exit_code != 0
    assert "serve_until" in moot.stderr
    assert "is not after" in moot.stderr
    assert ledger(cloud, "kept-cli") == []

    # The price is the first reservation's (a dry run keeps nothing serving); the request keeps both fields.
    reserved = reserve("--serve-until", "2026-12-20T10:30Z", "--rollover-lead", "36h")
    assert reserved.exit_code == 0, reserved.stderr
    shown = json.loads(cli("--output", "json", "status", "kept-cli").stdout)
    assert (shown["serve_until"], shown["rollover_lead_hours"]) == ("2026-12-20T10:30:00Z", 36)
