"""Loading ``functions/<name>/app.py`` handlers the way the local cloud does, and a Lambda context."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
from capacity.adapters import clients
from capacity.adapters.policy_store import PolicyStore
from capacity.teams import Principals, TeamPolicy

ROOT = Path(__file__).resolve().parents[2]


def load_handler(name: str) -> ModuleType:
    """Import ``functions/<name>/app.py`` under a unique module name (every handler file is ``app.py``)."""
    path = ROOT / "functions" / name / "app.py"
    spec = importlib.util.spec_from_file_location(f"unit_fn_{name}", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class LambdaContext:
    """The attributes Powertools reads from the Lambda context."""

    function_name: str = "unit-tests"
    function_version: str = "$LATEST"
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:unit-tests"
    memory_limit_in_mb: int = 512
    aws_request_id: str = "req-0001"
    log_group_name: str = "/aws/lambda/unit-tests"
    log_stream_name: str = "2026/12/01/[$LATEST]abc"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def invoke(module: ModuleType, event: Any) -> Any:
    """Call the handler with the event round-tripped through JSON, and check the result the same way.

    The result must serialise with plain ``json.dumps`` (no ``default``), as the Lambda runtime does.
    """
    payload = json.loads(json.dumps(event))
    result = module.lambda_handler(payload, LambdaContext())
    assert json.loads(json.dumps(result)) == result
    return result


def bus_queue(bus_name: str, region: str = "us-east-1") -> str:
    """An SQS queue receiving every event of ``bus_name`` (to count what the application put)."""
    sqs = boto3.client("sqs", region_name=region)
    events = boto3.client("events", region_name=region)
    # SQS keeps a message 14 days at most (4 by default): a test travelling back must drain in its travel
    url = sqs.create_queue(QueueName="bus-tap", Attributes={"MessageRetentionPeriod": "1209600"})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(
        Name="tap", EventBusName=bus_name, EventPattern=json.dumps({"source": ["capacity.orchestrator"]})
    )
    events.put_targets(Rule="tap", EventBusName=bus_name, Targets=[{"Id": "q", "Arn": arn}])
    return str(url)


def drain(url: str, region: str = "us-east-1") -> list[dict[str, Any]]:
    """Every event delivered to the tap queue so far (EventBridge envelopes)."""
    sqs = boto3.client("sqs", region_name=region)
    found: list[dict[str, Any]] = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return found
        for message in messages:
            found.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


def team_policy(name: str, **overrides: Any) -> TeamPolicy:
    """A valid team ``name``: members by the role named like it, approvers ``EvalApprovers``, $30,000 a
    month, approval above $5,000, ``ml.p5.48xlarge`` in two Regions, 4 ``ml.p5`` at once; ``overrides``."""
    body: dict[str, Any] = {
        "name": name,
        "members": {"iam_principal_arns": [f"arn:aws:sts::123456789012:assumed-role/{name}/*"]},
        "approvers": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/EvalApprovers/*"]},
        "monthly_budget_usd": "30000",
        "approval_above_usd": "5000",
        "instance_types": ["ml.p5.48xlarge"],
        "regions": ["us-east-1", "us-west-2"],
        "instance_quota": {"ml.p5": 4},
    }
    body.update(overrides)
    return TeamPolicy.model_validate(body)


def create_policy_table(region: str = "us-east-1") -> PolicyStore:
    """The policy table ``policy`` as template.yaml defines it (``pk``/``sk``), empty; its store."""
    boto3.client("dynamodb", region_name=region).create_table(
        TableName="policy",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    return PolicyStore("policy", clients.dynamodb(region))


def policy_table(
    monkeypatch: Any, *teams: TeamPolicy, admins: Principals | None = None, region: str = "us-east-1"
) -> PolicyStore:
    """The handlers' policy table (``POLICY_TABLE`` = ``policy``) holding ``teams`` (``TeamPolicy``) and
    ``admins`` (``Principals``): who sees and who approves what, as a deployed stack always has one."""
    store = create_policy_table(region)
    monkeypatch.setenv("POLICY_TABLE", "policy")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    for team in teams:
        store.put_team(team, actor="tests", now=now)
    if admins is not None:
        store.put_admins(admins, actor="tests", now=now)
    return store
