"""'Did you mean ...?' for near-miss names in a refused request.

The API is the authority on what is valid (docs/api.md): its field errors name the allowed values
("use one of p4d.24xlarge, p5.48xlarge, ...", "Input should be 'sagemaker' or 'ec2'", "use AWS region codes
such as us-east-1, ..."). A suggestion is the allowed value the API named that is closest to what was sent,
so no rule is written twice. An unknown field ("is not a known field") names no alternative: its candidates
are the sibling fields of the request schema in the API's OpenAPI document (docs/openapi.json, generated
from the code), when the checkout has it. Command and option names are Click's own ("No such command
'reserv'. Did you mean 'reserve'?").
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from capacity_cli.api import FieldProblem

OPENAPI = Path(__file__).resolve().parents[1] / "docs" / "openapi.json"
"""The API's OpenAPI document in the checkout (absent from a packaged install: field names are then not
suggested)."""
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*[A-Za-z0-9]")
_CUTOFF = 0.6


def closest(value: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``value`` most likely meant, or None.

    A candidate that is ``value`` with a prefix or suffix added or removed at a ``.``, ``-`` or ``_``
    boundary wins (``p5.48xlarge`` -> ``ml.p5.48xlarge``; ``ml.p5.48xlarge`` -> ``p5.48xlarge``), before
    the most similar spelling (difflib, ratio >= 0.6: ``us-east1`` -> ``us-east-1``).
    """
    options = [c for c in dict.fromkeys(candidates) if c and c != value]
    if not value or not options:
        return None
    for option in options:
        longer, shorter = (option, value) if len(option) > len(value) else (value, option)
        if longer.endswith(shorter) and longer[-len(shorter) - 1] in "._-":
            return option
        if longer.startswith(shorter) and longer[len(shorter)] in "._-":
            return option
    lowered = {option.lower(): option for option in options}
    if value.lower() in lowered:
        return lowered[value.lower()]
    found = difflib.get_close_matches(value, options, n=1, cutoff=_CUTOFF)
    return found[0] if found else None


def sent_values(body: Any, path: str) -> list[str]:
    """The string values sent at a field path (``regions`` -> each region, ``models.0.name``)."""
    node = body
    for part in path.split(".") if path else []:
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return []
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [item for item in node if isinstance(item, str)]
    return []


def suggestion(problem: FieldProblem, body: Any, *, schema: str = "ReservationRequest") -> str | None:
    """'did you mean X?' for one field error of a request ``body`` (None when nothing is close).

    Args:
        schema: the OpenAPI schema the body follows (``ReservationRequest``, ``ScheduleDefinition``...).
    """
    if "not a known field" in problem.message:
        parent, _, name = problem.field.rpartition(".")
        hint = closest(name, schema_fields(schema, parent))
        return f"did you mean {(parent + '.' if parent else '') + hint!r}?" if hint else None
    allowed = alternatives(problem.message)
    for value in sent_values(body, problem.field):
        hint = closest(value, [token for token in allowed if token != value])
        if hint:
            return f"did you mean {hint!r}?"
    return None


def query_suggestion(problem: FieldProblem, value: str) -> str | None:
    """'did you mean X?' for a refused query parameter value (``--state SCHEDULD``)."""
    hint = closest(value, alternatives(problem.message))
    return f"did you mean {hint!r}?" if hint else None


def alternatives(message: str) -> list[str]:
    """The values a field error lists as allowed: quoted ones (pydantic's "Input should be 'a' or 'b'")
    and the members of comma-separated lists ("use one of a, b, c"). A value merely mentioned ("start X is
    in the past (now Y)") is no alternative."""
    found = list(re.findall(r"'([^']+)'", message))
    for match in _TOKEN.finditer(message):
        after = message[match.end() : match.end() + 1]
        before = message[max(0, match.start() - 2) : match.start()]
        if after == "," or before == ", ":
            found.append(match.group())
    return list(dict.fromkeys(found))


@cache
def _openapi() -> dict[str, Any]:
    try:
        document: dict[str, Any] = json.loads(OPENAPI.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document


def schema_fields(schema: str, path: str = "") -> list[str]:
    """The property names of ``schema`` at a field path (``models.0`` -> the model's fields), from the
    OpenAPI document; empty when the document or the path is unknown."""
    schemas: Mapping[str, Any] = (_openapi().get("components") or {}).get("schemas") or {}
    node: Any = schemas.get(schema)
    for part in [p for p in path.split(".") if p]:
        node = _resolve(node, schemas)
        if part.isdigit():
            node = (node or {}).get("items")
        else:
            node = ((node or {}).get("properties") or {}).get(part)
    node = _resolve(node, schemas)
    if isinstance(node, Mapping) and node.get("type") == "array":
        node = _resolve(node.get("items"), schemas)
    return sorted((node or {}).get("properties") or {}) if isinstance(node, Mapping) else []


def _resolve(node: Any, schemas: Mapping[str, Any]) -> Any:
    """Follow ``$ref`` and the first referenced member of ``anyOf`` (optional fields)."""
    for _ in range(5):
        if not isinstance(node, Mapping):
            return node
        if "$ref" in node:
            node = schemas.get(str(node["$ref"]).rsplit("/", 1)[-1])
            continue
        refs = [m for m in node.get("anyOf") or [] if isinstance(m, Mapping) and "$ref" in m]
        if refs:
            node = refs[0]
            continue
        return node
    return node


def describe_problems(
    problems: Sequence[FieldProblem], body: Any, *, schema: str = "ReservationRequest"
) -> list[str]:
    """Each field error as ``field: message`` with its suggestion appended, one line each."""
    lines = []
    for problem in problems:
        hint = suggestion(problem, body, schema=schema)
        lines.append(f"{problem.field}: {problem.message}" + (f" - {hint}" if hint else ""))
    return lines
