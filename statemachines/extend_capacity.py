"""The extend workflow: ``statemachines/extend_capacity.asl.json`` is written from it (``make asl``).

Buy the extension once (Extend), then wait for AWS to take the payment (Confirm); what gives up is reconciled
and told (TellNotExtended). Read a task as in reserve_capacity.py.
"""

from __future__ import annotations

from statemachines.policies import AWAIT_PAYMENT, FAIL_AND_TELL, PURCHASE_UNCONFIRMED, TELL_ONCE_MORE
from statemachines.spec import Generated, State, Workflow, args, catch, fail, succeed, task

FN = "ExtendCapacity"

# fmt: off
# A table laid out by hand, a state a line or two (ruff format would put one argument a line).
STATES: list[State | Generated | str] = [
    task("Extend", FN, args("detail", kind="purchase", execution="$$.Execution.Id"), "$.extension",
         FAIL_AND_TELL.failing_to("TellNotExtended"), "Confirm",
         throws=[PURCHASE_UNCONFIRMED, catch("PurchaseInProgress", "OwnedElsewhere")]),
    succeed("OwnedElsewhere",
            "Another execution (a second delivery of the same ExtensionRequested) buys this extension."),
    task("Confirm", FN,
         args(kind="confirm", request_id="$.detail.request_id", extension_id="$.detail.extension_id"),
         "$.outcome", AWAIT_PAYMENT),
    "Buying or confirming gave up: reconcile with AWS (an extension bought is recorded and confirmed), give"
    " the held fee back when nothing was bought, and tell the requester why"
    " (capacity.logic.continuity.extend.extension_not_done).",
    task("TellNotExtended", FN, args("detail", "error", kind="failed"), "$.told", TELL_ONCE_MORE,
         "NotExtended"),
    "Refused (budget, approval, stale with no replacement) or failed: the ledger and the Lambda's error say"
    " why; the reservation keeps its end and release.",
    fail("NotExtended", "ExtensionNotMade",
         "the extension was refused or failed; see the execution's history and the reservation's ledger"),
]
# fmt: on

WORKFLOW = Workflow(
    "Extend a reservation in place (issue 17): buy the extension exactly once, then wait for AWS to take the"
    " payment (Confirm polls ExtensionPending for about 13 hours: AWS takes or fails a payment within 12"
    " hours); the release schedule moves only once it is paid, and a release waits for a payment in flight.",
    STATES,
)
