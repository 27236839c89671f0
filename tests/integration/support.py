"""Helpers for whole-lifecycle tests on the local cloud: build requests, read the ledger and AWS state."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from capacity.record_kinds import STATE_PREFIX

from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "template.yaml"
API_EVENT = ROOT / "events/api_post_reservation.json"
START = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
REGIONS = ("us-east-1", "us-west-2", "us-east-2", "eu-west-1")


def base_request() -> dict[str, Any]:
    """The demo's request body (2 x ml.p5.48xlarge, 72 h in the week after START, two models)."""
    body: dict[str, Any] = json.loads(json.loads(API_EVENT.read_text())["body"])
    return body


REQUESTER = "arn:aws:sts::123456789012:assumed-role/MlPlatform/ml-platform"
"""The demo's caller (team ml-platform in deploy/policy-seed.json)."""
APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/head-of-ml"
"""An approver of team ml-platform (and ml-eval), never the requester."""


def api_event(
    body: dict[str, Any] | None,
    *,
    method: str = "POST",
    path: str = "/reservations",
    caller: str | None = None,
    query: dict[str, str] | None = None,
    accept: str | None = None,
) -> dict[str, Any]:
    """An API Gateway REST proxy event like the demo's, with another body, method, path, IAM caller
    (``requestContext.identity.userArn``; default the demo's), query string (a DELETE confirms by default:
    ``confirm=true``; pass ``query={}`` to ask without confirming) or ``Accept`` header. Paths with a
    parameter (``/reservations/{request_id}``, ``/admin/teams/{team}``) get their resource and
    ``pathParameters``."""
    event: dict[str, Any] = copy.deepcopy(json.loads(API_EVENT.read_text()))
    if caller is not None:
        event["requestContext"]["identity"]["userArn"] = caller
    if accept is not None:
        event["headers"]["Accept"] = accept
        event["multiValueHeaders"]["Accept"] = [accept]
    if query is None and method == "DELETE":
        query = {"confirm": "true"}  # a client that confirmed that a paid fee is not refunded
    if query is not None:
        event["queryStringParameters"] = dict(query)
        event["multiValueQueryStringParameters"] = {key: [value] for key, value in query.items()}
    resource = path
    if path.startswith("/reservations/"):
        parts = path.split("/")
        event["pathParameters"] = {"request_id": parts[2]}
        resource = "/reservations/{request_id}" + ("/approval" if path.endswith("/approval") else "")
    elif path.startswith("/admin/teams/"):
        event["pathParameters"] = {"team": path.split("/")[3]}
        resource = "/admin/teams/{team}"
    event.update(httpMethod=method, path=path, resource=resource, body=json.dumps(body) if body else None)
    event["requestContext"].update(httpMethod=method, resourcePath=resource, path="/v1" + path)
    return event


TEST_CALLER_POLICIES = {
    "deploy/requester-policy.json": [
        "arn:aws:sts::123456789012:assumed-role/*",
        "arn:aws:iam::123456789012:user/*",
    ],
    "deploy/approver-policy.json": ["arn:aws:sts::123456789012:assumed-role/*"],
    "deploy/admin-policy.json": ["arn:aws:sts::123456789012:assumed-role/PlatformAdmins/*"],
}
"""The tests' account: every role may call the requesters' and approvers' routes (the teams policy then
decides, which is what these tests check), only PlatformAdmins the admin routes. Tests of the caller
policies themselves use local_values.json's ``CallerPolicies`` (tests/integration/test_caller_iam.py)."""


def make_cloud(*, faults: FaultInjector | None = None, market: Any = None, seed: int = 7) -> LocalCloud:
    """A local cloud of the application's own template, Slack enabled, starting at START."""
    return LocalCloud(
        TEMPLATE,
        start=START,
        seed=seed,
        faults=faults,
        market=market,
        parameter_overrides={"SlackChannelId": "C0TESTS"},
        caller_policies=TEST_CALLER_POLICIES,
    )


def post_reservation(cloud: LocalCloud, body: dict[str, Any]) -> dict[str, Any]:
    """POST /reservations; returns the proxy response with ``body`` parsed."""
    response = cloud.api_request(api_event(body))
    response["json"] = json.loads(response["body"]) if response.get("body") else None
    return response


def ledger_items(cloud: LocalCloud, request_id: str) -> list[dict[str, Any]]:
    """Every ledger item of the request, in sort-key order, as plain values."""
    table = cloud.stack.physical_id("LedgerTable")
    client = cloud.client("dynamodb")
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {
        "TableName": table,
        "KeyConditionExpression": "request_id = :r",
        "ExpressionAttributeValues": {":r": {"S": request_id}},
    }
    while True:
        page = client.query(**kwargs)
        items.extend(page["Items"])
        if "LastEvaluatedKey" not in page:
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return [{key: _plain(value) for key, value in item.items()} for item in items]


def _plain(value: dict[str, Any]) -> Any:
    """A DynamoDB attribute value as plain Python: maps and lists walked, ``NULL`` as None, numbers left as
    their decimal strings (as the ledger writes money), strings, booleans and sets as they come."""
    ((kind, raw),) = value.items()
    if kind == "NULL":
        return None  # {"NULL": true}: the attribute is null, not True
    if kind == "M":
        return {k: _plain(v) for k, v in raw.items()}
    if kind == "L":
        return [_plain(v) for v in raw]
    return raw


def states(cloud: LocalCloud, request_id: str) -> list[str]:
    """The ledger's state changes of the request, in order."""
    return [item["state"] for item in ledger_items(cloud, request_id) if item["sk"].startswith(STATE_PREFIX)]


def training_plans(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Every training plan bought in any region (what money was spent on)."""
    plans: list[dict[str, Any]] = []
    for region in REGIONS:
        plans.extend(cloud.client("sagemaker", region).list_training_plans()["TrainingPlanSummaries"])
    return plans


def slack_texts(cloud: LocalCloud) -> str:
    """Every Slack message posted, as one text."""
    return "\n".join(f"{m.text}\n{json.dumps(m.blocks)}" for m in cloud.outbox.messages)


LIFECYCLE = [
    "REQUESTED",
    "PLANNED",
    "PURCHASED",
    "SCHEDULED",
    "ACTIVE",
    "DEPLOYING",
    "READY",
    "RELEASING",
    "RELEASED",
]
"""The states of a reservation served from a purchase (training plan or capacity block), in order."""


def in_order(seen: list[str], expected: list[str]) -> bool:
    """True when ``expected`` occurs in ``seen`` as a subsequence (other states may come between)."""
    position = 0
    for state in seen:
        if position < len(expected) and state == expected[position]:
            position += 1
    return position == len(expected)
