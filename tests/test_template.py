"""Checks of template.yaml and the state machines that cfn-lint and SAM cannot make."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
LAMBDA_ERRORS = {
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
}


class _Loader(yaml.SafeLoader):
    """A YAML loader that keeps CloudFormation short-form tags (!Ref, !GetAtt, !Sub) as plain values."""


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return {suffix: loader.construct_scalar(node)}
    if isinstance(node, yaml.SequenceNode):
        return {suffix: loader.construct_sequence(node)}
    return {suffix: loader.construct_mapping(node)}  # type: ignore[arg-type]


_Loader.add_multi_constructor("!", _construct_tag)  # type: ignore[no-untyped-call]


def _template() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.load((ROOT / "template.yaml").read_text(), Loader=_Loader)  # noqa: S506
    return loaded


def _state_machines() -> list[tuple[str, dict[str, Any]]]:
    resources = _template()["Resources"]
    return [
        (logical_id, resource["Properties"])
        for logical_id, resource in resources.items()
        if resource["Type"] == "AWS::Serverless::StateMachine"
    ]


def _all_states(states: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for name, state in states.items():
        found.append((name, state))
        processor = state.get("ItemProcessor") or state.get("Iterator")
        if processor:
            found.extend(_all_states(processor["States"]))
    return found


@pytest.mark.parametrize(("logical_id", "props"), _state_machines())
def test_every_definition_substitution_is_defined_and_used(logical_id: str, props: dict[str, Any]) -> None:
    definition = (ROOT / props["DefinitionUri"]).read_text()
    used = set(re.findall(r"\$\{(\w+)\}", definition))
    defined = set(props["DefinitionSubstitutions"])
    assert used == defined, f"{logical_id}: used {sorted(used)} but defined {sorted(defined)}"


@pytest.mark.parametrize(("logical_id", "props"), _state_machines())
def test_every_task_retries_lambda_errors_and_catches_the_rest(
    logical_id: str, props: dict[str, Any]
) -> None:
    definition = json.loads((ROOT / props["DefinitionUri"]).read_text())
    tasks = [(name, s) for name, s in _all_states(definition["States"]) if s["Type"] == "Task"]
    assert tasks, f"{logical_id} has no Task state"
    for name, state in tasks:
        retried = {error for rule in state.get("Retry", []) for error in rule["ErrorEquals"]}
        # A Lambda task retries Lambda's transient errors; another service's task (the continue-as-new
        # StartExecution) retries its own: both retry something.
        lambda_task = "lambda" in state["Resource"] or state["Resource"].endswith("FunctionArn}")
        if lambda_task:
            assert retried >= LAMBDA_ERRORS, f"{logical_id}.{name} does not retry {LAMBDA_ERRORS - retried}"
        else:
            assert retried & {"States.TaskFailed", "States.ALL"}, f"{logical_id}.{name} retries no fault"
        # Map item tasks are caught by their Map state; every other task needs its own Catch.
        in_map = name == "SearchRegion"
        if not in_map:
            caught = [error for rule in state.get("Catch", []) for error in rule["ErrorEquals"]]
            assert caught[-1:] == ["States.ALL"], f"{logical_id}.{name}: no final States.ALL Catch"


def test_every_function_code_uri_has_a_handler_module() -> None:
    resources = _template()["Resources"]
    functions = {k: v for k, v in resources.items() if v["Type"] == "AWS::Serverless::Function"}
    assert len(functions) >= 9
    for logical_id, resource in functions.items():
        props = resource["Properties"]
        module, _, attribute = props["Handler"].partition(".")
        source = ROOT / props["CodeUri"] / f"{module}.py"
        assert source.is_file(), f"{logical_id}: {source} is missing"
        assert f"def {attribute}(" in source.read_text(), f"{logical_id}: {attribute} not defined in {source}"


def test_layer_requirements_pin_the_same_versions_as_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    layer_lines = (ROOT / "layers/capacity/requirements.txt").read_text().split("\n")
    layer = {line.strip() for line in layer_lines if line.strip() and not line.startswith("#")}
    assert layer == set(project)


def test_wait_for_start_uses_a_timestamp_not_a_polling_loop() -> None:
    definition = json.loads((ROOT / "statemachines/reserve_capacity.asl.json").read_text())
    wait = definition["States"]["WaitForStart"]
    assert wait == {**wait, "Type": "Wait", "TimestampPath": "$.purchase.start_time"}


def test_failure_alarms_notify_the_operations_topic() -> None:
    template = _template()
    resources = template["Resources"]
    assert resources["OperationsTopic"]["Type"] == "AWS::SNS::Topic"
    subscription = resources["OperationsEmailSubscription"]
    assert subscription["Condition"] == "HasOperationsEmail"
    assert subscription["Properties"]["Endpoint"] == {"Ref": "OperationsEmail"}
    assert template["Parameters"]["OperationsEmail"]["Default"] == ""
    for alarm in ("ReserveFailuresAlarm", "ReleaseFailuresAlarm"):
        properties = resources[alarm]["Properties"]
        assert properties["AlarmActions"] == [{"Ref": "OperationsTopic"}], alarm
        assert properties["OKActions"] == [{"Ref": "OperationsTopic"}], alarm
    assert template["Outputs"]["OperationsTopicArn"]["Value"] == {"Ref": "OperationsTopic"}


def test_samconfig_lists_every_template_parameter_at_its_default() -> None:
    # docs/deploy.md: samconfig.toml's parameter_overrides are guided mode's defaults; a parameter missing
    # there is never asked for, and an empty value must be quoted ("") or SAM CLI refuses the file.
    overrides = tomllib.loads((ROOT / "samconfig.toml").read_text())["default"]["deploy"]["parameters"][
        "parameter_overrides"
    ]
    pairs = dict(item.split("=", 1) for item in overrides)
    parameters = _template()["Parameters"]
    assert sorted(pairs) == sorted(parameters)
    for name, value in pairs.items():
        assert value != "", f'{name}: write an empty value as {name}=""'
        assert value.strip('"') == str(parameters[name].get("Default", "")), name
