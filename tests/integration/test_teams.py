"""Teams, four-eyes and cancels with eyes open (issue 16), through the local cloud with the template's
PolicyTable seeded from deploy/policy-seed.json (teams ml-platform and ml-eval)."""

from __future__ import annotations

import csv
import io
import json
import re
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from capacity.ledger import Ledger
from capacity.logic.governance.cost_reconcile import reconcile
from capacity.logic.governance.costs import ledger_report
from capacity.record_kinds import APPROVAL_REFUSED

from tests.integration.support import (
    APPROVER,
    REQUESTER,
    api_event,
    base_request,
    ledger_items,
    make_cloud,
    states,
    training_plans,
)

pytestmark = pytest.mark.integration

EVAL_MEMBER = "arn:aws:sts::123456789012:assumed-role/MlEval/erin"


def _call(cloud: Any, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    answer = cloud.api_request(event)
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer.get("body") else {}


def test_a_request_above_what_its_team_allows_is_rejected_with_the_reason_and_buys_nothing() -> None:
    with make_cloud() as cloud:
        status, _ = _call(cloud, api_event(base_request(), caller=EVAL_MEMBER))
        assert status == 202
        cloud.run_until_idle()
        assert states(cloud, "eval-week-49")[-1] == "REJECTED"
        rejected = [i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "REJECTED"]
        reason = rejected[0]["detail"]["reason"]
        assert rejected[0]["detail"]["error"] == "TeamLimitExceeded"
        assert "team ml-eval may not reserve in us-west-2, us-east-2" in reason
        assert "above team ml-eval's monthly budget $5,000.00" in reason
        assert training_plans(cloud) == []
        submitted = next(i for i in ledger_items(cloud, "eval-week-49") if i["sk"] == "SUBMITTED")
        assert (submitted["requester"], submitted["team"]) == (EVAL_MEMBER, "ml-eval")


def test_a_stranger_is_refused_at_the_door() -> None:
    with make_cloud() as cloud:
        status, body = _call(
            cloud, api_event(base_request(), caller="arn:aws:sts::123456789012:assumed-role/X/y")
        )
        assert status == 403
        assert "is not a member of any team" in body["message"]


def test_self_approval_is_refused_and_recorded_then_an_approver_approves_and_a_paid_cancel_asks_first() -> (
    None
):
    body = {**base_request(), "approval_above_usd": "1000", "requester": "cfo@example.com"}
    path = "/reservations/eval-week-49/approval"
    with make_cloud() as cloud:
        assert _call(cloud, api_event(body))[0] == 202
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, "eval-week-49"))
        status, answer = _call(cloud, api_event({"approved": True}, path=path, caller=REQUESTER))
        assert status == 403
        assert "cannot approve or reject it" in answer["message"]
        status, answer = _call(cloud, api_event({"approved": True, "approver": "cfo@example.com"}, path=path))
        assert status == 403  # the body never names the approver
        refusals = [
            i for i in ledger_items(cloud, "eval-week-49") if i["sk"].startswith(f"{APPROVAL_REFUSED}#")
        ]
        assert [r["identity"] for r in refusals] == [REQUESTER, REQUESTER]
        status, answer = _call(cloud, api_event({"approved": True}, path=path, caller=APPROVER))
        assert (status, answer["approver"]) == (200, APPROVER)
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "eval-week-49"))
        items = {i["sk"]: i for i in ledger_items(cloud, "eval-week-49")}
        assert items["APPROVAL_DECISION"]["approver"] == APPROVER
        assert items["REQUEST"]["request"]["requester"] == REQUESTER  # not the body's cfo@example.com

        cancel = "/reservations/eval-week-49"
        status, answer = _call(cloud, api_event(None, method="DELETE", path=cancel, query={}))
        fee = items["PURCHASE"]["upfront_fee_usd"]
        assert status == 409
        assert (answer["upfront_fee_usd"], answer["refunded_usd"], answer["saves_usd"]) == (fee, "0", "0")
        assert "confirm=true" in answer["message"]
        assert "CANCELLED" not in states(cloud, "eval-week-49")
        status, answer = _call(
            cloud, api_event(None, method="DELETE", path=cancel, query={"confirm": "true"})
        )
        assert (status, answer["status"]) == (202, "CANCELLED")


def test_the_dry_run_reports_what_the_callers_team_refuses_as_the_workflow_then_rejects_it() -> None:
    body = {**base_request(), "instance_type": "ml.p4d.24xlarge", "regions": ["us-east-1", "us-west-2"]}
    with make_cloud() as cloud:
        status, plan = _call(cloud, api_event(body, path="/plans", caller=EVAL_MEMBER))
        assert status == 200
        team = plan["team"]
        assert team["team"] == "ml-eval"
        assert team["problems"] == [
            "team ml-eval may not reserve ml.p4d.24xlarge: its types are ml.p5.48xlarge",
            "team ml-eval may not reserve in us-west-2: its regions are us-east-1",
            "2 x ml.p4d.24xlarge is above team ml-eval's quota of 0 ml.p4d instances at once",
            "max_upfront_fee_usd $12,000.00 is above team ml-eval's monthly budget $5,000.00",
        ]
        assert team["left"] == "team ml-eval has $5,000.00 left in November 2026"
        assert team["left_usd"] == "5000"
        assert team["approval_above_usd"] == "1000"  # the team's, lower than the request's 6000
        assert plan["decision"] == "REJECTED"
        assert plan["reason"].startswith(team["refusal"] + ": nothing was bought.")

        # The same body from a member of ml-platform: its team allows it (what differs is the team).
        status, other = _call(cloud, api_event(body, path="/plans"))
        assert status == 200
        assert (other["team"]["team"], other["team"]["problems"], other["team"]["refusal"]) == (
            "ml-platform",
            [],
            None,
        )
        assert other["decision"] == "DRY_RUN"

        # Submitted, the workflow rejects it with the reasons the dry run gave (one rule).
        assert _call(cloud, api_event(body, caller=EVAL_MEMBER))[0] == 202
        cloud.run_until_idle()
        rejected = [i for i in ledger_items(cloud, "eval-week-49") if i.get("state") == "REJECTED"]
        assert rejected[0]["detail"]["reason"].startswith(team["refusal"] + ": nothing was bought.")
        assert training_plans(cloud) == []


def test_the_dry_run_refuses_a_caller_in_no_team() -> None:
    with make_cloud() as cloud:
        stranger = "arn:aws:sts::123456789012:assumed-role/X/y"
        status, body = _call(cloud, api_event(base_request(), path="/plans", caller=stranger))
        assert status == 403
        assert "is not a member of any team" in body["message"]


ADMIN = "arn:aws:sts::123456789012:assumed-role/PlatformAdmins/ada"


def _request(request_id: str, **overrides: Any) -> dict[str, Any]:
    """The demo's request as ``request_id`` in us-east-1, without its approval threshold unless set."""
    body = {key: value for key, value in base_request().items() if key != "approval_above_usd"}
    return {**body, "request_id": request_id, "regions": ["us-east-1"], **overrides}


def _fee(cloud: Any, request_id: str) -> Decimal:
    purchase = next(i for i in ledger_items(cloud, request_id) if i["sk"] == "PURCHASE")
    return Decimal(purchase["upfront_fee_usd"])


def test_the_account_cap_refuses_at_purchase_a_fee_the_teams_budget_allows_and_nothing_is_bought() -> None:
    waits = _request("cap-waits", max_upfront_fee_usd="2900", approval_above_usd="1000")
    first = _request("cap-first", max_upfront_fee_usd="2900", approval_above_usd="2500")
    with make_cloud() as cloud:
        status, _ = _call(
            cloud, api_event({"monthly_cap_usd": "3000"}, method="PUT", path="/admin/account", caller=ADMIN)
        )
        assert status == 200
        # Chosen while the account had $3,000 left, then waits for its approver...
        assert _call(cloud, api_event(waits))[0] == 202
        cloud.run(stop_when=lambda: "AWAITING_APPROVAL" in states(cloud, "cap-waits"))
        # ...while another request of the team is bought without approval.
        assert _call(cloud, api_event(first))[0] == 202
        cloud.run(stop_when=lambda: "PURCHASED" in states(cloud, "cap-first"))
        spent = _fee(cloud, "cap-first")
        assert spent == Decimal("1990.60")

        path = "/reservations/cap-waits/approval"
        assert _call(cloud, api_event({"approved": True}, path=path, caller=APPROVER))[0] == 200
        cloud.run(stop_when=lambda: bool({"REJECTED", "PURCHASED"} & set(states(cloud, "cap-waits"))))
        assert states(cloud, "cap-waits")[-1] == "REJECTED"
        rejected = next(i for i in ledger_items(cloud, "cap-waits") if i.get("state") == "REJECTED")
        assert rejected["detail"]["error"] == "TeamLimitExceeded"
        reason = rejected["detail"]["reason"]
        assert re.search(
            r"the account has \$1,009\.40 left in November 2026 of its \$3,000\.00 cap; the purchase costs "
            r"\$[0-9,.]+: nothing was bought",
            reason,
        ), reason
        assert "team ml-platform has" not in reason  # its budget ($2,000,000.00) would have allowed it
        assert "PURCHASE" not in {i["sk"] for i in ledger_items(cloud, "cap-waits")}
        assert [p["TrainingPlanName"] for p in training_plans(cloud)] == ["co-cap-first"]
        listed = _call(cloud, api_event(None, method="GET", path="/admin/teams", caller=ADMIN))[1]
        platform = next(t for t in listed["teams"] if t["team"]["name"] == "ml-platform")
        assert Decimal(platform["spent_usd"]) == spent  # the refused purchase held nothing


def test_costs_as_csv_have_a_header_a_row_per_team_and_totals_equal_to_the_fees() -> None:
    eval_member_request = _request("eval-csv", instance_count=1, max_upfront_fee_usd="4000")  # another fee
    with make_cloud() as cloud:
        assert _call(cloud, api_event(_request("platform-csv", max_upfront_fee_usd="12000")))[0] == 202
        assert _call(cloud, api_event(eval_member_request, caller=EVAL_MEMBER))[0] == 202
        cloud.run(
            stop_when=lambda: all("PURCHASED" in states(cloud, r) for r in ("platform-csv", "eval-csv"))
        )
        fees = {"ml-platform": _fee(cloud, "platform-csv"), "ml-eval": _fee(cloud, "eval-csv")}

        answer = cloud.api_request(
            api_event(None, method="GET", path="/costs", accept="text/csv", caller=ADMIN)
        )
        assert answer["statusCode"] == 200
        assert answer["multiValueHeaders"]["Content-Type"] == ["text/csv"]
        text = answer["body"]
        assert text.splitlines()[0] == (
            "group,month,reservations,paid_usd,reserved_instance_hours,used_instance_hours,"
            "on_demand_equivalent_used_usd,saving_usd"
        )
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [(r["group"], r["month"], r["reservations"]) for r in rows] == [
            ("ml-eval", "2026-11", "1"),
            ("ml-platform", "2026-11", "1"),
            ("total", "all", "2"),
        ]
        assert {r["group"]: Decimal(r["paid_usd"]) for r in rows[:2]} == fees
        assert Decimal(rows[2]["paid_usd"]) == sum(fees.values())
        assert fees["ml-eval"] != fees["ml-platform"]
        assert Decimal(rows[2]["reserved_instance_hours"]) == Decimal("216.00")  # (2 + 1) instances x 72 h

        json_report = _call(cloud, api_event(None, method="GET", path="/costs", caller=ADMIN))[1]
        assert json_report["totals"]["paid_usd"] == rows[2]["paid_usd"]
        assert sorted(r["request_id"] for r in json_report["reservations"]) == ["eval-csv", "platform-csv"]
        one = cloud.api_request(
            api_event(
                None, method="GET", path="/costs", query={"team": "ml-eval"}, accept="text/csv", caller=ADMIN
            )
        )
        only = list(csv.DictReader(io.StringIO(one["body"])))
        assert [(r["group"], Decimal(r["paid_usd"])) for r in only] == [
            ("ml-eval", fees["ml-eval"]),
            ("total", fees["ml-eval"]),
        ]
        # The rollup GET /costs read equals what every reservation's ledger gives (issue 31).
        ledger = Ledger(cloud.stack.physical_id("LedgerTable"), cloud.client("dynamodb"), clock=cloud.now)
        ports: Any = SimpleNamespace(ledger=ledger, clock=cloud.now)
        assert reconcile(ports)["differences"] == []
        slow = ledger_report(ports)
        assert json_report["rows"] == slow["rows"]
        assert json_report["totals"] == slow["totals"]


def test_another_teams_member_can_neither_see_cancel_nor_extend_a_reservation_its_team_can() -> None:
    with make_cloud() as cloud:
        assert _call(cloud, api_event(base_request()))[0] == 202  # the demo's requester, team ml-platform
        cloud.run(stop_when=lambda: "SCHEDULED" in states(cloud, "eval-week-49"))  # paid: extendable
        cancel = "/reservations/eval-week-49"
        extend = api_event({"duration_hours": 24}, path=f"{cancel}/extensions", caller=EVAL_MEMBER)
        extend["resource"] = extend["requestContext"]["resourcePath"] = (
            "/reservations/{request_id}/extensions"
        )
        for event in (api_event(None, method="DELETE", path=cancel, caller=EVAL_MEMBER), extend):
            status, answer = _call(cloud, event)  # as if it did not exist: a 403 would say it does
            assert (status, answer) == (404, {"message": "no reservation 'eval-week-49'"})
        assert "CANCELLED" not in states(cloud, "eval-week-49")
        assert not [i for i in ledger_items(cloud, "eval-week-49") if i["sk"].startswith("EXTENSION")]
        # A team mate (another MlPlatform session) and an approver of the team may.
        mate = "arn:aws:sts::123456789012:assumed-role/MlPlatform/bob"
        mate_extend = {**extend, "requestContext": {**extend["requestContext"]}}
        mate_extend["requestContext"]["identity"] = {**extend["requestContext"]["identity"], "userArn": mate}
        status, answer = _call(cloud, mate_extend)
        assert status == 200, answer  # the dry run
        status, answer = _call(cloud, api_event(None, method="DELETE", path=cancel, caller=APPROVER))
        assert (status, answer["status"]) == (202, "CANCELLED")


def test_each_caller_reads_only_its_teams_reservations_and_spend_approvers_theirs_and_admins_all() -> None:
    """Issue 29, point 2: two teams' purchases; each team's member lists, reads and costs its own; the
    approver of both teams and the admin see both; another team's reservation is a 404, its team= a 403."""
    with make_cloud() as cloud:
        assert _call(cloud, api_event(_request("platform-seen", max_upfront_fee_usd="12000")))[0] == 202
        eval_body = _request("eval-seen", instance_count=1, max_upfront_fee_usd="4000")
        assert _call(cloud, api_event(eval_body, caller=EVAL_MEMBER))[0] == 202
        cloud.run(
            stop_when=lambda: all("PURCHASED" in states(cloud, r) for r in ("platform-seen", "eval-seen"))
        )

        def read(caller: str, path: str, query: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
            return _call(cloud, api_event(None, method="GET", path=path, query=query, caller=caller))

        for caller, team, own, other in (
            (REQUESTER, "ml-platform", "platform-seen", "eval-seen"),
            (EVAL_MEMBER, "ml-eval", "eval-seen", "platform-seen"),
        ):
            listed = read(caller, "/reservations")[1]["reservations"]
            assert [r["request_id"] for r in listed] == [own]
            assert read(caller, f"/reservations/{own}")[0] == 200
            status, body = read(caller, f"/reservations/{other}")
            assert (status, body["message"]) == (404, f"no reservation {other!r}")
            report = read(caller, "/costs")[1]
            assert [row["group"] for row in report["rows"]] == [team]
            assert [line["request_id"] for line in report["reservations"]] == [own]
            other_team = "ml-eval" if team == "ml-platform" else "ml-platform"
            status, body = read(caller, "/costs", {"team": other_team})
            assert status == 403
            assert f"may not see team {other_team!r}" in body["message"]
            assert read(caller, "/reservations", {"team": other_team})[0] == 403

        for caller in (APPROVER, ADMIN):  # Approvers/* approve both teams; PlatformAdmins are the admins
            listed = read(caller, "/reservations")[1]["reservations"]
            assert sorted(r["request_id"] for r in listed) == ["eval-seen", "platform-seen"]
            report = read(caller, "/costs")[1]
            assert [row["group"] for row in report["rows"]] == ["ml-eval", "ml-platform"]
