"""JSON from outside, read without letting its shape crash the reader (issue 13, defect 11).

Python's ``json`` decoder recurses once per nesting level: a 60 kB body of ``[[[[...`` raises
``RecursionError`` deep inside the parser (the API Lambda answered 502), and a structure just shallow
enough to parse can still exhaust the stack later (pydantic, ``json.dumps`` of an event). Every door that
reads JSON a caller wrote (the API body, Slack's interaction ``payload``, the ``detail`` of the events the
workflows start from) therefore checks the nesting first and refuses more than :data:`MAX_DEPTH` levels
with :class:`~capacity.errors.InvalidRequest` naming the field (the API answers 400). The deepest
legitimate input is a schedule definition: ``{"request": {"models": [{"copies": {...}}]}}``, 5 levels;
Slack's ``block_actions`` payloads stay under 10.

Money in JSON is read exactly: numbers with a fraction or exponent become :class:`~decimal.Decimal`.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from typing import Any

from capacity.errors import FieldError, InvalidRequest

MAX_DEPTH = 32
"""The most nesting levels (objects and arrays) any input may have."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def text_depth(text: str) -> int:
    """How deeply the arrays and objects of JSON ``text`` nest (brackets inside strings do not count).

    Linear in the text and iterative: safe on any input, valid JSON or not.
    """
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRING.sub('""', text)):
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def value_depth(value: Any, *, limit: int = MAX_DEPTH) -> int:
    """How deeply the dicts and lists of an already parsed ``value`` nest, counting at most to
    ``limit + 1`` (an iterative walk: no recursion, however deep the value)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            if depth > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children)
    return deepest


def _too_deep(field: str) -> InvalidRequest:
    return InvalidRequest(
        [
            FieldError(
                field,
                f"nests arrays/objects more than {MAX_DEPTH} levels deep (a reservation request needs 4): "
                "send the request as docs/api.md shows it",
            )
        ]
    )


def loads(text: str | bytes, *, field: str = "body") -> Any:
    """``json.loads`` for input from outside: decimals read exactly, nesting bounded.

    Raises:
        InvalidRequest: ``field`` nests deeper than :data:`MAX_DEPTH` levels.
        ValueError: the text is not JSON (``json.JSONDecodeError``).
    """
    raw = text.decode("utf-8") if isinstance(text, bytes) else text
    check_text(raw, field=field)
    return json.loads(raw, parse_float=Decimal)


def check_text(text: str, *, field: str) -> None:
    """Refuse JSON ``text`` that nests deeper than :data:`MAX_DEPTH` levels, before anything parses it.

    Raises:
        InvalidRequest: naming ``field``.
    """
    if text_depth(text) > MAX_DEPTH:
        raise _too_deep(field)


def check_depth(value: Any, *, field: str) -> None:
    """Refuse a parsed input (an event's ``detail``) that nests deeper than :data:`MAX_DEPTH` levels.

    Raises:
        InvalidRequest: naming ``field``.
    """
    if value_depth(value) > MAX_DEPTH:
        raise _too_deep(field)
