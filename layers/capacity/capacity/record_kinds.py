"""The catalogue of every kind of ledger item (issue 28): its ``sk``, what it records, who writes it, and
whether it is written once or replaced.

Over 400 lines: one entry per kind, each with its docstring; the catalogue is read as a whole.

The ledger (:mod:`capacity.ledger`, env ``LEDGER_TABLE``) keys every item by ``request_id`` (the partition)
and ``sk``. Each kind below is a constant: the ``sk`` itself (``PURCHASE``) or its first part
(``EXTENSION`` in ``EXTENSION#<extension id>``; a ``_PREFIX`` name ends with the ``#``), registered with
the shapes its keys take (:data:`KINDS`: ``<...>`` stands for a variable part). Every item is put once
(``attribute_not_exists(sk)``) unless its entry says *replaced*; nothing is ever deleted.

Writers import the constants from here and nowhere else: ``tests/gates/test_record_kinds.py`` fails on a
ledger key defined in another module, and every integration test's local cloud checks, when it stops, that
each item its ledger holds is of a kind registered here (:func:`kind_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

REQUEST_PARTITION = "<request id>"
"""The partition of almost every kind: the reservation's request id."""


@dataclass(frozen=True)
class RecordKind:
    """One kind of ledger item.

    Attributes:
        name: the constant's value: the ``sk``, or its first part.
        shapes: the ``sk`` shapes the kind's items take (``<...>``: a variable part).
        replaced: True for the one kind that is replaced in place (``CURRENT``); else written once.
        partition: the shape of the items' ``request_id`` (:data:`REQUEST_PARTITION` but for ``BROUGHT#``).
    """

    name: str
    shapes: tuple[str, ...]
    replaced: bool = False
    partition: str = REQUEST_PARTITION
    _patterns: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _partition: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_patterns", tuple(_pattern(shape) for shape in self.shapes))
        object.__setattr__(self, "_partition", _pattern(self.partition))

    def holds(self, request_id: str) -> bool:
        """True when the partition ``request_id`` has this kind's shape."""
        return bool(self._partition.fullmatch(request_id))

    def matches(self, sk: str) -> bool:
        """True when ``sk`` has one of this kind's shapes."""
        return any(pattern.fullmatch(sk) for pattern in self._patterns)


def _pattern(shape: str) -> re.Pattern[str]:
    """A shape as a pattern: its literal parts as they are, each ``<...>`` one or more characters."""
    parts = re.split(r"<[^>]+>", shape)
    return re.compile(".+".join(re.escape(part) for part in parts))


_KINDS: dict[str, RecordKind] = {}


def _kind(name: str, *shapes: str, replaced: bool = False, partition: str = REQUEST_PARTITION) -> str:
    """Register the kind ``name`` (its ``sk`` shapes; default the name itself) and return ``name``."""
    if name in _KINDS:
        raise ValueError(f"ledger kind {name} registered twice")
    _KINDS[name] = RecordKind(name, shapes or (name,), replaced=replaced, partition=partition)
    return name


# ------------------------------------------------------------------------------------ the lifecycle

STATE_PREFIX = _kind("STATE#", "STATE#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<seq>")
"""A state change (a :class:`~capacity.records.LedgerEntry`): ``state``, ``at``, ``actor``, ``detail`` and
``money_usd`` (a USD decimal string) when money moves. Written by :meth:`capacity.ledger.Ledger.record` only,
as the lifecycle's table allows (:mod:`capacity.lifecycle`), in one transaction with :data:`CURRENT`;
``seq`` (4 digits) orders several changes within one millisecond. Write-once."""
CURRENT = _kind("CURRENT", replaced=True)
"""The reservation's lifecycle snapshot (``phase``, ``outcome``, ``in_flight``, ``version``,
``current_state``, ``state_sk``): put by :meth:`~capacity.ledger.Ledger.record` with each change, on the
condition that it still holds the ``version`` the change was decided from. The one kind ever *replaced*."""
OUTCOME = _kind("OUTCOME")
"""The reservation's one outcome (``CANCELLED``, ``REJECTED`` or ``FAILED``, with ``actor``, ``detail``,
``money_usd``): put by :meth:`~capacity.ledger.Ledger.record` in the outcome's transaction; readers that only
ask "has it ended?" read this one item; the outbox carries a person's cancel out from it. Write-once."""
REQUEST = _kind("REQUEST")
"""The validated request (``request``, ``actor``, ``listing``: the sparse GSI ``listing`` pages through
these): put by :meth:`~capacity.ledger.Ledger.record_request` (``record_request``, the workflow's first step);
its conditional put is the dedupe (``write_id``: the delivery's event id). Write-once."""
RESUME_PREFIX = _kind("RESUME#", "RESUME#<stopped execution ARN>")
"""``execution``: the reserve execution that carries on a stopped one (the workflow's new owner), put by
``record_request`` for a resumed delivery (:mod:`capacity.logic.steps.intake`,
:mod:`capacity.logic.steps.stopped`). Write-once."""
BROUGHT_PREFIX = _kind("BROUGHT#", "<request id>", partition="BROUGHT#<reservation ARN>")
"""A claim on a brought reservation (issue 17), in the partition ``BROUGHT#<reservation ARN>``: one item per
request that adopted it (``sk`` its request id, ``claimed_by``), put by ``purchase_capacity``'s adopt
(:meth:`~capacity.ledger.Ledger.claim_brought`). Write-once."""

# ------------------------------------------------------------------------------- the doors' decisions

SUBMITTED = _kind("SUBMITTED")
"""A ``POST /reservations`` the API accepted (202): the request as sent, ``actor`` (the caller) and the
effect ``ReservationRequested`` the outbox carries out (:mod:`capacity.logic.doors.api`). Write-once."""
CANCEL_REQUESTED = _kind("CANCEL_REQUESTED")
"""A ``DELETE`` that arrived before ``REQUEST`` was recorded: ``record_request`` reads it and does not
proceed (:mod:`capacity.logic.doors.api`, :mod:`capacity.logic.steps.intake`). Write-once."""
RELEASE_REQUEST = _kind("RELEASE_REQUEST", "RELEASE_REQUEST#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<nonce>")
"""A repeated cancel asking for the release again (effect ``release``: the outbox puts
``ReleaseRequested``), put by ``DELETE /reservations/{id}``
(:func:`capacity.logic.doors.api.cancel_reservation`). Write-once."""
EXTENSION_REQUEST = _kind("EXTENSION_REQUEST", "EXTENSION_REQUEST#<extension id>")
"""A door asked for an extension below the approval threshold (``offering``, ``requester``; effect
``extension-request``: the outbox puts ``ExtensionRequested``), put by ``POST .../extensions`` and the Slack
Extend button (:mod:`capacity.logic.doors.extension_request`). Write-once."""
SERVE_UNTIL = _kind("SERVE_UNTIL", "SERVE_UNTIL#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<seq>")
"""``serve_until`` (or None), ``rollover_lead_hours`` and ``actor`` set by ``PATCH /reservations/{id}``
(:mod:`capacity.logic.doors.serve_until`), on the reservation and every successor still running; the last one
counts (:func:`capacity.logic.continuity.chain.serving_target`); effect ``serve-until``
(``ServeUntilChanged``). Write-once."""
OUTBOX = _kind("OUTBOX", "OUTBOX#<decision sk>")
"""The effect of the decision item ``<decision sk>`` was carried out (``outcome`` says how), put by the
outbox (:mod:`capacity.logic.steps.outbox`, from the ledger's stream) or by the door that tried the effect at
once; ``OUTBOX#CANCELLED`` for a person's cancel. Write-once."""

# ------------------------------------------------------------------------------------ the approval

APPROVAL = _kind("APPROVAL", "APPROVAL", "APPROVAL#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<nonce>")
"""The task token of the purchase's approval wait (``offering``, ``approval_above_usd``), put by ``notify``
(:mod:`capacity.logic.steps.notify`); a retried approval task adds ``APPROVAL#<time>#<nonce>`` and the newest
wins. Write-once."""
APPROVAL_DECISION = _kind("APPROVAL_DECISION")
"""The first decision on the purchase (``approved``, ``approver``, the caller's IAM ``identity``,
``reason``), put by ``POST .../approval`` and the Slack buttons (:mod:`capacity.logic.doors.api`); its effect
``hand-back`` is the outbox's. Write-once: only the first decision counts."""
APPROVAL_DELIVERED = _kind("APPROVAL_DELIVERED")
"""The recorded decision was handed back to the waiting task (``SendTaskSuccess``/``Failure``), put by the
outbox; until it exists a repeated approval hands the recorded decision back again. Write-once."""
APPROVAL_REFUSED = _kind("APPROVAL_REFUSED", "APPROVAL_REFUSED#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<nonce>")
"""An approval (or rejection) refused by the team's rules (``identity``, ``approved``, ``reason``, and
``extension_id`` for an extension's), put by :mod:`capacity.logic.governance.policy`. Write-once."""

# ------------------------------------------------------------------------------------ the purchase

PURCHASE_INTENT = _kind("PURCHASE_INTENT", "PURCHASE_INTENT", "PURCHASE_INTENT#<attempt>")
"""Put before the purchase call is made (``owner``: the Step Functions execution that buys, ``platform``,
``region``, ``offering``), by ``purchase_capacity`` (:mod:`capacity.logic.steps.buy_once`); attempt ``n > 0``
of a request that keeps looking writes ``PURCHASE_INTENT#<n>``
(:func:`capacity.logic.continuity.attempts.intent_key`). Write-once: another execution's intent means that
execution buys."""
PURCHASE_CALL = _kind("PURCHASE_CALL", "PURCHASE_CALL#<YYYY-MM-DDTHH:MM:SS.mmmZ>")
"""One purchase call (``region``, ``offering``, ``attempt``), put just before ``CreateTrainingPlan`` or
``PurchaseCapacityBlock`` is called (:mod:`capacity.logic.steps.buy_once`): what a block found later cost.
Write-once."""
PURCHASE = _kind("PURCHASE")
"""What was bought (or adopted, or launched on demand): one :mod:`capacity.purchases` model per kind, with
the platform's own names (a training plan, a capacity block, an on-demand endpoint, on-demand or spot
instances), put by ``purchase_capacity`` (:func:`capacity.logic.steps.buy_once.record_purchase`) or the
on-demand tries (:func:`capacity.logic.steps.on_demand_record.put_purchase`). Write-once: one per request."""
LAUNCHED = _kind("LAUNCHED")
"""The instances ``RunInstances`` answered for a launch into a capacity block (``instance_ids``), put by
``launch_instances`` (:mod:`capacity.logic.ec2.launch`) as soon as the call returns: EC2's listings lag
behind ``RunInstances``, so a release right after the launch terminates these by id even when
``DescribeInstances`` does not show them yet (:mod:`capacity.logic.ec2.teardown`). Write-once (one client
token per request: a retried launch answers the same ids)."""
PURCHASE_VOIDED = _kind("PURCHASE_VOIDED")
"""AWS charged nothing for the purchase after all (a plan ``Failed``, a block ``payment-failed``:
``status``, ``upfront_fee_usd``), put by the activation poll
(:func:`capacity.logic.steps.common.void_purchase`); the ``FAILED`` that follows carries the negative money.
Write-once."""
PURCHASE_MISSED = _kind("PURCHASE_MISSED", "PURCHASE_MISSED#<attempt + 1>")
"""Attempt ``n - 1`` of a request that keeps looking bought nothing: its offering was taken (``offering``,
``reason``), put by :mod:`capacity.logic.continuity.keep_looking` after its hold was given back; how many
there are is the live attempt's number (:mod:`capacity.logic.continuity.attempts`). Write-once."""
SEARCH_WAIT = _kind("SEARCH_WAIT", "SEARCH_WAIT#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<nonce>")
"""The task token of a wait between two looks (keep looking, issue 17), put by
:mod:`capacity.logic.continuity.keep_looking`; the newest is the live one, which a cancel fails.
Write-once."""

# ------------------------------------------------------------------------------------ on demand

ON_DEMAND_TRY_PREFIX = _kind("ON_DEMAND_TRY#", "ON_DEMAND_TRY#<market>#<region>")
"""One on-demand try (``order``, ``market``, ``region``, ``outcome``: ``launched``, ``in-service``,
``insufficient-capacity``, ``timed-out``, ``not-usable``; ``error``, ``instance_ids``, ``at``), put by the
``on_demand`` step of either platform (:func:`capacity.logic.steps.on_demand_record.record_try`).
Write-once."""
ON_DEMAND_INSTANCES_PREFIX = _kind("ON_DEMAND_INSTANCES#", "ON_DEMAND_INSTANCES#<region>")
"""Put before ``RunInstances`` on demand or spot (``market``), by :mod:`capacity.logic.ec2.on_demand`:
instances of the request may run in ``<region>`` from ``written_at`` on, whatever ``DescribeInstances``
lists for a while. Write-once."""
ON_DEMAND_ENDPOINT_PREFIX = _kind("ON_DEMAND_ENDPOINT#", "ON_DEMAND_ENDPOINT#<region>")
"""Put before an on-demand ``CreateEndpoint`` (``endpoint``), by :mod:`capacity.logic.sagemaker.on_demand`:
an endpoint of the request may exist in ``<region>`` from ``written_at`` on, whatever ``DescribeEndpoint``
says for a while. Write-once."""
ON_DEMAND_REFUSED = _kind("ON_DEMAND_REFUSED")
"""The team refused the on-demand launch (``amount_usd``, ``reason``): nothing was launched and the
workflow reserves instead; put by :mod:`capacity.logic.governance.on_demand_spend`. Write-once."""

# ------------------------------------------------------------------------------------ while it runs

USAGE = _kind("USAGE", "USAGE#<YYYY-MM-DDTHH:MM:SS.mmmZ>#<nonce>")
"""An instance-count observation (``instances``, ``source``: ``training-plan``, ``instances-running``,
``scaling``...), put best effort by :func:`capacity.logic.governance.costs.record_usage`: the cost report's
timeline of what ran. Write-once."""
SCALE_PREFIX = _kind("SCALE#", "SCALE#<alarm state time>#<model>#<alarm kind>")
"""A scale action of ``scale_components`` (``action``, ``from_copies``, ``to_copies``, ``failed_requests``,
``reason``; ``<model>`` is ``-`` for an idle release), put by :mod:`capacity.logic.sagemaker.scaling`
(docs/scaling-notes.md). Write-once: one per alarm change."""
DEGRADED = _kind("DEGRADED", "DEGRADED#<YYYY-MM-DDTHH:MM:SS.mmmZ>")
"""A reserve step that kept failing on transient faults once money was at stake (``state``, ``error``,
``action``, ``streak``), put by :mod:`capacity.logic.steps.degraded`. Write-once."""
RELEASED_MARKER = _kind("RELEASED")
"""The one release summary (``reason``, ``summary``: a :class:`~capacity.records.CostSummary`), put by the
release's end (:func:`capacity.logic.steps.ending.record_released`) before ``RELEASED`` is recorded: of two
releases racing, only one writes it. Write-once."""
RELEASE_FAILURE_TOLD = _kind("RELEASE_FAILURE_TOLD", "RELEASE_FAILURE_TOLD#<FAILED entry sk>")
"""The Slack alert of the release failure ``FAILED`` at ``<FAILED entry sk>`` was posted (``actor``), put by
:mod:`capacity.logic.steps.notify`: a Lambda that died between the ``FAILED`` and the post finds no marker on
its retry and posts it then. Write-once."""
SLACK_THREAD = _kind("SLACK_THREAD")
"""Where a request made in Slack came from (``channel_id``, ``user_id``, ``team_id``), put by
``record_request`` (:mod:`capacity.logic.steps.intake`) and copied to a successor. Write-once."""
SLACK_ROOT = _kind("SLACK_ROOT")
"""The first message of the request's Slack thread (``channel_id``, ``ts``; replies go under it), put by the
first post (:func:`capacity.logic.steps.common.post`) and copied to a successor. Write-once."""

# ------------------------------------------------------------------------------------ extensions

EXTENSION_OFFER = _kind("EXTENSION_OFFER", "EXTENSION_OFFER#<offering id>")
"""An extension offering a dry run listed (``offering``: what a purchase may name), put by
:mod:`capacity.logic.doors.extension_request` and the roll-over. Write-once."""
EXTENSION_APPROVAL = _kind("EXTENSION_APPROVAL", "EXTENSION_APPROVAL#<extension id>")
"""An extension above the approval threshold waiting for a person (``requester``, ``offering``), put by
:mod:`capacity.logic.doors.extension_request`. Write-once."""
EXTENSION_DECISION = _kind("EXTENSION_DECISION", "EXTENSION_DECISION#<extension id>")
"""The first decision on an extension (``approved``, ``approver``; effect ``extension-decision``), put by
:mod:`capacity.logic.doors.extension_request` or the roll-over: what the purchase reads. Write-once."""
EXTENSION_INTENT = _kind("EXTENSION_INTENT", "EXTENSION_INTENT#<extension id>")
"""Put before an extension is bought (``owner`` execution, ``offering``), by the ExtendCapacity workflow
(:mod:`capacity.logic.continuity.extend`). Write-once."""
EXTENSION_CALL = _kind("EXTENSION_CALL", "EXTENSION_CALL#<extension id>#<YYYY-MM-DDTHH:MM:SS.mmmZ>")
"""One extension call (``offering``), put just before ``ExtendTrainingPlan`` or
``PurchaseCapacityBlockExtension`` (:mod:`capacity.logic.continuity.extend`). Write-once."""
EXTENSION = _kind("EXTENSION", "EXTENSION#<extension id>")
"""The extension bought (AWS's answer: offering, fee, new end, payment status), put by
:mod:`capacity.logic.continuity.extend`: nothing is bought again for the same extension id. Write-once."""
EXTENSION_OUTCOME = _kind("EXTENSION_OUTCOME", "EXTENSION_OUTCOME#<extension id>")
"""How an extension ended (``outcome``: ``extended``, ``failed``, ``rejected``...; ``reason``), put by
:mod:`capacity.logic.continuity.extend`, the outbox (a rejection) or the roll-over. Write-once."""

# ------------------------------------------------------------------------------------ keep serving

SUCCESSOR = _kind("SUCCESSOR")
"""The successor the orchestrator requested (``successor_id``, ``request``: its body, ``latest_start`` and
``switch_by`` UTC, ``offering``), put once by the roll-over (:mod:`capacity.logic.continuity.rollover`).
Write-once."""
ROLLED_OVER = _kind("ROLLED_OVER")
"""The successor serves (``successor_id``, ``region``, ``endpoint_name``, ``parameter_name``), put by the
successor's ``READY`` (:mod:`capacity.logic.continuity.chain`). Write-once."""
ROLLOVER_EXTENSION = _kind("ROLLOVER_EXTENSION", "ROLLOVER_EXTENSION#<end>")
"""The extension the roll-over tried for the lead time of ``<end>`` (``extension_id``: None when none fits,
with ``reason``; ``offering``, ``approval``, ``deadline`` UTC), put by
:mod:`capacity.logic.continuity.rollover`. Write-once."""
ROLLOVER_TOLD = _kind("ROLLOVER_TOLD", "ROLLOVER_TOLD#<end>")
"""A person was told the reservation stops serving at ``<end>`` (``reason``), put by
:mod:`capacity.logic.continuity.rollover`. Write-once."""

# ------------------------------------------------------------------------------------ the costs rollup

COSTS_PREFIX = "COSTS#"
"""The partitions ``COSTS#<team>#<yyyy-mm>`` of the costs rollup (:mod:`capacity.cost_rollup`)."""
COSTS_INDEX_PARTITION = "COSTS"
"""The partition of :data:`COSTS_INDEX`."""
COSTS_TOTAL = _kind("#TOTAL", partition="COSTS#<team>#<yyyy-mm>", replaced=True)
"""A team-month's totals (``cells`` per instance type and region, the month's figures), sorted before every
:data:`COSTS_LINE` of its partition; *replaced* whole on its ``version`` in the transaction of each entry that
carries money (:meth:`capacity.ledger.Ledger.record`)."""
COSTS_LINE = _kind("R#", "R#<request id>", partition="COSTS#<team>#<yyyy-mm>", replaced=True)
"""One reservation's line of its team-month (``reservation``, ``team``, ``month``, its money and hours),
*replaced* whole on its ``version`` with each of its entries that carries money and with ``RELEASED``."""
COST_POINTER = _kind("COST")
"""Where the reservation's rollup line lives (``rollup``: its team-month partition), in the reservation's own
partition; put with its first rollup line. Write-once."""
COSTS_INDEX = _kind("INDEX", partition=COSTS_INDEX_PARTITION, replaced=True)
"""Every team-month that has a rollup (``team_months``: ``[[team, month], ...]``), replaced whole on its
``version`` when a team-month opens (*replaced*)."""

KINDS: Mapping[str, RecordKind] = dict(_KINDS)
"""Every kind, by its constant's value."""


def kind_of(request_id: str, sk: str) -> RecordKind | None:
    """The kind of the ledger item ``(request_id, sk)``, or None when no registered kind has its shape. A
    partition of its own (``BROUGHT#<reservation ARN>``) holds only its kind's items; any other partition is
    a request id's."""
    own = [kind for kind in KINDS.values() if kind.partition != REQUEST_PARTITION and kind.holds(request_id)]
    candidates = own or [kind for kind in KINDS.values() if kind.partition == REQUEST_PARTITION]
    return next((kind for kind in candidates if kind.matches(sk)), None)
