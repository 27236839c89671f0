"""The reserve workflow: ``statemachines/reserve_capacity.asl.json`` is written from it (``make asl``).

Record the request; try on-demand first when it may; search the regions, choose, ask a person above the
threshold (or keep looking); buy once; wait for the payment and the start; deploy (an endpoint and its
inference components, or EC2 instances); READY. Before money is at stake a step fails and tells
(``FAIL_AND_TELL``); once it is, a step perseveres (``MONEY_AT_STAKE``: NotifyDegraded ... Resume).

A task reads ``task(name, function, arguments, where its answer goes, its policy, the next state, throws=what
else it may throw and where that goes)``; a string before a state says what the state is for (its Comment).
What each step records in the ledger: docs/architecture.md, "The lifecycle, step by step".
"""

from __future__ import annotations

from typing import Any

from statemachines.policies import (
    DEGRADED_NOTICE,
    FAIL_AND_TELL,
    MONEY_AT_STAKE,
    PERSEVERE,
    PURCHASE_UNCONFIRMED,
    RESOURCE_BUSY,
    START_SUCCESSOR,
    WAIT_FOR_TOKEN,
)
from statemachines.spec import (
    Generated,
    State,
    Workflow,
    all_of,
    any_of,
    args,
    catch,
    choice,
    equals,
    fail,
    flag,
    given,
    map_,
    pass_,
    perseverance,
    present,
    resume,
    succeed,
    switch,
    task,
    wait,
    wait_for_token,
)

ON_DEMAND = args("request_id", "platform")
PURCHASE = args("request_id", "platform", execution="$$.Execution.Id")
ACTIVATION = args(
    "request_id",
    "platform",
    purchase="$.purchase",  # whole, in its platform's own names (a block is never a training_plan_name)
    attempt="$.activation.attempt",
)
TOKEN = "$$.Task.Token"  # noqa: S105 - the path to the task token, not a secret
ACTIVE = equals("$.activation.status", "Active")
START_EXECUTION = "arn:aws:states:::states:startExecution"
CONTINUATION = {
    "version": "0",
    "detail-type": "ReservationRequested",
    "source": "capacity.orchestrator",
    "detail": {
        "schema_version": 1,
        "request": {},
        "resume_of": args("request_id", "look", execution="$$.Execution.Id"),
    },
}
"""The event a continue-as-new starts the next execution with (``resume_of.look``: where it goes on)."""


def deploy(step: str, action: str, key: str, ready: tuple[str, str, str], **extra: Any) -> list[State]:
    """Deploy ``step`` (its function's ``action``), then poll it (``Check<Key>``, every ``Wait<Key>``) until
    the choice ``ready[0]`` finds ``$.<key>.status`` is ``ready[1]`` and goes on to ``ready[2]``."""
    check, pause, result = f"Check{key.capitalize()}", f"Wait{key.capitalize()}", f"$.{key}"
    status = args("request_id", action="status", attempt=f"{result}.attempt")
    return [
        task(step, step, args("request_id", action=action), result, MONEY_AT_STAKE, ready[0], **extra),
        switch(ready[0], f"{result}.status", {ready[1]: ready[2]}, pause),
        wait(pause, check, path=f"{result}.next_wait_seconds"),
        task(check, step, status, result, MONEY_AT_STAKE, ready[0]),
    ]


# fmt: off
# A table laid out by hand, a state a line or two (ruff format would put one argument a line).
STATES: list[State | Generated | str] = [
    # Record the request; a resumed execution first lets its predecessor's last Lambda end.
    "A resumed workflow (the previous execution of this request was stopped after money was at stake:"
    " capacity.logic.steps.stopped) first waits until any Lambda that execution left running has ended"
    " (AWS does not stop them), so it never races that Lambda's purchase.",
    choice("IsResumed", [(given("$.detail.resume_of"), "IsContinued")], "RecordRequest"),
    "A continuation of a request that keeps looking (continue-as-new: resume_of.look, started by"
    " ContinueAsNew) goes straight on: no Lambda of the execution it continues is left running.",
    choice("IsContinued", [(given("$.detail.resume_of.look"), "RecordRequest")], "WaitBeforeResuming"),
    "Longer than any function's Timeout (120 s).",
    wait("WaitBeforeResuming", "RecordRequest", seconds=180),
    "Validate the event at this door and record it once; the writer is this execution, so a second execution"
    " for the same request (an event delivered twice) ends quietly.",
    task("RecordRequest", "RecordRequest", args(event="$", execution="$$.Execution.Id"), "$.record",
         FAIL_AND_TELL.failing_to("InvalidRequest"), "Init"),
    fail("InvalidRequest", "InvalidRequest",
         "The ReservationRequested event was rejected before anything was recorded; see the RecordRequest"
         " task's error."),
    "Keep the state small: ids (and the request's platform, which the steps route by and the choices branch"
    " on) only, bulk data stays in DynamoDB. The look number starts at 0, or where a continued execution left"
    " off.",
    pass_("Init", "IsDuplicate", args(request_id="$.record.request_id", platform="$.record.platform",
                                      record="$.record", look="$.record.look")),
    choice("IsDuplicate", [(equals("$.record.duplicate", True), "Duplicate"),
                           (given("$.record.invalid"), "FoundInvalid"),
                           (given("$.record.resume_offering"), "ResumePurchase"),
                           (flag("$.record.continued"), "SearchRegions"),
                           (flag("$.record.brought"), "AdoptReservation")], "TryOnDemand"),
    succeed("Duplicate", "Another execution owns this request_id."),
    "A resumed workflow whose request already has a purchase intent goes straight back to the purchase"
    " (buy_once adopts what was bought, or buys that offering once): it is never planned or put to an"
    " approver again.",
    pass_("ResumePurchase", "PurchaseCapacity",
          args(offering="$.record.resume_offering", decision="PURCHASE", reason="resumed"),
          result_path="$.plan"),

    # On demand first (strategy on-demand-first / spot-ok).
    "On-demand first (strategy on-demand-first / spot-ok): EC2 RunInstances, or a SageMaker endpoint without"
    " a capacity reservation, region by region (then spot for EC2); 'skipped' or 'unavailable' goes on to"
    " reserve. Every try is in the ledger.",
    task("TryOnDemand", "OnDemand", ON_DEMAND | {"action": "try"}, "$.on_demand", MONEY_AT_STAKE,
         "OnDemandOutcome"),
    switch("OnDemandOutcome", "$.on_demand.outcome", {"running": "Ready",
                                                      "endpoint_ready": "CreateInferenceComponents",
                                                      "launched": "WaitOnDemand"}, "SearchRegions"),
    wait("WaitOnDemand", "CheckOnDemand", path="$.on_demand.next_wait_seconds"),
    task("CheckOnDemand", "OnDemand", ON_DEMAND | args(action="status", attempt="$.on_demand.attempt"),
         "$.on_demand", MONEY_AT_STAKE, "OnDemandOutcome"),

    # Search every region, choose, ask a person above the threshold; or keep looking (search_until).
    "One search per candidate region, concurrently; offerings are stored in DynamoDB.",
    map_("SearchRegions", "$.record.regions", args("request_id", "look", region="$$.Map.Item.Value"),
         task("SearchRegion", "SearchOfferings", None, None, FAIL_AND_TELL.retries_only()),
         8, "$.searches", FAIL_AND_TELL.catches_only(), "ChooseOffering"),
    task("ChooseOffering", "ChooseOffering", args("request_id", "searches", "look"), "$.plan", FAIL_AND_TELL,
         "DropSearches"),
    pass_("DropSearches", "Decide", args("request_id", "platform", "plan", "record", "look")),
    switch("Decide", "$.plan.decision", {"PURCHASE": "PurchaseCapacity",
                                         "APPROVAL_REQUIRED": "RequestApproval",
                                         "REJECTED": "Rejected", "DRY_RUN": "DryRunDone",
                                         "SEARCH_AGAIN": "SearchLater"}, "NoOffering"),
    succeed("Rejected", "Over budget: recorded REJECTED, nothing bought."),
    succeed("DryRunDone", "Dry run: recorded PLANNED, nothing bought."),
    "Keep looking (search_until): nothing fits yet. One task waits until the next look, however far (its"
    " timeout is the wait: O(1) transitions); the token it stores lets a cancel end the wait at once"
    " (ReservationCancelled).",
    wait_for_token("SearchLater", "Notify", args("request_id", kind="search_wait", task_token=TOKEN),
                   "$.plan.wait_seconds", "$.waited", WAIT_FOR_TOKEN, "NextLook",
                   throws=[catch("States.Timeout", "NextLook", "$.waited")]),
    "The next look's number: its offerings are stored apart from the earlier looks'.",
    pass_("NextLook", "ContinueAsNew?", input_path="$.plan.next_look", result_path="$.look"),
    "Every few hundred looks (capacity.search_schedule.looks_per_execution) the next look runs in a fresh"
    " execution, far below the 25,000-event history limit.",
    choice("ContinueAsNew?", [(given("$.plan.continue_as"), "ContinueAsNew")], "SearchRegions"),
    "Continue-as-new: start this state machine again for the next look, named from the request id and the"
    " generation (a retry, or a step answered twice, names the same execution: StartExecution is idempotent"
    " for the same name and input, and ExecutionAlreadyExists means the successor was started). The successor"
    " takes the request over (RESUME#) and this execution ends.",
    task("ContinueAsNew", START_EXECUTION,
         args(StateMachineArn="$$.StateMachine.Id", Name="$.plan.continue_as", Input=CONTINUATION),
         "$.successor", START_SUCCESSOR, "ContinuedAsNew",
         throws=[catch("StepFunctions.ExecutionAlreadyExistsException", "ContinuedAsNew", "$.successor")]),
    succeed("ContinuedAsNew", "The next look runs in the successor execution, which owns the request now."),
    "Admitted at its door (202) but refused when it reached the workflow (too late for its window, or the"
    " team's rules or its brought reservation changed since): recorded, then failed with the reason and its"
    " error name and told, so GET shows an outcome.",
    pass_("FoundInvalid", "NotifyFailure", args(Error="$.record.invalid_error", Cause="$.record.invalid"),
          result_path="$.error"),
    pass_("NoOffering", "NotifyFailure", args(Error="OfferingNotFound", Cause="$.plan.reason"),
          result_path="$.error"),
    "Above the approval threshold: wait for a human (API or Slack) with the task token.",
    wait_for_token("RequestApproval", "Notify",
                   args("request_id", "plan", kind="approval_request", task_token=TOKEN,
                        entered_at="$$.State.EnteredTime"),
                   "$.plan.approval_timeout_seconds", "$.approval", WAIT_FOR_TOKEN, "PurchaseCapacity",
                   throws=[catch("States.Timeout", "ApprovalNotGiven"),
                           catch("ApprovalRejected", "ApprovalNotGiven")]),
    task("ApprovalNotGiven", "Notify",
         args("request_id", "error", kind="approval_outcome", approved=False, reason="$.error.Error"),
         "$.notified", FAIL_AND_TELL, "NotApproved"),
    succeed("NotApproved", "Approval rejected or timed out: recorded REJECTED, nothing bought."),

    # Buy exactly once (or adopt the reservation the request brings).
    "Exactly once: intent recorded first, deterministic plan name, adopt on retry. Schedules the release.",
    task("PurchaseCapacity", "PurchaseCapacity", PURCHASE | args(offering="$.plan.offering"), "$.purchase",
         MONEY_AT_STAKE, "InitPayment", throws=[PURCHASE_UNCONFIRMED,
                                                catch("PurchaseInProgress", "PurchaseOwnedElsewhere"),
                                                catch("OfferingExpired", "OfferingTaken")]),
    "The offering was taken before the purchase and nothing replaced it: a request that keeps looking looks"
    " again before its deadline (the intent reconciled, the hold given back; SEARCHING recorded), else it"
    " ends as before with the purchase's error.",
    task("OfferingTaken", "Notify", args("request_id", "error", "look", kind="offering_taken"), "$.plan",
         FAIL_AND_TELL, "LookAgain?"),
    switch("LookAgain?", "$.plan.decision", {"SEARCH_AGAIN": "SearchLater", "PURCHASE": "PurchaseCapacity"},
           "NotifyFailure"),
    "Bring your own reservation (issue 17): the request names a training plan or capacity block someone else"
    " bought. It is checked and recorded as the PURCHASE with no fee (brought: true); nothing is searched,"
    " chosen or bought, no intent, no team hold. Then the same payment/activation/deploy path as a bought"
    " one.",
    task("AdoptReservation", "PurchaseCapacity", PURCHASE | {"action": "adopt"}, "$.purchase", MONEY_AT_STAKE,
         "InitPayment"),

    # Wait for the payment, then (one transition however far ahead) for the start.
    pass_("InitPayment", "CheckPayment", result={"attempt": 0}, result_path="$.activation"),
    "A plan is Pending while AWS processes the payment: learn of a failed payment in minutes, not at the"
    " start.",
    task("CheckPayment", "WaitForActivation", ACTIVATION, "$.activation", MONEY_AT_STAKE, "IsPaid"),
    choice("IsPaid", [(any_of(equals("$.activation.status", "Scheduled"), ACTIVE), "WaitForStart")],
           "WaitPayment"),
    wait("WaitPayment", "CheckPayment", path="$.activation.next_wait_seconds"),
    "One transition however far ahead the plan starts.",
    wait("WaitForStart", "InitActivation", timestamp="$.purchase.start_time"),
    pass_("InitActivation", "CheckActivation", result={"attempt": 0}, result_path="$.activation"),
    task("CheckActivation", "WaitForActivation", ACTIVATION, "$.activation", MONEY_AT_STAKE, "IsActive"),
    choice("IsActive", [(all_of(ACTIVE, present("$.platform"), equals("$.platform", "ec2")),
                         "LaunchInstances"),
                        (ACTIVE, "CreateEndpoint")], "WaitActivation"),
    wait("WaitActivation", "CheckActivation", path="$.activation.next_wait_seconds"),

    # Deploy: the endpoint, then its inference components (SageMaker); or the instances (EC2).
    *deploy("CreateEndpoint", "create", "endpoint",
            ("IsEndpointInService", "InService", "CreateInferenceComponents"), throws=[RESOURCE_BUSY]),
    *deploy("CreateInferenceComponents", "create", "components",
            ("AreComponentsInService", "InService", "Ready"), throws=[RESOURCE_BUSY]),
    "EC2 capacity block (platform ec2): launch the instances from the launch template into the block (client"
    " token: once).",
    *deploy("LaunchInstances", "launch", "instances", ("AreInstancesRunning", "Running", "Ready")),
    succeed("Ready", "READY recorded; the release schedule made at purchase ends it."),

    # A failure is recorded and told; a step that stopped on purpose (cancelled) is no failure.
    "Record FAILED with the reason, tell the requester, and request a release of whatever exists.",
    task("NotifyFailure", "Notify", args("request_id", "error", kind="failure", phase="reserve"),
         "$.notified", MONEY_AT_STAKE.failing_to("Failed", "$.notify_error"), "Stopped?"),
    "A step that found the reservation cancelled (or released) stopped on purpose: that is not a failure, so"
    " the execution succeeds and the failure alarm stays quiet. Whoever recorded the stop requested the"
    " release.",
    switch("Stopped?", "$.error.Error", {"ReservationCancelled": "Stopped", "TeamLimitExceeded": "Rejected"},
           "Failed"),
    succeed("Stopped", "Cancelled (or released) while the workflow ran: nothing more to do here."),
    fail("Failed", "ReservationFailed",
         "The reservation failed; the ledger holds the reason and a release was requested."),

    # Money at stake: a transient fault that outlasted a step's retries is noted (Persevere<step>), recorded
    # and told, and the step tried again (Resume) until the reservation ends or is released.
    perseverance(PERSEVERE),
    "Once money may be spent (an on-demand launch, a purchase intent), a transient fault (throttling, 5xx,"
    " timeouts, killed Lambdas, Lambda service errors) never ends the reservation: record it, tell a person"
    " when it lasts, wait and try the step again, until the reservation ends or is released. Without money at"
    " stake it fails as any error.",
    task("NotifyDegraded", "Notify",
         args("request_id", kind="degraded", state="$.resume", error="$.transient"), "$.degraded",
         DEGRADED_NOTICE, "DegradedAction"),
    choice("DegradedAction", [
        (equals("$.degraded.action", "end"), "EndedWhileDegraded"),
        (all_of(equals("$.degraded.action", "fail"), equals("$.resume", "NotifyFailure")), "Failed"),
        (equals("$.degraded.action", "fail"), "NotifyFailure"),
    ], "WaitDegraded"),
    succeed("EndedWhileDegraded",
            "The reservation ended or was released while AWS kept failing; the release workflow owns what is"
            " left."),
    wait("WaitDegraded", "Resume", path="$.degraded.wait_seconds"),
    "NotifyDegraded itself failed: wait a fixed while and try the step again anyway.",
    wait("WaitDegradedBlind", "Resume", seconds=900),
    resume("Resume", PERSEVERE, default="NotifyFailure"),
    succeed("PurchaseOwnedElsewhere",
            "Another execution owns this request's purchase (a duplicate start): this one buys nothing."),
]
# fmt: on

WORKFLOW = Workflow(
    "Reserve GPU capacity (a SageMaker training plan for endpoints, or an EC2 capacity block), wait for it,"
    " deploy a SageMaker endpoint with one inference component per model (or launch the EC2 instances into"
    " the block). Release runs in release_capacity.asl.json, scheduled at purchase.",
    STATES,
)
