"""``capacity serve-until`` (issue 17): keep a reservation served until a time, through PATCH
/reservations/{id}; the answer says when the orchestrator acts and shows the chain."""

from __future__ import annotations

import json

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
