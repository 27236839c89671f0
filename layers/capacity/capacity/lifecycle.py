"""The reservation's lifecycle, written once (issue 28): what may follow what, for every writer.

Over 400 lines: the table, its one decision function and the diagram generated from it are one definition.

A reservation has many writers (the doors, the reserve, extend and release workflows, the roll-over, notify,
the schedules). Each names an :class:`Event`; :func:`decide` answers, from the reservation's
:class:`Snapshot`, whether the table (:data:`RULES`) allows it and what the snapshot becomes. The ledger
applies the answer in one DynamoDB transaction conditional on the snapshot's ``version``
(:meth:`capacity.ledger.Ledger.record`), so a transition the table does not allow is never written, and of
two writers racing from one snapshot only one wins (the other decides again from the new one).

The snapshot (the ledger's ``CURRENT`` item) is:

- ``phase``: where the reservation is on its way (``REQUESTED`` ... ``READY``, ``RELEASING``,
  ``RELEASED``); None before anything is recorded;
- ``outcome``: the decision that ended it early, once recorded (``CANCELLED``, ``REJECTED`` or ``FAILED``):
  after it nothing moves forward; its release may still run, and money already in flight is still recorded;
- ``in_flight``: **money in flight**: a purchase or an extension whose AWS call may have committed
  (``CreateTrainingPlan``, ``PurchaseCapacityBlock``, ``ExtendTrainingPlan``,
  ``PurchaseCapacityBlockExtension``: no client token, paid upfront, never refunded) and is not reconciled
  yet. It is opened (:attr:`Event.MONEY_CALL`) just before the call, in the same transaction that checks the
  reservation may still spend, and closed by what reconciles it: the money recorded
  (:attr:`Event.PURCHASE`, :attr:`Event.EXTEND`) or nothing bought (:attr:`Event.MONEY_SETTLED`). While it is
  open the release does not begin (:attr:`Event.START_RELEASE` waits), so a release never deletes what a
  payment in flight is buying, and a payment never lands on a released reservation;
- ``state``: the label of the last recorded entry (what the listing shows): the phase, or the outcome, or
  ``EXTENDED`` / a release's ``FAILED``, which annotate the phase without moving it.

Every recorded history is a path of the table (:func:`replay` checks one); the state diagram in
docs/architecture.md is generated from :data:`RULES` (:func:`mermaid`).

Three answers (:class:`Verdict`): ``apply`` (the new snapshot, and the entry to record, if any); ``skip``
(already done: a retried step, a duplicate delivery, a step that is behind: nothing is written and the writer
does nothing more); ``refuse`` (the table does not allow it: ``stopped`` when the reservation has an outcome
or its release began, which the writers read as :class:`~capacity.errors.ReservationCancelled`; else a
:class:`~capacity.errors.TransitionRefused`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal

from capacity.records import State


class Event(StrEnum):
    """What moves a reservation; each writer names one (its docstring says who writes it)."""

    REQUEST = "request"
    """The request is recorded (``record_request``)."""
    LOOK = "look"
    """Nothing fits the rules yet: the request keeps looking (``SEARCHING``)."""
    PLAN = "plan"
    """An offering (or on-demand capacity) is chosen (``PLANNED``)."""
    ASK_APPROVAL = "ask-approval"
    """A person must approve the purchase (``AWAITING_APPROVAL``)."""
    PURCHASE = "purchase"
    """The purchase is recorded with its money (``PURCHASED``); closes the ``purchase`` money in flight."""
    SCHEDULE = "schedule"
    """AWS reports the reservation ``Scheduled``."""
    ACTIVATE = "activate"
    """AWS reports the reservation ``Active``."""
    DEPLOY = "deploy"
    """The endpoint (or the instances) are being created on it (``DEPLOYING``)."""
    SERVE = "serve"
    """The models serve (``READY``)."""
    EXTEND = "extend"
    """An extension in place is paid (``EXTENDED``, its fee): closes its money in flight; the phase stays."""
    START_RELEASE = "start-release"
    """The release begins (``RELEASING``): never while money is in flight."""
    FINISH_RELEASE = "finish-release"
    """Nothing of the reservation is left (``RELEASED``, with the cost summary)."""
    RELEASE_FAIL = "release-fail"
    """A release attempt failed (``FAILED``, phase ``release``); the next attempt is scheduled."""
    CANCEL = "cancel"
    """A person cancelled it (``CANCELLED``, an outcome)."""
    REJECT = "reject"
    """It was refused: an approver, no approval in time, the team's rules (``REJECTED``, an outcome)."""
    FAIL = "fail"
    """The reserve workflow failed (``FAILED``, an outcome)."""
    MONEY_CALL = "money-call"
    """A purchase or extension call may commit from now on (``key``: ``purchase`` or ``extension:<id>``)."""
    MONEY_SETTLED = "money-settled"
    """The call behind ``key`` is reconciled and bought nothing (or nothing more)."""


OUTCOMES = frozenset({State.CANCELLED, State.REJECTED, State.FAILED})
"""The decisions that end a reservation early (one per reservation)."""

_ORDER: tuple[State, ...] = (
    State.REQUESTED,
    State.SEARCHING,
    State.PLANNED,
    State.AWAITING_APPROVAL,
    State.PURCHASED,
    State.SCHEDULED,
    State.ACTIVE,
    State.DEPLOYING,
    State.READY,
    State.RELEASING,
    State.RELEASED,
)
PHASES = frozenset(_ORDER)
"""The phases, in the order a reservation goes through them."""
STOPPING = frozenset({State.RELEASING, State.RELEASED})
"""Phases in which nothing moves forward any more."""
_CHOOSING = frozenset({State.REQUESTED, State.SEARCHING, State.PLANNED, State.AWAITING_APPROVAL})
_HELD = frozenset({State.PURCHASED, State.SCHEDULED, State.ACTIVE, State.DEPLOYING, State.READY})
"""Phases with capacity bought (or launched) and not released."""
_BEFORE_RELEASE = frozenset({None, *_CHOOSING, *_HELD})

PURCHASE_KEY = "purchase"
"""The ``in_flight`` key of a purchase call (one purchase at a time per reservation)."""
EXTENSION_KEY = "extension:"
"""The ``in_flight`` key prefix of an extension call: ``extension:<extension id>``."""


def extension_key(extension_id: str) -> str:
    """The ``in_flight`` key of extension ``extension_id``."""
    return f"{EXTENSION_KEY}{extension_id}"


AfterOutcome = Literal["refused", "settling", "allowed"]


@dataclass(frozen=True)
class Rule:
    """One event of the table.

    Attributes:
        event: the event.
        records: the ledger entry's state (``STATE#`` item), None when only the snapshot changes.
        sources: the phases it may follow (None: nothing recorded yet).
        to: the phase after it; None keeps the phase (an annotation or an outcome).
        outcome: the outcome it records, if any (one per reservation).
        after_outcome: once an outcome is recorded, ``refused``; ``settling`` (allowed only when it closes
            money in flight: money paid is always recorded); ``allowed``.
        opens: adds the event's ``key`` to the money in flight.
        settles: closes the event's ``key`` (``required``: it must be open; ``if-open``: when it is).
        waits_for_money: refused while any money is in flight.
        repeatable: may be recorded again in the same phase; otherwise a repeat is skipped.
        label: the arrow's text in the diagram.
    """

    event: Event
    records: State | None
    sources: frozenset[State | None]
    to: State | None = None
    outcome: State | None = None
    after_outcome: AfterOutcome = "refused"
    opens: bool = False
    settles: Literal["no", "required", "if-open"] = "no"
    waits_for_money: bool = False
    repeatable: bool = False
    label: str = ""


def _rule(event: Event, records: State | None, sources: Iterable[State | None], **kwargs: object) -> Rule:
    return Rule(event, records, frozenset(sources), **kwargs)  # type: ignore[arg-type]


RULES: Mapping[Event, Rule] = {
    rule.event: rule
    for rule in (
        _rule(Event.REQUEST, State.REQUESTED, [None], to=State.REQUESTED, label="recorded"),
        _rule(
            Event.LOOK,
            State.SEARCHING,
            [State.REQUESTED, State.SEARCHING, State.PLANNED, State.AWAITING_APPROVAL],
            to=State.SEARCHING,
            repeatable=True,
            label="nothing fits yet / offering taken",
        ),
        _rule(
            Event.PLAN,
            State.PLANNED,
            [State.REQUESTED, State.SEARCHING],
            to=State.PLANNED,
            label="offering chosen",
        ),
        _rule(
            Event.ASK_APPROVAL,
            State.AWAITING_APPROVAL,
            [State.PLANNED],
            to=State.AWAITING_APPROVAL,
            label="above the threshold",
        ),
        _rule(
            Event.PURCHASE,
            State.PURCHASED,
            [State.REQUESTED, State.SEARCHING, State.PLANNED, State.AWAITING_APPROVAL],
            to=State.PURCHASED,
            after_outcome="settling",
            settles="if-open",
            label="paid (or brought)",
        ),
        _rule(Event.SCHEDULE, State.SCHEDULED, [State.PURCHASED], to=State.SCHEDULED, label="Scheduled"),
        _rule(
            Event.ACTIVATE, State.ACTIVE, [State.PURCHASED, State.SCHEDULED], to=State.ACTIVE, label="Active"
        ),
        _rule(
            Event.DEPLOY,
            State.DEPLOYING,
            [State.ACTIVE, State.PLANNED],
            to=State.DEPLOYING,
            label="endpoint / instances",
        ),
        _rule(Event.SERVE, State.READY, [State.DEPLOYING], to=State.READY, label="in service"),
        _rule(
            Event.EXTEND,
            State.EXTENDED,
            _HELD,
            after_outcome="settling",
            settles="required",
            repeatable=True,
            label="extension paid",
        ),
        _rule(
            Event.START_RELEASE,
            State.RELEASING,
            [*_BEFORE_RELEASE - {None}, State.RELEASING],
            to=State.RELEASING,
            after_outcome="allowed",
            waits_for_money=True,
            label="end, idle, cancel, failure",
        ),
        _rule(
            Event.FINISH_RELEASE,
            State.RELEASED,
            [State.RELEASING],
            to=State.RELEASED,
            after_outcome="allowed",
            label="nothing left",
        ),
        _rule(
            Event.RELEASE_FAIL,
            State.FAILED,
            [*_HELD, State.RELEASING, State.RELEASED],
            after_outcome="allowed",
            repeatable=True,
            label="attempt failed (retried)",
        ),
        _rule(Event.CANCEL, State.CANCELLED, _BEFORE_RELEASE, outcome=State.CANCELLED, label="cancel"),
        _rule(Event.REJECT, State.REJECTED, _CHOOSING, outcome=State.REJECTED, label="rejected"),
        _rule(Event.FAIL, State.FAILED, _BEFORE_RELEASE, outcome=State.FAILED, label="failed"),
        _rule(
            Event.MONEY_CALL,
            None,
            [*_CHOOSING, *_HELD],
            opens=True,
            repeatable=True,
            label="purchase / extension call",
        ),
        _rule(
            Event.MONEY_SETTLED,
            None,
            PHASES,
            after_outcome="allowed",
            settles="if-open",
            repeatable=True,
            label="reconciled: nothing bought",
        ),
    )
}
"""The table: one :class:`Rule` per :class:`Event`."""


@dataclass(frozen=True)
class Snapshot:
    """A reservation's lifecycle state (the ledger's ``CURRENT`` item; see the module docstring).

    ``version`` counts the transitions applied (0: nothing recorded); ``state_sk`` is the ``STATE#`` item of
    the last entry (None before one)."""

    phase: State | None = None
    outcome: State | None = None
    in_flight: frozenset[str] = field(default_factory=frozenset)
    version: int = 0
    state: State | None = None
    state_sk: str | None = None

    @property
    def stopped(self) -> bool:
        """True once an outcome is recorded or the release began: nothing moves forward any more."""
        return self.outcome is not None or self.phase in STOPPING


@dataclass(frozen=True)
class Verdict:
    """:func:`decide`'s answer.

    Attributes:
        action: ``apply``, ``skip`` or ``refuse``.
        after: the snapshot once applied (``apply``), else the snapshot decided from.
        records: the entry's state to record (``apply`` of an event that records one), else None.
        reason: why it was skipped or refused, for a person and the logs.
        stopped: a refusal because the reservation has an outcome or its release began (the writer stops:
            :class:`~capacity.errors.ReservationCancelled`); False for any other refusal.
        waits_for_money: a refusal because money is in flight (the release waits for it).
    """

    action: Literal["apply", "skip", "refuse"]
    after: Snapshot
    records: State | None = None
    reason: str = ""
    stopped: bool = False
    waits_for_money: bool = False


def _rank(phase: State | None) -> int:
    return -1 if phase is None else _ORDER.index(phase)


def decide(snapshot: Snapshot, event: Event, *, key: str | None = None) -> Verdict:
    """Whether ``event`` may follow ``snapshot`` and what the snapshot becomes (the one rule of every writer).

    Args:
        snapshot: the reservation's current snapshot.
        event: what the writer records.
        key: the money in flight the event opens or closes (``MONEY_CALL``, ``MONEY_SETTLED``, ``EXTEND``;
            ``PURCHASE`` closes :data:`PURCHASE_KEY` itself).

    Returns:
        The :class:`Verdict`. Pure: no I/O.

    Raises:
        ValueError: ``MONEY_CALL`` without a ``key``.
    """
    rule = RULES[event]
    key = PURCHASE_KEY if event is Event.PURCHASE else key
    if rule.opens and key is None:
        raise ValueError(f"{event.value} needs the key of the money it opens")
    open_key = key is not None and key in snapshot.in_flight
    reason = _skip_reason(snapshot, rule, open_key=open_key)
    if reason is not None:
        return Verdict("skip", snapshot, reason=reason)
    refusal = _refusal(snapshot, rule, open_key=open_key)
    if refusal is not None:
        return refusal
    in_flight = snapshot.in_flight
    if rule.opens and key is not None:
        in_flight = in_flight | {key}
    if rule.settles != "no" and open_key and key is not None:
        in_flight = in_flight - {key}
    after = replace(
        snapshot,
        phase=rule.to if rule.to is not None else snapshot.phase,
        outcome=rule.outcome if rule.outcome is not None else snapshot.outcome,
        in_flight=frozenset(in_flight),
        version=snapshot.version + 1,
        state=rule.records if rule.records is not None else snapshot.state,
    )
    return Verdict("apply", after, records=rule.records)


def _skip_reason(snapshot: Snapshot, rule: Rule, *, open_key: bool) -> str | None:
    """Why ``rule``'s event is done already (a retry, a duplicate, a step behind), or None. A step that a
    stopped reservation refuses is refused, not skipped (the first checks are about money and outcomes)."""
    event, phase = rule.event, snapshot.phase
    ended = snapshot.outcome or (phase if phase in STOPPING else None)
    going_on = not snapshot.stopped or _allowed_when_stopped(snapshot, rule, open_key=open_key)
    behind = rule.to in PHASES and phase not in rule.sources and _rank(phase) > _rank(rule.to)
    checks = (
        (rule.settles == "required" and not open_key, f"{event.value}: its money is not in flight"),
        (event is Event.MONEY_SETTLED and not open_key, "that money is not in flight (settled already)"),
        (rule.opens and open_key, "that money is in flight already"),
        (rule.outcome is not None and ended is not None, f"the reservation is {ended and ended.value}"),
        (going_on and phase is State.RELEASED and event in _RELEASE_EVENTS, "released already"),
        (going_on and rule.to is not None and rule.to == phase and not rule.repeatable, "done already"),
        (going_on and behind, f"{rule.to and rule.to.value} is behind {phase and phase.value}"),
    )
    return next((reason for hit, reason in checks if hit), None)


_RELEASE_EVENTS = frozenset({Event.START_RELEASE, Event.FINISH_RELEASE})


def _allowed_when_stopped(snapshot: Snapshot, rule: Rule, *, open_key: bool) -> bool:
    """Whether ``rule``'s event may still happen once an outcome is recorded or the release began."""
    if rule.after_outcome == "allowed":
        return True
    return rule.after_outcome == "settling" and open_key and snapshot.phase not in STOPPING


def _refusal(snapshot: Snapshot, rule: Rule, *, open_key: bool) -> Verdict | None:
    """The refusal of ``rule``'s event from ``snapshot``, or None when the table allows it."""
    if snapshot.stopped and not _allowed_when_stopped(snapshot, rule, open_key=open_key):
        ended = snapshot.outcome or snapshot.phase
        return Verdict("refuse", snapshot, reason=f"is {ended and ended.value}", stopped=True)
    if snapshot.phase not in rule.sources:
        where = snapshot.phase.value if snapshot.phase else "nothing recorded"
        return Verdict("refuse", snapshot, reason=f"{rule.event.value} may not follow {where}")
    if rule.waits_for_money and snapshot.in_flight:
        return Verdict(
            "refuse",
            snapshot,
            reason=f"money in flight ({', '.join(sorted(snapshot.in_flight))})",
            waits_for_money=True,
        )
    return None


def event_of(
    state: State, detail: Mapping[str, object] | None = None, *, phase: State | None = None
) -> Event:
    """The event a recorded entry ``state`` stands for (``FAILED`` of a release is :attr:`Event.RELEASE_FAIL`:
    ``detail.phase`` ``release``, or recorded while releasing)."""
    if state is State.FAILED and ((detail or {}).get("phase") == "release" or phase is State.RELEASING):
        return Event.RELEASE_FAIL
    return next(
        rule.event
        for rule in RULES.values()
        if rule.records is state and rule.event is not Event.RELEASE_FAIL
    )


def replay(entries: Sequence[tuple[State, Mapping[str, object]]]) -> list[str]:
    """Check that a recorded history (oldest first: each entry's state and detail) is a path of the table.

    Money in flight is not in the history (it lives in the snapshot): an ``EXTENDED`` or a ``PURCHASED`` after
    an outcome is taken to close money that was open. Returns the problems (empty: a path of the table)."""
    snapshot = Snapshot()
    problems: list[str] = []
    for index, (state, detail) in enumerate(entries):
        event = event_of(state, detail, phase=snapshot.phase)
        key = None
        if event in (Event.EXTEND, Event.PURCHASE):
            key = PURCHASE_KEY if event is Event.PURCHASE else extension_key(str(index))
            snapshot = replace(snapshot, in_flight=snapshot.in_flight | {key})
        verdict = decide(snapshot, event, key=key)
        if verdict.action == "refuse" or (verdict.action == "skip" and not RULES[event].repeatable):
            if verdict.action == "refuse" or state is not snapshot.state:
                where = snapshot.phase.value if snapshot.phase else "nothing"
                problems.append(f"#{index} {state.value} after {where}: {verdict.reason}")
            continue
        snapshot = verdict.after if verdict.action == "apply" else snapshot
    return problems


_GROUPS: tuple[tuple[str, str, frozenset[State | None]], ...] = (
    ("choosing", "choosing (nothing paid)", _CHOOSING),
    ("held", "capacity held (paid, not released)", _HELD),
)
"""The diagram's composite states: an arrow every phase of a group may take is drawn once, from the group."""


def mermaid() -> str:
    """The state diagram of :data:`RULES` (mermaid ``stateDiagram-v2``; docs/architecture.md holds it, a gate
    test keeps it current): each phase move; an event every phase of a group may take, drawn once from the
    group (``choosing``, ``held``); what may still follow an outcome (money in flight recorded, the release);
    annotations that keep the phase as self arrows. Arrows carry the event's name."""
    inner: dict[str, list[str]] = {name: [] for name, _, _ in _GROUPS}
    outer: list[str] = []

    def name(state: State | None) -> str:
        return state.value if state else "[*]"

    def group_of(state: State | None) -> str | None:
        return next((g for g, _, members in _GROUPS if state in members), None)

    def arrow(source: str, target: str, label: str) -> None:
        line = f"{source} --> {target}: {label}" if label else f"{source} --> {target}"
        home = group_of(State(source)) if source in State.__members__ else None
        same = home is not None and target in State.__members__ and group_of(State(target)) == home
        (inner[home] if same and home else outer).append(line)

    for rule in RULES.values():
        if rule.records is None:
            continue  # money in flight: the note below
        sources = set(rule.sources)
        for group, _, members in _GROUPS:
            if members <= sources and (rule.to is None or rule.to not in members):
                into = name(rule.to or rule.outcome) if rule.to or rule.outcome else group
                outer.append(f"{group} --> {into}: {_label(rule)}")
                sources -= members
        for source in sorted(sources, key=_rank):
            target = rule.to or rule.outcome or source
            if source == target and rule.to is not None:
                continue  # a repeat (a retried step) is skipped
            suffix = " (before it was recorded)" if source is None and rule.outcome is not None else ""
            arrow(name(source), name(target), _label(rule) + suffix)
    for outcome in sorted(OUTCOMES, key=str):
        outer.append(
            f"{outcome.value} --> {State.PURCHASED.value}: {Event.PURCHASE.value} (money in flight lands)"
        )
        outer.append(f"{outcome.value} --> {outcome.value}: {Event.EXTEND.value} (money in flight lands)")
        outer.append(f"{outcome.value} --> {State.RELEASING.value}: {Event.START_RELEASE.value}")
        outer.append(f"{outcome.value} --> [*]: nothing bought")
    outer.append(f"{State.RELEASED.value} --> [*]")
    lines = ["stateDiagram-v2"]
    for group, title, members in _GROUPS:
        lines.append(f'    state "{title}" as {group} {{')
        lines += [f"        {m.value}" for m in sorted((m for m in members if m), key=_rank)]
        lines += [f"        {line}" for line in dict.fromkeys(inner[group])]
        lines.append("    }")
    lines += [f"    {line}" for line in dict.fromkeys(outer)]
    lines += [
        "    note right of RELEASING",
        "        never while money is in flight: a purchase or an extension whose call may have committed",
        "    end note",
    ]
    return "\n".join(lines) + "\n"


def _label(rule: Rule) -> str:
    """An arrow's text: the event, and the entry when it does not move the phase (an annotation)."""
    if rule.to is None and rule.outcome is None and rule.records is not None:
        return f"{rule.event.value} ({rule.records.value})"
    return rule.event.value
