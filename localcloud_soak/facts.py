"""What a lifecycle left behind (:func:`collect_facts`): the ledger, the training plans and capacity
blocks the emulator sold, the AWS calls that succeeded, what still bills, the Slack messages.

Over 400 lines: one collection of everything the checks read, with the small readers they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from localcloud.cloud import LocalCloud, render_blocks
from localcloud.faults import FaultKind
from localcloud_soak.scenario import REGIONS, START

REQUEST_ID_TAG = "capacity-orchestrator:request-id"
MAX_SUCCESSORS = 20
UNCHARGED = frozenset({"Failed", "payment-failed", "failed"})
"""Statuses of a training plan (``Failed``) or capacity block (``payment-failed``, ``failed``) that charged
nothing."""


@dataclass(frozen=True)
class PlanFact:
    """A reservation bought in the cloud (any region): what money was spent on.

    ``kind`` is ``training-plan`` (``name`` the plan's name, ``status`` its ``Status``) or ``capacity-block``
    (``name`` the capacity reservation id ``cr-...``, ``status`` its ``State``); ``upfront_fee_usd`` in USD,
    ``start_time``/``end_time`` UTC.
    """

    name: str
    region: str
    status: str
    upfront_fee_usd: Decimal
    end_time: datetime
    kind: str = "training-plan"
    owner: str = ""
    """The request it was bought for (its ``capacity-orchestrator:request-id`` tag; empty: untagged)."""
    start_time: datetime | None = None


@dataclass(frozen=True)
class ExtensionFact:
    """An extension bought in the cloud (``ExtendTrainingPlan`` or ``PurchaseCapacityBlockExtension``):
    the reservation it extends (plan name or ``cr-...``), the extension offering id, its upfront fee (USD),
    the hours it adds and its payment (``pending``, ``succeeded``, ``failed``: only ``succeeded`` is paid),
    the hours it pays for (``start``/``end``, UTC), when it was bought and when its payment was taken."""

    reservation: str
    offering_id: str
    upfront_fee_usd: Decimal
    hours: int
    payment: str
    start: datetime | None = None
    end: datetime | None = None
    purchased_at: datetime | None = None
    paid_at: datetime | None = None


@dataclass
class Facts:
    """What a lifecycle left behind, read after it became idle; the input of :func:`check`.

    Attributes:
        request_id: the reservation's id.
        max_upfront_fee_usd, approval_above_usd, dry_run: what the request asked (USD).
        items: every ledger item of the request as plain values (``sk``, ``state``, ``written_at``...).
        plans: every training plan in the cloud.
        billable: what still costs money (``cloud.billable_resources()``), as ``type name (status, region)``.
        slack: every Slack message posted, as text (``text`` and the rendered blocks).
        stuck_fired: a ``stuck`` fault fired during the lifecycle.
        accepted: a POST was answered 202 or the request was put on the bus (else the client was told no).
        finished: the lifecycle became idle within its bounds; ``unfinished_reason`` says why not.
        now: the virtual time when the facts were read.
        requester: the request's ``requester``.
        cancels_accepted, approvals_accepted: when a DELETE was answered 202 / an approval 200 (UTC).
        release_scheduled: the reservation's one-time release schedule was created (a ``CreateSchedule`` of
            ``co-<id>-release`` answered without error).
        copy_changes: ``(inference component, copies)`` of every copy count the application changed
            (``UpdateInferenceComponentRuntimeConfig`` answered without error).
        executions: ``(state machine logical id suffix, status)`` of every Step Functions execution.
        extensions: every extension bought of the request's own reservation (:class:`ExtensionFact`).
        brought: the reservation the request brings (its training plan's name or the capacity block's
            ``cr-...`` id), bought by someone else: never the request's purchase (None: it buys its own).
        purchase_calls: the application's ``CreateTrainingPlan`` and ``PurchaseCapacityBlock`` calls, answered
            or not.
        search_until: the request's keep-looking deadline (UTC), or None.
        window: the request's ``earliest_start`` and ``latest_end`` (UTC), or None.
    """

    request_id: str
    max_upfront_fee_usd: Decimal
    approval_above_usd: Decimal | None
    dry_run: bool
    items: list[dict[str, Any]]
    plans: list[PlanFact]
    billable: list[str]
    slack: list[str]
    stuck_fired: bool = False
    accepted: bool = True
    finished: bool = True
    unfinished_reason: str = ""
    now: datetime = START
    requester: str = ""
    cancels_accepted: list[datetime] = field(default_factory=list)
    approvals_accepted: list[datetime] = field(default_factory=list)
    release_scheduled: bool = True
    copy_changes: list[tuple[str, int]] = field(default_factory=list)
    executions: list[tuple[str, str]] = field(default_factory=list)
    extensions: list[ExtensionFact] = field(default_factory=list)
    successors: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The successors requested to keep the reservation serving (``serve_until``), nearest first: request id
    -> its ledger items."""
    chain_extensions: list[ExtensionFact] = field(default_factory=list)
    """The extensions of every reservation of the chain (``extensions`` holds the request's own)."""
    brought: str | None = None
    purchase_calls: int = 0
    search_until: datetime | None = None
    window: tuple[datetime, datetime] | None = None
    release_margin_minutes: int = 60
    """The request's ``release_margin_minutes`` (successors' are in their ``REQUEST`` items)."""
    causer_approvals_accepted: list[str] = field(default_factory=list)
    """The approvals (API paths) answered 200 to an approver who had changed ``serve_until`` of the chain."""
    invalid_deliveries: list[str] = field(default_factory=list)
    """The invalid or conflicting ``ReservationRequested`` variants put on the bus about the request."""
    rollup: list[dict[str, Any]] = field(default_factory=list)
    """Every item of the costs rollup (partitions ``COSTS#...`` and ``COSTS``, issue 31) as plain values."""
    rollup_read: bool = False
    """``rollup`` was read from the lifecycle's table (facts made by hand in tests have none to read)."""

    def history(self) -> list[dict[str, Any]]:
        """The ``STATE#`` items, oldest first."""
        return sorted(
            (i for i in self.items if str(i["sk"]).startswith("STATE#")), key=lambda i: str(i["sk"])
        )

    def item(self, sk: str) -> dict[str, Any] | None:
        """The item with this sort key, or None."""
        return next((i for i in self.items if i["sk"] == sk), None)

    def live_plans(self) -> list[PlanFact]:
        """The training plans and capacity blocks the request paid for (a ``Failed`` plan or a
        ``payment-failed`` block charged nothing; a reservation it brought was paid by someone else; one
        bought for a successor is the successor's). Blocks ``expired`` by now count: they were paid."""
        return [p for p in self.chain_plans() if p.owner in ("", self.request_id)]

    def chain_plans(self) -> list[PlanFact]:
        """Every reservation paid for by the request's chain, its successors' too (not one it brought)."""
        return [p for p in self.plans if p.status not in UNCHARGED and p.name != self.brought]


def _plain(value: dict[str, Any]) -> Any:
    ((kind, raw),) = value.items()
    if kind == "M":
        return {k: _plain(v) for k, v in raw.items()}
    if kind == "L":
        return [_plain(v) for v in raw]
    if kind == "BOOL":
        return bool(raw)
    if kind == "NULL":
        return None
    return raw


def ledger_items(cloud: LocalCloud, request_id: str, client: Any = None) -> list[dict[str, Any]]:
    """Every ledger item of ``request_id`` as plain values (no faults: the soak's own reads)."""
    client = client or cloud.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": cloud.stack.physical_id("LedgerTable"),
        "KeyConditionExpression": "request_id = :r",
        "ExpressionAttributeValues": {":r": {"S": request_id}},
        "ConsistentRead": True,
    }
    items: list[dict[str, Any]] = []
    with cloud.dispatcher.exempt():
        while True:
            page = client.query(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return [{key: _plain(value) for key, value in item.items()} for item in items]


def rollup_items(cloud: LocalCloud, client: Any = None) -> list[dict[str, Any]]:
    """Every costs rollup item (partitions starting ``COSTS``) as plain values: a scan of the lifecycle's own
    small table (no faults: the soak's own reads)."""
    client = client or cloud.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": cloud.stack.physical_id("LedgerTable"),
        "FilterExpression": "begins_with(request_id, :c)",
        "ExpressionAttributeValues": {":c": {"S": "COSTS"}},
        "ConsistentRead": True,
    }
    items: list[dict[str, Any]] = []
    with cloud.dispatcher.exempt():
        while True:
            page = client.scan(**kwargs)
            items.extend(page["Items"])
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return [{key: _plain(value) for key, value in item.items()} for item in items]


def ledger_states(cloud: LocalCloud, request_id: str, client: Any = None) -> list[str]:
    """The ledger's states of ``request_id``, in order."""
    history = sorted(
        (i for i in ledger_items(cloud, request_id, client) if str(i["sk"]).startswith("STATE#")),
        key=lambda i: str(i["sk"]),
    )
    return [str(i["state"]) for i in history]


def training_plans(cloud: LocalCloud) -> list[PlanFact]:
    """Every training plan in every region the emulated market sells in (``ListTrainingPlans``, asked of the
    emulator directly: no faults, no client)."""
    regions = sorted(set(cloud.emulator.market.regions()) | set(REGIONS))
    plans: list[PlanFact] = []
    for region in regions:
        params: dict[str, Any] = {}
        while True:
            page = cloud.emulator.call("sagemaker", "ListTrainingPlans", params, region=region)
            plans.extend(
                PlanFact(
                    name=str(p["TrainingPlanName"]),
                    region=region,
                    status=str(p["Status"]),
                    upfront_fee_usd=Decimal(str(p.get("UpfrontFee", "0"))),
                    end_time=p["EndTime"].astimezone(UTC) if p.get("EndTime") else cloud.now(),
                    owner=_owner(cloud.emulator.training_plans.tags_of(str(p["TrainingPlanArn"]))),
                    start_time=p["StartTime"].astimezone(UTC) if p.get("StartTime") else None,
                )
                for p in page["TrainingPlanSummaries"]
            )
            if not page.get("NextToken"):
                break
            params = {"NextToken": page["NextToken"]}
    return plans


def capacity_blocks(cloud: LocalCloud) -> list[PlanFact]:
    """Every capacity block bought, in every region the emulated market sells in
    (``DescribeCapacityReservations`` filtered on ``reservation-type`` ``capacity-block``, asked of the
    emulator directly: no faults, no client). Its fee is the upfront fee of the offering it was bought from
    (a capacity reservation does not carry it)."""
    regions = sorted(set(cloud.emulator.market.regions()) | set(REGIONS))
    fees = {
        item.reservation_id: item.offering.fee_usd
        for item in cloud.emulator.capacity_blocks.reservations.values()
    }
    found: list[PlanFact] = []
    for region in regions:
        params: dict[str, Any] = {"Filters": [{"Name": "reservation-type", "Values": ["capacity-block"]}]}
        while True:
            page = cloud.emulator.call("ec2", "DescribeCapacityReservations", params, region=region)
            found.extend(
                PlanFact(
                    name=str(r["CapacityReservationId"]),
                    region=region,
                    status=str(r["State"]),
                    upfront_fee_usd=Decimal(str(fees[r["CapacityReservationId"]])).quantize(Decimal("0.01")),
                    end_time=r["EndDate"].astimezone(UTC),
                    kind="capacity-block",
                    owner=_owner(r.get("Tags")),
                    start_time=r["StartDate"].astimezone(UTC),
                )
                for r in page["CapacityReservations"]
            )
            if not page.get("NextToken"):
                break
            params = {**params, "NextToken": page["NextToken"]}
    return found


def _owner(tags: Sequence[dict[str, str]] | None) -> str:
    """The ``capacity-orchestrator:request-id`` tag of a reservation (empty when it has none)."""
    return next((str(t.get("Value")) for t in tags or [] if t.get("Key") == REQUEST_ID_TAG), "")


def successors(cloud: LocalCloud, request_id: str) -> dict[str, list[dict[str, Any]]]:
    """The successors the orchestrator requested for ``request_id`` (its ``SUCCESSOR`` item, then theirs),
    nearest first: request id -> ledger items."""
    found: dict[str, list[dict[str, Any]]] = {}
    current = request_id
    while len(found) < MAX_SUCCESSORS:
        named = next((i for i in ledger_items(cloud, current) if i["sk"] == "SUCCESSOR"), None)
        if named is None:
            return found
        current = str(named["successor_id"])
        found[current] = ledger_items(cloud, current)
    return found


def extensions(cloud: LocalCloud) -> list[ExtensionFact]:
    """Every extension of every training plan and capacity block, read from the emulator's own records
    (the soak's view of what was paid, whatever the application recorded)."""
    now = cloud.now()
    owners: list[tuple[str, Any]] = [
        (plan.name, plan) for plan in cloud.emulator.training_plans.plans.values()
    ] + [(block_id, block) for block_id, block in cloud.emulator.capacity_blocks.reservations.items()]
    return [
        ExtensionFact(
            reservation=name,
            offering_id=str(item.offering.offering_id),
            upfront_fee_usd=Decimal(str(item.offering.fee_usd)).quantize(Decimal("0.01")),
            hours=item.hours,
            payment=item.status(now),
            start=item.offering.start,
            end=item.offering.end,
            purchased_at=item.purchased,
            paid_at=next((at for at, status in item.payment.phases if status == "succeeded"), None),
        )
        for name, owner in owners
        for item in owner.extensions
    ]


def _succeeded_calls(cloud: LocalCloud, operation: str) -> list[Any]:
    return [
        c
        for c in cloud.dispatcher.calls
        if c.operation == operation and c.status is not None and c.status < 300 and c.caller is not None
    ]


def collect_facts(
    cloud: LocalCloud,
    request: dict[str, Any],
    *,
    accepted: bool = True,
    finished: bool = True,
    unfinished_reason: str = "",
    cancels_accepted: Sequence[datetime] = (),
    approvals_accepted: Sequence[datetime] = (),
    causer_approvals_accepted: Sequence[str] = (),
    invalid_deliveries: Sequence[str] = (),
) -> Facts:
    """Read the ledger, the training plans and capacity blocks, the billable resources, the Slack outbox,
    the application's AWS calls and the executions of a lifecycle."""
    threshold = request.get("approval_above_usd")
    release_name = f"co-{request['request_id']}-release"
    plans = training_plans(cloud) + capacity_blocks(cloud)
    own = {p.name for p in plans if p.owner in ("", str(request["request_id"]))}
    every_extension = extensions(cloud)
    return Facts(
        request_id=str(request["request_id"]),
        max_upfront_fee_usd=Decimal(str(request["max_upfront_fee_usd"])),
        approval_above_usd=Decimal(str(threshold)) if threshold is not None else None,
        dry_run=bool(request.get("dry_run")),
        items=ledger_items(cloud, str(request["request_id"])),
        plans=plans,
        billable=[f"{r.resource_type} {r.name} ({r.status}, {r.region})" for r in cloud.billable_resources()],
        slack=[f"{m.text}\n{render_blocks(m.blocks)}" for m in cloud.outbox.messages],
        stuck_fired=any(f.kind is FaultKind.STUCK for f in cloud.faults.fired),
        accepted=accepted,
        finished=finished,
        unfinished_reason=unfinished_reason,
        now=cloud.now(),
        requester=str(request.get("requester") or ""),
        cancels_accepted=list(cancels_accepted),
        approvals_accepted=list(approvals_accepted),
        release_scheduled=any(
            c.params.get("Name") == release_name for c in _succeeded_calls(cloud, "CreateSchedule")
        ),
        copy_changes=[
            (str(c.params.get("InferenceComponentName")), int(c.params["DesiredRuntimeConfig"]["CopyCount"]))
            for c in _succeeded_calls(cloud, "UpdateInferenceComponentRuntimeConfig")
        ],
        executions=[(e.state_machine.rsplit("-", 1)[-1], e.status) for e in cloud.executions()],
        extensions=[e for e in every_extension if e.reservation in own],
        successors=successors(cloud, str(request["request_id"])),
        chain_extensions=every_extension,
        brought=_brought(request),
        purchase_calls=sum(
            1
            for c in cloud.dispatcher.calls
            if c.operation in ("CreateTrainingPlan", "PurchaseCapacityBlock") and c.caller is not None
        ),
        search_until=_utc(request.get("search_until")),
        window=_window(request),
        release_margin_minutes=int(request.get("release_margin_minutes") or 60),
        causer_approvals_accepted=list(causer_approvals_accepted),
        invalid_deliveries=list(invalid_deliveries),
        rollup=rollup_items(cloud),
        rollup_read=True,
    )


def _brought(request: dict[str, Any]) -> str | None:
    """The brought reservation's name as :func:`training_plans`/:func:`capacity_blocks` list it."""
    if request.get("training_plan_arn"):
        return str(request["training_plan_arn"]).rsplit("/", 1)[-1]
    return str(request["capacity_reservation_id"]) if request.get("capacity_reservation_id") else None


def _utc(value: Any) -> datetime | None:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC) if value else None


def _window(request: dict[str, Any]) -> tuple[datetime, datetime] | None:
    start, end = _utc(request.get("earliest_start")), _utc(request.get("latest_end"))
    return (start, end) if start and end else None
