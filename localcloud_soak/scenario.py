"""What a soak lifecycle draws (:func:`make_scenario`): the request, its approval, its deliveries and
cancellations, and the faults injected, from a seed derived from the soak's and the lifecycle's index
(:func:`lifecycle_seed`); and the constants of the soak's world (start, limits, regions, types...).

Over 400 lines: every draw of a lifecycle in one place, so a seed reproduces all of them in one order."""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from localcloud.faults import FaultKind, FaultRule

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
"""Virtual start of every lifecycle (UTC)."""
VIRTUAL_LIMIT = timedelta(days=150)
STILL_RUNS = 1000
"""A lifecycle whose driver stops this many runs in a row without one clock step is UNFINISHED (a spin)."""
"""A lifecycle must be idle within this much virtual time (lead time <= 60 days, plans <= 3 days, blocks
<= 14 days)."""
DEFAULT_STALL_SECONDS: float | None = None
"""The hang detector's limit for each lifecycle (None: :func:`localcloud.clock.default_stall_seconds`)."""
RETRIED_ATTEMPTS = 2
"""Failed release attempts after which a lifecycle with a stuck deletion counts as over (see
``localcloud_soak.lifecycle._Driver.retrying_stuck``)."""
REQUEST_ID = "soak"
FINAL_STATES = ("RELEASED", "REJECTED", "FAILED", "CANCELLED")
"""Final ledger states (``capacity.models.FINAL_STATES``)."""

REGIONS = ("us-east-1", "us-west-2", "us-east-2", "eu-west-1")
INSTANCE_TYPES = ("ml.p5.48xlarge", "ml.p4d.24xlarge", "ml.p5.4xlarge", "ml.trn1.32xlarge")
"""Types training plans sell (``SearchTrainingPlanOfferings``' enum) that fit the soak's models."""
EC2_INSTANCE_TYPES = ("p5.48xlarge", "p4d.24xlarge", "p5.4xlarge", "trn1.32xlarge", "p5e.48xlarge")
"""EC2 types sold as capacity blocks (``capacity.instances.CAPACITY_BLOCK_INSTANCE_TYPES``) in every soak
region."""
EC2_DURATIONS = (24, 48, 72, 120, 168, 336)
"""Capacity block durations the soak draws (hours): 24-hour steps up to 14 days (AWS_FACTS.md)."""
EC2_MAX_LEAD_DAYS = 50
"""Capacity blocks start at most 8 weeks ahead: the window (lead + up to 4 days) stays inside."""
EC2_SHARE = 1 / 3
"""The share of lifecycles drawn ``platform: ec2``."""
NOW_SHARE = 0.2
"""The share of lifecycles whose window starts within the hour (strategy ``on-demand-first``/``spot-ok``)."""
LAUNCH_TEMPLATE = "soak-workers"
"""The launch template every EC2 lifecycle names; created in each of its regions before the first POST."""
AMI = "ami-0abcdef1234567890"
IMAGE = (
    "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-tgi-inference:"
    "2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04"
)
WIRE_SERVICES = (
    "sagemaker",
    "dynamodb",
    "scheduler",
    "eventbridge",
    "sfn",
    "cloudwatch",
    "application-auto-scaling",
)
"""Services that throttle or answer 5xx in a SageMaker lifecycle. Not ``lambda``: moto's ASL interpreter
named a Lambda service error of a direct-ARN Task ``Exception`` instead of ``Lambda.TooManyRequestsException``
/``Lambda.ServiceException`` (what Step Functions names it, and what the state machines retry), so a fault
there tested the emulation, not the application."""
EC2_WIRE_SERVICES = ("ec2", "dynamodb", "scheduler", "eventbridge", "sfn")
"""Services that throttle or answer 5xx in an EC2 lifecycle (capacity blocks and instances)."""
EC2_INSUFFICIENT_OPERATIONS = ("DescribeCapacityBlockOfferings", "PurchaseCapacityBlock", "RunInstances")
EC2_CRASH_TARGETS = (
    ("ec2", "PurchaseCapacityBlock"),
    ("ec2", "RunInstances"),
    ("ec2", "TerminateInstances"),
    ("dynamodb", "PutItem"),
    ("eventbridge", "PutEvents"),
    ("scheduler", "CreateSchedule"),
    ("sfn", "SendTaskSuccess"),
)
INSUFFICIENT_OPERATIONS = (
    "SearchTrainingPlanOfferings",
    "CreateTrainingPlan",
    "CreateEndpoint",
    "CreateInferenceComponent",
)
STUCK_OPERATIONS = (
    "CreateTrainingPlan",
    "CreateEndpoint",
    "CreateInferenceComponent",
    "DeleteInferenceComponent",
    "DeleteEndpoint",
)
CRASH_TARGETS = (
    ("sagemaker", "CreateTrainingPlan"),
    ("sagemaker", "CreateEndpointConfig"),
    ("sagemaker", "CreateEndpoint"),
    ("sagemaker", "CreateInferenceComponent"),
    ("sagemaker", "DeleteEndpoint"),
    ("dynamodb", "PutItem"),
    ("eventbridge", "PutEvents"),
    ("scheduler", "CreateSchedule"),
    ("sfn", "SendTaskSuccess"),
)
CANCEL_PHASES = (
    "now",
    "REQUESTED",
    "PLANNED",
    "AWAITING_APPROVAL",
    "PURCHASED",
    "SCHEDULED",
    "ACTIVE",
    "DEPLOYING",
    "READY",
)
DUPLICATE_PHASES = ("now", "REQUESTED", "PLANNED", "PURCHASED", "READY", "end")

SOAK_REQUESTER = "arn:aws:iam::123456789012:user/soak"
"""Who requests in the soak (team ml-platform of deploy/policy-seed.json)."""
SOAK_APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/soak-approver"
"""Who approves or rejects (an approver of ml-platform, never the requester: four-eyes, issue 16)."""
OTHER_APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/soak-approver-2"
"""A second approver of ml-platform: decides what :data:`SOAK_APPROVER` caused by changing ``serve_until``
(issue 28: whoever causes spend may not approve it)."""


@dataclass(frozen=True)
class Action:
    """Something a person or another system does during a lifecycle.

    ``kind``: ``post`` (POST /reservations), ``bus`` (``ReservationRequested`` put straight on the bus),
    ``bus_invalid`` (an invalid or conflicting ``ReservationRequested`` about the same request: ``variant``
    says which, :data:`INVALID_DELIVERIES`), ``cancel`` (DELETE), ``approve`` or ``reject`` (POST
    .../approval), ``extend`` (a dry run of POST .../extensions for a day, then the purchase of its first
    allowed offering), ``extend_any`` (the same, buying the first offering even when the dry run says it is
    not allowed: a client that does not listen), ``patch`` (PATCH ``serve_until`` by :data:`SOAK_APPROVER`,
    ``variant`` the hours past the reservation's end), ``approve_caused`` (:data:`SOAK_APPROVER` approves
    what waits for approval in the chain: what its PATCH caused, which must be refused) and
    ``approve_other`` (:data:`OTHER_APPROVER` approves it). ``phase``: ``now`` (right after the first POST),
    a ledger state (once it is recorded), ``RELEASE`` (the release instant the first ``PURCHASED`` names:
    ``delay_hours`` is then negative, before it), ``CAUSED`` (an approval waits in the chain, after a
    ``patch``) or ``end`` (once the lifecycle is idle); every action whose phase never comes runs when the
    lifecycle is idle. ``delay_hours``: virtual hours after the phase.
    """

    kind: str
    phase: str
    delay_hours: float = 0.0
    variant: str = ""


@dataclass(frozen=True)
class Scenario:
    """One randomized lifecycle, fully determined by ``seed`` (see :func:`make_scenario`).

    ``request`` is the POST body without ``max_upfront_fee_usd``/``approval_above_usd``: those are
    ``budget_factor`` and ``approval_factor`` times the cheapest offering (training plan or capacity block)
    found before the POST, or, for a window that starts within the hour, the larger of that and what the
    instances cost on demand until ``latest_end`` (USD: so the on-demand try is not always skipped).
    ``approval`` names the approver's behaviour (``none``: no threshold; ``not_needed``: threshold above the
    budget; ``approve``, ``reject``, ``timeout``, ``late``, ``after_timeout``).
    """

    index: int
    seed: int
    request: dict[str, Any]
    budget_factor: Decimal
    approval: str
    approval_factor: Decimal | None
    actions: tuple[Action, ...]
    faults: tuple[FaultRule, ...]
    listing: dict[str, Any] | None = None
    """Keep looking (issue 17): how the market lists capacity once the budget is set (``MarketConfig``
    fields: ``listed_from`` ``{"*": <UTC>}`` for capacity that appears later, or never within the deadline;
    ``churn`` and ``churn_period`` for offerings that appear and vanish), None: listed all along."""
    extension_payment_minutes: tuple[float, float] = (5.0, 5.0)
    """How long extension payments stay pending in this lifecycle's market (minutes, drawn per extension
    between the two: ``Timings.extension_payment_pending``), from minutes to past AWS's 12-hour deadline
    (issue 29, kindness 1): :func:`_extension_payment`."""
    brings: bool = False
    """Bring your own reservation (issue 17): "central procurement" buys a training plan or capacity block
    for the request before the POST, and the request names it (``training_plan_arn`` /
    ``capacity_reservation_id``, its window the reservation's) instead of buying one."""
    competition: tuple[float, float] = (0.0, 0.0)
    """Other buyers in the market (issue 29 point 5): the share of offerings they take between a search and
    its purchase, and within how many minutes of the search (``MarketConfig.taken``/``taken_within``, set
    once the budget is looked up and any brought reservation bought)."""

    def describe(self) -> str:
        """A one-paragraph summary for failure reports."""
        r = self.request
        faults = ", ".join(
            f"{f.kind.value}@{f.service}:{f.operation}"
            + (f" p={f.probability:.2f}" if f.probability < 1 else "")
            + (f" x{f.times}" if f.times else "")
            for f in self.faults
        )
        actions = ", ".join(
            f"{a.kind}{f'({a.variant})' if a.variant else ''}@{a.phase}"
            + (f"{a.delay_hours:+.1f}h" if a.delay_hours else "")
            for a in self.actions
        )
        return (
            f"{r.get('platform', 'sagemaker')}"
            + (f" {r['strategy']}" if r.get("strategy") else "")
            + f": {r['instance_count']} x {r['instance_type']} {r['duration_hours']} h "
            f"from {r['earliest_start']} "
            f"in {','.join(r['regions'])}, "
            + (f"{len(r['models'])} model(s), " if r.get("models") else "")
            + f"budget x{self.budget_factor} of the cheapest, approval {self.approval}"
            + (f" (threshold x{self.approval_factor})" if self.approval_factor is not None else "")
            + (", dry run" if r.get("dry_run") else "")
            + (
                f", keeps looking until {r['search_until']} every {r.get('search_every_minutes', 60)} min "
                f"(market {self.listing or 'listed all along'})"
                if r.get("search_until")
                else ""
            )
            + (
                ", brings its own reservation (when central procurement finds one to buy)"
                if self.brings
                else ""
            )
            + (f", serve until {r['serve_until']}" if r.get("serve_until") else "")
            + ", extension payments pending {:.0f}-{:.0f} min".format(*self.extension_payment_minutes)
            + ", other buyers take {:.0%} of the offerings within {:.0f} min".format(*self.competition)
            + f"; actions: {actions or 'none'}; faults: {faults or 'none'}"
        )


def lifecycle_seed(seed: int, index: int) -> int:
    """The seed of lifecycle ``index`` of a soak seeded ``seed`` (stable across Python versions)."""
    digest = hashlib.sha256(f"capacity-soak:{seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def _ts(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _factor(rng: random.Random, low: float, high: float) -> Decimal:
    return Decimal(str(rng.uniform(low, high))).quantize(Decimal("0.001"))


def _request(rng: random.Random) -> dict[str, Any]:
    """A POST body (without budget and threshold): ``platform`` ``ec2`` for :data:`EC2_SHARE` of the draws,
    and for :data:`NOW_SHARE` a window that starts within the hour (the default strategy is then
    ``on-demand-first``; EC2 sometimes asks ``spot-ok``)."""
    platform = "ec2" if rng.random() < EC2_SHARE else "sagemaker"
    soon = rng.random() < NOW_SHARE
    if platform == "ec2":
        duration = rng.choice(EC2_DURATIONS)
        lead = timedelta(days=rng.randint(1, EC2_MAX_LEAD_DAYS), hours=rng.randint(0, 23))
    else:
        duration = rng.choice((24, 48, 72))
        lead = timedelta(days=rng.randint(1, 60), hours=rng.randint(0, 23))
    if soon:  # on demand runs until latest_end: a window little longer than the duration
        lead = timedelta(minutes=rng.randint(5, 50))
        extra = timedelta(days=rng.choice((0, 0, 1, 2)))
    else:
        extra = timedelta(days=rng.randint(0, 4))
    start = START + lead
    end = start + timedelta(hours=duration) + extra
    body: dict[str, Any] = {
        "request_id": REQUEST_ID,
        "requester": SOAK_REQUESTER,  # who the API door records (the bus path carries it as the door would)
        "team": "ml-platform",
        "earliest_start": _ts(start),
        "latest_end": _ts(end),
        "duration_hours": duration,
        "regions": rng.sample(REGIONS, rng.randint(1, 3)),
        "approval_timeout_hours": rng.randint(2, 6),
        "dry_run": rng.random() < 0.05,
    }
    if platform == "ec2":
        body.update(
            platform="ec2",
            instance_type=rng.choice(EC2_INSTANCE_TYPES),
            instance_count=rng.choice((1, 1, 2, 4)),
            launch_template={"name": LAUNCH_TEMPLATE, "version": "$Latest"},
            release_margin_minutes=rng.choice((5, 60)),
        )
        if soon:
            strategy = rng.choice((None, "on-demand-first", "spot-ok", "spot-ok"))
            if strategy is not None:
                body["strategy"] = strategy
        return body
    models = [
        {
            "name": f"model-{i}",
            "image": IMAGE,
            "model_data_url": f"s3://example-models/model-{i}/model.tar.gz",
            "accelerators": 1,
            "cpu_cores": 4,
            "memory_mb": 16384,
            "copies": {"initial": 1, "min": rng.choice((0, 1)), "max": 2},
        }
        for i in range(rng.choice((1, 1, 2)))
    ]
    instance_type = rng.choice(INSTANCE_TYPES)
    count = rng.choice((1, 1, 2, 4))
    if instance_type == "ml.p5.4xlarge" and count == 1:
        models = models[:1]  # one GPU: room for one model's first copy
    body.update(instance_type=instance_type, instance_count=count, models=models)
    if soon and rng.random() < 0.5:
        body["strategy"] = "on-demand-first"  # else the default, for a window within the hour
    return body


def _approval(rng: random.Random, timeout_hours: int) -> tuple[str, Decimal | None, list[Action]]:
    mode = rng.choice(
        ("none", "not_needed", "approve", "approve", "reject", "timeout", "late", "after_timeout")
    )
    if mode == "none":
        return mode, None, []
    if mode == "not_needed":  # the threshold is the budget: anything above it is rejected anyway
        return mode, Decimal(99), []
    threshold = _factor(rng, 0.2, 0.95)
    actions: list[Action] = []
    if mode == "approve":
        actions.append(Action("approve", "AWAITING_APPROVAL", round(rng.uniform(0, 0.4), 2)))
    elif mode == "reject":
        actions.append(Action("reject", "AWAITING_APPROVAL", round(rng.uniform(0, 0.4), 2)))
    elif mode == "late":  # after the offering id expired (30 min), before the timeout
        actions.append(
            Action("approve", "AWAITING_APPROVAL", round(rng.uniform(1.0, timeout_hours - 0.5), 2))
        )
    elif mode == "after_timeout":
        actions.append(Action("approve", "AWAITING_APPROVAL", timeout_hours + 1.0))
    if actions and rng.random() < 0.2:  # the approver clicks twice (or two approvers answer)
        again = rng.choice(("approve", "reject"))
        actions.append(
            Action(again, "AWAITING_APPROVAL", actions[0].delay_hours + round(rng.uniform(0, 0.2), 2))
        )
    return mode, threshold, actions


def _faults(rng: random.Random, platform: str = "sagemaker") -> list[FaultRule]:
    ec2 = platform == "ec2"
    aws = "ec2" if ec2 else "sagemaker"
    wire = EC2_WIRE_SERVICES if ec2 else WIRE_SERVICES
    rules: list[FaultRule] = []
    if rng.random() < 0.5:
        for service in rng.sample(wire, rng.randint(1, 4)):
            rules.append(
                FaultRule(
                    service=service, kind=FaultKind.THROTTLE, probability=round(rng.uniform(0.05, 0.3), 2)
                )
            )
    if rng.random() < 0.4:
        for service in rng.sample(wire, rng.randint(1, 3)):
            rules.append(
                FaultRule(
                    service=service, kind=FaultKind.SERVER_ERROR, probability=round(rng.uniform(0.05, 0.2), 2)
                )
            )
    if rng.random() < 0.4:
        rules.append(
            FaultRule(
                service=rng.choice(("*", aws, "dynamodb")),
                kind=FaultKind.LATENCY,
                probability=round(rng.uniform(0.1, 0.5), 2),
                latency_seconds=round(rng.uniform(0.2, 8.0), 1),  # botocore's read timeout is 60 s
            )
        )
    if rng.random() < (0.35 if ec2 else 0.25):
        operation = rng.choice(EC2_INSUFFICIENT_OPERATIONS if ec2 else INSUFFICIENT_OPERATIONS)
        if operation in ("SearchTrainingPlanOfferings", "DescribeCapacityBlockOfferings", "RunInstances"):
            # A search (or an on-demand/spot launch, region after region) that often finds nothing.
            rules.append(
                FaultRule(
                    service=aws,
                    operation=operation,
                    kind=FaultKind.INSUFFICIENT_CAPACITY,
                    probability=round(rng.uniform(0.3, 1.0), 2),
                )
            )
        else:
            rules.append(
                FaultRule(service=aws, operation=operation, kind=FaultKind.INSUFFICIENT_CAPACITY, times=1)
            )
    if rng.random() < 0.15:
        # EC2: a block whose payment never completes (stays payment-pending; the emulator's only stuck).
        operation = "PurchaseCapacityBlock" if ec2 else rng.choice(STUCK_OPERATIONS)
        rules.append(FaultRule(service=aws, operation=operation, kind=FaultKind.STUCK, times=1))
    if ec2 and rng.random() < 0.15:
        rules.append(
            FaultRule(
                service="ec2", operation="PurchaseCapacityBlock", kind=FaultKind.PAYMENT_FAILED, times=1
            )
        )
    return rules + _crash_faults(rng, ec2=ec2, wire=wire)


def _crash_faults(rng: random.Random, *, ec2: bool, wire: Sequence[str]) -> list[FaultRule]:
    """Calls that take effect and are not answered, Lambdas that die after a call, services that hang."""
    rules: list[FaultRule] = []
    if rng.random() < 0.4:
        for service, operation in rng.sample(EC2_CRASH_TARGETS if ec2 else CRASH_TARGETS, rng.randint(1, 2)):
            rules.append(
                FaultRule(
                    service=service,
                    operation=operation,
                    kind=FaultKind.CRASH_AFTER_COMMIT,
                    times=rng.randint(1, 2),
                )
            )
    if rng.random() < 0.3:
        # A Lambda that dies right after an AWS call took effect (the purchase, a create, a ledger write).
        for service, operation in rng.sample(EC2_CRASH_TARGETS if ec2 else CRASH_TARGETS, rng.randint(1, 2)):
            rules.append(
                FaultRule(
                    service=service, operation=operation, kind=FaultKind.KILL_CALLER, times=rng.randint(1, 2)
                )
            )
    if rng.random() < 0.2:
        # A service that never answers now and then: the caller waits its read timeout, nothing happens.
        rules.append(
            FaultRule(
                service=rng.choice(wire), kind=FaultKind.HANG, probability=round(rng.uniform(0.02, 0.1), 2)
            )
        )
    return rules


def _delivery_faults(rng: random.Random, *, ec2: bool) -> list[FaultRule]:
    """EventBridge, Scheduler and Lambda's at-least-once delivery, in every lifecycle (issue 29 point 2: AWS
    delivers at least once and may reorder, AWS_FACTS.md): events, firings and asynchronous invocations
    delivered twice, and late (so later ones overtake them; a late copy is a stale redelivery), each service
    at its own drawn rate; in some lifecycles also targets that refuse a delivery (retried by their retry
    policy), an operator's ``StopExecution`` of a workflow, and SageMaker's eventual consistency (EC2's is
    :func:`_kindness_faults`'s, every lifecycle)."""
    rules: list[FaultRule] = []
    for service in ("eventbridge", "scheduler", "lambda"):
        rules.append(
            FaultRule(
                service=service,
                kind=FaultKind.DUPLICATE_DELIVERY,
                probability=round(rng.uniform(0.05, 0.3), 2),
            )
        )
        rules.append(
            FaultRule(
                service=service,
                kind=FaultKind.DELAYED_DELIVERY,
                probability=round(rng.uniform(0.05, 0.3), 2),
                delay_seconds=round(rng.uniform(30, 900)),
            )
        )
    if rng.random() < 0.15:
        rules.append(
            FaultRule(service="eventbridge", kind=FaultKind.DELIVERY_FAILURE, times=rng.randint(1, 3))
        )
    if rng.random() < 0.15:
        rules.append(
            FaultRule(
                service="eventbridge",
                operation=rng.choice(("ReservationRequested", "ReleaseRequested")),
                kind=FaultKind.ABORT_EXECUTION,
                times=1,
                delay_seconds=round(rng.uniform(30, 4 * 3600)),
            )
        )
    if not ec2 and rng.random() < 0.2:  # eventual consistency of SageMaker's endpoint reads
        rules.append(
            FaultRule(
                service="sagemaker",
                kind=FaultKind.STALE_LISTING,
                delay_seconds=round(rng.uniform(5, 120)),
            )
        )
    return rules


LEDGER_TABLE = "capacity-orchestrator-LedgerTable"
POLICY_TABLE = "capacity-orchestrator-PolicyTable"
"""The physical names of the tables the application writes in transactions (the local cloud names resources
``<stack>-<logical id>``): a single write to them may meet a transaction on its item."""
STALE_MAX_SECONDS = 8 * 60
"""The longest an EC2 listing lags in the soak: past the EC2 guide's "up to about five minutes" of back-off
(less kind), under the product's 10-minute wait for a purchase that may have committed
(``capacity.logic.steps.buy_once.CONSISTENCY_WINDOW``)."""


EC2_STALE_READS = (
    "DescribeCapacityReservations",
    "DescribeCapacityBlockExtensionHistory",
    "DescribeInstances",
)
"""The EC2 reads ``stale_listing`` makes eventually consistent (a rule per read: fired only where it acts)."""


def _kindness_faults(rng: random.Random, *, ec2: bool) -> list[FaultRule]:
    """What AWS does that the local cloud does not by default, drawn in every lifecycle (issue 29 point 3,
    and point 1 for EC2): DynamoDB cancelling a transaction that met another on one of its items
    (``TransactionConflict``) and refusing a single write to an item a transaction holds
    (``TransactionConflictException``), each at a drawn rate; EC2's eventually consistent
    ``DescribeCapacityReservations``, ``DescribeCapacityBlockExtensionHistory`` and ``DescribeInstances``
    (a block, extension or instance just made missing for a drawn while, up to :data:`STALE_MAX_SECONDS`)."""
    rules = [
        FaultRule(
            service="dynamodb",
            operation="TransactWriteItems",
            kind=FaultKind.TRANSACTION_CONFLICT,
            probability=round(rng.uniform(0.03, 0.2), 3),
        )
    ]
    for table in (LEDGER_TABLE, POLICY_TABLE):
        for operation in ("PutItem", "UpdateItem", "DeleteItem"):
            rules.append(
                FaultRule(
                    service="dynamodb",
                    operation=operation,
                    kind=FaultKind.TRANSACTION_CONFLICT,
                    probability=round(rng.uniform(0.005, 0.04), 3),
                    match={"TableName": table},
                )
            )
    if ec2:
        probability, delay = round(rng.uniform(0.3, 1.0), 2), round(rng.uniform(2, STALE_MAX_SECONDS))
        rules.extend(
            FaultRule(
                service="ec2",
                operation=operation,
                kind=FaultKind.STALE_LISTING,
                probability=probability,
                delay_seconds=delay,
            )
            for operation in EC2_STALE_READS
        )
    return rules


TAKEN_WITHIN_MINUTES = (0.0, 0.0, 10.0, 60.0)


def _competition(rng: random.Random) -> tuple[float, float]:
    """Other buyers in every lifecycle's market (issue 29 point 5): the share of offerings they take between
    a search and its purchase (0.05-0.3) and within how many minutes of the search (0: at once, before
    any purchase; else up to 10 or 60) (``MarketConfig.taken``/``taken_within``)."""
    return round(rng.uniform(0.05, 0.3), 2), rng.choice(TAKEN_WITHIN_MINUTES)


EXTEND_PHASES = ("PURCHASED", "ACTIVE", "READY")
"""When an extension is asked for: once bought (a plan still scheduled), once active, once serving."""
EXTEND_SHARE = 0.25


def _extensions(rng: random.Random) -> list[Action]:
    """A quarter of the lifecycles ask to extend by a day (issue 17): a dry run of ``POST
    .../extensions``, then the purchase of the first allowed offering, sent once or twice (a client
    retrying, at the same phase): bought once either way, within the budget, every fee recorded."""
    if rng.random() >= EXTEND_SHARE:
        return []
    phase = rng.choice(EXTEND_PHASES)
    delay = 0.0 if rng.random() < 0.5 else round(rng.uniform(0.1, 12.0), 1)
    return [Action("extend", phase, delay)] * (2 if rng.random() < 0.3 else 1)


KEEP_LOOKING_SHARE = 0.2
"""The share of lifecycles that keep looking until a deadline (``search_until``, issue 17 item 4)."""
BROUGHT_SHARE = 0.1
"""The share of the other reserved lifecycles that bring their own reservation (issue 17 item 5)."""
MIN_LOOKING = timedelta(hours=3)
"""A window whose latest start is sooner than this after the POST gets no ``search_until``."""


def _keep_looking(
    rng: random.Random, request: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any] | None, list[Action]]:
    """A fifth of the lifecycles keep looking: ``search_until`` between 2 hours after the POST and the
    window's latest start (at most 30 days), ``search_every_minutes`` 15 to 360, and a market that lists
    capacity only later (half: from a share 0.05-1.3 of the way to the deadline, so sometimes only after
    it), never (a fifth) or with churn (the rest: pools withdrawn 30-70% of 2, 6 or 12-hour periods); a
    third of them are cancelled while they look (at ``SEARCHING`` plus 0-12 h).

    Returns:
        ``(request fields, market listing, actions)``; empty when the lifecycle does not keep looking.
    """
    if rng.random() >= KEEP_LOOKING_SHARE:
        return {}, None, []
    end = datetime.fromisoformat(str(request["latest_end"]).replace("Z", "+00:00"))
    room = min(end - timedelta(hours=int(request["duration_hours"])), START + timedelta(days=30)) - START
    if room < MIN_LOOKING:
        return {}, None, []
    deadline = START + timedelta(seconds=rng.uniform(7200, room.total_seconds()))
    fields = {
        "search_until": _ts(deadline),
        "search_every_minutes": rng.choice((15, 30, 60, 60, 120, 360)),
    }
    mode = rng.random()
    if mode < 0.5:
        appears = START + (deadline - START) * rng.uniform(0.05, 1.3)
        listing: dict[str, Any] = {"listed_from": {"*": _ts(appears)}}
    elif mode < 0.7:
        listing = {"listed_from": {"*": _ts(START + timedelta(days=400))}}
    else:
        listing = {"churn": round(rng.uniform(0.3, 0.7), 2), "churn_period_hours": rng.choice((2, 6, 12))}
    actions = []
    if rng.random() < 1 / 3:
        actions.append(
            Action("cancel", "SEARCHING", 0.0 if rng.random() < 0.3 else round(rng.uniform(0.1, 12), 1))
        )
    return fields, listing, actions


def _brings(rng: random.Random, request: dict[str, Any]) -> bool:
    """A tenth of the reserved lifecycles (not a dry run, not a window within the hour: a brought
    reservation is ``reserved`` only) bring their own reservation."""
    if rng.random() >= BROUGHT_SHARE or request.get("dry_run") or request.get("strategy"):
        return False
    return not starts_soon(request, START)


SERVE_SHARE = 0.2
"""The share of lifecycles asked to keep serving past their reservation (issue 17 item 2)."""
ROLLOVER_SHARE = 0.8
EXTEND_THEN_ROLL_SHARE = 0.5
"""The share of the chains drawn to roll over whose first region has one more day to sell: extended in place
by a day first, then rolled over (issue 28)."""
"""The share of those (two days or longer) whose market leaves no extension in place and sells the next
reservation elsewhere, so the chain rolls over (with a budget that covers the chain and no approval asked)."""


def _serve_until(rng: random.Random, request: dict[str, Any]) -> dict[str, Any] | None:
    """A fifth of the lifecycles (not dry runs) keep serving one to three days past the reservation's
    earliest end (``serve_until``, sometimes a longer lead): extended in place, rolled over to a successor
    (bought once, within the chain's budget, released at the end), or told at the lead time.

    Most of them (:data:`ROLLOVER_SHARE`; not those within the hour, nor of one day: the successor would start
    when the first does) are drawn to roll over: the window holds one start (the first 11:30 UTC from
    ``earliest_start``, when plans and blocks start), at least two regions are asked, and the returned
    listing sells out the first region from the reservation's end (no extension, no successor there) and
    the others over all but its last day (the first is bought in the first region, the successor elsewhere,
    starting the day before the end). None: the market as drawn."""
    if rng.random() >= SERVE_SHARE or request.get("dry_run"):
        return None
    start = datetime.fromisoformat(str(request["earliest_start"]).replace("Z", "+00:00"))
    end = start + timedelta(hours=int(request["duration_hours"]))
    request["serve_until"] = _ts(end + timedelta(days=rng.randint(1, 3), hours=rng.randint(-1, 1)))
    if rng.random() < 0.3:
        request["rollover_lead_hours"] = rng.choice((36, 72))
    if (
        rng.random() >= ROLLOVER_SHARE
        or start <= START + timedelta(hours=1)
        or request["duration_hours"] < 48
    ):
        return None  # within the hour: on demand first; one day: the successor's start is the first's
    first = start.replace(hour=11, minute=30, second=0, microsecond=0)
    if first < start:
        first += timedelta(days=1)
    ends = first + timedelta(hours=int(request["duration_hours"]))
    request["latest_end"] = _ts(ends)
    if len(request["regions"]) < 2:
        request["regions"] = [
            *request["regions"],
            rng.choice([r for r in REGIONS if r not in request["regions"]]),
        ]
    # Some chains extend in place first, by the one day the first region still has, then roll over (issue
    # 28): serve_until then lies two or three days past the end, and the successor starts at the extended end.
    extends = rng.random() < EXTEND_THEN_ROLL_SHARE
    room = timedelta(days=1) if extends else timedelta(0)
    if extends:
        request["serve_until"] = _ts(ends + timedelta(days=rng.randint(2, 3), minutes=rng.randint(0, 60)))
    sold_out = {
        f"{request['regions'][0]}/*": (
            (ends + room).date().isoformat(),
            (ends + timedelta(days=60)).date().isoformat(),
        )
    }
    for region in request["regions"][1:]:
        sold_out[f"{region}/*"] = (
            first.date().isoformat(),
            (ends + room - timedelta(days=2)).date().isoformat(),
        )
    return {"sold_out": sold_out, "rolls_over": True, "extends_first": extends}


def _chain_factor(request: dict[str, Any]) -> Decimal:
    """A budget (times the first reservation's price) that covers the first and a successor reaching
    ``serve_until`` (a day longer than the days past the end, at up to half as dear again elsewhere)."""
    start = datetime.fromisoformat(str(request["earliest_start"]).replace("Z", "+00:00"))
    end = start + timedelta(hours=int(request["duration_hours"]))
    until = datetime.fromisoformat(str(request["serve_until"]).replace("Z", "+00:00"))
    successor_days = (until - end) / timedelta(days=1) + 3  # a day more: some extend by a day first
    return Decimal(str(round(1.1 + 1.5 * successor_days / (int(request["duration_hours"]) / 24), 2)))


def make_scenario(seed: int, index: int) -> Scenario:
    """Draw lifecycle ``index`` of a soak seeded ``seed`` (pure: same arguments, same scenario)."""
    own = lifecycle_seed(seed, index)
    rng = random.Random(own)
    request = _request(rng)
    budget_factor = _factor(rng, 1.05, 3.0) if rng.random() < 0.75 else _factor(rng, 0.3, 0.95)
    approval, approval_factor, actions = _approval(rng, int(request["approval_timeout_hours"]))
    if rng.random() < 0.4:  # the same request delivered 2-5 times in all
        for _ in range(rng.randint(1, 4)):
            actions.append(Action(rng.choice(("post", "bus")), rng.choice(DUPLICATE_PHASES)))
    if rng.random() < 0.35:
        phase = rng.choice(CANCEL_PHASES)
        delay = 0.0 if phase == "now" or rng.random() < 0.5 else round(rng.uniform(0.1, 48.0), 1)
        if request.get("platform") == "ec2" and phase == "PURCHASED" and rng.random() < 0.5:
            # While the block is payment-pending (Timings.block_payment_pending: 5 minutes).
            delay = round(rng.uniform(0.0, 0.07), 3)
        actions.append(Action("cancel", phase, delay))
        if rng.random() < 0.25:
            actions.append(Action("cancel", phase, delay))
    faults = _faults(rng, str(request.get("platform", "sagemaker")))
    # spot-ok: half the time no on-demand capacity anywhere, so the spot tries run (drawn from a separate
    # generator: the other draws of every lifecycle stay what they were).
    if request.get("strategy") == "spot-ok" and random.Random(own + 1).random() < 0.5:
        faults.append(
            FaultRule(
                service="ec2",
                operation="RunInstances",
                kind=FaultKind.INSUFFICIENT_CAPACITY,
                match={"InstanceMarketOptions": None},  # on demand only: spot and block launches pass
            )
        )
    # At-least-once, late and refused deliveries, operators' stops, stale listings (issue 12 items 4 and 6),
    # from a generator of their own, so the other draws of every lifecycle stay what they were.
    faults += _delivery_faults(random.Random(f"{own}:delivery"), ec2=request.get("platform") == "ec2")
    # What the local cloud is kinder than AWS about by default, in every lifecycle (issue 29).
    faults += _kindness_faults(random.Random(f"{own}:kindness"), ec2=request.get("platform") == "ec2")
    actions += _extensions(random.Random(f"{own}:extend"))
    # Keep looking and brought reservations (issue 17), from generators of their own as well.
    looking, listing, looking_actions = _keep_looking(random.Random(f"{own}:look"), request)
    request.update(looking)
    actions += looking_actions
    brings = not looking and _brings(random.Random(f"{own}:brought"), request)
    if not looking and not brings:  # keep serving (issue 17 item 2): its own generator too
        serving = _serve_until(random.Random(f"{own}:serve"), request)
        if serving is not None:  # drawn to roll over: the chain's budget, nobody to approve its successor
            listing = serving
            budget_factor = max(budget_factor, _chain_factor(request))
            approval, approval_factor = "none", None
            actions = [a for a in actions if a.kind not in ("approve", "reject")]
        # An approver who moves serve_until, then tries to approve what that causes (issue 28).
        patching = _approver_patch(random.Random(f"{own}:patch"), request)
        if patching is not None:
            patch_actions, threshold = patching
            actions = [a for a in actions if a.kind not in ("approve", "reject")] + patch_actions
            approval, approval_factor = "approve", threshold
            budget_factor = max(budget_factor, _patch_budget(request))
    # Extensions asked close to the release (issue 28), late and invalid ReservationRequested deliveries.
    actions += _near_release(random.Random(f"{own}:near-release"), request)
    actions += _bus_attacks(random.Random(f"{own}:bus"))
    return Scenario(
        index=index,
        seed=own,
        request=request,
        budget_factor=budget_factor,
        approval=approval,
        approval_factor=approval_factor,
        actions=tuple(actions),
        faults=tuple(faults),
        listing=listing,
        brings=brings,
        extension_payment_minutes=_extension_payment(random.Random(f"{own}:payment")),
        competition=_competition(random.Random(f"{own}:competition")),
    )


NEAR_RELEASE_SHARE = 0.15
"""The share of lifecycles (not dry runs) that ask to extend close to the release (issue 28)."""


def _near_release(rng: random.Random, request: dict[str, Any]) -> list[Action]:
    """A few lifecycles ask to extend close to the release the purchase scheduled: about 12 hours before it
    (around the latest moment a payment AWS may take 12 hours for still settles before the release), 1-3 hours
    before it, or 5-50 minutes before it (inside the release margin of some). Half buy the first offering
    even when the dry run says it is not allowed (``extend_any``): the application must refuse it, never pay
    for hours after its release began."""
    if rng.random() >= NEAR_RELEASE_SHARE or request.get("dry_run"):
        return []
    offset = rng.choice(
        (
            round(12 + rng.uniform(-0.5, 0.5), 2),
            round(rng.uniform(1.0, 3.0), 2),
            round(rng.uniform(5 / 60, 50 / 60), 3),
        )
    )
    return [Action(rng.choice(("extend", "extend_any")), "RELEASE", -offset)]


PATCH_SHARE = 0.1
"""The share of lifecycles (not dry runs, not within the hour) whose approver moves ``serve_until``."""


def _approver_patch(rng: random.Random, request: dict[str, Any]) -> tuple[list[Action], Decimal] | None:
    """A tenth of the lifecycles get an approver who PATCHes ``serve_until`` 1-3 days past the reservation's
    earliest end (at ``PURCHASED``, ``ACTIVE`` or ``READY``, plus 0-6 h), with a threshold below a day of the
    reservation's price, so the extension or successor that follows waits for an approval: that approver
    tries to approve it (it must be refused: whoever causes spend is its requester, issue 28), and in half
    of them a second approver approves it afterwards. The first purchase, above the threshold too, is
    approved by that approver before its PATCH (the usual approval).

    Returns:
        ``(actions, approval threshold factor)`` or None when the lifecycle does not draw it.
    """
    if rng.random() >= PATCH_SHARE or request.get("dry_run") or starts_soon(request, START):
        return None
    hours = 24 * rng.randint(1, 3) + rng.randint(-1, 1)
    phase = rng.choice(("PURCHASED", "ACTIVE", "READY"))
    delay = 0.0 if rng.random() < 0.4 else round(rng.uniform(0.1, 6.0), 1)
    actions = [
        Action("approve", "AWAITING_APPROVAL", round(rng.uniform(0, 0.4), 2)),
        Action("patch", phase, delay, variant=str(hours)),
        Action("approve_caused", "CAUSED", 0.0 if rng.random() < 0.5 else round(rng.uniform(0.1, 2.0), 1)),
    ]
    if rng.random() < 0.5:
        actions.append(Action("approve_other", "CAUSED", round(rng.uniform(2.1, 4.0), 1)))
    days = int(request["duration_hours"]) / 24
    return actions, _factor(rng, 0.1, 0.6) / Decimal(str(days))


def _patch_budget(request: dict[str, Any]) -> Decimal:
    """A budget (times the first reservation's price) with room for what a PATCH of ``serve_until`` up to
    three days on may buy: a successor of up to four days at up to half as dear again elsewhere."""
    return Decimal(str(round(1.1 + 1.5 * 4 / (int(request["duration_hours"]) / 24), 2)))


INVALID_DELIVERIES = ("no-request", "bad-count", "schema-99", "other-budget", "bad-id")
"""The invalid or conflicting ``ReservationRequested`` deliveries the soak puts on the bus about its request:
no ``request``, an instance count AWS never sells (3), an unknown ``schema_version``, the same request id with
another body (a budget 10 times larger), an id that is not one (``soak/../x``)."""
BUS_ATTACK_SHARE = 0.25
LATE_PHASES = ("READY", "RELEASED", "CANCELLED", "REJECTED", "FAILED", "end")


def _bus_attacks(rng: random.Random) -> list[Action]:
    """A quarter of the lifecycles get a late or an invalid ``ReservationRequested`` (issue 28): a valid
    copy long after the request moved on (``READY``, or after its outcome, plus 0-48 h), or an invalid or
    conflicting one (:data:`INVALID_DELIVERIES`) at any phase; neither may buy, change what is recorded or
    end the request."""
    if rng.random() >= BUS_ATTACK_SHARE:
        return []
    if rng.random() < 0.5:
        delay = 0.0 if rng.random() < 0.3 else round(rng.uniform(0.1, 48.0), 1)
        return [Action("bus", rng.choice(LATE_PHASES), delay)]
    # Once the request is recorded (a conflicting body delivered before it would simply be the request).
    phase = rng.choice(("REQUESTED", "PLANNED", "PURCHASED", "READY", "end"))
    return [Action("bus_invalid", phase, 0.0, variant=rng.choice(INVALID_DELIVERIES))]


EXTENSION_PAYMENT_MAX_MINUTES = 13 * 60
"""The longest extension payment the soak draws: past AWS's 12-hour deadline, so some fail there."""


def _extension_payment(rng: random.Random) -> tuple[float, float]:
    """Every lifecycle's extension payments stay pending from 2 minutes up to a drawn bound, log-uniform
    between 5 minutes and :data:`EXTENSION_PAYMENT_MAX_MINUTES` (AWS: pending until paid, failed after 12 h
    or 35 min before the end; AWS_FACTS.md, "Payments")."""
    high = round(math.exp(rng.uniform(math.log(5), math.log(EXTENSION_PAYMENT_MAX_MINUTES))), 1)
    return 2.0, high


def starts_soon(request: dict[str, Any], now: datetime) -> bool:
    """The window starts within the hour (``capacity.models.ON_DEMAND_FIRST_HORIZON``): on demand is tried."""
    return datetime.fromisoformat(request["earliest_start"]) <= now + timedelta(hours=1)
