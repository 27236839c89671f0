"""The operators' scripts find their table one way (``scripts/stack_tables.py``): named, or the stack's
output; a missing stack or output is a message saying what to fix, not a traceback."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from scripts.stack_tables import add_table_arguments, table_of

STACK = {
    "StackName": "capacity-orchestrator",
    "CreationTime": "2026-12-01T00:00:00Z",
    "StackStatus": "UPDATE_COMPLETE",
    "Outputs": [{"OutputKey": "LedgerTableName", "OutputValue": "capacity-ledger-abc"}],
}


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_table_arguments(parser, "LedgerTableName")
    return parser.parse_args([*argv, "--region", "us-east-1"])


@pytest.fixture
def cloudformation(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    """DescribeStacks as botocore's model shapes it (stubbed: the answers the test queues)."""
    client = boto3.client(
        "cloudformation", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    session: Any = type("Session", (), {"client": lambda self, name: client})()
    monkeypatch.setattr(boto3.session, "Session", lambda region_name=None: session)
    with Stubber(client) as stubber:
        yield stubber


def test_the_table_is_the_named_one_else_the_stacks_output_else_a_message(
    cloudformation: Stubber, capsys: pytest.CaptureFixture[str]
) -> None:
    assert table_of(_args("--table", "mine"), "LedgerTableName")[1] == "mine"  # no call made
    asked = {"StackName": "capacity-orchestrator"}
    cloudformation.add_response("describe_stacks", {"Stacks": [STACK]}, asked)
    assert table_of(_args(), "LedgerTableName")[1] == "capacity-ledger-abc"
    cloudformation.add_response("describe_stacks", {"Stacks": [STACK]}, asked)
    assert table_of(_args(), "PolicyTableName")[1] is None
    assert "stack capacity-orchestrator has no PolicyTableName output" in capsys.readouterr().err
    cloudformation.add_client_error(
        "describe_stacks",
        "ValidationError",
        "Stack with id other does not exist",
        400,
        {"StackName": "other"},
    )
    assert table_of(_args("--stack", "other"), "LedgerTableName")[1] is None
    assert capsys.readouterr().err.startswith("cannot read stack other: ")
    cloudformation.assert_no_pending_responses()
