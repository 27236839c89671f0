"""Every door is closed to those who should not open it (issue 13, defect 12): anyone in the account may call
``PutEvents`` on a bus without a resource policy and write any ``source``, so a forged ``ReleaseRequested``
would release a paid reservation and a forged ``ReservationRequested`` would buy one with no API call and no
approval. The bus policy refuses ``capacity.orchestrator`` events from every principal but the application's
own roles, and the refusal is on record (the local cloud's IAM denials, CloudTrail on AWS)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from localcloud.cloud import LocalCloud
from localcloud.iam import Principal, acting_as
from tests.integration.support import base_request, make_cloud, post_reservation, states, training_plans

pytestmark = pytest.mark.integration

DEVELOPER = "arn:aws:iam::123456789012:role/developer"
"""Another principal of the account, allowed PutEvents on every bus by its own identity policy."""


def _as_developer(cloud: LocalCloud) -> Principal:
    assert cloud.iam is not None
    cloud.iam.add_role_policy(
        DEVELOPER,
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "events:*", "Resource": "*"}]},
    )
    return Principal(DEVELOPER, "mallory", "user")


def _entry(
    cloud: LocalCloud, detail_type: str, detail: dict[str, Any], source: str = "capacity.orchestrator"
) -> Any:
    return {
        "Source": source,
        "DetailType": detail_type,
        "Detail": json.dumps(detail),
        "EventBusName": cloud.stack.physical_id("EventBus"),
    }


def test_a_forged_release_requested_is_refused_and_the_paid_reservation_keeps_serving() -> None:
    with make_cloud() as cloud:
        post_reservation(cloud, base_request())
        cloud.run(stop_when=lambda: "READY" in states(cloud, "eval-week-49"))
        developer = _as_developer(cloud)

        with acting_as(developer), pytest.raises(ClientError) as refused:
            cloud.client("events").put_events(
                Entries=[
                    _entry(cloud, "ReleaseRequested", {"request_id": "eval-week-49", "reason": "cancelled"})
                ]
            )
        cloud.run(until=cloud.now().replace(hour=23))

        assert refused.value.response["Error"]["Code"] == "AccessDeniedException"
        assert "explicit deny in a resource-based policy" in refused.value.response["Error"]["Message"]
        assert cloud.iam is not None
        assert [(d.principal.split("/")[-2], d.action) for d in cloud.iam.denials] == [
            ("developer", "events:PutEvents")
        ]
        assert "RELEASING" not in states(cloud, "eval-week-49")  # still serving
        assert cloud.billable_resources() != []


def test_a_forged_reservation_requested_buys_nothing() -> None:
    with make_cloud() as cloud:
        developer = _as_developer(cloud)
        request = {**base_request(), "request_id": "forged-1"}
        with acting_as(developer), pytest.raises(ClientError):
            cloud.client("events").put_events(
                Entries=[_entry(cloud, "ReservationRequested", {"schema_version": 1, "request": request})]
            )
        cloud.run_until_idle()

        assert training_plans(cloud) == []
        assert cloud.executions() == []


def test_other_sources_on_the_bus_stay_open_to_the_account_and_the_application_still_puts_its_own() -> None:
    with make_cloud() as cloud:
        developer = _as_developer(cloud)
        with acting_as(developer):
            answer = cloud.client("events").put_events(
                Entries=[_entry(cloud, "Note", {"text": "hello"}, source="team.analytics")]
            )
        assert answer["FailedEntryCount"] == 0
        # The application's own doors put capacity.orchestrator events as before: the lifecycle runs
        assert post_reservation(cloud, base_request())["statusCode"] == 202
        cloud.run_until_idle()
        assert "RELEASED" in states(cloud, "eval-week-49")
