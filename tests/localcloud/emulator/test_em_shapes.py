"""Every emulated operation: a sample request passes botocore's parameter validation and the emulator's
response passes a strict check against the operation's output shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import time_machine
from botocore.validate import validate_parameters

from localcloud.emulator import Emulator
from localcloud.emulator.shapes import operation_model, output_shape, validate_output

# Where AWS makes a caller wait, the walk moves the virtual clock before the call.
_WAIT_BEFORE = {
    "DescribeEndpoint": timedelta(minutes=5),
    "DescribeInferenceComponent": timedelta(minutes=5),
    "InvokeEndpoint": timedelta(minutes=5),
    "DeleteInferenceComponent": timedelta(minutes=5),
    "DeleteEndpoint": timedelta(minutes=5),
    "DeleteEndpointConfig": timedelta(minutes=5),
    "DescribeCapacityBlockExtensionOfferings": timedelta(minutes=5),  # the block's payment completes
}


def test_every_operation_round_trips_through_the_botocore_model(
    emulator: Emulator, clock: time_machine.Traveller
) -> None:
    walked = []
    for service, operation in emulator.operations():
        request = emulator.sample_request(service, operation)
        model = operation_model(service, operation)
        assert model.input_shape is not None
        validate_parameters(request, model.input_shape)  # raises ParamValidationError on a bad sample
        if operation == "CreateEndpointConfig":
            plan = emulator.training_plans.get("us-east-1", "sample-plan")
            assert plan is not None
            clock.move_to(plan.offering.start + timedelta(minutes=1))
        clock.shift(_WAIT_BEFORE.get(operation, timedelta(0)))
        response = emulator.call(service, operation, request, region="us-east-1")
        problems = validate_output(response, output_shape(service, operation))
        assert problems == [], f"{service}.{operation}: {problems}"
        walked.append(operation)
    # 33 + scalable-target tags (issue 4) + Run/Describe/TerminateInstances (issue 6) + extensions (issue 17)
    assert len(walked) == 44
    assert emulator.billable_resources() == []


def test_the_output_validator_rejects_what_botocore_would_drop() -> None:
    shape = output_shape("sagemaker", "DescribeInferenceComponent")
    good = {
        "InferenceComponentName": "a",
        "InferenceComponentArn": "arn:aws:sagemaker:us-east-1:123456789012:inference-component/a",
        "EndpointName": "e",
        "EndpointArn": "arn:aws:sagemaker:us-east-1:123456789012:endpoint/e",
        "CreationTime": datetime(2026, 1, 1, tzinfo=UTC),
        "LastModifiedTime": datetime(2026, 1, 1, tzinfo=UTC),
        "InferenceComponentStatus": "InService",
        "RuntimeConfig": {"DesiredCopyCount": 1, "CurrentCopyCount": 1},
    }
    assert validate_output(good, shape) == []
    bad = {
        **good,
        "Extra": 1,
        "InferenceComponentStatus": "Running",
        "RuntimeConfig": {"DesiredCopyCount": True},
        "CreationTime": datetime(2026, 1, 1),  # naive  # noqa: DTZ001
    }
    del bad["EndpointName"]
    problems = "\n".join(validate_output(bad, shape))
    assert "$.Extra: not a member" in problems
    assert "'Running' is not one of the enum values" in problems
    assert "$.RuntimeConfig.DesiredCopyCount: expected integer, got bool" in problems
    assert "$.CreationTime: expected a tz-aware datetime" in problems
    assert "$.EndpointName: required member" in problems
