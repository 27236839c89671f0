"""The CLI's own small rules: request flags, the configuration file, suggestions, target choice."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from capacity_cli.api import ApiError, CliError, FieldProblem, spend_so_far
from capacity_cli.config import Config, load_config
from capacity_cli.render import cancel_notice, detail_text
from capacity_cli.request import RequestFlags, build_request, parse_duration, parse_minutes, parse_time
from capacity_cli.suggest import alternatives, closest, suggestion
from capacity_cli.targets import TargetOptions, kind_of
from capacity_cli.watch import can_still_reach, follow

NOW = datetime(2026, 12, 1, 8, 0, 30, tzinfo=UTC)


def test_flags_build_the_body_of_post_reservations() -> None:
    flags = RequestFlags(
        instance_type="ml.p5.48xlarge",
        count=2,
        duration="3d",
        start="2026-12-10",
        regions="us-east-1, us-west-2",
        max_fee="30000",
        approval_above="6000",
        models=["llama-eu", "llama-us"],
        accelerators=2,
        copies="0:1:4",
    )

    body = build_request(None, flags, now=NOW, default_region="eu-west-1", default_requester="carol")

    assert body == {
        "instance_type": "ml.p5.48xlarge",
        "instance_count": 2,
        "duration_hours": 72,
        "earliest_start": "2026-12-10T00:00:00Z",
        "latest_end": "2026-12-14T00:00:00Z",  # start + duration + 1 day
        "regions": ["us-east-1", "us-west-2"],
        "max_upfront_fee_usd": "30000",
        "approval_above_usd": "6000",
        "models": [
            {"name": n, "model_name": n, "accelerators": 2, "copies": {"min": 0, "initial": 1, "max": 4}}
            for n in ("llama-eu", "llama-us")
        ],
        "requester": "carol",
    }


def test_flags_override_the_file_and_leave_the_rest() -> None:
    document = {
        "instance_type": "ml.p5.48xlarge",
        "earliest_start": "2026-12-06T00:00:00Z",
        "latest_end": "2026-12-13T00:00:00Z",
        "regions": ["us-west-2"],
        "requester": "ml",
    }

    body = build_request(
        document, RequestFlags(instance_type="ml.p5en.48xlarge", start="+2d", end="+5d"), now=NOW,
        default_region="eu-west-1", default_requester="carol",
    )  # fmt: skip

    assert body["instance_type"] == "ml.p5en.48xlarge"
    assert (body["earliest_start"], body["latest_end"]) == ("2026-12-03T08:00:30Z", "2026-12-08T08:00:30Z")
    assert (body["regions"], body["requester"]) == (["us-west-2"], "ml")
    assert document["instance_type"] == "ml.p5.48xlarge"  # the file's document is not changed


def test_keep_looking_flags_set_search_until_and_the_interval() -> None:
    flags = RequestFlags(start="2026-12-10", duration="3d", search_until="+3d", search_every="2h")
    body = build_request(None, flags, now=NOW, default_region="eu-west-1", default_requester="carol")
    assert (body["search_until"], body["search_every_minutes"]) == ("2026-12-04T08:00:30Z", 120)
    assert "search_until" not in build_request(
        None, RequestFlags(), now=NOW, default_region="eu-west-1", default_requester="carol"
    )


@pytest.mark.parametrize(("text", "minutes"), [("90", 90), ("90m", 90), ("2h", 120), ("1H", 60)])
def test_search_intervals(text: str, minutes: int) -> None:
    assert parse_minutes(text) == minutes


@pytest.mark.parametrize("text", ["soon", "1.5h", "", "m"])
def test_bad_search_intervals_say_how_to_write_them(text: str) -> None:
    with pytest.raises(CliError, match="whole minutes or hours"):
        parse_minutes(text)


@pytest.mark.parametrize(("text", "hours"), [("3d", 72), ("72h", 72), ("24", 24), ("1D", 24)])
def test_durations(text: str, hours: int) -> None:
    assert parse_duration(text) == hours


@pytest.mark.parametrize("text", ["3 days", "1.5d", "", "d"])
def test_bad_durations_say_how_to_write_them(text: str) -> None:
    with pytest.raises(CliError, match="whole days or hours"):
        parse_duration(text)


def test_times_are_utc() -> None:
    assert parse_time("now", now=NOW) == NOW.replace(microsecond=0)
    assert parse_time("2026-12-10T11:30Z", now=NOW) == datetime(2026, 12, 10, 11, 30, tzinfo=UTC)
    assert parse_time("2026-12-10", now=NOW) == datetime(2026, 12, 10, tzinfo=UTC)
    assert parse_time("+12h", now=NOW) == datetime(2026, 12, 1, 20, 0, 30, tzinfo=UTC)
    with pytest.raises(CliError, match="ISO-8601 UTC"):
        parse_time("next monday", now=NOW)


def test_the_config_file_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('stack = "capacity-orchestrator"\nregion = "us-west-2"\noutput = "json"\n')
    assert load_config(path) == Config(stack="capacity-orchestrator", region="us-west-2", output="json")
    assert load_config(tmp_path / "absent.toml") == Config()

    path.write_text('stak = "x"\noutput = "xml"\nregion = 3\n')
    with pytest.raises(CliError) as caught:
        load_config(path)
    assert "unknown key 'stak' (did you mean 'stack'?)" in str(caught.value)
    assert "output must be one of table, json, yaml, got 'xml'" in str(caught.value)
    assert "region must be a string, got int" in str(caught.value)


def test_the_target_is_local_unless_a_stack_or_an_endpoint_is_named() -> None:
    assert kind_of(TargetOptions(), Config()) == "local"
    assert kind_of(TargetOptions(), Config(stack="prod")) == "stack"
    assert kind_of(TargetOptions(endpoint="http://127.0.0.1:3000"), Config(stack="prod")) == "endpoint"
    assert kind_of(TargetOptions(local=True), Config(stack="prod")) == "local"
    with pytest.raises(CliError, match="leave out --endpoint and --stack"):
        kind_of(TargetOptions(local=True, stack="prod"), Config())


def test_closest_prefers_a_name_with_a_prefix_added_or_removed() -> None:
    types = ["ml.p5.4xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge"]
    assert closest("p5.48xlarge", types) == "ml.p5.48xlarge"  # not the more similar ml.p5.4xlarge
    assert closest("ml.p5.48xlarge", ["p5.4xlarge", "p5.48xlarge"]) == "p5.48xlarge"
    assert closest("us-east1", ["us-east-2", "us-east-1", "eu-west-1"]) == "us-east-1"
    assert closest("completely-different", types) is None


def test_only_values_a_message_offers_are_suggested() -> None:
    past = FieldProblem(
        "earliest_start", "start 2026-11-01T00:00:00Z is in the past (now 2026-11-29T12:00:00Z)"
    )
    assert suggestion(past, {"earliest_start": "2026-11-01T00:00:00Z"}) is None
    assert alternatives("Input should be 'sagemaker' or 'ec2'") == ["sagemaker", "ec2"]
    assert "ml.p5.48xlarge" in alternatives("training plans reserve ml.p4d.24xlarge, ml.p5.48xlarge; or")


def test_api_errors_keep_the_field_errors_and_spend_adds_the_money() -> None:
    error = ApiError(400, {"errors": [{"field": "instance_count", "message": "count 3 is not allowed"}]})
    assert error.problems == [FieldProblem("instance_count", "count 3 is not allowed")]
    assert error.message == "instance_count: count 3 is not allowed"
    view = {"history": [{"money_usd": None}, {"money_usd": "1990.60"}, {"money_usd": "10.40"}]}
    assert str(spend_so_far(view)) == "2001.00"


@pytest.mark.parametrize(
    ("state", "until", "expected"),
    [
        ("SCHEDULED", {"READY"}, True),
        ("CANCELLED", {"READY"}, False),
        ("CANCELLED", {"RELEASED"}, True),
        ("FAILED", {"RELEASED"}, True),
        ("RELEASED", {"RELEASED", "READY"}, False),
    ],
)
def test_a_watch_ends_when_its_state_cannot_come(state: str, until: set[str], expected: bool) -> None:
    assert can_still_reach(state, until) is expected


def test_a_searching_entry_says_when_it_looks_next() -> None:
    detail = {"next_look_at": "2026-12-01T11:44:00Z", "looks_left": 5, "search_until": "2026-12-11T08:00:00Z"}
    assert detail_text("SEARCHING", detail) == (
        "nothing fits yet; next look at 2026-12-01 11:44, at most 5 more until 2026-12-11 08:00"
    )


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        ({"kind": "capacity-block", "capacity_reservation_id": "cr-0a1b2c3d4e5f6071"}, "cr-0a1b2c3d4e5f6071"),
        ({"kind": "training-plan", "training_plan_name": "plan-a"}, "plan-a"),
    ],
)
def test_a_cancel_names_the_reservation_in_its_platforms_words(names: dict[str, str], shown: str) -> None:
    # GET's purchase names a block by its own id since issue 28, never training_plan_name
    view = {
        "request_id": "r-1",
        "state": "SCHEDULED",
        "purchase": {**names, "upfront_fee_usd": "4983.55", "start_time": "2026-12-09T11:30:00Z"},
    }
    assert f"$4,983.55 for {shown} (2026-12-09 11:30" in cancel_notice(view)


class _OnePoll:
    """A reservation that is SCHEDULED, having gone through PURCHASED before the watch began."""

    def __init__(self) -> None:
        self.transport = self
        self.pauses = 0

    def reservation(self, request_id: str) -> dict[str, object]:
        history = [
            {"state": s, "at": "2026-11-29T12:00:00Z"} for s in ("REQUESTED", "PURCHASED", "SCHEDULED")
        ]
        return {"request_id": request_id, "state": "SCHEDULED", "history": history}

    def pause(self, seconds: float, *, request_id: str | None = None) -> bool:
        self.pauses += 1
        return False  # nothing more happens: the watch ends as "idle" unless it already reached


def test_a_watch_for_a_state_asked_by_name_counts_one_already_gone_through() -> None:
    api = _OnePoll()

    asked = follow(api, "r", until={"PURCHASED"}, through=True)  # type: ignore[arg-type]
    default = follow(_OnePoll(), "r", until={"PURCHASED"})  # type: ignore[arg-type]

    assert (asked.outcome, asked.state, api.pauses) == ("reached", "SCHEDULED", 0)
    assert default.outcome == "idle"  # only the current state counts without through: it waited
