"""The words the workflows are written in (issue 32): steps, what each may throw, the one policy it follows.

A workflow's spec (``statemachines/reserve_capacity.py`` and its siblings) lists its states with the builders
below; :func:`render` writes the Amazon States Language that SAM deploys (``statemachines/*.asl.json``,
committed; ``make asl`` writes them, ``tests/gates/test_workflow_specs.py`` fails when they drift). A spec
never writes a ``Retry`` or a ``Catch``: a task names its :class:`Policy` (``statemachines/policies.py``: each
written once) and what it may throw beyond it (``throws``: a :class:`Retrier`, or :func:`catch` naming the
state that handles the error). A policy that perseveres (money at stake) sends a transient fault that
outlasted its retries to ``Persevere<step>``, which notes the step and enters the policy's loop; the loop's
``Resume`` choice goes back to the step. Both are generated here, one per persevering step, never written
by hand.

Build time only: nothing deployed imports this package (an import-linter contract).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

Json = dict[str, Any]

ALL = "States.ALL"


@dataclass(frozen=True)
class Retrier:
    """One ``Retry`` entry: the errors, the first interval (s), the attempts, the backoff rate, the longest
    interval (s) and full jitter (the ASL fields of the same names; None leaves a field out)."""

    errors: tuple[str, ...]
    interval: int | None = None
    attempts: int = 0
    backoff: float | None = None
    max_delay: int | None = None
    jitter: bool = False
    comment: str | None = None

    def times(self, attempts: int, max_delay: int | None = None) -> Retrier:
        """The same retrier with another number of attempts (and longest interval)."""
        return replace(self, attempts=attempts, max_delay=max_delay or self.max_delay)

    def without(self, error: str) -> Retrier:
        """The same retrier less ``error`` (a task whose timeout is its wait retries no States.Timeout)."""
        return replace(self, errors=tuple(name for name in self.errors if name != error))

    def asl(self) -> Json:
        """The ``Retry`` entry."""
        fields: Json = {"Comment": self.comment, "ErrorEquals": list(self.errors)}
        fields |= {
            "IntervalSeconds": self.interval,
            "MaxAttempts": self.attempts,
            "BackoffRate": self.backoff,
        }
        fields |= {"MaxDelaySeconds": self.max_delay, "JitterStrategy": "FULL" if self.jitter else None}
        return {key: value for key, value in fields.items() if value is not None}


@dataclass(frozen=True)
class Catch:
    """One ``Catch`` entry: the errors, where the error goes (``ResultPath``) and the next state."""

    errors: tuple[str, ...]
    to: str
    result: str = "$.error"

    def asl(self) -> Json:
        """The ``Catch`` entry."""
        return {"ErrorEquals": list(self.errors), "ResultPath": self.result, "Next": self.to}


def catch(error: str, to: str, result: str = "$.error") -> Catch:
    """A step's own error handled by state ``to`` (checked before its policy's last resort)."""
    return Catch((error,), to, result)


@dataclass(frozen=True)
class Persevere:
    """Money at stake: a transient fault (any error the policy retries) that outlasted the retries is kept at
    ``result``, the step's name noted at ``note`` (by ``Persevere<step>``) and the ``loop`` entered; the loop
    ends in the ``Resume`` choice (:func:`resume`), which goes back to the noted step."""

    result: str
    note: str
    loop: str


@dataclass(frozen=True)
class Policy:
    """What a step does with a fault: its retries, then (``persevere``) where a transient fault that outlasted
    them goes, then (``otherwise``) where any other error goes; None: the error ends the state's scope."""

    name: str
    retry: tuple[Retrier, ...]
    otherwise: Catch | None = None
    persevere: Persevere | None = None

    def failing_to(self, to: str, result: str = "$.error") -> Policy:
        """The same retries, with any other error handled by state ``to``."""
        return replace(self, otherwise=Catch((ALL,), to, result))

    def retries_only(self) -> Policy:
        """The retries alone (a step inside a Map: the Map catches what outlasts them)."""
        return replace(self, otherwise=None, persevere=None)

    def catches_only(self) -> Policy:
        """The last resort alone (a Map, whose steps retry)."""
        return replace(self, retry=(), persevere=None)

    def transient(self) -> tuple[str, ...]:
        """Every error the policy retries: what it perseveres through."""
        return tuple(error for retrier in self.retry for error in retrier.errors)


@dataclass(frozen=True)
class State:
    """One state of a workflow; ``perseveres``: its policy's transient catch goes to ``Persevere<name>``."""

    name: str
    body: Json
    persevere: Persevere | None = None


@dataclass(frozen=True)
class Generated:
    """States written from the persevering steps: ``kind`` ``notes`` (a ``Persevere<step>`` Pass each) or
    ``resume`` (the loop's last state, a Choice back to the noted step; ``default`` when none matches)."""

    kind: str
    persevere: Persevere
    name: str = ""
    default: str = ""


def perseverance(persevere: Persevere) -> Generated:
    """Here go the ``Persevere<step>`` states of every step that perseveres (in the order of the spec)."""
    return Generated("notes", persevere)


def resume(name: str, persevere: Persevere, default: str) -> Generated:
    """The ``Resume`` choice: back to the step ``Persevere<step>`` noted."""
    return Generated("resume", persevere, name, default)


def _handling(policy: Policy, name: str, throws: Sequence[Retrier | Catch]) -> Json:
    retry = [*policy.retry, *(item for item in throws if isinstance(item, Retrier))]
    catches = [item for item in throws if isinstance(item, Catch)]
    if policy.persevere is not None:
        catches.insert(0, Catch(policy.transient(), f"Persevere{name}", policy.persevere.result))
    if policy.otherwise is not None:
        catches.append(policy.otherwise)
    body: Json = {}
    if retry:
        body["Retry"] = [retrier.asl() for retrier in retry]
    if catches:
        body["Catch"] = [handler.asl() for handler in catches]
    return body


def _then(then: str | None) -> Json:
    return {"Next": then} if then is not None else {"End": True}


def _fields(**fields: Any) -> Json:
    return {key: value for key, value in fields.items() if value is not None}


def args(*names: str, **fields: Any) -> Json:
    """A task's ``Parameters``: each of ``names`` from the state's top level (``request_id`` from
    ``$.request_id``), each field a path (a string starting with ``$``) or a constant."""
    params: Json = {f"{name}.$": f"$.{name}" for name in names}
    for key, value in fields.items():
        is_path = isinstance(value, str) and value.startswith("$")
        params[f"{key}.$" if is_path else key] = value
    return params


def function(name: str) -> str:
    """The template's ARN substitution of a function (``DefinitionSubstitutions``)."""
    return f"${{{name}FunctionArn}}"


def task(
    name: str,
    resource: str,
    params: Json | None,
    result: str | None,
    policy: Policy,
    then: str | None = None,
    *,
    throws: Sequence[Retrier | Catch] = (),
    timeout_path: str | None = None,
) -> State:
    """A Task: ``resource`` is a function's name (``RecordRequest``) or an integration's ARN; its answer
    goes to ``result``; faults follow ``policy``, then ``throws``; ``then`` is the next state (None: the
    end)."""
    arn = resource if resource.startswith("arn:") else function(resource)
    body = _fields(
        Type="Task", Resource=arn, Parameters=params, TimeoutSecondsPath=timeout_path, ResultPath=result
    )
    return State(name, body | _handling(policy, name, throws) | _then(then), policy.persevere)


def wait_for_token(name: str, fn: str, payload: Json, timeout_path: str, *rest: Any, **kwargs: Any) -> State:
    """A Lambda invoked with the task token; the state waits for the answer (SendTaskSuccess/Failure) at most
    the seconds at ``timeout_path``; ``rest`` as :func:`task`'s."""
    params = {"FunctionName": function(fn), "Payload": payload}
    resource = "arn:aws:states:::lambda:invoke.waitForTaskToken"
    return task(name, resource, params, *rest, timeout_path=timeout_path, **kwargs)


def pass_(
    name: str,
    then: str,
    params: Json | None = None,
    *,
    input_path: str | None = None,
    result: Json | str | None = None,
    result_path: str | None = None,
) -> State:
    """A Pass state: ``params`` (or the input at ``input_path``, or ``result``) put at ``result_path``."""
    body = _fields(
        Type="Pass", InputPath=input_path, Parameters=params, Result=result, ResultPath=result_path
    )
    return State(name, body | {"Next": then})


def wait(
    name: str, then: str, *, seconds: int | None = None, path: str | None = None, timestamp: str | None = None
) -> State:
    """A Wait state: fixed ``seconds``, the seconds at ``path``, or until the timestamp at ``timestamp``."""
    body = _fields(Type="Wait", Seconds=seconds, SecondsPath=path, TimestampPath=timestamp)
    return State(name, body | {"Next": then})


def choice(name: str, branches: Sequence[tuple[Json, str]], default: str) -> State:
    """A Choice: the first rule that holds names the next state, else ``default``."""
    choices = [rule | {"Next": then} for rule, then in branches]
    return State(name, {"Type": "Choice", "Choices": choices, "Default": default})


def switch(name: str, variable: str, cases: Mapping[str, str], default: str) -> State:
    """A Choice on one string: ``cases`` maps each value to its next state."""
    return choice(name, [(equals(variable, value), then) for value, then in cases.items()], default)


def succeed(name: str, comment: str | None = None) -> State:
    """A Succeed state."""
    return State(name, _fields(Type="Succeed", Comment=comment))


def fail(name: str, error: str, cause: str) -> State:
    """A Fail state."""
    return State(name, {"Type": "Fail", "Error": error, "Cause": cause})


def map_(
    name: str,
    items: str,
    selector: Json,
    step: State,
    concurrency: int,
    result: str,
    policy: Policy,
    then: str,
) -> State:
    """An inline Map running ``step`` once per item (concurrently, at most ``concurrency``)."""
    processor = {
        "ProcessorConfig": {"Mode": "INLINE"},
        "StartAt": step.name,
        "States": {step.name: step.body},
    }
    body = {"Type": "Map", "ItemsPath": items, "MaxConcurrency": concurrency, "ItemSelector": selector}
    body |= {"ItemProcessor": processor, "ResultPath": result}
    return State(name, body | _handling(policy, name, ()) | {"Next": then})


# Choice rules (the ASL comparison operators used here).
def equals(variable: str, value: str | bool) -> Json:
    """``variable`` equals ``value`` (a string or a boolean)."""
    operator = "BooleanEquals" if isinstance(value, bool) else "StringEquals"
    return {"Variable": variable, operator: value}


def above(variable: str, value: int) -> Json:
    """``variable`` is a number above ``value``."""
    return {"Variable": variable, "NumericGreaterThan": value}


def present(variable: str) -> Json:
    """``variable`` is in the state."""
    return {"Variable": variable, "IsPresent": True}


def is_string(variable: str) -> Json:
    """``variable`` is a string."""
    return {"Variable": variable, "IsString": True}


def all_of(*rules: Json) -> Json:
    """Every rule holds."""
    return {"And": list(rules)}


def any_of(*rules: Json) -> Json:
    """One rule holds."""
    return {"Or": list(rules)}


def given(variable: str) -> Json:
    """``variable`` is present and not null."""
    return all_of(present(variable), {"Variable": variable, "IsNull": False})


def flag(variable: str) -> Json:
    """``variable`` is present and true."""
    return all_of(present(variable), equals(variable, True))


@dataclass(frozen=True)
class Workflow:
    """A state machine: its comment and its states in the order they are written (the first is where it
    starts). A string among the states is the ``Comment`` of the state after it: what that state is for."""

    comment: str
    states: Sequence[State | Generated | str]

    def definition(self) -> Json:
        """The ASL definition."""
        perseverers = [item.name for item in self.states if isinstance(item, State) and item.persevere]
        states: Json = {}
        comment: str | None = None
        for item in self.states:
            if isinstance(item, str):
                comment = item
            elif isinstance(item, State):
                states[item.name] = _commented(item.body, comment)
                comment = None
            else:
                states |= _generated(item, perseverers)
        return {"Comment": self.comment, "StartAt": next(iter(states)), "States": states}


def _commented(body: Json, comment: str | None) -> Json:
    if comment is None:
        return body
    kind, *rest = body.items()
    return dict([kind, ("Comment", comment), *rest])


def _generated(item: Generated, perseverers: Sequence[str]) -> Json:
    loop, note = item.persevere.loop, item.persevere.note
    if item.kind == "notes":
        comment = "{} met a transient fault its retries did not outlast: keep trying (see {})."
        return {
            f"Persevere{step}": {"Type": "Pass", "Comment": comment.format(step, loop), "Result": step}
            | {"ResultPath": note, "Next": loop}
            for step in perseverers
        }
    back = choice(item.name, [(equals(note, step), step) for step in perseverers], item.default)
    return {back.name: back.body}


def render(workflow: Workflow) -> str:
    """The committed text of a workflow: its definition as JSON, indented by two, a newline at the end."""
    return json.dumps(workflow.definition(), indent=2, ensure_ascii=False) + "\n"
