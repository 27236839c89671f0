"""Shared pieces of the runtime tests: hand-built functions, a fake emulator, the wired harness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from moto import mock_aws

from localcloud import patches
from localcloud.clock import VirtualClock
from localcloud.contracts import AwsError
from localcloud.dispatch import Dispatcher
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.lambdas import FunctionSpec, LambdaRuntime
from localcloud.slack import Outbox

FIXTURES = Path(__file__).parent / "fixtures"
ACCOUNT = "123456789012"
REGION = "us-east-1"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/states-role"
MOTO_CONFIG: Any = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
FUNCTION_NAMES = (
    "hello",
    "returns_datetime",
    "flaky",
    "context_echo",
    "aws_caller",
    "printer",
    "chain",
    "exits",
    "stubborn",
    "probe",
    "secret_reader",
)
SECRET_ID = "rt-secret"
"""The secret both ``secret_reader`` functions read (created by the tests that use it)."""


def function_spec(
    name: str,
    *,
    timeout_seconds: int = 30,
    environment: dict[str, str] | None = None,
    code: str | None = None,
) -> FunctionSpec:
    """A hand-built FunctionSpec for a fixture function (what the template loader would produce).

    ``code`` names the fixture directory when it differs from ``name`` (a second function on the same code).
    """
    physical = f"rt-{name}"
    default_env = {"STAGE": f"stage-of-{name}", "SECRET_ID": SECRET_ID}
    return FunctionSpec(
        logical_id=name.title().replace("_", "") + "Function",
        name=physical,
        arn=f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{physical}",
        code_dir=FIXTURES / "functions" / (code or name),
        handler="app.lambda_handler",
        environment=default_env if environment is None else environment,
        timeout_seconds=timeout_seconds,
        memory_mb=256,
        layer_dirs=(FIXTURES / "layer",),
        runtime="python3.13",
    )


@dataclass
class FakeEmulator:
    """A stand-in for localcloud.emulator.Emulator: a few SageMaker/EC2 operations with fixed answers."""

    clock: VirtualClock
    calls: list[tuple[str, str, dict[str, Any], str, list[FaultKind]]] = field(default_factory=list)
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)

    OPERATIONS = frozenset(
        {
            ("sagemaker", "CreateTrainingPlan"),
            ("sagemaker", "DescribeTrainingPlan"),
            ("ec2", "DescribeCapacityBlockOfferings"),
            ("sagemaker-runtime", "InvokeEndpoint"),
        }
    )

    def handles(self, service: str, operation: str) -> bool:
        return (service, operation) in self.OPERATIONS

    def call(
        self, service: str, operation: str, params: dict[str, Any], *, region: str, faults: list[FaultRule]
    ) -> dict[str, Any]:
        self.calls.append((service, operation, params, region, [rule.kind for rule in faults]))
        if operation == "CreateTrainingPlan":
            name = params["TrainingPlanName"]
            if name in self.plans:
                raise AwsError("ResourceInUse", f"Training plan {name} already exists.")
            arn = f"arn:aws:sagemaker:{region}:{ACCOUNT}:training-plan/{name}"
            self.plans[name] = {
                "TrainingPlanArn": arn,
                "TrainingPlanName": name,
                "Status": "Pending",
                "StartTime": datetime(2026, 3, 9, 11, 30, tzinfo=UTC),
                "UpfrontFee": "1234.56",
                "CurrencyCode": "USD",
                "TargetResources": ["endpoint"],
            }
            return {"TrainingPlanArn": arn}
        if operation == "DescribeTrainingPlan":
            plan = self.plans.get(params["TrainingPlanName"])
            if plan is None:
                raise AwsError("ResourceNotFound", f"Training plan {params['TrainingPlanName']} not found.")
            return {**plan, "NotInTheOutputShape": "dropped by botocore"}
        if operation == "DescribeCapacityBlockOfferings":
            return {
                "CapacityBlockOfferings": [
                    {
                        "CapacityBlockOfferingId": "cbo-0123456789abcdef0",
                        "InstanceType": params["InstanceType"],
                        "InstanceCount": params["InstanceCount"],
                        "StartDate": datetime(2026, 3, 9, 11, 30, tzinfo=UTC),
                        "EndDate": datetime(2026, 3, 10, 11, 30, tzinfo=UTC),
                        "CapacityBlockDurationHours": params["CapacityDurationHours"],
                        "UpfrontFee": "830.59",
                        "CurrencyCode": "USD",
                    }
                ]
            }
        if operation == "InvokeEndpoint":
            return {"Body": b'{"generated_text": "hi"}', "ContentType": "application/json"}
        raise AssertionError(f"unexpected {service}.{operation}")


@dataclass
class Harness:
    """A started mock + clock + Lambda runtime + dispatcher (the pieces LocalCloud wires together)."""

    clock: VirtualClock
    lambdas: LambdaRuntime
    dispatcher: Dispatcher
    emulator: FakeEmulator
    faults: FaultInjector
    outbox: Outbox

    def client(self, service: str, **config: Any) -> Any:
        """A boto3 client into the cloud (standard retry mode unless told otherwise)."""
        retries = config.pop("retries", {"mode": "standard", "max_attempts": 3})
        region = config.pop("region", REGION)
        make_client: Any = boto3.client
        return make_client(service, region_name=region, config=Config(retries=retries, **config))

    def arn(self, name: str) -> str:
        return function_spec(name).arn

    def create_state_machine(self, name: str, definition: dict[str, Any]) -> str:
        sfn = self.client("stepfunctions")
        arn: str = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=ROLE_ARN)[
            "stateMachineArn"
        ]
        return arn

    def history(self, execution_arn: str) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.client("stepfunctions").get_execution_history(
            executionArn=execution_arn, maxResults=1000
        )["events"]
        return events


@contextmanager
def running_harness(*, seed: int = 7) -> Iterator[Harness]:
    """Start moto, the clock, the runtime and the patches (what LocalCloud does, minus the template)."""
    clock = VirtualClock(START)
    base_env = dict.fromkeys(("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"), "testing")
    specs = [function_spec(name) for name in FUNCTION_NAMES]
    specs += [function_spec("probe_b", code="probe"), function_spec("secret_reader_b", code="secret_reader")]
    lambdas = LambdaRuntime(specs, clock, base_env, seed=seed)
    emulator = FakeEmulator(clock)
    faults = FaultInjector(seed=seed)
    dispatcher = Dispatcher(clock=clock, lambdas=lambdas, emulator=emulator, faults=faults)
    outbox = Outbox()
    mock = mock_aws(config=MOTO_CONFIG)
    mock.start()
    clock.start()
    patches.install(clock, dispatcher, outbox=outbox, seed=seed)
    try:
        yield Harness(clock, lambdas, dispatcher, emulator, faults, outbox)
    finally:
        patches.uninstall()
        clock.stop()
        lambdas.close()
        mock.stop()
