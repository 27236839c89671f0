"""Every fault policy of the workflows, each written once (issue 32): the specs name them, never a Retry.

The retriers first (what is retried, how often), then the policies made of them (what a step does when its
retries are outlasted). The errors are Lambda's and Step Functions' own and the layer's error names
(``capacity.errors``: the class name is the Step Functions error name).
"""

from __future__ import annotations

from statemachines.spec import ALL, Catch, Persevere, Policy, Retrier

LAMBDA_FAULTS = Retrier(
    (
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
    ),
    interval=2,
    attempts=6,
    backoff=2.0,
    jitter=True,
)
"""The Lambda service's own faults: a few quick retries."""

AWS_FAULTS = Retrier(
    ("RetryableAwsError", "Sandbox.Timedout", "States.Timeout", "Lambda.Unknown"),
    interval=10,
    attempts=8,
    backoff=2.0,
    max_delay=300,
    jitter=True,
)
"""Throttling and 5xx from AWS (RetryableAwsError), and a function that timed out or was killed: about half an
hour of retries (8 attempts, 10 s doubling to 5 minutes)."""

ANY_TRANSIENT = Retrier((*LAMBDA_FAULTS.errors, *AWS_FAULTS.errors), 10, 8, 2.0, 300, jitter=True)
"""Both kinds in one retrier (the extend workflow)."""

RESOURCE_BUSY = Retrier(("ResourceBusy",), interval=30, attempts=20, backoff=1.5, max_delay=300)
"""An endpoint is Creating or Updating: writes to it wait (serialized per endpoint, DESIGN.md section 4)."""

PURCHASE_UNCONFIRMED = Retrier(("PurchaseUnconfirmed",), interval=60, attempts=15, backoff=1.0)
"""A purchase call whose outcome is not known yet: look it up again every minute for a quarter of an hour."""

LEFTOVERS_LISTED = Retrier(
    ("LeftoverResources",),
    interval=30,
    attempts=5,
    backoff=2.0,
    comment="SageMaker listings are eventually consistent: what was just deleted may still be listed. Look"
    " again for about a quarter of an hour before telling a person.",
)

PERSEVERE = Persevere(result="$.transient", note="$.resume", loop="NotifyDegraded")
"""The reserve workflow's loop for a step with money at stake (NotifyDegraded ... Resume)."""

FAIL_AND_TELL = Policy("nothing bought yet", (LAMBDA_FAULTS, AWS_FAULTS), Catch((ALL,), "NotifyFailure"))
"""Nothing is at stake: retry transient faults for about half an hour, then fail and tell (NotifyFailure)."""

MONEY_AT_STAKE = Policy(
    "money at stake",
    (LAMBDA_FAULTS, AWS_FAULTS.times(6)),
    Catch((ALL,), "NotifyFailure"),
    PERSEVERE,
)
"""Money may be spent (an on-demand launch, a purchase intent): retry transient faults, then persevere
(record, tell a person, wait, resume this step) until the reservation ends or is released; any other error
fails and tells (NotifyFailure)."""

WAIT_FOR_TOKEN = Policy(
    "a wait for a token",
    (LAMBDA_FAULTS, AWS_FAULTS.without("States.Timeout")),
    Catch((ALL,), "NotifyFailure"),
)
"""A task that waits for its token (a person's decision, the next look): its timeout is the wait, not a
fault, so the step handles States.Timeout itself."""

DEGRADED_NOTICE = Policy(
    "the degraded notice",
    (LAMBDA_FAULTS, AWS_FAULTS.times(6)),
    Catch((ALL,), "WaitDegradedBlind", "$.degraded_error"),
)
"""The notice of a degraded step: when it cannot be given either, wait blind and try the step again."""

START_SUCCESSOR = Policy(
    "a successor execution",
    (
        Retrier(("StepFunctions.ExecutionAlreadyExistsException",), attempts=0),
        Retrier(("States.TaskFailed",), interval=2, attempts=8, backoff=2.0, max_delay=300, jitter=True),
    ),
    Catch((ALL,), "NotifyFailure"),
)
"""StartExecution by a deterministic name: already exists means started (not retried); others retry."""

RELEASE_STEP = Policy(
    "a release step",
    (LAMBDA_FAULTS, Retrier(("RetryableAwsError",), 10, 8, 2.0, 300, jitter=True)),
    Catch((ALL,), "AttemptFailed"),
)
"""A release step: retry throttling and 5xx, then the attempt fails (AttemptFailed: every leftover named, the
next attempt scheduled), until nothing bills."""

AWAIT_PAYMENT = Policy(
    "until AWS takes the payment",
    (Retrier(("ExtensionPending",), interval=60, attempts=40, backoff=1.2, max_delay=1800), ANY_TRANSIENT),
    Catch((ALL,), "TellNotExtended"),
)
"""An extension's payment: poll ExtensionPending for about 13 hours (AWS takes or fails it within 12)."""

FOR_A_DAY = Policy(
    "for about a day",
    (LAMBDA_FAULTS, AWS_FAULTS.times(150, max_delay=600)),
    Catch((ALL,), "NotHandled"),
)
"""A stopped workflow's handling: retry for about a day, then the operators' alarm (NotHandled)."""

TELL_ONCE_MORE = Policy("telling", (ANY_TRANSIENT,), Catch((ALL,), "NotExtended", "$.told_error"))
"""The extension's last word (reconcile, give the hold back, tell): retried, then the execution fails."""
