"""The local HTTP API: HTTP requests become API Gateway REST proxy events (loopback only)."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from localcloud.cloud import LocalCloud
from localcloud.http_api import LocalApiServer, build_event
from localcloud.template import ApiRoute

TEMPLATE = Path(__file__).parent / "fixtures" / "template.yaml"
ROUTES = [
    ApiRoute(method="GET", path="/items/{id}", function="F", api="Api", api_id="abc123defg", stage="Prod"),
    ApiRoute(method="POST", path="/items", function="F", api="Api", api_id="abc123defg", stage="Prod"),
]
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_a_request_becomes_a_rest_proxy_event() -> None:
    event = build_event(
        method="GET",
        raw_path="/Prod/items/42?tag=a&tag=b&x=1",
        headers=[("Accept", "application/json"), ("X-Multi", "1"), ("X-Multi", "2")],
        body=b"",
        routes=ROUTES,
        account_id="123456789012",
        now=NOW,
    )

    assert event is not None
    assert (event["resource"], event["path"], event["httpMethod"]) == ("/items/{id}", "/items/42", "GET")
    assert event["pathParameters"] == {"id": "42"}
    assert event["queryStringParameters"] == {"tag": "b", "x": "1"}
    assert event["multiValueQueryStringParameters"] == {"tag": ["a", "b"], "x": ["1"]}
    assert event["multiValueHeaders"]["X-Multi"] == ["1", "2"]
    assert event["body"] is None
    assert event["isBase64Encoded"] is False
    context = event["requestContext"]
    assert (context["stage"], context["path"], context["resourcePath"]) == (
        "Prod",
        "/Prod/items/42",
        "/items/{id}",
    )
    assert context["requestTimeEpoch"] == int(NOW.timestamp() * 1000)


def test_binary_bodies_are_base64_and_unknown_routes_are_none() -> None:
    binary = bytes([0xFF, 0x00, 0x10])
    event = build_event(
        method="POST", raw_path="/items", headers=[], body=binary, routes=ROUTES, account_id="1", now=NOW
    )
    assert event is not None
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == binary

    assert (
        build_event(
            method="PUT", raw_path="/items", headers=[], body=b"", routes=ROUTES, account_id="1", now=NOW
        )
        is None
    )


@pytest.fixture
def served() -> Iterator[tuple[LocalCloud, int]]:
    with LocalCloud(TEMPLATE, stack_name="fixture") as cloud:
        server = LocalApiServer(
            port=0,
            routes=cloud.stack.api_routes,
            serve=cloud.api_request,
            account_id=cloud.account_id,
            now=cloud.now,
        )
        cloud.clock.ignore_thread(server.start())
        try:
            yield cloud, server.server_address[1]
        finally:
            server.stop()


def request(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_http_requests_are_served_by_the_function(served: tuple[LocalCloud, int]) -> None:
    cloud, port = served

    status, body = request(port, "GET", "/Prod/items/7?verbose=yes")
    assert status == 200
    assert json.loads(body) == {
        "id": "7",
        "query": {"verbose": "yes"},
        "stage": "Prod",
        "resource": "/items/{id}",
    }

    status, body = request(port, "POST", "/items", json.dumps({"n": 1}).encode())
    assert (status, json.loads(body)) == (202, {"n": 1})
    assert [e.detail["detail_type"] for e in cloud.timeline.entries("event")] == ["PipelineRequested"]

    status, body = request(port, "DELETE", "/items/7")
    assert (status, json.loads(body)) == (403, {"message": "Missing Authentication Token"})


def test_an_unsigned_request_to_an_iam_route_has_a_caller_the_default_or_the_named_one() -> None:
    from localcloud.http_api import CALLER_HEADER, ApiCaller

    seen: list[dict[str, object]] = []

    def serve(event: dict[str, object]) -> dict[str, object]:
        seen.append(event)
        return {"statusCode": 200, "body": "{}"}

    iam = ApiRoute(
        method="POST", path="/items", function="F", api="Api", api_id="abc", stage="Prod", auth="AWS_IAM"
    )
    requester = "arn:aws:sts::123456789012:assumed-role/MlPlatform/ml-platform"
    server = LocalApiServer(
        port=0,
        routes=[iam, ROUTES[0]],
        serve=serve,
        account_id="123456789012",
        now=lambda: NOW,
        unsigned_caller=ApiCaller("LOCALREQUESTERKEY", "secret", requester),
    )
    server.start()
    try:
        port = server.server_address[1]
        assert request(port, "POST", "/items", b"{}")[0] == 200
        approver = "arn:aws:sts::123456789012:assumed-role/Approvers/head-of-ml"
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/items", body=b"{}", headers={CALLER_HEADER: approver})
        assert connection.getresponse().status == 200
        connection.close()
        assert request(port, "GET", "/items/1")[0] == 200  # a route without IAM auth gets no caller
    finally:
        server.stop()
    identities = [event["requestContext"]["identity"] for event in seen]  # type: ignore[index]
    assert [i.get("userArn") for i in identities] == [requester, approver, None]
