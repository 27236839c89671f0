"""Plain requests (what a user has: the body of ``POST /reservations``, JSON or YAML) as API Gateway events.

API Gateway turns an HTTP request into a REST proxy event (payload format 1.0) before the function sees it;
:func:`proxy_event` does the same for a method, a path, a query and a body, through
:func:`localcloud.http_api.build_event` (the one place that builds them for ``serve``), and adds the caller's
IAM identity as API Gateway's ``AWS_IAM`` authorizer does (``requestContext.identity.userArn``,
``accountId``). ``python -m localcloud run request.json`` and the ``capacity --local`` CLI both use it, so a
request is tried locally exactly as it would be sent, without hand-editing an event whose body is an
escaped JSON string.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from localcloud.http_api import build_event
from localcloud.template import ApiRoute

USER_AGENT = "localcloud"


def load_document(path: Path) -> Any:
    """A JSON file, or a YAML one (``.yaml``/``.yml``: a superset of JSON).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not valid JSON/YAML (the message names the file and the problem).
    """
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # noqa: PLC0415 - PyYAML only for YAML files

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ValueError(f"{path}: not YAML: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from exc


def plain_route(document: Any) -> tuple[str, str] | None:
    """The route a plain body goes to: ``("POST", "/reservations")`` for a reservation request (it has
    ``instance_type`` and ``max_upfront_fee_usd``), ``("POST", "/schedules")`` for a schedule definition
    (``schedule_expression`` and ``request``), else None."""
    if not isinstance(document, Mapping):
        return None
    if {"schedule_expression", "request"} <= document.keys():
        return "POST", "/schedules"
    if {"instance_type", "max_upfront_fee_usd"} <= document.keys():
        return "POST", "/reservations"
    return None


def caller_identity(user_arn: str, account_id: str) -> dict[str, Any]:
    """``requestContext.identity`` of a request API Gateway authorized with IAM (SigV4) for ``user_arn``."""
    session = user_arn.rsplit("/", 1)[-1]
    return {
        "accountId": account_id,
        "caller": f"AROALOCALCALLER:{session}",
        "user": f"AROALOCALCALLER:{session}",
        "userArn": user_arn,
        "accessKey": None,
        "cognitoIdentityPoolId": None,
        "cognitoIdentityId": None,
        "cognitoAuthenticationType": None,
        "cognitoAuthenticationProvider": None,
        "principalOrgId": None,
    }


def proxy_event(
    *,
    method: str,
    path: str,
    routes: list[ApiRoute],
    account_id: str,
    now: datetime,
    query: Mapping[str, str] | None = None,
    body: Any = None,
    identity: str | None = None,
    user_agent: str = USER_AGENT,
) -> dict[str, Any]:
    """The REST proxy event API Gateway would send for this request (see the module docstring).

    Args:
        path: relative to the stage (``/reservations/eval-week-49``), already URL-quoted.
        body: JSON-serializable (sent as ``application/json``), or None.
        identity: the caller's IAM principal ARN; None leaves the identity without one (an unsigned call).

    Returns:
        The event; for a path no route serves, the minimal ``{"httpMethod", "path"}`` for which
        :meth:`localcloud.cloud.LocalCloud.api_request` answers 403 ``Missing Authentication Token``.
    """
    raw_path = path + ("?" + urlencode(sorted(query.items()), quote_via=quote) if query else "")
    data = b"" if body is None else json.dumps(body, default=str).encode("utf-8")
    headers = [("Accept", "application/json"), ("User-Agent", user_agent)]
    if body is not None:
        headers.append(("Content-Type", "application/json"))
    event = build_event(
        method=method,
        raw_path=raw_path,
        headers=headers,
        body=data,
        routes=routes,
        account_id=account_id,
        now=now,
    )
    if event is None:
        return {"httpMethod": method, "path": path}
    if identity is not None:
        event["requestContext"]["identity"] |= caller_identity(identity, account_id)
    return event
