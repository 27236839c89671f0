"""``LocalCloud``: the whole SAM application in one process, on a virtual clock.
Kept whole: LocalCloud wires every part in one enter and exit order, which reads best in one place.

Entering the context manager (in this order):

1. sets fake AWS credentials and the region in ``os.environ`` (restored on exit);
2. starts the :class:`~localcloud.clock.VirtualClock` (time-machine) at ``start``;
3. starts moto's ``mock_aws`` with Step Functions executing ASL;
4. builds the Lambda runtime (the template's functions), the AWS emulator, EventBridge delivery, the
   request dispatcher (with the fault injector) and the Slack outbox, and installs the patches
   (:mod:`localcloud.patches`) and delivery;
5. deploys the stack's resources into moto (faults do not apply to the deployment);
6. starts the event source mappings on DynamoDB streams (:mod:`localcloud.streams`) and registers the
   tickers: the Scheduler (``at``/``rate``/``cron`` schedules and scheduled rules), EventBridge's late
   deliveries, the stream pollers and the emulator's (resource lifecycles, alarm evaluation).

Exiting stops running executions, releases every thread parked on the clock, lets the threads the run
started finish, and undoes all of the above, so the next test can build a fresh cloud. Only one cloud
can run at a time in a process (moto's mock and time-machine are process-wide).

The :attr:`LocalCloud.timeline` tells the story of the run: API requests and responses, events put on a
bus, executions started and finished, Lambda invocations, schedules fired, Slack messages and faults.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import inspect
import io
import json
import logging
import os
import re
import runpy
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import boto3
import botocore.config
from moto import mock_aws
from moto.stepfunctions import responses as moto_sfn

from localcloud import patches, snapshots, stepfunctions
from localcloud.clock import RunProgress, RunResult, VirtualClock
from localcloud.delivery import EventDelivery
from localcloud.dispatch import Dispatcher, EmulatorLike
from localcloud.faults import FaultInjector
from localcloud.iam import Denial, Iam, TargetCaller
from localcloud.iam import context as iam_context
from localcloud.iam.lookups import CloudLookups
from localcloud.lambdas import InvocationRecord, LambdaRuntime
from localcloud.scheduler import SchedulerTicker
from localcloud.slack import Outbox, OutboxMessage
from localcloud.slack import workspace as slack_workspace
from localcloud.streams import StreamDelivery
from localcloud.template import Stack
from localcloud.timeline import Kind, Timeline, TimelineEntry

DEFAULT_START = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
"""Where virtual time starts unless told otherwise (a Tuesday morning, UTC)."""

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
}
_MOTO_CONFIG: dict[str, Any] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
logger = logging.getLogger(__name__)

# Real seconds a stopping cloud waits for its threads to reach a wait (a handler on a busy machine).
_THREADS_SETTLE_SECONDS = 120.0
_FAILED_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
_AWS_SDK_SERVICES = {"sfn": "stepfunctions", "eventbridge": "events", "cloudwatchlogs": "logs"}


@dataclass(frozen=True)
class ExecutionSummary:
    """One Step Functions execution, as ``DescribeExecution`` and ``GetExecutionHistory`` report it.

    Attributes:
        name: the execution name; ``arn`` its ARN.
        state_machine: the state machine's name (``<StackName>-<LogicalId>`` for template machines).
        status: ``RUNNING``, ``SUCCEEDED``, ``FAILED``, ``TIMED_OUT`` or ``ABORTED``.
        start, stop: virtual UTC instants (``stop`` None while running).
        transitions: states entered (what Standard workflows are billed for).
        events: the number of history events.
        error, cause: why it failed (None otherwise).
        output: the execution output (JSON text) when it succeeded.
    """

    name: str
    arn: str
    state_machine: str
    status: str
    start: datetime
    stop: datetime | None
    transitions: int
    events: int
    error: str | None = None
    cause: str | None = None
    output: str | None = None
    input: str | None = None

    @property
    def failed(self) -> bool:
        """True for ``FAILED``, ``TIMED_OUT`` and ``ABORTED``."""
        return self.status in _FAILED_STATUSES


@dataclass
class _Saved:
    env: dict[str, str | None] = field(default_factory=dict)
    threads: set[int] = field(default_factory=set)
    gc_threshold: tuple[int, int, int] | None = None


_CLOUDS_STOPPED = threading.Event()
_FROZEN = threading.Event()


def _freeze_what_stays() -> None:
    """When a cloud starts after another one stopped, move what stayed (modules, service models, caches) out
    of the garbage collector's way (``gc.freeze``): a full collection then walks only what this cloud and
    later ones make, not the hundreds of thousands of objects every cloud of the process shares. The last
    cloud's garbage is collected first, so none of it is kept. Once per process;
    ``LOCALCLOUD_NO_GC_FREEZE=1`` turns it off."""
    if _FROZEN.is_set() or not _CLOUDS_STOPPED.is_set() or os.environ.get("LOCALCLOUD_NO_GC_FREEZE"):
        return
    _FROZEN.set()
    gc.collect()
    gc.freeze()


GC_YOUNG_THRESHOLD = 10_000
"""The garbage collector's youngest-generation threshold while a cloud runs (CPython's default is 2,000)."""


def _fewer_collections() -> tuple[int, int, int] | None:
    """While a cloud runs, collect the youngest generation after :data:`GC_YOUNG_THRESHOLD` new container
    objects instead of CPython's 2,000 (the older generations keep their ratios, so each comes five times
    less often too). A lifecycle allocates millions of short-lived objects (botocore's and moto's request
    dictionaries, parsed JSON): most are freed by reference counting before a collection would see them, and
    with CPython's thresholds about a tenth of a lifecycle's CPU went to collections, most of it to the
    full ones that walk every live object of the cloud. What the simulation does is not changed: the
    clock's hang detector already ignores collection pauses. Returns the thresholds to put back on stop
    (None: left alone, when collection is off, already rarer, or ``LOCALCLOUD_NO_GC_FREEZE=1``)."""
    threshold = gc.get_threshold()
    if os.environ.get("LOCALCLOUD_NO_GC_FREEZE") or not gc.isenabled():
        return None
    if threshold[0] == 0 or threshold[0] >= GC_YOUNG_THRESHOLD:
        return None
    gc.set_threshold(GC_YOUNG_THRESHOLD, threshold[1], threshold[2])
    return threshold


class LocalCloud:
    """The local cloud (see the module docstring). Use as a context manager.

    Args:
        template: the SAM template.
        start: the first virtual instant (tz-aware; default :data:`DEFAULT_START`).
        seed: seeds everything random (event ids, request ids, the capacity market).
        faults: the fault injector (default: none).
        parameter_overrides: template parameter values.
        market: the emulated capacity market's configuration (default: the emulator's).
        stack_name, region, account_id: where the stack lives (deterministic names derive from them).
        iam: evaluate IAM for every call the stack's principals make (default on; see docs/localcloud.md).
            The policies are read from :attr:`stack` when the cloud starts, so a test may change them
            between construction and :meth:`start`.

    Raises:
        TemplateError: the template cannot be run locally (raised by the constructor).
    """

    def __init__(
        self,
        template: Path,
        *,
        start: datetime | None = None,
        seed: int = 7,
        faults: FaultInjector | None = None,
        parameter_overrides: dict[str, str] | None = None,
        market: Any | None = None,
        stack_name: str = "capacity-orchestrator",
        region: str = "us-east-1",
        account_id: str = "123456789012",
        iam: bool = True,
        caller_policies: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.stack = Stack.load(
            Path(template),
            stack_name=stack_name,
            region=region,
            account_id=account_id,
            parameter_overrides=parameter_overrides,
        )
        self.region = region
        self.account_id = account_id
        self.seed = seed
        self.market = market
        self.faults = faults if faults is not None else FaultInjector(seed=seed)
        self.clock = VirtualClock((start or DEFAULT_START).astimezone(UTC))
        self.timeline = Timeline(now=self.clock.now)
        self.outbox = Outbox(**slack_workspace(self.stack.local_values, Path(__file__).resolve().parents[1]))
        self.lambdas = LambdaRuntime(self.stack.functions, self.clock, self._base_env(), seed=seed)
        # The hang detector counts invocations started and ended as progress.
        self.clock.add_progress_source(lambda: self.lambdas.started + len(self.lambdas.records))
        self.delivery = EventDelivery(
            account_id=account_id,
            region=region,
            lambdas=self.lambdas,
            timeline=self.timeline,
            touch=self.clock.touch,
            now=self.clock.now,
            seed=seed,
            label=self._short,
            faults=self.faults,
        )
        self.emulator: Any = self._make_emulator()
        self.iam: Iam | None = None
        if iam:
            lookups = CloudLookups(
                self.emulator, self.lambdas, account_id=account_id, partition=self.stack.partition
            )
            self.iam = Iam(self.stack, lookups=lookups, now=self.clock.now, on_denial=self._record_denial)
            self._attach_caller_policies(caller_policies)
            self.lambdas.principal_scope = self.iam.function_scope
            self.delivery.authorizer = self.iam
        self.dispatcher = Dispatcher(
            clock=self.clock,
            lambdas=self.lambdas,
            emulator=self.emulator,
            faults=self.faults,
            authorizer=self.iam,
        )
        self.scheduler = SchedulerTicker(
            self.delivery, timeline=self.timeline, universal=self._universal_target
        )
        self.streams = StreamDelivery(
            self.stack.stream_mappings,
            lambdas=self.lambdas,
            now=self.clock.now,
            touch=self.clock.touch,
            faults=self.faults,
            timeline=self.timeline,
            seed=seed,
            authorizer=self.iam,
            label=self._short,
        )
        self._mock: Any = None
        self._saved = _Saved()
        self._running = False
        self._session: boto3.session.Session | None = None
        self._clients: dict[tuple[str, str], Any] = {}
        self._final_executions: list[ExecutionSummary] | None = None
        self._api_responses: list[dict[str, Any]] = []
        self._iam_installed = contextlib.ExitStack()
        self.timeline.add_feed(self._lambda_entries)
        self.timeline.add_feed(self._slack_entries)
        self.timeline.add_feed(self._fault_entries)
        self.timeline.add_source(self._execution_entries)

    # ------------------------------------------------------------------------------------------ lifecycle

    def __enter__(self) -> LocalCloud:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Stand the cloud up (see the module docstring); :meth:`stop` undoes it.

        Raises:
            RuntimeError: this cloud or another one is already running in the process.
            TemplateError: a resource cannot be created (names the resource and the AWS error).
        """
        if self._running:
            raise RuntimeError("this local cloud is already running")
        if patches.installed():
            raise RuntimeError("another local cloud is running in this process; stop it first")
        _freeze_what_stays()
        self._saved = _Saved(
            env={key: os.environ.get(key) for key in [*_FAKE_ENV, "AWS_DEFAULT_REGION", "AWS_REGION"]},
            threads={t.ident for t in threading.enumerate() if t.ident is not None},
            gc_threshold=_fewer_collections(),
        )
        started: list[Callable[[], None]] = []
        try:
            if self.iam is not None:
                self.iam.index()  # every policy parsed once, before anything runs
                self._iam_installed.enter_context(self.iam.installed())
                started.append(self._uninstall_iam)
                self.clock.add_park_hooks(iam_context.on_park, iam_context.on_unpark)
            self.clock.start()
            started.append(self.clock.stop)
            self._mock = mock_aws(config=cast(Any, _MOTO_CONFIG))
            self._mock.start()
            started.append(self._mock.stop)
            # After moto's start, which sets its own fake keys (and puts the originals back on stop).
            os.environ.update(_FAKE_ENV)
            os.environ["AWS_DEFAULT_REGION"] = self.region
            os.environ["AWS_REGION"] = self.region
            self.delivery.install()
            started.append(self.delivery.uninstall)
            self.scheduler.install()
            started.append(self.scheduler.uninstall)
            patches.install(self.clock, self.dispatcher, outbox=self.outbox)
            started.append(patches.uninstall)
            stepfunctions.on_execution_end(self._execution_ended)
            self._running = True
            with self.dispatcher.exempt():
                self._deploy()
                self._after_deploy()
            self.streams.start()  # the event source mappings read from here on (IAM checked first)
            self.clock.add_ticker(self.scheduler)
            self.clock.add_ticker(self.delivery)  # late deliveries, retries, operator stops
            self.clock.add_ticker(self.streams)  # DynamoDB stream batches to their functions
            for ticker in getattr(self.emulator, "tickers", []) or []:
                self.clock.add_ticker(ticker)
            resources = len(self.stack.resources)
            self.timeline.add(Kind.NOTE, f"stack {self.stack.stack_name} deployed ({resources} resources)")
        except BaseException:
            self._running = False
            for undo in reversed(started):
                undo()
            self.lambdas.close()
            self._restore_env()
            raise

    def stop(self) -> None:
        """Tear the cloud down (safe to call twice); the timeline and results stay readable."""
        if not self._running:
            return
        try:
            self._final_executions = self._collect_executions()
        except Exception:  # a broken backend must not prevent the teardown
            self._final_executions = []
        stepfunctions.on_execution_end(None)  # the teardown's stops are not the application's business
        self._abort_running_executions()
        self.clock.stop()  # parked threads are abandoned, so no execution outlives this cloud
        # Threads still running are abandoned at their next wait; moto must not stop under them (their
        # calls would go out to AWS's endpoints) nor the next cloud start (they would act on it).
        running = self.clock.wait_for_threads(_THREADS_SETTLE_SECONDS, besides=self._saved.threads)
        if running:
            names = ", ".join(thread.name for thread in running)
            logger.warning("still running after the local cloud stopped: %s", names)
        patches.uninstall()
        self.scheduler.uninstall()
        self.delivery.uninstall()
        self.lambdas.close()
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        self._uninstall_iam()
        self._restore_env()
        self._running = False
        _CLOUDS_STOPPED.set()

    def _deploy(self) -> None:
        """Deploy the stack into moto, or put back what the same deploy left earlier in this process
        (:mod:`localcloud.snapshots`: the same state and call records, without the ~170 calls)."""
        if not snapshots.enabled():
            self.stack.deploy(self._boto_session())
            return
        key = snapshots.deploy_key(self.stack, self.clock.now())
        snapshot = snapshots.find(key)
        if snapshot is not None:
            self.dispatcher.record_calls(snapshot.restore())
            self.stack.deployed = True
            return
        first = len(self.dispatcher.calls)
        self.stack.deploy(self._boto_session())
        if not snapshots.known(key):
            snapshots.keep(key, self.dispatcher.calls[first:])

    def _after_deploy(self) -> None:
        """Run the template's after-deploy steps (``local_values.json`` ``AfterDeploy``), as a deployer runs
        them after ``sam deploy``: ``[{"script": <path from the checkout>, "args": [...]}]``. ``${Logical}``
        in an argument is that resource's physical id; a step naming a resource the stack lacks is skipped.
        The script runs in this process, as ``python <script> <args>``, against this cloud.

        Raises:
            RuntimeError: a script exited with a non-zero status (the message names it and the status).
        """
        root = Path(__file__).resolve().parents[1]
        for step in self.stack.local_values.get("AfterDeploy", []):
            script = root / str(step["script"])
            args: list[str] = []
            for arg in step.get("args", []):
                names = re.findall(r"\$\{(\w+)\}", str(arg))
                if any(name not in self.stack.resources for name in names):
                    args = []
                    break
                args.append(re.sub(r"\$\{(\w+)\}", lambda m: self.stack.physical_id(m.group(1)), str(arg)))
            else:
                self._run_script(script, args)

    def _run_script(self, script: Path, args: list[str]) -> None:
        saved, said = sys.argv, io.StringIO()
        sys.argv = [str(script), *args]
        try:
            with contextlib.redirect_stdout(said):
                runpy.run_path(str(script), run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise RuntimeError(
                    f"after-deploy step {script.name} exited {exit_.code}: {said.getvalue()}"
                ) from None
        finally:
            sys.argv = saved
        self.timeline.add(Kind.NOTE, f"after deploy: {script.name}: {said.getvalue().strip() or 'done'}")

    def _uninstall_iam(self) -> None:
        self._iam_installed.close()

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._running

    # ------------------------------------------------------------------------------------------ clients

    def client(self, service: str, region: str | None = None) -> Any:
        """A boto3 client into this cloud (standard retry mode with 5 retries, as the application configures).

        Raises:
            RuntimeError: the cloud is not running.
        """
        if not self._running:
            raise RuntimeError("the local cloud is not running")
        key = (service, region or self.region)
        client = self._clients.get(key)
        if client is None:  # one per service and region: a client is thread-safe and ~10 ms to make
            session: Any = self._boto_session()
            client = session.client(
                service,
                region_name=key[1],
                config=botocore.config.Config(retries={"mode": "standard", "max_attempts": 5}),
            )
            client = self._clients.setdefault(key, client)
        return client

    def _boto_session(self) -> boto3.session.Session:
        if self._session is None:
            self._session = boto3.session.Session(
                aws_access_key_id=_FAKE_ENV["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=_FAKE_ENV["AWS_SECRET_ACCESS_KEY"],
                region_name=self.region,
            )
        return self._session

    # ------------------------------------------------------------------------------------------- doors

    def api_request(self, event: dict[str, Any]) -> dict[str, Any]:
        """Serve one API Gateway REST proxy event synchronously, as API Gateway does; returns the response.

        The route is found from ``httpMethod`` and ``resource`` (or ``path``) among the template's Api
        events; the function is invoked directly (``RequestResponse``). As API Gateway does, a function
        error or a malformed proxy response answers 502 ``{"message": "Internal server error"}``; no route
        answers 403 ``{"message": "Missing Authentication Token"}``; an ``AWS_IAM`` route checks the caller's
        ``execute-api:Invoke`` first (:meth:`_caller_refused`).

        Returns:
            ``{"statusCode", "headers", "multiValueHeaders", "body", "isBase64Encoded"}``.
        """
        self._require_running()
        method = str(event.get("httpMethod", "GET")).upper()
        path = str(event.get("path") or "/")
        route, path_parameters = self._find_route(method, str(event.get("resource") or ""), path)
        self.timeline.add(Kind.API, f"{method} {path}", method=method, path=path)
        if route is None:
            return self._api_answer(method, path, 403, {"message": "Missing Authentication Token"})
        event = dict(event)
        event.setdefault("resource", route.path)
        if path_parameters and not event.get("pathParameters"):
            event["pathParameters"] = path_parameters
        context = dict(event.get("requestContext") or {})
        context.setdefault("stage", route.stage)
        context.setdefault("resourcePath", route.path)
        context.setdefault("httpMethod", method)
        context.setdefault("apiId", route.api_id)
        context.setdefault("accountId", self.account_id)
        context.setdefault("requestTimeEpoch", int(self.clock.now().timestamp() * 1000))
        event["requestContext"] = context
        refused = self._caller_refused(route, event, method, path)
        if refused is not None:
            return refused
        spec = self.stack.function(route.function)
        if self.iam is not None:
            # API Gateway invokes the function through its resource-based policy (AWS::Lambda::Permission);
            # without one it answers 500 "Internal server error" ("Invalid permissions on Lambda function").
            source = f"arn:{self.stack.partition}:execute-api:{self.region}:{self.account_id}:{route.api_id}/"
            source += f"{context['stage']}/{method}{path}"
            denial = self.iam.authorize_service(
                "apigateway.amazonaws.com",
                "lambda:InvokeFunction",
                spec.arn,
                source_arn=source,
                operation="Invoke",
            )
            if denial is not None:
                return self._api_answer(method, path, 500, {"message": "Internal server error"})
        with self.clock.outside():  # an HTTP request of `serve` may come while nothing runs the simulation
            result = self.lambdas.invoke(
                spec.arn, json.dumps(event).encode(), invocation_type="RequestResponse"
            )
        if result.function_error:
            return self._api_answer(method, path, 502, {"message": "Internal server error"})
        try:
            response = json.loads(result.payload or b"null")
        except ValueError:
            response = None
        if not isinstance(response, dict) or not isinstance(response.get("statusCode"), int):
            return self._api_answer(method, path, 502, {"message": "Internal server error"})
        answer = {
            "statusCode": response["statusCode"],
            "headers": dict(response.get("headers") or {}),
            "multiValueHeaders": dict(response.get("multiValueHeaders") or {}),
            "body": response.get("body") or "",
            "isBase64Encoded": bool(response.get("isBase64Encoded", False)),
        }
        self._record_api_answer(method, path, answer)
        return answer

    def _find_route(self, method: str, resource: str, path: str) -> tuple[Any, dict[str, str]]:
        for route in self.stack.api_routes:
            if resource and route.path == resource and route.method in ("ANY", method):
                return route, route.matches(method, path) or {}
        for route in self.stack.api_routes:
            params = route.matches(method, path)
            if params is not None:
                return route, params
        return None, {}

    def _attach_caller_policies(self, caller_policies: Mapping[str, Sequence[str]] | None) -> None:
        """The API callers' identity policies: ``{policy file (from the repository root): [principal ARN
        patterns]}``, by default ``CallerPolicies`` of local_values.json (the deploy/*-policy.json an
        administrator attaches, docs/deploy.md)."""
        if self.iam is None:
            return
        if caller_policies is None:
            section = self.stack.local_values.get("CallerPolicies") or {}
            caller_policies = {k: v for k, v in section.items() if not k.startswith("_")}
        root = Path(__file__).resolve().parents[1]
        for source, principals in caller_policies.items():
            document = json.loads((root / source).read_text(encoding="utf-8"))
            for principal in principals:
                self.iam.add_caller_policy(principal, document, source=source)

    def _caller_refused(
        self, route: Any, event: dict[str, Any], method: str, path: str
    ) -> dict[str, Any] | None:
        """API Gateway's check of an ``AWS_IAM`` route before it invokes anything: a request without a caller
        is 403 ``Missing Authentication Token``; a caller whose identity policies do not allow
        ``execute-api:Invoke`` on the route's ARN is 403 with AWS's message (``x-amzn-ErrorType:
        AccessDeniedException``)."""
        if self.iam is None or route.auth != "AWS_IAM":
            return None
        identity = (event.get("requestContext") or {}).get("identity") or {}
        caller = str(identity.get("userArn") or "")
        if not caller:
            return self._api_answer(method, path, 403, {"message": "Missing Authentication Token"})
        stage = event["requestContext"]["stage"]
        resource = (
            f"arn:{self.stack.partition}:execute-api:{self.region}:{self.account_id}:{route.api_id}/{stage}/"
            f"{method}{path}"
        )
        if self.iam.authorize_caller(caller, resource, operation=f"{method} {route.path}") is None:
            return None
        message = f"User: {caller} is not authorized to perform: execute-api:Invoke on resource: {resource}"
        answer = self._api_answer(method, path, 403, {"Message": message})
        answer["headers"]["x-amzn-ErrorType"] = "AccessDeniedException"
        return answer

    def _api_answer(self, method: str, path: str, status: int, body: dict[str, Any]) -> dict[str, Any]:
        answer = {
            "statusCode": status,
            "headers": {"Content-Type": "application/json"},
            "multiValueHeaders": {},
            "body": json.dumps(body),
            "isBase64Encoded": False,
        }
        self._record_api_answer(method, path, answer)
        return answer

    def _record_api_answer(self, method: str, path: str, answer: dict[str, Any]) -> None:
        self._api_responses.append(answer)
        body = str(answer["body"])
        short = body if len(body) <= 200 else body[:197] + "..."
        self.timeline.add(
            Kind.API, f"{method} {path} -> {answer['statusCode']} {short}", status=answer["statusCode"]
        )

    def put_events(self, entries: list[dict[str, Any]]) -> list[str]:
        """``PutEvents`` (entries in the API's shape); returns the event ids.

        Raises:
            ValueError: an entry was rejected (the message has EventBridge's error code and message).
        """
        self._require_running()
        answer = self.client("events").put_events(Entries=entries)
        failures = [entry for entry in answer["Entries"] if "ErrorCode" in entry]
        if failures:
            raise ValueError(f"PutEvents rejected entries: {failures}")
        return [str(entry["EventId"]) for entry in answer["Entries"]]

    # --------------------------------------------------------------------------------------------- time

    def run(
        self,
        *,
        until: datetime | None = None,
        stop_when: Callable[[], bool] | None = None,
        stall_seconds: float | None = None,
        progress: Callable[[RunProgress], None] | None = None,
    ) -> RunResult:
        """Advance the simulation (see :meth:`VirtualClock.run`: no wall-time cap, a hang detector that ends
        the run after ``stall_seconds`` of real time without progress, default
        :func:`~localcloud.clock.default_stall_seconds`)."""
        self._require_running()
        return self.clock.run(
            until=until, stop_when=stop_when, stall_seconds=stall_seconds, progress=progress
        )

    def run_until_idle(
        self, stall_seconds: float | None = None, progress: Callable[[RunProgress], None] | None = None
    ) -> RunResult:
        """Run until nothing is left to do (no sleeper, no foreground ticker work, nothing running)."""
        self._require_running()
        return self.clock.run_until_idle(stall_seconds=stall_seconds, progress=progress)

    def now(self) -> datetime:
        """The virtual time (UTC)."""
        return self.clock.now()

    # ------------------------------------------------------------------------------------------ results

    def executions(self) -> list[ExecutionSummary]:
        """Every execution of the stack's state machines (and any created at run time), oldest first.

        After :meth:`stop`, the executions as they were when the cloud stopped.
        """
        if not self._running:
            return list(self._final_executions or [])
        return self._collect_executions()

    def billable_resources(self) -> list[Any]:
        """What would still cost money on AWS (the emulator's endpoints, components, reservations...)."""
        if self.emulator is None or not hasattr(self.emulator, "billable_resources"):
            return []
        return list(self.emulator.billable_resources())

    def api_responses(self) -> list[dict[str, Any]]:
        """Every response :meth:`api_request` answered, in order."""
        return list(self._api_responses)

    def _collect_executions(self) -> list[ExecutionSummary]:
        sfn = self.client("stepfunctions")
        # The histories are only counted: read moto's own (GetExecutionHistory's answer before moto
        # serializes it; serializing hundreds of events per execution was most of a long test's teardown).
        backend = moto_sfn.get_backend(self.account_id, self.region)
        summaries: list[ExecutionSummary] = []
        with self.dispatcher.exempt():
            for machine in sfn.list_state_machines()["stateMachines"]:
                for item in sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]:
                    described = sfn.describe_execution(executionArn=item["executionArn"])
                    events = backend.get_execution_history(item["executionArn"])["events"]
                    summaries.append(
                        ExecutionSummary(
                            # moto names an execution started without ``name`` "None"; AWS uses a UUID.
                            name=str(item.get("name") or item["executionArn"].rsplit(":", 1)[-1]),
                            arn=str(item["executionArn"]),
                            state_machine=machine["name"],
                            status=described["status"],
                            start=described["startDate"].astimezone(UTC),
                            stop=described["stopDate"].astimezone(UTC) if described.get("stopDate") else None,
                            transitions=sum(1 for e in events if _event_type(e).endswith("StateEntered")),
                            events=len(events),
                            error=described.get("error"),
                            cause=described.get("cause"),
                            output=described.get("output"),
                            input=described.get("input"),
                        )
                    )
        return sorted(summaries, key=lambda s: (s.start, s.name))

    # ----------------------------------------------------------------------------------- timeline feeds

    def _short(self, name: str) -> str:
        prefix = f"{self.stack.stack_name}-"
        return name[len(prefix) :] if name.startswith(prefix) else name

    def _lambda_entries(self, start: int) -> Sequence[TimelineEntry]:
        return [self._lambda_entry(record) for record in self.lambdas.records[start:]]

    def _lambda_entry(self, record: InvocationRecord) -> TimelineEntry:
        outcome = "ok" if record.error_type is None else f"failed: {record.error_type}"
        if record.error_type is not None:
            try:
                message = json.loads(record.payload).get("errorMessage", "")
            except (ValueError, AttributeError):
                message = ""
            if message:
                outcome += f" ({message[:160]})"
        mode = "" if record.invocation_type == "RequestResponse" else " (async)"
        attempt = f" attempt {record.attempt}" if record.attempt > 1 else ""
        return TimelineEntry(
            record.start,
            Kind.LAMBDA,
            f"{self._short(record.function)}{mode}{attempt} -> {outcome}",
            {"function": record.function, "error_type": record.error_type, "log": record.log},
        )

    def _slack_entries(self, start: int) -> Sequence[TimelineEntry]:
        return [
            TimelineEntry(message.at, Kind.SLACK, slack_text(message), {"channel": message.channel})
            for message in self.outbox.messages[start:]
        ]

    def _fault_entries(self, start: int) -> Sequence[TimelineEntry]:
        return [
            TimelineEntry(
                fault.at, Kind.FAULT, f"{fault.kind.value} on {fault.service} {fault.operation}", {}
            )
            for fault in self.faults.fired[start:]
        ]

    def _execution_entries(self) -> Iterable[TimelineEntry]:
        try:
            summaries = self.executions()
        except Exception:
            return []
        announced = {entry.detail.get("execution_arn") for entry in self.timeline.recorded(Kind.EXECUTION)}
        entries: list[TimelineEntry] = []
        for summary in summaries:
            machine = self._short(summary.state_machine)
            if summary.arn not in announced:
                entries.append(
                    TimelineEntry(
                        summary.start,
                        Kind.EXECUTION,
                        f"{machine}: execution {summary.name[:8]} started",
                        {"execution_arn": summary.arn},
                    )
                )
            if summary.stop is not None:
                why = f" {summary.error}: {summary.cause}" if summary.error else ""
                entries.append(
                    TimelineEntry(
                        summary.stop,
                        Kind.EXECUTION,
                        f"{machine}: execution {summary.name[:8]} {summary.status} after "
                        f"{summary.transitions} state transitions{why}",
                        {"execution_arn": summary.arn, "status": summary.status},
                    )
                )
        return entries

    # ----------------------------------------------------------------------------------------- internals

    def _require_running(self) -> None:
        if not self._running:
            raise RuntimeError("the local cloud is not running (use it as a context manager)")

    def _base_env(self) -> dict[str, str]:
        return {**_FAKE_ENV, "AWS_DEFAULT_REGION": self.region, "AWS_REGION": self.region}

    def _make_emulator(self) -> EmulatorLike | None:
        try:
            module = importlib.import_module("localcloud.emulator")
        except ImportError:
            return None
        Emulator = getattr(module, "Emulator", None)  # noqa: N806 - a class
        if Emulator is None:
            self.timeline.add(Kind.NOTE, "no AWS emulator available: SageMaker/EC2 capacity APIs go to moto")
            return None
        parameters = inspect.signature(Emulator).parameters
        kwargs: dict[str, Any] = {"seed": self.seed, "events": self.delivery, "account_id": self.account_id}
        if "market" in parameters and self.market is not None:
            kwargs["market"] = self.market
        if "clock" in parameters:
            kwargs["clock"] = self.clock
        emulator: EmulatorLike = Emulator(**kwargs)
        return emulator

    def _universal_target(
        self, service: str, operation: str, params: dict[str, Any], caller: TargetCaller
    ) -> Any:
        """Call an API as a Scheduler universal target does: as the schedule's role (IAM evaluates the call),
        without client faults (AWS calls it).

        Raises:
            PermissionError: Scheduler may not assume the schedule's role (its trust policy).
        """
        client = self.client(_AWS_SDK_SERVICES.get(service, service))
        import botocore  # noqa: PLC0415

        if self.iam is None:
            with self.dispatcher.exempt():
                return getattr(client, botocore.xform_name(operation))(**params)
        denial = self.iam.assume(caller)
        if denial is not None:
            raise PermissionError(denial.message)
        with self.dispatcher.exempt(), self.iam.target_scope(caller):
            return getattr(client, botocore.xform_name(operation))(**params)

    def _record_denial(self, denial: Denial) -> None:
        who = denial.role or denial.principal
        self.timeline.add(
            "iam",
            f"denied: {who} {denial.action} on {denial.resource} ({denial.service} {denial.operation})",
            role=denial.role,
            principal=denial.principal,
            action=denial.action,
            resource=denial.resource,
            explicit=denial.explicit,
        )

    def _execution_ended(self, execution: Any) -> None:
        """Step Functions' "Step Functions Execution Status Change" event for an execution that ended, on the
        default bus of its region (AWS puts one for every status change of a Standard workflow's execution,
        ``RUNNING`` too; the application listens to the final ones). Times are epoch milliseconds."""
        now = self.clock.now()
        start = getattr(execution, "start_date", None)
        output = getattr(execution, "output", None)
        self.delivery.put_aws_event(
            source="aws.states",
            detail_type="Step Functions Execution Status Change",
            detail={
                "executionArn": execution.exec_arn,
                "stateMachineArn": execution.state_machine.arn,
                "name": execution.name,
                "status": execution.exec_status.value,
                "startDate": int(start.timestamp() * 1000) if start is not None else None,
                "stopDate": int(now.timestamp() * 1000),
                "input": json.dumps(execution.input_data),
                "inputDetails": {"included": True},
                "output": json.dumps(output) if output is not None else None,
                "outputDetails": {"included": True} if output is not None else None,
                "error": execution.error,
                "cause": execution.cause,
            },
            resources=[execution.exec_arn],
            region=execution.region_name,
        )

    def _abort_running_executions(self) -> None:
        from moto.stepfunctions.responses import get_backend  # noqa: PLC0415

        try:
            backend = get_backend(self.account_id, self.region)
            for machine in list(backend.state_machines):
                for execution in list(machine.executions):
                    if execution.status == "RUNNING":
                        backend.stop_execution(execution.execution_arn)
        except Exception:  # noqa: S110 - best effort during teardown
            pass

    def _restore_env(self) -> None:
        for key, value in self._saved.env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if self._saved.gc_threshold is not None:
            gc.set_threshold(*self._saved.gc_threshold)
            self._saved.gc_threshold = None


def _event_type(event: Any) -> str:
    """A history event's type as the API spells it (moto keeps an enum member)."""
    kind = event["type"]
    return str(getattr(kind, "value", kind))


def slack_text(message: OutboxMessage) -> str:
    """A Slack message as a person in the channel reads it: the blocks rendered as text, else ``text``."""
    where = message.channel or message.kind
    if message.payload.get("thread_ts"):  # a reply in a reservation's thread (requests made in Slack)
        where += ", in thread"
    rendered = render_blocks(message.blocks)
    body = rendered or message.text
    return f"[{message.kind} {where}] {body}" if body else f"[{message.kind} {where}]"


def render_blocks(blocks: list[dict[str, Any]]) -> str:
    """Block Kit blocks as plain text (header, section text and fields, context, rich text, actions)."""
    lines: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "header":
            lines.append(str(_text_of(block.get("text"))).upper())
        elif kind == "section":
            if block.get("text"):
                lines.append(_text_of(block["text"]))
            fields = [_text_of(f) for f in block.get("fields") or []]
            if fields:
                lines.append("  |  ".join(fields))
        elif kind == "context":
            lines.append("  ".join(_text_of(e) for e in block.get("elements") or [] if e.get("text")))
        elif kind == "actions":
            labels = [_text_of(e.get("text")) for e in block.get("elements") or [] if e.get("text")]
            lines.append("[" + "] [".join(labels) + "]" if labels else "")
        elif kind == "divider":
            lines.append("-" * 40)
        elif kind == "rich_text":
            lines.append(_rich_text(block.get("elements") or []))
    return "\n".join(line for line in lines if line)


def _text_of(value: Any) -> str:
    if isinstance(value, dict):
        return str(value.get("text", ""))
    return "" if value is None else str(value)


def _rich_text(elements: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for element in elements:
        if "elements" in element:
            parts.append(_rich_text(element["elements"]))
        elif "text" in element:
            parts.append(str(element["text"]))
    return "".join(parts)
