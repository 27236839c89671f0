"""A local HTTP API on 127.0.0.1 serving the template's ``Api`` events, like ``sam local start-api``.

Over 400 lines: one translation (an HTTP request to API Gateway's proxy event, the answer back) with the
authorization it applies first.

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

With a :class:`SigV4Verifier` (``serve --sigv4``) the routes whose authorizer is ``AWS_IAM`` check the
request's Signature Version 4 as API Gateway does: the signature is recomputed with botocore's own
:class:`~botocore.auth.SigV4Auth` from the request as received and the caller's secret key, the request time
must be within 5 minutes of the server's clock, and the caller's identity (``userArn``, ``accountId``,
``accessKey``...) goes into ``requestContext.identity``. A refusal is API Gateway's 403 with its message and
``x-amzn-ErrorType``. The callers are the ``ApiCallers`` of ``local_values.json`` (access key id -> secret
key and principal ARN); the callers' ``execute-api:Invoke`` is evaluated by ``LocalCloud.api_request``.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

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


@dataclass(frozen=True)
class ApiCaller:
    """A principal that may call the local API with SigV4: its access key, secret key and principal ARN."""

    access_key_id: str
    secret_access_key: str
    arn: str


class SignatureRejected(Exception):  # noqa: N818 - API Gateway's own word for it is the error type
    """API Gateway refused the signature: ``message`` and ``error_type`` as it answers them (403)."""

    def __init__(self, message: str, error_type: str) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type


_AUTHORIZATION = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<credential>[^,\s]+),\s*SignedHeaders=(?P<signed>[^,\s]+),"
    r"\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
_MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your AWS Secret "
    "Access Key and signing method. Consult the service documentation for details."
)
_INCOMPLETE = (
    "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' "
    "parameter. Authorization header requires 'SignedHeaders' parameter."
)


def api_callers(values: Mapping[str, Any]) -> dict[str, ApiCaller]:
    """``local_values.json``'s ``ApiCallers``: ``{access key id: {"SecretAccessKey", "Arn"}}`` (keys starting
    with ``_`` are comments), in file order.

    Raises:
        ValueError: the section is missing or an entry lacks its secret key or ARN.
    """
    section = values.get("ApiCallers")
    if not isinstance(section, Mapping) or not section:
        raise ValueError("local_values.json has no ApiCallers: nobody could sign a request")
    callers = {}
    for key, entry in section.items():
        if str(key).startswith("_"):  # a comment
            continue
        if not isinstance(entry, Mapping) or not entry.get("SecretAccessKey") or not entry.get("Arn"):
            raise ValueError(f"ApiCallers[{key!r}] needs SecretAccessKey and Arn")
        callers[str(key)] = ApiCaller(str(key), str(entry["SecretAccessKey"]), str(entry["Arn"]))
    return callers


CALLER_HEADER = "X-Localcloud-Caller"
"""Without ``--sigv4``: the IAM principal ARN an unsigned request is attributed to (default: the first of
``ApiCallers``), as ``curl -H 'X-Localcloud-Caller: arn:...'`` when an approver approves."""


class SigV4Verifier:
    """Checks Signature Version 4 as API Gateway's ``AWS_IAM`` authorizer does (see the module docstring).

    Args:
        callers: by access key id.
        region: the API's region (the credential scope must name it and ``execute-api``).
        now: the clock the request time is checked against (``serve``: the real one, as the client's).
        skew: how far the request time may be from ``now`` (API Gateway: 5 minutes).
    """

    service = "execute-api"

    def __init__(
        self,
        callers: Mapping[str, ApiCaller],
        *,
        region: str,
        now: Callable[[], datetime],
        skew: timedelta = timedelta(minutes=5),
    ) -> None:
        self.callers = dict(callers)
        self.region = region
        self.now = now
        self.skew = skew

    @classmethod
    def from_local_values(
        cls, values: Mapping[str, Any], *, region: str, now: Callable[[], datetime]
    ) -> SigV4Verifier:
        """From ``local_values.json``'s ``ApiCallers``: ``{access key id: {"SecretAccessKey", "Arn"}}`` (keys
        starting with ``_`` are comments).

        Raises:
            ValueError: the section is missing or an entry lacks its secret key or ARN.
        """
        return cls(api_callers(values), region=region, now=now)

    def verify(self, *, method: str, raw_path: str, headers: list[tuple[str, str]], body: bytes) -> ApiCaller:
        """The caller who signed this request.

        Raises:
            SignatureRejected: unsigned (``Missing Authentication Token``), malformed, an unknown access key,
                the wrong scope, a time more than ``skew`` away, or a signature that does not match.
        """
        by_name: dict[str, list[str]] = {}
        for name, value in headers:
            by_name.setdefault(name.lower(), []).append(value)
        authorization = (by_name.get("authorization") or [""])[-1].strip()
        if not authorization:
            raise SignatureRejected("Missing Authentication Token", "MissingAuthenticationTokenException")
        match = _AUTHORIZATION.match(authorization)
        if match is None:
            raise SignatureRejected(_INCOMPLETE, "IncompleteSignatureException")
        access_key, _, scope = match["credential"].partition("/")
        caller = self.callers.get(access_key)
        if caller is None:
            raise SignatureRejected(
                "The security token included in the request is invalid.", "UnrecognizedClientException"
            )
        stamp = (by_name.get("x-amz-date") or [""])[-1]
        try:
            signed_at = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError as exc:
            message = "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header."
            raise SignatureRejected(message, "IncompleteSignatureException") from exc
        date, region, service, terminal = [*scope.split("/"), "", "", ""][:4]
        if date != stamp[:8] or terminal != "aws4_request":
            raise SignatureRejected(
                f"Credential should be scoped to a valid date: {scope}", "InvalidSignatureException"
            )
        if region != self.region:
            message = f"Credential should be scoped to a valid region, not '{region}'. "
            raise SignatureRejected(message, "InvalidSignatureException")
        if service != self.service:
            message = f"Credential should be scoped to correct service: '{self.service}'. "
            raise SignatureRejected(message, "InvalidSignatureException")
        self._check_time(signed_at)
        signed = match["signed"].split(";")
        missing = [name for name in signed if name not in by_name]
        if "host" not in signed or missing:
            raise SignatureRejected(_MISMATCH, "InvalidSignatureException")
        request = AWSRequest(
            method=method,
            url=f"http://{by_name['host'][-1]}{raw_path}",
            data=body,
            headers={name: ",".join(by_name[name]) for name in signed},
        )
        request.context["timestamp"] = stamp
        signer = SigV4Auth(
            ReadOnlyCredentials(caller.access_key_id, caller.secret_access_key, None), service, region
        )
        expected = signer.signature(
            signer.string_to_sign(request, signer.canonical_request(request)), request
        )
        if not hmac.compare_digest(expected, match["signature"]):
            raise SignatureRejected(_MISMATCH, "InvalidSignatureException")
        return caller

    def _check_time(self, signed_at: datetime) -> None:
        now = self.now().astimezone(UTC)
        fmt = "%Y%m%dT%H%M%SZ"
        minutes = int(self.skew.total_seconds() // 60)
        if signed_at < now - self.skew:
            raise SignatureRejected(
                f"Signature expired: {signed_at:{fmt}} is now earlier than {now - self.skew:{fmt}} "
                f"({now:{fmt}} - {minutes} min.)",
                "InvalidSignatureException",
            )
        if signed_at > now + self.skew:
            raise SignatureRejected(
                f"Signature not yet current: {signed_at:{fmt}} is still later than {now + self.skew:{fmt}} "
                f"({now:{fmt}} + {minutes} min.)",
                "InvalidSignatureException",
            )


def signed_identity(caller: ApiCaller, account_id: str) -> dict[str, Any]:
    """``requestContext.identity`` fields API Gateway adds for a caller it authenticated with SigV4."""
    session = caller.arn.rsplit("/", 1)[-1]
    return {
        "accountId": caller.arn.split(":")[4] or account_id,
        "accessKey": caller.access_key_id,
        "caller": f"AROALOCALCALLER:{session}",
        "user": f"AROALOCALCALLER:{session}",
        "userArn": caller.arn,
    }


class _Handler(BaseHTTPRequestHandler):
    server: LocalApiServer
    protocol_version = "HTTP/1.0"

    def _serve(self) -> None:
        if self.server.on_request is not None:
            self.server.on_request()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = list(self.headers.items())
        if self.server.slack_clock is not None:
            headers = self.server.slack_clock.translate(headers, body)
        event = build_event(
            method=self.command,
            raw_path=self.path,
            headers=headers,
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
        verifier = self.server.verifier
        route = next((r for r in self.server.routes if r.path == event["resource"]), None)
        if verifier is not None and route is not None and route.auth == "AWS_IAM":
            try:
                caller = verifier.verify(
                    method=self.command, raw_path=self.path, headers=list(self.headers.items()), body=body
                )
            except SignatureRejected as exc:
                refusal = {"Content-Type": "application/json", "x-amzn-ErrorType": exc.error_type}
                self._send(403, refusal, json.dumps({"message": exc.message}).encode("utf-8"))
                return
            event["requestContext"]["identity"] |= signed_identity(caller, self.server.account_id)
        elif route is not None and route.auth == "AWS_IAM" and self.server.unsigned_caller is not None:
            # Not checked locally, yet API Gateway never runs an AWS_IAM route without a caller: the named one
            named = self.headers.get(CALLER_HEADER)
            caller = self.server.unsigned_caller
            if named:
                caller = ApiCaller(caller.access_key_id, "", named.strip())
            event["requestContext"]["identity"] |= signed_identity(caller, self.server.account_id)
        response = self.server.serve(event)
        payload = response.get("body") or ""
        data = base64.b64decode(payload) if response.get("isBase64Encoded") else str(payload).encode("utf-8")
        answer: dict[str, str] = {str(k): str(v) for k, v in (response.get("headers") or {}).items()}
        self._send(
            int(response.get("statusCode", 502)), answer, data, response.get("multiValueHeaders") or {}
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


class SlackTranslator(Protocol):
    """Moves a Slack request's signed timestamp onto the simulation's clock
    (:class:`localcloud.serving.SlackClock`)."""

    def translate(self, headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]: ...


class LocalApiServer(ThreadingHTTPServer):
    """The HTTP server (``serve`` answers a proxy event with a proxy response; ``LocalCloud.api_request``);
    with ``verifier``, ``AWS_IAM`` routes check SigV4 (see the module docstring); without it, an
    ``AWS_IAM`` route's unsigned request is attributed to ``unsigned_caller`` (or the ARN in the
    :data:`CALLER_HEADER` header); with ``slack_clock``, Slack's signed timestamps are moved onto virtual
    time first; ``on_request`` is called as each request arrives, routed or not (``serve`` starts its clock
    on the first)."""

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
        verifier: SigV4Verifier | None = None,
        slack_clock: SlackTranslator | None = None,
        unsigned_caller: ApiCaller | None = None,
        on_request: Callable[[], None] | None = None,
    ) -> None:
        super().__init__((host, port), _Handler)
        self.on_request = on_request
        self.unsigned_caller = unsigned_caller
        self.slack_clock = slack_clock
        self.routes = routes
        self.serve = serve
        self.account_id = account_id
        self.now = now
        self.log = log
        self.verifier = verifier
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


def describe_routes(routes: list[ApiRoute], port: int, *, sigv4: bool = False) -> str:
    """One line per route, as ``sam local start-api`` lists them."""
    checked = (
        ": SigV4 checked"
        if sigv4
        else f": not checked locally, the caller is {CALLER_HEADER} or the first ApiCallers"
    )
    return "\n".join(
        f"  {route.method:<6} http://127.0.0.1:{port}{route.path}  -> {route.function}"
        + (f" (auth {route.auth}{checked})" if route.auth and route.auth != "NONE" else "")
        for route in sorted(routes, key=lambda r: (r.path, r.method))
    )


def response_summary(response: dict[str, Any]) -> str:
    """``202 {"request_id": ...}`` for logs."""
    body = response.get("body") or ""
    text = " ".join(body.split())  # one line, as it arrived
    text = text if len(text) < 200 else text[:197] + "..."
    return f"{response.get('statusCode')} {text}"
