"""Loading a template: parse it, swap local paths for S3 placeholders, run the SAM transform; and the local
values (secrets, SSM parameters, template parameters) that only exist in a real account."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import boto3
import yaml
from samtranslator.parser import parser
from samtranslator.public.exceptions import InvalidDocumentException
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

from localcloud.template.model import TemplateError

LOCAL_VALUES_FILE = Path(__file__).parent.with_name("local_values.json")
"""Values for secrets, SSM parameters and template parameters that only exist in a real account."""

PLACEHOLDER_BUCKET = "localcloud-local"
"""The bucket of the placeholders (``s3://localcloud-local/<LogicalId>``) the local paths become."""


@dataclass(frozen=True)
class LocalPaths:
    """Local paths recorded before the transform, keyed by the SAM logical id."""

    code: dict[str, Path]
    layers: dict[str, tuple[Path, dict[str, Any]]]
    state_machines: dict[str, Path]
    apis: dict[str, Path]


_PARSED: dict[str, dict[str, Any]] = {}
"""Parsed templates by their text: a process standing many clouds up (the tests) parses each one once."""


def load_document(path: Path) -> dict[str, Any]:
    """Parse a YAML or JSON template (with CloudFormation short-form tags); a fresh copy each call (the
    parse is cached on the template's text)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"{path}: cannot read the template: {exc}") from exc
    cached = _PARSED.get(text)
    if cached is not None:
        return copy.deepcopy(cached)
    try:
        document = yaml_parse(text)
    except yaml.YAMLError as exc:
        raise TemplateError(f"{path}: not valid YAML/JSON: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        raise TemplateError(f"{path}: a template needs a Resources mapping")
    _PARSED[text] = copy.deepcopy(document)
    return cast(dict[str, Any], document)


def load_data_file(path: Path, where: str) -> Any:
    """Parse a local JSON or YAML file referenced by the template (state machine or OpenAPI definition)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"{where}: cannot read {path}: {exc}") from exc
    try:
        if path.suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise TemplateError(f"{where}: {path} is not valid JSON/YAML: {exc}") from exc


def _local_path(base: Path, value: Any, where: str) -> Path:
    """A local path property (``CodeUri: functions/api/``) as an absolute path that must exist."""
    if isinstance(value, str) and value.startswith("s3://"):
        raise TemplateError(
            f"{where}: {value!r} is an S3 location; the local cloud runs code from the checkout"
        )
    if not isinstance(value, str):
        raise TemplateError(
            f"{where}: expected a local path, got {json.dumps(value, default=str)}; "
            "the local cloud supports local paths only"
        )
    path = (base / value).resolve()
    if not path.exists():
        raise TemplateError(f"{where}: local path {value!r} does not exist ({path})")
    return path


def _placeholder(logical_id: str) -> str:
    return f"s3://{PLACEHOLDER_BUCKET}/{logical_id}"


def replace_local_paths(document: dict[str, Any], base: Path, source: Path) -> LocalPaths:
    """Swap local paths for S3 placeholders (the transform only accepts S3) and record where they point."""
    code: dict[str, Path] = {}
    layers: dict[str, tuple[Path, dict[str, Any]]] = {}
    machines: dict[str, Path] = {}
    apis: dict[str, Path] = {}
    function_globals = document.get("Globals", {}).get("Function", {}) if "Globals" in document else {}
    global_code_uri = function_globals.pop("CodeUri", None) if isinstance(function_globals, dict) else None
    for logical_id, resource in document["Resources"].items():
        if not isinstance(resource, dict):
            raise TemplateError(f"{source}: Resources.{logical_id} must be a mapping")
        kind = resource.get("Type")
        props = resource.setdefault("Properties", {})
        where = f"{source}: Resources.{logical_id}"
        if kind == "AWS::Serverless::Function":
            if props.get("PackageType") == "Image":
                raise TemplateError(f"{where}.Properties.PackageType: Image functions need Docker; use Zip")
            if "InlineCode" in props:
                raise TemplateError(f"{where}.Properties.InlineCode: not supported locally; use CodeUri")
            uri = props.get("CodeUri", global_code_uri if global_code_uri is not None else ".")
            code[logical_id] = _local_path(base, uri, f"{where}.Properties.CodeUri")
            props["CodeUri"] = _placeholder(logical_id)
        elif kind == "AWS::Serverless::LayerVersion":
            path = _local_path(base, props.get("ContentUri"), f"{where}.Properties.ContentUri")
            layers[logical_id] = (path, resource.get("Metadata") or {})
            props["ContentUri"] = _placeholder(logical_id)
        elif kind == "AWS::Serverless::StateMachine" and "DefinitionUri" in props:
            machines[logical_id] = _local_path(
                base, props["DefinitionUri"], f"{where}.Properties.DefinitionUri"
            )
            props["DefinitionUri"] = _placeholder(logical_id)
        elif kind in ("AWS::Serverless::Api", "AWS::Serverless::HttpApi") and "DefinitionUri" in props:
            path = _local_path(base, props.pop("DefinitionUri"), f"{where}.Properties.DefinitionUri")
            apis[logical_id] = path
            props["DefinitionBody"] = load_data_file(path, f"{where}.Properties.DefinitionUri")
    return LocalPaths(code=code, layers=layers, state_machines=machines, apis=apis)


_TRANSFORM_CACHE: dict[str, dict[str, Any]] = {}
_TRANSFORM_LOCK = threading.Lock()


def transform(
    document: dict[str, Any], source: Path, region: str, parameter_values: dict[str, Any]
) -> dict[str, Any]:
    """Run the SAM transform (cached on the template's content, region and parameter values)."""
    transforms = document.get("Transform", [])
    transforms = transforms if isinstance(transforms, list) else [transforms]
    unknown = [t for t in transforms if t not in ("AWS::Serverless-2016-10-31", "AWS::LanguageExtensions")]
    if unknown:
        raise TemplateError(f"{source}: Transform {unknown} is not supported locally")
    if "AWS::Serverless-2016-10-31" not in transforms:
        return document
    key = hashlib.sha256(
        json.dumps([document, region, parameter_values], sort_keys=True, default=str).encode()
    ).hexdigest()
    with _TRANSFORM_LOCK:
        cached = _TRANSFORM_CACHE.get(key)
    if cached is not None:
        return copy.deepcopy(cached)

    logging.getLogger("samtranslator").setLevel(logging.CRITICAL)
    translator = Translator(
        managed_policy_map={},
        sam_parser=parser.Parser(),
        boto_session=boto3.session.Session(region_name=region),
    )
    try:
        result = translator.translate(
            sam_template=copy.deepcopy(document),
            parameter_values=dict(parameter_values),
            passthrough_metadata=True,
        )
    except InvalidDocumentException as exc:
        causes = "; ".join(str(getattr(cause, "message", cause)) for cause in exc.causes)
        raise TemplateError(f"{source}: the SAM transform rejected the template: {causes}") from exc
    with _TRANSFORM_LOCK:
        _TRANSFORM_CACHE[key] = copy.deepcopy(result)
    return cast(dict[str, Any], result)


def load_local_values(path: Path = LOCAL_VALUES_FILE) -> dict[str, Any]:
    """Read ``local_values.json`` (``SecretsManager``, ``SSM``, ``Parameters`` sections); {} if absent.

    Raises:
        TemplateError: the file is not a JSON object.
    """
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise TemplateError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise TemplateError(f"{path}: expected a JSON object with SecretsManager/SSM/Parameters sections")
    return data
