"""Kept importable for code outside the layer that names these (``scripts/``, ``bench/``): the request
schema and its door live in :mod:`capacity.request`, the clock rules in :mod:`capacity.admission`, the ledger
records in :mod:`capacity.records`, the wording of validation errors in :mod:`capacity.validation`. The
layer's own modules import from those, not from here (a function imports only what it needs).
"""

from __future__ import annotations

from capacity.admission import ON_DEMAND_FIRST_HORIZON
from capacity.records import FINAL_STATES
from capacity.request import ReservationRequest, parse_request
from capacity.validation import parse_model

__all__ = ["FINAL_STATES", "ON_DEMAND_FIRST_HORIZON", "ReservationRequest", "parse_model", "parse_request"]
