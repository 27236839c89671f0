"""The REST API's new doors on the local cloud: dry-run plans, listing, and recurring schedules."""

from __future__ import annotations

import copy
import json
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from localcloud.cloud import LocalCloud
from tests.integration.support import REQUESTER, ROOT, START, ledger_items, make_cloud

pytestmark = pytest.mark.integration
EVENTS = ROOT / "events"


def load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads(Path(EVENTS / name).read_text())
    return event


def call(cloud: LocalCloud, event: dict[str, Any]) -> tuple[int, Any]:
    response = cloud.api_request(event)
    return int(response["statusCode"]), json.loads(response["body"]) if response.get("body") else None


def with_body(event: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    changed = copy.deepcopy(event)
    changed["body"] = json.dumps(body)
    return changed


def with_query(event: dict[str, Any], **query: str) -> dict[str, Any]:
    changed = copy.deepcopy(event)
    changed["queryStringParameters"] = query or None
    changed["multiValueQueryStringParameters"] = {k: [v] for k, v in query.items()} or None
    return changed


def test_plan_sample_event_ranks_offerings_and_buys_nothing() -> None:
    with make_cloud() as cloud:
        status, body = call(cloud, load("api_post_plan.json"))

        assert status == 200
        assert body["decision"] == "DRY_RUN"
        assert body["regions_searched"] == ["us-east-1", "us-west-2", "us-east-2"]
        assert body["recommendation"]["offering_id"] == body["offerings"][0]["offering_id"]
        fees = [float(o["upfront_fee_usd"]) for o in body["offerings"]]
        assert fees == sorted(fees)
        best = body["offerings"][0]
        assert float(best["on_demand_equivalent_usd"]) > float(best["upfront_fee_usd"])
        assert 0 < float(best["break_even_utilisation"]) < 1
        assert "Nothing was bought" in body["reason"]
        assert cloud.client("sagemaker").list_training_plans()["TrainingPlanSummaries"] == []
        assert cloud.executions() == []


def test_plan_explains_the_recommendation_in_the_decision_framework() -> None:
    sample = load("api_post_plan.json")
    with make_cloud() as cloud:
        # a window a week ahead (sample event): reserve a training plan, with on demand as the alternative
        status, body = call(cloud, sample)
        assert status == 200, body
        advice, pick = body["advice"], body["recommendation"]
        assert advice["option"] == "training-plan"
        assert advice["cost_usd"] == pick["upfront_fee_usd"]
        assert advice["on_demand_cost_usd"] == "7925.76"  # 2 x ml.p5.48xlarge x 72 h x $55.04 (us-east-1)
        fee = Decimal(pick["upfront_fee_usd"])
        assert Decimal(advice["break_even_utilisation"]) == (fee / Decimal("7925.76")).quantize(
            Decimal("0.0001")
        )
        assert advice["on_demand_available"] is None
        assert advice["on_demand_check"] == "not tried: strategy reserved always reserves"
        assert [(a["option"], a["cost_usd"]) for a in advice["alternatives"]] == [("on-demand", "7925.76")]
        assert advice["reason"].startswith(
            "The window starts 2026-12-06 00:00 UTC, more than an hour from now"
        )
        assert f"used more than {fee / Decimal('79.2576'):.0f}% of the reserved hours" in advice["text"]

        # ml.g6.12xlarge starting now (no strategy sent): on demand first, nothing to reserve, no fallback
        request = json.loads(sample["body"])
        start = cloud.now() + timedelta(minutes=10)
        g6 = {
            **request,
            "instance_type": "ml.g6.12xlarge",
            "instance_count": 1,
            "duration_hours": 24,
            "earliest_start": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "latest_end": (start + timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "models": [
                {**m, "accelerators": 1, "cpu_cores": 4, "memory_mb": 16384} for m in request["models"]
            ],
        }
        status, body = call(cloud, with_body(sample, g6))
        assert status == 200, body
        assert body["decision"] == "NO_OFFERING"
        assert body["regions_searched"] == []
        assert body["advice"]["option"] == "on-demand"
        assert body["advice"]["cost_usd"] == "110.44"  # 24 h x $4.6016
        assert body["advice"]["on_demand_check"].startswith("unknown: only launching (CreateEndpoint) tells")
        assert body["reason"].endswith("if no region has on-demand capacity, the request ends FAILED.")

        # the same a week ahead defaults to reserved: 422 naming the types training plans reserve
        later = ("earliest_start", "latest_end")
        status, body = call(cloud, with_body(sample, {**g6, **{k: request[k] for k in later}}))
        assert status == 422, body
        assert [e["field"] for e in body["errors"]] == ["instance_type"]
        assert "training plans reserve ml.p4d.24xlarge" in body["errors"][0]["message"]
        assert cloud.client("sagemaker").list_training_plans()["TrainingPlanSummaries"] == []
        assert cloud.executions() == []


def test_weekly_schedule_over_four_weeks_reserves_four_times_and_once_per_date() -> None:
    definition = load("schedule_request.json")
    definition["request"]["dry_run"] = True  # each run plans without buying: the workflow stays short
    definition["request"]["regions"] = ["us-east-1"]
    with make_cloud() as cloud:
        status, created = call(cloud, with_body(load("api_post_schedule.json"), definition))
        assert status == 201, created
        assert created["request_id_pattern"] == "weekly-eval-<YYYY-MM-DD>"

        # Scheduler delivers at least once: right after the second Monday's firing, the same firing again
        # (a retry) and another firing the same day.
        cloud.run(until=START + timedelta(days=8, hours=1))
        function = cloud.stack.physical_id("ScheduledRequestFunction")
        again = {
            "schedule": created | {"enabled": True},
            "scheduled_time": "2026-12-07T11:30:00Z",
            "created_by": REQUESTER,  # as the schedule's target input carries it: its owner requests
        }
        for key in ("state", "request_id_pattern", "created_at", "arn", "links"):
            again["schedule"].pop(key)
        later = again | {"scheduled_time": "2026-12-07T18:00:00Z"}
        lam = cloud.client("lambda")
        answers = [
            json.loads(lam.invoke(FunctionName=function, Payload=json.dumps(run))["Payload"].read())
            for run in (again, later)
        ]
        cloud.run(until=START + timedelta(weeks=4))

        status, listed = call(cloud, with_query(load("api_list_reservations.json"), limit="10"))
        assert status == 200
        ids = [r["request_id"] for r in listed["reservations"]]
        assert ids == [
            "weekly-eval-2026-12-21",
            "weekly-eval-2026-12-14",
            "weekly-eval-2026-12-07",
            "weekly-eval-2026-11-30",
        ]
        assert answers == [
            {"request_id": "weekly-eval-2026-12-07", "status": "REQUESTED"},  # idempotent: the same answer
            {"request_id": "weekly-eval-2026-12-07", "status": "DUPLICATE"},
        ]
        requested = [
            i for i in ledger_items(cloud, "weekly-eval-2026-12-07") if i.get("state") == "REQUESTED"
        ]
        assert len(requested) == 1
        first = next(r for r in listed["reservations"] if r["request_id"] == "weekly-eval-2026-11-30")
        assert first["earliest_start"] == "2026-12-01T11:30:00Z"  # the firing plus start_after_hours

        status, page = call(cloud, with_query(load("api_list_reservations.json"), limit="3"))
        assert [r["request_id"] for r in page["reservations"]] == ids[:3]
        status, rest = call(
            cloud, with_query(load("api_list_reservations.json"), limit="3", next_token=page["next_token"])
        )
        assert [r["request_id"] for r in rest["reservations"]] == ids[3:]
        assert rest["next_token"] is None

        status, deleted = call(cloud, load("api_delete_schedule.json"))
        assert (status, deleted) == (200, {"name": "weekly-eval", "deleted": True})
        cloud.run(until=START + timedelta(weeks=5))
        status, after = call(cloud, with_query(load("api_list_reservations.json"), limit="10"))
        assert len(after["reservations"]) == 4  # nothing fired after the delete


def test_schedule_sample_events_create_read_list_and_delete() -> None:
    with make_cloud() as cloud:
        status, created = call(cloud, load("api_post_schedule.json"))
        assert status == 201
        status, again = call(cloud, load("api_post_schedule.json"))
        assert status == 409
        assert "already exists" in again["message"]
        status, read = call(cloud, load("api_get_schedule.json"))
        assert (status, read) == (200, created)
        status, listed = call(cloud, load("api_list_schedules.json"))
        assert status == 200
        assert [s["name"] for s in listed["schedules"]] == ["weekly-eval"]
        status, _ = call(cloud, load("api_delete_schedule.json"))
        assert status == 200
        status, gone = call(cloud, load("api_get_schedule.json"))
        assert status == 404
        assert "weekly-eval" in gone["message"]
