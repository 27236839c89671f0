"""The one wording of validation errors: pydantic's errors as :class:`~capacity.errors.FieldError` items
that name the field and the fix, for every door (API, Slack, EventBridge, handler inputs)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from capacity.errors import FieldError, InvalidRequest
from capacity.wire import MAX_REQUEST_USD

_FRIENDLY = {
    "missing": "is required",
    "extra_forbidden": "is not a known field: remove it or fix its spelling",
    "timezone_aware": "must include a time zone: give UTC like 2026-12-10T11:30:00Z (naive times rejected)",
    "datetime_parsing": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "datetime_from_date_parsing": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "datetime_type": "must be an ISO-8601 UTC timestamp like 2026-12-10T11:30:00Z",
    "int_type": "must be a whole number (a JSON integer, not a string, a boolean or a fraction)",
    "bool_type": "must be true or false (a JSON boolean, not a string or a number)",
    "decimal_parsing": 'must be an amount in US dollars, like "30000" or "12500.50"',
    "decimal_type": 'must be an amount in US dollars, like "30000" or "12500.50"',
    "finite_number": 'must be a finite amount in US dollars, like "30000" (not NaN or Infinity)',
    "decimal_max_places": 'must be whole cents: at most 2 decimal places, like "12500.50"',
    "decimal_max_digits": f"must be at most {MAX_REQUEST_USD:,f} US dollars",
    "decimal_whole_digits": f"must be at most {MAX_REQUEST_USD:,f} US dollars",
}
_MISSING_HINT = {
    "max_upfront_fee_usd": 'is required: set the budget, the most to pay upfront in USD (e.g. "30000")',
    "models": "is required: list at least one model to serve",
    "regions": 'is required: list candidate regions in order of preference (e.g. ["us-east-1"])',
}


def field_errors(exc: ValidationError) -> list[FieldError]:
    """Turn pydantic errors into :class:`FieldError` items that name the field and the fix."""
    return field_problems(exc.errors(include_url=False))


_DOOR_PARTS = ("body", "query", "path", "header")


def field_problems(errors: Sequence[Mapping[str, Any]]) -> list[FieldError]:
    """pydantic error dicts (``ValidationError.errors()``, or Powertools'
    ``RequestValidationError.errors()``) as :class:`FieldError` items that name the field and the fix: the
    one wording of every door.

    A ``loc`` that starts with ``body``, ``query``, ``path`` or ``header`` (the API door's) names the rest
    (``instance_count``, ``models.0.memory_mb``), or the parameter (``limit``), or ``body`` for the body as a
    whole.
    """
    result: list[FieldError] = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = loc[0] if loc else ""
        rest = loc[1:] if where in _DOOR_PARTS else loc
        field = ".".join(rest) or where or "request"
        ctx = error.get("ctx") or {}
        kind = str(error.get("type", ""))
        if kind == "request_rules" and isinstance(ctx.get("problems"), list):
            prefix = f"{field}." if rest else ""
            result.extend(FieldError(prefix + f, m) for f, m in ctx["problems"])
            continue
        if kind == "missing":
            message = _MISSING_HINT.get(field, _FRIENDLY["missing"])
        elif kind == "json_invalid":
            field, message = "body", f"is not valid JSON: {ctx.get('error') or error.get('msg')}"
        else:
            message = _bound_message(kind, ctx) or _FRIENDLY.get(kind) or _plain(str(error.get("msg", "")))
        result.append(FieldError(field, message))
    return result


def _plain(message: str) -> str:
    """pydantic's ``Value error, <ours>`` prefix removed: our validators already say what to fix."""
    return message.removeprefix("Value error, ") or "is invalid"


def _bound_message(kind: str, ctx: Mapping[str, Any]) -> str | None:
    """Limits phrased as the fix ("must be at least 1") rather than as pydantic's complaint."""
    bounds = {
        "greater_than_equal": ("ge", "must be at least {}"),
        "greater_than": ("gt", "must be more than {}"),
        "less_than_equal": ("le", "must be at most {}"),
        "less_than": ("lt", "must be less than {}"),
        "too_short": ("min_length", "needs at least {} item(s) (or characters)"),
        "too_long": ("max_length", "allows at most {} item(s) (or characters)"),
    }
    if kind not in bounds or bounds[kind][0] not in ctx:
        return None
    key, template = bounds[kind]
    return template.format(ctx[key])


def parse_model[M: BaseModel](model: type[M], data: Any) -> M:
    """Validate a handler input against ``model``.

    Raises:
        InvalidRequest: naming each bad field.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidRequest(field_errors(exc)) from exc
