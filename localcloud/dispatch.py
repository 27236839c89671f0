"""One entry point for every AWS call made in the process: the local cloud's request dispatcher.
Kept whole: one pipeline per request (parse, draw faults, route, serialize, tell listeners), read in order.

moto hooks botocore with a ``before-send`` handler (``moto.core.botocore_stubber.BotocoreStubber``) that
every client sees; while the local cloud runs, :class:`Dispatcher` wraps that handler, so it sees each
request after botocore has serialized and signed it and before anything would go on the wire
(``event_name`` is ``before-send.<service-id>.<Operation>``). For each request it:

1. parses the wire request back into API parameters with moto's request parsers
   (``moto.core.parse.PROTOCOL_PARSERS``) against botocore's service model;
2. draws faults (:class:`localcloud.faults.FaultInjector`): ``latency`` sleeps on the virtual clock (up to
   the client's read timeout: a slower answer is a ``botocore.exceptions.ReadTimeoutError`` there, the call
   having taken effect), ``throttle`` and ``server_error`` answer the service's error without running the
   call, ``hang`` waits the client's read timeout and raises ``ReadTimeoutError`` without running it,
   ``crash_after_commit`` runs the call, waits the read timeout and raises ``ReadTimeoutError``,
   ``kill_caller`` runs the call and then stops the Lambda invocation that made it;
   ``insufficient_capacity``/``stuck`` are handed to the emulator;
3. routes the call: ``lambda:Invoke``/``InvokeAsync`` of a template function to the in-process
   :class:`~localcloud.lambdas.LambdaRuntime`; operations the AWS emulator handles to
   ``emulator.call(...)``; everything else to moto, unchanged;
4. serializes emulator and Lambda answers with moto's response serializers into an
   ``AWSResponse``, so botocore parses them exactly as a real response (only output-shape members
   survive) and botocore's own retry mode sees the errors;
5. tells listeners registered with :meth:`Dispatcher.on` (EventBridge delivery listens to
   ``eventbridge.PutEvents``), with the parameters and the parsed response.

A call made from inside a Lambda invocation is also where concurrent invocations interleave: the runtime
hands its CPU to another ready invocation first (:meth:`LambdaRuntime.yield_now`), and refuses the call
of an invocation already stopped at its timeout.

Service names are botocore's hyphenated service ids, as in the event name: ``sagemaker``,
``sagemaker-runtime``, ``ec2``, ``application-auto-scaling``, ``cloudwatch``, ``lambda``,
``eventbridge``, ``sfn``, ``scheduler``, ``dynamodb``...
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from io import BytesIO
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlsplit
from xml.sax.saxutils import escape

import botocore.session
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ReadTimeoutError
from botocore.model import OperationModel, ServiceModel
from botocore.parsers import create_parser
from moto.core.botocore_stubber import BotocoreStubber
from moto.core.model import ServiceModel as MotoServiceModel
from moto.core.parse import PROTOCOL_PARSERS
from moto.core.serialize import get_serializer_class
from werkzeug.datastructures import Headers, MultiDict

from localcloud.clock import VirtualClock
from localcloud.contracts import AwsError
from localcloud.faults import EMULATOR_KINDS, FaultInjector, FaultKind, FaultRule
from localcloud.lambdas import InvokeResult, LambdaRuntime


class StrayThreadError(BaseException):
    """A thread of a cloud that already stopped made an AWS call: it must not act on this one (moto's
    state is process-global). A ``BaseException``, so the stray handler's ``except Exception`` cannot
    swallow it and carry on."""


class Authorizer(Protocol):
    """What the dispatcher needs from IAM evaluation (``localcloud.iam.Iam``)."""

    def authorize(
        self, service: str, operation: str, params: Callable[[], dict[str, Any]], region: str
    ) -> AwsError | None:
        """None if the calling thread's principal may make the call (or is not evaluated), else the denial."""
        ...


class EmulatorLike(Protocol):
    """What the dispatcher needs from the AWS emulator (``localcloud.emulator.Emulator``)."""

    def handles(self, service: str, operation: str) -> bool:
        """True if the emulator answers ``service`` (hyphenated service id) ``operation``."""
        ...

    def call(
        self,
        service: str,
        operation: str,
        params: dict[str, Any],
        *,
        region: str,
        faults: list[FaultRule],
    ) -> dict[str, Any]:
        """Run the operation; returns its output (datetimes allowed) or raises ``AwsError``."""
        ...


@dataclass
class CallRecord:
    """One AWS call seen by the dispatcher.

    Attributes:
        at: virtual UTC time of the call.
        service: hyphenated service id (``sagemaker``).
        operation: API operation name (``CreateTrainingPlan``).
        region: the region the client targets.
        route: ``emulator``, ``lambda`` or ``moto``.
        params: the API parameters (parsed back from the wire; empty if not needed and not parsed).
        faults: fault kinds that fired on the call.
        status: the HTTP status answered (None when a fault raised instead).
        error_code: the AWS error code answered, if any.
        response: the parsed response (output-shape members; for listeners), or None.
        caller: the function whose invocation made the call, or None (the local cloud's own machinery,
            a state machine, a test).
    """

    at: datetime
    service: str
    operation: str
    region: str
    route: str
    params: dict[str, Any]
    faults: list[FaultKind] = field(default_factory=list)
    status: int | None = None
    error_code: str | None = None
    response: dict[str, Any] | None = None
    timed_out: bool = False
    caller: str | None = None


Listener = Callable[[CallRecord], None]

# botocore service id (hyphenated) -> botocore service name, for the services the project uses.
_SERVICE_NAMES: dict[str, str] = {
    "sagemaker": "sagemaker",
    "sagemaker-runtime": "sagemaker-runtime",
    "ec2": "ec2",
    "application-auto-scaling": "application-autoscaling",
    "cloudwatch": "cloudwatch",
    "lambda": "lambda",
    "eventbridge": "events",
    "sfn": "stepfunctions",
    "scheduler": "scheduler",
    "dynamodb": "dynamodb",
    "sns": "sns",
    "s3": "s3",
    "ssm": "ssm",
    "secrets-manager": "secretsmanager",
    "iam": "iam",
    "sts": "sts",
    "cloudwatch-logs": "logs",
    "sqs": "sqs",
}

# The error each service answers when it throttles (code, message, HTTP status).
_THROTTLE: dict[str, tuple[str, str, int]] = {
    "ec2": ("RequestLimitExceeded", "Request limit exceeded.", 503),
    "cloudwatch": ("Throttling", "Rate exceeded", 400),
    "iam": ("Throttling", "Rate exceeded", 400),
    "sns": ("Throttling", "Rate exceeded", 400),
    "lambda": ("TooManyRequestsException", "Rate Exceeded.", 429),
    "s3": ("SlowDown", "Please reduce your request rate.", 503),
    "dynamodb": (
        "ThrottlingException",
        "Throughput exceeds the current capacity for one or more global secondary indexes.",
        400,
    ),
}
_THROTTLE_DEFAULT = ("ThrottlingException", "Rate exceeded", 400)
_SERVER_ERROR: dict[str, tuple[str, str, int]] = {
    "ec2": ("InternalError", "An internal error has occurred.", 500),
    "s3": ("InternalError", "We encountered an internal error. Please try again.", 500),
}
_SERVER_ERROR_DEFAULT = (
    "InternalFailure",
    "The request processing has failed because of an unknown error, exception or failure.",
    500,
)

_CREDENTIAL_SCOPE = re.compile(r"Credential=[^/,]+/\d{8}/([a-z0-9-]+)/")
_HOST_REGION = re.compile(r"\.([a-z]{2}(?:-gov)?-[a-z]+-\d)\.amazonaws\.com")


class _RawBody(BytesIO):
    """The raw body botocore reads from an ``AWSResponse`` (``stream()`` and ``read()``)."""

    def stream(self, **_: Any) -> Iterator[bytes]:
        data = self.read()
        if data:
            yield data


class _Models:
    """botocore and moto models for a service id, loaded once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._session = botocore.session.get_session()
        self._service: dict[str, ServiceModel] = {}
        self._moto_ops: dict[tuple[str, str], Any] = {}
        self._uri: dict[tuple[str, str], tuple[re.Pattern[str], set[str]]] = {}

    def service(self, service_id: str) -> ServiceModel:
        with self._lock:
            model = self._service.get(service_id)
            if model is None:
                model = self._session.get_service_model(self._service_name(service_id))
                self._service[service_id] = model
            return model

    def _service_name(self, service_id: str) -> str:
        name = _SERVICE_NAMES.get(service_id)
        if name is not None:
            return name
        for candidate in self._session.get_available_services():
            model = self._session.get_service_model(candidate)
            if model.service_id.hyphenize() == service_id:
                _SERVICE_NAMES[service_id] = str(candidate)
                return str(candidate)
        raise KeyError(f"no botocore service with id {service_id!r}")

    def moto_operation(self, service_id: str, operation: str) -> Any:
        key = (service_id, operation)
        with self._lock:
            cached = self._moto_ops.get(key)
        if cached is not None:
            return cached
        botocore_model = self.service(service_id)
        description = botocore_model._service_description  # type: ignore[attr-defined]
        moto_model = MotoServiceModel(description, botocore_model.service_name)
        op_model = moto_model.operation_model(operation)
        with self._lock:
            self._moto_ops[key] = op_model
        return op_model

    def uri_pattern(self, service_id: str, operation: str) -> tuple[re.Pattern[str], set[str]]:
        """A regex for the operation's ``requestUri`` path (``{Name}`` and greedy ``{Name+}`` labels)."""
        key = (service_id, operation)
        with self._lock:
            cached = self._uri.get(key)
        if cached is not None:
            return cached
        op_model = self.service(service_id).operation_model(operation)
        template = op_model.http.get("requestUri", "/").split("?", 1)[0]
        labels: set[str] = set()
        regex = ""
        for piece in re.split(r"(\{[^}]+\})", template):
            if piece.startswith("{") and piece.endswith("}"):
                name = piece[1:-1]
                greedy = name.endswith("+")
                name = name.rstrip("+")
                labels.add(name)
                regex += f"(?P<{re.sub(r'\W', '_', name)}>{'.+' if greedy else '[^/]+'})"
            else:
                regex += re.escape(piece)
        compiled = re.compile(f"^{regex}/?$")
        with self._lock:
            self._uri[key] = (compiled, labels)
        return compiled, labels


_MODELS = _Models()


class Dispatcher:
    """Routes every botocore request of the process (see the module docstring).

    Args:
        clock: the virtual clock (latency faults, activity marks, call times).
        lambdas: the in-process Lambda runtime (None: ``lambda:Invoke`` goes to moto).
        emulator: the AWS emulator (None: nothing is emulated).
        faults: the fault injector (None: no faults).
        authorizer: IAM evaluation (None: every call is allowed), consulted before faults and routing.

    Attributes:
        calls: every call seen, in order.
        counts: number of calls per ``"<service>.<Operation>"``.
    """

    def __init__(
        self,
        *,
        clock: VirtualClock,
        lambdas: LambdaRuntime | None = None,
        emulator: EmulatorLike | None = None,
        faults: FaultInjector | None = None,
        authorizer: Authorizer | None = None,
    ) -> None:
        self.clock = clock
        self.authorizer = authorizer
        self.lambdas = lambdas
        self.emulator = emulator
        self.faults = faults
        self.calls: list[CallRecord] = []
        self.counts: Counter[str] = Counter()
        self._listeners: dict[tuple[str, str], list[Listener]] = {}
        self._local = threading.local()
        self._lock = threading.Lock()
        self._request_ids = itertools.count(1)
        self._conflicts = 0
        self._original: Callable[..., AWSResponse | None] | None = None
        self._strays: weakref.WeakSet[threading.Thread] = weakref.WeakSet()

    # -- wiring ----------------------------------------------------------------------------------------

    def install(self) -> None:
        """Wrap moto's ``BotocoreStubber.__call__`` so this dispatcher sees every request.

        Raises:
            RuntimeError: another dispatcher is installed.
        """
        current = BotocoreStubber.__call__
        if getattr(current, "_localcloud_dispatcher", None) is not None:
            raise RuntimeError("a local cloud dispatcher is already installed")
        self._original = current
        # Threads alive now, other than the caller, belong to no simulation of this cloud.
        me = threading.current_thread()
        self._strays = weakref.WeakSet(thread for thread in threading.enumerate() if thread is not me)
        dispatcher = self

        def dispatch(stubber: Any, event_name: str, request: AWSPreparedRequest, **kwargs: Any) -> Any:
            return dispatcher._dispatch(stubber, event_name, request, **kwargs)

        dispatch._localcloud_dispatcher = self  # type: ignore[attr-defined]
        BotocoreStubber.__call__ = dispatch  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        """Put moto's handler back."""
        if self._original is not None:
            BotocoreStubber.__call__ = self._original  # type: ignore[method-assign]
            self._original = None

    @property
    def may_inject(self) -> bool:
        """True when fault rules are configured (a call may draw a fault); False: every call runs clean."""
        return _has_rules(self.faults)

    def record_calls(self, records: list[CallRecord]) -> None:
        """Add calls made elsewhere to the books (a deploy put back from a snapshot: its calls as made)."""
        with self._lock:
            self.calls.extend(records)
            self.counts.update(f"{record.service}.{record.operation}" for record in records)

    def on(self, service: str, operation: str, listener: Listener) -> None:
        """Call ``listener(record)`` after each successful ``service`` ``operation`` (in the caller's thread).

        ``record.params`` holds the request parameters and ``record.response`` the parsed response.
        """
        self._listeners.setdefault((service, operation), []).append(listener)

    @contextmanager
    def exempt(self) -> Iterator[None]:
        """Calls made by the calling thread inside this block get no faults (the cloud's own machinery)."""
        previous = getattr(self._local, "exempt", False)
        self._local.exempt = True
        try:
            yield
        finally:
            self._local.exempt = previous

    # -- the handler -----------------------------------------------------------------------------------

    def _dispatch(self, stubber: Any, event_name: str, request: AWSPreparedRequest, **kwargs: Any) -> Any:
        _, service, operation = event_name.split(".", 2)
        if threading.current_thread() in self._strays:
            raise StrayThreadError(
                f"{threading.current_thread().name} outlived the local cloud it ran in and called "
                f"{service}.{operation}"
            )
        if self.lambdas is not None:
            self.lambdas.yield_now()
        self.clock.touch()
        try:
            return self._handle(stubber, event_name, service, operation, request, **kwargs)
        finally:
            self.clock.touch()

    def _handle(
        self,
        stubber: Any,
        event_name: str,
        service: str,
        operation: str,
        request: AWSPreparedRequest,
        **kwargs: Any,
    ) -> Any:
        route = self._route(service, operation, request)
        listeners = self._listeners.get((service, operation), [])
        injecting = _has_rules(self.faults) and not getattr(self._local, "exempt", False)
        params: dict[str, Any] = {}
        if route != "moto":
            params = self._parse(service, operation, request)
        elif listeners or injecting:
            try:
                params = self._parse(service, operation, request)
            except Exception:  # a request moto parses its own way (S3 streaming bodies...) still goes there
                params = {}
        record = CallRecord(self.clock.now(), service, operation, _region_of(request), route, params)
        function = self.lambdas.current_function() if self.lambdas is not None else None
        record.caller = None if function is None else function.name
        with self._lock:
            self.calls.append(record)
            self.counts[f"{service}.{operation}"] += 1
        denied = self._authorize(record, request)
        if denied is not None:
            return denied

        fired = (
            self.faults.draw(service, operation, params, from_lambda=record.caller is not None)
            if self.faults is not None and injecting
            else []
        )
        record.faults = [rule.kind for rule in fired]
        refused = self._wire_faults(record, request, fired)
        if refused is not None:
            return refused

        response: AWSResponse | None
        if route == "lambda":
            response = self._invoke_lambda(record, request)
        elif route == "emulator":
            response = self._call_emulator(record, request, [r for r in fired if r.kind in EMULATOR_KINDS])
        else:
            response = self._call_moto(record, stubber, event_name, request, parse=bool(listeners), **kwargs)

        if listeners and record.status is not None and record.status < 300:
            for listener in listeners:
                listener(record)
        self._after_effect(record, request)
        return response

    def _after_effect(self, record: CallRecord, request: AWSPreparedRequest) -> None:
        """The faults that strike once the call took effect: the caller dies, or never hears back.

        Raises:
            SandboxTimedOut: ``kill_caller`` (the invocation that made the call dies here).
            ReadTimeoutError: ``crash_after_commit`` or a latency past the read timeout (botocore retries it,
                as on AWS).
        """
        if FaultKind.KILL_CALLER in record.faults and self.lambdas is not None:
            self.lambdas.stop_caller()
        if FaultKind.CRASH_AFTER_COMMIT in record.faults or record.timed_out:
            if not record.timed_out:
                self.clock.sleep(_read_timeout(request))
            raise ReadTimeoutError(endpoint_url=request.url)

    def _authorize(self, record: CallRecord, request: AWSPreparedRequest) -> AWSResponse | None:
        """IAM's answer for the call: None if allowed, else the service's denial error response."""
        if self.authorizer is None:
            return None

        def params() -> dict[str, Any]:
            if not record.params and record.route == "moto":
                record.params = self._parse(record.service, record.operation, request)
            return record.params

        error = self.authorizer.authorize(record.service, record.operation, params, record.region)
        return None if error is None else self._error_response(record, request, error)

    def _wire_faults(
        self, record: CallRecord, request: AWSPreparedRequest, fired: list[FaultRule]
    ) -> AWSResponse | None:
        """Apply latency and hangs; answer a throttling or server error instead of running the call.

        Raises:
            ReadTimeoutError: a ``hang`` (after the client's read timeout; the call did not happen).
        """
        read_timeout = _read_timeout(request)
        if FaultKind.HANG in record.faults:
            self.clock.sleep(read_timeout)
            raise ReadTimeoutError(endpoint_url=request.url)
        latency = sum(rule.latency_seconds for rule in fired if rule.kind is FaultKind.LATENCY)
        if latency >= read_timeout:
            # The caller gives up at its read timeout; the service still does the work.
            self.clock.sleep(read_timeout)
            record.timed_out = True
        elif latency > 0:
            self.clock.sleep(latency)
        if FaultKind.THROTTLE in record.faults:
            error = AwsError(*_THROTTLE.get(record.service, _THROTTLE_DEFAULT))
            return self._error_response(record, request, error)
        if FaultKind.SERVER_ERROR in record.faults:
            error = AwsError(*_SERVER_ERROR.get(record.service, _SERVER_ERROR_DEFAULT))
            return self._error_response(record, request, error)
        if FaultKind.TRANSACTION_CONFLICT in record.faults:
            conflict = self._transaction_conflict(record)
            if conflict is not None:
                return self._error_response(record, request, conflict)
        return None

    def _transaction_conflict(self, record: CallRecord) -> AwsError | None:
        """DynamoDB's answer to a write that met another transaction on one of its items (AWS_FACTS.md,
        "Payments, listings, limits"), nothing written: a ``TransactWriteItems`` is cancelled
        (``TransactionCanceledException``, ``CancellationReasons`` ``TransactionConflict`` on one of its
        items, in turn, ``None`` on the others); a ``PutItem``, ``UpdateItem`` or ``DeleteItem`` is refused
        (``TransactionConflictException``). None for any other operation (the fault does nothing there)."""
        if record.service != "dynamodb":
            return None
        if record.operation in ("PutItem", "UpdateItem", "DeleteItem"):
            return AwsError(
                "TransactionConflictException",
                "Transaction is ongoing for the item",
            )
        if record.operation != "TransactWriteItems":
            return None
        count = len(record.params.get("TransactItems") or []) or 1
        with self._lock:
            self._conflicts += 1
            which = self._conflicts % count
        reasons = [
            {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"}
            if index == which
            else {"Code": "None"}
            for index in range(count)
        ]
        codes = ", ".join(str(reason["Code"]) for reason in reasons)
        return AwsError(
            "TransactionCanceledException",
            f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
            members={"CancellationReasons": reasons},
        )

    def _call_moto(
        self,
        record: CallRecord,
        stubber: Any,
        event_name: str,
        request: AWSPreparedRequest,
        *,
        parse: bool,
        **kwargs: Any,
    ) -> AWSResponse | None:
        if self._original is None:
            raise RuntimeError("the dispatcher is not installed")
        response: AWSResponse | None = self._original(stubber, event_name, request, **kwargs)
        if response is not None:
            record.status = response.status_code
            if parse:
                record.response = self._parse_response(record.service, record.operation, response)
                if record.status >= 300:
                    record.error_code = str(record.response.get("Error", {}).get("Code", "")) or None
        return response

    def _route(self, service: str, operation: str, request: AWSPreparedRequest) -> str:
        if service == "lambda" and operation in ("Invoke", "InvokeAsync") and self.lambdas is not None:
            # Every function lives in the runtime (none is created in moto): unknown names get Lambda's 404.
            return "lambda"
        if self.emulator is not None and self.emulator.handles(service, operation):
            return "emulator"
        return "moto"

    # -- routes ----------------------------------------------------------------------------------------

    def _invoke_lambda(self, record: CallRecord, request: AWSPreparedRequest) -> AWSResponse:
        if self.lambdas is None:
            raise RuntimeError("no Lambda runtime")
        params = record.params
        try:
            if record.operation == "InvokeAsync":
                body = params.get("InvokeArgs", b"")
                payload = body.read() if hasattr(body, "read") else _as_bytes(body)
                result = self.lambdas.invoke(params["FunctionName"], payload, invocation_type="Event")
                return self._ok_response(record, request, {"Status": 202})
            payload = _as_bytes(params.get("Payload", b""))
            invocation_type = str(params.get("InvocationType") or "RequestResponse")
            result = self.lambdas.invoke(
                params["FunctionName"],
                payload,
                invocation_type=invocation_type,
                client_context=params.get("ClientContext"),
            )
        except AwsError as error:
            return self._error_response(record, request, error)
        return self._ok_response(record, request, _invoke_output(result, params.get("LogType")))

    def _call_emulator(
        self, record: CallRecord, request: AWSPreparedRequest, faults: list[FaultRule]
    ) -> AWSResponse:
        if self.emulator is None:
            raise RuntimeError("no emulator")
        try:
            result = self.emulator.call(
                record.service, record.operation, record.params, region=record.region, faults=faults
            )
        except AwsError as error:
            return self._error_response(record, request, error)
        return self._ok_response(record, request, result)

    # -- wire helpers ----------------------------------------------------------------------------------

    def _parse(self, service: str, operation: str, request: AWSPreparedRequest) -> dict[str, Any]:
        """API parameters of a serialized request (moto's request parsers, botocore's model)."""
        model = _MODELS.service(service)
        protocol = model.resolved_protocol
        parser_class = PROTOCOL_PARSERS.get(protocol)
        if parser_class is None:
            return {}
        body = _body_bytes(request)
        split = urlsplit(request.url)
        values = parse_qsl(split.query, keep_blank_values=True)
        if protocol in ("query", "ec2"):
            values += parse_qsl(body.decode("utf-8"), keep_blank_values=True)
        url_params: dict[str, str] = {}
        if protocol.startswith("rest"):
            pattern, _ = _MODELS.uri_pattern(service, operation)
            match = pattern.match(split.path)
            if match is not None:
                op_model = model.operation_model(operation)
                members = op_model.input_shape.members if op_model.input_shape is not None else {}
                by_group = {re.sub(r"\W", "_", k): v for k, v in match.groupdict().items()}
                for member in members.values():
                    if member.serialization.get("location") == "uri":
                        label = member.serialization.get("name", member.name)
                        group = re.sub(r"\W", "_", label)
                        if group in by_group:
                            url_params[label] = unquote(by_group[group])
        request_dict: Any = {
            "body": body,
            "headers": Headers([(key, _text(value)) for key, value in request.headers.items()]),
            "method": request.method,
            "url_params": url_params,
            "url_path": split.path,
            "values": MultiDict(values),
        }
        parsed: dict[str, Any] = parser_class(_MODELS.moto_operation(service, operation)).parse(request_dict)
        return parsed

    def _ok_response(
        self, record: CallRecord, request: AWSPreparedRequest, result: dict[str, Any]
    ) -> AWSResponse:
        response = self._serialize(record, request, result)
        record.status = response.status_code
        if self._listeners.get((record.service, record.operation)):
            record.response = self._parse_response(record.service, record.operation, response)
        return response

    def _error_response(
        self, record: CallRecord, request: AWSPreparedRequest, error: AwsError
    ) -> AWSResponse:
        """An AWS error response in the service's protocol (the shapes botocore's parsers read)."""
        record.error_code = error.code
        record.status = error.status
        model = _MODELS.service(record.service)
        request_id = self._new_request_id()
        headers, body = _error_wire(model, error, request_id)
        headers["x-amzn-RequestId"] = request_id
        return AWSResponse(request.url, error.status, headers, _RawBody(body))  # type: ignore[arg-type]

    def _new_request_id(self) -> str:
        return f"00000000-0000-4000-8000-{next(self._request_ids):012d}"

    def _serialize(
        self, record: CallRecord, request: AWSPreparedRequest, result: dict[str, Any]
    ) -> AWSResponse:
        model = _MODELS.service(record.service)
        serializer_class = get_serializer_class(model.service_name, model.resolved_protocol)
        serialized = serializer_class(_MODELS.moto_operation(record.service, record.operation)).serialize(
            result
        )
        status = _modelled_status(record, result, int(serialized["status_code"]))
        body = serialized["body"]
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = {str(k): str(v) for k, v in serialized["headers"].items()}
        headers.setdefault("x-amzn-RequestId", self._new_request_id())
        return AWSResponse(request.url, status, headers, _RawBody(body))  # type: ignore[arg-type]

    @staticmethod
    def _parse_response(service: str, operation: str, response: AWSResponse) -> dict[str, Any]:
        """Parse a response as botocore will (for listeners)."""
        model = _MODELS.service(service)
        op_model: OperationModel = model.operation_model(operation)
        body = response.content
        response_dict = {
            "headers": response.headers,
            "status_code": response.status_code,
            "body": body,
        }
        if op_model.output_shape is None:
            return {}
        parsed: dict[str, Any] = create_parser(model.resolved_protocol).parse(
            response_dict, op_model.output_shape
        )
        return parsed


def _error_wire(model: ServiceModel, error: AwsError, request_id: str) -> tuple[dict[str, str], bytes]:
    """Headers and body of an error response, per protocol (as botocore.parsers reads them)."""
    protocol = model.resolved_protocol
    code, message = escape(error.code), escape(error.message)
    if protocol in ("json", "rest-json"):
        headers = {"Content-Type": "application/x-amz-json-1.1", "x-amzn-ErrorType": error.code}
        if "awsQueryCompatible" in model.metadata:
            fault = "Receiver" if error.status >= 500 else "Sender"
            headers["x-amzn-query-error"] = f"{error.code};{fault}"
        return headers, json.dumps({"__type": error.code, "message": error.message, **error.members}).encode(
            "utf-8"
        )
    if protocol == "ec2":
        body = (
            f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            f"<RequestID>{request_id}</RequestID></Response>"
        )
    elif protocol == "query":
        fault = "Receiver" if error.status >= 500 else "Sender"
        body = (
            f"<ErrorResponse><Error><Type>{fault}</Type><Code>{code}</Code><Message>{message}</Message></Error>"
            f"<RequestId>{request_id}</RequestId></ErrorResponse>"
        )
    else:
        body = f"<Error><Code>{code}</Code><Message>{message}</Message><RequestId>{request_id}</RequestId>"
        body += "</Error>"
    return {"Content-Type": "text/xml"}, ('<?xml version="1.0" encoding="UTF-8"?>' + body).encode("utf-8")


def _modelled_status(record: CallRecord, result: dict[str, Any], default: int) -> int:
    """The HTTP status carried by an output member bound to the status code (Invoke's ``StatusCode``)."""
    output = _MODELS.service(record.service).operation_model(record.operation).output_shape
    if output is None:
        return default
    for name, member in output.members.items():
        if member.serialization.get("location") == "statusCode" and isinstance(result.get(name), int):
            return int(result[name])
    return default


def _invoke_output(result: InvokeResult, log_type: Any) -> dict[str, Any]:
    """``lambda:Invoke``'s output members (``StatusCode``, ``FunctionError``, ``LogResult``, ``Payload``)."""
    output: dict[str, Any] = {"StatusCode": result.status_code, "Payload": result.payload}
    if result.status_code == 200:
        output["ExecutedVersion"] = "$LATEST"
    if result.function_error:
        output["FunctionError"] = result.function_error
    if log_type == "Tail" and result.status_code == 200:
        output["LogResult"] = result.log_tail_base64
    return output


_DEFAULT_READ_TIMEOUT_SECONDS = 60.0
"""botocore's default ``read_timeout`` (``botocore.config.Config``)."""


def _read_timeout(request: AWSPreparedRequest) -> float:
    """The read timeout (seconds) of the client that made ``request`` (its ``Config``, else 60 s)."""
    context = getattr(request, "context", None) or {}
    config = context.get("client_config")
    timeout = getattr(config, "read_timeout", None)
    return (
        float(timeout) if isinstance(timeout, int | float) and timeout > 0 else _DEFAULT_READ_TIMEOUT_SECONDS
    )


def _region_of(request: AWSPreparedRequest) -> str:
    """The region a request targets: its SigV4 credential scope, else its host name."""
    authorization = request.headers.get("Authorization")
    if authorization:
        text = authorization.decode() if isinstance(authorization, bytes) else str(authorization)
        match = _CREDENTIAL_SCOPE.search(text)
        if match:
            return match.group(1)
    match = _HOST_REGION.search(urlsplit(request.url).netloc)
    return match.group(1) if match else "us-east-1"


def _body_bytes(request: AWSPreparedRequest) -> bytes:
    """The request body as bytes (a file-like body is read and rewound for botocore)."""
    body: Any = request.body
    if body is None:
        return b""
    if isinstance(body, str):
        return body.encode("utf-8")
    if isinstance(body, (bytes, bytearray)):
        return bytes(body)
    data = body.read()
    if hasattr(body, "seek"):
        body.seek(0)
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _has_rules(faults: FaultInjector | None) -> bool:
    """True if ``faults`` may fire (skip parsing and drawing when no rule is configured)."""
    return faults is not None and bool(faults.rules)


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if hasattr(value, "read"):
        data = value.read()
        return data if isinstance(data, bytes) else str(data).encode("utf-8")
    return json.dumps(value).encode("utf-8")
