"""A stack deployed again in the same process is put back from a snapshot of what its first deploy left in
moto (localcloud/snapshots.py): the same resources, the same call records, and nothing shared between
clouds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from localcloud import snapshots
from localcloud.cloud import LocalCloud
from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[3]
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
_RANDOM = frozenset({"ResponseMetadata", "RoleId", "KMSMasterKeyArn"})


def _cloud() -> LocalCloud:
    return LocalCloud(ROOT / "template.yaml", start=START, parameter_overrides={"SlackChannelId": "C0SNAP"})


def _plain(value: Any) -> Any:
    """Drop what differs between two real deploys too: request metadata, moto's random role and key ids."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _RANDOM}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _describe(cloud: LocalCloud) -> dict[str, Any]:
    """Everything the deploy creates, as the APIs describe it."""
    iam = cloud.client("iam")
    roles = {}
    for role in iam.list_roles()["Roles"]:
        name = role["RoleName"]
        policies = iam.list_role_policies(RoleName=name)["PolicyNames"]
        roles[name] = {
            "role": role,
            "policies": {p: iam.get_role_policy(RoleName=name, PolicyName=p) for p in policies},
        }
    ddb = cloud.client("dynamodb")
    tables = {
        name: {
            "table": ddb.describe_table(TableName=name)["Table"],
            "ttl": ddb.describe_time_to_live(TableName=name)["TimeToLiveDescription"],
            "items": ddb.scan(TableName=name)["Items"],
        }
        for name in ddb.list_tables()["TableNames"]
    }
    events = cloud.client("events")
    buses = [bus["Name"] for bus in events.list_event_buses()["EventBuses"]]
    rules = {
        (bus, rule["Name"]): {
            "rule": rule,
            "targets": events.list_targets_by_rule(Rule=rule["Name"], EventBusName=bus)["Targets"],
        }
        for bus in buses
        for rule in events.list_rules(EventBusName=bus)["Rules"]
    }
    sfn = cloud.client("stepfunctions")
    machines = [
        sfn.describe_state_machine(stateMachineArn=m["stateMachineArn"])
        for m in sfn.list_state_machines()["stateMachines"]
    ]
    sqs = cloud.client("sqs")
    queues = {
        url: sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        for url in sqs.list_queues().get("QueueUrls", [])
    }
    secrets = cloud.client("secretsmanager")
    scheduler = cloud.client("scheduler")
    described: dict[str, Any] = _plain(
        {
            "roles": roles,
            "tables": tables,
            "buses": buses,
            "rules": {f"{bus}/{name}": value for (bus, name), value in rules.items()},
            "machines": machines,
            "queues": queues,
            "topics": cloud.client("sns").list_topics()["Topics"],
            "secrets": {
                s["Name"]: secrets.get_secret_value(SecretId=s["ARN"])["SecretString"]
                for s in secrets.list_secrets()["SecretList"]
            },
            "alarms": cloud.client("cloudwatch").describe_alarms()["MetricAlarms"],
            "schedule_groups": [g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"]],
            "schedules": scheduler.list_schedules()["Schedules"],
            "calls": sorted(cloud.dispatcher.counts.items()),
        }
    )
    return described


def test_a_stack_deployed_again_is_put_back_as_the_first_deploy_left_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deploys: list[str] = []
    real_deploy = Stack.deploy

    def counted(stack: Stack, session: Any = None) -> None:
        deploys.append(stack.stack_name)
        real_deploy(stack, session)

    monkeypatch.setattr(Stack, "deploy", counted)
    monkeypatch.setenv(snapshots.OFF_ENV, "1")
    with _cloud() as cloud:
        deployed = _describe(cloud)
    monkeypatch.delenv(snapshots.OFF_ENV)
    with _cloud() as cloud:  # deploys (the first with the cache on) and keeps the snapshot
        assert _describe(cloud) == deployed
    assert len(deploys) == 2
    with _cloud() as cloud:  # put back: no deploy, the same state
        assert _describe(cloud) == deployed
        assert cloud.stack.deployed
        cloud.client("dynamodb").put_item(
            TableName=cloud.stack.physical_id("LedgerTable"),
            Item={"request_id": {"S": "req-left-behind"}, "sk": {"S": "STATE#1"}},
        )
        role = next(iter(deployed["roles"]))
        cloud.client("iam").delete_role_policy(
            RoleName=role, PolicyName=next(iter(deployed["roles"][role]["policies"]))
        )
    with _cloud() as cloud:  # put back again: nothing of the cloud before
        restored = _describe(cloud)
    assert len(deploys) == 2
    assert restored == deployed
    assert len(restored["roles"]) > 20
    assert len(restored["tables"]) >= 4
    assert restored["queues"]
    assert "req-left-behind" not in json.dumps(restored, default=str)


def test_a_stack_changed_before_the_start_is_deployed_not_put_back(monkeypatch: pytest.MonkeyPatch) -> None:
    with _cloud() as cloud:
        first = _describe(cloud)
    changed = _cloud()
    role = next(r for r in changed.stack.resources.values() if r.type == "AWS::IAM::Role")
    role.properties["Policies"] = role.properties.get("Policies", [])[:-1]
    with changed:
        roles = _describe(changed)["roles"]
    name = changed.stack._name(role.logical_id)
    assert len(roles[name]["policies"]) == len(first["roles"][name]["policies"]) - 1
