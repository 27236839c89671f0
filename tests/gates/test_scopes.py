"""Issue 13, defect 13 (part): least privilege that holds, on the translated template.

The endpoint role read ``s3:GetObject`` on ``arn:aws:s3:::*/*`` (S3 ARNs carry no account: every readable
object anywhere) and ``launch_instances``/``on_demand`` could pass any role of the account to EC2. Both are
now exactly what an administrator configures (``ModelArtifactBuckets``, ``InstanceRoleArns``), nothing by
default; and every function has a log group with a retention.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
ROLES = "arn:aws:iam::123456789012:role/gpu-workers,arn:aws:iam::123456789012:role/eval/batch"


def _stack(**parameters: str) -> Stack:
    return Stack.load(ROOT / "template.yaml", parameter_overrides=parameters)


def _statements(stack: Stack, role: str) -> list[dict[str, Any]]:
    props = stack.resources[role].properties
    found: list[dict[str, Any]] = []
    for policy in props.get("Policies", []):
        statement = policy["PolicyDocument"]["Statement"]
        found.extend(statement if isinstance(statement, list) else [statement])
    return found


def _granting(stack: Stack, role: str, action: str) -> list[dict[str, Any]]:
    return [
        s
        for s in _statements(stack, role)
        if action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        ("", None),
        ("example-models", ["arn:aws:s3:::example-models/*"]),
        ("a-models,b.models", ["arn:aws:s3:::a-models/*", "arn:aws:s3:::b.models/*"]),
    ],
)
def test_the_endpoint_role_reads_only_the_configured_model_buckets(
    buckets: str, expected: list[str] | None
) -> None:
    grants = _granting(_stack(ModelArtifactBuckets=buckets), "EndpointExecutionRole", "s3:GetObject")
    if expected is None:
        assert grants == []  # the safe default: no S3 object at all
    else:
        (grant,) = grants
        resources = grant["Resource"] if isinstance(grant["Resource"], list) else [grant["Resource"]]
        assert resources == expected
    every = [
        r
        for s in _statements(_stack(ModelArtifactBuckets=buckets), "EndpointExecutionRole")
        for r in (s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]])
    ]
    assert not any(str(r).startswith("arn:aws:s3:::*") for r in every)


@pytest.mark.parametrize("function", ["LaunchInstancesFunctionRole", "OnDemandFunctionRole"])
@pytest.mark.parametrize(("roles", "expected"), [("", None), (ROLES, ROLES.split(","))])
def test_ec2_functions_pass_only_the_configured_instance_roles(
    function: str, roles: str, expected: list[str] | None
) -> None:
    stack = _stack(InstanceRoleArns=roles)
    to_ec2 = [
        s
        for s in _granting(stack, function, "iam:PassRole")
        if s.get("Condition", {}).get("StringEquals", {}).get("iam:PassedToService") == "ec2.amazonaws.com"
    ]
    if expected is None:
        assert to_ec2 == []
    else:
        (grant,) = to_ec2
        assert grant["Resource"] == expected
    for statement in _granting(stack, function, "iam:PassRole"):
        resources = (
            statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        )
        assert not any(str(r).endswith(":role/*") for r in resources)


def test_every_function_has_a_log_group_with_a_retention() -> None:
    stack = _stack()
    functions = {f.logical_id: stack.physical_id(f.logical_id) for f in stack.functions}
    groups = {
        r.properties["LogGroupName"]: r.properties.get("RetentionInDays")
        for r in stack.resources.values()
        if r.type == "AWS::Logs::LogGroup"
    }
    assert {f"/aws/lambda/{name}" for name in functions.values()} <= set(groups)
    assert {str(groups[f"/aws/lambda/{name}"]) for name in functions.values()} == {"365"}
