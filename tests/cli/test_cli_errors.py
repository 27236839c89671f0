"""Bad input through the CLI: the API's field errors, each with what was most likely meant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.main import get_command

from capacity_cli.app import app
from tests.cli.conftest import Cli, request_body


def test_a_near_miss_command_is_named(cli: Cli) -> None:
    result = cli("reserv")

    assert result.exit_code == 2
    assert "No such command 'reserv'. Did you mean 'reserve'?" in result.stderr


def test_unknown_fields_get_the_field_they_resemble(cli: Cli, tmp_path: Path) -> None:
    body = request_body(regionz=["us-east-1"])
    body["models"][0]["acelerators"] = 2
    path = tmp_path / "request.json"
    path.write_text(json.dumps(body))

    result = cli("plan", "-f", str(path))

    assert result.exit_code == 2  # bad input (capacity_cli/exits.py)
    unknown = "regionz: is not a known field: remove it or fix its spelling - did you mean 'regions'?"
    assert unknown in result.stderr
    assert "did you mean 'models.0.accelerators'?" in result.stderr


def test_an_ec2_request_with_a_sagemaker_type_is_told_the_ec2_name(cli: Cli, tmp_path: Path) -> None:
    body = request_body(platform="ec2", instance_type="ml.p5.48xlarge")
    body.pop("models")
    path = tmp_path / "request.yaml"  # YAML is read too
    path.write_text(json.dumps(body))

    result = cli("plan", "-f", str(path))

    assert result.exit_code == 2
    assert "not an EC2 instance type sold as capacity blocks" in result.stderr
    assert "did you mean 'p5.48xlarge'?" in result.stderr


def test_a_misspelt_state_filter_is_corrected(cli: Cli) -> None:
    result = cli("status", "--state", "SCHEDULD")

    assert result.exit_code == 2
    assert "did you mean 'SCHEDULED'?" in result.stderr


def test_an_unknown_reservation_is_the_apis_404(cli: Cli) -> None:
    result = cli("status", "no-such-reservation")

    assert result.exit_code == 5  # not found
    assert "The API answered 404: no reservation 'no-such-reservation'" in result.stderr


@pytest.mark.parametrize("command", ["plan", "reserve", "smoke"])
def test_no_two_options_of_a_command_share_a_flag(command: str) -> None:
    # Click lets a later option silently take an earlier one's flag (reserve's --until once did).
    group = get_command(app)
    found = group.get_command(None, command)  # type: ignore[attr-defined]
    flags = [flag for param in found.params for flag in getattr(param, "opts", [])]
    assert len(flags) == len(set(flags)), sorted(f for f in flags if flags.count(f) > 1)
