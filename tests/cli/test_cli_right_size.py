"""Right-size from the CLI (issue 33): ``plan --load`` sends the traffic as the request's ``load`` and shows
each instance count simulated on it; ``reserve --load --right-size`` asks the workflow to buy the smallest
count that serves it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capacity_cli.api import CliError
from capacity_cli.request import load_spec
from localcloud.cloud import LocalCloud
from tests.cli.conftest import REQUEST, ROOT, Cli

TRAFFIC = ROOT / "events" / "traffic_two_models.json"


def test_plan_with_the_demos_traffic_names_one_instance_enough(cli: Cli, cloud: LocalCloud) -> None:
    shown = cli("plan", "-f", str(REQUEST), "--load", str(TRAFFIC))
    assert shown.exit_code == 0, shown.output
    assert "Right-size: at most 1.0% of requests refused" in shown.output
    assert "1 x ml.p5.48xlarge serves this load with 0.07% of requests refused" in shown.output
    answer = cli("-o", "json", "plan", "-f", str(REQUEST), "--load", str(TRAFFIC), "--max-rejected", "0.01")
    assert answer.exit_code == 0, answer.output
    sizing = json.loads(answer.stdout)["right_size"]
    assert float(sizing["max_rejected_percent"]) == 0.01
    # no count refuses fewer than the cold starts' 0.07%: said plainly, with the best that exists
    assert [c["meets_target"] for c in sizing["candidates"]] == [False, False]
    assert sizing["instance_count"] is None


def test_a_load_file_without_models_is_refused_naming_the_file(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(CliError, match=r"empty\.json: a load needs `models`"):
        load_spec(str(empty), max_rejected_percent=None)
    spec = load_spec(str(TRAFFIC), max_rejected_percent=2)
    assert [m["model"] for m in spec["models"]] == ["llama-3-8b-eu", "llama-3-8b-us"]
    assert spec["max_rejected_percent"] == 2.0
    assert set(spec["models"][0]) == {"model", "requests_per_minute"}  # the replay's settings are dropped
