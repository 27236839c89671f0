"""The stopped-workflow workflow: ``statemachines/workflow_stopped.asl.json`` is written from it (make asl).

One task: notify kind ``workflow_stopped`` (capacity.logic.steps.stopped) handles a reserve or release
execution that ended outside its own paths, retried for about a day (``FOR_A_DAY``); then the operators'
alarm.
"""

from __future__ import annotations

from statemachines.policies import FOR_A_DAY
from statemachines.spec import Generated, State, Workflow, args, fail, task

STATES: list[State | Generated | str] = [
    task("HandleStop", "Notify", args(kind="workflow_stopped", request_id="", workflow="$"), None, FOR_A_DAY),
    "Still failing after a day, or refused: WorkflowStoppedFailuresAlarm tells the operators.",
    fail(
        "NotHandled",
        "WorkflowStopNotHandled",
        "The stopped workflow's status change could not be handled; see this execution's input.",
    ),
]

WORKFLOW = Workflow(
    "A reserve or release workflow that ended outside its own paths (an operator's StopExecution, a timeout,"
    " an uncaught error): its Step Functions status change event is handled by notify kind workflow_stopped"
    " (capacity.logic.steps.stopped), retried here for up to a day: Lambda's own asynchronous retries (two)"
    " are not enough under sustained throttling, and a lost event left a reservation waiting for good.",
    STATES,
)
