"""The fault soak: many randomized reservation lifecycles on the local cloud, checked for the money rules.

A test harness, not part of the runtime: it lives beside :mod:`localcloud`, which reaches it only from the
``python -m localcloud soak`` entry point (an import-linter contract in pyproject.toml holds that). Its
modules, in the order a lifecycle goes through them: :mod:`~localcloud_soak.scenario` (what is drawn),
:mod:`~localcloud_soak.lifecycle` (running one), :mod:`~localcloud_soak.facts` (what it left),
:mod:`~localcloud_soak.checks` (the invariants) and :mod:`~localcloud_soak.run` (many, the report, the
command line).

``python -m localcloud soak --seed N --count 200`` (``make soak SEED=N COUNT=200``) runs ``count``
lifecycles, each on a fresh :class:`~localcloud.cloud.LocalCloud` of the application's own template, each
from a seed derived from ``N`` and its index (``scenario.lifecycle_seed``), so one lifecycle can be re-run
alone with ``--only INDEX``. A lifecycle draws (``scenario.make_scenario``):

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
(``checks.check``): no double purchase (training plans and capacity blocks, asked of the emulator directly)
and no extension bought twice or left unrecorded, nothing above budget (a plan's or block's upfront fee, its
extensions, or what ran on demand until its end), no purchase
without the approval it needed (or in a dry run, or after a rejection; on demand, which asks no approval,
never above the threshold), nothing billable left behind (endpoints, instances...; unless AWS never
finished a deletion because of an injected ``stuck`` fault and the application reported it: "RELEASE
FAILED"), a final ledger state, and a Slack notification for every failure. The run prints the lifecycles
per outcome and per platform/strategy/what ran, the faults fired per kind and every violation with the
command that reproduces it; it exits 1 on any violation.

Each lifecycle is bounded by ``scenario.VIRTUAL_LIMIT`` of virtual time and by the clock's hang detector
(``--stall-seconds`` of real time without progress; never by how long it takes on a busy machine); a
lifecycle that does not become idle within them is a violation too. Releases retry until nothing
bills, so a lifecycle whose deletion AWS never finishes (an injected ``stuck``) never becomes idle: it is over
once its release failed, was reported and was tried again (``scenario.RETRIED_ATTEMPTS`` failed attempts).
"""
