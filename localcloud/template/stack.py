"""The stack: a SAM template read, transformed and resolved (:meth:`Stack.load`), and deployed into moto.

Over 400 lines: the pipeline's steps live in their own modules; this one holds the Stack that carries their
results.

Pipeline (:meth:`Stack.load`), one module of :mod:`localcloud.template` per step:

1. parse the YAML/JSON template (short-form intrinsics ``!Ref``/``!Sub``... via samtranslator's YAML loader;
   :mod:`~localcloud.template.loading`), its parameters checked (:mod:`~localcloud.template.parameters`);
2. replace every local path (``CodeUri``, ``ContentUri``, state machine and API ``DefinitionUri``) with a
   placeholder ``s3://localcloud-local/<LogicalId>`` and remember the local path (what cfn-lint does before
   calling the translator, since the SAM transform only accepts S3 locations; ``loading``);
3. run the SAM transform with aws-sam-translator, the library SAM CLI and CloudFormation use, which expands
   ``Globals``, ``Events`` (EventBridgeRule, CloudWatchEvent, Schedule, ScheduleV2, Api), policy templates,
   roles, layers, APIs (``loading``);
4. resolve the CloudFormation intrinsics of the result (:mod:`~localcloud.template.intrinsics`) with
   deterministic physical names: ``<StackName>-<LogicalId>`` unless the template names the resource
   (:mod:`~localcloud.template.naming`);
5. derive the views the local cloud runs (this module): function specs, state machine definitions, API
   routes, outputs.

:meth:`Stack.deploy` then creates the resources in moto through ordinary boto3 calls (so botocore validates
every request), in dependency-safe order by type (:mod:`~localcloud.template.deploy`). Lambda functions are
not created in moto: the local cloud's Lambda runtime runs them from :attr:`Stack.functions`.

Errors are :class:`~localcloud.template.model.TemplateError`, whose message names the template, the resource
and the property.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3

from localcloud.lambdas import FunctionSpec
from localcloud.streams import MappingError, StreamMapping
from localcloud.template.deploy import CREATED_TYPES, Deployer, deploy_session
from localcloud.template.intrinsics import SUB_VARIABLE, Intrinsics
from localcloud.template.loading import (
    PLACEHOLDER_BUCKET,
    load_data_file,
    load_document,
    load_local_values,
    replace_local_paths,
    transform,
)
from localcloud.template.model import ApiRoute, Resource, TemplateError
from localcloud.template.parameters import parameter_values

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
        "AWS::Lambda::EventSourceMapping",  # DynamoDB streams: localcloud.streams; others: a warning
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


class Stack(Intrinsics):
    """A SAM template, transformed and resolved, ready to deploy into moto.

    Attributes:
        template_path: the template file; ``root`` its directory (local paths are relative to it).
        stack_name, region, account_id, partition: the pseudo parameters used everywhere.
        parameters: the template parameters' values (defaults, then overrides), as strings or lists.
        resources: logical id -> :class:`Resource` (transformed, conditions applied, properties resolved).
        functions: one :class:`~localcloud.lambdas.FunctionSpec` per ``AWS::Lambda::Function``.
        stream_mappings: the ``AWS::Lambda::EventSourceMapping`` resources on DynamoDB streams
            (:class:`~localcloud.streams.StreamMapping`).
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
        self.parameter_overrides = dict(parameter_overrides or {})
        values = local_values if local_values is not None else load_local_values()
        self.warnings: list[str] = []
        self.resources: dict[str, Resource] = {}
        self.functions: list[FunctionSpec] = []
        self.stream_mappings: list[StreamMapping] = []
        self.state_machine_definitions: dict[str, str] = {}
        self.api_routes: list[ApiRoute] = []
        self.outputs: dict[str, str] = {}
        self.deployed = False

        document = load_document(self.template_path)
        source = str(self.template_path)
        parameters = parameter_values(
            document.get("Parameters") or {}, parameter_overrides or {}, values, source
        )
        self._paths = replace_local_paths(document, self.root, self.template_path)
        super().__init__(
            transform(document, self.template_path, region, parameters),
            source=source,
            stack_name=stack_name,
            region=region,
            account_id=account_id,
            parameters=parameters,
            local_values=values,
        )
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
        self._build_stream_mappings()
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
        Deployer(self, session or deploy_session(self.region)).run()
        self.deployed = True

    # ------------------------------------------------------------------------------------- derived views

    def _build_functions(self) -> None:
        for resource in self.resources_of_type("AWS::Lambda::Function"):
            props = resource.properties
            where = f"{self._source}: Resources.{resource.logical_id}"
            code = props.get("Code") or {}
            code_dir = (
                self._paths.code.get(str(code.get("S3Key")))
                if code.get("S3Bucket") == PLACEHOLDER_BUCKET
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

    def _build_stream_mappings(self) -> None:
        """The event source mappings on DynamoDB streams (delivered by :mod:`localcloud.streams`)."""
        for resource in self.resources_of_type("AWS::Lambda::EventSourceMapping"):
            where = f"{self._source}: Resources.{resource.logical_id}.Properties"
            try:
                mapping = StreamMapping.from_resource(resource.logical_id, resource.properties, where=where)
            except MappingError as exc:
                raise TemplateError(str(exc)) from exc
            if mapping is not None:
                self.stream_mappings.append(mapping)

    def _build_state_machines(self) -> None:
        for resource in self.resources_of_type("AWS::StepFunctions::StateMachine"):
            props = resource.properties
            where = f"{self._source}: Resources.{resource.logical_id}.Properties"
            if "DefinitionS3Location" in props:
                location = props["DefinitionS3Location"]
                path = (
                    self._paths.state_machines.get(str(location.get("Key")))
                    if isinstance(location, dict) and location.get("Bucket") == PLACEHOLDER_BUCKET
                    else None
                )
                if path is None:
                    raise TemplateError(
                        f"{where}.DefinitionS3Location: only a local DefinitionUri runs locally"
                    )
                definition = json.dumps(load_data_file(path, f"{where}.DefinitionUri"), indent=2)
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
            if resource.type == "AWS::Lambda::EventSourceMapping" and not any(
                m.logical_id == resource.logical_id for m in self.stream_mappings
            ):
                self.warnings.append(
                    f"Resources.{resource.logical_id}: event source mappings other than DynamoDB streams "
                    "(SQS, Kinesis, Kafka) do not deliver locally"
                )


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

    return SUB_VARIABLE.sub(replace, definition)
