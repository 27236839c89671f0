"""Keep serving until ``serve_until`` (issue 17 item 2) on the local cloud: extend in place first, else roll
over to the next reservation (in another region if need be) without dropping traffic, else tell a person at
the lead time. The application's own template, API, workflows and Lambdas against the emulator's market,
on the virtual clock.

The market below sells 2 x ml.p5.48xlarge in us-east-1 until 2026-12-08 (the plan bought runs 12-06 11:30
to 12-09 11:30 there: nothing is left to extend it) and in us-west-2 from 2026-12-08 (where the successor
can start the day before the end).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from capacity.record_kinds import (
    EXTENSION_APPROVAL,
    EXTENSION_INTENT,
    ROLLOVER_EXTENSION,
    ROLLOVER_TOLD,
    STATE_PREFIX,
)
from capacity.record_kinds import (
    SERVE_UNTIL as SERVE_UNTIL_CHANGE,
)

from localcloud import cli
from localcloud.cloud import LocalCloud
from localcloud.emulator.market import MarketConfig
from localcloud.faults import FaultInjector, FaultKind, FaultRule
from localcloud.traffic import ModelTraffic, TrafficProfile, TrafficResult, attach
from tests.integration.support import (
    APPROVER,
    REQUESTER,
    ROOT,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    post_reservation,
    slack_texts,
    states,
    training_plans,
)
from tests.integration.test_ec2_capacity_blocks import blocks, create_launch_templates, ec2_request, instances
from tests.integration.test_extension_approval import approve, lower_team_threshold
from tests.integration.test_operations_notices import _inbox, _subscribe

pytestmark = pytest.mark.integration

RID = "eval-week-49"
NEXT = "eval-week-49-r2"
PARAMETER = "/capacity-orchestrator/eval-week-49/endpoint"
END = datetime(2026, 12, 9, 11, 30, tzinfo=UTC)
DUE = END - timedelta(hours=48)  # the default lead time
SERVE_UNTIL = "2026-12-11T10:30:00Z"  # two more days (each release starts an hour before its end)
ROLLS_OVER = MarketConfig(
    capacity={"us-east-2/ml.p5.48xlarge": 0, "*": 8},
    sold_out={
        "us-east-1/ml.p5.48xlarge": (date(2026, 12, 9), date(2026, 12, 31)),
        "us-west-2/ml.p5.48xlarge": (date(2026, 12, 1), date(2026, 12, 7)),
    },
)
NOTHING_AFTER_THE_END = MarketConfig(
    capacity={"us-east-2/ml.p5.48xlarge": 0, "*": 8},
    sold_out={"*/ml.p5.48xlarge": (date(2026, 12, 9), date(2026, 12, 31))},
)
ROOMY = MarketConfig(capacity={"us-east-2/ml.p5.48xlarge": 0, "*": 8})


def request(**overrides: Any) -> dict[str, Any]:
    """The demo's request, its window holding only 12-06 11:30 to 12-09 11:30; models never idle to zero."""
    body = base_request()
    body["latest_end"] = "2026-12-09T11:30:00Z"
    for model in body["models"]:
        model["copies"] = {"initial": 1, "min": 1, "max": 4}
    return body | overrides


def api(cloud: LocalCloud, method: str, body: dict[str, Any] | None = None, **options: Any) -> dict[str, Any]:
    """A call of ``/reservations/{RID}`` with ``method``; the proxy response with ``json`` parsed."""
    response = cloud.api_request(api_event(body, method=method, path=f"/reservations/{RID}", **options))
    response["json"] = json.loads(response["body"]) if response.get("body") else None
    return response


def items(cloud: LocalCloud, request_id: str, prefix: str) -> list[dict[str, Any]]:
    return [item for item in ledger_items(cloud, request_id) if str(item["sk"]).startswith(prefix)]


def entry(cloud: LocalCloud, request_id: str, state: str) -> dict[str, Any]:
    (found,) = [i for i in items(cloud, request_id, STATE_PREFIX) if i["state"] == state]
    return found


def at(item: dict[str, Any], key: str = "at") -> datetime:
    return datetime.fromisoformat(str(item[key]).replace("Z", "+00:00"))


def succeeded(
    cloud: LocalCloud, operation: str, matching: Callable[[dict[str, Any]], bool] = bool
) -> list[Any]:
    return [
        call
        for call in cloud.dispatcher.calls
        if call.operation == operation
        and call.status is not None
        and call.status < 300
        and matching(call.params)
    ]


def bus_events(cloud: LocalCloud, detail_type: str) -> list[Any]:
    return [
        e
        for e in cloud.timeline.entries("event")
        if e.detail.get("event", {}).get("detail-type") == detail_type
    ]


def parameter_values(cloud: LocalCloud) -> list[dict[str, Any]]:
    """Every value the application wrote to the endpoint parameter, in order."""
    return [
        json.loads(call.params["Value"])
        for call in succeeded(cloud, "PutParameter", lambda p: p["Name"] == PARAMETER)
    ]


def parameter_retired(cloud: LocalCloud) -> None:
    """Once nothing of the chain serves, the endpoint parameter is gone (deleted once)."""
    with cloud.dispatcher.exempt():
        assert cloud.client("ssm").get_parameters(Names=[PARAMETER])["InvalidParameters"] == [PARAMETER]
    assert len(succeeded(cloud, "DeleteParameter", lambda p: p["Name"] == PARAMETER)) == 1


def parameter_switched_once(cloud: LocalCloud) -> None:
    """The endpoint parameter was written twice, the second time naming the successor's endpoint, and is
    deleted once the successor is released; the roll-over event and both READY events name it."""
    values = parameter_values(cloud)
    assert [(v["endpoint_name"], v["region"]) for v in values] == [
        ("co-eval-week-49", "us-east-1"),
        ("co-eval-week-49-r2", "us-west-2"),
    ]
    assert values[1]["inference_components"]["llama-3-8b-eu"] == "co-eval-week-49-r2-llama-3-8b-eu"
    parameter_retired(cloud)
    (rolled,) = bus_events(cloud, "ReservationRolledOver")
    assert rolled.detail["event"]["detail"] | {"schema_version": 1} == {
        "schema_version": 1,
        "request_id": RID,
        "successor_id": NEXT,
        "region": "us-west-2",
        "endpoint_name": "co-eval-week-49-r2",
        "inference_component_names": [
            "co-eval-week-49-r2-llama-3-8b-eu",
            "co-eval-week-49-r2-llama-3-8b-us",
        ],
        "parameter_name": PARAMETER,
    }
    readies = [e.detail["event"]["detail"] for e in bus_events(cloud, "ReservationReady")]
    assert [(r["request_id"], r["parameter_name"]) for r in readies] == [
        (RID, PARAMETER),
        (NEXT, PARAMETER),
    ]


def traffic_failed_only_in_flight(result: TrafficResult) -> None:
    """Traffic replayed across the switch: only the requests in flight at the switch failed (one batch of
    each model), and the successor served the rest."""
    (switch,) = result.switches
    assert (switch.from_endpoint, switch.to_endpoint) == ("co-eval-week-49", "co-eval-week-49-r2")
    failed = sum(count.failed for count in result.hours.values()) + sum(result.errors.values())
    assert failed == switch.failed <= 2 * 30
    after = [count for (_, hour), count in result.hours.items() if hour > switch.at]
    assert sum(count.served for count in after) >= 2 * 3 * 60 * 4 * 2  # both models, two more days
    assert result.ended is not None
    assert result.ended >= datetime(2026, 12, 11, 10, 30, tzinfo=UTC)


def test_serve_until_rolls_over_to_another_region_without_dropping_traffic() -> None:
    busy = (0,) * 10 + (3,) * 4 + (0,) * 10  # 10:00-13:59 UTC: around the switch (READY at 11:41)
    profile = TrafficProfile(  # batches of 10 minutes: 30 requests of each model in flight at any time
        description="two models at 3 requests a minute, 10:00-13:59 UTC",
        batch_minutes=10,
        sample_minutes=30,
        models=(
            ModelTraffic(model="llama-3-8b-eu", requests_per_minute=busy),
            ModelTraffic(model="llama-3-8b-us", requests_per_minute=busy),
        ),
    )
    with make_cloud(market=ROLLS_OVER) as cloud:
        replay = attach(cloud, profile)
        assert post_reservation(cloud, request())["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))

        # The door: serve_until set after the purchase; the orchestrator will act 48 h before the end.
        patched = api(cloud, "PATCH", {"serve_until": SERVE_UNTIL})
        assert patched["statusCode"] == 200, patched
        assert patched["json"]["next_check"] == "2026-12-07T11:30:00Z"
        assert [link["request_id"] for link in patched["json"]["chain"]] == [RID]

        cloud.run_until_idle()

        # Two plans, in two regions, each bought once; the successor's window ends at serve_until + 1 h.
        plans = sorted(training_plans(cloud), key=lambda plan: plan["StartTime"])
        assert [plan["TrainingPlanName"] for plan in plans] == ["co-eval-week-49", "co-eval-week-49-r2"]
        assert len(succeeded(cloud, "CreateTrainingPlan")) == 2
        purchases = [next(i for i in ledger_items(cloud, r) if i["sk"] == "PURCHASE") for r in (RID, NEXT)]
        assert [p["region"] for p in purchases] == ["us-east-1", "us-west-2"]
        assert purchases[1]["end_time"] == "2026-12-11T11:30:00Z"
        assert "no extension of 48 h is offered" in items(cloud, RID, f"{ROLLOVER_EXTENSION}#")[0]["reason"]

        # The second endpoint is InService before the first is released; the first was released for it.
        ready_next = entry(cloud, NEXT, "READY")
        releasing = entry(cloud, RID, "RELEASING")
        assert at(ready_next) <= at(releasing) < END - timedelta(hours=1)
        assert releasing["detail"]["reason"] == "rolled-over"
        assert entry(cloud, NEXT, "RELEASING")["detail"]["reason"] == "reservation-end"
        assert at(entry(cloud, NEXT, "RELEASING")) == datetime(2026, 12, 11, 10, 30, tzinfo=UTC)

        parameter_switched_once(cloud)
        traffic_failed_only_in_flight(replay.result)

        # GET shows the chain: what, where, window, fee and state of each.
        shown = api(cloud, "GET")["json"]
        assert shown["serve_until"] == SERVE_UNTIL
        chain = shown["chain"]
        assert [(c["request_id"], c["region"], c["state"], c["rolled_over_to"]) for c in chain] == [
            (RID, "us-east-1", "RELEASED", NEXT),
            (NEXT, "us-west-2", "RELEASED", None),
        ]
        assert [c["fee_usd"] for c in chain] == [p["upfront_fee_usd"] for p in purchases]
        assert sum(Decimal(c["fee_usd"]) for c in chain) <= Decimal(request()["max_upfront_fee_usd"])
        assert "Rolled over eval-week-49 -> eval-week-49-r2" in slack_texts(cloud)
        assert cloud.billable_resources() == []


def test_no_offering_at_the_lead_time_tells_a_person_then() -> None:
    with make_cloud(market=NOTHING_AFTER_THE_END) as cloud:
        _, inbox = _subscribe(cloud)  # a team without Slack: the operations topic's subscribers
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        (told,) = items(cloud, RID, f"{ROLLOVER_TOLD}#")
        assert at(told, "written_at") == DUE  # at the lead time, two days before the end
        assert "no extension of 48 h is offered" in told["reason"]
        assert "No offering of 2 x ml.p5.48xlarge" in told["reason"]
        (event,) = bus_events(cloud, "RolloverFailed")
        assert event.at == DUE
        assert event.detail["event"]["detail"]["end_time"] == "2026-12-09T11:30:00Z"
        assert f"{RID} cannot be kept serving until 2026-12-11 10:30" in slack_texts(cloud)
        (notice,) = [text for text in _inbox(cloud, inbox) if "cannot be kept serving" in text]
        assert f"reservation {RID} cannot be kept serving until 2026-12-11T10:30:00Z" in notice
        assert "It ends at 2026-12-09T11:30:00Z" in notice
        # It ends as today: released by its own schedule, nothing more bought.
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"
        assert len(training_plans(cloud)) == 1
        assert items(cloud, RID, "SUCCESSOR") == []
        assert cloud.billable_resources() == []


def test_an_extension_is_preferred_when_it_fits() -> None:
    with make_cloud(market=ROOMY) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        (extended,) = [i for i in items(cloud, RID, STATE_PREFIX) if i["state"] == "EXTENDED"]
        assert at(extended) < DUE + timedelta(minutes=15)  # bought at the lead time, paid minutes later
        assert extended["detail"]["end_time"] == "2026-12-11T11:30:00Z"
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        assert items(cloud, RID, "SUCCESSOR") == []
        assert len(training_plans(cloud)) == 1
        assert at(entry(cloud, RID, "RELEASING")) == datetime(2026, 12, 11, 10, 30, tzinfo=UTC)
        assert "Keeping eval-week-49 served until 2026-12-11 10:30" in slack_texts(cloud)
        assert cloud.billable_resources() == []
        # what was paid counts the extension too (GET's spend and GET /costs read it)
        fee = Decimal(next(i for i in ledger_items(cloud, RID) if i["sk"] == "PURCHASE")["upfront_fee_usd"])
        spend = api(cloud, "GET")["json"]["spend"]
        assert Decimal(spend["paid_usd"]) == fee + Decimal(extended["money_usd"])


def test_the_trigger_delivered_twice_and_late_buys_one_successor() -> None:
    faults = FaultInjector(
        [
            FaultRule(
                service="scheduler",
                kind=FaultKind.DUPLICATE_DELIVERY,
                match={"schedule": "co-eval-week-49-rollover"},
            ),
            FaultRule(service="eventbridge", operation="RolloverDue", kind=FaultKind.DUPLICATE_DELIVERY),
            FaultRule(
                service="eventbridge",
                operation="RolloverDue",
                kind=FaultKind.DELAYED_DELIVERY,
                delay_seconds=1800,
                times=1,
            ),
        ]
    )
    with make_cloud(market=ROLLS_OVER, faults=faults) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        assert sum(f.kind is FaultKind.DUPLICATE_DELIVERY for f in cloud.faults.fired) >= 2
        assert (
            len(succeeded(cloud, "CreateTrainingPlan", lambda p: p["TrainingPlanName"].endswith("-r2"))) == 1
        )
        assert [p["TrainingPlanName"] for p in training_plans(cloud)].count("co-eval-week-49-r2") == 1
        assert len(items(cloud, NEXT, "PURCHASE_INTENT")) == 1
        assert states(cloud, NEXT)[-1] == "RELEASED"
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "rolled-over"
        assert cloud.billable_resources() == []


def test_a_successor_above_the_budget_is_not_bought_and_a_person_is_told() -> None:
    with make_cloud(market=ROLLS_OVER) as cloud:
        body = request(serve_until=SERVE_UNTIL, max_upfront_fee_usd="4000", approval_above_usd="3500")
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()
        fee = Decimal(next(i for i in ledger_items(cloud, RID) if i["sk"] == "PURCHASE")["upfront_fee_usd"])
        (told,) = items(cloud, RID, f"{ROLLOVER_TOLD}#")
        assert at(told, "written_at") == DUE
        assert f"above the budget max_upfront_fee_usd ${Decimal('4000') - fee:,.2f}" in told["reason"]
        assert len(training_plans(cloud)) == 1
        assert ledger_items(cloud, NEXT) == []  # not even requested
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"


def test_a_successor_that_cannot_deploy_leaves_the_first_serving_until_its_end() -> None:
    faults = FaultInjector(
        [
            FaultRule(
                service="sagemaker",
                operation="CreateEndpoint",
                kind=FaultKind.INSUFFICIENT_CAPACITY,
                match={"EndpointName": "co-eval-week-49-r2"},
            )
        ]
    )
    with make_cloud(market=ROLLS_OVER, faults=faults) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        assert "FAILED" in states(cloud, NEXT)
        # The successor's plan was bought and is recorded with its money and released; the first serves on
        # to its own end, released by its own schedule, never early.
        assert next(i for i in ledger_items(cloud, NEXT) if i["sk"] == "PURCHASE")["region"] == "us-west-2"
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"
        assert at(entry(cloud, RID, "RELEASING")) == END - timedelta(hours=1)
        (told,) = items(cloud, RID, f"{ROLLOVER_TOLD}#")
        assert f"the next reservation {NEXT} ended FAILED" in told["reason"]
        assert at(told, "written_at") < END - timedelta(hours=12)  # when the successor failed, not at the end
        assert [v["endpoint_name"] for v in parameter_values(cloud)] == ["co-eval-week-49"]  # never switched
        parameter_retired(cloud)  # and gone with the first endpoint: nothing of the chain serves
        assert cloud.billable_resources() == []


def test_patch_serve_until_validates_each_field_and_refuses_other_teams() -> None:
    with make_cloud(market=ROOMY) as cloud:
        assert post_reservation(cloud, request())["statusCode"] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, RID))
        cases: list[tuple[dict[str, Any], int, str]] = [
            ({}, 400, "body"),
            ({"rollover_lead_hours": None}, 422, "give serve_until"),
            ({"serve_until": "2026-11-01T00:00:00Z"}, 422, "not in the future"),
            ({"serve_until": "2028-01-01T00:00:00Z"}, 422, "365 days"),
            ({"serve_until": SERVE_UNTIL, "rollover_lead_hours": 1}, 400, "rollover_lead_hours"),
            ({"serve_until": SERVE_UNTIL, "extra": 1}, 400, "extra"),
        ]
        for body, status, phrase in cases:
            answer = api(cloud, "PATCH", body)
            assert answer["statusCode"] == status, (body, answer)
            assert phrase in answer["body"], (body, answer)
        stranger = "arn:aws:sts::123456789012:assumed-role/Research/someone-else"
        refused = api(cloud, "PATCH", {"serve_until": SERVE_UNTIL}, caller=stranger)
        assert (refused["statusCode"], refused["json"]) == (404, {"message": f"no reservation '{RID}'"})
        assert items(cloud, RID, f"{SERVE_UNTIL_CHANGE}#") == []  # nothing half-applied
        moved = api(cloud, "PATCH", {"serve_until": SERVE_UNTIL, "rollover_lead_hours": 72})
        assert (moved["statusCode"], moved["json"]["next_check"]) == (200, "2026-12-06T11:30:00Z")
        cleared = api(cloud, "PATCH", {"serve_until": None})
        assert (cleared["json"]["serve_until"], cleared["json"]["next_check"]) == (None, None)
        assert api(cloud, "DELETE")["statusCode"] == 202
        cloud.run_until_idle()
        closed = api(cloud, "PATCH", {"serve_until": SERVE_UNTIL})
        assert closed["statusCode"] == 409, closed
        assert len(training_plans(cloud)) == 1  # nothing rolled over after the clear and the cancel


def test_make_demo_extend_shows_an_extension_and_a_roll_over_in_its_timeline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # make demo-extend's events and market; its traffic thinned to the hours around the switch (the demo's
    # minute-by-minute profile over six days only costs time here)
    traffic = tmp_path / "traffic.json"
    busy = [0] * 10 + [3] * 4 + [0] * 10
    traffic.write_text(
        json.dumps(
            {
                "batch_minutes": 10,
                "sample_minutes": 30,
                "models": [
                    {"model": "llama-3-8b-eu", "requests_per_minute": busy},
                    {"model": "llama-3-8b-us", "requests_per_minute": busy},
                ],
            }
        )
    )
    status = cli.main(
        [
            "run",
            str(ROOT / "events/api_post_reservation_serve_until.json"),
            "--template",
            str(ROOT / "template.yaml"),
            "--market",
            str(ROOT / "events/market_serve_until.json"),
            "--traffic",
            str(traffic),
            "--reports-dir",
            str(tmp_path),
            "--progress",
            "never",
        ]
    )
    out = capsys.readouterr().out
    assert status == cli.EXIT_OK, out
    timeline = out.split("\n== Timeline", 1)[1].split("\n== ", 1)[0]
    # The successor starts where the extension's paid hours end (none is paid twice): the first is released
    # at its own end, and clients move once the successor serves, after a hand-over gap.
    order = [
        "2026-12-07T11:30:00Z  slack      [chat.postMessage C0CAPACITY] EVAL-WEEK-49: EXTENDING TO SERVE",
        "EXTENDED: EVAL-WEEK-49",
        "2026-12-08T11:30:00Z  slack      [chat.postMessage C0CAPACITY] EVAL-WEEK-49: ROLLING OVER TO",
        "is released at its own end (2026-12-10 10:30 UTC)",
        "RELEASED: EVAL-WEEK-49\n",
        "ROLLED OVER: EVAL-WEEK-49 -> EVAL-WEEK-49-R2",
        "2026-12-12T10:35:00Z  slack      [chat.postMessage C0CAPACITY] RELEASED: EVAL-WEEK-49-R2",
    ]
    positions = [timeline.find(line) for line in order]
    assert -1 not in positions, [line for line, at in zip(order, positions, strict=True) if at < 0]
    assert positions == sorted(positions)
    assert "traffic replay moved to endpoint co-eval-week-49-r2 in us-west-2" in timeline
    assert "a hand-over gap" in timeline
    assert "== Billable resources left\n  none" in out
    report = json.loads((tmp_path / "eval-week-49.json").read_text())
    (switch,) = report["switches"]
    assert switch["to_reservation"] == NEXT


def automatic_extension_asked(cloud: LocalCloud) -> str:
    """READY, then the team needs an approval above $10: at the lead time the automatic extension is asked
    of an approver (nothing bought yet); its id."""
    assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
    cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
    lower_team_threshold(cloud, Decimal(10))
    cloud.run(until=DUE + timedelta(minutes=5))
    (asked,) = items(cloud, RID, f"{EXTENSION_APPROVAL}#")
    assert asked["requester"] == "capacity-orchestrator:serve-until"  # on the requester's behalf
    assert succeeded(cloud, "ExtendTrainingPlan") == []
    assert len(bus_events(cloud, "ExtensionApprovalRequested")) == 1
    extension_id = str(asked["sk"]).split("#", 1)[1]
    refused = approve(cloud, extension_id, caller=REQUESTER)  # never the requester
    assert refused["statusCode"] == 403, refused
    return extension_id


def test_an_automatic_extension_above_the_threshold_is_bought_once_an_approver_approves() -> None:
    with make_cloud(market=ROOMY) as cloud:
        extension_id = automatic_extension_asked(cloud)
        approved = approve(cloud, extension_id, caller=APPROVER)
        assert approved["statusCode"] == 200, approved
        cloud.run_until_idle()
        assert len(succeeded(cloud, "ExtendTrainingPlan")) == 1
        (extended,) = [i for i in items(cloud, RID, STATE_PREFIX) if i["state"] == "EXTENDED"]
        assert extended["detail"]["extension_id"] == extension_id
        assert items(cloud, RID, "SUCCESSOR") == []
        assert at(entry(cloud, RID, "RELEASING")) == datetime(2026, 12, 11, 10, 30, tzinfo=UTC)


def test_an_automatic_extension_nobody_approves_gives_way_to_the_next_reservation() -> None:
    with make_cloud(market=ROOMY) as cloud:
        extension_id = automatic_extension_asked(cloud)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, NEXT))
        decision = next(
            i for i in ledger_items(cloud, RID) if i["sk"] == f"EXTENSION_DECISION#{extension_id}"
        )
        assert (decision["approved"], decision["approver"]) == (False, "capacity-orchestrator:serve-until")
        assert at(decision, "written_at") == DUE + timedelta(hours=6)  # the approval deadline
        late = approve(cloud, extension_id, caller=APPROVER)
        assert late["statusCode"] == 409, late  # declined: a late approval buys nothing
        # The successor is asked of people as any purchase above the threshold; approved, it takes over.
        path = f"/reservations/{NEXT}/approval"
        answer = cloud.api_request(api_event({"approved": True}, path=path, caller=APPROVER))
        assert answer["statusCode"] == 200, answer
        cloud.run_until_idle()
        assert succeeded(cloud, "ExtendTrainingPlan") == []
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "rolled-over"
        assert states(cloud, NEXT)[-1] == "RELEASED"
        assert len(training_plans(cloud)) == 2


def test_cancelling_a_reservation_cancels_the_successor_requested_for_it() -> None:
    with make_cloud(market=ROLLS_OVER) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run(stop_when=lambda: "SCHEDULED" in states(cloud, NEXT))
        unconfirmed = api(cloud, "DELETE", query={})
        assert unconfirmed["statusCode"] == 409, unconfirmed  # paid fees are not refunded: asked first
        # Every fee at stake is named: the reservation's and its successor's, and their total.
        assert [s["request_id"] for s in unconfirmed["json"]["at_stake"]] == [RID, NEXT]
        assert f"reservation {RID} has a paid training plan" in unconfirmed["json"]["message"]
        assert f"Reservation {NEXT} has a paid training plan" in unconfirmed["json"]["message"]
        assert "In all $" in unconfirmed["json"]["message"]
        assert "CANCELLED" not in states(cloud, NEXT)
        cancelled = api(cloud, "DELETE")
        assert cancelled["statusCode"] == 202, cancelled
        assert cancelled["json"]["successors"] == ["CANCELLED"]
        cloud.run_until_idle()
        assert states(cloud, RID)[-1] == states(cloud, NEXT)[-1] == "RELEASED"
        assert "READY" not in states(cloud, NEXT)  # nothing deployed for a chain that was stopped
        assert [v["endpoint_name"] for v in parameter_values(cloud)] == ["co-eval-week-49"]
        parameter_retired(cloud)
        assert cloud.billable_resources() == []


BLOCKS_ROLL_OVER = MarketConfig(
    capacity={"eu-west-1/p5.48xlarge": 0, "*": 8},
    sold_out={
        "us-east-1/p5.48xlarge": (date(2026, 12, 9), date(2026, 12, 31)),
        "us-west-2/p5.48xlarge": (date(2026, 12, 1), date(2026, 12, 7)),
    },
)
"""Capacity blocks as :data:`ROLLS_OVER` sells plans: the first in us-east-1, the next only in us-west-2."""


def test_a_capacity_block_rolls_over_to_a_block_in_another_region_with_its_instances_relaunched() -> None:
    ec2_id = "train-week-49-ec2"
    body = ec2_request() | {"latest_end": "2026-12-09T11:30:00Z", "serve_until": SERVE_UNTIL}
    with make_cloud(market=BLOCKS_ROLL_OVER) as cloud:
        create_launch_templates(cloud)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()
        assert [(b["AvailabilityZone"], b["StartDate"].day) for b in blocks(cloud)] == [
            ("us-east-1a", 6),
            ("us-west-2a", 8),
        ]
        # The successor's instances run (from the launch template, in its block) before the first block's
        # are terminated for it; the successor serves past serve_until and ends at its own expiry warning.
        ready_next = entry(cloud, f"{ec2_id}-r2", "READY")
        releasing = entry(cloud, ec2_id, "RELEASING")
        assert at(ready_next) <= at(releasing)
        assert releasing["detail"]["reason"] == "rolled-over"
        assert len(ready_next["detail"]["instance_ids"]) == 2
        last = entry(cloud, f"{ec2_id}-r2", "RELEASING")
        assert at(last) >= datetime(2026, 12, 11, 10, 30, tzinfo=UTC)
        assert {i["State"]["Name"] for i in instances(cloud)} == {"terminated"}
        assert len(instances(cloud)) == 4
        assert cloud.billable_resources() == []


def test_a_successor_requested_too_late_to_serve_leaves_no_endpoint_parameter_behind() -> None:
    # The successor's ReservationRequested arrives two days late, after the first's end: nothing can start in
    # its window any more, so the intake records it and ends it FAILED with the reason (nothing bought). The
    # first's release (at its end) is the last word of the chain: the parameter naming its deleted endpoint
    # goes with it.
    late = FaultRule(
        service="eventbridge",
        operation="ReservationRequested",
        kind=FaultKind.DELAYED_DELIVERY,
        delay_seconds=48 * 3600,
        not_before=DUE - timedelta(minutes=1),
    )
    with make_cloud(market=ROLLS_OVER, faults=FaultInjector([late])) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"
        (told,) = items(cloud, RID, f"{ROLLOVER_TOLD}#")
        assert f"the next reservation {NEXT} was never recorded" in told["reason"]
        assert states(cloud, NEXT) == ["REQUESTED", "FAILED"]  # refused at the intake, with its reason
        assert "too late for its window" in entry(cloud, NEXT, "FAILED")["detail"]["reason"]
        assert len(training_plans(cloud)) == 1
        assert [v["endpoint_name"] for v in parameter_values(cloud)] == ["co-eval-week-49"]
        parameter_retired(cloud)
        assert cloud.billable_resources() == []


def set_team_month(cloud: LocalCloud, usd: Decimal) -> None:
    """The team ml-platform may now commit ``usd`` a month."""
    from capacity.adapters.policy_store import PolicyStore

    store = PolicyStore(cloud.stack.physical_id("PolicyTable"), cloud.client("dynamodb"))
    team = store.team("ml-platform")
    assert team is not None
    store.put_team(
        type(team).model_validate({**team.model_dump(), "monthly_budget_usd": usd}),
        actor="test",
        now=cloud.now(),
    )


@pytest.mark.parametrize("refused_by", ["approver", "team-month"])
def test_a_successor_refused_after_the_first_was_released_retires_the_endpoint_parameter(
    refused_by: str,
) -> None:
    with make_cloud(market=ROOMY) as cloud:
        automatic_extension_asked(cloud)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, NEXT))
        # The first is released early (its models idle) while the successor waits for an approver: the
        # successor may still serve, so the parameter stays.
        with cloud.dispatcher.exempt():
            cloud.put_events(
                [
                    {
                        "Source": "capacity.orchestrator",
                        "DetailType": "ReleaseRequested",
                        "Detail": json.dumps({"schema_version": 1, "request_id": RID, "reason": "idle"}),
                        "EventBusName": cloud.stack.physical_id("EventBus"),
                    }
                ]
            )
        cloud.run(stop_when=lambda: "RELEASED" in states(cloud, RID))
        with cloud.dispatcher.exempt():
            kept = cloud.client("ssm").get_parameter(Name=PARAMETER)["Parameter"]["Value"]
        assert json.loads(kept)["endpoint_name"] == "co-eval-week-49"
        # The successor is refused (an approver says no; or approved, the team's month is spent): nothing of
        # the chain serves or will (REJECTED by the approval's outcome; by the failure path with
        # ReservationFailed).
        if refused_by == "team-month":
            set_team_month(cloud, Decimal(100))
        path = f"/reservations/{NEXT}/approval"
        decision = {"approved": refused_by == "team-month"}
        answer = cloud.api_request(api_event(decision, path=path, caller=APPROVER))
        assert answer["statusCode"] == 200, answer
        cloud.run_until_idle()
        assert states(cloud, NEXT)[-1] == "REJECTED"
        assert len(training_plans(cloud)) == 1
        parameter_retired(cloud)
        assert cloud.billable_resources() == []


def test_a_trigger_lost_after_lambdas_retries_is_tried_again_by_the_schedule() -> None:
    # SageMaker answers 5xx for ten minutes from the lead time: the roll-over's Lambda fails, and fails again
    # at Lambda's two asynchronous retries (one and two minutes later); the event goes to the dead-letter
    # queue. The schedule, moved half an hour on before the work began, fires again: the roll-over happens.
    outage = FaultRule(
        service="sagemaker",
        operation="SearchTrainingPlanOfferings",
        kind=FaultKind.SERVER_ERROR,
        not_before=DUE - timedelta(minutes=1),
        not_after=DUE + timedelta(minutes=10),
    )
    with make_cloud(market=ROLLS_OVER, faults=FaultInjector([outage])) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        assert any(f.kind is FaultKind.SERVER_ERROR for f in cloud.faults.fired)
        (tried,) = items(cloud, RID, f"{ROLLOVER_EXTENSION}#")
        # the last of the three attempts (DUE + 3 min or so) moved the schedule 30 minutes on
        assert DUE + timedelta(minutes=30) < at(tried, "written_at") <= DUE + timedelta(minutes=40)
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "rolled-over"
        assert states(cloud, NEXT)[-1] == "RELEASED"
        assert len(training_plans(cloud)) == 2
        assert cloud.billable_resources() == []


def test_a_successor_id_cannot_be_taken_at_a_door_before_the_orchestrator_requests_it() -> None:
    # Anyone who may POST could take <root>-r2 first (as a request of their own): the orchestrator's successor
    # would then be "taken by another request" and the chain would stop serving. The doors keep such ids.
    with make_cloud(market=ROLLS_OVER) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run(stop_when=lambda: "READY" in states(cloud, RID))
        window = {"earliest_start": "2026-12-08T00:00:00Z", "latest_end": "2026-12-12T11:30:00Z"}
        squat = post_reservation(cloud, request(request_id=NEXT, **window))
        assert squat["statusCode"] == 422, squat
        assert "request_id" in squat["body"]
        assert "-r&lt;n&gt;" in squat["body"] or "-r<n>" in squat["body"]
        assert ledger_items(cloud, NEXT) == []
        cloud.run_until_idle()
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "rolled-over"
        assert states(cloud, NEXT)[-1] == "RELEASED"


@pytest.mark.parametrize("serve_until", [None, "2026-12-09T09:00:00Z"])
def test_serve_until_cleared_or_moved_within_the_end_stops_a_successor_not_bought_yet(
    serve_until: str | None,
) -> None:
    # The successor waits for an approver when the requester no longer needs it (serve_until cleared, or
    # moved before the first's own release): it is not bought, and the first serves to its own end.
    with make_cloud(market=ROOMY) as cloud:
        automatic_extension_asked(cloud)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, NEXT))
        patched = api(cloud, "PATCH", {"serve_until": serve_until})
        assert patched["statusCode"] == 200, patched
        assert [link["state"] for link in patched["json"]["chain"]] == ["READY", "CANCELLED"]
        late = cloud.api_request(
            api_event({"approved": True}, path=f"/reservations/{NEXT}/approval", caller=APPROVER)
        )
        assert late["statusCode"] == 409, late
        cloud.run_until_idle()
        assert states(cloud, NEXT)[-1] == "CANCELLED"
        assert items(cloud, NEXT, "PURCHASE") == []
        assert len(training_plans(cloud)) == 1
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"
        parameter_retired(cloud)
        assert cloud.billable_resources() == []


def test_a_reservation_rolling_over_is_not_extended_by_hand() -> None:
    # The successor was requested with what the chain's budget had left: extending the first as well could
    # take the chain above its budget. Refused before any search or purchase.
    from tests.integration.test_extensions import extensions

    with make_cloud(market=ROOMY) as cloud:
        automatic_extension_asked(cloud)
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, NEXT))
        refused = extensions(cloud, {"duration_hours": 24})
        assert refused["statusCode"] == 409, refused
        assert f"{RID} is rolling over to {NEXT}" in refused["json"]["message"]
        assert items(cloud, RID, f"{EXTENSION_INTENT}#") == []


def test_a_successor_killed_in_its_hand_over_records_ready_before_the_first_is_released() -> None:
    # The successor's READY step dies right after it asked for the first's release (out of memory, a crash):
    # the first must not be released for a successor whose READY is not in the ledger (were the step to fail
    # for good then, nothing would serve). READY is recorded first; the retry finishes the hand-over.
    from capacity.events import ReleaseRequestedDetail

    with make_cloud(market=ROLLS_OVER) as cloud:
        release = ReleaseRequestedDetail(request_id=RID, reason="rolled-over").model_dump_json()
        entry_sent = {
            "Source": "capacity.orchestrator",
            "DetailType": "ReleaseRequested",
            "Detail": release,
            "EventBusName": cloud.stack.physical_id("EventBus"),
            "Resources": [],
        }
        kill = FaultRule(service="eventbridge", operation="PutEvents", kind=FaultKind.KILL_CALLER, times=1)
        cloud.faults.add(kill.model_copy(update={"match": {"Entries": [entry_sent]}}))
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run_until_idle()
        assert [f.kind for f in cloud.faults.fired].count(FaultKind.KILL_CALLER) == 1
        assert at(entry(cloud, NEXT, "READY")) <= at(entry(cloud, RID, "RELEASING"))
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "rolled-over"
        assert len(items(cloud, RID, "ROLLED_OVER")) == 1
        assert states(cloud, NEXT)[-1] == "RELEASED"
        assert cloud.billable_resources() == []


def test_a_successor_block_whose_payment_fails_leaves_the_first_serving_to_its_end() -> None:
    ec2_id = "train-week-49-ec2"
    unpaid = FaultRule(
        service="ec2",
        operation="PurchaseCapacityBlock",
        kind=FaultKind.PAYMENT_FAILED,
        not_before=DUE - timedelta(minutes=1),
    )
    body = ec2_request() | {"latest_end": "2026-12-09T11:30:00Z", "serve_until": SERVE_UNTIL}
    with make_cloud(market=BLOCKS_ROLL_OVER, faults=FaultInjector([unpaid])) as cloud:
        create_launch_templates(cloud)
        assert post_reservation(cloud, body)["statusCode"] == 202
        cloud.run_until_idle()
        assert [b["State"] for b in blocks(cloud)][1] == "payment-failed"
        assert "READY" not in states(cloud, f"{ec2_id}-r2")
        releasing = entry(cloud, ec2_id, "RELEASING")
        assert releasing["detail"]["reason"] == "capacity-block-expiring"  # its own end, not rolled-over
        (told,) = items(cloud, ec2_id, f"{ROLLOVER_TOLD}#")
        assert f"{ec2_id}-r2" in told["reason"]
        assert at(told, "written_at") < END - timedelta(hours=12)  # told when the payment failed
        # once told, the backstop fires once more and stops (no check every half hour until the end)
        later = [e for e in bus_events(cloud, "RolloverDue") if e.at > at(told, "written_at")]
        assert len(later) <= 1, [e.at for e in later]
        assert cloud.billable_resources() == []


def test_serve_until_cleared_while_the_roll_over_is_searching_buys_no_successor() -> None:
    # The requester clears serve_until while the roll-over Lambda is inside its first search at the lead
    # time (it read the request before the PATCH): nothing may be bought for a chain nobody asks for any more.
    faults = FaultInjector(
        [
            FaultRule(
                service="sagemaker",
                operation="SearchTrainingPlanOfferings",
                kind=FaultKind.LATENCY,
                latency_seconds=8,  # within the SDK's read timeout: one slow answer, no retry
                not_before=DUE,
                times=1,
            )
        ]
    )
    with make_cloud(market=ROLLS_OVER, faults=faults) as cloud:
        assert post_reservation(cloud, request(serve_until=SERVE_UNTIL))["statusCode"] == 202
        cloud.run(until=DUE + timedelta(seconds=4))
        assert [f.kind for f in cloud.faults.fired] == [FaultKind.LATENCY]  # the roll-over is mid-search
        assert items(cloud, RID, "SUCCESSOR") == []
        patched = api(cloud, "PATCH", {"serve_until": None})
        assert patched["statusCode"] == 200, patched
        cloud.run_until_idle()
        assert succeeded(cloud, "CreateTrainingPlan", lambda p: p["TrainingPlanName"].endswith("-r2")) == []
        assert len(training_plans(cloud)) == 1
        # ended at its intake as nobody needs it any more: CANCELLED (not a failure), nothing to tell
        assert states(cloud, NEXT) == ["REQUESTED", "CANCELLED"]
        assert entry(cloud, NEXT, "CANCELLED")["detail"]["reason"] == "not-needed"
        assert bus_events(cloud, "ReservationFailed") == []
        assert bus_events(cloud, "RolloverFailed") == []  # nobody asks for it any more
        assert entry(cloud, RID, "RELEASING")["detail"]["reason"] == "reservation-end"
        assert states(cloud, RID)[-1] == "RELEASED"
        parameter_retired(cloud)
        assert cloud.billable_resources() == []
