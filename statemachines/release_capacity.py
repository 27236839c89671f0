"""The release workflow: ``statemachines/release_capacity.asl.json`` is written from it (``make asl``).

Begin (validate, wait for a payment in flight); tear down the purchase's platform (SageMaker: scaling, alarms,
inference components, endpoint, endpoint config; EC2: the instances); Finish (nothing left, RELEASED). Every
step follows ``RELEASE_STEP``: what outlasts its retries fails this attempt (AttemptFailed), and the next
attempt is scheduled, until nothing bills. Read a task as in reserve_capacity.py.
"""

from __future__ import annotations

from statemachines.policies import LEFTOVERS_LISTED, RELEASE_STEP, RESOURCE_BUSY
from statemachines.spec import (
    Generated,
    State,
    Workflow,
    above,
    all_of,
    args,
    choice,
    equals,
    fail,
    is_string,
    pass_,
    present,
    succeed,
    task,
    wait,
)

FN = "ReleaseCapacity"
POLL = {"attempt": 0}

# fmt: off
# A table laid out by hand, a state a line or two (ruff format would put one argument a line).
STATES: list[State | Generated | str] = [
    "Keep the event's detail for Begin to validate; take request_id only when it is a string (a missing one"
    " must not fail the execution with States.Runtime before anyone is told).",
    pass_("Init", "HasRequestId?", {"detail.$": "$.detail", "request_id": "", "components": POLL,
                                    "endpoint": POLL, "instances": POLL}),
    choice("HasRequestId?", [(all_of(present("$.detail.request_id"), is_string("$.detail.request_id")),
                              "Identify")], "Begin"),
    pass_("Identify", "Begin", input_path="$.detail.request_id", result_path="$.request_id"),
    task("Begin", FN, args("request_id", "detail", action="begin"), "$.begin", RELEASE_STEP,
         "AlreadyReleased?"),
    choice("AlreadyReleased?", [(equals("$.begin.already_released", True), "AlreadyReleased"),
                                (equals("$.begin.postponed", True), "Postponed"),
                                (above("$.begin.payment_wait_seconds", 0), "WaitForPayment")], "Platform?"),
    succeed("AlreadyReleased"),
    "An extension's payment is in flight (AWS takes it within 12 h or by 35 min before the end): nothing is"
    " deleted until it is paid or failed (capacity.logic.steps.release._money_in_flight); then Begin again.",
    wait("WaitForPayment", "Begin", path="$.begin.payment_wait_seconds"),
    "The extension in flight was paid: the reservation serves to its new end, where its moved release"
    " schedule releases it.",
    succeed("Postponed"),
    "Run only the purchase's platform's teardown: an EC2 capacity block has no scaling, alarms, components"
    " or endpoint, only instances. Nothing bought (platform null): the SageMaker path, where every action is"
    " a no-op.",
    choice("Platform?", [(all_of(present("$.begin.platform"), is_string("$.begin.platform"),
                                 equals("$.begin.platform", "ec2")), "TerminateInstances")], "StopScaling"),

    # SageMaker: scaling, alarms, inference components, the endpoint, its config.
    "First stop scale-out: delete the components' scaling policies and deregister their scalable targets.",
    task("StopScaling", FN, args("request_id", action="delete_scaling"), "$.step", RELEASE_STEP,
         "DeleteAlarms", throws=[RESOURCE_BUSY]),
    "Delete the reservation's alarms so nothing starts a copy again.",
    task("DeleteAlarms", FN, args("request_id", action="delete_alarms"), "$.step", RELEASE_STEP,
         "DeleteInferenceComponents", throws=[RESOURCE_BUSY]),
    task("DeleteInferenceComponents", FN,
         args("request_id", action="delete_components", attempt="$.components.attempt"), "$.components",
         RELEASE_STEP, "ComponentsGone?"),
    choice("ComponentsGone?", [(above("$.components.remaining", 0), "WaitComponents")], "DeleteEndpoint"),
    wait("WaitComponents", "DeleteInferenceComponents", path="$.components.next_wait_seconds"),
    task("DeleteEndpoint", FN, args("request_id", action="delete_endpoint", attempt="$.endpoint.attempt"),
         "$.endpoint", RELEASE_STEP, "EndpointGone?", throws=[RESOURCE_BUSY]),
    choice("EndpointGone?", [(above("$.endpoint.remaining", 0), "WaitEndpoint")], "DeleteEndpointConfig"),
    wait("WaitEndpoint", "DeleteEndpoint", path="$.endpoint.next_wait_seconds"),
    task("DeleteEndpointConfig", FN, args("request_id", action="delete_endpoint_config"), "$.step",
         RELEASE_STEP, "Finish", throws=[RESOURCE_BUSY]),

    # EC2: the instances (the capacity block itself cannot be deleted).
    "Terminate the instances tagged with the request and poll until none is live (release_capacity's"
    " delete_components action for platform ec2).",
    task("TerminateInstances", FN,
         args("request_id", action="delete_components", attempt="$.instances.attempt"), "$.instances",
         RELEASE_STEP, "InstancesGone?"),
    choice("InstancesGone?", [(above("$.instances.remaining", 0), "WaitInstances")], "Finish"),
    wait("WaitInstances", "TerminateInstances", path="$.instances.next_wait_seconds"),

    # Nothing left: RELEASED with the cost; or this attempt failed, told, and the next one scheduled.
    task("Finish", FN, args("request_id", action="finish"), "$.result", RELEASE_STEP, "Released",
         throws=[LEFTOVERS_LISTED]),
    succeed("Released"),
    "Releases retry until nothing bills: name every leftover, schedule the next attempt (a one-time schedule"
    " putting ReleaseRequested), record FAILED (phase release) for this attempt and alert; the execution then"
    " fails so ReleaseFailuresAlarm pages operations.",
    task("AttemptFailed", FN,
         args("request_id", "error", action="attempt_failed", attempt_id="$$.Execution.Id"), "$.attempt",
         RELEASE_STEP.failing_to("NotifyFailure", "$.attempt_error"), "ReleaseFailed"),
    "Fallback when AttemptFailed cannot run: record and tell a person what the release left (no retry is"
    " scheduled from here; the end-of-reservation schedule, if still due, is the next attempt).",
    task("NotifyFailure", "Notify",
         args("request_id", "error", kind="failure", phase="release", attempt_id="$$.Execution.Id"),
         "$.notified", RELEASE_STEP.failing_to("ReleaseFailed", "$.notify_error"), "ReleaseFailed"),
    fail("ReleaseFailed", "ReleaseFailed",
         "The release did not complete. See the notification and the ledger for what, if anything, is still"
         " billing."),
]
# fmt: on

WORKFLOW = Workflow(
    "Release a reservation. SageMaker: stop scaling (policies, scalable targets), delete alarms, inference"
    " components, then the endpoint, then its config; EC2: terminate the instances (the block itself cannot"
    " be deleted). Begin answers the purchase's platform and Platform? branches on it. Verify nothing of the"
    " reservation is left; record RELEASED with the cost. Safe to run twice. A failed attempt is recorded and"
    " alerted with every leftover and the release is tried again later, until nothing bills.",
    STATES,
)
