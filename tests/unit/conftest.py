"""Fixtures for the unit tests: moto DynamoDB tables, fakes of the other ports, a settable clock."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from capacity.adapters import clients
from capacity.adapters.dynamodb import OfferingStore
from capacity.ledger import Ledger
from capacity.ports import Ports
from capacity.settings import Settings
from moto import mock_aws

from tests.unit.scaling_fakes import ScalingWorld
from tests.unit.unit_fakes import Clock, FakeEvents, FakeScheduler, FakeSlack, FakeTasks, World

REGION = "us-east-1"
ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_LAMBDA_FUNCTION_NAME": "unit-tests",
    "POWERTOOLS_SERVICE_NAME": "capacity-orchestrator",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "LEDGER_TABLE": "ledger",
    "OFFERINGS_TABLE": "offerings",
    "IDEMPOTENCY_TABLE": "idempotency",
    "EVENT_BUS_NAME": "capacity-orchestrator",
    "SCHEDULE_GROUP": "capacity-orchestrator",
    "RELEASE_TARGET_ARN": f"arn:aws:events:{REGION}:123456789012:event-bus/capacity-orchestrator",
    "SCHEDULER_ROLE_ARN": "arn:aws:iam::123456789012:role/scheduler",
    "ENDPOINT_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/sagemaker-endpoint",
}


@pytest.fixture(autouse=True)
def _isolated() -> Iterator[None]:
    """Every test starts with no cached clients or Powertools parameters."""
    clients.clear_clients()
    parameters.clear_caches()  # type: ignore[no-untyped-call]
    yield
    clients.clear_clients()
    parameters.clear_caches()  # type: ignore[no-untyped-call]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The functions' environment, with fake credentials."""
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    for key in ("SLACK_CHANNEL_ID", "SLACK_BOT_TOKEN_SECRET_ARN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    return dict(ENV)


def create_tables(region: str = REGION) -> None:
    """The ledger, offerings and idempotency tables as template.yaml defines them."""
    dynamodb = boto3.client("dynamodb", region_name=region)
    for name, pk, sk in (
        ("ledger", "request_id", "sk"),
        ("offerings", "request_id", "offering_key"),
        ("idempotency", "id", None),
    ):
        keys: list[Any] = [{"AttributeName": pk, "KeyType": "HASH"}]
        attrs: list[Any] = [{"AttributeName": pk, "AttributeType": "S"}]
        if sk:
            keys.append({"AttributeName": sk, "KeyType": "RANGE"})
            attrs.append({"AttributeName": sk, "AttributeType": "S"})
        extra: dict[str, Any] = {}
        if name == "ledger":  # the sparse listing index of GET /reservations
            attrs += [
                {"AttributeName": "listing", "AttributeType": "S"},
                {"AttributeName": "written_at", "AttributeType": "S"},
            ]
            extra["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": "listing",
                    "KeySchema": [
                        {"AttributeName": "listing", "KeyType": "HASH"},
                        {"AttributeName": "written_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "ALL"},
                }
            ]
        dynamodb.create_table(
            TableName=name, KeySchema=keys, AttributeDefinitions=attrs, BillingMode="PAY_PER_REQUEST", **extra
        )


@pytest.fixture
def aws(env: dict[str, str]) -> Iterator[None]:
    """moto with the application's tables and event bus."""
    with mock_aws():
        create_tables()
        boto3.client("events", region_name=REGION).create_event_bus(Name=env["EVENT_BUS_NAME"])
        yield


@dataclass
class Harness:
    """Ports with a real (moto) ledger and offerings store and fakes for everything else."""

    ports: Ports
    clock: Clock
    world: World
    events: FakeEvents
    scheduler: FakeScheduler
    tasks: FakeTasks
    slack: FakeSlack
    scaling: ScalingWorld = field(default_factory=ScalingWorld)

    @property
    def ledger(self) -> Ledger:
        return self.ports.ledger

    def activate(self, request_id: str, *, region: str = "us-east-1") -> None:
        """AWS reports the bought training plan ``co-<request_id>`` ``Active`` and the activation step records
        it (``SCHEDULED``, ``ACTIVE``): the lifecycle deploys only on an active reservation."""
        from capacity.contracts.activation import ActivationInput
        from capacity.logic.steps.activation import wait_for_activation

        self.world.client(region).set_plan_status(f"co-{request_id}", "Active")
        held = {"platform": "sagemaker", "region": region, "training_plan_name": f"co-{request_id}"}
        step = ActivationInput.model_validate({"request_id": request_id, "purchase": held})
        assert wait_for_activation(step, self.ports).status == "Active"


@pytest.fixture
def harness(aws: None) -> Harness:
    """The logic's ports for one test (clock at 2026-12-01 09:00 UTC)."""
    clock = Clock()
    world = World()
    events, scheduler, tasks, slack = FakeEvents(), FakeScheduler(), FakeTasks(), FakeSlack()
    scaling = ScalingWorld()
    settings = Settings.from_env()
    dynamodb = clients.dynamodb(REGION)
    ports = Ports(
        settings,
        ledger=Ledger("ledger", dynamodb, clock=clock),
        offerings=OfferingStore("offerings", dynamodb),
        events=events,
        scheduler=scheduler,
        tasks=tasks,
        slack=slack,
        sagemaker=world.client,
        autoscaling=scaling.autoscaling,
        alarms=scaling.alarms,
        clock=clock,
    )
    return Harness(ports, clock, world, events, scheduler, tasks, slack, scaling)
