"""Template parameters: their values (overrides, then ``local_values.json``, then ``Default``), checked as
CloudFormation checks them (``AllowedValues``, ``AllowedPattern``, ``Min``/``MaxValue``,
``Min``/``MaxLength``)."""

from __future__ import annotations

import re
from typing import Any

from localcloud.template.loading import LOCAL_VALUES_FILE
from localcloud.template.model import TemplateError


def parameter_values(
    declared: dict[str, Any], overrides: dict[str, str], local_values: dict[str, Any], source: str
) -> dict[str, str | list[str]]:
    """The value of every declared parameter, as a string or (list types) a list of strings.

    Raises:
    TemplateError: an unknown override, a parameter with no value, or a value its rules refuse.
    """
    unknown = sorted(set(overrides) - set(declared))
    if unknown:
        raise TemplateError(f"{source}: parameter_overrides name unknown parameters {unknown}")
    local_parameters: dict[str, Any] = local_values.get("Parameters", {})
    values: dict[str, str | list[str]] = {}
    for name, spec in declared.items():
        where = f"{source}: Parameters.{name}"
        if not isinstance(spec, dict) or "Type" not in spec:
            raise TemplateError(f"{where}: a parameter needs a Type")
        kind = str(spec["Type"])
        # As with `sam deploy --parameter-overrides`: overrides, then local_values.json, then Default.
        if name in overrides:
            raw: Any = overrides[name]
        elif name in local_parameters:
            raw = local_parameters[name]
        elif "Default" in spec:
            raw = spec["Default"]
        else:
            raise TemplateError(f"{where}: no Default; give a value in parameter_overrides")
        if kind.startswith("AWS::SSM::Parameter::Value<"):
            ssm: dict[str, Any] = local_values.get("SSM", {})
            if str(raw) not in ssm:
                raise TemplateError(
                    f'{where}: type {kind} reads SSM parameter {raw!r}; add it under "SSM" in '
                    f"{LOCAL_VALUES_FILE.name}"
                )
            raw = ssm[str(raw)]
        value = _check_parameter(spec, kind, raw, where)
        values[name] = value
    return values


def _check_parameter(spec: dict[str, Any], kind: str, raw: Any, where: str) -> str | list[str]:
    is_list = kind == "CommaDelimitedList" or kind.startswith("List<") or "<List<" in kind
    if is_list:
        items = (
            raw if isinstance(raw, list) else [s.strip() for s in str(raw).split(",")] if raw != "" else []
        )
        return [str(item) for item in items]
    text = str(raw).lower() if isinstance(raw, bool) else str(raw)
    allowed = spec.get("AllowedValues")
    if allowed is not None and text not in [str(a) for a in allowed]:
        raise TemplateError(f"{where}: {text!r} is not one of AllowedValues {allowed}")
    pattern = spec.get("AllowedPattern")
    if pattern is not None and re.fullmatch(str(pattern), text) is None:
        raise TemplateError(f"{where}: {text!r} does not match AllowedPattern {pattern!r}")
    if kind == "Number":
        try:
            number = float(text)
        except ValueError as exc:
            raise TemplateError(f"{where}: {text!r} is not a Number") from exc
        if "MinValue" in spec and number < float(spec["MinValue"]):
            raise TemplateError(f"{where}: {text} is below MinValue {spec['MinValue']}")
        if "MaxValue" in spec and number > float(spec["MaxValue"]):
            raise TemplateError(f"{where}: {text} is above MaxValue {spec['MaxValue']}")
    if "MinLength" in spec and len(text) < int(spec["MinLength"]):
        raise TemplateError(f"{where}: {text!r} is shorter than MinLength {spec['MinLength']}")
    if "MaxLength" in spec and len(text) > int(spec["MaxLength"]):
        raise TemplateError(f"{where}: {text!r} is longer than MaxLength {spec['MaxLength']}")
    return text
