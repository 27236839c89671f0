"""Who sees what a listing shows: the schedules' reads follow the reservations' and the costs'.

A reviewer suspected ``GET /schedules`` (and ``/gpu schedule list``) of showing every team's schedules to
any caller while ``GET /reservations`` and ``GET /costs`` showed a caller only its teams'. They do not: no
read door of the project scopes by caller (IAM decides who may call the route at all:
``deploy/requester-policy.json``, ``deploy/approver-policy.json``; then every team's items are shown, and
``team=`` only filters). This pins that the schedules' reads scope exactly as the reservations' and the
costs' do, in both doors: a caller-scoped read introduced for one of them and not the others fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from capacity.adapters.policy_store import PolicyStore
from capacity.adapters.scheduler import RequestSchedules
from capacity.logic.api import list_reservations
from capacity.logic.schedules import create_schedule, get_schedule, list_schedules

from tests.unit.conftest import Harness
from tests.unit.test_unit_policy import ALICE, store  # noqa: F401 - fixture
from tests.unit.test_unit_schedules import definition, schedules  # noqa: F401 - fixture
from tests.unit.test_unit_steps import record

ROOT = Path(__file__).resolve().parents[2]
DOORS = (
    ROOT / "functions" / "api" / "app.py",
    ROOT / "layers" / "capacity" / "capacity" / "logic" / "slack_door.py",
)
READS = {"list_reservations", "get_reservation", "cost_report", "list_schedules", "get_schedule"}
CALLER_WORDS = {"actor", "identity", "caller", "user_id", "viewer"}


def _read_calls() -> list[tuple[str, str, bool]]:
    """``(door, read, passes a caller)`` for every call of a read function in the two doors."""
    found = []
    for path in DOORS:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in READS:
                scoped = bool(CALLER_WORDS & {k.arg for k in node.keywords if k.arg})
                found.append((path.name, name, scoped))
    return found


def test_the_schedules_reads_are_scoped_as_the_reservations_and_costs_reads_in_both_doors() -> None:
    calls = _read_calls()
    assert {(door, read) for door, read, _ in calls} >= {
        ("app.py", "list_reservations"),
        ("app.py", "cost_report"),
        ("app.py", "list_schedules"),
        ("app.py", "get_schedule"),
        ("slack_door.py", "list_reservations"),
        ("slack_door.py", "cost_report"),
        ("slack_door.py", "list_schedules"),
    }
    assert {scoped for _, _, scoped in calls} == {False}  # none by caller today: one rule for all reads


def test_the_listings_show_a_teams_schedule_and_reservation_without_asking_who_reads(
    harness: Harness,
    store: PolicyStore,  # noqa: F811 - the fixture
    schedules: RequestSchedules,  # noqa: F811 - the fixture
) -> None:
    """Team ml-eval's schedule (by ALICE) and reservation are listed by reads that take no caller: what any
    caller the IAM policy lets list sees (an approver of another team included)."""
    body = definition()
    body["request"] = body["request"] | {"team": "ml-eval", "regions": ["us-east-1"]}
    create_schedule(body, harness.ports, actor=ALICE)
    record(harness, team="ml-eval")
    listed = list_reservations(harness.ports)["reservations"]
    assert [(r["request_id"], r["team"]) for r in listed] == [("demo-1", "ml-eval")]
    assert [s["name"] for s in list_schedules(harness.ports)["schedules"]] == ["weekly-eval"]
    assert get_schedule("weekly-eval", harness.ports)["request"]["team"] == "ml-eval"
