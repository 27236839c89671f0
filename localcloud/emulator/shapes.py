"""The botocore service model as the emulator's ground truth for shapes.

Three helpers, all driven by the installed botocore model (``botocore==1.44.5``):

* :func:`operation_model` / :func:`shape`: cached look-ups.
* :func:`conform`: drop every key a value has outside a shape (used when a stored request is echoed in a
  ``Describe*`` response, so that input-only members never leak into output).
* :func:`validate_output`: a strict recursive check of a response against an output shape (every key a
  member, types right, required members present, enum values valid). Used by the shape-walk test, and
  usable by the runtime in a debug mode.
* :func:`check_enum`: the input-side enum check botocore's client-side validation does not do, raising the
  ``ValidationException`` AWS sends (``1 validation error detected: Value 'x' at 'y' failed to satisfy
  constraint: Member must satisfy enum value set: [...]``).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

import botocore.session
from botocore.model import ListShape, MapShape, OperationModel, ServiceModel, Shape, StructureShape

from localcloud.contracts import AwsError

# botocore's hyphenated service ids (what the runtime passes) -> the client name of the service model.
_CLIENT_NAMES = {
    "sagemaker": "sagemaker",
    "sagemaker-runtime": "sagemaker-runtime",
    "ec2": "ec2",
    "application-auto-scaling": "application-autoscaling",
    "application-autoscaling": "application-autoscaling",
    "cloudwatch": "cloudwatch",
}


@cache
def service_model(service: str) -> ServiceModel:
    """The botocore service model for a hyphenated service id (``application-auto-scaling`` or its client
    name ``application-autoscaling``).

    Raises:
        KeyError: a service the emulator does not know.
    """
    session = botocore.session.get_session()
    return session.get_service_model(_CLIENT_NAMES[service])


def operation_model(service: str, operation: str) -> OperationModel:
    """The botocore operation model (``operation_model("sagemaker", "CreateEndpoint")``)."""
    return service_model(service).operation_model(operation)


def output_shape(service: str, operation: str) -> StructureShape:
    """The output shape of an operation; an empty structure for operations without output (``Delete*``:
    their response must be ``{}``)."""
    found = operation_model(service, operation).output_shape
    return found if found is not None else StructureShape("Empty", {"type": "structure", "members": {}})


def shape(service: str, name: str) -> Shape:
    """A named shape of a service model (``shape("sagemaker", "ProductionVariantInstanceType")``)."""
    return service_model(service).shape_for(name)


def enum_values(service: str, name: str) -> list[str]:
    """The enum values of a named string shape (empty if it has none)."""
    return list(getattr(shape(service, name), "enum", []) or [])


def check_enum(service: str, shape_name: str, value: str, path: str) -> None:
    """Reject ``value`` if it is not in the enum of ``shape_name``, as AWS's server-side validation does.

    botocore's client-side validation checks types and required members but not enums, so a request with
    ``InstanceType="ml.g6.12xlarge"`` for a training plan reaches the service, which answers:
    ``ValidationException: 1 validation error detected: Value 'ml.g6.12xlarge' at 'instanceType' failed to
    satisfy constraint: Member must satisfy enum value set: [...]``.

    Raises:
        AwsError: ``ValidationException`` naming ``path`` (AWS uses camelCase member paths).
    """
    allowed = enum_values(service, shape_name)
    if allowed and value not in allowed:
        raise AwsError(
            "ValidationException",
            f"1 validation error detected: Value '{value}' at '{path}' failed to satisfy constraint: "
            f"Member must satisfy enum value set: [{', '.join(allowed)}]",
        )


def conform(value: Any, target: Shape) -> Any:
    """``value`` with every structure key that ``target`` does not declare removed, recursively.

    Lists and maps are walked; scalars are returned unchanged. Used to echo stored request structures
    (``ProductionVariants``, ``Specification``...) in output shapes that have fewer members.
    """
    if isinstance(target, StructureShape) and isinstance(value, dict):
        return {
            key: conform(item, target.members[key])
            for key, item in value.items()
            if key in target.members and item is not None
        }
    if isinstance(target, ListShape) and isinstance(value, list):
        return [conform(item, target.member) for item in value]
    if isinstance(target, MapShape) and isinstance(value, dict):
        return {key: conform(item, target.value) for key, item in value.items()}
    return value


_SCALAR_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "boolean": (bool,),
    "blob": (bytes, bytearray),
}


def validate_output(value: Any, target: Shape, path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``target``: the empty list means it conforms.

    Strict on purpose (stricter than botocore's parser, which silently drops unknown keys): every
    structure key must be a member, required members must be present, scalars must have the model's type
    (``bool`` is not an integer, timestamps are tz-aware ``datetime``), and enum strings must be one of
    the model's values. String patterns and length limits are not checked.
    """
    if isinstance(target, StructureShape):
        return _validate_structure(value, target, path)
    if isinstance(target, ListShape):
        if not isinstance(value, list):
            return [f"{path}: expected a list ({target.name}), got {type(value).__name__}"]
        return [
            problem
            for index, item in enumerate(value)
            for problem in validate_output(item, target.member, f"{path}[{index}]")
        ]
    if isinstance(target, MapShape):
        if not isinstance(value, dict):
            return [f"{path}: expected a map ({target.name}), got {type(value).__name__}"]
        problems = [f"{path}: map key {key!r} is not a string" for key in value if not isinstance(key, str)]
        for key, item in value.items():
            problems.extend(validate_output(item, target.value, f"{path}[{key!r}]"))
        return problems
    return _validate_scalar(value, target, path)


def _validate_structure(value: Any, target: StructureShape, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected a structure ({target.name}), got {type(value).__name__}"]
    problems = [f"{path}.{key}: not a member of {target.name}" for key in value if key not in target.members]
    problems.extend(
        f"{path}.{key}: required member of {target.name} is missing"
        for key in target.required_members
        if key not in value
    )
    for key, item in value.items():
        if key in target.members:
            problems.extend(validate_output(item, target.members[key], f"{path}.{key}"))
    return problems


def _validate_scalar(value: Any, target: Shape, path: str) -> list[str]:
    if target.type_name == "timestamp":
        if isinstance(value, datetime) and value.tzinfo is not None:
            return []
        return [f"{path}: expected a tz-aware datetime, got {value!r}"]
    expected = _SCALAR_TYPES.get(target.type_name)
    if expected is None:
        return [f"{path}: unsupported shape type {target.type_name}"]
    if not isinstance(value, expected) or (target.type_name != "boolean" and isinstance(value, bool)):
        return [f"{path}: expected {target.type_name}, got {type(value).__name__} {value!r}"]
    enum = getattr(target, "enum", None)
    if enum and value not in enum:
        return [f"{path}: {value!r} is not one of the enum values of {target.name}"]
    return []
