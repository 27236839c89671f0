"""In-process AWS Lambda runtime for the template's Python functions.
Kept whole: one LambdaRuntime guards the sandbox state (per-thread environment and output, CPU, timeouts).

Each function's handler module (``app.py`` in its ``CodeUri``) is imported once, under a unique module
name, with the layer directories on ``sys.path`` and the function's own environment variables set. An
invocation behaves like the AWS Lambda Python runtime (``awslambdaric``):

- the input is decoded from JSON (``Runtime.UnmarshalError`` if it is not JSON);
- the handler gets a context object shaped like ``awslambdaric.lambda_context.LambdaContext``
  (``function_name``, ``function_version``, ``invoked_function_arn``, ``memory_limit_in_mb`` (a string, as
  on AWS), ``aws_request_id``, ``log_group_name``, ``log_stream_name``, ``get_remaining_time_in_millis()``),
  whose deadline follows the virtual clock;
- the result is encoded like ``awslambdaric.lambda_runtime_marshaller``: JSON, ``Decimal`` as a number,
  ``bytes`` passed through; anything else that is not JSON-serializable (a ``datetime``) fails the
  invocation with ``Runtime.MarshalError`` and ``"Unable to marshal response: ..."``;
- an exception becomes ``{"errorMessage", "errorType": <class name>, "requestId", "stackTrace"}`` with
  ``FunctionError: Unhandled``, which is what Step Functions matches ``Retry``/``Catch`` against;
- ``sys.exit`` in a handler is ``Runtime.ExitError``;
- a handler is stopped at its timeout (virtual time): the sleep or wait it is in when the deadline comes
  (a botocore retry back-off, a slow call, a waiter) raises :class:`SandboxTimedOut`, a ``BaseException``
  that the handler's ``except Exception`` cannot swallow, and any AWS call it would still make while
  unwinding is refused; the invocation answers ``Sandbox.Timedout`` (what Step Functions sees) and its
  execution environment is thrown away, as Lambda resets an environment after a timeout;
- synchronous payloads are limited to 6 MB, asynchronous ones to 1 MB (``RequestTooLargeException``);
- asynchronous invocations (``Event``) run on a worker thread; a failed one is retried twice, one and then
  two minutes later (virtual), as Lambda does by default.

Invocations run concurrently, as on AWS: different functions, and the same function several times, each
in an *execution environment* of its own (a separate copy of the handler module with its own globals; an
idle environment is reused, warm, by the function's next invocation). They interleave at their AWS calls:
one invocation runs Python at a time (it holds the runtime's CPU), and it hands the CPU over at every AWS
call it makes and whenever it waits in the virtual clock. Which ready invocation runs next is drawn from
the seed when the rest of the simulation is still (:meth:`VirtualClock.add_settle_hook`), so a run is
reproducible and different seeds try different interleavings. What is process-wide in Python but
per-environment on AWS is swapped with the CPU: ``os.environ`` (the function's variables), Powertools'
parameter cache (a secret one function read is not in another's cache), Powertools' logger keys and
cold-start flag. The layer's own modules are shared by every environment of the process (on AWS each
environment imports its own copy): they keep no state but cached boto3 clients.

Handler output (``print``, Powertools logs) is captured per invocation by a thread-aware
``sys.stdout``/``sys.stderr`` proxy instead of being printed.
"""

from __future__ import annotations

import base64
import contextlib
import decimal
import hashlib
import importlib.machinery
import importlib.util
import io
import itertools
import json
import logging
import math
import os
import random
import re
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any, TextIO

from localcloud.clock import VirtualClock
from localcloud.contracts import AwsError

SYNC_PAYLOAD_LIMIT_BYTES = 6_291_456
"""Lambda's synchronous request and response payload quota (6 MB)."""
ASYNC_PAYLOAD_LIMIT_BYTES = 1_048_576
"""Lambda's asynchronous invocation payload quota (1 MB since 2025; it was 256 KB)."""
ASYNC_RETRY_DELAYS_SECONDS = (60.0, 120.0)
"""Default asynchronous retry policy: two retries, one then two minutes after the failure."""
CPU_SECONDS_ENV = "LOCALCLOUD_LAMBDA_CPU_SECONDS"
"""Environment variable: real seconds of CPU work injected before each handler call (slowness tests)."""


def injected_cpu_seconds() -> float:
    """``LOCALCLOUD_LAMBDA_CPU_SECONDS`` as seconds (0 when unset).

    Raises:
        ValueError: set, but not a number of seconds >= 0.
    """
    text = os.environ.get(CPU_SECONDS_ENV, "").strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise ValueError(f"{CPU_SECONDS_ENV}={text!r}: expected a number of seconds >= 0")
    return value


def burn_cpu(seconds: float) -> None:
    """Busy real work for ``seconds`` of real time (no clock call: virtual time stands still meanwhile)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        sum(range(200))


@dataclass(frozen=True)
class FunctionSpec:
    """One ``AWS::Serverless::Function`` as the local runtime needs it (built by the template loader).

    Attributes:
        logical_id: the template's logical id (``SearchOfferingsFunction``).
        name: the physical function name (``<StackName>-<LogicalId>``).
        arn: ``arn:aws:lambda:<region>:<account>:function:<name>``.
        code_dir: the local ``CodeUri`` directory holding the handler module.
        handler: ``module.function`` (``app.lambda_handler``).
        environment: the resolved ``Environment.Variables``.
        timeout_seconds: the function timeout (seconds of virtual time).
        memory_mb: ``MemorySize``.
        layer_dirs: directories put on ``sys.path`` (SAM layer ``ContentUri``s).
        runtime: ``python3.13``.
    """

    logical_id: str
    name: str
    arn: str
    code_dir: Path
    handler: str
    environment: dict[str, str]
    timeout_seconds: int
    memory_mb: int
    layer_dirs: tuple[Path, ...]
    runtime: str

    @property
    def region(self) -> str:
        """The region in the function ARN."""
        parts = self.arn.split(":")
        return parts[3] if len(parts) > 3 else "us-east-1"


@dataclass(frozen=True)
class InvokeResult:
    """What ``lambda:Invoke`` answers.

    Attributes:
        status_code: 200 (``RequestResponse``), 202 (``Event``) or 204 (``DryRun``).
        payload: the response payload bytes (the JSON result, or the error object).
        function_error: ``"Unhandled"`` when the function failed, else None.
        log: the invocation's log (START/END/REPORT lines and the handler's output).
        request_id: the invocation's request id.
    """

    status_code: int
    payload: bytes
    function_error: str | None
    log: str
    request_id: str = ""

    @property
    def log_tail_base64(self) -> str:
        """The last 4 KB of the log, base64-encoded (``LogType=Tail``'s ``X-Amz-Log-Result``)."""
        return base64.b64encode(self.log.encode("utf-8")[-4096:]).decode("ascii")


@dataclass(frozen=True)
class InvocationRecord:
    """One finished attempt of an invocation (for the timeline and tests).

    Attributes:
        function: the function name.
        request_id: the request id (the same for every attempt of one async invocation).
        invocation_type: ``RequestResponse`` or ``Event``.
        start: virtual UTC instant the handler started.
        end: virtual UTC instant it ended.
        error_type: the ``errorType`` if it failed, else None.
        attempt: 1 for the first attempt, 2 and 3 for asynchronous retries.
        payload: the response payload (result or error object).
        log: the captured log.
    """

    function: str
    request_id: str
    invocation_type: str
    start: datetime
    end: datetime
    error_type: str | None
    attempt: int
    payload: bytes
    log: str


class LambdaContext:
    """The context object handed to a handler (shape of ``awslambdaric``'s ``LambdaContext``)."""

    def __init__(
        self,
        *,
        spec: FunctionSpec,
        request_id: str,
        log_stream_name: str,
        deadline: datetime,
        clock: VirtualClock,
        client_context: Any = None,
    ) -> None:
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{spec.name}"
        self.log_stream_name = log_stream_name
        self.function_name = spec.name
        self.memory_limit_in_mb = str(spec.memory_mb)
        self.function_version = "$LATEST"
        self.invoked_function_arn = spec.arn
        self.tenant_id: str | None = None
        self.client_context = client_context
        self.identity = None
        self._deadline = deadline
        self._clock = clock

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds of virtual time left before the function times out (0 when past)."""
        left = (self._deadline - self._clock.now()).total_seconds() * 1000
        return max(int(left), 0)

    def __repr__(self) -> str:
        return (
            f"LambdaContext([aws_request_id={self.aws_request_id},function_name={self.function_name},"
            f"invoked_function_arn={self.invoked_function_arn}])"
        )


_DECIMAL_MARK = "\x00localcloud-decimal-{}\x00"


def _mark_decimals(value: Any, found: list[str]) -> Any:
    """Replace each ``Decimal`` by a marker string (its text is spliced back after encoding)."""
    if isinstance(value, decimal.Decimal):
        if value.is_nan():
            return math.nan
        found.append(str(value))
        return _DECIMAL_MARK.format(len(found) - 1)
    if isinstance(value, dict):
        return {key: _mark_decimals(item, found) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_mark_decimals(item, found) for item in value]
    return value


def marshal_response(result: Any) -> bytes:
    """Encode a handler's return value as the Lambda Python runtime does.

    ``awslambdaric.lambda_runtime_marshaller`` encodes with simplejson: a ``Decimal`` is written as the
    JSON number of its exact text (``Decimal("10.50")`` -> ``10.50``), ``bytes`` are returned as they are.

    Raises:
        _MarshalError: the value is not JSON-serializable (``Runtime.MarshalError`` on AWS).
    """
    if isinstance(result, bytes):
        return result
    found: list[str] = []
    try:
        text = json.dumps(_mark_decimals(result, found))
    except (TypeError, ValueError) as exc:
        raise _MarshalError(f"Unable to marshal response: {exc}") from exc
    for index, number in enumerate(found):
        text = text.replace(json.dumps(_DECIMAL_MARK.format(index)), number, 1)
    return text.encode("utf-8")


class _MarshalError(Exception):
    """The runtime could not encode the handler's result."""


class _OutputRouter:
    """A ``sys.stdout``/``sys.stderr`` stand-in that sends writes from invocation threads to their buffer."""

    def __init__(self, original: TextIO, local: threading.local) -> None:
        self.original = original
        self._local = local

    def write(self, text: str) -> int:
        buffer: io.StringIO | None = getattr(self._local, "buffer", None)
        if buffer is not None:
            return buffer.write(text)
        return self.original.write(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if getattr(self._local, "buffer", None) is None and not getattr(self.original, "closed", False):
            self.original.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


class SandboxTimedOut(BaseException):
    """Raised in a handler's thread when its invocation reaches the function timeout.

    A ``BaseException`` so that ``except Exception`` in the handler cannot swallow it: Lambda stops the
    function there, whatever the code would have done next.
    """


@dataclass(eq=False)
class _CpuWaiter:
    ident: int
    key: str
    depth: int
    event: threading.Event = field(default_factory=threading.Event)


class _Cpu:
    """The runtime's one CPU: at most one invocation runs Python at a time; reentrant for its holder.

    A thread that wants it queues and waits in the clock; the clock's driver hands it over at quiescent
    points (a settle hook), choosing among the ready threads with the runtime's seeded random source, so
    the interleaving of concurrent invocations is reproducible. While nothing runs the simulation (before
    the clock starts, after it stops, or for a thread from outside the simulation between two runs: an
    HTTP request of ``serve``) it is a plain lock.
    """

    def __init__(self, clock: VirtualClock, seed: int) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._owner: int | None = None
        self._depth = 0
        self._waiters: list[_CpuWaiter] = []
        self._random = random.Random(seed ^ 0x5EED)
        clock.add_settle_hook(self._grant)

    def held(self) -> bool:
        """True if the calling thread holds the CPU."""
        return self._owner == threading.get_ident()

    def acquire(self, depth: int = 1) -> None:
        """Take the CPU (``depth`` levels at once), waiting for the driver to grant it."""
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += depth
                return
            if not self._clock.started or not self._clock.waits_for_a_driver():
                while self._owner is not None:
                    self._cond.wait()
                self._owner, self._depth = me, depth
                return
            waiter = _CpuWaiter(me, _thread_key(threading.current_thread().name), depth)
            self._waiters.append(waiter)
        self._clock.touch()
        try:
            granted = self._clock.wait_event(waiter.event, None, park_hooks=False)
        except BaseException:
            self._withdraw(waiter)
            raise
        if not granted:  # the clock stopped or went idle under us: fall back to a plain lock
            self._withdraw(waiter)
            with self._cond:
                while self._owner is not None:
                    self._cond.wait()
                self._owner, self._depth = me, depth

    def _withdraw(self, waiter: _CpuWaiter) -> None:
        with self._cond:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif self._owner == waiter.ident and waiter.event.is_set():
                self._owner, self._depth = None, 0
                self._cond.notify_all()

    def _grant(self) -> bool:
        """Settle hook: hand the free CPU to one waiting thread (seeded choice); True if it did."""
        with self._cond:
            if self._owner is not None or not self._waiters:
                return False
            ordered = sorted(self._waiters, key=lambda waiter: waiter.key)
            chosen = ordered[0] if len(ordered) == 1 else self._random.choice(ordered)
            self._waiters.remove(chosen)
            self._owner, self._depth = chosen.ident, chosen.depth
        chosen.event.set()
        return True

    def release(self) -> None:
        """Release one level."""
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("the Lambda CPU was released by a thread that does not hold it")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()
        self._clock.touch()

    def release_all(self) -> int:
        """Release every level held by the calling thread; returns how many (0 if it held none)."""
        with self._cond:
            if self._owner != threading.get_ident():
                return 0
            depth = self._depth
            self._owner, self._depth = None, 0
            self._cond.notify_all()
        self._clock.touch()
        return depth


def _thread_key(name: str) -> str:
    # Zero-pad numbers so that Thread-9 sorts before Thread-10 (names follow creation order).
    return re.sub(r"\d+", lambda match: match.group().zfill(12), name)


class _StateSlot:
    """Process-wide state that is per execution environment on AWS, swapped with the CPU.

    ``take`` returns the value in force and leaves the neutral value a fresh environment starts with;
    ``put`` installs an environment's value. While no invocation holds the CPU the neutral value is in force.
    """

    def take(self) -> Any:
        raise NotImplementedError

    def put(self, value: Any) -> None:
        raise NotImplementedError


class _PowertoolsParameters(_StateSlot):
    """Powertools' parameter providers and their caches (``get_secret`` with ``max_age``)."""

    _MODULE = "aws_lambda_powertools.utilities.parameters.constants"

    def take(self) -> Any:
        module = sys.modules.get(self._MODULE)
        if module is None:
            return None
        providers: dict[str, Any] = module.DEFAULT_PROVIDERS
        saved = dict(providers)
        providers.clear()
        return saved

    def put(self, value: Any) -> None:
        module = sys.modules.get(self._MODULE)
        if module is None or value is None:
            return
        module.DEFAULT_PROVIDERS.clear()
        module.DEFAULT_PROVIDERS.update(value)


class _PowertoolsLogging(_StateSlot):
    """Powertools' cold-start flag and the keys its formatters append (shared by Loggers of one service)."""

    _LOGGER = "aws_lambda_powertools.logging.logger"
    _FORMATTER = "aws_lambda_powertools.logging.formatter"

    def take(self) -> Any:
        logger_module = sys.modules.get(self._LOGGER)
        if logger_module is None:
            return None
        saved: dict[str, Any] = {"cold_start": getattr(logger_module, "is_cold_start", True), "formats": {}}
        setattr(logger_module, "is_cold_start", True)  # noqa: B010 - a module global, not an attribute we own
        for formatter in self._formatters():
            saved["formats"][id(formatter)] = (formatter, dict(formatter.log_format))
            formatter.clear_state()
        return saved

    def put(self, value: Any) -> None:
        logger_module = sys.modules.get(self._LOGGER)
        if logger_module is None or value is None:
            return
        setattr(logger_module, "is_cold_start", value["cold_start"])  # noqa: B010 - as above
        for formatter, log_format in value["formats"].values():
            formatter.log_format = dict(log_format)

    def _formatters(self) -> list[Any]:
        module = sys.modules.get(self._FORMATTER)
        if module is None:
            return []
        base = module.LambdaPowertoolsFormatter
        found: list[Any] = []
        for logger in list(logging.Logger.manager.loggerDict.values()):
            for handler in getattr(logger, "handlers", ()):
                formatter = handler.formatter
                if isinstance(formatter, base) and formatter not in found:
                    found.append(formatter)
        return found


_PROCESS_STATE: tuple[_StateSlot, ...] = (_PowertoolsParameters(), _PowertoolsLogging())


@dataclass
class _EnvFrame:
    values: dict[str, str]
    saved: dict[str, str | None] = field(default_factory=dict)

    def apply(self) -> None:
        self.saved = {key: os.environ.get(key) for key in self.values}
        os.environ.update(self.values)

    def restore(self) -> None:
        for key, previous in self.saved.items():
            if previous is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = previous


@dataclass(eq=False)
class _Environment:
    """One execution environment of a function: its own copy of the handler module and process state."""

    function: str
    module: ModuleType | None
    handler: Callable[[Any, Any], Any] | None
    error: tuple[str, str, list[str]] | None
    saved: list[Any] = field(default_factory=lambda: [None] * len(_PROCESS_STATE))
    broken: bool = False

    def take_state(self) -> None:
        """Keep the process-wide state in force as this environment's, leaving the neutral state."""
        self.saved = [slot.take() for slot in _PROCESS_STATE]

    def put_state(self) -> None:
        """Put this environment's process-wide state in force."""
        for slot, value in zip(_PROCESS_STATE, self.saved, strict=True):
            slot.put(value)


@dataclass
class _Invocation:
    """An invocation running in a thread (innermost last): its environment, and whether it was stopped."""

    environment: _Environment
    killed: bool = False


_STREAM_CHARS = "0123456789abcdef"


_HANDLER_CODE: dict[tuple[str, bytes], CodeType] = {}
"""Compiled handler modules by path and source digest: every new execution environment executes its
``app.py`` anew (its module-level code runs again, into a module of its own), but the text is compiled once
per process. A code object is immutable; a changed file has another digest and is compiled again."""
_HANDLER_CODE_LOCK = threading.Lock()


class _HandlerLoader(importlib.machinery.SourceFileLoader):
    """The source loader, with the compiled code kept in :data:`_HANDLER_CODE` (see there)."""

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        key = (path, hashlib.sha256(source).digest())
        with _HANDLER_CODE_LOCK:
            code = _HANDLER_CODE.get(key)
        if code is None:
            code = self.source_to_code(source, path)  # a SyntaxError is raised, and not kept, each time
            with _HANDLER_CODE_LOCK:
                _HANDLER_CODE[key] = code
        return code


class LambdaRuntime:
    """Runs the template's functions in-process (see the module docstring for the AWS behaviour kept).

    Args:
        functions: the functions (from the template loader).
        clock: the virtual clock (deadlines, records, asynchronous retries).
        base_env: environment variables every function sees (fake credentials, region...), under its own.
        seed: seeds request ids and log stream names, so runs are reproducible.
        async_retry_delays_seconds: delays before each asynchronous retry (default: Lambda's 60 s, 120 s).

    Attributes:
        records: every finished invocation attempt, in completion order.
        cpu_seconds: real CPU work injected before each handler call (default
            ``LOCALCLOUD_LAMBDA_CPU_SECONDS``, else 0): a slow machine made on purpose. It is real time, not
            virtual: like real compute, it never counts against a timeout (a handler is stopped when its
            virtual work - sleeps, waits, back-offs - passes the timeout).
        started: how many invocation attempts have started (with ``records``: the hang detector's
            progress source).
    """

    def __init__(
        self,
        functions: Iterable[FunctionSpec],
        clock: VirtualClock,
        base_env: dict[str, str],
        *,
        seed: int = 0,
        async_retry_delays_seconds: tuple[float, ...] = ASYNC_RETRY_DELAYS_SECONDS,
    ) -> None:
        self.clock = clock
        self.base_env = dict(base_env)
        self.async_retry_delays_seconds = async_retry_delays_seconds
        self.records: list[InvocationRecord] = []
        self.started = 0
        self.cpu_seconds = injected_cpu_seconds()
        self._functions: dict[str, FunctionSpec] = {}
        for spec in functions:
            self.add_function(spec)
        self._idle: dict[str, list[_Environment]] = {}
        self._latest: dict[str, _Environment] = {}
        self._cpu = _Cpu(clock, seed)
        self._local = threading.local()
        self._random = random.Random(seed)
        self._random_lock = threading.Lock()
        self._records_lock = threading.Lock()
        self._listeners: list[Callable[[InvocationRecord], None]] = []
        self._async_threads: list[threading.Thread] = []
        self._async_counter = itertools.count(1)
        self._module_counter = itertools.count(1)
        self._stdout: _OutputRouter | None = None
        self._stderr: _OutputRouter | None = None
        # Who a handler's AWS calls are made as (the cloud sets IAM's execution-role scope; None: nobody).
        self.principal_scope: Callable[[str], contextlib.AbstractContextManager[None]] | None = None
        clock.add_park_hooks(self._on_park, self._on_unpark)

    # -- registry --------------------------------------------------------------------------------------

    def add_function(self, spec: FunctionSpec) -> None:
        """Make a function invocable by name and ARN."""
        self._functions[spec.name] = spec

    @property
    def functions(self) -> list[FunctionSpec]:
        """The registered functions."""
        return list(self._functions.values())

    def knows(self, name_or_arn: str) -> bool:
        """True if ``name_or_arn`` (name, ARN, partial ARN, with or without qualifier) is a function here."""
        return self._lookup(name_or_arn) is not None

    def function(self, name_or_arn: str) -> FunctionSpec:
        """The function for a name or ARN.

        Raises:
            AwsError: ``ResourceNotFoundException`` (404), as Lambda answers.
        """
        spec = self._lookup(name_or_arn)
        if spec is None:
            raise AwsError("ResourceNotFoundException", f"Function not found: {name_or_arn}", 404)
        return spec

    def add_listener(self, listener: Callable[[InvocationRecord], None]) -> None:
        """Call ``listener(record)`` after every invocation attempt (in the invoking thread)."""
        self._listeners.append(listener)

    def _lookup(self, name_or_arn: str) -> FunctionSpec | None:
        name = name_or_arn
        if name.startswith("arn:"):
            # arn:aws:lambda:region:account:function:name[:qualifier]
            parts = name.split(":")
            name = parts[6] if len(parts) > 6 else ""
        elif ":function:" in name:
            # account:function:name[:qualifier]
            name = name.split(":function:", 1)[1].split(":", 1)[0]
        else:
            name = name.split(":", 1)[0]
        return self._functions.get(name)

    # -- invoking --------------------------------------------------------------------------------------

    def invoke(
        self,
        name_or_arn: str,
        payload: bytes,
        *,
        invocation_type: str = "RequestResponse",
        client_context: str | None = None,
    ) -> InvokeResult:
        """Invoke a function, as ``lambda:Invoke`` does.

        Args:
            name_or_arn: function name, ARN or partial ARN (a qualifier is accepted and ignored).
            payload: the request payload (JSON bytes; empty means ``{}``, as Invoke without a payload).
            invocation_type: ``RequestResponse`` (run now, in this thread), ``Event`` (queue on a worker
                thread, answer 202) or ``DryRun`` (answer 204).
            client_context: the base64 ``ClientContext`` header, if any.

        Returns:
            An :class:`InvokeResult`.

        Raises:
            AwsError: ``ResourceNotFoundException`` (404), ``RequestTooLargeException`` (413),
                ``InvalidParameterValueException`` (400) for an unknown invocation type.
        """
        spec = self.function(name_or_arn)
        if invocation_type == "DryRun":
            return InvokeResult(204, b"", None, "")
        if invocation_type not in ("RequestResponse", "Event"):
            raise AwsError(
                "InvalidParameterValueException",
                f"1 validation error detected: Value '{invocation_type}' at 'invocationType' failed to "
                "satisfy constraint: Member must satisfy enum value set: [Event, RequestResponse, DryRun]",
                400,
            )
        limit = (
            SYNC_PAYLOAD_LIMIT_BYTES if invocation_type == "RequestResponse" else ASYNC_PAYLOAD_LIMIT_BYTES
        )
        if len(payload) > limit:
            raise AwsError(
                "RequestTooLargeException",
                f"Request must be smaller than {limit} bytes for the InvokeFunction operation",
                413,
            )
        context_obj = _decode_client_context(client_context)
        request_id = self._new_request_id()
        self.clock.touch()
        if invocation_type == "Event":
            thread = threading.Thread(
                target=self._run_async,
                args=(spec, payload, request_id, context_obj),
                name=f"lambda-event-{spec.name}-{next(self._async_counter)}",
                daemon=True,
            )
            self._async_threads.append(thread)
            thread.start()
            return InvokeResult(202, b"", None, "", request_id)
        return self._attempt(
            spec,
            payload,
            request_id=request_id,
            invocation_type="RequestResponse",
            client_context=context_obj,
        )

    def _run_async(self, spec: FunctionSpec, payload: bytes, request_id: str, client_context: Any) -> None:
        result = self._attempt(
            spec, payload, request_id=request_id, invocation_type="Event", client_context=client_context
        )
        for attempt, delay in enumerate(self.async_retry_delays_seconds, start=2):
            if result.function_error is None:
                return
            self.clock.sleep(delay)
            result = self._attempt(
                spec,
                payload,
                request_id=request_id,
                invocation_type="Event",
                attempt=attempt,
                client_context=client_context,
            )

    def _attempt(
        self,
        spec: FunctionSpec,
        payload: bytes,
        *,
        request_id: str,
        invocation_type: str,
        attempt: int = 1,
        client_context: Any = None,
    ) -> InvokeResult:
        self._begin_attempt()
        invocations = self._invocations()
        if invocations:  # a nested synchronous invocation: the outer one's state steps aside
            invocations[-1].environment.take_state()
        frames: list[_EnvFrame] = self._frames()
        log_stream = self._new_log_stream()
        env = {**self.base_env, **self._runtime_env(spec, log_stream), **spec.environment}
        frame = _EnvFrame(env)
        frame.apply()
        frames.append(frame)
        outer_buffer: io.StringIO | None = getattr(self._local, "buffer", None)
        buffer = io.StringIO()
        self._local.buffer = buffer
        start = self.clock.now()
        error_type: str | None = None
        environment = self._environment(spec)
        invocation = _Invocation(environment)
        invocations.append(invocation)
        try:
            self.clock.touch()
            buffer.write(f"START RequestId: {request_id} Version: $LATEST\n")
            scope = self.principal_scope(spec.name) if self.principal_scope else contextlib.nullcontext()
            with scope:
                response, error_type = self._run_handler(
                    spec,
                    payload,
                    invocation,
                    request_id=request_id,
                    log_stream=log_stream,
                    start=start,
                    client_context=client_context,
                )
            end = self.clock.now()
            elapsed = (end - start).total_seconds()
            response, error_type = self._checked(
                spec,
                request_id=request_id,
                response=response,
                error_type=error_type,
                elapsed=elapsed,
                buffer=buffer,
            )
            if error_type == "Sandbox.Timedout":
                environment.broken = True  # Lambda resets an environment after a timeout
            buffer.write(f"END RequestId: {request_id}\n")
            buffer.write(
                f"REPORT RequestId: {request_id}\tDuration: {elapsed * 1000:.2f} ms\t"
                f"Billed Duration: {max(1, math.ceil(elapsed * 1000))} ms\tMemory Size: {spec.memory_mb} MB\n"
            )
        finally:
            self._local.buffer = outer_buffer
            invocations.pop()
            environment.take_state()
            self._return_environment(environment)
            if invocations:
                invocations[-1].environment.put_state()
            frames.pop()
            frame.restore()
            self._cpu.release()
            self.clock.touch()
        log = buffer.getvalue()
        record = InvocationRecord(
            function=spec.name,
            request_id=request_id,
            invocation_type=invocation_type,
            start=start,
            end=end,
            error_type=error_type,
            attempt=attempt,
            payload=response,
            log=log,
        )
        with self._records_lock:
            self.records.append(record)
        for listener in list(self._listeners):
            listener(record)
        status = 200 if invocation_type == "RequestResponse" else 202
        return InvokeResult(status, response, "Unhandled" if error_type else None, log, request_id)

    def _begin_attempt(self) -> None:
        """Route the output, take the CPU, count the attempt (the hang detector's progress)."""
        self._ensure_output_router()
        self._cpu.acquire()
        self.started += 1

    def _checked(
        self,
        spec: FunctionSpec,
        *,
        request_id: str,
        response: bytes,
        error_type: str | None,
        elapsed: float,
        buffer: io.StringIO,
    ) -> tuple[bytes, str | None]:
        """The answer after Lambda's own checks: the timeout and the response size quota."""
        if error_type == "Sandbox.Timedout" or elapsed > spec.timeout_seconds:
            message = (
                f"RequestId: {request_id} Error: Task timed out after {spec.timeout_seconds:.2f} seconds"
            )
            buffer.write(f"{self.clock.now().strftime('%Y-%m-%dT%H:%M:%S.%fZ')} {message}\n")
            return json.dumps(
                {"errorMessage": message, "errorType": "Sandbox.Timedout"}
            ).encode(), "Sandbox.Timedout"
        if error_type is None and len(response) > SYNC_PAYLOAD_LIMIT_BYTES:
            message = "Response payload size exceeded maximum allowed payload size "
            message += f"({SYNC_PAYLOAD_LIMIT_BYTES} bytes)."
            error_type = "Function.ResponseSizeTooLarge"
            return json.dumps({"errorMessage": message, "errorType": error_type}).encode(), error_type
        return response, error_type

    def _run_handler(
        self,
        spec: FunctionSpec,
        payload: bytes,
        invocation: _Invocation,
        *,
        request_id: str,
        log_stream: str,
        start: datetime,
        client_context: Any,
    ) -> tuple[bytes, str | None]:
        """Run the handler; returns (response payload, errorType or None)."""
        loaded = invocation.environment
        if loaded.error is not None:
            error_type, message, trace = loaded.error
            return _error_payload(message, error_type, trace, request_id), error_type
        if loaded.handler is None:
            raise RuntimeError(f"{spec.name}: handler not loaded")
        try:
            event = json.loads(payload.decode("utf-8")) if payload.strip() else {}
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return (
                _error_payload(f"Unable to unmarshal input: {exc}", "Runtime.UnmarshalError", [], request_id),
                "Runtime.UnmarshalError",
            )
        return self._call_handler(
            spec,
            handler=loaded.handler,
            event=event,
            invocation=invocation,
            request_id=request_id,
            log_stream=log_stream,
            start=start,
            client_context=client_context,
        )

    def _call_handler(
        self,
        spec: FunctionSpec,
        *,
        handler: Callable[[Any, Any], Any],
        event: Any,
        invocation: _Invocation,
        request_id: str,
        log_stream: str,
        start: datetime,
        client_context: Any,
    ) -> tuple[bytes, str | None]:
        """Call the handler under its deadline; returns (response payload, errorType or None)."""
        deadline = start + timedelta(seconds=spec.timeout_seconds)
        context = LambdaContext(
            spec=spec,
            request_id=request_id,
            log_stream_name=log_stream,
            deadline=deadline,
            clock=self.clock,
            client_context=client_context,
        )

        def stop() -> SandboxTimedOut:
            invocation.killed = True
            return SandboxTimedOut(f"{spec.name} stopped at its {spec.timeout_seconds} s timeout")

        try:
            with self.clock.deadline(deadline, stop):
                if self.cpu_seconds:
                    burn_cpu(self.cpu_seconds)
                result = handler(event, context)
            return marshal_response(result), None
        except SandboxTimedOut:
            return b"", "Sandbox.Timedout"
        except _MarshalError as exc:
            self._log_error(str(exc), "Runtime.MarshalError", [])
            return _error_payload(str(exc), "Runtime.MarshalError", [], request_id), "Runtime.MarshalError"
        except Exception as exc:
            if invocation.killed:  # the handler wrapped the stop in an exception of its own
                return b"", "Sandbox.Timedout"
            trace = traceback.format_list(traceback.extract_tb(exc.__traceback__)[1:])
            error_type = type(exc).__name__
            self._log_error(str(exc), error_type, trace)
            return _error_payload(str(exc), error_type, trace, request_id), error_type
        except SystemExit as exc:
            # The runtime process exits; Lambda reports it as Runtime.ExitError (and starts a new one).
            invocation.environment.broken = True
            status = exc.code if isinstance(exc.code, int) else 1
            message = f"RequestId: {request_id} Error: Runtime exited with error: exit status {status}"
            return _error_payload(message, "Runtime.ExitError", [], request_id), "Runtime.ExitError"

    # -- concurrency -----------------------------------------------------------------------------------

    def yield_now(self) -> None:
        """Let other ready invocations run before the calling one goes on (called at each AWS call).

        Raises:
            SandboxTimedOut: the calling invocation was stopped at its timeout (it may not call AWS).
        """
        self.refuse_if_stopped()
        if self._cpu.held():
            self._on_park()
            self._on_unpark()

    def stop_caller(self) -> None:
        """Stop the calling thread's invocation now, as at its timeout (the ``kill_caller`` fault).

        Raises:
            SandboxTimedOut: always, when the calling thread runs an invocation.
        """
        invocations = self._invocations()
        if invocations:
            invocations[-1].killed = True
            raise SandboxTimedOut("the invocation died right after an AWS call (kill_caller fault)")

    def refuse_if_stopped(self) -> None:
        """Raise :class:`SandboxTimedOut` if the calling thread's invocation was stopped at its timeout."""
        invocations = self._invocations()
        if invocations and invocations[-1].killed:
            raise SandboxTimedOut("the invocation was stopped at its timeout: no further AWS call is made")

    def current_function(self) -> FunctionSpec | None:
        """The function whose invocation the calling thread runs (innermost), or None."""
        invocations = self._invocations()
        if not invocations:
            return None
        return self._functions.get(invocations[-1].environment.function)

    def _invocations(self) -> list[_Invocation]:
        found: list[_Invocation] | None = getattr(self._local, "invocations", None)
        if found is None:
            found = []
            self._local.invocations = found
        return found

    def _environment(self, spec: FunctionSpec) -> _Environment:
        """A warm idle environment of the function, else a new one (its handler module imported anew)."""
        idle = self._idle.get(spec.name)
        environment = idle.pop() if idle else self._load(spec)
        environment.put_state()
        return environment

    def _return_environment(self, environment: _Environment) -> None:
        reusable = environment.error is None or environment.error[0] == "Runtime.HandlerNotFound"
        if environment.broken or not reusable:
            return
        self._idle.setdefault(environment.function, []).append(environment)
        self._latest[environment.function] = environment

    def _log_error(self, message: str, error_type: str, trace: list[str]) -> None:
        # The runtime logs "[ERROR] <type>: <message>" and the traceback, as awslambdaric's text format does.
        lines = [f"[ERROR] {error_type}: {message}" if message else f"[ERROR] {error_type}"]
        if trace:
            lines.append("Traceback (most recent call last):")
            lines.extend(line.rstrip("\n") for line in trace)
        sys.stdout.write("\r".join(lines) + "\n")

    def _load(self, spec: FunctionSpec) -> _Environment:
        """A new execution environment: the handler module imported anew (under the CPU, with the
        function's environment variables), under a module name of its own."""
        module_name, _, function_name = spec.handler.rpartition(".")
        module_file = spec.code_dir / (module_name.replace(".", "/") + ".py")
        unique = re.sub(r"\W", "_", f"_localcloud_fn_{next(self._module_counter)}_{spec.name}_{module_name}")
        for layer in spec.layer_dirs:
            if str(layer) not in sys.path:
                sys.path.append(str(layer))
        module_spec = importlib.util.spec_from_file_location(
            unique, module_file, loader=_HandlerLoader(unique, str(module_file))
        )
        if module_spec is None or module_spec.loader is None or not module_file.is_file():
            # Not cached: Lambda retries the init on the next invocation.
            return _Environment(
                spec.name,
                None,
                None,
                (
                    "Runtime.ImportModuleError",
                    f"Unable to import module '{module_name}': No module named '{module_name}'",
                    [],
                ),
            )
        try:
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[unique] = module
            # Sibling modules of app.py are importable during import, as in the Lambda task root.
            sys.path.insert(0, str(spec.code_dir))
            try:
                module_spec.loader.exec_module(module)
            finally:
                with contextlib.suppress(ValueError):
                    sys.path.remove(str(spec.code_dir))
        except ImportError as exc:
            sys.modules.pop(unique, None)
            loaded = _Environment(
                spec.name,
                None,
                None,
                ("Runtime.ImportModuleError", f"Unable to import module '{module_name}': {exc}", []),
            )
        except Exception as exc:
            sys.modules.pop(unique, None)
            trace = traceback.format_list(traceback.extract_tb(exc.__traceback__))
            loaded = _Environment(spec.name, None, None, (type(exc).__name__, str(exc), trace))
        else:
            handler = getattr(module, function_name, None)
            if not callable(handler):
                loaded = _Environment(
                    spec.name,
                    module,
                    None,
                    (
                        "Runtime.HandlerNotFound",
                        f"Handler '{function_name}' missing on module '{module_name}'",
                        [],
                    ),
                )
            else:
                loaded = _Environment(spec.name, module, handler, None)
        # Import errors are not kept (_return_environment): Lambda retries the init on the next invocation.
        return loaded

    def module(self, name_or_arn: str) -> ModuleType | None:
        """The imported handler module of a function (None before its first invocation)."""
        loaded = self._latest.get(self.function(name_or_arn).name)
        return None if loaded is None else loaded.module

    @staticmethod
    def _runtime_env(spec: FunctionSpec, log_stream: str) -> dict[str, str]:
        """The reserved variables Lambda sets for every function (AWS Lambda Developer Guide)."""
        return {
            "AWS_REGION": spec.region,
            "AWS_DEFAULT_REGION": spec.region,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{spec.runtime}",
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
            "AWS_LAMBDA_LOG_STREAM_NAME": log_stream,
            "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand",
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
        }

    # -- helpers ---------------------------------------------------------------------------------------

    def _new_request_id(self) -> str:
        with self._random_lock:
            return str(uuid.UUID(int=self._random.getrandbits(128), version=4))

    def _new_log_stream(self) -> str:
        with self._random_lock:
            suffix = "".join(self._random.choice(_STREAM_CHARS) for _ in range(32))
        return f"{self.clock.now().strftime('%Y/%m/%d')}/[$LATEST]{suffix}"

    def _frames(self) -> list[_EnvFrame]:
        frames: list[_EnvFrame] | None = getattr(self._local, "frames", None)
        if frames is None:
            frames = []
            self._local.frames = frames
        return frames

    def _ensure_output_router(self) -> None:
        # Installed lazily and re-installed if something (pytest's capture) replaced sys.stdout since.
        if not isinstance(sys.stdout, _OutputRouter):
            self._stdout = _OutputRouter(sys.stdout, self._local)
            sys.stdout = self._stdout
        if not isinstance(sys.stderr, _OutputRouter):
            self._stderr = _OutputRouter(sys.stderr, self._local)
            sys.stderr = self._stderr

    def close(self) -> None:
        """Put ``sys.stdout``/``sys.stderr`` back (call when the cloud stops)."""
        if isinstance(sys.stdout, _OutputRouter) and sys.stdout is self._stdout:
            sys.stdout = self._stdout.original
        if isinstance(sys.stderr, _OutputRouter) and sys.stderr is self._stderr:
            sys.stderr = self._stderr.original

    def _on_park(self) -> None:
        """The calling thread blocks in the clock: its process state steps aside and the CPU is released."""
        frames: list[_EnvFrame] = getattr(self._local, "frames", None) or []
        invocations: list[_Invocation] = getattr(self._local, "invocations", None) or []
        holding = self._cpu.held()
        if holding:
            if invocations:
                invocations[-1].environment.take_state()
            for frame in reversed(frames):
                frame.restore()
        depth = self._cpu.release_all()
        parked: list[tuple[int, list[_EnvFrame]]] = getattr(self._local, "parked", None) or []
        parked.append((depth, list(frames) if depth else []))
        self._local.parked = parked

    def _on_unpark(self) -> None:
        """The calling thread resumes: it waits for the CPU, then its state is put back."""
        parked: list[tuple[int, list[_EnvFrame]]] = getattr(self._local, "parked", None) or []
        if not parked:
            return
        depth, frames = parked.pop()
        if depth:
            self._cpu.acquire(depth)
            for frame in frames:
                frame.apply()
            invocations: list[_Invocation] = getattr(self._local, "invocations", None) or []
            if invocations:
                invocations[-1].environment.put_state()

    @contextlib.contextmanager
    def capture(self) -> Iterator[io.StringIO]:
        """Capture what the calling thread prints (tests)."""
        self._ensure_output_router()
        outer = getattr(self._local, "buffer", None)
        buffer = io.StringIO()
        self._local.buffer = buffer
        try:
            yield buffer
        finally:
            self._local.buffer = outer


def _decode_client_context(value: str | None) -> Any:
    if not value:
        return None
    try:
        return json.loads(base64.b64decode(value))
    except (ValueError, TypeError):
        return None


def _error_payload(message: str, error_type: str, trace: list[str], request_id: str) -> bytes:
    """The error object the Python runtime posts (``awslambdaric.bootstrap.make_error``)."""
    return json.dumps(
        {"errorMessage": message, "errorType": error_type, "requestId": request_id, "stackTrace": trace}
    ).encode("utf-8")
