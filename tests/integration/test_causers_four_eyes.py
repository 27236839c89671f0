"""Whoever causes spend is its requester for four-eyes (issue 28, point 4): an approver who PATCHes
``serve_until`` causes the extension or the successor that follows, and so may not approve it; another
approver of the team may."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from capacity.record_kinds import EXTENSION_APPROVAL

from localcloud.cloud import LocalCloud
from tests.integration.support import (
    APPROVER,
    api_event,
    make_cloud,
    post_reservation,
    states,
    training_plans,
)
from tests.integration.test_extension_approval import approve, lower_team_threshold
from tests.integration.test_rollover import (
    DUE,
    NEXT,
    RID,
    ROOMY,
    SERVE_UNTIL,
    api,
    items,
    request,
    succeeded,
)

pytestmark = pytest.mark.integration

SECOND_APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/second-approver"
"""Another approver of team ml-platform (deploy/policy-seed.json: Approvers/*)."""


def _patched_by_an_approver(cloud: LocalCloud) -> str:
    """READY without serve_until; APPROVER asks for two more days (PATCH); the team needs an approval above
    $10, so the automatic extension at the lead time is asked of an approver: its id."""
    assert post_reservation(cloud, request())["statusCode"] == 202
    cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
    patched = api(cloud, "PATCH", {"serve_until": SERVE_UNTIL}, caller=APPROVER)
    assert patched["statusCode"] == 200, patched
    lower_team_threshold(cloud, Decimal(10))
    cloud.run(until=DUE + timedelta(minutes=5))
    (asked,) = items(cloud, RID, f"{EXTENSION_APPROVAL}#")
    return str(asked["sk"]).split("#", 1)[1]


def test_the_approver_who_patched_serve_until_cannot_approve_the_extension_it_led_to() -> None:
    with make_cloud(market=ROOMY) as cloud:
        extension_id = _patched_by_an_approver(cloud)
        refused = approve(cloud, extension_id, caller=APPROVER)
        assert refused["statusCode"] == 403, refused
        assert "changed serve_until of eval-week-49" in refused["json"]["message"]
        assert "four-eyes" in refused["json"]["message"]
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        approved = approve(cloud, extension_id, caller=SECOND_APPROVER)
        assert approved["statusCode"] == 200, approved
        cloud.run(until=DUE + timedelta(hours=1))
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1


def test_the_approver_who_patched_serve_until_cannot_approve_the_successor_it_led_to() -> None:
    with make_cloud(market=ROOMY) as cloud:
        _patched_by_an_approver(cloud)
        # Nobody decides the extension: the roll-over requests the successor, asked of an approver too.
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, NEXT))
        path = f"/reservations/{NEXT}/approval"
        refused = cloud.api_request(api_event({"approved": True}, path=path, caller=APPROVER))
        assert refused["statusCode"] == 403, refused
        assert "changed serve_until of eval-week-49" in refused["body"]
        assert states(cloud, NEXT)[-1] == "AWAITING_APPROVAL"
        approved = cloud.api_request(api_event({"approved": True}, path=path, caller=SECOND_APPROVER))
        assert approved["statusCode"] == 200, approved
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, NEXT))
        assert len(training_plans(cloud)) == 2
