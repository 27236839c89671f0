"""A local HTTP API on 127.0.0.1 serving the template's ``Api`` events, like ``sam local start-api``.

Each HTTP request becomes the API Gateway REST proxy event (payload format 1.0) that API Gateway would
send: ``resource``, ``path``, ``httpMethod``, ``headers``/``multiValueHeaders``,
``queryStringParameters``/``multiValueQueryStringParameters``, ``pathParameters``, ``stageVariables``,
``requestContext`` (``resourcePath``, ``httpMethod``, ``path`` with the stage, ``stage``, ``requestId``,
``requestTimeEpoch``, ``identity.sourceIp``...), ``body`` (base64 with ``isBase64Encoded`` when it is not
UTF-8 text) - see "Set up a proxy integration with a proxy resource" in the API Gateway developer guide.
The function's proxy response becomes the HTTP response. Paths may carry the stage (``/Prod/items``) or
not (``/items``), as with ``sam local start-api``.

The server thread is ignored by the virtual clock; each request is served on its own short-lived thread
(HTTP/1.0, one request per connection), which the clock sees as busy until it answers.
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from localcloud.template import ApiRoute


def build_event(
    *,
    method: str,
    raw_path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    routes: list[ApiRoute],
    account_id: str,
    now: datetime,
    source_ip: str = "127.0.0.1",
) -> dict[str, Any] | None:
    """The API Gateway REST proxy event for one HTTP request, or None if no route serves it.

    ``raw_path`` may include a query string and a leading stage name (``/Prod/items?x=1``).
    """
    split = urlsplit(raw_path)
    path = split.path or "/"
    stages = {route.stage for route in routes}
    first = path.strip("/").split("/", 1)[0]
    if first in stages:
        path = "/" + path.strip("/").split("/", 1)[1] if "/" in path.strip("/") else "/"
    route: ApiRoute | None = None
    path_parameters: dict[str, str] | None = None
    for candidate in routes:
        found = candidate.matches(method, path)
        if found is not None:
            route, path_parameters = candidate, found
            if candidate.method != "ANY":
                break
    if route is None:
        return None
    query = parse_qsl(split.query, keep_blank_values=True)
    multi_query: dict[str, list[str]] = {}
    for key, value in query:
        multi_query.setdefault(key, []).append(value)
    multi_headers: dict[str, list[str]] = {}
    for key, value in headers:
        multi_headers.setdefault(key, []).append(value)
    try:
        text: str | None = body.decode("utf-8") if body else None
        encoded = False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    epoch_ms = int(now.timestamp() * 1000)
    return {
        "resource": route.path,
        "path": path,
        "httpMethod": method,
        "headers": {key: values[-1] for key, values in multi_headers.items()} or None,
        "multiValueHeaders": multi_headers or None,
        "queryStringParameters": {key: values[-1] for key, values in multi_query.items()} or None,
        "multiValueQueryStringParameters": multi_query or None,
        "pathParameters": path_parameters or None,
        "stageVariables": None,
        "requestContext": {
            "resourceId": route.api_id[:6],
            "resourcePath": route.path,
            "httpMethod": method,
            "extendedRequestId": str(uuid.uuid4()),
            "requestTime": now.astimezone(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000"),
            "path": f"/{route.stage}{path}",
            "accountId": account_id,
            "protocol": "HTTP/1.1",
            "stage": route.stage,
            "domainPrefix": route.api_id,
            "requestTimeEpoch": epoch_ms,
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": source_ip, "userAgent": dict(headers).get("User-Agent")},
            "domainName": f"{route.api_id}.execute-api.localhost",
            "apiId": route.api_id,
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


Serve = Callable[[dict[str, Any]], dict[str, Any]]


class _Handler(BaseHTTPRequestHandler):
    server: LocalApiServer
    protocol_version = "HTTP/1.0"

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        event = build_event(
            method=self.command,
            raw_path=self.path,
            headers=list(self.headers.items()),
            body=body,
            routes=self.server.routes,
            account_id=self.server.account_id,
            now=self.server.now(),
            source_ip=self.client_address[0],
        )
        if event is None:
            self._send(
                403, {"Content-Type": "application/json"}, b'{"message":"Missing Authentication Token"}'
            )
            return
        response = self.server.serve(event)
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else str(payload).encode("utf-8")
        headers: dict[str, str] = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        self._send(
            int(response.get("statusCode", 502)), headers, data, response.get("multiValueHeaders") or {}
        )

    def _send(
        self, status: int, headers: dict[str, str], data: bytes, multi: dict[str, list[str]] | None = None
    ) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        for key, values in (multi or {}).items():
            for value in values:
                self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _serve  # noqa: N815

    def __getattr__(self, name: str) -> Any:
        # Any other method (TRACE, QUERY...): like API Gateway, no route -> 403, never the stdlib's 501.
        if name.startswith("do_"):
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.log is not None:
            self.server.log(f"{self.address_string()} {format % args}")


class LocalApiServer(ThreadingHTTPServer):
    """The HTTP server (``serve`` answers a proxy event with a proxy response; ``LocalCloud.api_request``)."""

    daemon_threads = True

    def __init__(
        self,
        *,
        port: int,
        routes: list[ApiRoute],
        serve: Serve,
        account_id: str,
        now: Callable[[], datetime],
        log: Callable[[str], None] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__((host, port), _Handler)
        self.routes = routes
        self.serve = serve
        self.account_id = account_id
        self.now = now
        self.log = log
        self.thread: threading.Thread | None = None

    def start(self) -> threading.Thread:
        """Serve on a daemon thread; returns it (so the clock can ignore it)."""
        self.thread = threading.Thread(target=self.serve_forever, name="localcloud-http", daemon=True)
        self.thread.start()
        return self.thread

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.shutdown()
        self.server_close()


def describe_routes(routes: list[ApiRoute], port: int) -> str:
    """One line per route, as ``sam local start-api`` lists them."""
    return "\n".join(
        f"  {route.method:<6} http://127.0.0.1:{port}{route.path}  -> {route.function}"
        + (f" (auth {route.auth}: not checked locally)" if route.auth and route.auth != "NONE" else "")
        for route in sorted(routes, key=lambda r: (r.path, r.method))
    )


def response_summary(response: dict[str, Any]) -> str:
    """``202 {"request_id": ...}`` for logs."""
    body = response.get("body") or ""
    text = " ".join(body.split())  # one line, as it arrived
    text = text if len(text) < 200 else text[:197] + "..."
    return f"{response.get('statusCode')} {text}"
