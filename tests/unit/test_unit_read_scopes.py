"""Who sees what a read shows (issue 29, point 2): one rule, :func:`capacity.logic.governance.policy.viewer`,
at every read of both doors.

A requester sees its own requests and those of the teams it is a member of; a team's approvers see that
team; administrators (the policy's ``admins``) see all. Without a policy table a caller sees its own requests
only (as only its requester may act on one). A reservation or schedule the caller may not see is a 404 (its
existence is not revealed); a ``team=`` filter naming a team it may not see is a 403. ``GET /costs`` counts
the teams the caller may see.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from capacity.adapters import clients
from capacity.adapters.policy_store import PolicyStore
from capacity.adapters.scheduler import RequestSchedules
from capacity.errors import NotPermitted, ReservationNotFound, ScheduleNotFound
from capacity.ledger import Ledger
from capacity.logic.doors.api import get_reservation, list_reservations
from capacity.logic.doors.schedules import create_schedule, get_schedule, list_schedules
from capacity.logic.governance import policy
from capacity.logic.governance.costs import cost_report
from capacity.logic.governance.policy import Viewer, viewer, visible_teams
from capacity.request import parse_request
from capacity.teams import Principals

from tests.unit.conftest import REGION, Harness
from tests.unit.handler_support import drain
from tests.unit.test_unit_api_doors import CALLER, api, event, send  # noqa: F401 - fixture
from tests.unit.test_unit_policy import ALICE, EVAL_APPROVER, OTHER_APPROVER, store  # noqa: F401 - fixture
from tests.unit.test_unit_schedules import definition, schedules  # noqa: F401 - fixture
from tests.unit.test_unit_slack_door import answer_of, command, door  # noqa: F401 - fixture
from tests.unit.test_unit_steps import bought
from tests.unit.unit_fakes import NOW, Clock, FakeTasks, request_body

ROOT = Path(__file__).resolve().parents[2]
DOORS = (
    ROOT / "functions" / "api" / "app.py",
    ROOT / "layers" / "capacity" / "capacity" / "logic" / "doors" / "slack_door.py",
)
READS = {"list_reservations", "get_reservation", "cost_report", "list_schedules", "get_schedule"}
# actions on one reservation: one who may not see it is answered 404 before anything else (its viewer)
ACTIONS = {"require_may_act", "decide_approval", "decide_extension_approval"}
ADMIN = "arn:aws:sts::123456789012:assumed-role/PlatformAdmins/ada"
STRANGER = "arn:aws:sts::123456789012:assumed-role/X/mallory"


def _read_calls(names: set[str] = READS) -> list[tuple[str, str, ast.expr | None]]:
    """``(door, function, the viewer argument)`` for every call of one of ``names`` in the two doors (the
    viewer: ``viewer=``, or ``require_may_act``'s second argument)."""
    found = []
    for path in DOORS:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in names:
                passed = next((k.value for k in node.keywords if k.arg == "viewer"), None)
                if name == "require_may_act" and len(node.args) > 1:
                    passed = node.args[1]
                found.append((path.name, name, passed))
    return found


def test_every_read_of_both_doors_passes_the_callers_viewer() -> None:
    calls = _read_calls()
    assert {(where, read) for where, read, _ in calls} >= {
        ("app.py", "list_reservations"),
        ("app.py", "get_reservation"),
        ("app.py", "cost_report"),
        ("app.py", "list_schedules"),
        ("app.py", "get_schedule"),
        ("slack_door.py", "list_reservations"),
        ("slack_door.py", "get_reservation"),
        ("slack_door.py", "cost_report"),
        ("slack_door.py", "list_schedules"),
    }
    unscoped = [(where, read) for where, read, passed in calls if passed is None]
    assert unscoped == []  # a read without viewer= would show every team's items
    built = {ast.unparse(passed) for _, _, passed in calls if passed is not None}
    assert built <= {"_viewer(ports)", "_viewer(user_id, ports, door)", "scope"}


def test_every_action_of_both_doors_on_one_reservation_passes_the_callers_viewer() -> None:
    calls = _read_calls(ACTIONS)
    assert {(where, action) for where, action, _ in calls} == {
        (where, action) for where in ("app.py", "slack_door.py") for action in ACTIONS
    }
    assert {ast.unparse(passed) for _, _, passed in calls if passed is not None} <= {
        "_viewer(ports)",
        "_viewer(user_id, ports, door)",
        "scope",
    }
    assert [(where, action) for where, action, passed in calls if passed is None] == []


# ------------------------------------------------------------------------------------------ the rule


def test_members_see_their_team_approvers_the_teams_they_approve_admins_all_strangers_none(
    harness: Harness,
    store: PolicyStore,  # noqa: F811 - the fixture
) -> None:
    assert visible_teams(ALICE, harness.ports) == {"ml-eval"}
    assert visible_teams(EVAL_APPROVER, harness.ports) == {"ml-eval"}  # approves ml-eval, not research
    assert visible_teams(OTHER_APPROVER, harness.ports) == {"research"}
    assert visible_teams(STRANGER, harness.ports) == set()
    assert visible_teams(ADMIN, harness.ports) == set()  # nobody is an admin until the policy says so
    store.put_admins(
        Principals(iam_principal_arns=["arn:aws:sts::123456789012:assumed-role/PlatformAdmins/*"]),
        actor="t",
        now=NOW,
    )
    assert visible_teams(ADMIN, harness.ports) is None
    assert policy.is_admin(ADMIN, harness.ports)
    assert not policy.is_admin(ALICE, harness.ports)


def test_without_a_policy_table_a_caller_sees_its_own_requests_only(harness: Harness) -> None:
    assert harness.ports.policy is None
    assert visible_teams(ALICE, harness.ports) == set()
    me = viewer(ALICE, harness.ports)
    assert me.sees(team="ml-eval", requester=ALICE)
    assert not me.sees(team="ml-eval", requester="someone-else")
    assert viewer("slack:U0APPROVER", harness.ports, approves_all=True).teams is None


def test_an_unseen_team_filter_is_refused_with_the_teams_the_caller_may_see() -> None:
    with pytest.raises(NotPermitted, match=r"may not see team 'research'.*you may see: ml-eval"):
        Viewer(ALICE, frozenset({"ml-eval"})).require_team("research")
    Viewer(ALICE, None).require_team("research")  # an admin
    with pytest.raises(NotPermitted, match=r"none \(only your own requests\)"):
        Viewer(ALICE, frozenset()).require_team("ml-eval")


# ----------------------------------------------------------------------------------- the logic reads


def test_reservations_schedules_and_costs_are_shown_to_whom_the_rule_lets_see(
    harness: Harness,
    store: PolicyStore,  # noqa: F811 - the fixture
    schedules: RequestSchedules,  # noqa: F811 - the fixture
) -> None:
    body = definition()
    body["request"] = body["request"] | {"team": "ml-eval", "regions": ["us-east-1"]}
    create_schedule(body, harness.ports, actor=ALICE)
    bought(harness, team="ml-eval", requester=ALICE)
    mate, approver, other = (
        viewer(who, harness.ports)
        for who in ("arn:aws:sts::123456789012:assumed-role/MlEval/bob", EVAL_APPROVER, OTHER_APPROVER)
    )
    for seeing in (mate, approver, viewer(ALICE, harness.ports), None):
        listed = list_reservations(harness.ports, viewer=seeing)["reservations"]
        assert [(r["request_id"], r["team"]) for r in listed] == [("demo-1", "ml-eval")]
        assert get_reservation("demo-1", harness.ports, viewer=seeing)["request_id"] == "demo-1"
        assert [s["name"] for s in list_schedules(harness.ports, viewer=seeing)["schedules"]] == [
            "weekly-eval"
        ]
        assert get_schedule("weekly-eval", harness.ports, viewer=seeing)["request"]["team"] == "ml-eval"
        report = cost_report(harness.ports, viewer=seeing)
        assert [row["group"] for row in report["rows"]] == ["ml-eval"]
        assert [line["request_id"] for line in report["reservations"]] == ["demo-1"]

    assert list_reservations(harness.ports, viewer=other)["reservations"] == []
    assert list_reservations(harness.ports, viewer=other, team="research")["reservations"] == []
    with pytest.raises(ReservationNotFound, match="no reservation 'demo-1'"):  # 404, as if it did not exist
        get_reservation("demo-1", harness.ports, viewer=other)
    with pytest.raises(NotPermitted, match="may not see team 'ml-eval'"):
        list_reservations(harness.ports, viewer=other, team="ml-eval")
    assert list_schedules(harness.ports, viewer=other)["schedules"] == []
    with pytest.raises(ScheduleNotFound, match="no schedule 'weekly-eval'"):
        get_schedule("weekly-eval", harness.ports, viewer=other)
    hidden = cost_report(harness.ports, viewer=other)
    assert (hidden["rows"], hidden["reservations"], hidden["totals"]["paid_usd"]) == ([], [], "0.00")
    with pytest.raises(NotPermitted, match="may not see team 'ml-eval'"):
        cost_report(harness.ports, viewer=other, team="ml-eval")


# ------------------------------------------------------------------------------------------ the doors


def test_the_api_shows_a_caller_without_a_policy_table_its_own_reservations_only(
    api: tuple[Any, str, FakeTasks],  # noqa: F811 - the fixture
) -> None:
    handler, _, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(request_id="mine", requester=CALLER), now=None), actor="t"
    )
    ledger.record_request(
        parse_request(request_body(request_id="theirs", requester=ALICE), now=None), actor="t"
    )
    status, body = send(handler, event("GET", "/reservations"))
    assert (status, [r["request_id"] for r in body["reservations"]]) == (200, ["mine"])
    params = {"request_id": "theirs"}
    status, body = send(
        handler, event("GET", "/reservations/theirs", resource="/reservations/{request_id}", params=params)
    )
    assert (status, body["message"]) == (404, "no reservation 'theirs'")
    status, body = send(handler, event("GET", "/costs", query={"team": "ml-eval"}))
    assert status == 403
    assert "may not see team 'ml-eval'" in body["message"]
    status, body = send(handler, event("GET", "/costs"))
    assert (status, body["rows"]) == (200, [])


def test_every_api_action_answers_a_caller_who_may_not_see_the_reservation_as_if_it_did_not_exist(
    api: tuple[Any, str, FakeTasks],  # noqa: F811 - the fixture
) -> None:
    """A stranger's cancel, approval, extension, extension approval and PATCH get the 404 an unknown id gets,
    word for word (a 403 or 409 would say it exists, and in what state), and change nothing."""
    handler, tap, _ = api
    ledger = Ledger("ledger", clients.dynamodb(REGION), clock=Clock())
    ledger.record_request(
        parse_request(request_body(request_id="theirs", requester=ALICE), now=None), actor="t"
    )
    before = ledger.items("theirs")
    actions = (
        ("DELETE", "", None),
        ("POST", "/approval", {"approved": True}),
        ("POST", "/extensions", {"duration_hours": 24}),
        ("POST", "/extensions/ext-1/approval", {"approved": True}),
        ("PATCH", "", {"serve_until": "2027-01-10T00:00:00Z"}),
    )
    for method, tail, body in actions:
        answers = []
        for request_id in ("theirs", "nobody"):
            params = {"request_id": request_id} | ({"extension_id": "ext-1"} if "ext-1" in tail else {})
            resource = "/reservations/{request_id}" + tail.replace("ext-1", "{extension_id}")
            status, answer = send(
                handler,
                event(method, f"/reservations/{request_id}{tail}", body, resource=resource, params=params),
            )
            answers.append((status, answer.get("message", "").replace(request_id, "<id>")))
        assert answers[0] == answers[1] == (404, "no reservation '<id>'"), (method, tail, answers)
    assert ledger.items("theirs") == before  # nothing recorded, not even a refusal
    assert drain(tap) == []


def test_slack_status_shows_a_user_its_own_reservations_and_the_deployments_approvers_all(
    harness: Harness,
    door: Any,  # noqa: F811 - the fixture
) -> None:
    mine = parse_request(request_body(request_id="slack-1", requester="slack:U0REQUESTER"), now=None)
    harness.ledger.record_request(mine, actor="t")
    assert (
        answer_of(command(harness, door, "status slack-1", user="U0STRANGER"))[1]
        == "no reservation 'slack-1'"
    )
    assert answer_of(command(harness, door, "status", user="U0STRANGER"))[1].startswith(
        "No reservations yet."
    )
    assert "`slack-1`" in answer_of(command(harness, door, "status", user="U0REQUESTER"))[1]
    assert "`slack-1`" in answer_of(command(harness, door, "status", user="U0APPROVER"))[1]
    refused = answer_of(command(harness, door, "costs team=ml-eval", user="U0STRANGER"))[1]
    assert "may not see team 'ml-eval'" in refused
