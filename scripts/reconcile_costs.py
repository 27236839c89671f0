"""Rebuild the costs rollup from the ledger and report where they differ (issue 31).

``python scripts/reconcile_costs.py [--stack capacity-orchestrator | --table NAME] [--region us-east-1]
[--fix] [--json]``: reads every reservation's ledger (the stack's ``LedgerTableName`` output; ``--table``
names the table instead), computes the rollup its entries make (``capacity.logic.governance.cost_reconcile``)
and compares it with the rollup ``GET /costs`` reads. Prints the reservations and team-months counted and
every difference; ``--fix`` replaces the items that differ (each on the version it was read at: one a writer
moved meanwhile is left, reconcile again). Reads the whole ledger (one query per reservation): an operator's
command, not a route's. Needs ``dynamodb:Query``/``GetItem`` on the table (and ``PutItem`` with ``--fix``).
Exit 0 when the rollup equals the ledger's sums (or was fixed), 1 when it differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "capacity"))
sys.path.insert(0, str(ROOT))  # scripts.stack_tables, whether run by path or by runpy

from capacity.ledger import Ledger  # noqa: E402
from capacity.logic.governance.cost_reconcile import reconcile  # noqa: E402
from capacity.ports import Ports  # noqa: E402
from capacity.timeutil import utcnow  # noqa: E402

from scripts.stack_tables import add_table_arguments, table_of  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Reconcile; 0 when the rollup agrees with the ledger (or ``--fix`` fixed every difference), else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_table_arguments(parser, "LedgerTableName")
    parser.add_argument("--fix", action="store_true", help="replace the rollup items that differ")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    session, table = table_of(args, "LedgerTableName")
    if not table:
        return 1
    ledger = Ledger(table, session.client("dynamodb"))
    ports = cast("Ports", SimpleNamespace(ledger=ledger, clock=utcnow))  # the ledger and the clock only
    result = reconcile(ports, fix=args.fix)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(
            f"{result['reservations']} reservation(s) in {result['team_months']} team-month(s): "
            f"{len(result['differences'])} difference(s)" + (f", {result['fixed']} fixed" if args.fix else "")
        )
        for difference in result["differences"]:
            print(f"  {difference}")
    agrees = not result["differences"] or (args.fix and result["fixed"] >= len(result["differences"]))
    return 0 if agrees else 1


if __name__ == "__main__":
    sys.exit(main())
