"""moto's DynamoDB answers written straight to JSON, not through its generic response serializer.

moto 5.2 serializes every answer by walking the operation's output shape with an attribute picker that
tries aliases for each member (``moto.core.serialize``); for ledger queries, whose items are maps of
``AttributeValue`` structures, that walk was a fifth of a lifecycle test's CPU (issue 14). The answer of a
DynamoDB operation is already in wire form once moto's ``DynamoResult`` has turned its values into
``{"S": ...}`` dicts, so :func:`install` makes ``DynamoResult`` keep exactly the output shape's members
(by their own names, dropping ``None``, as the serializer does) and ``json.dumps`` them. Whatever that
walk does not know for certain (a timestamp, a blob, a key spelled another way, a value of another type)
falls back to moto's serializer, so the bytes botocore parses are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from botocore import xform_name
from botocore.model import Shape, StructureShape
from moto.core.responses import ActionContext
from moto.dynamodb.responses import DynamoResult

_saved: list[Callable[..., Any]] = []


class _UnsureError(Exception):
    """The fast walk cannot promise moto's serializer's output for this value: use the serializer."""


_ALIASES: dict[str, frozenset[str]] = {}


def _aliases(shape: Shape) -> frozenset[str]:
    """Other spellings under which moto's picker finds the structure's members (``xform_name``)."""
    found = _ALIASES.get(shape.name)
    if found is None:
        members = shape.members  # type: ignore[attr-defined]
        found = frozenset(xform_name(name) for name in members) - frozenset(members)
        _ALIASES[shape.name] = found
    return found


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# Scalar shape types the walk writes as they are, with the Python type moto's serializer would accept so.
_SCALARS: dict[str, Callable[[Any], bool]] = {
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "long": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "double": _is_number,
    "float": _is_number,
}


def _walk(value: Any, shape: Shape) -> Any:
    kind = shape.type_name
    if kind == "structure" and isinstance(value, dict):
        members = shape.members  # type: ignore[attr-defined]
        strays = value.keys() - members.keys()
        if strays and not strays.isdisjoint(_aliases(shape)):
            raise _UnsureError  # a member spelled as the serializer's picker also accepts (snake_case)
        # Keys of no member (moto's ConsumedCapacityUnits...) are dropped, as the serializer drops them.
        return {
            key: _walk(item, members[key])
            for key, item in value.items()
            if item is not None and key in members
        }
    if kind == "list" and isinstance(value, list):
        member = shape.member  # type: ignore[attr-defined]
        return [_walk(item, member) for item in value]
    if kind == "map" and isinstance(value, dict):
        values = shape.value  # type: ignore[attr-defined]
        return {key: _walk(item, values) for key, item in value.items()}
    accepts = _SCALARS.get(kind)
    if accepts is None or not accepts(value):
        raise _UnsureError  # a blob or a timestamp (the serializer converts those), or an unexpected type
    return float(value) if kind in ("double", "float") else value


def answer_body(result: Any, context: ActionContext) -> str | None:
    """The JSON body moto's serializer would write for a DynamoDB ``result``, or None when unsure.

    Args:
        result: the answer as ``DynamoResult`` holds it (DynamoDB JSON values).
        context: moto's context of the call (its operation model).
    """
    shape = context.operation_model.output_shape
    if not isinstance(shape, StructureShape) or isinstance(result, Exception):
        return None
    try:
        return json.dumps(_walk(result, shape))
    except _UnsureError:
        return None


def install() -> None:
    """Patch ``DynamoResult.execute_result`` (idempotent); :func:`uninstall` reverts."""
    if _saved:
        return
    original = DynamoResult.execute_result
    _saved.append(original)

    def execute_result(self: DynamoResult, context: ActionContext) -> Any:
        body = answer_body(self.result, context)
        if body is None:
            return original(self, context)
        status = context.operation_model.http.get("responseCode", 200)
        content_type = f"application/x-amz-json-{context.service_model.metadata['jsonVersion']}"
        return status, {"Content-Type": content_type}, body

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign,assignment]


def uninstall() -> None:
    """Put moto's serializer back."""
    if _saved:
        DynamoResult.execute_result = _saved.pop()  # type: ignore[method-assign]
