"""Load the teams policy seed into a deployed stack's ``PolicyTable`` (issue 16; ``make seed-policy``).

``python scripts/seed_policy.py [--stack capacity-orchestrator | --table NAME] [--region us-east-1]
[--file deploy/policy-seed.json] [--check]``: reads the stack's ``PolicyTableName`` output (CloudFormation
``DescribeStacks``; ``--table`` names the table instead, as the local cloud does after its deploy),
validates the whole seed (nothing is written when any team is invalid) and writes the account cap and
every team (others are kept; spend and holds are never touched). ``--check`` validates only. Needs
``dynamodb:PutItem`` on the table (the deployer's or an admin's credentials).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "capacity"))
sys.path.insert(0, str(ROOT))  # scripts.stack_tables, whether run by path or by runpy

from capacity.adapters.policy_store import PolicyStore  # noqa: E402
from capacity.errors import InvalidRequest  # noqa: E402
from capacity.logic.governance.policy import PolicySeed, apply_seed  # noqa: E402
from capacity.validation import parse_model  # noqa: E402

from scripts.stack_tables import add_table_arguments, table_of  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Validate and load the seed; 0 when done, 1 when the seed is invalid or the stack has no table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_table_arguments(parser, "PolicyTableName")
    parser.add_argument("--file", type=Path, default=ROOT / "deploy" / "policy-seed.json")
    parser.add_argument("--check", action="store_true", help="validate the seed only")
    args = parser.parse_args(argv)
    data = json.loads(args.file.read_text())
    try:
        seed = parse_model(PolicySeed, {k: v for k, v in data.items() if not str(k).startswith("_")})
    except InvalidRequest as exc:
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 1
    if args.check:
        cap = "set" if seed.account else "not set"
        print(f"{args.file}: {len(seed.teams)} team(s), account cap {cap}: valid")
        return 0
    session, table = table_of(args, "PolicyTableName")
    if not table:
        return 1
    count = apply_seed(
        data, PolicyStore(table, session.client("dynamodb")), actor="seed_policy", now=datetime.now(UTC)
    )
    print(f"{table}: {count} team(s) written from {args.file}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
