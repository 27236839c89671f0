"""The writers of one team's reservations meeting, in random interleavings (issue 28): a stateful property
test (hypothesis ``RuleBasedStateMachine``) of the doors' decisions, the outbox that carries them out and
the team's holds, on the real ledger and policy store (moto DynamoDB with the template's key schemas).

The rules: requests recorded; approvals asked; decisions by the requester, by a person whose PATCH of
``serve_until`` caused the spend, by an approver or a stranger, repeated; cancels (confirmed), repeated;
the effects' first calls failing (``PutEvents``, ``SendTaskSuccess``); stream batches of the ledger's
images delivered to the outbox late, twice and out of order; on-demand holds of the team's month and quota
from several requests at once; money in flight recorded and the release tried. After every step:

- no approval is recorded by a requester or by one who caused the spend (four-eyes, point 4);
- once every stream record is delivered, every recorded decision took effect, once (point 5): each cancel
  put one ``ReleaseRequested`` and ended its waiting task; each approval was handed back once;
- the team's month and quota hold: on-demand holds never exceed them (point 6);
- every reservation's history is a path of the lifecycle's table, and no release began while money was in
  flight.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import Any

import boto3
from capacity.adapters import clients
from capacity.adapters.dynamodb import OfferingStore
from capacity.adapters.policy_store import PolicyStore
from capacity.contracts.notify import NotifyInput
from capacity.errors import CapacityError, RetryableAwsError
from capacity.ledger import Ledger
from capacity.lifecycle import Event, replay
from capacity.logic.doors.api import cancel_reservation, decide_approval
from capacity.logic.governance import on_demand_spend
from capacity.logic.steps import outbox
from capacity.logic.steps.notify import notify
from capacity.ports import Ports
from capacity.record_kinds import APPROVAL_DECISION
from capacity.records import State
from capacity.request import ReservationRequest, parse_request
from capacity.settings import Settings
from capacity.teams import TeamPolicy, month_key
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from moto import mock_aws

from tests.unit.conftest import ENV, REGION, create_tables
from tests.unit.unit_fakes import NOW, Clock, FakeScheduler, FakeSlack, World, request_body

REQUESTER = "arn:aws:sts::123456789012:assumed-role/MlSmall/sam"
CAUSER = "arn:aws:sts::123456789012:assumed-role/Approvers/pat"  # an approver who PATCHed serve_until
APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/ana"
STRANGER = "arn:aws:sts::123456789012:assumed-role/Other/eve"
PEOPLE = (REQUESTER, CAUSER, APPROVER, STRANGER)
IDS = ("r-1", "r-2")
MONTH = Decimal(3000)
QUOTA = 2


@dataclass
class Flaky:
    """An AWS call that fails its next ``failing`` calls (a throttled ``PutEvents`` or ``SendTaskSuccess``),
    then records what it carried out."""

    failing: int = 0
    done: list[tuple[str, str]] = field(default_factory=list)

    def attempt(self, what: str, key: str) -> None:
        if self.failing > 0:
            self.failing -= 1
            raise RetryableAwsError(f"{what}: ThrottlingException (retries exhausted)")
        self.done.append((what, key))


class FlakyEvents:
    def __init__(self, flaky: Flaky) -> None:
        self.flaky = flaky

    def put(self, detail_type: str, detail: Any, *, resources: Any = ()) -> str:
        dumped = detail.model_dump(mode="json")
        self.flaky.attempt(detail_type, str(dumped.get("request_id") or ""))
        return f"event-{len(self.flaky.done)}"


class FlakyTasks:
    def __init__(self, flaky: Flaky) -> None:
        self.flaky = flaky

    def succeed(self, token: str, output: Mapping[str, Any]) -> None:
        self.flaky.attempt("success", token)

    def fail(self, token: str, *, error: str, cause: str) -> None:
        self.flaky.attempt("failure", token)


def _request(request_id: str, count: int) -> ReservationRequest:
    body = request_body(
        request_id=request_id,
        requester=REQUESTER,
        team="ml-small",
        instance_count=count,
        earliest_start=NOW.isoformat(),
        latest_end=(NOW + timedelta(hours=24)).isoformat(),
        duration_hours=24,
        regions=["us-east-1"],
        max_upfront_fee_usd="3000",
        strategy="on-demand-first",
    )
    return parse_request(body, now=NOW)


class Decisions(RuleBasedStateMachine):
    """One team's reservations, its people, the doors, the outbox and the team's holds."""

    def __init__(self) -> None:
        super().__init__()
        self._env = {key: os.environ.get(key) for key in ENV}
        os.environ.update(ENV)
        clients.clear_clients()
        self.mock = mock_aws()
        self.mock.start()
        create_tables()
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName="policy",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        self.clock = Clock()
        self.events, self.tasks = Flaky(), Flaky()
        dynamodb = clients.dynamodb(REGION)
        self.ledger = Ledger("ledger", dynamodb, clock=self.clock)
        self.ports = Ports(
            Settings.from_env(),
            ledger=self.ledger,
            offerings=OfferingStore("offerings", dynamodb),
            events=FlakyEvents(self.events),
            scheduler=FakeScheduler(),
            tasks=FlakyTasks(self.tasks),
            slack=FakeSlack(),
            sagemaker=World().client,
            clock=self.clock,
        )
        store = PolicyStore("policy", dynamodb)
        self.ports._policy = store
        team = {
            "name": "ml-small",
            "members": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/MlSmall/*"]},
            "approvers": {"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/Approvers/*"]},
            "monthly_budget_usd": f"{MONTH}",
            "approval_above_usd": "1",
            "instance_types": ["ml.p5.48xlarge"],
            "regions": ["us-east-1"],
            "instance_quota": {"ml.p5": QUOTA},
        }
        store.put_team(TeamPolicy.model_validate(team), actor="t", now=NOW)
        self.store = store
        self.requests: dict[str, ReservationRequest] = {}
        self.images: list[dict[str, Any]] = []  # what the ledger's stream holds, in write order

    def teardown(self) -> None:
        self.mock.stop()
        clients.clear_clients()
        for key, value in self._env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def _stream(self) -> None:
        """What the ledger's stream holds now (every item, as its latest image)."""
        scan = boto3.client("dynamodb", region_name=REGION).scan(TableName="ledger")["Items"]
        seen = {(x["request_id"]["S"], x["sk"]["S"]) for x in self.images}
        for raw in scan:
            key = (raw["request_id"]["S"], raw["sk"]["S"])
            if key not in seen and key[1] != "CURRENT":
                self.images.append(raw)

    # ------------------------------------------------------------------------------------------- rules

    @initialize(count=st.integers(min_value=1, max_value=2))
    def a_request_waits_for_an_approver(self, count: int) -> None:
        self.request("r-1", count)
        self.ask_approval("r-1")

    @rule(request_id=st.sampled_from(IDS), count=st.integers(min_value=1, max_value=2))
    def request(self, request_id: str, count: int) -> None:
        if request_id in self.requests:
            return
        request = _request(request_id, count)
        self.requests[request_id] = request
        self.ledger.record_request(request, actor="record_request", write_id=request_id)
        self.ledger.record(request_id, Event.PLAN, actor="choose")

    @rule(request_id=st.sampled_from(IDS))
    def ask_approval(self, request_id: str) -> None:
        if request_id not in self.requests:
            return
        self.ledger.put_once(request_id, "APPROVAL", {"task_token": f"token-{request_id}", "actor": "notify"})
        with contextlib.suppress(CapacityError):  # cancelled meanwhile: the table refuses it
            self.ledger.record(request_id, Event.ASK_APPROVAL, actor="notify")

    @rule(request_id=st.sampled_from(IDS))
    def patch_serve_until(self, request_id: str) -> None:
        """The causer's PATCH of serve_until recorded on the reservation (what leads to more spend)."""
        self.clock.advance(seconds=1)
        if request_id in self.requests:
            self.ledger.put_once(
                request_id,
                f"SERVE_UNTIL#{self.clock.now.isoformat()}#{CAUSER[-3:]}",
                {"actor": CAUSER, "serve_until": (NOW + timedelta(days=9)).isoformat()},
            )

    @rule(request_id=st.sampled_from(IDS), who=st.sampled_from(PEOPLE), approved=st.booleans())
    def patch_then_decide(self, request_id: str, who: str, approved: bool) -> None:
        """The causer PATCHes serve_until, then someone (maybe the causer) decides the purchase it led to."""
        self.patch_serve_until(request_id)
        self.decide(request_id, who, approved)

    @rule(request_id=st.sampled_from(IDS), who=st.sampled_from(PEOPLE), approved=st.booleans())
    def decide(self, request_id: str, who: str, approved: bool) -> None:
        self.clock.advance(seconds=1)
        if request_id not in self.requests:
            return
        with contextlib.suppress(
            CapacityError
        ):  # refused (four-eyes, not an approver, not waiting, decided already): what the door answers
            decide_approval(request_id, {"approved": approved}, self.ports, identity=who)

    @rule(request_id=st.sampled_from(IDS), who=st.sampled_from((REQUESTER, APPROVER)))
    def cancel(self, request_id: str, who: str) -> None:
        if request_id not in self.requests:
            return
        with contextlib.suppress(CapacityError):
            cancel_reservation(request_id, self.ports, actor=who, confirm=True)

    @rule(puts=st.integers(min_value=0, max_value=3), tasks=st.integers(min_value=0, max_value=3))
    def aws_fails(self, puts: int, tasks: int) -> None:
        """The effects' next calls fail (throttling that outlasts the client's retries)."""
        self.events.failing, self.tasks.failing = puts, tasks

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        """A stream batch reaches the outbox: some records, in any order, maybe again."""
        self._stream()
        if not self.images:
            return
        batch = data.draw(st.lists(st.sampled_from(self.images), min_size=1, max_size=6))
        with contextlib.suppress(
            CapacityError
        ):  # the batch is retried (its failed effects stay undone: the next delivery carries them out)
            outbox.carry_out(batch, self.ports)

    @rule(request_id=st.sampled_from(IDS))
    def hold_on_demand(self, request_id: str) -> None:
        request = self.requests.get(request_id)
        if request is not None:
            with contextlib.suppress(CapacityError):
                on_demand_spend.hold_on_demand(request, self.ports, self.clock.now)

    @rule(request_id=st.sampled_from(IDS))
    def fail_workflow(self, request_id: str) -> None:
        if request_id in self.requests:
            with contextlib.suppress(CapacityError):  # an effect failed: the step is retried
                notify(NotifyInput(kind="failure", request_id=request_id, reason="boom"), self.ports)

    # -------------------------------------------------------------------------------------- invariants

    @invariant()
    def no_approval_by_a_requester_or_a_causer(self) -> None:
        for request_id in self.requests:
            decision = self.ledger.get(request_id, APPROVAL_DECISION)
            if decision is None:
                continue
            decided = str(decision["written_at"])
            causers = {
                str(change["actor"])
                for change in self.ledger.items(request_id, "SERVE_UNTIL#")
                if str(change["written_at"]) < decided  # a PATCH after the decision did not cause it
            }
            assert decision["identity"] not in {REQUESTER, *causers}, (decision, causers)

    @invariant()
    def every_history_is_a_path_of_the_table(self) -> None:
        for request_id in self.requests:
            history = self.ledger.history(request_id)
            assert replay([(e.state, e.detail) for e in history]) == []

    @invariant()
    def the_team_never_holds_more_than_its_month_or_quota(self) -> None:
        spent = self.store.spent(month_key(self.clock.now.year, self.clock.now.month), "ml-small")
        assert spent <= MONTH, spent
        assert self.store.reserved_instances("ml-small", "ml.p5") <= QUOTA

    @precondition(lambda self: self.events.failing == 0 and self.tasks.failing == 0)
    @rule()
    def every_decision_took_effect_once_all_is_delivered(self) -> None:
        self._stream()
        outbox.carry_out(list(self.images), self.ports)
        for request_id in self.requests:
            cancelled = State.CANCELLED in {e.state for e in self.ledger.history(request_id)}
            releases = [d for d in self.events.done if d == ("ReleaseRequested", request_id)]
            assert len(releases) >= int(cancelled), (request_id, self.events.done)
            decision = self.ledger.get(request_id, APPROVAL_DECISION)
            if decision is not None and self.ledger.get(request_id, "APPROVAL") is not None:
                handed = [d for d in self.tasks.done if d[1] == f"token-{request_id}"]
                assert len(handed) >= 1, (request_id, self.tasks.done)


TestDecisions = Decisions.TestCase
TestDecisions.settings = settings(
    max_examples=25,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
