"""The template's value types: its error, its resources and its API routes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class TemplateError(Exception):
    """The template cannot be run locally; the message names the template, resource and property."""


@dataclass(frozen=True)
class ApiRoute:
    """One API Gateway REST route served by a Lambda proxy integration.

    ``method`` is upper case (``POST``) or ``ANY``; ``path`` is the resource path template as API Gateway
    shows it (``/reservations/{request_id}``, ``/files/{proxy+}``); ``function`` the logical id of the
    ``AWS::Lambda::Function``; ``api`` the logical id of the ``AWS::ApiGateway::RestApi``; ``api_id`` its
    (deterministic) id; ``stage`` its stage name; ``auth`` the authorizer (``AWS_IAM``, a Cognito or Lambda
    authorizer name) or None.
    """

    method: str
    path: str
    function: str
    api: str
    api_id: str
    stage: str
    auth: str | None = None

    def matches(self, method: str, path: str) -> dict[str, str] | None:
        """The path parameters if this route serves ``method path`` (path without stage), else None."""
        if self.method not in ("ANY", method.upper()):
            return None
        route_parts = [p for p in self.path.split("/") if p]
        request_parts = [p for p in path.split("/") if p]
        params: dict[str, str] = {}
        for index, part in enumerate(route_parts):
            if part.startswith("{") and part.endswith("+}"):
                if index >= len(request_parts):
                    return None
                params[part[1:-2]] = "/".join(request_parts[index:])
                return params
            if index >= len(request_parts):
                return None
            if part.startswith("{") and part.endswith("}"):
                params[part[1:-1]] = request_parts[index]
            elif part != request_parts[index]:
                return None
        return params if len(route_parts) == len(request_parts) else None


@dataclass
class Resource:
    """One resource of the transformed template, with its properties resolved."""

    logical_id: str
    type: str
    properties: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
