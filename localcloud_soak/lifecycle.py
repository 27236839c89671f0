"""One lifecycle (:func:`run_lifecycle`): a fresh local cloud of the application's template, the
scenario's deliveries, cancellations and approvals fired at their moments, run until idle within its bounds,
then its facts collected and checked.

Over 400 lines: one lifecycle's run in the order it happens (stand up, deliver, fire, collect the facts)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from localcloud.clock import ClockStuckError
from localcloud.cloud import LocalCloud
from localcloud.faults import FaultInjector, FaultKind
from localcloud_soak.checks import cancel_to_released_hours, check, keep_serving, looking, outcome, route
from localcloud_soak.facts import collect_facts, ledger_items, ledger_states, successors
from localcloud_soak.scenario import (
    AMI,
    DEFAULT_STALL_SECONDS,
    LAUNCH_TEMPLATE,
    OTHER_APPROVER,
    REQUEST_ID,
    RETRIED_ATTEMPTS,
    ROOT,
    SOAK_APPROVER,
    SOAK_REQUESTER,
    START,
    STILL_RUNS,
    TEMPLATE,
    VIRTUAL_LIMIT,
    Action,
    Scenario,
    _ts,
    starts_soon,
)


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
    looking: str | None = None
    """What keeping looking came to (:func:`looking`), None for a request without ``search_until``."""
    keep_serving: str = ""
    """What ``serve_until`` led to (:func:`~localcloud_soak.checks.keep_serving`)."""


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


def _resource(path: str) -> tuple[str, dict[str, str] | None]:
    """The API resource of ``path`` and its path parameters (``/reservations/{request_id}/...``)."""
    parts = path.strip("/").split("/")
    if parts[0] != "reservations" or len(parts) < 2:
        return path, None
    names = ("", "request_id", "", "extension_id", "")
    parameters = {names[i]: part for i, part in enumerate(parts) if i < len(names) and names[i]}
    shape = "/".join("{" + names[i] + "}" if i < len(names) and names[i] else p for i, p in enumerate(parts))
    return "/" + shape, parameters


def _api_event(
    method: str, path: str, body: dict[str, Any] | None, now: datetime, caller: str | None = None
) -> dict[str, Any]:
    query = None
    if caller is None:
        caller = SOAK_APPROVER if path.endswith("/approval") else SOAK_REQUESTER
    if method == "DELETE":  # the client confirms that a paid fee is not refunded (DELETE ?confirm=true)
        query = {"confirm": "true"}
    resource, parameters = _resource(path)
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


def market_offerings(cloud: LocalCloud, request: dict[str, Any], region: str) -> list[dict[str, Any]]:
    """The offerings the market holds for the request in ``region`` now: ``SearchTrainingPlanOfferings``
    (``platform`` ``sagemaker``, target ``endpoint``) or ``DescribeCapacityBlockOfferings`` (``ec2``, every
    page), of its type, count, window and duration, asked of the emulator directly (no faults), as the
    application asks."""
    start = datetime.fromisoformat(request["earliest_start"])
    end = datetime.fromisoformat(request["latest_end"])
    if request.get("platform") != "ec2":
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
        return list(answer.get("TrainingPlanOfferings", []))
    params: dict[str, Any] = {
        "InstanceType": request["instance_type"],
        "InstanceCount": request["instance_count"],
        "StartDateRange": start,
        "EndDateRange": end,
        "CapacityDurationHours": request["duration_hours"],
    }
    found: list[dict[str, Any]] = []
    while True:
        page = cloud.emulator.call("ec2", "DescribeCapacityBlockOfferings", params, region=region)
        found.extend(page.get("CapacityBlockOfferings", []))
        if not page.get("NextToken"):
            return found
        params = {**params, "NextToken": page["NextToken"]}


def cheapest_offering(cloud: LocalCloud, request: dict[str, Any]) -> Decimal | None:
    """The lowest ``UpfrontFee`` the market offers for the request in its regions (USD), or None
    (:func:`market_offerings`)."""
    fees = [
        Decimal(str(offering["UpfrontFee"]))
        for region in request["regions"]
        for offering in market_offerings(cloud, request, region)
    ]
    return min(fees) if fees else None


def on_demand_cost(cloud: LocalCloud, request: dict[str, Any]) -> Decimal:
    """What the request's instances cost on demand from now until ``latest_end`` in its first region (USD,
    the emulated market's prices), the figure ``logic/steps/on_demand.py`` compares with the budget."""
    hours = Decimal(
        max(0, int((datetime.fromisoformat(request["latest_end"]) - cloud.now()).total_seconds()))
    ) / Decimal(3600)
    rate = Decimal(
        cloud.emulator.market.on_demand_usd_per_hour(request["regions"][0], request["instance_type"])
    )
    return rate * int(request["instance_count"]) * hours


def create_launch_templates(cloud: LocalCloud, request: dict[str, Any]) -> None:
    """The launch template an EC2 request names, in each of its regions (no faults: set up beforehand)."""
    with cloud.dispatcher.exempt():
        for region in request["regions"]:
            cloud.client("ec2", region).create_launch_template(
                LaunchTemplateName=LAUNCH_TEMPLATE,
                LaunchTemplateData={"ImageId": AMI, "InstanceType": request["instance_type"]},
            )


def list_market(cloud: LocalCloud, listing: dict[str, Any]) -> None:
    """Apply a scenario's listing (:attr:`Scenario.listing`) to the emulated market: capacity listed from an
    instant (``listed_from``) or churning (``churn`` over ``churn_period_hours``), or pools sold out over
    days (``sold_out``: a chain drawn to roll over). Set after the budget was looked up, so the budget is the
    market's price, whatever is listed when the request looks."""
    market = cloud.emulator.market
    update: dict[str, Any] = {}
    if "listed_from" in listing:
        update["listed_from"] = {k: datetime.fromisoformat(v) for k, v in listing["listed_from"].items()}
    if "sold_out" in listing:  # keep serving drawn to roll over (scenario._serve_until)
        update["sold_out"] = {
            k: (date.fromisoformat(first), date.fromisoformat(last))
            for k, (first, last) in listing["sold_out"].items()
        }
    if "churn" in listing:
        update["churn"] = float(listing["churn"])
        update["churn_period"] = timedelta(hours=int(listing["churn_period_hours"]))
    market.config = market.config.model_copy(update=update)


LOCAL_VALUES = ROOT / "localcloud" / "local_values.json"


def caller_policies() -> dict[str, list[str]]:
    """The API callers' identity policies of local_values.json (``CallerPolicies``), with the requester's
    policy attached to :data:`SOAK_APPROVER` too: a team lead who both changes ``serve_until`` (PATCH) and
    approves, as an administrator may attach both (docs/deploy.md); :data:`OTHER_APPROVER` only approves."""
    section = json.loads(LOCAL_VALUES.read_text(encoding="utf-8")).get("CallerPolicies") or {}
    policies = {k: list(v) for k, v in section.items() if not k.startswith("_")}
    policies.setdefault("deploy/requester-policy.json", []).append(SOAK_APPROVER)
    return policies


def compete(cloud: LocalCloud, competition: tuple[float, float]) -> None:
    """Let other buyers into the market (:attr:`Scenario.competition`): a share of the offerings searched
    from now on is taken by someone else between the search and its purchase (issue 29 point 5)."""
    share, minutes = competition
    market = cloud.emulator.market
    market.config = market.config.model_copy(
        update={"taken": share, "taken_within": timedelta(minutes=minutes)}
    )


def invalid_delivery(body: dict[str, Any], variant: str) -> dict[str, Any]:
    """The ``detail`` of an invalid or conflicting ``ReservationRequested`` about ``body``'s request
    (:data:`~localcloud_soak.scenario.INVALID_DELIVERIES`)."""
    request = dict(body)
    if variant == "no-request":
        return {"schema_version": 1}
    if variant == "bad-count":
        request["instance_count"] = 3
    elif variant == "schema-99":
        return {"schema_version": 99, "request": request}
    elif variant == "other-budget":
        request["max_upfront_fee_usd"] = _money(Decimal(str(body["max_upfront_fee_usd"])) * 10)
    elif variant == "bad-id":
        request["request_id"] = f"{body['request_id']}/../x"
    return {"schema_version": 1, "request": request}


def buy_elsewhere(cloud: LocalCloud, request: dict[str, Any], index: int) -> dict[str, Any]:
    """Central procurement buys a reservation for the request before it is sent (a training plan for
    endpoints or a capacity block: the first offering of the request's window in the first of its regions
    that has one), asked of the emulator directly (not the application's call), and waits an hour for the
    payment; returns the request fields that bring it (the reservation and its window), or nothing when the
    market has none (the lifecycle then buys its own)."""
    for region in request["regions"]:
        bought = _buy_in(cloud, request, region, index)
        if bought is not None:
            fields, (start, end) = bought
            cloud.run(until=cloud.now() + timedelta(hours=1))  # the payment is processed while time passes
            return {**fields, "earliest_start": _ts(start), "latest_end": _ts(end)}
    return {}


def _buy_in(
    cloud: LocalCloud, request: dict[str, Any], region: str, index: int
) -> tuple[dict[str, Any], tuple[datetime, datetime]] | None:
    offers = market_offerings(cloud, request, region)
    if not offers:
        return None
    first = offers[0]
    if request.get("platform") == "ec2":
        block = cloud.emulator.call(
            "ec2",
            "PurchaseCapacityBlock",
            {"CapacityBlockOfferingId": first["CapacityBlockOfferingId"], "InstancePlatform": "Linux/UNIX"},
            region=region,
        )["CapacityReservation"]
        return {"capacity_reservation_id": block["CapacityReservationId"]}, (
            first["StartDate"],
            first["EndDate"],
        )
    plan = cloud.emulator.call(
        "sagemaker",
        "CreateTrainingPlan",
        {
            "TrainingPlanName": f"central-procurement-{index}",
            "TrainingPlanOfferingId": first["TrainingPlanOfferingId"],
        },
        region=region,
    )
    segment = first["ReservedCapacityOfferings"][0]
    return {"training_plan_arn": plan["TrainingPlanArn"]}, (segment["StartTime"], segment["EndTime"])


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
        self.extension_offering: str | None = None
        """The extension offering the lifecycle asked to buy (a second ``extend`` sends it again)."""
        self.causer_approvals_accepted: list[str] = []
        """Approvals :data:`SOAK_APPROVER` gave (200) to what its own PATCH of ``serve_until`` caused."""
        self.invalid_deliveries: list[str] = []
        """The variants of the invalid ``ReservationRequested`` put on the bus."""
        self._waiting: tuple[int, list[str]] | None = None
        self.patched = False
        """:data:`SOAK_APPROVER`'s PATCH of ``serve_until`` was accepted (200): it caused what follows."""

    def _ledger_writes(self) -> int:
        counts = self.cloud.dispatcher.counts
        return sum(
            counts.get(f"dynamodb.{op}", 0) for op in ("PutItem", "BatchWriteItem", "TransactWriteItems")
        )

    def states(self) -> list[str]:
        # The ledger only changes by DynamoDB writes: read it again only when one was made.
        writes = self._ledger_writes()
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

    def api(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        *,
        caller: str | None = None,
        label: str | None = None,
    ) -> dict[str, Any]:
        answer = self.cloud.api_request(_api_event(method, path, body, self.cloud.now(), caller))
        if label is None:
            label = {"POST": "post", "DELETE": "cancel"}.get(method, method.lower())
            if path.endswith("/approval"):
                label = "approval"
            elif path.endswith("/extensions"):
                label = "extend"
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

    def extend(self, *, any_offering: bool = False) -> None:
        """A dry run of a one-day extension, then the purchase of its first allowed offering
        (``any_offering``: its first offering, allowed or not); a second ``extend`` sends that purchase
        again, as a client retrying does (refusals, such as a reservation already released or no room in
        the budget, are answers, not failures)."""
        path = f"/reservations/{REQUEST_ID}/extensions"
        if self.extension_offering is not None:
            self.api("POST", path, {"duration_hours": 24, "offering_id": self.extension_offering})
            return
        dry = self.api("POST", path, {"duration_hours": 24})
        if dry["statusCode"] != 200:
            return
        offered = [
            o for o in json.loads(str(dry["body"])).get("offerings", []) if o.get("allowed") or any_offering
        ]
        if offered:
            self.extension_offering = str(offered[0]["offering_id"])
            self.api("POST", path, {"duration_hours": 24, "offering_id": self.extension_offering})

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
        elif action.kind in ("extend", "extend_any"):
            self.extend(any_offering=action.kind == "extend_any")
        elif action.kind == "bus_invalid":
            entry = {
                "Source": "capacity.orchestrator",
                "DetailType": "ReservationRequested",
                "Detail": json.dumps(invalid_delivery(self.body, action.variant)),
                "EventBusName": self.cloud.stack.physical_id("EventBus"),
            }
            with self.cloud.dispatcher.exempt():
                self.cloud.put_events([entry])
            self.api_statuses[f"bus put invalid ({action.variant})"] += 1
            self.invalid_deliveries.append(action.variant)
        elif action.kind == "patch":
            self.patch(int(action.variant or 24))
        elif action.kind in ("approve_caused", "approve_other"):
            self.approve_waiting(SOAK_APPROVER if action.kind == "approve_caused" else OTHER_APPROVER)
        else:  # pragma: no cover - scenarios only hold the kinds above
            raise ValueError(f"unknown action {action.kind!r}")

    def patch(self, hours: int) -> None:
        """:data:`SOAK_APPROVER` moves ``serve_until`` to ``hours`` past the reservation's end (its
        ``PURCHASE`` end, else the request's earliest end): an approver causing spend (issue 28)."""
        purchase = next((i for i in self._items(REQUEST_ID) if i["sk"] == "PURCHASE"), None)
        if purchase is not None:
            end = datetime.fromisoformat(str(purchase["end_time"]).replace("Z", "+00:00"))
        else:
            start = datetime.fromisoformat(str(self.body["earliest_start"]).replace("Z", "+00:00"))
            end = start + timedelta(hours=int(self.body["duration_hours"]))
        until = max(end + timedelta(hours=hours), self.cloud.now() + timedelta(hours=1))
        answer = self.api(
            "PATCH",
            f"/reservations/{REQUEST_ID}",
            {"serve_until": _ts(until)},
            caller=SOAK_APPROVER,
            label="patch",
        )
        if answer["statusCode"] == 200:
            self.patched = True

    def waiting_approvals(self) -> list[str]:
        """The API paths of the approvals waiting in the chain: a successor ``AWAITING_APPROVAL`` (its
        ``/approval``) and an extension waiting for a decision (``.../extensions/<id>/approval``); read again
        only after a ledger write."""
        writes = self._ledger_writes()
        if self._waiting is not None and self._waiting[0] == writes:
            return self._waiting[1]
        paths = self._read_waiting_approvals()
        self._waiting = (writes, paths)
        return paths

    def _read_waiting_approvals(self) -> list[str]:
        chain = [REQUEST_ID, *successors(self.cloud, REQUEST_ID)]
        paths = []
        for request_id in chain:
            items = self._items(request_id)
            keys = {str(i["sk"]) for i in items}
            history = sorted((i for i in items if str(i["sk"]).startswith("STATE#")), key=lambda i: i["sk"])
            if request_id != REQUEST_ID and history and history[-1]["state"] == "AWAITING_APPROVAL":
                paths.append(f"/reservations/{request_id}/approval")
            for key in sorted(keys):
                if not key.startswith("EXTENSION_APPROVAL#"):
                    continue
                extension_id = key.partition("#")[2]
                if f"EXTENSION_DECISION#{extension_id}" not in keys and not any(
                    k.startswith(f"EXTENSION_OUTCOME#{extension_id}") for k in keys
                ):
                    paths.append(f"/reservations/{request_id}/extensions/{extension_id}/approval")
        return paths

    def approve_waiting(self, approver: str) -> None:
        """``approver`` approves every approval waiting in the chain (:meth:`waiting_approvals`); an approval
        :data:`SOAK_APPROVER` gets after its own PATCH is noted (it must be refused)."""
        causer = approver == SOAK_APPROVER and self.patched
        for path in self.waiting_approvals():
            answer = self.api(
                "POST",
                path,
                {"approved": True, "reason": "soak"},
                caller=approver,
                label="approval (caused by the approver)" if causer else "approval (other approver)",
            )
            if causer and answer["statusCode"] == 200:
                self.causer_approvals_accepted.append(path)

    def _items(self, request_id: str) -> list[dict[str, Any]]:
        return ledger_items(self.cloud, request_id, self._ddb)

    def _notice_release(self) -> bool:
        """``RELEASE``: the release instant the first ``PURCHASED`` names (known once it is recorded)."""
        if "RELEASE" in self.noticed or "PURCHASED" not in self.states():
            return False
        purchased = next((i for i in self._items(REQUEST_ID) if i.get("state") == "PURCHASED"), None)
        release_at = ((purchased or {}).get("detail") or {}).get("release_at")
        if not release_at:
            return False
        self.noticed["RELEASE"] = datetime.fromisoformat(str(release_at).replace("Z", "+00:00"))
        return True

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
        noticed = False
        if "RELEASE" in waiting:
            noticed = self._notice_release()
        if "CAUSED" in waiting and "patch" not in {a.kind for a in self.pending} and self.waiting_approvals():
            self.noticed["CAUSED"] = self.cloud.now()
            noticed = True
        seen = set(self.states())
        new = waiting & seen
        for phase in new:
            self.noticed[phase] = self.cloud.now()
        return bool(new) or noticed

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
    from localcloud.emulator.market import Timings  # noqa: PLC0415

    low, high = scenario.extension_payment_minutes

    began = time.monotonic()
    injector = FaultInjector(list(scenario.faults), seed=scenario.seed)
    cloud = LocalCloud(
        TEMPLATE,
        start=START,
        seed=scenario.seed,
        faults=injector,
        market=MarketConfig(
            max_lead=timedelta(days=90),
            timings=Timings(extension_payment_pending=(timedelta(minutes=low), timedelta(minutes=high))),
        ),
        parameter_overrides={"SlackChannelId": "C0SOAK"},
        caller_policies=caller_policies(),
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
        if scenario.listing is not None:  # keep looking: the market lists capacity later, never, or churns
            list_market(cloud, scenario.listing)
        if scenario.brings:
            body.update(buy_elsewhere(cloud, body, scenario.index))
        compete(cloud, scenario.competition)  # after the budget's and central procurement's own searches
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
            causer_approvals_accepted=driver.causer_approvals_accepted,
            invalid_deliveries=driver.invalid_deliveries,
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
        looking=looking(facts),
        keep_serving=keep_serving(facts),
    )
