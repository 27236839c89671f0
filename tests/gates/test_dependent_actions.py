"""Gate (issue 29, 1): every AWS call the product makes is granted, with each of its dependent actions, to
the role of the function (or state machine) that makes it.

The calls are the integration tests' own (tests/gates/recorded_calls.json, written by ``make
record-calls``: every allowed call a role of the stack made, with the checks the local cloud's IAM
evaluated for it). Each is replayed against the template as it is *now*: a grant taken out of a role, or a
dependent action the Service Authorization Reference lists and no role grants, fails here, naming the
role, the operation, the action and the resource. A call the product makes anew needs ``make
record-calls`` to be covered.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from localcloud.iam import Iam
from localcloud.iam.lookups import CloudLookups
from localcloud.iam.requests import EVALUATED_WHEN_USED, Check
from localcloud.iam.sar import NEWER_ACTIONS, reference
from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests/gates/recorded_calls.json"


def _records() -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = json.loads(RECORDED.read_text(encoding="utf-8"))
    return records


@cache
def _iam(stack_name: str, account: str, region: str, parameters: str) -> Iam:
    stack = Stack.load(
        ROOT / "template.yaml",
        stack_name=stack_name or "capacity-orchestrator",
        account_id=account,
        region=region,
        parameter_overrides=json.loads(parameters),
    )
    lookups = CloudLookups(None, None, account_id=account)
    return Iam(stack, lookups=lookups, now=lambda: datetime(2026, 1, 1, tzinfo=UTC))


def _iam_of(record: dict[str, Any]) -> Iam:
    return _iam(
        str(record.get("stack_name") or ""),
        str(record["account"]),
        str(record.get("stack_region") or record["region"]),
        json.dumps(record.get("parameters") or {}, sort_keys=True),
    )


def _check(raw: dict[str, Any]) -> Check:
    tags = raw.get("resource_tags")
    return Check(raw["action"], raw["resource"], dict(raw["context"]), (lambda: tags) if tags else None)


def test_the_recorded_calls_cover_the_products_roles_and_purchases() -> None:
    records = _records()
    roles = {r["role"] for r in records}
    operations = {(r["service"], r["operation"]) for r in records}
    # The calls that spend or hold money are among them (a recording that lost them covers nothing).
    for call in [
        ("sagemaker", "CreateTrainingPlan"),
        ("ec2", "PurchaseCapacityBlock"),
        ("ec2", "RunInstances"),
        ("sagemaker", "CreateEndpoint"),
        ("sagemaker", "CreateInferenceComponent"),
    ]:
        assert call in operations, f"{call} is not in {RECORDED.name}: run make record-calls"
    assert {"PurchaseCapacityFunctionRole", "LaunchInstancesFunctionRole", "ApiFunctionRole"} <= roles


def test_every_recorded_call_lists_the_dependent_actions_of_its_actions() -> None:
    # What the reference says each action depends on is among the call's checks (so the recording was made
    # with dependent actions evaluated); those AWS authorizes only when the request uses them are exempt.
    ref = reference()
    missing: list[str] = []
    for record in _records():
        actions = {c["action"].lower() for c in record["checks"]}
        for check in record["checks"]:
            if check["action"] in NEWER_ACTIONS:
                continue
            for dependent in ref.action(check["action"]).dependent_actions:
                if dependent.lower() not in EVALUATED_WHEN_USED and dependent.lower() not in actions:
                    missing.append(
                        f"{record['role']} {record['operation']}: {check['action']} -> {dependent}"
                    )
    assert missing == [], "\n".join(sorted(set(missing)))


def test_every_recorded_call_and_each_dependent_action_is_granted_to_its_role() -> None:
    denied: list[str] = []
    listed: list[str] = []
    for record in _records():
        iam = _iam_of(record)
        role_arn = iam.role_arn(record["role"])
        for raw in record["checks"]:
            denial = iam.evaluate(
                role_arn,
                _check(raw),
                service=record["service"],
                operation=record["operation"],
                region=record["region"],
            )
            call = f"{record['role']} {record['service']} {record['operation']}"
            line = f"{call}: {raw['action']} on {raw['resource']}"
            listed.append(line)
            if denial is not None:
                denied.append(line)
    assert listed
    assert denied == [], "denied (a grant the role lacks):\n" + "\n".join(sorted(set(denied)))


def test_the_purchase_role_is_granted_create_reserved_capacity_on_its_own_account_only() -> None:
    purchases = [
        r for r in _records() if (r["service"], r["operation"]) == ("sagemaker", "CreateTrainingPlan")
    ]
    assert purchases
    record = purchases[0]
    iam = _iam_of(record)
    role = iam.role_arn(record["role"])
    region, account = record["region"], record["account"]

    def denied(resource: str) -> bool:
        check = Check("sagemaker:CreateReservedCapacity", resource)
        return (
            iam.evaluate(role, check, service="sagemaker", operation="CreateTrainingPlan", region=region)
            is not None
        )

    assert not denied(f"arn:aws:sagemaker:{region}:{account}:reserved-capacity/*")
    assert denied(f"arn:aws:sagemaker:{region}:210987654321:reserved-capacity/*")


@pytest.mark.parametrize("action", sorted(NEWER_ACTIONS))
def test_each_action_the_pinned_reference_lacks_is_listed_with_its_source(action: str) -> None:
    assert NEWER_ACTIONS[action].startswith("https://docs.aws.amazon.com/"), NEWER_ACTIONS[action]
    assert reference().action(action).resource_types == ()
