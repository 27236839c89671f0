"""Teams policy (issue 16): membership, four-eyes with team approvers, admission, and the atomic purchase
check against the team's month, the account cap and the quota (moto DynamoDB, the template's key schema)."""

from __future__ import annotations

import re
import threading
from decimal import Decimal
from typing import Any

import pytest
from capacity.adapters.policy_store import PolicyStore
from capacity.errors import InvalidRequest, NotPermitted, SlackUnavailable, TeamLimitExceeded
from capacity.logic.doors.api import decide_approval
from capacity.logic.governance import policy
from capacity.logic.steps.plans import plan_reservation
from capacity.record_kinds import APPROVAL, APPROVAL_REFUSED
from capacity.records import State
from capacity.request import parse_request
from capacity.teams import Person

from tests.ledger_seed import seed
from tests.unit.conftest import REGION, Harness
from tests.unit.handler_support import create_policy_table
from tests.unit.handler_support import team_policy as team
from tests.unit.unit_fakes import NOW, raw_offering, request_body

ALICE = "arn:aws:sts::123456789012:assumed-role/MlEval/alice"
EVAL_APPROVER = "arn:aws:sts::123456789012:assumed-role/EvalApprovers/erin"
OTHER_APPROVER = "arn:aws:sts::123456789012:assumed-role/ResearchApprovers/rob"


@pytest.fixture
def store(harness: Harness) -> PolicyStore:
    result = create_policy_table(REGION)
    harness.ports._policy = result
    result.put_team(
        team("ml-eval", members={"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/MlEval/*"]}),
        actor="t",
        now=NOW,
    )
    result.put_team(
        team(
            "research",
            approvers={"iam_principal_arns": ["arn:aws:sts::123456789012:assumed-role/ResearchApprovers/*"]},
        ),
        actor="t",
        now=NOW,
    )
    return result


def _request(harness: Harness, **overrides: Any) -> Any:
    body = request_body(requester=ALICE, team="ml-eval", max_upfront_fee_usd="10000", **overrides)
    request = parse_request(body, now=NOW)
    harness.ledger.record_request(request, actor="t")
    return request


def test_a_member_is_charged_to_its_team_and_a_stranger_is_refused(
    harness: Harness, store: PolicyStore
) -> None:
    assert policy.resolve_team(ALICE, harness.ports, None) == "ml-eval"
    with pytest.raises(NotPermitted, match="not a member of any team"):
        policy.resolve_team("arn:aws:iam::123456789012:user/mallory", harness.ports, None)
    with pytest.raises(NotPermitted, match="not a member of team 'research'"):
        policy.resolve_team(ALICE, harness.ports, "research")


def test_an_approver_of_another_team_is_refused_and_the_teams_approver_approves(
    harness: Harness, store: PolicyStore
) -> None:
    request = _request(harness)
    harness.ledger.put_once(request.id, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, request.id, State.AWAITING_APPROVAL, actor="notify")
    with pytest.raises(NotPermitted, match="not an approver of team ml-eval"):
        decide_approval(request.id, {"approved": True}, harness.ports, identity=OTHER_APPROVER)
    with pytest.raises(NotPermitted, match="requested this reservation"):
        decide_approval(request.id, {"approved": True}, harness.ports, identity=ALICE)
    refused = harness.ledger.items(request.id, f"{APPROVAL_REFUSED}#")
    assert sorted(item["identity"] for item in refused) == sorted([OTHER_APPROVER, ALICE])
    result = decide_approval(request.id, {"approved": True}, harness.ports, identity=EVAL_APPROVER)
    assert (result["approved"], result["approver"]) == (True, EVAL_APPROVER)


def test_admission_refuses_what_the_team_does_not_allow_and_lowers_the_threshold(
    harness: Harness, store: PolicyStore
) -> None:
    allowed = policy.admit(_request(harness, approval_above_usd="9000"), harness.ports)
    assert allowed is not None
    assert allowed.problems == []
    assert allowed.request.approval_above_usd == Decimal(5000)  # the team's, lower than the request's
    body = request_body(
        requester=ALICE,
        team="ml-eval",
        request_id="too-much",
        instance_count=8,
        regions=["eu-west-1"],
        max_upfront_fee_usd="99999999",
    )
    refused = policy.admit(parse_request(body, now=NOW), harness.ports)
    assert refused is not None
    text = " | ".join(refused.problems)
    assert "may not reserve in eu-west-1" in text
    assert "above team ml-eval's quota of 4 ml.p5 instances" in text
    assert "above team ml-eval's monthly budget $30,000.00" in text


def test_two_purchases_racing_for_the_last_1000_dollars_exactly_one_passes(
    harness: Harness, store: PolicyStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    policy.reserve_spend(
        harness.ports, key="earlier", team_name="ml-eval", amount_usd=Decimal(29000),
        instance_type="ml.p5.48xlarge", instance_count=1,
    )  # fmt: skip
    results: dict[str, str] = {}
    start = threading.Barrier(2)
    # Both purchases read the team's spend and decide before either writes; DynamoDB then runs their
    # transactions one after the other (serializable). moto's own transactions are not thread-safe (a
    # cancelled one restores the whole table), so the lock stands for DynamoDB's isolation.
    client: Any = store._client
    original = client.transact_write_items
    both_decided = threading.Barrier(2)
    serial = threading.Lock()

    def transact(**kwargs: Any) -> Any:
        both_decided.wait(timeout=30)
        with serial:
            return original(**kwargs)

    monkeypatch.setattr(client, "transact_write_items", transact)

    def buy(key: str) -> None:
        start.wait()
        try:
            policy.reserve_spend(
                harness.ports, key=key, team_name="ml-eval", amount_usd=Decimal("800"),
                instance_type="ml.p5.48xlarge", instance_count=1,
            )  # fmt: skip
            results[key] = "held"
        except TeamLimitExceeded as exc:
            results[key] = str(exc)

    threads = [threading.Thread(target=buy, args=(key,)) for key in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    monkeypatch.setattr(client, "transact_write_items", original)
    assert sorted(results.values()).count("held") == 1
    (refusal,) = [text for text in results.values() if text != "held"]
    assert re.search(r"team ml-eval has \$[0-9,.]+ left in December 2026", refusal), refusal
    assert store.spent("2026-12", "ml-eval") == Decimal(29800)
    with pytest.raises(TeamLimitExceeded, match=r"team ml-eval has \$200\.00 left in December 2026"):
        policy.reserve_spend(
            harness.ports, key="c", team_name="ml-eval", amount_usd=Decimal("800"),
            instance_type="ml.p5.48xlarge", instance_count=1,
        )  # fmt: skip


def test_a_retry_holds_nothing_twice_and_a_failed_purchase_gives_the_money_back(
    harness: Harness, store: PolicyStore
) -> None:
    for _ in range(2):
        policy.reserve_spend(
            harness.ports, key="r1", team_name="ml-eval", amount_usd=Decimal("1990.60"),
            instance_type="ml.p5.48xlarge", instance_count=2,
        )  # fmt: skip
    assert store.spent("2026-12", "ml-eval") == Decimal("1990.60")
    assert store.reserved_instances("ml-eval", "ml.p5") == 2
    assert policy.give_back(harness.ports, "r1", money=True, quota=True)
    assert not policy.give_back(harness.ports, "r1", money=True, quota=True)  # once
    assert store.spent("2026-12", "ml-eval") == 0
    assert store.reserved_instances("ml-eval", "ml.p5") == 0


def test_the_quota_counts_instances_held_at_once(harness: Harness, store: PolicyStore) -> None:
    policy.reserve_spend(
        harness.ports, key="q1", team_name="ml-eval", amount_usd=Decimal(100),
        instance_type="ml.p5.48xlarge", instance_count=4,
    )  # fmt: skip
    with pytest.raises(TeamLimitExceeded, match=r"holds 4 of its 4 ml\.p5 instances"):
        policy.reserve_spend(
            harness.ports, key="q2", team_name="ml-eval", amount_usd=Decimal(100),
            instance_type="ml.p5.48xlarge", instance_count=1,
        )  # fmt: skip
    policy.give_back(harness.ports, "q1", money=False, quota=True)  # released: the money stays spent
    policy.reserve_spend(
        harness.ports, key="q2", team_name="ml-eval", amount_usd=Decimal(100),
        instance_type="ml.p5.48xlarge", instance_count=1,
    )  # fmt: skip
    assert store.spent("2026-12", "ml-eval") == Decimal(200)


def test_the_dry_run_refuses_an_offering_above_what_the_team_has_left_this_month(
    harness: Harness, store: PolicyStore
) -> None:
    harness.world.add_offerings("us-east-1", raw_offering("tpo-east", fee="2400"))
    body = request_body(requester="someone-else@example.com", max_upfront_fee_usd="10000")
    fits = plan_reservation(body, harness.ports, requester=ALICE)
    assert (fits.decision, fits.team and fits.team.refusal) == ("DRY_RUN", None)
    assert fits.team is not None
    assert fits.team.left == "team ml-eval has $30,000.00 left in December 2026"
    policy.reserve_spend(
        harness.ports, key="earlier", team_name="ml-eval", amount_usd=Decimal(28000),
        instance_type="ml.p5.48xlarge", instance_count=1,
    )  # fmt: skip
    result = plan_reservation(body, harness.ports, requester=ALICE)
    assert result.decision == "REJECTED"
    assert result.team is not None
    assert (result.team.team, result.team.problems, result.team.left_usd) == ("ml-eval", [], Decimal(2000))
    assert result.team.refusal == (
        "team ml-eval has $2,000.00 left in December 2026, less than the offering's fee $2,400.00"
    )
    assert result.reason.startswith(result.team.refusal + ": nothing was bought.")
    assert harness.world.names("CreateTrainingPlan") == []
    with pytest.raises(NotPermitted, match="not a member of team 'research'"):
        plan_reservation({**body, "team": "research"}, harness.ports, requester=ALICE)


class _Directory:
    """Slack user groups as usergroups.users.list answers them; ``down`` raises as a rate-limited Slack."""

    def __init__(self, groups: dict[str, set[str]], *, down: bool = False) -> None:
        self.groups = groups
        self.down = down
        self.reads: list[str] = []

    def usergroup_users(self, usergroup: str) -> frozenset[str]:
        self.reads.append(usergroup)
        if self.down:
            raise SlackUnavailable(f"Slack usergroups.users.list {usergroup}: ratelimited")
        return frozenset(self.groups.get(usergroup, set()))


def test_slack_user_groups_make_members_and_approvers_read_when_asked(
    harness: Harness, store: PolicyStore
) -> None:
    directory = _Directory({"S0EVALTEAM": {"U0ERIN"}, "S0EVALLEADS": {"U0LEAD"}, "S0OTHER": {"U0ROB"}})
    harness.ports._slack_directory = directory
    store.put_team(
        team(
            "ml-eval",
            members={"slack_user_groups": ["S0EVALTEAM"]},
            approvers={"slack_user_groups": ["S0EVALLEADS"]},
        ),
        actor="t",
        now=NOW,
    )
    assert policy.resolve_team("slack:U0ERIN", harness.ports, None) == "ml-eval"
    assert directory.reads == ["S0EVALTEAM"]  # only the groups the teams name, each once
    with pytest.raises(NotPermitted, match="not a member of any team"):
        policy.resolve_team("slack:U0ROB", harness.ports, None)
    directory.reads.clear()
    with pytest.raises(NotPermitted, match="not a member of any team"):
        policy.resolve_team(ALICE, harness.ports, None)  # the team no longer names ARNs
    assert directory.reads == []  # an IAM identity is never looked up in Slack

    policy.may_approve("slack:U0LEAD", "slack:U0ERIN", "ml-eval", harness.ports)
    with pytest.raises(NotPermitted, match="not an approver of team ml-eval"):
        policy.may_approve("slack:U0ERIN", "slack:U0LEAD", "ml-eval", harness.ports)
    with pytest.raises(NotPermitted, match="cannot approve or reject it"):
        policy.may_approve("slack:U0LEAD", "slack:U0LEAD", "ml-eval", harness.ports)

    directory.groups["S0EVALTEAM"] = set()  # left the group in Slack: no longer a member
    with pytest.raises(NotPermitted, match="not a member of any team"):
        policy.resolve_team("slack:U0ERIN", harness.ports, None)
    directory.down = True  # Slack unreachable: a transient error, not a silent "not a member"
    with pytest.raises(SlackUnavailable, match="ratelimited"):
        policy.resolve_team("slack:U0ERIN", harness.ports, None)


def test_slack_user_group_ids_are_validated() -> None:
    with pytest.raises(ValueError, match=r"'@eval-team' is not a Slack user group id \(S\.\.\."):
        team("ml-eval", members={"slack_user_groups": ["@eval-team"]})
    only_groups = team("ml-eval", approvers={"slack_user_groups": ["S0EVALLEADS"]})
    assert only_groups.approvers.slack_user_groups == ["S0EVALLEADS"]  # a group alone is an approver set


def test_one_persons_identities_are_one_requester_and_a_seed_names_each_identity_once(
    harness: Harness, store: PolicyStore
) -> None:
    """The four-eyes rule compares people: an approver's IAM session and Slack user named as one person
    (``people``) never approve what either asked for; a seed naming an identity for two people is refused
    whole (nothing written)."""
    erin = Person(name="erin", iam_principal_arns=[EVAL_APPROVER], slack_users=["U0ERIN"])
    policy.apply_seed({"people": [erin.model_dump(mode="json")]}, store, actor="t", now=NOW)
    assert policy.same_person("slack:U0ERIN", EVAL_APPROVER, harness.ports)
    assert not policy.same_person("slack:U0ERIN", ALICE, harness.ports)
    request = parse_request(request_body(team="ml-eval", requester="slack:U0ERIN"), now=NOW)
    harness.ledger.record_request(request, actor="t")
    harness.ledger.put_once(request.id, APPROVAL, {"task_token": "token-1"})
    seed(harness.ledger, request.id, State.AWAITING_APPROVAL, actor="notify")
    with pytest.raises(NotPermitted, match=r"\(the same person as slack:U0ERIN\) requested this reservation"):
        decide_approval(request.id, {"approved": True}, harness.ports, identity=EVAL_APPROVER)

    twice = [erin.model_dump(mode="json"), {"name": "erin-2", "slack_users": ["U0ERIN"]}]
    with pytest.raises(InvalidRequest, match="slack:U0ERIN is named for both erin and erin-2"):
        policy.apply_seed({"people": twice, "account": {"monthly_cap_usd": "1"}}, store, actor="t", now=NOW)
    assert store.people() == [erin]
    assert store.account() is None  # the invalid seed wrote nothing
