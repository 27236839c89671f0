"""Capacity Orchestrator's shared layer: models, ranking, planning, ledger and AWS adapters.

Deployed as a Lambda layer (``layers/capacity`` holds the package ``capacity``); every function under
``functions/`` imports from it. Nothing in this package reads the environment at import time: several
functions share one process in the local cloud, so settings are parsed per invocation
(:mod:`capacity.settings`).
"""

SCHEMA_VERSION = 1
"""Version of the request model and of every event ``detail`` but ``ReservationPurchased``,
``ReservationActive`` and ``ReservationReleased``, at 2 since issue 28 (:mod:`capacity.events`); bump a
model's own on a breaking change."""

EVENT_SOURCE = "capacity.orchestrator"
"""EventBridge ``source`` of every event the application puts on its bus."""

TAG_REQUEST_ID = "capacity-orchestrator:request-id"
"""Tag key put on every AWS resource created for a reservation (value: the request id)."""
