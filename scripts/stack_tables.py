"""The table an operator's script works on: named (``--table``), or read from the stack's outputs.

Shared by ``scripts/seed_policy.py`` (``PolicyTableName``) and ``scripts/reconcile_costs.py``
(``LedgerTableName``): ``--stack`` (default ``capacity-orchestrator``), ``--table`` and ``--region``, and
one clear message when the stack or its output is missing (CloudFormation ``DescribeStacks``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import boto3
import botocore.exceptions


def add_table_arguments(parser: argparse.ArgumentParser, output: str) -> None:
    """Add ``--stack``, ``--table`` (the table named by the stack's ``output`` instead) and ``--region``."""
    parser.add_argument("--stack", default="capacity-orchestrator")
    parser.add_argument(
        "--table", default=None, help=f"the table's name (instead of the stack's {output} output)"
    )
    parser.add_argument("--region", default=None)


def table_of(args: argparse.Namespace, output: str) -> tuple[Any, str | None]:
    """``(boto3 session, table name)``: ``args.table``, else the stack's ``output``. None (the reason printed
    on stderr, saying what to fix) when the stack cannot be read or has no such output."""
    session = boto3.session.Session(region_name=args.region)
    if args.table:
        return session, str(args.table)
    try:
        stacks = session.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
    except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
        print(
            f"cannot read stack {args.stack}: {exc} (name it with --stack, or the table with --table)",
            file=sys.stderr,
        )
        return session, None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    table = outputs.get(output)
    if not table:
        print(
            f"stack {args.stack} has no {output} output: deploy the current template first", file=sys.stderr
        )
    return session, table
