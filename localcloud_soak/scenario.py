"""The fault soak: many randomized reservation lifecycles on the local cloud, checked for the money rules.

``python -m localcloud soak --seed N --count 200`` (``make soak SEED=N COUNT=200``) runs ``count``
lifecycles, each on a fresh :class:`~localcloud.cloud.LocalCloud` of the application's own template, each
from a seed derived from ``N`` and its index (:func:`lifecycle_seed`), so one lifecycle can be re-run alone
with ``--only INDEX``. A lifecycle draws (:func:`make_scenario`):

- a request: ``platform`` ``sagemaker`` (training plan + endpoint: instance type and count, 1 or 2 models,
  24-72 h, lead time 1-60 days) or, for a third, ``ec2`` (capacity block + instances from a launch template:
  a capacity block type, 1-4 instances, 24 h to 14 days in 24 h steps, lead time 1-50 days, inside the
  8-week horizon); 1-3 regions; for a fifth, a window that starts within the hour, so on demand is tried
  first: strategy ``on-demand-first`` (the default then, or asked) or ``spot-ok`` (EC2; half of them find
  no on-demand capacity, so spot is tried); a budget below or above the cheapest offering (training plan
  or capacity block) the market holds for it (for a window within the hour, the larger of that and the
  on-demand cost until ``latest_end``), an approval threshold (none, above the budget, or below that
  figure) with an approver who approves, rejects, never answers (timeout), answers late (after the
  offering expired) or after the timeout; sometimes a dry run;
- deliveries: the request is POSTed, and 1-4 more times (40% of lifecycles) POSTed or put straight on the
  bus, at random moments (at once, at a ledger state, or after the lifecycle ended);
- cancellations (DELETE, sometimes twice) at a random ledger state plus a random delay (EC2: also while the
  block is ``payment-pending``, the first minutes after ``PURCHASED``);
- faults (:mod:`localcloud.faults`): throttling, 5xx and latency on random services (``ec2`` instead of
  ``sagemaker`` in an EC2 lifecycle), insufficient capacity (searches, purchases, endpoints, inference
  components; ``DescribeCapacityBlockOfferings``, ``PurchaseCapacityBlock``, ``RunInstances``), stuck
  resources (SageMaker creations and deletions; a capacity block left ``payment-pending``),
  ``payment_failed`` on ``PurchaseCapacityBlock``, crashes after commit on random writes (the purchase,
  ``RunInstances``, ``TerminateInstances``, SageMaker creates, DynamoDB, EventBridge, Scheduler, Step
  Functions).

After the lifecycle is idle (nothing scheduled, nothing running) the invariants are checked
(:func:`check`): no double purchase (training plans and capacity blocks, asked of the emulator directly),
nothing above budget (a plan's or block's upfront fee, or what ran on demand until its end), no purchase
without the approval it needed (or in a dry run, or after a rejection; on demand, which asks no approval,
never above the threshold), nothing billable left behind (endpoints, instances...; unless AWS never
finished a deletion because of an injected ``stuck`` fault and the application reported it: "RELEASE
FAILED"), a final ledger state, and a Slack notification for every failure. The run prints the lifecycles
per outcome and per platform/strategy/what ran, the faults fired per kind and every violation with the
command that reproduces it; it exits 1 on any violation.

Each lifecycle is bounded by :data:`VIRTUAL_LIMIT` of virtual time and by the clock's hang detector
(``--stall-seconds`` of real time without progress; never by how long it takes on a busy machine); a
lifecycle that does not become idle within them is a violation too. Releases retry until nothing
bills, so a lifecycle whose deletion AWS never finishes (an injected ``stuck``) never becomes idle: it is over
once its release failed, was reported and was tried again (:data:`RETRIED_ATTEMPTS` failed attempts).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any, TextIO

from localcloud.clock import ClockStuckError
from localcloud.cloud import LocalCloud, render_blocks
from localcloud.faults import FaultInjector, FaultKind, FaultRule

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
``_Driver.retrying_stuck``)."""
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


# ------------------------------------------------------------------------------------------- scenario


@dataclass(frozen=True)
class Action:
    """Something a person or another system does during a lifecycle.

    ``kind``: ``post`` (POST /reservations), ``bus`` (``ReservationRequested`` put straight on the bus),
    ``cancel`` (DELETE), ``approve`` or ``reject`` (POST .../approval). ``phase``: ``now`` (right after the
    first POST), a ledger state (once it is recorded) or ``end`` (once the lifecycle is idle); every action
    whose phase never comes runs when the lifecycle is idle. ``delay_hours``: virtual hours after the phase.
    """

    kind: str
    phase: str
    delay_hours: float = 0.0


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
            f"{a.kind}@{a.phase}" + (f"+{a.delay_hours:.1f}h" if a.delay_hours else "") for a in self.actions
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
    """EventBridge, Scheduler and Lambda's at-least-once delivery: events, firings and asynchronous
    invocations delivered twice or late (reordered), targets that refuse a delivery (retried by their
    retry policy), an operator's ``StopExecution`` of a workflow, and SageMaker's eventual consistency."""
    rules: list[FaultRule] = []
    if rng.random() < 0.3:
        rules.append(
            FaultRule(
                service=rng.choice(("eventbridge", "scheduler", "lambda")),
                kind=FaultKind.DUPLICATE_DELIVERY,
                probability=round(rng.uniform(0.1, 0.5), 2),
            )
        )
    if rng.random() < 0.3:
        rules.append(
            FaultRule(
                service=rng.choice(("eventbridge", "scheduler")),
                kind=FaultKind.DELAYED_DELIVERY,
                probability=round(rng.uniform(0.1, 0.4), 2),
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
    if not ec2 and rng.random() < 0.2:
        rules.append(
            FaultRule(
                service="sagemaker", kind=FaultKind.STALE_LISTING, delay_seconds=round(rng.uniform(5, 120))
            )
        )
    return rules


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
    return Scenario(
        index=index,
        seed=own,
        request=request,
        budget_factor=budget_factor,
        approval=approval,
        approval_factor=approval_factor,
        actions=tuple(actions),
        faults=tuple(faults),
    )


# ---------------------------------------------------------------------------------------------- facts


UNCHARGED = frozenset({"Failed", "payment-failed", "failed"})
"""Statuses of a training plan (``Failed``) or capacity block (``payment-failed``, ``failed``) that charged
nothing."""


@dataclass(frozen=True)
class PlanFact:
    """A reservation bought in the cloud (any region): what money was spent on.

    ``kind`` is ``training-plan`` (``name`` the plan's name, ``status`` its ``Status``) or ``capacity-block``
    (``name`` the capacity reservation id ``cr-...``, ``status`` its ``State``); ``upfront_fee_usd`` in USD,
    ``end_time`` UTC.
    """

    name: str
    region: str
    status: str
    upfront_fee_usd: Decimal
    end_time: datetime
    kind: str = "training-plan"


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

    def history(self) -> list[dict[str, Any]]:
        """The ``STATE#`` items, oldest first."""
        return sorted(
            (i for i in self.items if str(i["sk"]).startswith("STATE#")), key=lambda i: str(i["sk"])
        )

    def item(self, sk: str) -> dict[str, Any] | None:
        """The item with this sort key, or None."""
        return next((i for i in self.items if i["sk"] == sk), None)

    def live_plans(self) -> list[PlanFact]:
        """The training plans and capacity blocks that were paid for (a ``Failed`` plan or a
        ``payment-failed`` block charged nothing). Blocks ``expired`` by now count: they were paid."""
        return [p for p in self.plans if p.status not in UNCHARGED]


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
                )
                for r in page["CapacityReservations"]
            )
            if not page.get("NextToken"):
                break
            params = {**params, "NextToken": page["NextToken"]}
    return found


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
) -> Facts:
    """Read the ledger, the training plans and capacity blocks, the billable resources, the Slack outbox,
    the application's AWS calls and the executions of a lifecycle."""
    threshold = request.get("approval_above_usd")
    release_name = f"co-{request['request_id']}-release"
    return Facts(
        request_id=str(request["request_id"]),
        max_upfront_fee_usd=Decimal(str(request["max_upfront_fee_usd"])),
        approval_above_usd=Decimal(str(threshold)) if threshold is not None else None,
        dry_run=bool(request.get("dry_run")),
        items=ledger_items(cloud, str(request["request_id"])),
        plans=training_plans(cloud) + capacity_blocks(cloud),
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
    )


# --------------------------------------------------------------------------------------------- checks


def check_double_purchase(facts: Facts) -> list[str]:
    """More than one reservation (training plan or capacity block) bought, or ``PURCHASED`` recorded more
    than once."""
    problems = []
    live = facts.live_plans()
    if len(live) > 1:
        listed = "; ".join(f"{p.name} in {p.region} ${p.upfront_fee_usd}" for p in live)
        kinds = {p.kind for p in live}
        noun = {
            frozenset({"training-plan"}): "training plans",
            frozenset({"capacity-block"}): "capacity blocks",
        }.get(frozenset(kinds), "reservations (training plans and capacity blocks)")
        problems.append(f"double purchase: {len(live)} {noun} bought ({listed})")
    purchased = [i for i in facts.history() if i["state"] == "PURCHASED"]
    if len(purchased) > 1:
        problems.append(f"double purchase: PURCHASED recorded {len(purchased)} times in the ledger")
    return problems


def on_demand_spend(facts: Facts) -> tuple[str, Decimal] | None:
    """What the instances (or endpoint) launched on demand or on spot cost until the end the application
    set for them (USD, at the on-demand rate its ``PURCHASE`` item records for the region launched in), with
    a description; None when nothing ran on demand."""
    purchase = facts.item("PURCHASE")
    if purchase is None or purchase.get("market") not in ("on-demand", "spot"):
        return None
    rate = Decimal(str(purchase.get("on_demand_usd_per_hour") or "0"))
    start = datetime.fromisoformat(str(purchase["start_time"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(purchase["end_time"]).replace("Z", "+00:00"))
    hours = Decimal(max(0, int((end - start).total_seconds()))) / Decimal(3600)
    cost = (rate * int(purchase.get("instance_count") or 0) * hours).quantize(Decimal("0.01"))
    what = (
        f"{purchase.get('instance_count')} x {purchase.get('instance_type')} on {purchase['market']} in "
        f"{purchase.get('region')} at ${rate}/h from {purchase['start_time']} to {purchase['end_time']}"
    )
    return what, cost


def check_budget(facts: Facts) -> list[str]:
    """A plan or capacity block, a ``PURCHASED`` amount, or capacity launched on demand until its end,
    above ``max_upfront_fee_usd``."""
    budget = facts.max_upfront_fee_usd
    spend = on_demand_spend(facts)
    on_demand = (
        [f"on demand above budget: {spend[0]} costs ${spend[1]} > max_upfront_fee_usd ${budget}"]
        if spend is not None and spend[1] > budget
        else []
    )
    problems = [
        f"purchase above budget: {p.name} costs ${p.upfront_fee_usd} > max_upfront_fee_usd ${budget}"
        for p in facts.live_plans()
        if p.upfront_fee_usd > budget
    ]
    problems.extend(
        f"purchase above budget: PURCHASED records ${i['money_usd']} > max_upfront_fee_usd ${budget}"
        for i in facts.history()
        if i["state"] == "PURCHASED"
        and i.get("money_usd") is not None
        and Decimal(str(i["money_usd"])) > budget
    )
    return problems + on_demand


def _bought_at(facts: Facts) -> str | None:
    """When the purchase was decided: the ``PURCHASE_INTENT`` put before AWS is called (else PURCHASED)."""
    intent = facts.item("PURCHASE_INTENT")
    if intent is not None:
        return str(intent.get("written_at") or "")
    purchased = next((i for i in facts.history() if i["state"] == "PURCHASED"), None)
    return str(purchased["at"]) if purchased else None


def check_approval(facts: Facts) -> list[str]:
    """A purchase above ``approval_above_usd`` without an ``APPROVAL_DECISION`` approve before it; a purchase
    in a dry run; a purchase after the reservation was rejected."""
    problems = []
    spend = on_demand_spend(facts)
    if spend is not None:  # no approval is asked on demand: the application must reserve instead
        if facts.dry_run:
            problems.append(f"launched on demand in a dry run: {spend[0]}")
        if facts.approval_above_usd is not None and spend[1] > facts.approval_above_usd:
            problems.append(
                f"on demand without approval: {spend[0]} costs ${spend[1]} > approval_above_usd "
                f"${facts.approval_above_usd} (on demand asks no approval: it must reserve instead)"
            )
    live = facts.live_plans()
    if not live:
        return problems
    if facts.dry_run:
        problems.append(f"purchase in a dry run: {', '.join(p.name for p in live)}")
    bought_at = _bought_at(facts) or ""
    threshold = facts.approval_above_usd
    if threshold is not None and any(p.upfront_fee_usd > threshold for p in live):
        fee = max(p.upfront_fee_usd for p in live)
        decision = facts.item("APPROVAL_DECISION")
        if decision is None or decision.get("approved") is not True:
            verdict = "no APPROVAL_DECISION" if decision is None else "the APPROVAL_DECISION is a rejection"
            problems.append(
                f"purchase without approval: ${fee} > approval_above_usd ${threshold} and {verdict}"
            )
        elif not bought_at or str(decision.get("written_at", "")) > bought_at:
            problems.append(
                f"purchase without approval: the approval ({decision.get('written_at')}) came after the "
                f"purchase ({bought_at or 'no PURCHASE_INTENT'})"
            )
    rejected = next((i for i in facts.history() if i["state"] == "REJECTED"), None)
    if rejected is not None and bought_at and str(rejected["at"]) < bought_at:
        problems.append(f"purchase after rejection: REJECTED at {rejected['at']}, bought at {bought_at}")
    return problems


def check_billable(facts: Facts) -> list[str]:
    """Billable resources left when the lifecycle is idle (nothing more will delete them)."""
    if not facts.billable:
        return []
    reported = any(f"{facts.request_id} RELEASE FAILED" in text for text in facts.slack)
    if facts.stuck_fired and reported:
        return []  # AWS never finished a deletion (injected); a person was told what still bills
    ends = ", ".join(sorted({_ts(p.end_time) for p in facts.live_plans()})) or "no plan"
    why = "" if facts.stuck_fired else " (no stuck fault fired)"
    return [
        f"billable resource left after its reservation's end (plan end {ends}, now {_ts(facts.now)}, "
        f"release failure {'reported' if reported else 'not reported'}{why}): {'; '.join(facts.billable)}"
    ]


def check_final_state(facts: Facts) -> list[str]:
    """The lifecycle must end in RELEASED/REJECTED/FAILED/CANCELLED (a dry run may end PLANNED), and a
    purchase must end released (RELEASED) or with its release failure recorded (FAILED, phase release)."""
    if not facts.finished:
        return [f"lifecycle did not finish: {facts.unfinished_reason}"]
    history = facts.history()
    if not history:
        if not facts.accepted:
            return []  # never accepted (every POST answered 4xx/5xx): no lifecycle, and the client knows
        return ["lifecycle ends without a final ledger state: the request was accepted, nothing recorded"]
    last = history[-1]
    problems = []
    dry_run_done = (
        facts.dry_run
        and last["state"] == "PLANNED"
        and (last.get("detail") or {}).get("decision") == "DRY_RUN"
    )
    if last["state"] not in FINAL_STATES and not dry_run_done:
        problems.append(
            f"lifecycle ends without a final ledger state: {' -> '.join(str(i['state']) for i in history)}"
        )
    if facts.live_plans():
        released = any(i["state"] == "RELEASED" for i in history)
        release_failed = any(
            i["state"] == "FAILED" and (i.get("detail") or {}).get("phase") == "release" for i in history
        )
        if not released and not release_failed:
            problems.append(
                "a purchase that never ended released: " + " -> ".join(str(i["state"]) for i in history)
            )
    return problems


def check_failures_notified(facts: Facts) -> list[str]:
    """Every FAILED in the ledger has its Slack message (``<id> FAILED``, ``<id> RELEASE FAILED`` or the
    ``NO_OFFERING`` decision)."""
    rid = facts.request_id
    problems = []
    for entry in facts.history():
        if entry["state"] != "FAILED":
            continue
        detail = entry.get("detail") or {}
        if detail.get("phase") == "release":
            marks = [f"{rid} RELEASE FAILED"]
        else:
            marks = [f"{rid} FAILED", f"Decision for {rid}: NO_OFFERING"]
        if not any(mark in text for text in facts.slack for mark in marks):
            problems.append(
                f"failure without a notification: FAILED at {entry['at']} ({detail.get('error')}) and no "
                f"Slack message containing {' or '.join(repr(m) for m in marks)}"
            )
    return problems


def check_total_spend(facts: Facts) -> list[str]:
    """Everything the request paid (reservations bought and capacity run on demand) above its budget."""
    spend = on_demand_spend(facts)
    total = sum((p.upfront_fee_usd for p in facts.live_plans()), Decimal(0)) + (spend[1] if spend else 0)
    if total > facts.max_upfront_fee_usd:
        return [f"total spend ${total} > max_upfront_fee_usd ${facts.max_upfront_fee_usd}"]
    return []


def check_money_recorded(facts: Facts) -> list[str]:
    """The ledger's money must equal what AWS charged, and every reservation bought must have its
    ``PURCHASE`` record and its release schedule (even when a Lambda died right after the purchase)."""
    live = facts.live_plans()
    recorded = sum(
        (Decimal(str(i["money_usd"])) for i in facts.history() if i.get("money_usd") is not None), Decimal(0)
    )
    charged = sum((p.upfront_fee_usd for p in live), Decimal(0))
    problems = []
    if recorded != charged:
        problems.append(f"ledger money ${recorded} != what AWS charged ${charged} ({len(live)} bought)")
    if live and facts.item("PURCHASE") is None:
        problems.append(f"bought without a PURCHASE record: {', '.join(p.name for p in live)}")
    if live and not facts.release_scheduled:
        problems.append(f"bought without a release schedule: {', '.join(p.name for p in live)}")
    return problems


TRANSIENT_ERRORS = frozenset(
    {"RetryableAwsError", "Sandbox.Timedout", "States.Timeout", "Lambda.Unknown", "PurchaseUnconfirmed"}
)
"""Errors that are a fault of the moment, never a reason to give up a reservation that was paid for."""


def check_paid_kept(facts: Facts) -> list[str]:
    """A reservation that was paid must not end ``REJECTED``, or ``FAILED`` on a transient fault, or with its
    reserve workflow aborted, without ever serving (``READY``)."""
    if not facts.live_plans():
        return []
    history = facts.history()
    if any(i["state"] == "READY" for i in history):
        return []
    problems = []
    for entry in history:
        detail = entry.get("detail") or {}
        if entry["state"] == "REJECTED":
            problems.append(f"paid, then REJECTED at {entry['at']} without serving")
        if (
            entry["state"] == "FAILED"
            and detail.get("phase") != "release"
            and detail.get("error") in TRANSIENT_ERRORS
        ):
            problems.append(f"paid, then FAILED on a transient fault ({detail.get('error')}) without serving")
    if any(
        machine == "ReserveCapacityStateMachine" and status == "ABORTED"
        for machine, status in facts.executions
    ):
        cancelled = any(i["state"] == "CANCELLED" for i in history)
        # A stopped workflow that was resumed (RESUME#: capacity.logic.stopped) was not thrown away; how the
        # resumed one ended is judged by the other rules.
        resumed = any(str(i.get("sk", "")).startswith("RESUME#") for i in facts.items)
        if not cancelled and not resumed:
            problems.append("paid, then the reserve workflow was aborted and the reservation never served")
    return problems


CANCEL_TO_RELEASED = timedelta(hours=6)
"""A cancel accepted must leave nothing billing within this much virtual time (a stuck deletion excepted)."""


def check_cancel_honoured(facts: Facts) -> list[str]:
    """A cancel answered 202 is not lost: the reservation ends cancelled (or was already over), and what it
    bought is released within :data:`CANCEL_TO_RELEASED` (unless AWS never finished a deletion)."""
    if not facts.cancels_accepted or not facts.finished:
        return []
    first = min(facts.cancels_accepted)
    history = facts.history()
    finals_before = [i for i in history if i["state"] in FINAL_STATES and _utc(i["at"]) <= first]
    problems = []
    if not finals_before and not any(i["state"] == "CANCELLED" for i in history):
        problems.append(f"cancel accepted at {_ts(first)} but the reservation never ended CANCELLED")
    bought = facts.live_plans() or on_demand_spend(facts) is not None
    released = next((i for i in history if i["state"] == "RELEASED" and _utc(i["at"]) >= first), None)
    if bought and not finals_before and not facts.stuck_fired:
        if released is None:
            problems.append(f"cancel accepted at {_ts(first)}: what was bought was never released")
        elif _utc(released["at"]) - first > CANCEL_TO_RELEASED:
            problems.append(
                f"cancel accepted at {_ts(first)}: released only at {released['at']} "
                f"(more than {CANCEL_TO_RELEASED} later)"
            )
    return problems


def cancel_to_released_hours(facts: Facts) -> float | None:
    """Virtual hours from the first accepted cancel to the ``RELEASED`` after it (None when not both)."""
    if not facts.cancels_accepted:
        return None
    first = min(facts.cancels_accepted)
    released = next((i for i in facts.history() if i["state"] == "RELEASED" and _utc(i["at"]) >= first), None)
    return None if released is None else (_utc(released["at"]) - first) / timedelta(hours=1)


def check_approval_decision(facts: Facts) -> list[str]:
    """The approver is not the requester; an approval accepted is not lost (the reservation does not end
    ``REJECTED`` for want of one); what was bought costs no more than the offering that was approved."""
    decision = facts.item("APPROVAL_DECISION")
    problems = []
    if decision is not None and decision.get("approved") is True:
        approver = str(decision.get("approver") or decision.get("actor") or "")
        if approver and approver == facts.requester:
            problems.append(f"approved by its own requester {approver}")
        approval = facts.item("APPROVAL") or {}
        offering = ((approval.get("plan") or {}).get("offering")) or {}
        approved_fee = offering.get("upfront_fee_usd")
        bought = [p.upfront_fee_usd for p in facts.live_plans()]
        if approved_fee is not None and bought and max(bought) > Decimal(str(approved_fee)):
            problems.append(f"bought ${max(bought)}, more than the ${approved_fee} that was approved")
    if facts.approvals_accepted:
        rejected = next((i for i in facts.history() if i["state"] == "REJECTED"), None)
        reason = str(((rejected or {}).get("detail") or {}).get("error") or "")
        if (
            rejected is not None
            and reason == "States.Timeout"
            and _utc(rejected["at"]) > min(facts.approvals_accepted)
        ):
            problems.append(
                f"approval accepted at {_ts(min(facts.approvals_accepted))} and lost: REJECTED for want of it"
            )
    return problems


def check_copies_recorded(facts: Facts) -> list[str]:
    """Every copy count the application set (an inference component's ``CopyCount``) is in the ledger: a
    ``SCALE#`` item with that component and ``to_copies``, or the deployment that created it."""
    recorded = {
        (str(i.get("inference_component_name") or ""), int(i["to_copies"]))
        for i in facts.items
        if str(i["sk"]).startswith("SCALE#") and i.get("to_copies") is not None
    }
    missing = sorted({change for change in facts.copy_changes if change not in recorded})
    return [f"copy count changed without a ledger record: {name} -> {copies}" for name, copies in missing]


def _utc(text: Any) -> datetime:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).astimezone(UTC)


CHECKS: tuple[Callable[[Facts], list[str]], ...] = (
    check_double_purchase,
    check_budget,
    check_total_spend,
    check_money_recorded,
    check_approval,
    check_approval_decision,
    check_paid_kept,
    check_cancel_honoured,
    check_copies_recorded,
    check_billable,
    check_final_state,
    check_failures_notified,
)


def check(facts: Facts) -> list[str]:
    """Every invariant violation of a lifecycle (empty when it kept every rule)."""
    return [problem for checker in CHECKS for problem in checker(facts)]


def route(request: dict[str, Any], facts: Facts, now: datetime = START) -> str:
    """``<platform> <strategy> -> <what ran>``: the platform, the strategy asked (or its default at ``now``,
    the first POST) and what the lifecycle ran on: ``on-demand``/``spot`` (the ``PURCHASE`` item's market),
    ``training plan``, ``capacity block`` (paid for), or ``nothing``."""
    platform = str(request.get("platform") or "sagemaker")
    strategy = request.get("strategy") or ("on-demand-first" if starts_soon(request, now) else "reserved")
    purchase = facts.item("PURCHASE")
    if purchase is not None and purchase.get("market") in ("on-demand", "spot"):
        ran = str(purchase["market"])
    elif facts.live_plans():
        ran = " + ".join(sorted({p.kind.replace("-", " ") for p in facts.live_plans()}))
    else:
        ran = "nothing"
    return f"{platform} {strategy} -> {ran}"


def outcome(facts: Facts) -> str:
    """The lifecycle's outcome: its final states in order (``CANCELLED+RELEASED``), ``DRY_RUN``, or why
    there is none (``NOT_ACCEPTED``, ``UNFINISHED``, ``NO_FINAL(<last state>)``)."""
    if not facts.finished:
        return "UNFINISHED"
    history = facts.history()
    finals: list[str] = []
    for entry in history:
        state = str(entry["state"])
        if state in FINAL_STATES and state not in finals:
            finals.append(state)
    if finals:
        return "+".join(finals)
    if facts.dry_run and history and history[-1]["state"] == "PLANNED":
        return "DRY_RUN"
    if not history and not facts.accepted:
        return "NOT_ACCEPTED"
    return f"NO_FINAL({history[-1]['state'] if history else 'nothing'})"


# ------------------------------------------------------------------------------------------ lifecycle


@dataclass
class LifecycleResult:
    """What one lifecycle did and whether it kept the rules."""

    index: int
    seed: int
    scenario: str
    outcome: str
    violations: list[str]
    faults: dict[str, int]
    api_statuses: dict[str, int]
    wall_seconds: float
    states: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    timeline: str = ""
    route: str = ""
    """``<platform> <strategy> -> <what ran>`` (:func:`route`), e.g. ``ec2 spot-ok -> spot``."""
    cancel_to_released_hours: float | None = None
    """Virtual hours from the first accepted cancel to ``RELEASED`` (:func:`cancel_to_released_hours`)."""


class _Bounds:
    def __init__(self, cloud: LocalCloud, stall_seconds: float | None) -> None:
        self.cloud = cloud
        self.virtual_end = START + VIRTUAL_LIMIT
        self.stall_seconds = stall_seconds

    def exceeded(self) -> str | None:
        if self.cloud.now() > self.virtual_end:
            return (
                f"still running at {_ts(self.cloud.now())}, {VIRTUAL_LIMIT.days} virtual days after the start"
            )
        return None


SOAK_REQUESTER = "arn:aws:iam::123456789012:user/soak"
"""Who requests in the soak (team ml-platform of deploy/policy-seed.json)."""
SOAK_APPROVER = "arn:aws:sts::123456789012:assumed-role/Approvers/soak-approver"
"""Who approves or rejects (an approver of ml-platform, never the requester: four-eyes, issue 16)."""


def _api_event(method: str, path: str, body: dict[str, Any] | None, now: datetime) -> dict[str, Any]:
    resource = path
    parameters = None
    query = None
    caller = SOAK_APPROVER if path.endswith("/approval") else SOAK_REQUESTER
    if method == "DELETE":  # the client confirms that a paid fee is not refunded (DELETE ?confirm=true)
        query = {"confirm": "true"}
    if path.startswith("/reservations/"):
        parameters = {"request_id": path.split("/")[2]}
        resource = "/reservations/{request_id}" + ("/approval" if path.endswith("/approval") else "")
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method,
        "headers": {"Content-Type": "application/json"},
        "pathParameters": parameters,
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()} if query else None,
        "body": json.dumps(body) if body is not None else None,
        "isBase64Encoded": False,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method,
            "path": "/v1" + path,
            "stage": "v1",
            "requestTimeEpoch": int(now.timestamp() * 1000),
            "identity": {"userArn": caller},
        },
    }


def cheapest_offering(cloud: LocalCloud, request: dict[str, Any]) -> Decimal | None:
    """The lowest ``UpfrontFee`` the market offers for the request in its regions (USD), or None.

    ``SearchTrainingPlanOfferings`` (``platform`` ``sagemaker``) or ``DescribeCapacityBlockOfferings``
    (``ec2``, every page) is asked of the emulator directly (no faults), as the application asks.
    """
    fees: list[Decimal] = []
    start = datetime.fromisoformat(request["earliest_start"])
    end = datetime.fromisoformat(request["latest_end"])
    for region in request["regions"]:
        if request.get("platform") == "ec2":
            params: dict[str, Any] = {
                "InstanceType": request["instance_type"],
                "InstanceCount": request["instance_count"],
                "StartDateRange": start,
                "EndDateRange": end,
                "CapacityDurationHours": request["duration_hours"],
            }
            while True:
                page = cloud.emulator.call("ec2", "DescribeCapacityBlockOfferings", params, region=region)
                fees.extend(Decimal(str(o["UpfrontFee"])) for o in page.get("CapacityBlockOfferings", []))
                if not page.get("NextToken"):
                    break
                params = {**params, "NextToken": page["NextToken"]}
            continue
        answer = cloud.emulator.call(
            "sagemaker",
            "SearchTrainingPlanOfferings",
            {
                "TargetResources": ["endpoint"],
                "InstanceType": request["instance_type"],
                "InstanceCount": request["instance_count"],
                "StartTimeAfter": start,
                "EndTimeBefore": end,
                "DurationHours": request["duration_hours"],
            },
            region=region,
        )
        fees.extend(Decimal(str(o["UpfrontFee"])) for o in answer.get("TrainingPlanOfferings", []))
    return min(fees) if fees else None


def on_demand_cost(cloud: LocalCloud, request: dict[str, Any]) -> Decimal:
    """What the request's instances cost on demand from now until ``latest_end`` in its first region (USD,
    the emulated market's prices), the figure ``logic/on_demand.py`` compares with the budget."""
    hours = Decimal(
        max(0, int((datetime.fromisoformat(request["latest_end"]) - cloud.now()).total_seconds()))
    ) / Decimal(3600)
    rate = Decimal(
        cloud.emulator.market.on_demand_usd_per_hour(request["regions"][0], request["instance_type"])
    )
    return rate * int(request["instance_count"]) * hours


def starts_soon(request: dict[str, Any], now: datetime) -> bool:
    """The window starts within the hour (``capacity.models.ON_DEMAND_FIRST_HORIZON``): on demand is tried."""
    return datetime.fromisoformat(request["earliest_start"]) <= now + timedelta(hours=1)


def create_launch_templates(cloud: LocalCloud, request: dict[str, Any]) -> None:
    """The launch template an EC2 request names, in each of its regions (no faults: set up beforehand)."""
    with cloud.dispatcher.exempt():
        for region in request["regions"]:
            cloud.client("ec2", region).create_launch_template(
                LaunchTemplateName=LAUNCH_TEMPLATE,
                LaunchTemplateData={"ImageId": AMI, "InstanceType": request["instance_type"]},
            )


def _money(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


class _Driver:
    """Runs one scenario's actions against a running cloud."""

    def __init__(self, cloud: LocalCloud, scenario: Scenario, body: dict[str, Any], bounds: _Bounds) -> None:
        self.cloud = cloud
        self.body = body
        self.bounds = bounds
        self.pending = list(scenario.actions)
        self.noticed: dict[str, datetime] = {}
        self.api_statuses: Counter[str] = Counter()
        self.answers: list[str] = []
        self.accepted = False
        self.retries = 0
        self.invalid: str | None = None
        self._ddb = cloud.client("dynamodb")
        self._writes = -1
        self._states: list[str] = []
        self.cancels_accepted: list[datetime] = []
        self.approvals_accepted: list[datetime] = []

    def states(self) -> list[str]:
        # The ledger only changes by DynamoDB writes: read it again only when one was made.
        counts = self.cloud.dispatcher.counts
        writes = sum(
            counts.get(f"dynamodb.{op}", 0) for op in ("PutItem", "BatchWriteItem", "TransactWriteItems")
        )
        if writes != self._writes:
            self._writes = writes
            self._states = ledger_states(self.cloud, REQUEST_ID, self._ddb)
        return self._states

    def retrying_stuck(self) -> bool:
        """A ``stuck`` fault fired and the release has failed, been reported and been tried again at least
        once since: releases retry until nothing bills, so a resource AWS never finishes deleting keeps the
        lifecycle from ever becoming idle. It is over for the soak (its checks accept a stuck deletion that
        the application reported)."""
        seen = self.states()
        if "RELEASING" not in seen or not any(f.kind is FaultKind.STUCK for f in self.cloud.faults.fired):
            return False
        return seen[seen.index("RELEASING") :].count("FAILED") >= RETRIED_ATTEMPTS

    def api(self, method: str, path: str, body: dict[str, Any] | None) -> dict[str, Any]:
        answer = self.cloud.api_request(_api_event(method, path, body, self.cloud.now()))
        label = {"POST": "post", "DELETE": "cancel"}.get(method, method.lower())
        if path.endswith("/approval"):
            label = "approval"
        self.api_statuses[f"{label} {answer['statusCode']}"] += 1
        self.answers.append(f"{method} {path} -> {answer['statusCode']} {str(answer.get('body'))[:300]}")
        return answer

    def post(self) -> None:
        """POST the request as a client does: a 5xx or a 409 "in progress" is retried 3 minutes later
        (at most 3 times per lifecycle)."""
        answer = self.api("POST", "/reservations", self.body)
        status = int(answer["statusCode"])
        if status == 202:
            self.accepted = True
        elif status == 400 and not self.answers[:-1]:
            self.invalid = str(answer.get("body"))[:300]
        elif (
            status >= 500 or (status == 409 and "in progress" in str(answer.get("body")))
        ) and self.retries < 3:
            self.retries += 1
            elapsed = (self.cloud.now() - self.noticed["now"]) / timedelta(hours=1)
            self.pending.append(Action("post", "now", round(elapsed + 0.05, 4)))

    def fire(self, action: Action) -> None:
        rid = REQUEST_ID
        if action.kind == "post":
            self.post()
        elif action.kind == "bus":
            entry = {
                "Source": "capacity.orchestrator",
                "DetailType": "ReservationRequested",
                "Detail": json.dumps({"schema_version": 1, "request": self.body}),
                "EventBusName": self.cloud.stack.physical_id("EventBus"),
            }
            with self.cloud.dispatcher.exempt():
                self.cloud.put_events([entry])
            self.api_statuses["bus put"] += 1
            self.accepted = True
        elif action.kind == "cancel":
            if self.api("DELETE", f"/reservations/{rid}", None)["statusCode"] == 202:
                self.cancels_accepted.append(self.cloud.now())
        elif action.kind in ("approve", "reject"):
            decision: dict[str, Any] = {"approved": action.kind == "approve"}
            if action.kind == "reject":
                decision["reason"] = "not this quarter"
            answer = self.api("POST", f"/reservations/{rid}/approval", decision)
            if action.kind == "approve" and answer["statusCode"] == 200:
                self.approvals_accepted.append(self.cloud.now())
        else:  # pragma: no cover - scenarios only hold the kinds above
            raise ValueError(f"unknown action {action.kind!r}")

    def _due(self, now: datetime) -> list[Action]:
        return [
            a
            for a in self.pending
            if a.phase in self.noticed and now >= self.noticed[a.phase] + timedelta(hours=a.delay_hours)
        ]

    def _notice(self) -> bool:
        """Record when each awaited phase was first seen; True if a new one was."""
        waiting = {
            a.phase for a in self.pending if a.phase not in self.noticed and a.phase not in ("now", "end")
        }
        if not waiting:
            return False
        seen = set(self.states())
        new = waiting & seen
        for phase in new:
            self.noticed[phase] = self.cloud.now()
        return bool(new)

    def drive(self) -> str | None:
        """Run the lifecycle to idle, firing the actions; returns why it did not finish (None if it did)."""
        self.noticed["now"] = self.cloud.now()
        self.post()
        still = 0
        while True:
            reason = self.bounds.exceeded()
            if reason:
                return reason
            self._notice()
            due = self._due(self.cloud.now())
            if due:
                for action in due:
                    self.pending.remove(action)
                    self.fire(action)
                continue
            targets = [
                self.noticed[a.phase] + timedelta(hours=a.delay_hours)
                for a in self.pending
                if a.phase in self.noticed
            ]
            until = min(targets) if targets else None
            result = self.cloud.run(
                until=until,
                stop_when=lambda: bool(self.bounds.exceeded()) or self._notice() or self.retrying_stuck(),
                stall_seconds=self.bounds.stall_seconds,
            )
            if result.steps == 0 and result.reason == "stop_when":
                still += 1  # the clock did not move: each run's hang detector starts afresh, so count here
                if still > STILL_RUNS:
                    return f"the driver stopped {STILL_RUNS} times at {_ts(self.cloud.now())} with no step"
            else:
                still = 0
            if self.retrying_stuck():
                # AWS never finishes the deletion (injected): the release retries, reported. Actions still
                # pending wait for a phase that cannot come (READY, after a release began); running on would
                # only stop at once again, forever, with the clock standing still.
                return None
            if result.reason == "idle":
                if not self.pending:
                    return None
                # The phase never came (or it is "end"): the action happens now, after the lifecycle.
                action = self.pending.pop(0)
                self.fire(action)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Send the Lambdas' logs and moto's chatter to nowhere while a lifecycle runs."""
    saved = sys.stdout, sys.stderr
    sink = io.StringIO()
    sys.stdout = sys.stderr = sink
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def run_lifecycle(
    scenario: Scenario,
    *,
    stall_seconds: float | None = DEFAULT_STALL_SECONDS,
    timeline: bool = False,
    tamper: Callable[[LocalCloud], None] | None = None,
) -> LifecycleResult:
    """Run one scenario on a fresh local cloud and check it (see the module docstring).

    Args:
        stall_seconds: the hang detector's limit (real seconds without progress; None: the default).
        timeline: keep the cloud's whole timeline in the result (``--only ... --timeline``).
        tamper: called with the running cloud after the lifecycle and before the checks (tests break the
            ledger or leave resources behind with it, to prove the checks see them).
    """
    from localcloud.emulator import MarketConfig  # noqa: PLC0415 - the emulator is optional to the cloud

    began = time.monotonic()
    injector = FaultInjector(list(scenario.faults), seed=scenario.seed)
    cloud = LocalCloud(
        TEMPLATE,
        start=START,
        seed=scenario.seed,
        faults=injector,
        market=MarketConfig(max_lead=timedelta(days=90)),
        parameter_overrides={"SlackChannelId": "C0SOAK"},
    )
    body = dict(scenario.request)
    with _quiet(), cloud:
        if body.get("platform") == "ec2":
            create_launch_templates(cloud, body)
        cheapest = cheapest_offering(cloud, body) or Decimal("20000")
        if starts_soon(body, cloud.now()):
            cheapest = max(cheapest, on_demand_cost(cloud, body))
        body["max_upfront_fee_usd"] = _money(cheapest * scenario.budget_factor)
        if scenario.approval_factor is not None:  # at most the budget (the request's own rule)
            factor = min(scenario.approval_factor, scenario.budget_factor)
            body["approval_above_usd"] = _money(cheapest * factor)
        bounds = _Bounds(cloud, stall_seconds)
        driver = _Driver(cloud, scenario, body, bounds)
        try:
            unfinished = driver.drive()
        except ClockStuckError as exc:
            unfinished = f"the simulation got stuck: {str(exc).splitlines()[0]}"
        if tamper is not None:
            tamper(cloud)
        facts = collect_facts(
            cloud,
            body,
            accepted=driver.accepted,
            finished=unfinished is None,
            unfinished_reason=unfinished or "",
            cancels_accepted=driver.cancels_accepted,
            approvals_accepted=driver.approvals_accepted,
        )
        fired = Counter(f.kind.value for f in injector.fired)
        story = cloud.timeline.render() if timeline else ""
    violations = check(facts)
    if driver.invalid is not None:  # the soak must draw valid requests, or it tests nothing
        violations.append(f"the soak drew a request the API rejects: {driver.invalid}")
    return LifecycleResult(
        index=scenario.index,
        seed=scenario.seed,
        scenario=scenario.describe(),
        outcome=outcome(facts),
        violations=violations,
        faults=dict(fired),
        api_statuses=dict(driver.api_statuses),
        wall_seconds=time.monotonic() - began,
        states=[str(i["state"]) for i in facts.history()],
        failures=[
            f"{(i.get('detail') or {}).get('error')}: {str((i.get('detail') or {}).get('reason'))[:300]}"
            for i in facts.history()
            if i["state"] == "FAILED"
        ],
        answers=driver.answers,
        timeline=story,
        route=route(body, facts),
        cancel_to_released_hours=cancel_to_released_hours(facts),
    )


# ----------------------------------------------------------------------------------------------- soak


@dataclass
class SoakReport:
    """The soak's figures: lifecycles per outcome, faults fired per kind, violations, wall time."""

    seed: int
    results: list[LifecycleResult]
    wall_seconds: float

    @property
    def outcomes(self) -> Counter[str]:
        """Lifecycles per outcome."""
        return Counter(r.outcome for r in self.results)

    @property
    def routes(self) -> Counter[str]:
        """Lifecycles per ``<platform> <strategy> -> <what ran>`` (:func:`route`)."""
        return Counter(r.route for r in self.results)

    @property
    def faults(self) -> Counter[str]:
        """Faults fired per kind, over every lifecycle."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.faults)
        return total

    @property
    def api_statuses(self) -> Counter[str]:
        """API answers and bus deliveries, per kind and status."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(r.api_statuses)
        return total

    @property
    def failure_errors(self) -> Counter[str]:
        """FAILED ledger entries per error name (why lifecycles failed)."""
        total: Counter[str] = Counter()
        for r in self.results:
            total.update(f.split(":", 1)[0] for f in r.failures)
        return total

    @property
    def failed(self) -> list[LifecycleResult]:
        """The lifecycles that broke a rule."""
        return [r for r in self.results if r.violations]


def _run_one(args: tuple[int, int, float | None, bool]) -> LifecycleResult:
    seed, index, stall_seconds, timeline = args
    logging.getLogger("moto").setLevel(logging.CRITICAL)
    scenario = make_scenario(seed, index)
    began = time.monotonic()
    try:
        return run_lifecycle(scenario, stall_seconds=stall_seconds, timeline=timeline)
    except Exception as exc:  # the soak's own failure is reported like a violation, not lost
        return LifecycleResult(
            index=index,
            seed=scenario.seed,
            scenario=scenario.describe(),
            outcome="SOAK_ERROR",
            violations=[f"the soak could not run the lifecycle: {type(exc).__name__}: {str(exc)[:500]}"],
            faults={},
            api_statuses={},
            wall_seconds=time.monotonic() - began,
        )


def _worker_init() -> None:
    # A worker's own output is the Lambdas' logs: nobody reads it.
    devnull = Path(os.devnull).open("w")  # noqa: SIM115 - lives as long as the worker process
    sys.stdout = sys.stderr = devnull


def soak(
    seed: int,
    count: int,
    *,
    workers: int = 1,
    only: Sequence[int] | None = None,
    stall_seconds: float | None = DEFAULT_STALL_SECONDS,
    timeline: bool = False,
    progress: Callable[[LifecycleResult, int, int], None] | None = None,
) -> SoakReport:
    """Run lifecycles ``0..count-1`` (or just ``only``) of the soak seeded ``seed``.

    Args:
        workers: processes to run lifecycles in (1: in this process, one after the other).
        stall_seconds: the hang detector's limit in each lifecycle (None: the default).
        timeline: keep each lifecycle's timeline (printed for the lifecycles that broke a rule).
        progress: called after each lifecycle with (result, done, total).
    """
    indexes = list(only) if only else list(range(count))
    began = time.monotonic()
    results: list[LifecycleResult] = []
    jobs = [(seed, index, stall_seconds, timeline) for index in indexes]
    if workers <= 1:
        for job in jobs:
            results.append(_run_one(job))
            if progress:
                progress(results[-1], len(results), len(jobs))
    else:
        import multiprocessing  # noqa: PLC0415

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_worker_init) as pool:
            # As each finishes, not in order: one long lifecycle must not hide the others' progress.
            for future in as_completed([pool.submit(_run_one, job) for job in jobs]):
                results.append(future.result())
                if progress:
                    progress(results[-1], len(results), len(jobs))
        results.sort(key=lambda result: result.index)
    return SoakReport(seed=seed, results=results, wall_seconds=time.monotonic() - began)


def format_report(report: SoakReport) -> str:
    """The figures and every violation, with how to reproduce it."""
    n = len(report.results)
    lines = [f"fault soak: seed {report.seed}, {n} lifecycles in {report.wall_seconds:.0f} s wall"]
    if n:
        slowest = max(report.results, key=lambda r: r.wall_seconds)
        mean = sum(r.wall_seconds for r in report.results) / n
        lines.append(
            f"  per lifecycle: mean {mean:.1f} s, slowest {slowest.wall_seconds:.1f} s (#{slowest.index})"
        )
    lines.append("lifecycles per outcome:")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.outcomes.items()))
    lines.append("lifecycles per platform, strategy -> what ran:")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.routes.items()))
    lines.append("faults fired per kind:")
    faults = report.faults
    lines.extend(f"  {kind.value:<34} {faults.get(kind.value, 0):>5}" for kind in FaultKind)
    if report.failure_errors:
        lines.append("FAILED ledger entries per error (failures the faults caused, each notified):")
        lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.failure_errors.items()))
    lines.append("requests (API answers by status, bus deliveries):")
    lines.extend(f"  {name:<34} {value:>5}" for name, value in sorted(report.api_statuses.items()))
    waits = sorted(
        r.cancel_to_released_hours for r in report.results if r.cancel_to_released_hours is not None
    )
    if waits:
        p95 = waits[min(len(waits) - 1, round(0.95 * (len(waits) - 1)))]
        lines.append(
            f"cancel -> released (virtual hours, {len(waits)} cancels of something bought): median "
            f"{waits[len(waits) // 2]:.2f}, p95 {p95:.2f}, max {waits[-1]:.2f}"
        )
    failed = report.failed
    if not failed:
        lines.append(
            f"invariants: OK in {n} lifecycles (no double purchase, none above budget or the total budget, "
            "the ledger's money equal to what AWS charged, every purchase recorded with its release "
            "schedule, "
            "none without approval or approved by its requester or above the approved fee, no paid "
            "reservation thrown away, no cancel or approval lost, every copy change recorded, nothing "
            "billable left, every lifecycle final, every failure notified)"
        )
        return "\n".join(lines)
    lines.append(f"INVARIANT VIOLATIONS in {len(failed)} of {n} lifecycles:")
    for r in failed:
        lines.append(f"- lifecycle #{r.index} (seed {r.seed}): {r.outcome}; states {' -> '.join(r.states)}")
        lines.append(f"    scenario: {r.scenario}")
        lines.extend(f"    failure: {f}" for f in r.failures)
        lines.extend(f"    VIOLATION: {v}" for v in r.violations)
        lines.extend(f"    api: {a}" for a in r.answers[:3])
        if r.timeline:
            lines.append("    timeline:")
            lines.extend(f"      {line}" for line in r.timeline.splitlines())
        lines.append(
            f"    reproduce: make soak SEED={report.seed} ONLY={r.index}   "
            f"(python -m localcloud soak --seed {report.seed} --only {r.index})"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The soak's command line (``python -m localcloud soak`` and ``python -m localcloud_soak``)."""
    parser = argparse.ArgumentParser(
        prog="python -m localcloud soak",
        description="Randomized reservation lifecycles with injected faults, checked for the money rules.",
    )
    add_arguments(parser)
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the soak's options to ``parser``."""
    parser.add_argument(
        "--seed", type=int, default=1, help="the soak's seed (each lifecycle's derives from it)"
    )
    parser.add_argument("--count", type=int, default=200, help="how many lifecycles")
    parser.add_argument(
        "--only", type=int, action="append", metavar="INDEX", help="run just this lifecycle (repeatable)"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes running lifecycles (default: 2, or 1 on a 1-CPU machine)",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=DEFAULT_STALL_SECONDS,
        help="hang detector: a lifecycle fails after this many real seconds without progress (virtual time "
        "still, no invocation); default 600, or LOCALCLOUD_STALL_SECONDS. No lifecycle fails for being slow",
    )
    parser.add_argument("--verbose", action="store_true", help="print one line per lifecycle")
    parser.add_argument(
        "--timeline", action="store_true", help="print the whole timeline of each lifecycle that broke a rule"
    )


def run_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the soak from parsed arguments; returns the exit status (0: every invariant held)."""
    stream = out or sys.stdout
    step = max(1, args.count // 10)

    def progress(result: LifecycleResult, done: int, total: int) -> None:
        if args.verbose or result.violations:
            mark = "VIOLATION" if result.violations else "ok"
            print(
                f"  #{result.index:<4} {result.outcome:<28} {result.wall_seconds:5.1f} s  {mark}",
                file=stream,
                flush=True,
            )
        elif done % step == 0 or done == total:
            print(f"  {done}/{total} lifecycles done", file=stream, flush=True)

    logging.getLogger("moto").setLevel(logging.CRITICAL)
    report = soak(
        args.seed,
        args.count,
        workers=args.workers,
        only=args.only,
        stall_seconds=args.stall_seconds,
        timeline=args.timeline,
        progress=progress,
    )
    print(format_report(report), file=stream, flush=True)
    return 1 if report.failed else 0


def main(argv: list[str] | None = None) -> int:
    """``python -m localcloud_soak``."""
    return run_command(build_parser().parse_args(argv))
