"""The application's logic, in rooms a newcomer can name (docs/architecture.md, the folder map):

- :mod:`capacity.logic.steps`: the lifecycle's steps, one module per step (intake, search, choose, buy,
  pay, activate, ready, on demand, release, end, notify, the outbox), each takes a validated input and
  :class:`capacity.ports.Ports`;
- :mod:`capacity.logic.continuity`: what keeps a reservation going (extend, roll over, keep looking, chains);
- :mod:`capacity.logic.governance`: who may do what and what it costs (policy and teams, costs, checks);
- :mod:`capacity.logic.doors`: the doors' server side (REST, Slack, schedules); they import the rest, the
  rest never imports them (an import-linter contract);
- the platform wings :mod:`capacity.logic.sagemaker` and :mod:`capacity.logic.ec2`, routed by
  :mod:`capacity.logic.wings`.
"""
