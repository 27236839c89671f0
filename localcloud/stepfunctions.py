"""Put moto's Step Functions interpreter on the virtual clock.

moto 5.2.5 executes ASL with the interpreter it took from LocalStack
(``moto/stepfunctions/parser/asl``). It waits in real time in a few places; this module swaps, inside
those modules only, the ``threading``/``time`` names they use for clock-aware stand-ins:

- ``Wait`` states: ``WaitFunction._wait_interval`` waits on ``env.program_state_event`` (an ``Event``
  created in ``asl/eval/environment.py``) for the number of seconds; the event now waits on the clock.
- ``Retry`` intervals: ``retrier_decl.py`` calls ``time.sleep(interval)``; now the clock's sleep.
- Task ``TimeoutSeconds``: ``ExecuteState._evaluate_with_timeout`` waits on a ``threading.Event`` for
  the timeout (``execute_state.py``); ``.waitForTaskToken`` waits (``CallbackEndpoint.wait``,
  ``HeartbeatEndpoint.clear_and_wait`` in ``asl/eval/callback/callback.py``) use ``Event`` too; all now
  wait on virtual time. moto's "no timeout" value (``TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS``,
  99999999 s) is treated as no timeout at all, so an idle simulation never jumps three years ahead.
- Execution ``TimeoutSeconds``: ``Program.eval`` joins the worker thread with a timeout; the join now
  waits on virtual time. Without a timeout too it parks in the clock, as a ``Map``'s wait for its jobs does
  (``JobPool.await_jobs``): the clock knows at once that such a thread waits, where a real join or
  ``Event.wait`` is only inferred from the thread's frame, by sampling with real sleeps.
- ``.sync`` polling (``state_task_service_callback.py``) sleeps on the clock.

Lambda errors reach ASL with the function's ``errorType`` as the error name: moto's
``StateTaskLambda._from_error`` reads it from the ``FunctionError`` payload the local Lambda runtime
returns (``{"errorType": <exception class name>, ...}``), so ``Retry``/``Catch`` by name work. A Lambda
*service* error on ``Invoke`` (throttling, a 5xx) is named as Step Functions names it for a Lambda task,
``Lambda.<error code>`` (``Lambda.TooManyRequestsException``, ``Lambda.ServiceException``...), where moto
says ``Exception``: :func:`_lambda_service_error` replaces ``StateTaskLambda._from_error`` for that case,
so the state machines' ``Retry`` on those names applies locally as on AWS.

An optimized Step Functions integration (``arn:aws:states:::states:startExecution``, the reserve workflow's
continue-as-new) takes its ``Parameters`` as Step Functions documents them (``StateMachineArn``, ``Name``,
``Input``) and answers ``{"ExecutionArn", "StartDate"}``, as on AWS: moto 5.2.5 hands the parameters to
botocore unchanged (LocalStack's ``_normalise_parameters`` maps them onto the API's shape; moto left it a
no-op), so botocore fails on ``StateMachineArn`` (a ``States.Runtime`` error). :func:`_sfn_to_boto` maps them
onto the ``StartExecution`` shape (``stateMachineArn``, ``name``, ``input``) and the answer back.

``StopExecution`` of a running execution ends it ``ABORTED`` for good, as on AWS: moto's
``Environment.set_error``/``set_timed_out`` would overwrite the stop when the task that was running (a
Lambda still in its call) fails afterwards, and report ``FAILED``; :func:`_unless_stopped` keeps the stop.
The running Lambda finishes (AWS does not stop it either) and is not retried.

An execution that ends (``SUCCEEDED``, ``FAILED``, ``TIMED_OUT``, ``ABORTED``) is reported to the sink set
with :func:`on_execution_end`: the local cloud puts Step Functions' "Step Functions Execution Status Change"
event on the region's default bus, as AWS does for every Standard workflow.

moto's interpreter appends every thread it starts to ``moto.stepfunctions.parser.utils.TMP_THREADS``
and never removes one (LocalStack joined them at shutdown); each holds its clock, and through it a whole
cloud. :func:`uninstall` empties the list, so a process that runs many clouds (the test suite, the soak)
does not keep every one of them, and the garbage collector's full passes stay short.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from botocore.exceptions import ClientError

from localcloud.clock import VirtualClock

# moto's "no timeout" sentinel (TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS).
_NO_TIMEOUT_SECONDS = 99_999_999

_state: dict[str, Any] = {}
_EXECUTION = "moto.stepfunctions.parser.backend.execution"
_THREAD_REGISTRY = "moto.stepfunctions.parser.utils"


def on_execution_end(sink: Callable[[Any], None] | None) -> None:
    """Call ``sink(execution)`` (moto's parser ``Execution``, its status set) whenever an execution ends;
    None: stop reporting."""
    if sink is None:
        _state.pop("on_end", None)
    else:
        _state["on_end"] = sink


def _reporting_end(original: Any) -> Any:
    """``BaseExecutionWorkerCommunication.terminated`` that reports the ended execution to the sink."""

    def terminated(self: Any) -> None:
        original(self)
        sink = _state.get("on_end")
        if sink is not None:
            sink(self.execution)

    return terminated


def _active_clock() -> VirtualClock | None:
    clock: VirtualClock | None = _state.get("clock")
    if clock is None or not clock.started:
        return None
    return clock


def _virtual_timeout(timeout: float | None) -> float | None:
    if timeout is None or timeout >= _NO_TIMEOUT_SECONDS:
        return None
    return timeout


def _clock_of(waitable: Any) -> VirtualClock | None:
    """The clock ``waitable`` was made under, else the running one. Once stopped, that clock abandons its
    simulation's threads rather than let a finished execution go on in real time (into the next cloud)."""
    own: VirtualClock | None = getattr(waitable, "_localcloud_clock", None)
    return own if own is not None else _active_clock()


class ClockEvent(threading.Event):
    """A ``threading.Event`` whose ``wait(timeout)`` counts the timeout in virtual time."""

    def __init__(self) -> None:
        super().__init__()
        self._localcloud_clock: VirtualClock | None = _state.get("clock")

    def wait(self, timeout: float | None = None) -> bool:
        clock = _clock_of(self)
        if clock is None:
            return super().wait(timeout)
        return clock.wait_event(self, _virtual_timeout(timeout))


class ClockThread(threading.Thread):
    """A ``threading.Thread`` whose ``join(timeout)`` counts the timeout in virtual time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._localcloud_finished = threading.Event()
        self._localcloud_clock: VirtualClock | None = _state.get("clock")

    def run(self) -> None:
        try:
            super().run()
        finally:
            self._localcloud_finished.set()

    def join(self, timeout: float | None = None) -> None:
        clock = _clock_of(self)
        if clock is None or self.ident is None or self is threading.current_thread():
            super().join(timeout)  # the errors Thread.join raises for these
            return
        # Without a timeout too: a thread parked in the clock is known to wait at once, where a real join
        # is only inferred from its frame by sampling (every execution's worker waits this way).
        if clock.wait_event(self._localcloud_finished, _virtual_timeout(timeout)):
            # The target returned; the thread is only unwinding, so is_alive() turns False at once.
            super().join()


class _ThreadingShim(ModuleType):
    """The ``threading`` module, with ``Event`` and ``Thread`` replaced by the clock-aware classes."""

    Event = ClockEvent
    Thread = ClockThread

    def __getattr__(self, name: str) -> Any:
        return getattr(threading, name)


class _TimeShim(ModuleType):
    """The ``time`` module, with ``sleep`` on the virtual clock."""

    @staticmethod
    def sleep(seconds: float) -> None:
        clock: VirtualClock | None = _state.get("clock")
        if clock is None:
            time.sleep(seconds)
        else:
            clock.sleep(seconds)  # a stopped clock abandons an interpreter thread there

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


_PARSER = "moto.stepfunctions.parser"
# (module, attribute, replacement factory)
_PATCHES: tuple[tuple[str, str, str], ...] = (
    (f"{_PARSER}.asl.eval.environment", "threading", "threading"),
    (f"{_PARSER}.asl.component.state.exec.execute_state", "threading", "threading"),
    (f"{_PARSER}.asl.component.program.program", "threading", "threading"),
    (f"{_PARSER}.asl.component.state.exec.state_map.iteration.job", "threading", "threading"),
    (f"{_PARSER}.asl.eval.callback.callback", "Event", "Event"),
    (f"{_PARSER}.asl.component.common.retry.retrier_decl", "time", "time"),
    (f"{_PARSER}.asl.component.state.exec.state_task.service.state_task_service_callback", "time", "time"),
)

_saved: list[tuple[Any, str, Any]] = []
_GENERIC_5XX = frozenset({"InternalFailure", "InternalError", "InternalServerError", "ServiceUnavailable"})
_LAMBDA_TASK = f"{_PARSER}.asl.component.state.exec.state_task.state_task_lambda"
_ENVIRONMENT = f"{_PARSER}.asl.eval.environment"
_PROGRAM_STATE = f"{_PARSER}.asl.eval.program_state"


def _unless_stopped(original: Any) -> Any:
    """``Environment.set_error``/``set_timed_out`` leaving a stopped program (``StopExecution``) stopped."""
    stopped = importlib.import_module(_PROGRAM_STATE).ProgramStopped

    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(getattr(self, "_program_state", None), stopped):
            return None
        return original(self, *args, **kwargs)

    return guarded


def lambda_error_name(exc: ClientError) -> str:
    """The Step Functions error name of a Lambda ``Invoke`` service error: ``Lambda.<code>`` (AWS Step
    Functions developer guide, "Handling errors": ``Lambda.ServiceException``,
    ``Lambda.TooManyRequestsException``...)."""
    code = str(exc.response.get("Error", {}).get("Code") or "ServiceException")
    if code in _GENERIC_5XX:  # Lambda's own 5xx for an internal failure is ServiceException
        code = "ServiceException"
    return code if code.startswith("Lambda.") else f"Lambda.{code}"


def _lambda_service_error(original: Any) -> Any:
    """``StateTaskLambda._from_error`` naming a :class:`ClientError` ``Lambda.<code>``, else ``original``."""

    def _from_error(self: Any, env: Any, ex: Exception) -> Any:
        if not isinstance(ex, ClientError):
            return original(self, env, ex)
        module = importlib.import_module(_LAMBDA_TASK)
        error = lambda_error_name(ex)
        return module.FailureEvent(
            env=env,
            error_name=module.CustomErrorName(error),
            event_type=module.HistoryEventType.LambdaFunctionFailed,
            event_details=module.EventDetails(
                lambdaFunctionFailedEventDetails=module.LambdaFunctionFailedEventDetails(
                    error=error, cause=str(ex.response.get("Error", {}).get("Message", ""))
                )
            ),
        )

    return _from_error


_SFN_TASK = f"{_PARSER}.asl.component.state.exec.state_task.service.state_task_service_sfn"


def _sfn_to_boto(original: Any) -> Any:
    """``StateTaskServiceSfn._normalise_parameters`` that then maps the (Step Functions cased) parameters
    onto the botocore input shape of the action (``StartExecution``: ``stateMachineArn``...)."""

    def _normalise_parameters(
        self: Any,
        parameters: dict[str, Any],
        boto_service_name: str | None = None,
        service_action_name: str | None = None,
    ) -> None:
        original(self, parameters, boto_service_name, service_action_name)
        import botocore.session  # noqa: PLC0415 - only when a workflow uses the integration

        model = botocore.session.get_session().get_service_model("stepfunctions")
        action = "".join(part.title() for part in str(self._get_boto_service_action()).split("_"))
        self._to_boto_request(parameters, model.operation_model(action).input_shape)

    return _normalise_parameters


def _sfn_from_boto(
    self: Any, response: Any, boto_service_name: str | None = None, service_action_name: str | None = None
) -> None:
    """``StateTaskServiceSfn._normalise_response``: the answer in Step Functions' casing (``ExecutionArn``,
    ``StartDate`` as ISO 8601 text), as the integration returns it on AWS."""
    if not isinstance(response, dict):
        return
    for key in list(response):
        value = response.pop(key)
        response[self._to_sfn_cased(key)] = value.isoformat() if hasattr(value, "isoformat") else value


def install(clock: VirtualClock) -> None:
    """Route the interpreter's waits through ``clock`` (idempotent; :func:`uninstall` reverts).

    Raises:
        ImportError: moto's interpreter modules moved (moto is pinned at 5.2.5 for this reason).
    """
    _state["clock"] = clock
    if _saved:
        return
    replacements: dict[str, Any] = {
        "threading": _ThreadingShim("threading"),
        "time": _TimeShim("time"),
        "Event": ClockEvent,
    }
    for module_name, attribute, kind in _PATCHES:
        module = importlib.import_module(module_name)
        if not hasattr(module, attribute):
            raise ImportError(f"{module_name} has no {attribute!r}: moto's interpreter changed")
        _saved.append((module, attribute, getattr(module, attribute)))
        setattr(module, attribute, replacements[kind])
    sfn_task = importlib.import_module(_SFN_TASK).StateTaskServiceSfn
    for name, replacement in (
        ("_normalise_parameters", _sfn_to_boto(sfn_task.__dict__["_normalise_parameters"])),
        ("_normalise_response", _sfn_from_boto),
    ):
        _saved.append((sfn_task, name, sfn_task.__dict__.get(name, getattr(sfn_task, name))))
        setattr(sfn_task, name, replacement)
    task = importlib.import_module(_LAMBDA_TASK).StateTaskLambda
    _saved.append((task, "_from_error", task.__dict__["_from_error"]))
    task._from_error = _lambda_service_error(task.__dict__["_from_error"])
    environment = importlib.import_module(_ENVIRONMENT).Environment
    for name in ("set_error", "set_timed_out"):
        _saved.append((environment, name, environment.__dict__[name]))
        setattr(environment, name, _unless_stopped(environment.__dict__[name]))
    communication = importlib.import_module(_EXECUTION).BaseExecutionWorkerCommunication
    _saved.append((communication, "terminated", communication.__dict__["terminated"]))
    communication.terminated = _reporting_end(communication.__dict__["terminated"])


def uninstall() -> None:
    """Put moto's interpreter back on real time."""
    while _saved:
        module, attribute, original = _saved.pop()
        setattr(module, attribute, original)
    # Only moto appends to it; nothing reads it.
    importlib.import_module(_THREAD_REGISTRY).TMP_THREADS.clear()
    _state.pop("clock", None)
    _state.pop("on_end", None)
