"""Who may spend what (issue 16): team membership, approvers, admission and the atomic purchase check.

Over 400 lines: the team rules and the atomic purchase check they feed are read together.

The policy is an administrator's (:mod:`capacity.teams`, table ``POLICY_TABLE``); every function here
reads it through ``ports.policy`` and does nothing when the deployment has none (``ports.policy`` None).

- :func:`resolve_team`: the team a door's authenticated caller requests for (403 when none).
- :func:`may_approve`: whether a caller may approve a request of a team (never its requester).
- :func:`charged_to`: a request body as sent by an authenticated caller: its requester, and its team
  (:func:`resolve_team`); every door (API, Slack, the dry run) builds requests through it.
- :func:`admit`: the static checks of a request against its team (types, regions, count, budget), with the
  effective approval threshold (the lower of the request's and the team's); :func:`judge_plan` turns them
  (and an offering above what the team has left this month) into a ``REJECTED`` plan: the reserve
  workflow's ``choose_offering`` and the ``POST /plans`` dry run both judge with it.
- :func:`reserve_spend`: **the** check money goes through, called by a purchase right before it buys (after
  reconcile): a conditional update of the team's month, the account's month and the team's quota in one
  DynamoDB transaction. Two purchases racing for the last $1,000 cannot both pass. An extension's purchase
  calls it too, with its own ``key``.
- :func:`give_back`: a purchase that charged nothing (never made, or voided by AWS) returns its money and
  quota; a released reservation returns its quota (the money stays spent).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from pydantic import ConfigDict, Field

from capacity.base import Model
from capacity.errors import (
    ConfigurationError,
    FieldError,
    InvalidRequest,
    NotPermitted,
    ReservationNotFound,
    TeamLimitExceeded,
    TeamNotFound,
)
from capacity.planner import Decision, Plan
from capacity.ports import PolicyStore, Ports
from capacity.pricing import format_usd
from capacity.record_kinds import APPROVAL_REFUSED, REQUEST, SERVE_UNTIL, SUBMITTED
from capacity.request import ReservationRequest
from capacity.resources import Hold, HoldRefused, Rooms
from capacity.succession import MAX_GENERATIONS
from capacity.teams import (
    AccountPolicy,
    Person,
    Principals,
    TeamPolicy,
    instance_family,
    month_key,
    month_name,
)
from capacity.timeutil import iso_ms
from capacity.validation import parse_model

logger = logging.getLogger(__name__)


def _tags(ports: Ports, identity: str, teams: list[TeamPolicy], *, approvers: bool) -> dict[str, str] | None:
    """The principal's IAM tags, read only when a team matches by tags (one IAM call)."""
    wants = any((team.approvers if approvers else team.members).iam_principal_tags for team in teams)
    if not wants or not identity.startswith("arn:"):
        return None
    return ports.iam.principal_tags(identity)


def _groups(ports: Ports, identity: str, teams: list[TeamPolicy], *, approvers: bool) -> frozenset[str]:
    """The Slack user groups named by ``teams`` (their members, or approvers) that the Slack user
    ``identity`` is in: one ``usergroups.users.list`` per group named, read only for a Slack identity."""
    if not identity.startswith("slack:"):
        return frozenset()
    user = identity.removeprefix("slack:")
    named = sorted(
        {
            group
            for team in teams
            for group in (team.approvers if approvers else team.members).slack_user_groups
        }
    )
    return frozenset(group for group in named if user in ports.slack_directory.usergroup_users(group))


def teams_of(identity: str, ports: Ports) -> list[TeamPolicy]:
    """The teams ``identity`` (an IAM principal ARN or ``slack:<user id>``) is a member of, by name.

    Raises:
        SlackUnavailable: a Slack user group could not be read now (try again).
        ConfigurationError: Slack refused the read (the app lacks ``usergroups:read``, no bot token).
    """
    store = ports.policy
    if store is None:
        return []
    teams = store.teams()
    found = [team for team in teams if team.members.by_arn_or_slack(identity)]
    rest = [team for team in teams if team not in found]
    if rest:
        tags = _tags(ports, identity, rest, approvers=False)
        groups = _groups(ports, identity, rest, approvers=False)
        found += [team for team in rest if team.members.by_tags(tags) or team.members.by_groups(groups)]
    return sorted(found, key=lambda team: team.name)


def resolve_team(identity: str, ports: Ports, asked: str | None) -> str | None:
    """The team a request from ``identity`` is charged to: ``asked`` (the request's ``team``) if the caller
    is a member of it, else the caller's only team. None when the deployment has no policy table.

    Raises:
        NotPermitted: the caller is in no team, is not a member of ``asked``, or is in several teams and
            named none (the message lists them).
    """
    if ports.policy is None:
        return asked
    teams = [team.name for team in teams_of(identity, ports)]
    if not teams:
        raise NotPermitted(
            f"{identity} is not a member of any team, so it cannot request capacity: ask an administrator to "
            "add it to a team (PUT /admin/teams/{team}, members)"
        )
    if asked is not None:
        if asked not in teams:
            raise NotPermitted(f"{identity} is not a member of team {asked!r}; its teams: {', '.join(teams)}")
        return asked
    if len(teams) > 1:
        raise NotPermitted(
            f"{identity} is a member of several teams ({', '.join(teams)}): say which one pays with "
            "team=<name>"
        )
    return teams[0]


def charged_to(body: Mapping[str, Any], requester: str, ports: Ports) -> dict[str, Any]:
    """``body`` (a reservation request as a door received it) as requested by the authenticated
    ``requester``: its ``requester`` replaced, its ``team`` the one :func:`resolve_team` charges (the body's
    ``team`` picks one of the caller's teams; kept as sent when the deployment has no policy table).

    Raises:
        NotPermitted: see :func:`resolve_team`.
    """
    charged = {**body, "requester": requester}
    asked = charged.get("team")
    team = resolve_team(requester, ports, asked if isinstance(asked, str) else None)
    if team is not None:
        charged["team"] = team
    return charged


def require_caller_named(named: str | None, identity: str) -> None:
    """Refuse a body naming an approver other than the authenticated caller (who approves is who signed).

    Raises:
        NotPermitted: ``named`` is given and is not ``identity``.
    """
    if named is not None and named != identity:
        raise NotPermitted(
            f"the approver recorded is the authenticated caller ({identity}), not {named!r}: remove approver "
            "from the body, or let that person decide with their own credentials"
        )


def may_approve(
    identity: str,
    requester: str | None,
    team_name: str | None,
    ports: Ports,
    *,
    is_me: Callable[[str | None], bool] | None = None,
) -> None:
    """Refuse an approval (or a rejection) by ``identity`` of a request by ``requester`` for ``team_name``.

    Four-eyes: the requester never approves its own request, under any of its identities (the policy's
    ``people``: :func:`same_person`). With a policy, the approver must be one of the
    team's approvers (an approver of another team is refused): by ARN pattern or Slack user, by IAM
    principal tag, or as a user of one of its Slack user groups.

    ``is_me``: :func:`person_of` ``identity``, when the caller has it already (one read of the people).

    Raises:
        NotPermitted: the caller is the requester, or is not an approver of the team (message says which).
        SlackUnavailable, ConfigurationError: a Slack user group of the team's approvers could not be read.
    """
    if (is_me or person_of(identity, ports))(requester):
        who = identity if identity == requester else f"{identity} (the same person as {requester})"
        raise NotPermitted(
            f"{who} requested this reservation and cannot approve or reject it: another approver of its team "
            "must (four-eyes rule)"
        )
    store = ports.policy
    if store is None:
        return
    team = store.team(team_name) if team_name else None
    if team is None:
        raise NotPermitted(
            f"the reservation is charged to no known team ({team_name or 'none'}), so nobody may approve it"
        )
    if not _approves(identity, team, ports):
        raise NotPermitted(f"{identity} is not an approver of team {team.name}; its approvers decide")


def check_approver(
    ports: Ports,
    request_id: str,
    *,
    identity: str,
    named: str | None,
    approved: bool,
    requesters: Sequence[str | None],
    team_name: str | None,
    extension_id: str | None = None,
) -> None:
    """The approval rules of a purchase and of an extension, in one place: a body's ``approver`` must be the
    caller (:func:`require_caller_named`), none of ``requesters`` (the reservation's, and the extension's)
    decides (four-eyes), and the caller approves for ``team_name`` (:func:`may_approve`). A refusal is on
    record too (``APPROVAL_REFUSED#<time>#<nonce>``: identity, approved, reason, ``extension_id``).

    Raises:
        NotPermitted: the message says which rule refused.
        SlackUnavailable, ConfigurationError: a Slack user group of the team's approvers could not be read.
    """
    try:
        require_caller_named(named, identity)
        is_me = person_of(identity, ports)  # the people are read once for the three rules
        _not_asked_by(identity, requesters[1:], is_me)
        _not_caused_by(identity, spend_causers(ports, request_id), is_me)
        may_approve(identity, requesters[0] if requesters else None, team_name, ports, is_me=is_me)
    except NotPermitted as refused:
        ports.ledger.put_once(
            request_id,
            f"{APPROVAL_REFUSED}#{iso_ms(ports.clock())}#{uuid.uuid4().hex[:8]}",
            {"identity": identity, "approved": approved, "reason": str(refused)}
            | ({"extension_id": extension_id} if extension_id else {}),
        )
        raise


def person_of(identity: str, ports: Ports) -> Callable[[str | None], bool]:
    """Whether another identity is ``identity``'s person: the same identity, or another identity of the one
    of the policy's ``people`` that ``identity`` is (an IAM principal and a Slack user of the same human).
    The four-eyes rule compares people, never bare identities. Reads the people once."""
    store = ports.policy
    mine = [person for person in store.people() if person.is_(identity)] if store is not None else []
    return lambda other: bool(other) and (other == identity or any(person.is_(str(other)) for person in mine))


def same_person(identity: str, other: str | None, ports: Ports) -> bool:
    """True when ``identity`` and ``other`` are one person (:func:`person_of`)."""
    return person_of(identity, ports)(other)


def _not_asked_by(
    identity: str, requesters: Sequence[str | None], is_me: Callable[[str | None], bool]
) -> None:
    asked = next((r for r in requesters if is_me(r)), None)
    if asked is not None:
        who = identity if asked == identity else f"{identity} (the same person as {asked})"
        raise NotPermitted(
            f"{who} asked for this and cannot approve or reject it: another approver of its team must "
            "(four-eyes rule)"
        )


@dataclass(frozen=True)
class Causer:
    """Someone whose action led to a reservation's spend: ``identity`` (IAM ARN or ``slack:<user>``), what
    they did (``what``, for the refusal's message) on which reservation of the chain."""

    identity: str
    what: str


def spend_causers(ports: Ports, request_id: str) -> list[Causer]:
    """Whoever caused the spend ``request_id`` may lead to (issue 28, point 4), besides its requester: every
    person who changed ``serve_until`` (``SERVE_UNTIL#`` items, a PATCH's ``actor``) of this reservation or
    of a reservation it keeps serving (its ``rollover_of`` chain: a successor is bought because of them), and
    the requesters of those predecessors. Each is a requester of the purchases and extensions that follow:
    never their approver. Read from the ledger (the ``SERVE_UNTIL#`` items are the record of who caused)."""
    found: list[Causer] = []
    current: str | None = request_id
    for _ in range(MAX_GENERATIONS):
        if current is None:
            break
        prefix = f"{SERVE_UNTIL}#"
        for change in ports.ledger.items(current, prefix):
            actor = str(change.get("actor") or "")
            if actor and str(change["sk"]).startswith(prefix):
                found.append(
                    Causer(actor, f"changed serve_until of {current} at {change.get('written_at', '?')}")
                )
        request = ports.ledger.get_request(current)
        if current != request_id and request is not None and request.requester:
            found.append(Causer(request.requester, f"requested {current}, which this keeps serving"))
        current = request.rollover_of if request is not None else None
    return found


def _not_caused_by(identity: str, causers: Sequence[Causer], is_me: Callable[[str | None], bool]) -> None:
    for causer in causers:
        if is_me(causer.identity):
            who = identity if causer.identity == identity else f"{identity} (as {causer.identity})"
            raise NotPermitted(
                f"{who} {causer.what}, which led to this purchase, and cannot approve or reject it: "
                "another approver of its team must (four-eyes rule: whoever causes spend is its requester)"
            )


def _approves(identity: str, team: TeamPolicy, ports: Ports) -> bool:
    """``identity`` is one of ``team``'s approvers: by ARN pattern or Slack user, principal tag or group."""
    return bool(
        team.approvers.by_arn_or_slack(identity)
        or team.approvers.by_tags(_tags(ports, identity, [team], approvers=True))
        or team.approvers.by_groups(_groups(ports, identity, [team], approvers=True))
    )


def may_act(identity: str, requester: str | None, team_name: str | None, ports: Ports, *, doing: str) -> None:
    """Refuse ``doing`` (``cancel``, ``extend``) to a reservation requested by ``requester`` for
    ``team_name`` unless ``identity`` is its requester, a member of that team or one of its approvers: a
    caller of another team never stops it or spends on it. Without a policy table, only its requester may.

    Raises:
        NotPermitted: the caller is none of those (403; the message says who may).
        SlackUnavailable, ConfigurationError: a Slack user group of the team could not be read.
    """
    if same_person(identity, requester, ports):
        return
    team = ports.policy.team(team_name) if ports.policy is not None and team_name else None
    mine = {member_of.name for member_of in teams_of(identity, ports)} if team is not None else set()
    if team is not None and (team.name in mine or _approves(identity, team, ports)):
        return
    raise NotPermitted(
        f"{identity} may not {doing} this reservation: only its requester ({requester or 'unknown'}), the "
        f"members of team {team_name or '(none)'} and its approvers may"
    )


@dataclass(frozen=True)
class Viewer:
    """Who reads, and what it may see (issue 29, point 2): **the** read rule of every door.

    ``teams`` None: everything (an administrator); else the reservations, schedules and spend of these
    teams, plus the caller's own requests (by ``identity``, its requester or a schedule's owner).
    """

    identity: str
    teams: frozenset[str] | None

    def sees(self, *, team: str | None, requester: str | None) -> bool:
        """True when a reservation (or schedule) charged to ``team``, asked by ``requester``, is shown."""
        if self.teams is None or (requester is not None and requester == self.identity):
            return True
        return team is not None and team in self.teams

    def sees_request(self, owner: Mapping[str, Any] | None) -> bool:
        """:meth:`sees` of a request as recorded (``owner``: its ``team`` and ``requester``; None or empty: an
        unknown reservation, seen by an administrator only)."""
        owner = owner or {}
        team, requester = owner.get("team"), owner.get("requester")
        return self.sees(team=str(team) if team else None, requester=str(requester) if requester else None)

    def require_team(self, team: str | None) -> None:
        """Refuse a ``team=`` filter naming a team this caller may not see.

        Raises:
            NotPermitted: 403, the message names the teams it may see.
        """
        if team is None or self.teams is None or team in self.teams:
            return
        mine = ", ".join(sorted(self.teams)) or "none (only your own requests)"
        raise NotPermitted(
            f"{self.identity} may not see team {team!r}: only its members, its approvers and administrators "
            f"may; the teams you may see: {mine}"
        )


def is_admin(identity: str, ports: Ports) -> bool:
    """``identity`` is one of the administrators the policy names (``admins`` of the seed, by ARN pattern or
    Slack user, principal tag or Slack user group). False without a policy table or without ``admins``."""
    store = ports.policy
    admins = store.admins() if store is not None else None
    if admins is None:
        return False
    return bool(
        admins.by_arn_or_slack(identity)
        or admins.by_tags(_tags_of(ports, identity, wanted=bool(admins.iam_principal_tags)))
        or admins.by_groups(_groups_named(ports, identity, admins.slack_user_groups))
    )


def _tags_of(ports: Ports, identity: str, *, wanted: bool) -> dict[str, str] | None:
    if not wanted or not identity.startswith("arn:"):
        return None
    return ports.iam.principal_tags(identity)


def _groups_named(ports: Ports, identity: str, groups: Sequence[str]) -> frozenset[str]:
    if not identity.startswith("slack:") or not groups:
        return frozenset()
    user = identity.removeprefix("slack:")
    return frozenset(group for group in groups if user in ports.slack_directory.usergroup_users(group))


def visible_teams(identity: str, ports: Ports) -> set[str] | None:
    """The teams whose reservations, schedules and spend ``identity`` may read: None (all) for an
    administrator; else the teams it is a member of and those it approves for. Without a policy table:
    none (a caller then sees its own requests only, as only its requester may act on one: :func:`may_act`).

    Raises:
        SlackUnavailable, ConfigurationError: a Slack user group could not be read.
    """
    store = ports.policy
    if store is None:
        return set()
    if is_admin(identity, ports):
        return None
    teams = store.teams()
    mine = {team.name for team in teams_of(identity, ports)}
    return mine | {team.name for team in teams if team.name not in mine and _approves(identity, team, ports)}


def owner_of(ports: Ports, request_id: str) -> Mapping[str, Any]:
    """Whose ``request_id`` is: the ``REQUEST`` recorded, or before it is (a POST whose event is on its
    way or failed) the ``SUBMITTED`` item, each with ``requester`` and ``team``; empty when none is."""
    recorded = ports.ledger.get(request_id, REQUEST)
    return (recorded or {}).get("request") or ports.ledger.get(request_id, SUBMITTED) or {}


def require_seen(ports: Ports, request_id: str, viewer: Viewer | None) -> Mapping[str, Any]:
    """Answer a caller who may not see ``request_id`` (:meth:`Viewer.sees_request`) as if it did not exist,
    before any action on it says anything else (a 403 or a 409 would tell a stranger that it exists, and
    what state it is in). ``viewer`` None: an internal call, unscoped (an unknown id is still a 404).

    Returns:
        :func:`owner_of` ``request_id``.

    Raises:
        ReservationNotFound: unknown, or not ``viewer``'s to see (404 either way).
    """
    owner = owner_of(ports, request_id)
    if not owner or (viewer is not None and not viewer.sees_request(owner)):
        raise ReservationNotFound(f"no reservation {request_id!r}")
    return owner


def viewer(identity: str, ports: Ports, *, approves_all: bool = False) -> Viewer:
    """The :class:`Viewer` of ``identity`` (:func:`visible_teams`). ``approves_all``: the door names
    ``identity`` an approver of every reservation (Slack's ``SLACK_APPROVERS``, who may approve and cancel
    any): it sees all, as an administrator does."""
    teams = None if approves_all else visible_teams(identity, ports)
    return Viewer(identity, None if teams is None else frozenset(teams))


@dataclass(frozen=True)
class Admission:
    """What :func:`admit` found: the team, the problems (each a sentence with the fix; empty: admitted) and
    the
    request as it must be planned (``approval_above_usd`` lowered to the team's)."""

    team: TeamPolicy | None
    problems: list[str]
    request: ReservationRequest


def admit(request: ReservationRequest, ports: Ports) -> Admission | None:
    """Check ``request`` against its team's policy (types, regions, count, budget, threshold).

    Returns:
        None when the deployment has no policy table; else the :class:`Admission`. A request may ask for
        less than its team allows, never more: a ``max_upfront_fee_usd`` above the team's monthly budget
        (or the account cap), a type or region the team may not use, or more instances of a family than
        its quota are problems.
    """
    store = ports.policy
    if store is None:
        return None
    team = store.team(request.team) if request.team else None
    if team is None:
        why = f"team {request.team!r} does not exist (any more)" if request.team else "it names no team"
        return Admission(None, [f"{why}: an administrator must set the team up"], request)
    problems: list[str] = []
    if request.instance_type not in team.instance_types:
        problems.append(
            f"team {team.name} may not reserve {request.instance_type}: its types are "
            + ", ".join(team.instance_types)
        )
    outside = [region for region in request.regions if region not in team.regions]
    if outside:
        problems.append(
            f"team {team.name} may not reserve in {', '.join(outside)}: its regions are "
            + ", ".join(team.regions)
        )
    quota = team.quota_for(request.instance_type)
    if request.instance_count > quota:
        problems.append(
            f"{request.instance_count} x {request.instance_type} is above team {team.name}'s quota of "
            f"{quota} "
            f"{instance_family(request.instance_type)} instances at once"
        )
    if request.max_upfront_fee_usd > team.monthly_budget_usd:
        problems.append(
            f"max_upfront_fee_usd {format_usd(request.max_upfront_fee_usd)} is above team {team.name}'s "
            "monthly "
            f"budget {format_usd(team.monthly_budget_usd)}"
        )
    account = store.account()
    if account is not None and request.max_upfront_fee_usd > account.monthly_cap_usd:
        problems.append(
            f"max_upfront_fee_usd {format_usd(request.max_upfront_fee_usd)} is above the account's "
            "monthly cap "
            f"{format_usd(account.monthly_cap_usd)}"
        )
    threshold = team.approval_above_usd
    if request.approval_above_usd is not None:
        threshold = min(threshold, request.approval_above_usd)
    planned = request.model_copy(update={"approval_above_usd": threshold})
    return Admission(team, problems, planned)


def as_admitted(request: ReservationRequest, ports: Ports) -> ReservationRequest:
    """``request`` as its team allows it (:func:`admit`): ``approval_above_usd`` lowered to the team's when
    that is lower. Every later judgement of a fee against the threshold (a stale offering's replacement at
    the purchase) uses it, as the choice did; ``request`` itself without a policy table or a team."""
    admission = admit(request, ports)
    return admission.request if admission is not None else request


SPENDING = (Decision.PURCHASE, Decision.APPROVAL_REQUIRED, Decision.DRY_RUN)
"""The decisions that would buy something: the team's month left is checked against their offering."""


def judge_plan(plan: Plan, admission: Admission | None, ports: Ports) -> tuple[Plan, str | None]:
    """The team's word on ``plan`` (decided for ``admission.request``): its :func:`admit` problems, or a
    chosen offering whose fee is above what the team (and the account) has left this month
    (:func:`left_in_month`).

    Returns:
        ``(plan, None)`` when the team allows it (or there is no policy: ``admission`` None); else the plan
        ``REJECTED`` with the refusal in front of its reason ("team ml-eval may not reserve in us-west-2 ...:
        nothing was bought. ...") and the refusal. The purchase checks the money again, atomically
        (:func:`reserve_spend`).
    """
    if admission is None or not (admission.problems or plan.decision in SPENDING):
        return plan, None
    refusal = "; ".join(admission.problems) or None
    if refusal is None and admission.team is not None and plan.offering is not None:
        left, sentence = left_in_month(ports, admission.team, ports.clock())
        if plan.offering.upfront_fee_usd > left:
            fee = format_usd(plan.offering.upfront_fee_usd)
            refusal = f"{sentence}, less than the offering's fee {fee}"
    if refusal is None:
        return plan, None
    reason = f"{refusal}: nothing was bought. {plan.reason}"
    return replace(plan, decision=Decision.REJECTED, reason=reason), refusal


def left_in_month(ports: Ports, team: TeamPolicy, now: datetime) -> tuple[Decimal, str]:
    """USD the team may still commit in ``now``'s month (never below 0, the account cap included), and the
    sentence naming it (``team ml-eval has $812.40 left in December 2026``)."""
    store = _store(ports)
    month = month_key(now.year, now.month)
    left = team.monthly_budget_usd - store.spent(month, team.name)
    sentence = f"team {team.name} has {format_usd(max(left, Decimal(0)))} left in {month_name(month)}"
    account = store.account()
    if account is not None:
        account_left = account.monthly_cap_usd - store.spent(month, None)
        if account_left < left:
            left = account_left
            sentence += f" (the account has {format_usd(max(account_left, Decimal(0)))} left)"
    return max(left, Decimal(0)), sentence


def reserve_spend(
    ports: Ports,
    *,
    key: str,
    team_name: str | None,
    amount_usd: Decimal,
    instance_type: str,
    instance_count: int,
    spend: str = "the purchase",
    nothing: str = "nothing was bought",
) -> Hold | None:
    """Hold ``amount_usd`` of the team's month (and the account's) and ``instance_count`` instances of the
    team's quota for spend ``key``, atomically, right before the money is spent: a purchase call, an
    extension's, or an on-demand launch (:mod:`capacity.logic.governance.on_demand_spend`).

    Idempotent per ``key``: a retry holds nothing twice; a larger ``amount_usd`` (a re-searched offering)
    raises the hold by the difference under the same conditions. The month is the UTC month of the first
    hold. ``spend`` names what is paid for and ``nothing`` what did not happen, in the refusal ("the purchase
    costs $2,400.00: nothing was bought").

    Returns:
        The hold (its ``money_returned`` set when it was given back earlier: the caller must not spend on
        it), or None when the deployment has no policy table.

    Raises:
        TeamLimitExceeded: the team's budget, the account cap or the quota would be exceeded; the message
            names what is left ("team ml-eval has $812.40 left in December 2026"). Nothing is held.
        RetryableAwsError: DynamoDB throttled or the transaction conflicted (retry).
    """
    store = ports.policy
    if store is None:
        return None
    team = store.team(team_name) if team_name else None
    if team is None:
        raise TeamLimitExceeded(
            f"purchase {key} is charged to no known team ({team_name}); nothing was bought"
        )
    now = ports.clock()
    old = store.hold(key)
    if old is not None and old.amount_usd >= amount_usd:
        return old
    month = old.month if old is not None else month_key(now.year, now.month)
    family = instance_family(instance_type)
    delta = amount_usd - (old.amount_usd if old is not None else Decimal(0))
    account = store.account()
    quota = team.quota_for(instance_type)
    rooms = Rooms(
        team_usd=team.monthly_budget_usd - delta,
        account_usd=account.monthly_cap_usd - delta if account is not None else None,
        quota_instances=quota - instance_count,
    )
    try:
        _precheck(rooms, new=old is None)
        store.change_hold(
            key=key,
            team=team.name,
            month=month,
            old=old,
            amount_usd=amount_usd,
            family=family,
            instances=instance_count,
            rooms=rooms,
            actor=ports.actor,
            now=now,
        )
    except HoldRefused as refused:
        if refused.limit == "hold":  # another attempt changed the hold meanwhile: judge again from it
            return reserve_spend(
                ports,
                key=key,
                team_name=team_name,
                amount_usd=amount_usd,
                instance_type=instance_type,
                instance_count=instance_count,
                spend=spend,
                nothing=nothing,
            )
        raise TeamLimitExceeded(
            _refusal(
                store,
                team,
                refused,
                month=month,
                amount=amount_usd,
                instance_type=instance_type,
                quota=quota,
                spend=spend,
                nothing=nothing,
            )
        ) from None
    held = store.hold(key)
    logger.info("held %s for %s (team %s, %s)", amount_usd, key, team.name, month)
    return held


def _precheck(rooms: Rooms, *, new: bool) -> None:
    """Refuse without a transaction what no counter can allow (the change alone exceeds the limit)."""
    if rooms.team_usd < 0 or (rooms.account_usd is not None and rooms.account_usd < 0):
        raise HoldRefused("team" if rooms.team_usd < 0 else "account")
    if new and rooms.quota_instances is not None and rooms.quota_instances < 0:
        raise HoldRefused("quota")


def _refusal(
    store: PolicyStore,
    team: TeamPolicy,
    refused: HoldRefused,
    *,
    month: str,
    amount: Decimal,
    instance_type: str,
    quota: int,
    spend: str,
    nothing: str,
) -> str:
    fee = format_usd(amount)
    if refused.limit == "quota":
        family = instance_family(instance_type)
        used = store.reserved_instances(team.name, family)
        return (
            f"team {team.name} holds {used} of its {quota} {family} instances; {spend} needs more than the "
            f"{max(quota - used, 0)} left: {nothing}"
        )
    if refused.limit == "account":
        account = store.account()
        cap = account.monthly_cap_usd if account else Decimal(0)
        left = max(cap - store.spent(month, None), Decimal(0))
        return (
            f"the account has {format_usd(left)} left in {month_name(month)} of its {format_usd(cap)} cap; "
            f"{spend} costs {fee}: {nothing}"
        )
    left = max(team.monthly_budget_usd - store.spent(month, team.name), Decimal(0))
    return (
        f"team {team.name} has {format_usd(left)} left in {month_name(month)} of its monthly budget "
        f"{format_usd(team.monthly_budget_usd)}; {spend} costs {fee}: {nothing}"
    )


def settle_spend(ports: Ports, *, key: str, amount_usd: Decimal) -> None:
    """Set hold ``key`` to what the purchase really cost (AWS's fee): the difference is given back or taken,
    never refused (the money is spent). Nothing when there is no hold (or no policy)."""
    store = ports.policy
    if store is None:
        return
    old = store.hold(key)
    if old is None or old.amount_usd == amount_usd or old.money_returned:
        return
    try:
        store.change_hold(
            key=key,
            team=old.team,
            month=old.month,
            old=old,
            amount_usd=amount_usd,
            family=old.family,
            instances=old.instances,
            rooms=Rooms(team_usd=Decimal("1e30"), account_usd=None, quota_instances=None),
            actor=ports.actor,
            now=ports.clock(),
        )
    except HoldRefused:  # changed by a concurrent attempt: it settles the same fee
        logger.info("hold %s changed meanwhile; not settled again", key)


def give_back(ports: Ports, key: str, *, money: bool, quota: bool) -> bool:
    """Return hold ``key``'s money and/or instances, once each (a purchase never made or voided by AWS: both;
    a released reservation: the quota). False when there was nothing to return (or no policy)."""
    store = ports.policy
    if store is None:
        return False
    hold = store.hold(key)
    if hold is None:
        return False
    returned = store.give_back(hold, money=money, quota=quota, now=ports.clock())
    if returned:
        logger.info("gave back hold %s (money %s, quota %s)", key, money, quota)
    return returned


def purchase_check(
    request: ReservationRequest, amount_usd: Decimal, ports: Ports, *, key: str | None = None
) -> None:
    """The team check of a reservation's purchase (:func:`reserve_spend` keyed on ``key``: the request id,
    or a later purchase attempt's own key, :func:`capacity.logic.continuity.attempts.hold_key`).

    Raises:
        TeamLimitExceeded: see :func:`reserve_spend`.
    """
    reserve_spend(
        ports,
        key=key or request.id,
        team_name=request.team,
        amount_usd=amount_usd,
        instance_type=request.instance_type,
        instance_count=request.instance_count,
    )


# ------------------------------------------------------------------------------------------ admin


class PolicySeed(Model):
    """A seed file (``deploy/policy-seed.json``): the account cap and the teams; keys starting with ``_`` are
    comments."""

    model_config = ConfigDict(extra="forbid")

    account: AccountPolicy | None = None
    admins: Principals | None = None
    people: list[Person] | None = Field(default=None, max_length=5000)
    teams: list[TeamPolicy] = Field(default_factory=list, max_length=500)


def apply_seed(data: Mapping[str, Any], store: PolicyStore, *, actor: str, now: datetime) -> int:
    """Validate a whole seed, then write it (teams replaced, others kept). Returns the teams written.

    Raises:
        InvalidRequest: anything in the seed is invalid (nothing is written then).
    """
    seed = parse_model(
        PolicySeed, {key: value for key, value in data.items() if not str(key).startswith("_")}
    )
    names = [team.name for team in seed.teams]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidRequest(
            [FieldError("teams", f"team names must be unique, repeated: {', '.join(repeated)}")]
        )
    problem = _people_problem(seed.people or [])
    if problem:
        raise InvalidRequest([FieldError("people", problem)])
    if seed.account is not None:
        store.put_account(seed.account, actor=actor, now=now)
    if seed.admins is not None:
        store.put_admins(seed.admins, actor=actor, now=now)
    if seed.people is not None:
        store.put_people(seed.people, actor=actor, now=now)
    for team in seed.teams:
        store.put_team(team, actor=actor, now=now)
    return len(seed.teams)


def _people_problem(people: Sequence[Person]) -> str | None:
    """Why ``people`` cannot be one list (an identity named for two people would make both one), or None."""
    seen: dict[str, str] = {}
    for person in people:
        for identity in [*person.iam_principal_arns, *(f"slack:{u}" for u in person.slack_users)]:
            if identity in seen and seen[identity] != person.name:
                return f"{identity} is named for both {seen[identity]} and {person.name}: name it once"
            seen[identity] = person.name
    return None


def _store(ports: Ports) -> PolicyStore:
    store = ports.policy
    if store is None:
        raise ConfigurationError("POLICY_TABLE is not set: this deployment has no teams policy table")
    return store


def team_view(ports: Ports, team: TeamPolicy) -> dict[str, Any]:
    """A team as the admin routes answer it, with this month's spend (USD) and the instances held now."""
    store = _store(ports)
    now = ports.clock()
    month = month_key(now.year, now.month)
    spent = store.spent(month, team.name)
    return {
        "team": team.model_dump(mode="json", exclude_none=True),
        "month": month,
        "spent_usd": f"{spent:f}",
        "left_usd": f"{max(team.monthly_budget_usd - spent, Decimal(0)):f}",
        "instances_held": {
            family: store.reserved_instances(team.name, family) for family in team.instance_quota
        },
    }


def put_team(name: str, body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """``PUT /admin/teams/{name}``: create or replace a team (its spend and holds are kept).

    Raises:
        InvalidRequest: the body is not a valid :class:`~capacity.teams.TeamPolicy`, or its ``name`` differs
            from the path's.
    """
    if isinstance(body, Mapping) and "name" not in body:
        body = {**body, "name": name}
    team = parse_model(TeamPolicy, body)
    if team.name != name:
        raise InvalidRequest(
            [FieldError("name", f"is {team.name!r} but the path names {name!r}: make them equal")]
        )
    _store(ports).put_team(team, actor=actor, now=ports.clock())
    return team_view(ports, team)


def get_team(name: str, ports: Ports) -> dict[str, Any]:
    """``GET /admin/teams/{name}``.

    Raises:
        TeamNotFound: no such team.
    """
    team = _store(ports).team(name)
    if team is None:
        raise TeamNotFound(f"no team {name!r}")
    return team_view(ports, team)


def list_teams(ports: Ports) -> dict[str, Any]:
    """``GET /admin/teams``: every team and the account cap."""
    store = _store(ports)
    account = store.account()
    return {
        "teams": [team_view(ports, team) for team in store.teams()],
        "account": account.model_dump(mode="json") if account else None,
    }


def delete_team(name: str, ports: Ports) -> dict[str, Any]:
    """``DELETE /admin/teams/{name}``: its members can no longer request; reservations already bought stay.

    Raises:
        TeamNotFound: no such team.
    """
    if not _store(ports).delete_team(name):
        raise TeamNotFound(f"no team {name!r}")
    return {"name": name, "deleted": True}


def put_account(body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """``PUT /admin/account``: the account-wide monthly cap (USD), with this month's spend."""
    account = parse_model(AccountPolicy, body)
    store = _store(ports)
    store.put_account(account, actor=actor, now=ports.clock())
    now = ports.clock()
    month = month_key(now.year, now.month)
    return {**account.model_dump(mode="json"), "month": month, "spent_usd": f"{store.spent(month, None):f}"}


def get_admins(ports: Ports) -> dict[str, Any]:
    """``GET /admin/admins``: who sees every team's reservations, schedules and spend (:func:`is_admin`;
    every list empty when nobody is named)."""
    admins = _store(ports).admins()
    return (admins or Principals()).model_dump(mode="json")


def put_admins(body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """``PUT /admin/admins``: replace who administers (matched as members are: ARN pattern, IAM principal
    tag, Slack user or user group), without seeding again. Who may call the admin routes is IAM's
    (``deploy/admin-policy.json``); this decides who sees all.

    Raises:
        InvalidRequest: the body is not a :class:`~capacity.teams.Principals` (nothing changed).
    """
    admins = parse_model(Principals, body)
    _store(ports).put_admins(admins, actor=actor, now=ports.clock())
    return admins.model_dump(mode="json")


def get_people(ports: Ports) -> dict[str, Any]:
    """``GET /admin/people``: whose identities are one person's (``{"people": [...]}``)."""
    return {"people": [person.model_dump(mode="json") for person in _store(ports).people()]}


class PeopleBody(Model):
    """``PUT /admin/people``: the whole list of people (:class:`~capacity.teams.Person`), replaced at once."""

    model_config = ConfigDict(extra="forbid")

    people: list[Person] = Field(max_length=5000)


def put_people(body: Any, ports: Ports, *, actor: str) -> dict[str, Any]:
    """``PUT /admin/people``: replace whose identities are one person's (the four-eyes rule compares
    people: :func:`same_person`), without seeding again.

    Raises:
        InvalidRequest: the body is invalid, or an identity is named for two people (nothing changed).
    """
    people = parse_model(PeopleBody, body).people
    problem = _people_problem(people)
    if problem:
        raise InvalidRequest([FieldError("people", problem)])
    _store(ports).put_people(people, actor=actor, now=ports.clock())
    return {"people": [person.model_dump(mode="json") for person in people]}
