"""The CloudFormation intrinsics of a transformed template: ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` in both
forms, ``Fn::Join``, ``Fn::Select``, ``Fn::Split``, ``Fn::If`` and ``Conditions``, ``Fn::FindInMap``,
``Fn::Base64``, ``Fn::GetAZs``, ``Fn::ToJsonString``, ``Fn::Length``, pseudo parameters, ``AWS::NoValue``
and dynamic references (``{{resolve:ssm:...}}``), with the physical names and ARNs they answer.

Over 400 lines: the intrinsics resolve through each other (``Fn::Sub`` in ``Fn::Join`` in ``Fn::If``): one
resolver.

Follows the CloudFormation template reference ("Intrinsic function reference", "Pseudo parameters
reference", and each resource type's "Return values" section for ``Ref``/``Fn::GetAtt``).
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from localcloud.template.loading import LOCAL_VALUES_FILE
from localcloud.template.model import TemplateError
from localcloud.template.naming import ARN_FORMATS, NAME_PROPERTY, STREAM_LABEL, short_hash, uuid_like

NO_VALUE: Any = object()  # the value of ``Ref: AWS::NoValue``; removed from the enclosing dict or list
SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")
_DYNAMIC_REFERENCE = re.compile(r"\{\{resolve:(ssm|ssm-secure|secretsmanager):([^}]*)\}\}")


class Intrinsics:
    """The transformed template's resources, parameters, mappings and conditions, and the intrinsic functions
    over them; :class:`~localcloud.template.stack.Stack` is one.

    Attributes:
        stack_name, region, account_id, partition, url_suffix: the pseudo parameters used everywhere.
        parameters: the template parameters' values (defaults, then overrides), as strings or lists.
        local_values: ``local_values.json`` (secrets, SSM parameters and parameters of a real account).
    """

    def __init__(
        self,
        cfn: dict[str, Any],
        *,
        source: str,
        stack_name: str,
        region: str,
        account_id: str,
        parameters: dict[str, str | list[str]],
        local_values: dict[str, Any],
    ) -> None:
        self._source = source
        self.stack_name = stack_name
        self.region = region
        self.account_id = account_id
        self.partition = "aws-cn" if region.startswith("cn-") else "aws"
        self.url_suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        self.parameters = parameters
        self.local_values = local_values
        self._cfn = cfn
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
        return None if result is NO_VALUE else result

    def _resolve(self, value: Any, where: str) -> Any:
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, arg),) = value.items()
                if key == "Ref" or key.startswith("Fn::"):
                    return self._function(key, arg, f"{where}.{key}")
            resolved: dict[str, Any] = {}
            for key, item in value.items():
                result = self._resolve(item, f"{where}.{key}")
                if result is not NO_VALUE:
                    resolved[key] = result
            return resolved
        if isinstance(value, list):
            items = [self._resolve(item, f"{where}[{i}]") for i, item in enumerate(value)]
            return [item for item in items if item is not NO_VALUE]
        if isinstance(value, str) and "{{resolve:" in value:
            return self._dynamic_references(value, where)
        return value

    def _function(self, name: str, arg: Any, where: str) -> Any:  # noqa: C901, PLR0911, PLR0912 - one branch per intrinsic
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

        return SUB_VARIABLE.sub(replace, str(text))

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
                f"{uuid_like(self.stack_name, self.region, self.account_id)}"
            ),
            "AWS::NotificationARNs": [],
            "AWS::NoValue": NO_VALUE,
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
            return short_hash(self.stack_name, logical_id)
        if kind == "AWS::ApiGateway::Stage":
            return str(self.resolve(resource.get("Properties", {}).get("StageName", logical_id), where))
        if kind == "AWS::KMS::Key":
            return uuid_like(self.stack_name, logical_id)
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
            ("AWS::IAM::Role", "RoleId"): "AROA" + short_hash(name, length=17).upper(),
            ("AWS::Lambda::Version", "Version"): "1",
            ("AWS::ApiGateway::RestApi", "RootResourceId"): short_hash(self.stack_name, logical_id, "/"),
            ("AWS::KMS::Key", "KeyId"): uuid_like(self.stack_name, logical_id),
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
        prop, limit = NAME_PROPERTY.get(kind, ("", 255))
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
        simple = ARN_FORMATS.get(kind)
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
            suffix = short_hash(
                self.stack_name, logical_id, length=6, alphabet="abcdefghijklmnopqrstuvwxyzABCDEF"
            )
            return f"arn:{p}:secretsmanager:{r}:{a}:secret:{name}-{suffix}"
        if kind == "AWS::IAM::Role":
            path = (self._raw[logical_id].get("Properties") or {}).get("Path", "/")
            return f"arn:{p}:iam::{a}:role{path if isinstance(path, str) else '/'}{name}"
        if kind == "AWS::KMS::Key":
            return f"arn:{p}:kms:{r}:{a}:key/{uuid_like(self.stack_name, logical_id)}"
        if kind == "AWS::SNS::Subscription":
            return f"arn:{p}:sns:{r}:{a}:{name}:{uuid_like(self.stack_name, logical_id)}"
        return None

    def _local_secret(self, key: str) -> str | None:
        secrets: dict[str, Any] = self.local_values.get("SecretsManager", {})
        if key not in secrets:
            return None
        value = secrets[key]
        return value if isinstance(value, str) else json.dumps(value)
