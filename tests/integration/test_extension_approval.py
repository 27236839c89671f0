"""Extensions above the approval threshold (issue 17): asked for, decided by an approver of the team (never a
requester), bought once after the approval, refused without one (a forged event), nothing bought when
rejected."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from capacity.record_kinds import APPROVAL_REFUSED, EXTENSION, EXTENSION_INTENT, EXTENSION_OUTCOME

from localcloud.cloud import LocalCloud
from tests.integration.support import (
    APPROVER,
    REQUESTER,
    api_event,
    ledger_items,
    make_cloud,
    slack_texts,
)
from tests.integration.test_extensions import (
    RID,
    ROOMY,
    extended,
    extensions,
    put_extension_requested,
    ready,
    succeeded,
)

pytestmark = pytest.mark.integration


def approve(
    cloud: LocalCloud, extension_id: str, *, approved: bool = True, caller: str = APPROVER
) -> dict[str, Any]:
    """``POST /reservations/{id}/extensions/{extension_id}/approval`` as ``caller``."""
    path = f"/reservations/{RID}/extensions/{extension_id}/approval"
    event = api_event({"approved": approved, "reason": "the launch week"}, path=path, caller=caller)
    event["resource"] = "/reservations/{request_id}/extensions/{extension_id}/approval"
    event["requestContext"]["resourcePath"] = event["resource"]
    event["pathParameters"] = {"request_id": RID, "extension_id": extension_id}
    response = cloud.api_request(event)
    response["json"] = json.loads(response["body"]) if response.get("body") else None
    return response


def lower_team_threshold(cloud: LocalCloud, usd: Decimal) -> None:
    """The team ml-platform now needs an approval above ``usd`` (the request's own threshold is higher)."""
    from capacity.adapters.policy_store import PolicyStore

    store = PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb"))
    team = store.team("ml-platform")
    assert team is not None
    lowered = {**team.model_dump(), "approval_above_usd": usd}
    store.put_team(type(team).model_validate(lowered), actor="test", now=cloud.now())


def asked_for_approval(cloud: LocalCloud) -> dict[str, Any]:
    """READY, the team's threshold below a day's fee, the dry run and the request: the offer asked about."""
    ready(cloud)
    lower_team_threshold(cloud, Decimal(10))
    dry = extensions(cloud, {"duration_hours": 24})
    (offer,) = dry["json"]["offerings"]
    assert (offer["allowed"], offer["approval_required"], offer["problem"]) == (True, True, None)
    asked = extensions(cloud, {"duration_hours": 24, "offering_id": offer["offering_id"]})
    assert asked["statusCode"] == 202, asked
    assert asked["json"]["status"] == "APPROVAL_REQUIRED"
    assert f"/extensions/{offer['offering_id']}/approval" in asked["json"]["approval"]
    return dict(offer)


def test_an_extension_above_the_threshold_is_bought_once_only_after_an_approver_approves() -> None:
    with make_cloud(market=ROOMY) as cloud:
        offer = asked_for_approval(cloud)
        extension_id = offer["offering_id"]
        cloud.run(until=cloud.now() + timedelta(seconds=600))
        assert succeeded(cloud, "ExtendTrainingPlan") == []  # nothing is bought while it waits
        assert f"Approval needed to extend {RID}" in slack_texts(cloud)

        own = approve(cloud, extension_id, caller=REQUESTER)
        assert own["statusCode"] == 403, own
        assert "four-eyes" in own["json"]["message"]
        refused = [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{APPROVAL_REFUSED}#")]
        assert [(i["identity"], i["extension_id"]) for i in refused] == [(REQUESTER, extension_id)]

        decided = approve(cloud, extension_id)
        assert decided["statusCode"] == 200, decided
        assert (decided["json"]["status"], decided["json"]["approver"]) == ("APPROVED", APPROVER)
        again = approve(cloud, extension_id)  # a second press: the same decision, still one purchase
        assert again["statusCode"] == 200, again
        cloud.run(stop_when=lambda: bool(extended(cloud)))
        (entry,) = extended(cloud)
        assert Decimal(entry["money_usd"]) == Decimal(offer["upfront_fee_usd"])
        cloud.run(until=cloud.now() + timedelta(seconds=3600))
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        assert len(extended(cloud)) == 1


def test_an_extension_event_above_the_threshold_without_an_approval_buys_nothing() -> None:
    with make_cloud(market=ROOMY) as cloud:
        offer = asked_for_approval(cloud)
        put_extension_requested(cloud, offer)
        cloud.run(stop_when=lambda: f"Extension of {RID} FAILED" in slack_texts(cloud))
        assert "ExtensionApprovalRequired" in slack_texts(cloud)
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        assert not [
            i
            for i in ledger_items(cloud, RID)
            if i["sk"].startswith((f"{EXTENSION_INTENT}#", f"{EXTENSION}#"))
        ]


def test_a_rejected_extension_buys_nothing_and_cannot_be_asked_again() -> None:
    with make_cloud(market=ROOMY) as cloud:
        offer = asked_for_approval(cloud)
        extension_id = offer["offering_id"]
        rejected = approve(cloud, extension_id, approved=False)
        assert rejected["statusCode"] == 200, rejected
        assert rejected["json"]["status"] == "REJECTED"
        late = approve(cloud, extension_id, approved=True)  # the first decision stands
        assert late["statusCode"] == 409, late
        assert "already rejected" in late["json"]["message"]
        asked = extensions(cloud, {"duration_hours": 24, "offering_id": extension_id})
        assert asked["statusCode"] == 409, asked
        assert "was rejected by" in asked["json"]["message"]
        cloud.run(until=cloud.now() + timedelta(seconds=3600))
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        (outcome,) = [i for i in ledger_items(cloud, RID) if i["sk"].startswith(f"{EXTENSION_OUTCOME}#")]
        assert outcome["outcome"] == "rejected"


def test_an_approval_nobody_asked_for_is_refused() -> None:
    with make_cloud(market=ROOMY) as cloud:
        ready(cloud)
        answer = approve(cloud, "no-such-offering")
        assert answer["statusCode"] == 409, answer
        assert "waits for approval" in answer["json"]["message"]


def test_an_extension_waiting_for_approval_reaches_the_operations_topic_as_a_readable_notice() -> None:
    from tests.integration.test_operations_notices import _inbox, _subscribe

    with make_cloud(market=ROOMY) as cloud:
        _, queue = _subscribe(cloud)
        offer = asked_for_approval(cloud)
        cloud.run(until=cloud.now() + timedelta(seconds=60))
        notices = [text for text in _inbox(cloud, queue) if "asks to extend" in text]
    (notice,) = notices
    assert f"asks to extend reservation {RID} to {offer['end_time']}" in notice
    assert f"USD {offer['upfront_fee_usd']} upfront" in notice
    assert f"POST /reservations/{RID}/extensions/{offer['offering_id']}/approval" in notice
    assert "approved is true or false" in notice
    assert "\\" not in notice  # a readable sentence, no JSON escapes
