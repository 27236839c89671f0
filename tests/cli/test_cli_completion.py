"""Shell completion of values: what the shell gets for ``capacity ... <TAB>`` (Click's bash protocol:
``_CAPACITY_COMPLETE=complete_bash`` with ``COMP_WORDS``/``COMP_CWORD``, what ``--install-completion``
sets up), from the product's own tables and the API's listing, never failing the shell."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from typer.testing import CliRunner

from capacity_cli.app import app
from capacity_cli.complete import CATALOG
from tests.cli.conftest import ENV, REQUEST, Cli

ROOT = Path(__file__).resolve().parents[2]


def complete(words: str) -> list[str]:
    """The values the shell offers after ``words`` (the last word is what is typed so far)."""
    parts = words.split(" ")
    env = ENV | {"_CAPACITY_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(parts) - 1)
    result = CliRunner().invoke(app, [], env=env, prog_name="capacity", catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line]


def test_the_catalog_is_the_layers_own_tables() -> None:
    spec = importlib.util.spec_from_file_location("export_catalog", ROOT / "scripts" / "export_catalog.py")
    assert spec is not None
    assert spec.loader is not None
    exporter = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(exporter)

    assert CATALOG.read_text(encoding="utf-8") == exporter.generate(), "run make catalog"
    assert "ml.p5.48xlarge" in json.loads(CATALOG.read_text())["instance_types"]["sagemaker"]


def test_instance_types_by_platform() -> None:
    assert complete("capacity plan --type ml.p5") == [
        "ml.p5.48xlarge",
        "ml.p5.4xlarge",
        "ml.p5e.48xlarge",
        "ml.p5en.48xlarge",
    ]
    assert complete("capacity plan --platform ec2 --type p5e") == ["p5e.48xlarge", "p5en.48xlarge"]


def test_the_last_region_of_a_list_and_states() -> None:
    offered = complete("capacity plan --regions us-east-1,us-w")
    assert offered == ["us-east-1,us-west-1", "us-east-1,us-west-2"]
    assert complete("capacity --region eu-c") == ["eu-central-1"]
    assert complete("capacity list --status AWA") == ["AWAITING_APPROVAL"]


def test_request_ids_come_from_the_apis_listing(cli: Cli, endpoint: str) -> None:
    reserved = cli(
        "reserve", "-f", str(REQUEST), "--from", "+2d", "--until", "+7d", "--id", "cli-complete-me", "--yes",
        "--no-watch",
    )  # fmt: skip
    assert reserved.exit_code == 0, reserved.stderr

    assert complete(f"capacity --endpoint {endpoint} status cli-complete") == ["cli-complete-me"]
    assert complete(f"capacity --endpoint {endpoint} approve cli-complete-m") == ["cli-complete-me"]


def test_a_target_that_does_not_answer_completes_nothing_and_never_fails() -> None:
    assert complete("capacity --endpoint http://127.0.0.1:9 watch ") == []
    assert complete("capacity --local cancel ") == []  # a fresh embedded cloud holds nothing: none started
