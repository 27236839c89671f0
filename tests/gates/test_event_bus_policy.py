"""The bus's resource policy names exactly the roles that may put the application's own events.

``EventBusPolicy`` denies ``PutEvents`` of source ``capacity.orchestrator`` to every principal but a list of
role ARNs written by hand in template.yaml. A function given ``EventBridgePutEventsPolicy`` and left out of
the list would be refused on AWS (the local cloud too) the first time it puts an event; a role in the list
that may not put events is a door left open for nothing. This gate keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]
FORWARDS_AWS_EVENTS_ONLY = {"ForwarderRole"}
"""Roles that put events on the bus but never the application's own source (EventBridge forwarding
``aws.*`` events from other regions): the deny does not concern them."""


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _puts_on(role: dict[str, Any], bus_arn: str) -> bool:
    for policy in role.get("Policies", []):
        for statement in _as_list(policy["PolicyDocument"].get("Statement", [])):
            actions = {a.lower() for a in _as_list(statement.get("Action", []))}
            resources = _as_list(statement.get("Resource", []))
            allowed = statement.get("Effect") == "Allow" and actions & {"events:putevents", "events:*"}
            if allowed and (bus_arn in resources or "*" in resources):
                return True
    return False


def _role_arns(stack: Stack, bus_arn: str) -> Iterator[tuple[str, str]]:
    for logical_id, resource in stack.resources.items():
        if resource.type == "AWS::IAM::Role" and _puts_on(resource.properties, bus_arn):
            yield logical_id, str(stack.arn(logical_id))


@pytest.fixture(scope="module")
def stack() -> Stack:
    """The application's template, translated and resolved (no AWS call)."""
    return Stack.load(ROOT / "template.yaml")


def test_the_bus_policy_lets_exactly_the_roles_that_put_the_applications_events(stack: Stack) -> None:
    statement = stack.resources["EventBusPolicy"].properties["Statement"]
    bus_arn = statement["Resource"]
    assert statement["Effect"] == "Deny"
    assert statement["Condition"]["ForAnyValue:StringEquals"]["events:source"] == "capacity.orchestrator"
    exempt = set(statement["Condition"]["ArnNotLike"]["aws:PrincipalArn"])
    putting = dict(_role_arns(stack, bus_arn))
    assert len(putting) > 10  # the functions' generated roles were found
    needed = {arn for logical_id, arn in putting.items() if logical_id not in FORWARDS_AWS_EVENTS_ONLY}
    assert sorted(needed - exempt) == [], "roles that put events but the bus policy denies"
    assert sorted(exempt - needed) == [], "roles the bus policy lets put events they may not put"
