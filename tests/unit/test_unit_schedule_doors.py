"""A recurring reservation is its team's: an approver of another team cannot delete it (schedules x teams).

Found by attacking the schedules' doors: ``DELETE /schedules/{name}`` (approver-policy.json) and
``/gpu schedule delete`` (the Slack door's approvers) deleted any schedule, whoever owned it and whichever
team it charges: an approver of team research could stop team ml-eval's weekly evaluation day.
"""

from __future__ import annotations

import pytest
from capacity.adapters.policy_store import PolicyStore
from capacity.adapters.scheduler import RequestSchedules
from capacity.errors import NotPermitted
from capacity.logic.doors.schedules import create_schedule, delete_schedule, get_schedule

from tests.unit.conftest import Harness
from tests.unit.test_unit_policy import ALICE, EVAL_APPROVER, OTHER_APPROVER, store  # noqa: F401 - fixture
from tests.unit.test_unit_schedules import definition, schedules  # noqa: F401 - fixture


def _eval_schedule(harness: Harness) -> None:
    body = definition()
    body["request"] = body["request"] | {"team": "ml-eval", "regions": ["us-east-1"]}
    create_schedule(body, harness.ports, actor=ALICE)


def test_an_approver_of_another_team_cannot_delete_a_teams_schedule(
    harness: Harness,
    store: PolicyStore,  # noqa: F811 - the fixture
    schedules: RequestSchedules,  # noqa: F811 - the fixture
) -> None:
    _eval_schedule(harness)
    with pytest.raises(NotPermitted, match="weekly-eval"):
        delete_schedule("weekly-eval", harness.ports, actor=OTHER_APPROVER)
    assert get_schedule("weekly-eval", harness.ports)["name"] == "weekly-eval"  # still there
    assert delete_schedule("weekly-eval", harness.ports, actor=EVAL_APPROVER)["deleted"] is True


def test_its_owner_may_delete_a_schedule(
    harness: Harness,
    store: PolicyStore,  # noqa: F811 - the fixture
    schedules: RequestSchedules,  # noqa: F811 - the fixture
) -> None:
    _eval_schedule(harness)
    assert delete_schedule("weekly-eval", harness.ports, actor=ALICE)["deleted"] is True
