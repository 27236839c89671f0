"""The wire conventions every model shares: UTC timestamps, USD amounts, strict JSON scalars, and the
validation error a field validator raises with its message shown to the user as is.

Every model is dumped with ``model_dump(mode="json")``: timestamps ``YYYY-MM-DDTHH:MM:SSZ`` strings (UTC),
money a decimal string in USD, hours integers or decimal strings. Every event ``detail`` carries
``schema_version`` (:data:`capacity.SCHEMA_VERSION`); a breaking change bumps it.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator, PlainSerializer, Strict
from pydantic_core import PydanticCustomError

from capacity.timeutil import as_utc, iso_z


def _money_json(value: Decimal) -> str:
    return f"{value:f}"


def _iso_text(value: Any) -> Any:
    """Timestamps arrive as ISO-8601 strings (or datetimes from code), never as epoch numbers."""
    if not isinstance(value, str | datetime):
        raise PydanticCustomError(
            "datetime_type", "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z"
        )
    return value


UtcDatetime = Annotated[
    AwareDatetime,
    BeforeValidator(_iso_text),
    AfterValidator(as_utc),
    PlainSerializer(iso_z, return_type=str, when_used="json"),
]
"""A tz-aware timestamp normalised to UTC; JSON form ``YYYY-MM-DDTHH:MM:SSZ``. Naive input is rejected."""

StrictInt = Annotated[int, Strict()]
"""A JSON integer: no booleans, no numeric strings, no fractions."""
StrictBool = Annotated[bool, Strict()]
"""A JSON boolean: ``true`` or ``false``, nothing that looks like one."""

Money = Annotated[Decimal, PlainSerializer(_money_json, return_type=str, when_used="json")]
"""USD as :class:`~decimal.Decimal`; JSON form a plain decimal string (``"30000"``, ``"8523.65"``)."""

MAX_REQUEST_USD = Decimal("100000000")
"""The largest amount a request may name (USD 100 million): 64 x ml.p5.48xlarge on demand for the longest
plan, 182 days, is about USD 15 million. Beyond it an amount is a typo or an attack (``1e400`` once reached
``decimal.InvalidOperation`` in the planner), refused at the door naming the field."""
MONEY_DECIMAL_PLACES = 2
"""Request amounts are whole cents."""


def problem(message: str) -> PydanticCustomError:
    """A validation error whose message is shown to the user as is."""
    return PydanticCustomError("invalid_value", message)
