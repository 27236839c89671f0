"""``capacity extend`` (issue 17 through the CLI of issue 18): the dry run's table, a "no" that buys
nothing, a "yes" that requests the extension once, and the new end in ``status``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from tests.cli.conftest import REQUEST, ROOT, START, Cli, ledger


@pytest.fixture(scope="module")
def cloud() -> Iterator[LocalCloud]:
    """A market where every pool holds 8 instances, so the plan can be extended by a day."""
    market = MarketConfig(capacity={"*": 8})
    with LocalCloud(ROOT / "template.yaml", start=START, seed=7, market=market) as running:
        yield running


def _extended(cloud: LocalCloud) -> list[dict[str, object]]:
    return [i for i in ledger(cloud, "eval-week-49") if i.get("state") == "EXTENDED"]


def test_extend_lists_then_asks_then_buys_once(cli: Cli, cloud: LocalCloud) -> None:
    reserved = cli("reserve", "-f", str(REQUEST), "--yes", "--no-watch")
    assert reserved.exit_code == 0, reserved.stderr
    assert cli("watch", "eval-week-49", "--until", "READY").exit_code == 0

    listed = cli("extend", "eval-week-49", "--duration", "1d")
    assert listed.exit_code == 0, listed.stderr
    assert "Extensions of eval-week-49 (ends 2026-12-11 11:30 UTC)" in listed.stdout
    assert "2026-12-12 11:30" in listed.stdout  # one day later
    dry = json.loads(cli("--output", "json", "extend", "eval-week-49", "--duration", "1d").stdout)
    (offer,) = dry["offerings"]
    assert offer["allowed"] is True

    declined = cli(
        "extend", "eval-week-49", "--duration", "1d", "--offering", offer["offering_id"], input="n\n"
    )
    assert declined.exit_code == 1
    assert "(paid upfront, not refundable)" in declined.stderr
    assert not [i for i in ledger(cloud, "eval-week-49") if str(i["sk"]).startswith("EXTENSION_INTENT#")]

    bought = cli(
        "extend", "eval-week-49", "--duration", "1d", "--offering", offer["offering_id"], input="y\n"
    )
    assert bought.exit_code == 0, bought.stderr
    assert (
        f"Extension {offer['offering_id']} of eval-week-49 requested (EXTENSION_REQUESTED)" in bought.stdout
    )
    cloud.run(stop_when=lambda: bool(_extended(cloud)))
    (entry,) = _extended(cloud)
    assert entry["money_usd"] == offer["upfront_fee_usd"]

    shown = cli("status", "eval-week-49")
    assert shown.exit_code == 0, shown.stderr
    assert "EXTENDED" in shown.stdout
    assert "2026-12-12 11:30" in shown.stdout, shown.stdout
