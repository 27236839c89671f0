"""Issue 13, defect 11: money has sane bounds and no door's JSON reader crashes on deep nesting.

Budgets of ``1e400`` or ``1e40`` were accepted and ended ``FAILED`` with ``decimal.InvalidOperation``; a
60 kB body of nested arrays crashed the API Lambda (502). Each door now refuses them with a 400 (or its
door's equivalent) naming the field, and nothing is put on the bus.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from capacity.errors import InvalidRequest
from capacity.logic.doors import slack_door
from capacity.logic.steps.intake import record_request
from capacity.request import parse_request

from events.slack_signed_request import command_body, local_secret, proxy_event
from tests.unit.conftest import Harness
from tests.unit.handler_support import bus_queue, drain, invoke, load_handler
from tests.unit.test_unit_api import proxy
from tests.unit.test_unit_slack_door import SIGNED_AT, STAMP
from tests.unit.unit_fakes import NOW, request_body

DEEP = "[" * 30_000 + "]" * 30_000  # 60 kB, under the 64 KiB limit


@pytest.fixture
def api(aws: None) -> Iterator[tuple[Any, str]]:
    with time_machine.travel(NOW, tick=False):
        yield load_handler("api"), bus_queue("capacity-orchestrator")


def _call(handler: Any, body: str, path: str = "/reservations") -> tuple[int, dict[str, Any]]:
    response = invoke(handler, proxy("POST", path, body))
    return response["statusCode"], json.loads(response["body"])


@pytest.mark.parametrize(
    ("field", "raw"),
    [
        ("max_upfront_fee_usd", "1e400"),  # a JSON number: read exactly as Decimal('1E+400')
        ("max_upfront_fee_usd", '"1e40"'),
        ("max_upfront_fee_usd", '"100000000.01"'),
        ("approval_above_usd", "1e40"),
        ("max_upfront_fee_usd", '"0.001"'),
    ],
)
@pytest.mark.parametrize("path", ["/reservations", "/plans"])
def test_an_absurd_amount_is_400_naming_the_field_and_nothing_is_put(
    api: tuple[Any, str], field: str, raw: str, path: str
) -> None:
    handler, tap = api
    text = json.dumps(request_body(**{field: "__AMOUNT__"})).replace('"__AMOUNT__"', raw)
    status, body = _call(handler, text, path)
    assert status == 400
    assert [error["field"] for error in body["errors"]] == [field]
    assert drain(tap) == []


def test_the_largest_sane_budget_is_accepted(api: tuple[Any, str]) -> None:
    handler, tap = api
    status, _ = _call(handler, json.dumps(request_body(max_upfront_fee_usd="100000000")))
    assert status == 202
    assert len(drain(tap)) == 1


@pytest.mark.parametrize("path", ["/reservations", "/plans", "/schedules", "/reservations/demo-1/approval"])
def test_a_deeply_nested_body_is_400_not_a_crash(api: tuple[Any, str], path: str) -> None:
    handler, tap = api
    status, body = _call(handler, DEEP, path)
    assert status == 400
    assert body["errors"][0]["field"] == "body"
    assert "32 levels" in body["errors"][0]["message"]
    assert drain(tap) == []


def test_a_nested_value_in_a_field_is_refused_too(api: tuple[Any, str]) -> None:
    handler, _ = api
    text = json.dumps(request_body(requester="__X__")).replace('"__X__"', "[" * 40 + "]" * 40)
    status, body = _call(handler, text)
    assert status == 400
    assert body["errors"][0]["field"] == "body"


def test_brackets_inside_strings_do_not_count(api: tuple[Any, str]) -> None:
    handler, tap = api
    status, _ = _call(handler, json.dumps(request_body(requester="[[[[" * 20 + '"{{{' * 10)))
    assert status == 202
    assert len(drain(tap)) == 1


def test_slack_max_of_1e400_is_refused_naming_the_word(harness: Harness) -> None:
    harness.clock.now = SIGNED_AT
    door = slack_door.Door(signing_secret=local_secret, guard=_Guard(), approvers=frozenset())
    text = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama-eu max=1e400"
    event = proxy_event("/slack/commands", command_body(text), secret=local_secret(), timestamp=STAMP)
    answer = slack_door.handle(event, harness.ports, door)
    assert answer.status == 200
    assert "• `max`: must be at most 100000000" in answer.body["text"]
    assert harness.events.puts == []


def test_a_deeply_nested_slack_payload_is_400(harness: Harness) -> None:
    harness.clock.now = SIGNED_AT
    door = slack_door.Door(signing_secret=local_secret, guard=_Guard(), approvers=frozenset({"U0APPROVER"}))
    body = "payload=" + "%5B" * 20_000 + "%5D" * 20_000
    event = proxy_event("/slack/interactions", body, secret=local_secret(), timestamp=STAMP)
    answer = slack_door.handle(event, harness.ports, door)
    assert answer.status == 400
    assert "payload" in answer.body["message"]
    assert harness.tasks.calls == []


def test_an_event_whose_detail_nests_too_deep_is_invalid_and_records_nothing(harness: Harness) -> None:
    nested: Any = {}
    for _ in range(5_000):  # built iteratively: deeper than any recursive reader survives
        nested = {"x": nested}
    detail = {"schema_version": 1, "request": {**request_body(), "extra": nested}}
    with pytest.raises(InvalidRequest) as raised:
        record_request({"id": "event-1", "detail": detail}, harness.ports)
    assert raised.value.errors[0].field == "detail"
    assert harness.ledger.items("demo-1") == []


def test_an_event_with_an_absurd_budget_is_invalid_naming_the_request_field(harness: Harness) -> None:
    detail = {"schema_version": 1, "request": request_body(max_upfront_fee_usd="1e400")}
    with pytest.raises(InvalidRequest) as raised:
        record_request({"id": "event-1", "detail": detail}, harness.ports)
    assert [e.field for e in raised.value.errors] == ["request.max_upfront_fee_usd"]
    with pytest.raises(InvalidRequest):
        parse_request(request_body(max_upfront_fee_usd="NaN"), now=None)


class _Guard:
    def first_use(self, key: str, *, expires_at: Any) -> bool:
        return True
