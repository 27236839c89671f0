"""Read a SAM template and stand its resources up in moto, the way ``sam deploy`` + CloudFormation would.

Pipeline (:meth:`Stack.load`):

1. parse the YAML/JSON template (short-form intrinsics ``!Ref``/``!Sub``... via samtranslator's YAML loader);
2. replace every local path (``CodeUri``, ``ContentUri``, state machine and API ``DefinitionUri``) with a
   placeholder ``s3://localcloud-local/<LogicalId>`` and remember the local path (what cfn-lint does before
   calling the translator, since the SAM transform only accepts S3 locations);
3. run the SAM transform with aws-sam-translator, the library SAM CLI and CloudFormation use, which expands
   ``Globals``, ``Events`` (EventBridgeRule, CloudWatchEvent, Schedule, ScheduleV2, Api), policy templates,
   roles, layers, APIs;
4. resolve the CloudFormation intrinsics of the result (``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` in both forms,
   ``Fn::Join``, ``Fn::Select``, ``Fn::Split``, ``Fn::If`` and ``Conditions``, ``Fn::FindInMap``,
   ``Fn::Base64``, ``Fn::GetAZs``, ``Fn::ToJsonString``, ``Fn::Length``, pseudo parameters, ``AWS::NoValue``)
   with deterministic physical names: ``<StackName>-<LogicalId>`` unless the template names the resource.

:meth:`Stack.deploy` then creates the resources in moto through ordinary boto3 calls (so botocore validates
every request), in dependency-safe order by type. Lambda functions are not created in moto: the local
cloud's Lambda runtime runs them from :attr:`Stack.functions`.

Follows the CloudFormation template reference ("Intrinsic function reference", "Pseudo parameters
reference", and each resource type's "Return values" section for ``Ref``/``Fn::GetAtt``).

Errors are :class:`TemplateError`, whose message names the template, the resource and the property.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import boto3
import botocore.exceptions
import yaml
from botocore.model import ListShape, MapShape, Shape, StructureShape
from moto.dynamodb.models import dynamodb_backends
from moto.secretsmanager.models import secretsmanager_backends
from samtranslator.parser import parser
from samtranslator.public.exceptions import InvalidDocumentException
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse

from localcloud.lambdas import FunctionSpec

logger = logging.getLogger(__name__)

LOCAL_VALUES_FILE = Path(__file__).parent.with_name("local_values.json")
"""Values for secrets, SSM parameters and template parameters that only exist in a real account."""

_PLACEHOLDER_BUCKET = "localcloud-local"
_NO_VALUE: Any = object()  # the value of ``Ref: AWS::NoValue``; removed from the enclosing dict or list
_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_DYNAMIC_REFERENCE = re.compile(r"\{\{resolve:(ssm|ssm-secure|secretsmanager):([^}]*)\}\}")
_INTEGRATION_URI = re.compile(r"functions/\$\{([A-Za-z0-9]+)\.(?:Arn|Alias)\}/invocations")
_HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "x-amazon-apigateway-any-method")

# Resource types whose ``Ref``/``GetAtt`` are answered but which the local cloud does not create (they
# only matter on AWS: permissions, API Gateway plumbing, versions, log groups...).
_PASSIVE_TYPES = frozenset(
    {
        "AWS::Lambda::Function",  # run by the local Lambda runtime, not by moto
        "AWS::Lambda::LayerVersion",
        "AWS::Lambda::Permission",
        "AWS::Lambda::Version",
        "AWS::Lambda::Alias",
        "AWS::Lambda::EventInvokeConfig",
        "AWS::Lambda::Url",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Stage",
        "AWS::ApiGateway::Account",
        "AWS::ApiGateway::UsagePlan",
        "AWS::ApiGateway::ApiKey",
        "AWS::ApiGateway::UsagePlanKey",
        "AWS::ApiGateway::BasePathMapping",
        "AWS::ApiGateway::DomainName",
        "AWS::IAM::Policy",
        "AWS::IAM::ManagedPolicy",
        "AWS::SNS::TopicPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::Events::EventBusPolicy",
        "AWS::Logs::LogGroup",
        "AWS::KMS::Key",
        "AWS::KMS::Alias",
        "AWS::CloudFormation::WaitConditionHandle",
    }
)


class TemplateError(Exception):
    """The template cannot be run locally; the message names the template, resource and property."""


@dataclass(frozen=True)
class ApiRoute:
    """One API Gateway REST route served by a Lambda proxy integration.

    ``method`` is upper case (``POST``) or ``ANY``; ``path`` is the resource path template as API Gateway
    shows it (``/reservations/{request_id}``, ``/files/{proxy+}``); ``function`` the logical id of the
    ``AWS::Lambda::Function``; ``api`` the logical id of the ``AWS::ApiGateway::RestApi``; ``api_id`` its
    (deterministic) id; ``stage`` its stage name; ``auth`` the authorizer (``AWS_IAM``, a Cognito or Lambda
    authorizer name) or None.
    """

    method: str
    path: str
    function: str
    api: str
    api_id: str
    stage: str
    auth: str | None = None

    def matches(self, method: str, path: str) -> dict[str, str] | None:
        """The path parameters if this route serves ``method path`` (path without stage), else None."""
        if self.method not in ("ANY", method.upper()):
            return None
        route_parts = [p for p in self.path.split("/") if p]
        request_parts = [p for p in path.split("/") if p]
        params: dict[str, str] = {}
        for index, part in enumerate(route_parts):
            if part.startswith("{") and part.endswith("+}"):
                if index >= len(request_parts):
                    return None
                params[part[1:-2]] = "/".join(request_parts[index:])
                return params
            if index >= len(request_parts):
                return None
            if part.startswith("{") and part.endswith("}"):
                params[part[1:-1]] = request_parts[index]
            elif part != request_parts[index]:
                return None
        return params if len(route_parts) == len(request_parts) else None


@dataclass
class Resource:
    """One resource of the transformed template, with its properties resolved."""

    logical_id: str
    type: str
    properties: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _LocalPaths:
    """Local paths recorded before the transform, keyed by the SAM logical id."""

    code: dict[str, Path]
    layers: dict[str, tuple[Path, dict[str, Any]]]
    state_machines: dict[str, Path]
    apis: dict[str, Path]


# ------------------------------------------------------------------------------------------------- parsing


_PARSED: dict[str, dict[str, Any]] = {}
"""Parsed templates by their text: a process standing many clouds up (the tests) parses each one once."""


def _load_document(path: Path) -> dict[str, Any]:
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


def _load_data_file(path: Path, where: str) -> Any:
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
    return f"s3://{_PLACEHOLDER_BUCKET}/{logical_id}"


def _replace_local_paths(document: dict[str, Any], base: Path, source: Path) -> _LocalPaths:
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
            props["DefinitionBody"] = _load_data_file(path, f"{where}.Properties.DefinitionUri")
    return _LocalPaths(code=code, layers=layers, state_machines=machines, apis=apis)


_TRANSFORM_CACHE: dict[str, dict[str, Any]] = {}
_TRANSFORM_LOCK = threading.Lock()


def _transform(
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


# ------------------------------------------------------------------------------------------- naming rules

# Per resource type: the property naming the resource, the maximum physical name length, and whether
# ``Ref`` returns the ARN (else the name). CloudFormation resource reference, "Return values".
_NAME_PROPERTY: dict[str, tuple[str, int]] = {
    "AWS::Lambda::Function": ("FunctionName", 64),
    "AWS::Lambda::LayerVersion": ("LayerName", 140),
    "AWS::DynamoDB::Table": ("TableName", 255),
    "AWS::Events::EventBus": ("Name", 256),
    "AWS::Events::Rule": ("Name", 64),
    "AWS::StepFunctions::StateMachine": ("StateMachineName", 80),
    "AWS::Scheduler::Schedule": ("Name", 64),
    "AWS::Scheduler::ScheduleGroup": ("Name", 64),
    "AWS::SNS::Topic": ("TopicName", 256),
    "AWS::SQS::Queue": ("QueueName", 80),
    "AWS::SecretsManager::Secret": ("Name", 512),
    "AWS::SSM::Parameter": ("Name", 1011),
    "AWS::IAM::Role": ("RoleName", 64),
    "AWS::IAM::ManagedPolicy": ("ManagedPolicyName", 128),
    "AWS::IAM::Policy": ("PolicyName", 128),
    "AWS::S3::Bucket": ("BucketName", 63),
    "AWS::CloudWatch::Alarm": ("AlarmName", 255),
    "AWS::CloudWatch::CompositeAlarm": ("AlarmName", 255),
    "AWS::CloudWatch::Dashboard": ("DashboardName", 255),
    "AWS::Logs::LogGroup": ("LogGroupName", 512),
    "AWS::ApiGateway::RestApi": ("Name", 1024),
}


def _short_hash(*parts: str, length: int = 10, alphabet: str = "abcdefghijklmnopqrstuvwxyz0123456789") -> str:
    digest = int(hashlib.sha256("/".join(parts).encode()).hexdigest(), 16)
    chars = []
    for _ in range(length):
        digest, index = divmod(digest, len(alphabet))
        chars.append(alphabet[index])
    return "".join(chars)


# ------------------------------------------------------------------------------------------------ the stack


class Stack:
    """A SAM template, transformed and resolved, ready to deploy into moto.

    Attributes:
        template_path: the template file; ``root`` its directory (local paths are relative to it).
        stack_name, region, account_id, partition: the pseudo parameters used everywhere.
        parameters: the template parameters' values (defaults, then overrides), as strings or lists.
        resources: logical id -> :class:`Resource` (transformed, conditions applied, properties resolved).
        functions: one :class:`~localcloud.lambdas.FunctionSpec` per ``AWS::Lambda::Function``.
        state_machine_definitions: logical id -> the ASL JSON text with ``DefinitionSubstitutions`` applied.
        api_routes: the REST API routes of Lambda proxy integrations (from the transformed API bodies).
        outputs: the template's ``Outputs``, resolved to strings (lists joined with ``,``).
        warnings: what the local cloud ignores (unsupported event sources, unknown resource types...).

    Raises:
        TemplateError: on any construct the local cloud cannot reproduce, naming resource and property.
    """

    def __init__(
        self,
        template_path: Path,
        *,
        stack_name: str,
        region: str,
        account_id: str,
        parameter_overrides: dict[str, str] | None = None,
        local_values: dict[str, Any] | None = None,
    ) -> None:
        self.template_path = template_path.resolve()
        self.root = self.template_path.parent
        self.stack_name = stack_name
        self.region = region
        self.account_id = account_id
        self.partition = "aws-cn" if region.startswith("cn-") else "aws"
        self.url_suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        self.local_values = local_values if local_values is not None else load_local_values()
        self.warnings: list[str] = []
        self.resources: dict[str, Resource] = {}
        self.functions: list[FunctionSpec] = []
        self.state_machine_definitions: dict[str, str] = {}
        self.api_routes: list[ApiRoute] = []
        self.outputs: dict[str, str] = {}
        self.deployed = False

        document = _load_document(self.template_path)
        self._source = str(self.template_path)
        self.parameters = self._parameter_values(document.get("Parameters") or {}, parameter_overrides or {})
        self._paths = _replace_local_paths(document, self.root, self.template_path)
        self._cfn = _transform(document, self.template_path, region, self.parameters)
        self._raw: dict[str, dict[str, Any]] = self._cfn.get("Resources", {})
        self._mappings: dict[str, Any] = self._cfn.get("Mappings") or {}
        self._condition_defs: dict[str, Any] = self._cfn.get("Conditions") or {}
        self._condition_values: dict[str, bool] = {}
        self._evaluating: set[str] = set()
        self._names: dict[str, str] = {}
        self._layer_by_key = {
            props.get("Content", {}).get("S3Key"): lid
            for lid, res in self._raw.items()
            if res.get("Type") == "AWS::Lambda::LayerVersion"
            and isinstance(props := res.get("Properties", {}), dict)
        }
        for logical_id, raw in self._raw.items():
            if not isinstance(raw, dict) or "Type" not in raw:
                raise TemplateError(f"{self._source}: Resources.{logical_id} has no Type")
            condition = raw.get("Condition")
            if condition is not None and not self._condition(condition, f"Resources.{logical_id}.Condition"):
                continue
            where = f"Resources.{logical_id}.Properties"
            properties = self.resolve(raw.get("Properties") or {}, where)
            self.resources[logical_id] = Resource(
                logical_id, raw["Type"], properties, dict(raw.get("Metadata") or {})
            )
        self._build_functions()
        self._build_state_machines()
        self._build_api_routes()
        self._build_outputs()
        self._note_unsupported()

    # ------------------------------------------------------------------------------------------ public API

    @classmethod
    def load(
        cls,
        template_path: Path,
        *,
        stack_name: str = "capacity-orchestrator",
        region: str = "us-east-1",
        account_id: str = "123456789012",
        parameter_overrides: dict[str, str] | None = None,
    ) -> Stack:
        """Read, transform and resolve ``template_path`` (no AWS call; see :meth:`deploy`).

        Raises:
            TemplateError: the template cannot be run locally (the message says where and why).
        """
        return cls(
            template_path,
            stack_name=stack_name,
            region=region,
            account_id=account_id,
            parameter_overrides=parameter_overrides,
        )

    def physical_id(self, logical_id: str) -> str:
        """What ``Ref: <logical_id>`` returns (a name, an ARN or an id, per the resource type).

        Raises:
            TemplateError: no such resource (or parameter).
        """
        value = self._ref(logical_id, f"physical_id({logical_id})")
        return value if isinstance(value, str) else ",".join(map(str, value))

    def arn(self, logical_id: str) -> str:
        """What ``Fn::GetAtt: [<logical_id>, Arn]`` returns.

        Raises:
            TemplateError: no such resource, or its type has no ARN.
        """
        return str(self._get_att(logical_id, "Arn", f"arn({logical_id})"))

    def function(self, logical_id_or_name: str) -> FunctionSpec:
        """The function spec by logical id, physical name or ARN.

        Raises:
            KeyError: no such function.
        """
        for spec in self.functions:
            if logical_id_or_name in (spec.logical_id, spec.name, spec.arn):
                return spec
        raise KeyError(logical_id_or_name)

    def resources_of_type(self, resource_type: str) -> Iterator[Resource]:
        """The resources of one CloudFormation type, in template order."""
        return (r for r in self.resources.values() if r.type == resource_type)

    def deploy(self, session: boto3.session.Session | None = None) -> None:
        """Create the stack's resources in moto (``mock_aws`` must be active), in dependency order.

        IAM roles, then tables, buses, topics, queues, secrets, parameters, buckets, log-free alarms and
        dashboards, state machines, rules with their targets, schedule groups and schedules. Lambda
        functions, layers, permissions and API Gateway resources are not created (see module doc).

        Raises:
            TemplateError: an AWS call failed; the message names the resource and the AWS error.
        """
        _Deployer(self, session or _deploy_session(self.region)).run()
        self.deployed = True

    # ------------------------------------------------------------------------------------------ parameters

    def _parameter_values(
        self, declared: dict[str, Any], overrides: dict[str, str]
    ) -> dict[str, str | list[str]]:
        unknown = sorted(set(overrides) - set(declared))
        if unknown:
            raise TemplateError(f"{self._source}: parameter_overrides name unknown parameters {unknown}")
        local_parameters: dict[str, Any] = self.local_values.get("Parameters", {})
        values: dict[str, str | list[str]] = {}
        for name, spec in declared.items():
            where = f"{self._source}: Parameters.{name}"
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
                ssm: dict[str, Any] = self.local_values.get("SSM", {})
                if str(raw) not in ssm:
                    raise TemplateError(
                        f'{where}: type {kind} reads SSM parameter {raw!r}; add it under "SSM" in '
                        f"{LOCAL_VALUES_FILE.name}"
                    )
                raw = ssm[str(raw)]
            value = self._check_parameter(name, spec, kind, raw, where)
            values[name] = value
        return values

    @staticmethod
    def _check_parameter(name: str, spec: dict[str, Any], kind: str, raw: Any, where: str) -> str | list[str]:
        is_list = kind == "CommaDelimitedList" or kind.startswith("List<") or "<List<" in kind
        if is_list:
            items = (
                raw
                if isinstance(raw, list)
                else [s.strip() for s in str(raw).split(",")]
                if raw != ""
                else []
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
        del name
        return text

    # ------------------------------------------------------------------------------------------ conditions

    def _condition(self, name: Any, where: str) -> bool:
        if not isinstance(name, str) or name not in self._condition_defs:
            raise TemplateError(f"{self._source}: {where}: unknown condition {name!r}")
        if name in self._condition_values:
            return self._condition_values[name]
        if name in self._evaluating:
            raise TemplateError(f"{self._source}: {where}: condition {name!r} refers to itself")
        self._evaluating.add(name)
        try:
            value = self._evaluate_condition(self._condition_defs[name], f"Conditions.{name}")
        finally:
            self._evaluating.discard(name)
        self._condition_values[name] = value
        return value

    def _evaluate_condition(self, node: Any, where: str) -> bool:
        if isinstance(node, dict) and len(node) == 1:
            ((key, arg),) = node.items()
            if key == "Condition":
                return self._condition(arg, where)
            if key == "Fn::Equals":
                left, right = (self.resolve(a, where) for a in arg)
                return str(left) == str(right) if not isinstance(left, list) else left == right
            if key == "Fn::Not":
                return not self._evaluate_condition(arg[0], where)
            if key == "Fn::And":
                return all(self._evaluate_condition(a, where) for a in arg)
            if key == "Fn::Or":
                return any(self._evaluate_condition(a, where) for a in arg)
        if isinstance(node, bool):
            return node
        raise TemplateError(f"{self._source}: {where}: not a condition: {json.dumps(node, default=str)}")

    # ----------------------------------------------------------------------------------------- intrinsics

    def resolve(self, value: Any, where: str) -> Any:
        """Resolve every intrinsic function in ``value`` (a template fragment); ``where`` names it in errors.

        Raises:
            TemplateError: an unknown function, resource, attribute, parameter or mapping key.
        """
        result = self._resolve(value, where)
        return None if result is _NO_VALUE else result

    def _resolve(self, value: Any, where: str) -> Any:
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref" or key.startswith("Fn::"):
                    return self._function(key, arg, f"{where}.{key}")
            resolved: dict[str, Any] = {}
            for key, item in value.items():
                result = self._resolve(item, f"{where}.{key}")
                if result is not _NO_VALUE:
                    resolved[key] = result
            return resolved
        if isinstance(value, list):
            items = [self._resolve(item, f"{where}[{i}]") for i, item in enumerate(value)]
            return [item for item in items if item is not _NO_VALUE]
        if isinstance(value, str) and "{{resolve:" in value:
            return self._dynamic_references(value, where)
        return value

    def _function(self, name: str, arg: Any, where: str) -> Any:  # noqa: PLR0911, PLR0912
        if name == "Ref":
            return self._ref(self._resolve(arg, where), where)
        if name == "Fn::GetAtt":
            target = self._resolve(arg, where)
            if isinstance(target, str):
                logical_id, _, attribute = target.partition(".")
            elif isinstance(target, list) and len(target) == 2:
                logical_id, attribute = str(target[0]), str(target[1])
            else:
                raise TemplateError(f"{self._source}: {where}: expected [LogicalId, Attribute]")
            return self._get_att(logical_id, attribute, where)
        if name == "Fn::Sub":
            return self._sub(arg, where)
        if name == "Fn::Join":
            delimiter, items = arg
            values = self._resolve(items, where)
            if not isinstance(values, list):
                raise TemplateError(f"{self._source}: {where}: Fn::Join needs a list")
            return str(delimiter).join(self._scalar(v, where) for v in values)
        if name == "Fn::Select":
            index, items = (self._resolve(a, where) for a in arg)
            if not isinstance(items, list) or not 0 <= int(index) < len(items):
                raise TemplateError(f"{self._source}: {where}: index {index} outside {items}")
            return items[int(index)]
        if name == "Fn::Split":
            delimiter, text = arg
            return str(self._resolve(text, where)).split(str(delimiter))
        if name == "Fn::If":
            condition, when_true, when_false = arg
            chosen = when_true if self._condition(condition, where) else when_false
            return self._resolve(chosen, where)
        if name in ("Fn::Equals", "Fn::And", "Fn::Or", "Fn::Not"):
            return self._evaluate_condition({name: arg}, where)
        if name == "Fn::FindInMap":
            keys = [self._resolve(a, where) for a in arg[:3]]
            try:
                return self._mappings[keys[0]][keys[1]][keys[2]]
            except (KeyError, TypeError):
                if len(arg) > 3 and isinstance(arg[3], dict) and "DefaultValue" in arg[3]:
                    return self._resolve(arg[3]["DefaultValue"], where)
                raise TemplateError(f"{self._source}: {where}: no mapping entry {keys}") from None
        if name == "Fn::Base64":
            return base64.b64encode(str(self._resolve(arg, where)).encode()).decode()
        if name == "Fn::GetAZs":
            region = self._resolve(arg, where) or self.region
            return [f"{region}{letter}" for letter in "abc"]
        if name == "Fn::ToJsonString":
            return json.dumps(self._resolve(arg, where), separators=(",", ":"))
        if name == "Fn::Length":
            value = self._resolve(arg, where)
            return len(value) if isinstance(value, list) else 1
        if name == "Fn::ImportValue":
            raise TemplateError(
                f"{self._source}: {where}: Fn::ImportValue needs another stack; not supported"
            )
        if name == "Fn::Transform":
            raise TemplateError(f"{self._source}: {where}: Fn::Transform (macros) is not supported locally")
        raise TemplateError(f"{self._source}: {where}: intrinsic function {name} is not supported locally")

    def _scalar(self, value: Any, where: str) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (str, int, float)):
            return str(value)
        raise TemplateError(
            f"{self._source}: {where}: expected a string, got {json.dumps(value, default=str)}"
        )

    def _sub(self, arg: Any, where: str) -> str:
        if isinstance(arg, str):
            text, variables = arg, {}
        elif isinstance(arg, list) and len(arg) == 2 and isinstance(arg[1], dict):
            text = arg[0]
            variables = {k: self._resolve(v, f"{where}.{k}") for k, v in arg[1].items()}
        else:
            raise TemplateError(f"{self._source}: {where}: Fn::Sub needs a string or [string, {{vars}}]")

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"  # ${!Literal} -> ${Literal}
            if name in variables:
                return self._scalar(variables[name], where)
            if "." in name and not name.startswith("AWS::"):
                logical_id, _, attribute = name.partition(".")
                return self._scalar(self._get_att(logical_id, attribute, where), where)
            value = self._ref(name, where)
            return self._scalar(",".join(value) if isinstance(value, list) else value, where)

        return _SUB_VARIABLE.sub(replace, str(text))

    def _dynamic_references(self, text: str, where: str) -> str:
        def replace(match: re.Match[str]) -> str:
            service, reference = match.groups()
            if service in ("ssm", "ssm-secure"):
                name = reference.split(":")[0]
                values: dict[str, Any] = self.local_values.get("SSM", {})
                if name not in values:
                    raise TemplateError(
                        f"{self._source}: {where}: {{{{resolve:{service}:{name}}}}} needs a value under "
                        f'"SSM" in {LOCAL_VALUES_FILE.name}'
                    )
                return str(values[name])
            secret_id, *rest = reference.split(":SecretString:")
            secret = self._local_secret(
                secret_id.split(":")[-1] if secret_id.startswith("arn:") else secret_id
            )
            if secret is None:
                raise TemplateError(
                    f"{self._source}: {where}: {{{{resolve:secretsmanager:{secret_id}}}}} needs a value "
                    "under "
                    f'"SecretsManager" in {LOCAL_VALUES_FILE.name}'
                )
            if rest and rest[0].split(":")[0]:
                key = rest[0].split(":")[0]
                return str(json.loads(secret)[key])
            return secret

        return _DYNAMIC_REFERENCE.sub(replace, text)

    def _pseudo(self, name: str) -> Any:
        values: dict[str, Any] = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::StackName": self.stack_name,
            "AWS::Partition": self.partition,
            "AWS::URLSuffix": self.url_suffix,
            "AWS::StackId": (
                f"arn:{self.partition}:cloudformation:{self.region}:{self.account_id}:stack/{self.stack_name}/"
                f"{_uuid_like(self.stack_name, self.region, self.account_id)}"
            ),
            "AWS::NotificationARNs": [],
            "AWS::NoValue": _NO_VALUE,
        }
        return values[name]

    def _ref(self, name: Any, where: str) -> Any:  # noqa: PLR0911
        if not isinstance(name, str):
            raise TemplateError(f"{self._source}: {where}: Ref needs a name, got {name!r}")
        if name.startswith("AWS::"):
            try:
                return self._pseudo(name)
            except KeyError:
                raise TemplateError(f"{self._source}: {where}: unknown pseudo parameter {name}") from None
        if name in self.parameters:
            return self.parameters[name]
        logical_id = self._layer_alias(name)
        resource = self._raw.get(logical_id)
        if resource is None:
            raise TemplateError(f"{self._source}: {where}: Ref to unknown resource or parameter {name!r}")
        kind = resource["Type"]
        physical = self._name(logical_id)
        arn = self._arn_of(logical_id, kind, physical)
        if kind in (
            "AWS::StepFunctions::StateMachine",
            "AWS::SNS::Topic",
            "AWS::SecretsManager::Secret",
            "AWS::IAM::ManagedPolicy",
            "AWS::Lambda::LayerVersion",
            "AWS::Lambda::Version",
            "AWS::SNS::Subscription",
        ):
            return arn
        if kind == "AWS::SQS::Queue":
            return f"https://sqs.{self.region}.{self.url_suffix}/{self.account_id}/{physical}"
        if kind == "AWS::Events::Rule":
            bus = self._rule_bus(logical_id)
            return physical if bus == "default" else f"{bus}|{physical}"
        if kind == "AWS::ApiGateway::RestApi" or kind.startswith("AWS::ApiGatewayV2::Api"):
            return _short_hash(self.stack_name, logical_id)
        if kind == "AWS::ApiGateway::Stage":
            return str(self.resolve(resource.get("Properties", {}).get("StageName", logical_id), where))
        if kind == "AWS::KMS::Key":
            return _uuid_like(self.stack_name, logical_id)
        return physical

    def _get_att(self, logical_id: str, attribute: str, where: str) -> Any:
        logical_id = self._layer_alias(logical_id)
        resource = self._raw.get(logical_id)
        if resource is None:
            raise TemplateError(f"{self._source}: {where}: Fn::GetAtt of unknown resource {logical_id!r}")
        kind = resource["Type"]
        name = self._name(logical_id)
        arn = self._arn_of(logical_id, kind, name)
        props = resource.get("Properties") or {}
        if attribute == "Arn" and arn is not None:
            return arn
        simple: dict[tuple[str, str], Any] = {
            ("AWS::StepFunctions::StateMachine", "Name"): name,
            ("AWS::Events::EventBus", "Name"): name,
            ("AWS::SNS::Topic", "TopicArn"): arn,
            ("AWS::SNS::Topic", "TopicName"): name,
            ("AWS::SQS::Queue", "QueueName"): name,
            ("AWS::SQS::Queue", "QueueUrl"): self._ref(logical_id, where),
            ("AWS::S3::Bucket", "DomainName"): f"{name}.s3.{self.url_suffix}",
            ("AWS::S3::Bucket", "RegionalDomainName"): f"{name}.s3.{self.region}.{self.url_suffix}",
            ("AWS::SecretsManager::Secret", "Id"): arn,
            ("AWS::IAM::Role", "RoleId"): "AROA" + _short_hash(name, length=17).upper(),
            ("AWS::Lambda::Version", "Version"): "1",
            ("AWS::ApiGateway::RestApi", "RootResourceId"): _short_hash(self.stack_name, logical_id, "/"),
            ("AWS::KMS::Key", "KeyId"): _uuid_like(self.stack_name, logical_id),
            ("AWS::Lambda::Function", "SnapStartResponse.ApplyOn"): "None",
        }
        if (kind, attribute) in simple:
            return simple[(kind, attribute)]
        if kind == "AWS::DynamoDB::Table" and attribute == "StreamArn":
            if "StreamSpecification" not in props:
                raise TemplateError(f"{self._source}: {where}: {logical_id} has no StreamSpecification")
            return f"{arn}/stream/{STREAM_LABEL}"
        if kind == "AWS::SSM::Parameter" and attribute in ("Type", "Value"):
            return self.resolve(props.get(attribute), where)
        if kind == "AWS::StepFunctions::StateMachine" and attribute == "StateMachineRevisionId":
            return arn
        raise TemplateError(
            f"{self._source}: {where}: Fn::GetAtt {logical_id}.{attribute} ({kind}) is not supported locally"
        )

    def _layer_alias(self, logical_id: str) -> str:
        """SAM renames layers (``CapacityLayer`` -> ``CapacityLayer9c4d74ba19``); accept the SAM name too."""
        if logical_id not in self._raw and logical_id in self._layer_by_key:
            return str(self._layer_by_key[logical_id])
        return logical_id

    def _rule_bus(self, logical_id: str) -> str:
        bus = self._raw[logical_id].get("Properties", {}).get("EventBusName", "default")
        resolved = str(self.resolve(bus, f"Resources.{logical_id}.Properties.EventBusName"))
        return resolved.rsplit("/", 1)[-1] if resolved.startswith("arn:") else resolved

    def _name(self, logical_id: str) -> str:
        """The physical name: the template's name property, else ``<StackName>-<LogicalId>``."""
        if logical_id in self._names:
            return self._names[logical_id]
        resource = self._raw[logical_id]
        kind = resource["Type"]
        prop, limit = _NAME_PROPERTY.get(kind, ("", 255))
        props = resource.get("Properties") or {}
        key = f"name:{logical_id}"
        if key in self._evaluating:
            raise TemplateError(f"{self._source}: Resources.{logical_id}: its name refers to itself")
        self._evaluating.add(key)
        try:
            explicit = (
                self.resolve(props[prop], f"Resources.{logical_id}.Properties.{prop}")
                if prop in props
                else None
            )
        finally:
            self._evaluating.discard(key)
        if explicit is not None:
            name = str(explicit)
        elif kind == "AWS::Lambda::LayerVersion":
            name = f"{self.stack_name}-{props.get('LayerName', logical_id)}"[:limit]
        else:
            name = f"{self.stack_name}-{logical_id}"[:limit]
            if kind == "AWS::S3::Bucket":
                name = name.lower()
        self._names[logical_id] = name
        return name

    def _arn_of(self, logical_id: str, kind: str, name: str) -> str | None:  # noqa: PLR0911
        p, r, a = self.partition, self.region, self.account_id
        simple = _ARN_FORMATS.get(kind)
        if simple is not None:
            return simple.format(p=p, r=r, a=a, name=name, ssm_name=name.lstrip("/"))
        if kind == "AWS::Events::Rule":
            bus = self._rule_bus(logical_id)
            return f"arn:{p}:events:{r}:{a}:rule/{'' if bus == 'default' else bus + '/'}{name}"
        if kind == "AWS::Scheduler::Schedule":
            props = self._raw[logical_id].get("Properties") or {}
            group = self.resolve(
                props.get("GroupName", "default"), f"Resources.{logical_id}.Properties.GroupName"
            )
            return f"arn:{p}:scheduler:{r}:{a}:schedule/{group}/{name}"
        if kind == "AWS::SecretsManager::Secret":
            suffix = _short_hash(
                self.stack_name, logical_id, length=6, alphabet="abcdefghijklmnopqrstuvwxyzABCDEF"
            )
            return f"arn:{p}:secretsmanager:{r}:{a}:secret:{name}-{suffix}"
        if kind == "AWS::IAM::Role":
            path = (self._raw[logical_id].get("Properties") or {}).get("Path", "/")
            return f"arn:{p}:iam::{a}:role{path if isinstance(path, str) else '/'}{name}"
        if kind == "AWS::KMS::Key":
            return f"arn:{p}:kms:{r}:{a}:key/{_uuid_like(self.stack_name, logical_id)}"
        if kind == "AWS::SNS::Subscription":
            return f"arn:{p}:sns:{r}:{a}:{name}:{_uuid_like(self.stack_name, logical_id)}"
        return None

    def _local_secret(self, key: str) -> str | None:
        secrets: dict[str, Any] = self.local_values.get("SecretsManager", {})
        if key not in secrets:
            return None
        value = secrets[key]
        return value if isinstance(value, str) else json.dumps(value)

    # ------------------------------------------------------------------------------------- derived views

    def _build_functions(self) -> None:
        for resource in self.resources_of_type("AWS::Lambda::Function"):
            props = resource.properties
            where = f"{self._source}: Resources.{resource.logical_id}"
            code = props.get("Code") or {}
            code_dir = (
                self._paths.code.get(str(code.get("S3Key")))
                if code.get("S3Bucket") == _PLACEHOLDER_BUCKET
                else None
            )
            if code_dir is None:
                raise TemplateError(
                    f"{where}.Properties.Code: only AWS::Serverless::Function with a local CodeUri "
                    "can run locally"
                )
            if not code_dir.is_dir():
                raise TemplateError(f"{where}.Properties.CodeUri: {code_dir} is not a directory")
            handler = props.get("Handler")
            if not isinstance(handler, str) or "." not in handler:
                raise TemplateError(
                    f"{where}.Properties.Handler: expected 'module.function', got {handler!r}"
                )
            runtime = str(props.get("Runtime", ""))
            if not runtime.startswith("python3"):
                raise TemplateError(
                    f"{where}.Properties.Runtime: {runtime!r} - only Python runtimes run locally"
                )
            variables = (props.get("Environment") or {}).get("Variables") or {}
            environment = {
                str(k): self._env_value(v, f"{where}.Environment.Variables.{k}") for k, v in variables.items()
            }
            self.functions.append(
                FunctionSpec(
                    logical_id=resource.logical_id,
                    name=self._name(resource.logical_id),
                    arn=str(
                        self._arn_of(resource.logical_id, resource.type, self._name(resource.logical_id))
                    ),
                    code_dir=code_dir,
                    handler=handler,
                    environment=environment,
                    timeout_seconds=int(props.get("Timeout", 3)),
                    memory_mb=int(props.get("MemorySize", 128)),
                    layer_dirs=self._layer_dirs(resource, where),
                    runtime=runtime,
                )
            )

    def _env_value(self, value: Any, where: str) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, (str, int, float)):
            return str(value)
        raise TemplateError(
            f"{where}: environment values must be strings, got {json.dumps(value, default=str)}"
        )

    def _layer_dirs(self, function: Resource, where: str) -> tuple[Path, ...]:
        dirs: list[Path] = []
        raw_layers = (self._raw[function.logical_id].get("Properties") or {}).get("Layers") or []
        for entry in raw_layers:
            logical_id = entry.get("Ref") if isinstance(entry, dict) else None
            layer = self._raw.get(self._layer_alias(logical_id)) if isinstance(logical_id, str) else None
            if layer is None or layer.get("Type") != "AWS::Lambda::LayerVersion":
                self.warnings.append(
                    f"{where}.Properties.Layers: {json.dumps(entry, default=str)} is not a layer of this "
                    "template; "
                    "ignored (its packages must be installed in the local environment)"
                )
                continue
            key = (layer.get("Properties") or {}).get("Content", {}).get("S3Key")
            path, metadata = self._paths.layers[str(key)]
            # ``sam build`` copies a layer with a BuildMethod into python/; a prebuilt one has python/.
            if "BuildMethod" not in metadata and (path / "python").is_dir():
                path = path / "python"
            dirs.append(path)
        return tuple(dirs)

    def _build_state_machines(self) -> None:
        for resource in self.resources_of_type("AWS::StepFunctions::StateMachine"):
            props = resource.properties
            where = f"{self._source}: Resources.{resource.logical_id}.Properties"
            if "DefinitionS3Location" in props:
                location = props["DefinitionS3Location"]
                path = (
                    self._paths.state_machines.get(str(location.get("Key")))
                    if isinstance(location, dict) and location.get("Bucket") == _PLACEHOLDER_BUCKET
                    else None
                )
                if path is None:
                    raise TemplateError(
                        f"{where}.DefinitionS3Location: only a local DefinitionUri runs locally"
                    )
                definition = json.dumps(_load_data_file(path, f"{where}.DefinitionUri"), indent=2)
            elif "DefinitionString" in props:
                definition = str(props["DefinitionString"])
            elif "Definition" in props:
                definition = json.dumps(props["Definition"], indent=2)
            else:
                raise TemplateError(
                    f"{where}: a state machine needs a Definition, DefinitionString or DefinitionUri"
                )
            substitutions = props.get("DefinitionSubstitutions") or {}
            definition = _substitute(definition, substitutions, f"{where}.DefinitionSubstitutions")
            try:
                json.loads(definition)
            except ValueError as exc:
                raise TemplateError(
                    f"{where}: the definition is not valid JSON after substitution: {exc}"
                ) from exc
            self.state_machine_definitions[resource.logical_id] = definition

    def _build_api_routes(self) -> None:
        for resource in self.resources.values():
            if resource.type == "AWS::ApiGatewayV2::Api":
                self.warnings.append(
                    f"Resources.{resource.logical_id}: HTTP APIs (payload format 2.0) are not served locally"
                )
            if resource.type != "AWS::ApiGateway::RestApi":
                continue
            body = resource.properties.get("Body")
            if not isinstance(body, dict):
                self.warnings.append(
                    f"Resources.{resource.logical_id}: a REST API without a Body is not served"
                )
                continue
            stage = next(
                (
                    str(r.properties.get("StageName"))
                    for r in self.resources_of_type("AWS::ApiGateway::Stage")
                    if r.properties.get("RestApiId") == self._ref(resource.logical_id, "api")
                ),
                "Prod",
            )
            raw_paths = (
                (self._raw[resource.logical_id].get("Properties") or {}).get("Body", {}).get("paths", {})
            )
            for path, methods in body.get("paths", {}).items():
                for method, operation in methods.items():
                    if method not in _HTTP_METHODS or not isinstance(operation, dict):
                        continue
                    raw_uri = (
                        raw_paths.get(path, {})
                        .get(method, {})
                        .get("x-amazon-apigateway-integration", {})
                        .get("uri")
                    )
                    function = _integration_function(raw_uri)
                    integration = operation.get("x-amazon-apigateway-integration") or {}
                    if function is None or integration.get("type") != "aws_proxy":
                        self.warnings.append(
                            f"Resources.{resource.logical_id}.Body.paths.{path}.{method}: not a Lambda proxy "
                            "integration of this template; not served"
                        )
                        continue
                    security = operation.get("security") or []
                    auth = (
                        next(iter(security[0]), None) if security and isinstance(security[0], dict) else None
                    )
                    self.api_routes.append(
                        ApiRoute(
                            method="ANY" if method == "x-amazon-apigateway-any-method" else method.upper(),
                            path=path,
                            function=function,
                            api=resource.logical_id,
                            api_id=str(self._ref(resource.logical_id, "api")),
                            stage=stage,
                            auth=auth,
                        )
                    )

    def _build_outputs(self) -> None:
        for name, output in (self._cfn.get("Outputs") or {}).items():
            condition = output.get("Condition")
            if condition is not None and not self._condition(condition, f"Outputs.{name}.Condition"):
                continue
            value = self.resolve(output.get("Value"), f"Outputs.{name}.Value")
            self.outputs[name] = ",".join(map(str, value)) if isinstance(value, list) else str(value)

    def _note_unsupported(self) -> None:
        for resource in self.resources.values():
            if resource.type not in CREATED_TYPES and resource.type not in _PASSIVE_TYPES:
                self.warnings.append(
                    f"Resources.{resource.logical_id}: type {resource.type} is not emulated; Ref/GetAtt Arn "
                    "resolve, nothing is created"
                )
            if resource.type == "AWS::Lambda::EventSourceMapping":
                self.warnings.append(
                    f"Resources.{resource.logical_id}: event source mappings (SQS, Kinesis, DynamoDB "
                    "streams) "
                    "do not deliver locally"
                )


STREAM_LABEL = "2020-01-01T00:00:00.000"
"""The DynamoDB stream label used in ``StreamArn`` (deterministic; CloudFormation's is the creation time)."""


def _uuid_like(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _integration_function(uri: Any) -> str | None:
    """The function logical id in an ``x-amazon-apigateway-integration`` uri (``${Fn.Arn}`` in a Sub)."""
    text = uri.get("Fn::Sub") if isinstance(uri, dict) else uri
    if isinstance(text, list):
        text = text[0]
    if not isinstance(text, str):
        return None
    match = _INTEGRATION_URI.search(text)
    return match.group(1) if match else None


def _substitute(definition: str, substitutions: dict[str, Any], where: str) -> str:
    """Apply ``DefinitionSubstitutions``: ``${Name}`` -> value; other ``${...}`` are left alone (as AWS)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in substitutions:
            return match.group(0)
        value = substitutions[name]
        if isinstance(value, (dict, list)):
            raise TemplateError(f"{where}.{name}: substitution values must be strings, numbers or booleans")
        return str(value).lower() if isinstance(value, bool) else str(value)

    return _SUB_VARIABLE.sub(replace, definition)


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


_SESSIONS: dict[str, boto3.session.Session] = {}


def _deploy_session(region: str) -> boto3.session.Session:
    """A cached boto3 session with fake credentials (clients made from it reuse loaded service models)."""
    session = _SESSIONS.get(region)
    if session is None:
        session = boto3.session.Session(
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106 - moto's fake credentials
            region_name=region,
        )
        _SESSIONS[region] = session
    return session


def conform(shape: Shape | None, value: Any, where: str) -> Any:  # noqa: PLR0911
    """Coerce a CloudFormation property value to a botocore input shape.

    CloudFormation accepts ``"300"`` for an integer, ``"true"`` for a boolean and a JSON object where the
    API wants a JSON string (``EventPattern``, policy documents); botocore does not. Walks the shape.

    Raises:
        TemplateError: a value cannot be converted (names ``where``).
    """
    if shape is None or value is None:
        return value
    kind = shape.type_name
    try:
        if isinstance(shape, StructureShape) and isinstance(value, dict):
            return {k: conform(shape.members.get(k), v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(shape, ListShape) and isinstance(value, list):
            return [conform(shape.member, v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(shape, MapShape) and isinstance(value, dict):
            return {k: conform(shape.value, v, f"{where}.{k}") for k, v in value.items()}
        if kind in ("integer", "long") and isinstance(value, (str, float)):
            return int(float(value))
        if kind in ("float", "double") and isinstance(value, (str, int)):
            return float(value)
        if kind == "boolean" and isinstance(value, str):
            return value.lower() == "true"
        if kind == "string" and isinstance(value, (dict, list)):
            return json.dumps(value)
        if kind == "string" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if kind == "timestamp" and isinstance(value, str):
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    except ValueError as exc:
        raise TemplateError(f"{where}: cannot use {value!r} as {kind}: {exc}") from exc
    return value


def client_error_text(exc: Exception) -> str:
    """A short text for a botocore error (code and message)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code')}: {error.get('Message')}"
    return str(exc)


# ------------------------------------------------------------------------------------------------ deploy

CREATED_TYPES = (
    "AWS::IAM::Role",
    "AWS::DynamoDB::Table",
    "AWS::Events::EventBus",
    "AWS::SNS::Topic",
    "AWS::SQS::Queue",
    "AWS::SecretsManager::Secret",
    "AWS::SSM::Parameter",
    "AWS::S3::Bucket",
    "AWS::CloudWatch::Alarm",
    "AWS::CloudWatch::Dashboard",
    "AWS::StepFunctions::StateMachine",
    "AWS::Events::Rule",
    "AWS::Scheduler::ScheduleGroup",
    "AWS::Scheduler::Schedule",
)
"""The resource types :meth:`Stack.deploy` creates, in the order it creates them."""


def _tags(value: Any, *, key: str = "Key", val: str = "Value") -> list[dict[str, str]]:
    """CloudFormation ``Tags`` (a list of Key/Value, or a map for SAM-style types) as an API tag list."""
    if isinstance(value, dict):
        return [{key: str(k), val: str(v)} for k, v in value.items()]
    return [{key: str(t["Key"]), val: str(t["Value"])} for t in value or []]


def _pick(props: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: props[name] for name in names if name in props}


class _Deployer:
    """Creates a :class:`Stack`'s resources with boto3 calls (one client per service, made once)."""

    def __init__(self, stack: Stack, session: boto3.session.Session) -> None:
        self.stack = stack
        self.session = session
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            session: Any = self.session  # boto3-stubs overloads want a literal service name
            self._clients[service] = session.client(service, region_name=self.stack.region)
        return self._clients[service]

    def call(self, resource: Resource, service: str, operation: str, params: dict[str, Any]) -> Any:
        """Call ``service.operation`` with params conformed to its input shape; errors name the resource."""
        client = self.client(service)
        model = client.meta.service_model.operation_model(operation)
        where = f"{self.stack._source}: Resources.{resource.logical_id} ({resource.type})"
        params = conform(model.input_shape, {k: v for k, v in params.items() if v is not None}, where)
        try:
            return getattr(client, botocore.xform_name(operation))(**params)
        except (botocore.exceptions.ClientError, botocore.exceptions.ParamValidationError) as exc:
            raise TemplateError(f"{where}: {service} {operation} failed: {client_error_text(exc)}") from exc

    def run(self) -> None:
        creators = {
            "AWS::IAM::Role": self.role,
            "AWS::DynamoDB::Table": self.table,
            "AWS::Events::EventBus": self.event_bus,
            "AWS::SNS::Topic": self.topic,
            "AWS::SQS::Queue": self.queue,
            "AWS::SecretsManager::Secret": self.secret,
            "AWS::SSM::Parameter": self.parameter,
            "AWS::S3::Bucket": self.bucket,
            "AWS::CloudWatch::Alarm": self.alarm,
            "AWS::CloudWatch::Dashboard": self.dashboard,
            "AWS::StepFunctions::StateMachine": self.state_machine,
            "AWS::Events::Rule": self.rule,
            "AWS::Scheduler::ScheduleGroup": self.schedule_group,
            "AWS::Scheduler::Schedule": self.schedule,
        }
        for kind in CREATED_TYPES:
            for resource in self.stack.resources_of_type(kind):
                creators[kind](resource, self.stack._name(resource.logical_id))

    # ------------------------------------------------------------------------------------------ creators

    def role(self, resource: Resource, name: str) -> None:
        props = resource.properties
        self.call(
            resource,
            "iam",
            "CreateRole",
            {
                "RoleName": name,
                "AssumeRolePolicyDocument": props.get("AssumeRolePolicyDocument", {}),
                "Path": props.get("Path"),
                "Description": props.get("Description"),
                "MaxSessionDuration": props.get("MaxSessionDuration"),
                "PermissionsBoundary": props.get("PermissionsBoundary"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        # Inline policies are kept (the ledger of what each function may do); managed policy ARNs are not
        # attached: moto does not enforce IAM, so they would change nothing locally.
        for policy in props.get("Policies") or []:
            document = policy["PolicyDocument"]
            if isinstance(document, dict) and "Version" not in document:
                # IAM defaults a missing Version to 2008-10-17 (SAM's generated policies omit it); moto
                # rejects it, and the version changes nothing here, so state the current one.
                document = {"Version": "2012-10-17", **document}
            self.call(
                resource,
                "iam",
                "PutRolePolicy",
                {"RoleName": name, "PolicyName": policy["PolicyName"], "PolicyDocument": document},
            )

    def table(self, resource: Resource, name: str) -> None:
        props = resource.properties
        params = _pick(
            props,
            "AttributeDefinitions",
            "KeySchema",
            "BillingMode",
            "ProvisionedThroughput",
            "GlobalSecondaryIndexes",
            "LocalSecondaryIndexes",
            "TableClass",
            "DeletionProtectionEnabled",
            "OnDemandThroughput",
        )
        params["TableName"] = name
        if "StreamSpecification" in props:
            params["StreamSpecification"] = {
                "StreamEnabled": True,
                "StreamViewType": props["StreamSpecification"]["StreamViewType"],
            }
        if "SSESpecification" in props:
            sse = props["SSESpecification"]
            params["SSESpecification"] = {
                "Enabled": sse.get("SSEEnabled", False),
                **_pick(sse, "SSEType", "KMSMasterKeyId"),
            }
        if props.get("Tags"):
            params["Tags"] = _tags(props["Tags"])
        if "BillingMode" not in params and "ProvisionedThroughput" not in params:
            raise TemplateError(
                f"{self.stack._source}: Resources.{resource.logical_id}.Properties: set BillingMode: "
                "PAY_PER_REQUEST or ProvisionedThroughput (CloudFormation requires one)"
            )
        self.call(resource, "dynamodb", "CreateTable", params)
        ttl = props.get("TimeToLiveSpecification")
        if ttl and ttl.get("Enabled") in (True, "true"):
            self.call(
                resource,
                "dynamodb",
                "UpdateTimeToLive",
                {
                    "TableName": name,
                    "TimeToLiveSpecification": {"Enabled": True, "AttributeName": ttl["AttributeName"]},
                },
            )
        pitr = props.get("PointInTimeRecoverySpecification")
        if pitr and pitr.get("PointInTimeRecoveryEnabled") in (True, "true"):
            self.call(
                resource,
                "dynamodb",
                "UpdateContinuousBackups",
                {"TableName": name, "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True}},
            )
        if "StreamSpecification" in props:
            table = dynamodb_backends[self.stack.account_id][self.stack.region].get_table(name)
            table.latest_stream_label = STREAM_LABEL  # the label Fn::GetAtt StreamArn already returned

    def event_bus(self, resource: Resource, name: str) -> None:
        if name == "default":
            return
        props = resource.properties
        params: dict[str, Any] = {
            "Name": name,
            **_pick(props, "Description", "KmsKeyIdentifier", "DeadLetterConfig"),
        }
        if props.get("Tags"):
            params["Tags"] = _tags(props["Tags"])
        self.call(resource, "events", "CreateEventBus", params)

    def topic(self, resource: Resource, name: str) -> None:
        props = resource.properties
        attributes = {
            key: props[key]
            for key in ("DisplayName", "FifoTopic", "ContentBasedDeduplication", "KmsMasterKeyId")
            if key in props
        }
        result = self.call(
            resource,
            "sns",
            "CreateTopic",
            {
                "Name": name,
                "Attributes": {
                    k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in attributes.items()
                }
                or None,
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        for subscription in props.get("Subscription") or []:
            self.call(
                resource,
                "sns",
                "Subscribe",
                {
                    "TopicArn": result["TopicArn"],
                    "Protocol": subscription["Protocol"],
                    "Endpoint": subscription["Endpoint"],
                },
            )

    def queue(self, resource: Resource, name: str) -> None:
        props = resource.properties
        attributes = {
            key: json.dumps(value)
            if isinstance(value, dict)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value)
            for key, value in props.items()
            if key not in ("QueueName", "Tags")
        }
        self.call(
            resource,
            "sqs",
            "CreateQueue",
            {
                "QueueName": name,
                "Attributes": attributes or None,
                "tags": {t["Key"]: t["Value"] for t in _tags(props.get("Tags"))} or None,
            },
        )

    def secret(self, resource: Resource, name: str) -> None:
        props = resource.properties
        value = self.stack._local_secret(resource.logical_id) or self.stack._local_secret(name)
        if value is None:
            value = props.get("SecretString")
        if value is None:
            generate = props.get("GenerateSecretString") or {}
            generated = "local-" + _short_hash(self.stack.stack_name, resource.logical_id, length=24)
            template = generate.get("SecretStringTemplate")
            if template and generate.get("GenerateStringKey"):
                document = json.loads(template)
                document[generate["GenerateStringKey"]] = generated
                value = json.dumps(document)
            else:
                value = generated
        self.call(
            resource,
            "secretsmanager",
            "CreateSecret",
            {
                "Name": name,
                "Description": props.get("Description"),
                "SecretString": value,
                "KmsKeyId": props.get("KmsKeyId"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )
        # CloudFormation's ARN suffix is random; Ref already returned a deterministic one: make moto agree.
        stored = secretsmanager_backends[self.stack.account_id][self.stack.region].secrets[name]
        stored.arn = str(self.stack._arn_of(resource.logical_id, resource.type, name))

    def parameter(self, resource: Resource, name: str) -> None:
        props = resource.properties
        ssm: dict[str, Any] = self.stack.local_values.get("SSM", {})
        value = ssm.get(name, ssm.get(resource.logical_id, props.get("Value")))
        self.call(
            resource,
            "ssm",
            "PutParameter",
            {
                "Name": name,
                "Value": ",".join(value) if isinstance(value, list) else str(value),
                "Type": props.get("Type", "String"),
                **_pick(props, "Description", "Tier", "AllowedPattern", "DataType", "Policies"),
                "Tags": _tags(props.get("Tags")) or None,
            },
        )

    def bucket(self, resource: Resource, name: str) -> None:
        params: dict[str, Any] = {"Bucket": name}
        if self.stack.region != "us-east-1":
            params["CreateBucketConfiguration"] = {"LocationConstraint": self.stack.region}
        self.call(resource, "s3", "CreateBucket", params)

    def alarm(self, resource: Resource, name: str) -> None:
        props = dict(resource.properties)
        props["AlarmName"] = name
        if props.get("Tags"):
            props["Tags"] = _tags(props["Tags"])
        self.call(resource, "cloudwatch", "PutMetricAlarm", props)

    def dashboard(self, resource: Resource, name: str) -> None:
        self.call(
            resource,
            "cloudwatch",
            "PutDashboard",
            {"DashboardName": name, "DashboardBody": resource.properties.get("DashboardBody", "{}")},
        )

    def state_machine(self, resource: Resource, name: str) -> None:
        props = resource.properties
        role = props.get("RoleArn") or f"arn:{self.stack.partition}:iam::{self.stack.account_id}:role/{name}"
        self.call(
            resource,
            "stepfunctions",
            "CreateStateMachine",
            {
                "name": name,
                "definition": self.stack.state_machine_definitions[resource.logical_id],
                "roleArn": role,
                "type": props.get("StateMachineType", "STANDARD"),
                "loggingConfiguration": _lower_keys(props.get("LoggingConfiguration")),
                "tracingConfiguration": _lower_keys(props.get("TracingConfiguration")),
                "tags": _tags(props.get("Tags"), key="key", val="value") or None,
            },
        )

    def rule(self, resource: Resource, name: str) -> None:
        props = resource.properties
        bus = props.get("EventBusName")
        pattern = props.get("EventPattern")
        self.call(
            resource,
            "events",
            "PutRule",
            {
                "Name": name,
                "EventBusName": bus,
                "EventPattern": pattern
                if isinstance(pattern, str) or pattern is None
                else json.dumps(pattern),
                "ScheduleExpression": props.get("ScheduleExpression"),
                "State": props.get("State"),
                "Description": props.get("Description"),
                "RoleArn": props.get("RoleArn"),
            },
        )
        targets = props.get("Targets") or []
        if targets:
            self.call(
                resource, "events", "PutTargets", {"Rule": name, "EventBusName": bus, "Targets": targets}
            )

    def schedule_group(self, resource: Resource, name: str) -> None:
        if name == "default":
            return
        self.call(
            resource,
            "scheduler",
            "CreateScheduleGroup",
            {"Name": name, "Tags": _tags(resource.properties.get("Tags")) or None},
        )

    def schedule(self, resource: Resource, name: str) -> None:
        props = resource.properties
        self.call(
            resource,
            "scheduler",
            "CreateSchedule",
            {
                "Name": name,
                **_pick(
                    props,
                    "GroupName",
                    "ScheduleExpression",
                    "ScheduleExpressionTimezone",
                    "FlexibleTimeWindow",
                    "Target",
                    "State",
                    "StartDate",
                    "EndDate",
                    "Description",
                    "KmsKeyArn",
                    "ActionAfterCompletion",
                ),
            },
        )


def _lower_keys(value: Any) -> Any:
    """Step Functions' API spells ``loggingConfiguration.level``; CloudFormation spells ``Level``."""
    if isinstance(value, dict):
        return {k[:1].lower() + k[1:]: _lower_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_lower_keys(v) for v in value]
    return value


# ARNs that follow from the partition, region, account and physical name alone (the AWS ARN formats).
_ARN_FORMATS: dict[str, str] = {
    "AWS::Lambda::Function": "arn:{p}:lambda:{r}:{a}:function:{name}",
    "AWS::Lambda::LayerVersion": "arn:{p}:lambda:{r}:{a}:layer:{name}:1",
    "AWS::Lambda::Version": "arn:{p}:lambda:{r}:{a}:function:{name}:1",
    "AWS::DynamoDB::Table": "arn:{p}:dynamodb:{r}:{a}:table/{name}",
    "AWS::Events::EventBus": "arn:{p}:events:{r}:{a}:event-bus/{name}",
    "AWS::StepFunctions::StateMachine": "arn:{p}:states:{r}:{a}:stateMachine:{name}",
    "AWS::Scheduler::ScheduleGroup": "arn:{p}:scheduler:{r}:{a}:schedule-group/{name}",
    "AWS::SNS::Topic": "arn:{p}:sns:{r}:{a}:{name}",
    "AWS::SQS::Queue": "arn:{p}:sqs:{r}:{a}:{name}",
    "AWS::SSM::Parameter": "arn:{p}:ssm:{r}:{a}:parameter/{ssm_name}",
    "AWS::IAM::ManagedPolicy": "arn:{p}:iam::{a}:policy/{name}",
    "AWS::S3::Bucket": "arn:{p}:s3:::{name}",
    "AWS::CloudWatch::Alarm": "arn:{p}:cloudwatch:{r}:{a}:alarm:{name}",
    "AWS::CloudWatch::CompositeAlarm": "arn:{p}:cloudwatch:{r}:{a}:alarm:{name}",
    "AWS::Logs::LogGroup": "arn:{p}:logs:{r}:{a}:log-group:{name}:*",
}
