"""The same scenario, run twice with the same seed, gives the same invocations at the same virtual times."""

from __future__ import annotations

import json
from typing import Any

from localcloud.faults import FaultKind, FaultRule
from tests.localcloud.runtime.rt_support import Harness, running_harness


def _scenario(h: Harness) -> list[tuple[Any, ...]]:
    """Throttled AWS calls, async retries and a Map whose iterations wake at the same instants."""
    h.faults.add(FaultRule(service="sagemaker", kind=FaultKind.THROTTLE, probability=0.5))
    h.emulator.plans["p1"] = {"TrainingPlanName": "p1", "Status": "Active", "StartTime": h.clock.now()}
    definition = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemProcessor": {
                    "ProcessorConfig": {"Mode": "INLINE"},
                    "StartAt": "Sleep",
                    "States": {
                        "Sleep": {"Type": "Wait", "Seconds": 600, "Next": "Describe"},
                        "Describe": {"Type": "Task", "Resource": h.arn("aws_caller"), "End": True},
                    },
                },
                "End": True,
            }
        },
    }
    arn = h.create_state_machine("fan-out", definition)
    items = [{"plan": "p1", "index": i} for i in range(4)]
    h.client("stepfunctions").start_execution(
        stateMachineArn=arn, name="run", input=json.dumps({"items": items})
    )
    h.lambdas.invoke("rt-flaky", b'{"failures": 2}', invocation_type="Event")
    h.clock.run_until_idle()
    return [
        (r.function, r.request_id, r.start, r.end, r.error_type, r.attempt, r.payload)
        for r in h.lambdas.records
    ]


def test_two_runs_with_the_same_seed_are_identical(aws_env: None) -> None:
    with running_harness(seed=11) as first:
        first_records = _scenario(first)
    with running_harness(seed=11) as second:
        second_records = _scenario(second)

    assert len(first_records) == 4 + 3
    assert first_records == second_records
