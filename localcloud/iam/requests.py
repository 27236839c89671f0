"""What IAM authorizes for one API call: the actions, the resource ARNs and the request's condition keys.
Kept whole: a flat table of small per-operation resolvers behind one lookup (checks_for).

For a call ``(service id, operation, parameters)``:

- the action is ``<IAM prefix>:<operation>`` (the prefix from :data:`SERVICE_PREFIX`), except where AWS
  authorizes under another name (:data:`ACTION_NAMES`: ``lambda:Invoke`` is ``lambda:InvokeFunction``,
  SageMaker Runtime's ``InvokeEndpoint`` is ``sagemaker:InvokeEndpoint``, S3 ``ListObjectsV2`` is
  ``s3:ListBucket``...) or under several actions (DynamoDB ``TransactWriteItems``: ``PutItem``,
  ``UpdateItem``, ``DeleteItem``, ``ConditionCheckItem`` on each item's table);
- the resources are the ARNs of the action's resource types in the Service Authorization Reference,
  their placeholders filled from the request (a parameter named like the placeholder, an alias of
  :data:`PLACEHOLDER_ALIASES`, a parameter that already is an ARN of that type, or a per-operation rule
  of :data:`_RESOLVERS`); an action with no resource type is authorized on ``*``. A required resource that
  cannot be derived raises :class:`UnresolvedResourceError`: the call fails loudly, it is never allowed;
- the extra authorizations AWS makes: ``iam:PassRole`` on every role ARN the request passes (with
  ``iam:PassedToService``), tag-on-create (``sagemaker:AddTags`` when a ``Create*`` carries ``Tags``,
  ``ec2:CreateTags`` with ``ec2:CreateAction`` for ``TagSpecifications``, ``cloudwatch:TagResource`` and
  ``application-autoscaling:TagResource`` for ``Tags``);
- the condition keys: ``aws:RequestTag/<k>``, ``aws:TagKeys``, ``aws:ResourceTag/<k>`` (the resource's
  current tags, read lazily through :class:`Lookups`), ``events:source``/``events:detail-type``,
  ``iam:AWSServiceName``, ``iam:PassedToService``, ``ec2:CreateAction``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from localcloud.iam.policy import ContextValue
from localcloud.iam.sar import Action, Reference

SERVICE_PREFIX: dict[str, str] = {
    "sagemaker": "sagemaker",
    "sagemaker-runtime": "sagemaker",
    "ec2": "ec2",
    "application-auto-scaling": "application-autoscaling",
    "cloudwatch": "cloudwatch",
    "lambda": "lambda",
    "eventbridge": "events",
    "sfn": "states",
    "scheduler": "scheduler",
    "dynamodb": "dynamodb",
    "sns": "sns",
    "s3": "s3",
    "ssm": "ssm",
    "secrets-manager": "secretsmanager",
    "iam": "iam",
    "sts": "sts",
    "cloudwatch-logs": "logs",
    "sqs": "sqs",
    "xray": "xray",
    "ecr": "ecr",
}
"""botocore's hyphenated service id -> the IAM service prefix."""

ACTION_NAMES: dict[tuple[str, str], str] = {
    ("lambda", "Invoke"): "lambda:InvokeFunction",
    ("sagemaker-runtime", "InvokeEndpoint"): "sagemaker:InvokeEndpoint",
    ("sagemaker-runtime", "InvokeEndpointAsync"): "sagemaker:InvokeEndpointAsync",
    ("sagemaker-runtime", "InvokeEndpointWithResponseStream"): "sagemaker:InvokeEndpoint",
    ("s3", "ListObjectsV2"): "s3:ListBucket",
    ("s3", "ListObjects"): "s3:ListBucket",
    ("s3", "HeadBucket"): "s3:ListBucket",
    ("s3", "HeadObject"): "s3:GetObject",
    ("s3", "DeleteObjects"): "s3:DeleteObject",
    ("sqs", "SendMessageBatch"): "sqs:SendMessage",
    ("sqs", "DeleteMessageBatch"): "sqs:DeleteMessage",
}
"""Operations AWS authorizes under another action's name (Service Authorization Reference; S3's
"Amazon S3 API operations and their permissions")."""

UNAUTHORIZED_OPERATIONS = frozenset({("sts", "GetCallerIdentity")})
"""Calls every principal may make: "No permissions are required to perform this operation" (STS)."""

PLACEHOLDER_ALIASES: dict[tuple[str, str], tuple[str, ...]] = {
    ("scheduler", "ScheduleName"): ("Name",),
    ("scheduler", "GroupName"): ("GroupName",),
    ("secretsmanager", "SecretId"): ("SecretId",),
    ("events", "EventBusName"): ("EventBusName",),
    ("iam", "RoleNameWithPath"): ("RoleName",),
    # GetInstanceProfile names the profile without its path: a grant on instance-profile/* matches, as on AWS.
    ("iam", "InstanceProfileNameWithPath"): ("InstanceProfileName",),
    ("logs", "LogGroupName"): ("logGroupName",),
    ("logs", "LogStreamName"): ("logStreamName",),
    ("states", "StateMachineName"): ("name",),
    ("sqs", "QueueName"): ("QueueName",),
    ("s3", "BucketName"): ("Bucket",),
    ("s3", "ObjectName"): ("Key",),
    ("ssm", "ParameterNameWithoutLeadingSlash"): ("Name",),
}
"""(IAM prefix, ARN placeholder) -> request parameters that hold its value."""

PLACEHOLDER_FORMS: dict[tuple[str, str], Callable[[str], str]] = {
    # A parameter named /a/b is arn:...:parameter/a/b (SSM's "Working with parameter ARNs").
    ("ssm", "ParameterNameWithoutLeadingSlash"): lambda name: name.removeprefix("/"),
}
"""Placeholders whose value is the parameter's in another form."""

PLACEHOLDER_DEFAULTS: dict[tuple[str, str], str] = {
    ("scheduler", "GroupName"): "default",
    ("events", "EventBusName"): "default",
}
"""Placeholders whose parameter is optional, with the value AWS uses when it is absent."""

_TAG_ON_CREATE: dict[str, str] = {
    "sagemaker": "sagemaker:AddTags",
    "cloudwatch": "cloudwatch:TagResource",
    "application-autoscaling": "application-autoscaling:TagResource",
}
_PASSED_TO: dict[str, str] = {"application-autoscaling": "application-autoscaling.amazonaws.com"}
_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/.+$")
_ROLE_KEYS = re.compile(r"(?i)role_?arn$")


class UnresolvedResourceError(Exception):
    """The resource of a call cannot be derived (the local cloud cannot authorize it: an internal error)."""


class Lookups(Protocol):
    """What resource derivation and ``aws:ResourceTag`` need to read from the cloud's state."""

    def resource_tags(self, arn: str) -> dict[str, str] | None:
        """The current tags of the resource (None: unknown resource or not taggable)."""
        ...

    def scalable_target_arn(
        self, region: str, namespace: str, resource_id: str, dimension: str
    ) -> str | None:
        """The ARN of a registered Application Auto Scaling target (None: not registered)."""
        ...

    def launch_template(self, region: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(template id, the version's data) of a ``LaunchTemplate`` specification (None: unknown)."""
        ...

    def instance_profile_role(self, profile: dict[str, Any]) -> str | None:
        """The role ARN of an ``IamInstanceProfile`` (``Arn`` or ``Name``), None if unknown."""
        ...

    def function_arn(self, name_or_arn: str, region: str) -> str:
        """A function's ARN from a name, ARN or partial ARN (qualifier kept)."""
        ...

    def queue_arn(self, queue_url: str) -> str:
        """An SQS queue's ARN from its URL."""
        ...


@dataclass
class Check:
    """One authorization AWS makes: ``action`` on ``resource`` with the request's condition keys."""

    action: str
    resource: str
    context: dict[str, ContextValue] = field(default_factory=dict)
    resource_tags: Callable[[], dict[str, str] | None] | None = None
    read_tags: list[dict[str, str] | None] = field(default_factory=list)
    """The resource's tags once a condition read them (kept for recorded calls)."""


@dataclass
class Call:
    """The call being authorized (built once per request)."""

    service: str
    operation: str
    params: dict[str, Any]
    region: str
    account: str
    partition: str
    lookups: Lookups

    @property
    def prefix(self) -> str:
        """The IAM service prefix.

        Raises:
            UnresolvedResourceError: a service the local cloud has no IAM prefix for.
        """
        prefix = SERVICE_PREFIX.get(self.service)
        if prefix is None:
            raise UnresolvedResourceError(f"no IAM service prefix for {self.service}")
        return prefix

    def arn(
        self, service: str, resource: str, *, region: str | None = None, account: str | None = None
    ) -> str:
        """``arn:<partition>:<service>:<region>:<account>:<resource>``."""
        return (
            f"arn:{self.partition}:{service}:{self.region if region is None else region}:"
            f"{self.account if account is None else account}:{resource}"
        )


def checks_for(call: Call, reference: Reference) -> list[Check]:
    """Every authorization the call needs, in the order AWS would make them.

    Raises:
        UnresolvedResourceError: a required resource cannot be derived from the request.
        localcloud.iam.sar.UnknownActionError: the action is not in the reference.
    """
    if (call.service, call.operation) in UNAUTHORIZED_OPERATIONS:
        return []
    resolver = _RESOLVERS.get((call.service, call.operation))
    if resolver is not None:
        checks = resolver(call, reference)
    else:
        name = ACTION_NAMES.get((call.service, call.operation), f"{call.prefix}:{call.operation}")
        action = reference.action(name)
        context = request_tag_context(call.params.get("Tags"))
        checks = [Check(action.qualified, arn, dict(context)) for arn in generic_resources(call, action)]
        checks.extend(_tag_on_create(call, action, context, checks))
    checks.extend(dependent_checks(call, reference, checks))
    for check in checks:
        _add_resource_tags(check, call)
    checks.extend(_pass_role_checks(call, reference))
    return checks


# ------------------------------------------------------------------------------------ dependent actions

EVALUATED_WHEN_USED: dict[str, str] = {
    "iam:passrole": "a role is passed (every role ARN of the request, or the launch's instance profile role)",
    "ec2:createtags": "the request tags what it creates (TagSpecifications: tag-on-create)",
    "sagemaker:addtags": "the request carries Tags (tag-on-create)",
    "application-autoscaling:tagresource": "the request carries Tags (tag-on-create)",
    "ssm:getparameters": "the image is an SSM parameter (ImageId resolve:ssm:<parameter>)",
}
"""Dependent actions AWS authorizes only when the request uses what they guard, with when (IAM User Guide,
"Grant permission to tag resources during creation"; EC2 User Guide, "Use a Systems Manager parameter
instead of an AMI ID"; "Granting a user permissions to pass a role"). Every other dependent action the
reference lists for an action is authorized on every call of it."""


def dependent_checks(call: Call, reference: Reference, checks: list[Check]) -> list[Check]:
    """The dependent actions of every action in ``checks`` (the reference's "Dependent actions"), each on its
    own resource types: a resource of the call that is of one of its types (``sagemaker:AddTags`` on the
    plan being created), else the ARNs derivable from the request, else, for a resource the call creates
    under a name AWS generates (``reserved-capacity/${RandomString}``), the type's ARN with ``*`` for the
    name (only a grant covering every such resource matches). See :data:`EVALUATED_WHEN_USED` for the
    dependent actions AWS evaluates only when the request uses them (tags, a passed role, an SSM image)."""
    seen = {(c.action.lower(), c.resource) for c in checks}
    found: list[Check] = []
    for name in dict.fromkeys(c.action for c in checks):
        action = reference.action(name)
        own = [c for c in checks if c.action == name]
        for dependent_name in action.dependent_actions:
            key = dependent_name.lower()
            if key == "ssm:getparameters":
                resources = _ssm_image_parameters(call)
            elif key in EVALUATED_WHEN_USED:
                continue  # tag-on-create and iam:PassRole add these when the request uses them
            else:
                resources = _dependent_resources(
                    call, reference.action(dependent_name), [c.resource for c in own]
                )
            dependent = reference.action(dependent_name).qualified
            context = dict(own[0].context) if own else {}
            for resource in resources:
                if (dependent.lower(), resource) not in seen:
                    seen.add((dependent.lower(), resource))
                    found.append(Check(dependent, resource, dict(context)))
    return found


def _dependent_resources(call: Call, dependent: Action, resources: list[str]) -> list[str]:
    if not dependent.resource_types:
        return ["*"]
    shared = [r for r in resources if dependent.resource_type_of(r) is not None]
    if shared:
        return shared
    try:
        return generic_resources(call, dependent)
    except UnresolvedResourceError:
        pass
    types = [rt for rt, required in dependent.resource_types if required] or [dependent.resource_types[0][0]]
    values = {"Partition": call.partition, "Region": call.region, "Account": call.account}
    return [rt.build({**dict.fromkeys(rt.placeholders, "*"), **values}) for rt in types]


def _ssm_image_parameters(call: Call) -> list[str]:
    """The parameter ARNs of an image given as ``resolve:ssm:<name or ARN>[:<version or label>]``, in the
    request or its launch template (AWS public parameters, ``/aws/service/...``, have no account)."""
    images = [call.params.get("ImageId")]
    if call.params.get("LaunchTemplate"):
        template = call.lookups.launch_template(call.region, dict(call.params["LaunchTemplate"]))
        images.append((template[1] if template else {}).get("ImageId"))
    if call.operation == "DescribeLaunchTemplateVersions" and call.params.get("ResolveAlias"):
        template = call.lookups.launch_template(call.region, _template_spec(call.params))
        images.append((template[1] if template else {}).get("ImageId"))
    arns: list[str] = []
    for image in images:
        if not isinstance(image, str) or not image.startswith("resolve:ssm:"):
            continue
        name = image.removeprefix("resolve:ssm:")
        if name.startswith("arn:"):
            arn = ":".join(name.split(":")[:6])
        else:
            name = name.split(":", 1)[0].removeprefix("/")
            account = "" if name.startswith("aws/service/") else call.account
            arn = call.arn("ssm", f"parameter/{name}", account=account)
        if arn not in arns:
            arns.append(arn)
    return arns


def _template_spec(params: dict[str, Any]) -> dict[str, Any]:
    spec = {k: params[k] for k in ("LaunchTemplateId", "LaunchTemplateName") if params.get(k)}
    versions = params.get("Versions") or []
    if versions:
        spec["Version"] = str(versions[0])
    return spec


# ------------------------------------------------------------------------------------ generic resources


def generic_resources(call: Call, action: Action, params: dict[str, Any] | None = None) -> list[str]:
    """The ARNs the action is authorized on for these parameters (``["*"]`` for no resource type).

    Raises:
        UnresolvedResourceError: a required resource type has no ARN in the request, or no type at all could
            be derived for an action that has only optional ones.
    """
    params = call.params if params is None else params
    if not action.resource_types:
        return ["*"]
    found: list[str] = []
    missing: list[str] = []
    for resource_type, required in action.resource_types:
        arns = _arns_of_type(call, action, resource_type.name, params)
        if arns:
            found.extend(arn for arn in arns if arn not in found)
        elif required:
            missing.append(resource_type.name)
    if missing:
        raise UnresolvedResourceError(
            f"{call.service} {call.operation}: no {', '.join(missing)} ARN for {action.qualified} "
            "in the request"
        )
    if not found:
        raise UnresolvedResourceError(
            f"{call.service} {call.operation}: none of the resource types of {action.qualified} "
            f"({', '.join(rt.name for rt, _ in action.resource_types)}) can be derived from the request"
        )
    return found


def _arns_of_type(call: Call, action: Action, type_name: str, params: dict[str, Any]) -> list[str]:
    resource_type = next(rt for rt, _ in action.resource_types if rt.name == type_name)
    direct = [
        value
        for value in _arn_values(params)
        if resource_type.pattern.match(value) and action.resource_type_of(value) is resource_type
    ]
    if direct:
        return direct
    if not resource_type.placeholders:
        return []
    lowered = {key.lower(): value for key, value in params.items()}
    values = {"Partition": call.partition, "Region": call.region, "Account": call.account}
    for placeholder in resource_type.placeholders:
        names = PLACEHOLDER_ALIASES.get((action.prefix, placeholder), (placeholder,))
        value = next((lowered[n.lower()] for n in names if isinstance(lowered.get(n.lower()), str)), None)
        if value is None:
            value = PLACEHOLDER_DEFAULTS.get((action.prefix, placeholder))
        if value is None:
            return []
        if value.startswith("arn:"):
            # A name parameter that holds an ARN (EventBusName, SecretId...): the ARN is the resource.
            return [value] if resource_type.pattern.match(value) else []
        form = PLACEHOLDER_FORMS.get((action.prefix, placeholder))
        values[placeholder] = form(value) if form else value
    return [resource_type.build(values)]


def _arn_values(params: dict[str, Any]) -> Iterable[str]:
    for value in params.values():
        if isinstance(value, str) and value.startswith("arn:"):
            yield value
        elif isinstance(value, list):
            yield from (v for v in value if isinstance(v, str) and v.startswith("arn:"))


# ------------------------------------------------------------------------------------ condition keys


def request_tag_context(tags: Any) -> dict[str, ContextValue]:
    """``aws:RequestTag/<k>`` and ``aws:TagKeys`` of a request's tags (a ``[{Key, Value}]`` list or a map)."""
    pairs = _tag_pairs(tags)
    if not pairs:
        return {}
    context: dict[str, ContextValue] = {f"aws:requesttag/{k.lower()}": v for k, v in pairs.items()}
    context["aws:tagkeys"] = list(pairs)
    return context


def _tag_pairs(tags: Any) -> dict[str, str]:
    if isinstance(tags, dict):
        return {str(k): str(v) for k, v in tags.items()}
    if isinstance(tags, list):
        return {
            str(t.get("Key", t.get("key"))): str(t.get("Value", t.get("value", "")))
            for t in tags
            if isinstance(t, dict)
        }
    return {}


def _add_resource_tags(check: Check, call: Call) -> None:
    """Give the check a lazy reader of its resource's current tags (for ``aws:ResourceTag/<k>``)."""
    if "*" in check.resource:
        return
    cache = check.read_tags
    resource = check.resource

    def tags() -> dict[str, str] | None:
        if not cache:
            cache.append(call.lookups.resource_tags(resource))
        return cache[0]

    check.resource_tags = tags


def _tag_on_create(
    call: Call, action: Action, context: dict[str, ContextValue], checks: list[Check]
) -> list[Check]:
    tag_action = _TAG_ON_CREATE.get(action.prefix)
    if tag_action is None or not context or tag_action == action.qualified:
        return []
    if action.prefix == "sagemaker" and not call.operation.startswith("Create"):
        return []
    if action.prefix == "cloudwatch" and call.operation != "PutMetricAlarm":
        return []
    if action.prefix == "application-autoscaling" and call.operation != "RegisterScalableTarget":
        return []
    # The resource being created: the first (most specific) ARN of the main check.
    created = checks[0].resource if checks else "*"
    return [Check(tag_action, created, dict(context))]


def _pass_role_checks(call: Call, reference: Reference) -> list[Check]:
    roles = sorted(set(_passed_roles(call.params)))
    if not roles:
        return []
    pass_role = reference.action("iam:PassRole")
    service = _PASSED_TO.get(call.prefix, f"{call.prefix}.amazonaws.com")
    return [
        Check(pass_role.qualified, role, {"iam:passedtoservice": service, "iam:associatedresourcearn": None})
        for role in roles
    ]


def _passed_roles(value: Any, key: str = "") -> Iterable[str]:
    if isinstance(value, str):
        if _ROLE_KEYS.search(key) and _ROLE_ARN.match(value):
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _passed_roles(v, str(k))
    elif isinstance(value, list):
        for item in value:
            yield from _passed_roles(item, key)


# ------------------------------------------------------------------------------------ per-operation rules

Resolver = Callable[[Call, Reference], list[Check]]


def _dynamodb_transact_write(call: Call, reference: Reference) -> list[Check]:
    """``TransactWriteItems``: each item is authorized as its own action on its table (DynamoDB developer
    guide, "Using IAM with DynamoDB transactions")."""
    actions = {
        "Put": "PutItem",
        "Update": "UpdateItem",
        "Delete": "DeleteItem",
        "ConditionCheck": "ConditionCheckItem",
    }
    checks: list[Check] = []
    for item in call.params.get("TransactItems") or []:
        for kind, name in actions.items():
            if kind in item:
                table = str(item[kind]["TableName"])
                checks.append(Check(reference.action(f"dynamodb:{name}").qualified, _table_arn(call, table)))
    return checks


def _dynamodb_transact_get(call: Call, reference: Reference) -> list[Check]:
    """``TransactGetItems``: ``dynamodb:GetItem`` on each item's table."""
    get_item = reference.action("dynamodb:GetItem").qualified
    return [
        Check(get_item, _table_arn(call, str(item["Get"]["TableName"])))
        for item in call.params.get("TransactItems") or []
        if "Get" in item
    ]


def _dynamodb_batch(call: Call, reference: Reference) -> list[Check]:
    """``BatchWriteItem``/``BatchGetItem``: the batch action on every table of ``RequestItems``."""
    action = reference.action(f"dynamodb:{call.operation}").qualified
    return [Check(action, _table_arn(call, str(table))) for table in call.params.get("RequestItems") or {}]


def _dynamodb_table_or_index(call: Call, reference: Reference) -> list[Check]:
    """``Query``/``Scan``: the table, or the index when ``IndexName`` is given (an index is its own
    resource, ``table/<t>/index/<i>``)."""
    action = reference.action(f"dynamodb:{call.operation}").qualified
    arn = _table_arn(call, str(call.params["TableName"]))
    if call.params.get("IndexName"):
        arn += f"/index/{call.params['IndexName']}"
    return [Check(action, arn)]


def _table_arn(call: Call, table: str) -> str:
    return table if table.startswith("arn:") else call.arn("dynamodb", f"table/{table}")


def _lambda_invoke(call: Call, reference: Reference) -> list[Check]:
    """``Invoke``: ``lambda:InvokeFunction`` on the function (name, ARN or partial ARN; a qualified ARN
    for a qualified call)."""
    action = "lambda:InvokeFunction" if call.operation == "Invoke" else "lambda:InvokeAsync"
    name = str(call.params["FunctionName"])
    if call.params.get("Qualifier"):
        name = f"{name}:{call.params['Qualifier']}"
    return [Check(reference.action(action).qualified, call.lookups.function_arn(name, call.region))]


def _events_put_events(call: Call, reference: Reference) -> list[Check]:
    """``PutEvents``: ``events:PutEvents`` on each entry's bus (``default`` when none), with
    ``events:source`` and ``events:detail-type`` of the entries for that bus."""
    action = reference.action("events:PutEvents").qualified
    by_bus: dict[str, list[dict[str, Any]]] = {}
    for entry in call.params.get("Entries") or []:
        bus = str(entry.get("EventBusName") or "default")
        arn = bus if bus.startswith("arn:") else call.arn("events", f"event-bus/{bus}")
        by_bus.setdefault(arn, []).append(entry)
    checks: list[Check] = []
    for arn, entries in by_bus.items():
        context: dict[str, ContextValue] = {
            "events:source": sorted({str(e.get("Source")) for e in entries if e.get("Source")}),
            "events:detail-type": sorted({str(e.get("DetailType")) for e in entries if e.get("DetailType")}),
        }
        checks.append(Check(action, arn, context))
    return checks


def _events_rule(call: Call, reference: Reference) -> list[Check]:
    """EventBridge rule operations: the rule's ARN, ``rule/<name>`` on the default bus and
    ``rule/<bus>/<name>`` on another (Service Authorization Reference: ``rule-on-default-event-bus``,
    ``rule-on-custom-event-bus``); ``PutTargets`` with ``events:TargetArn``, the targets' ARNs."""
    action = reference.action(f"events:{call.operation}")
    name = str(call.params.get("Name") or call.params.get("Rule") or "")
    if not name:
        raise UnresolvedResourceError(f"{call.service} {call.operation}: no rule name in the request")
    bus = str(call.params.get("EventBusName") or "default").rsplit("event-bus/", 1)[-1]
    resource = f"rule/{name}" if bus == "default" else f"rule/{bus}/{name}"
    context: dict[str, ContextValue] = {}
    if call.operation == "PutTargets":
        context["events:targetarn"] = [
            str(t["Arn"]) for t in call.params.get("Targets") or [] if isinstance(t, dict) and t.get("Arn")
        ]
    return [Check(action.qualified, call.arn("events", resource), context)]


def _sagemaker_runtime_invoke(call: Call, reference: Reference) -> list[Check]:
    """``InvokeEndpoint``: ``sagemaker:InvokeEndpoint`` on the endpoint, and on the inference component
    when one is named."""
    action = reference.action("sagemaker:InvokeEndpoint").qualified
    checks = [Check(action, call.arn("sagemaker", f"endpoint/{call.params['EndpointName']}"))]
    if call.params.get("InferenceComponentName"):
        name = str(call.params["InferenceComponentName"])
        checks.append(Check(action, call.arn("sagemaker", f"inference-component/{name}")))
    return checks


def _cloudwatch_alarm_names(call: Call, reference: Reference) -> list[Check]:
    """``DescribeAlarms``/``DeleteAlarms``: each named alarm; with only ``AlarmNamePrefix``, the pattern
    ``alarm:<prefix>*`` (a policy must cover every alarm the prefix may name); with neither, ``alarm:*``."""
    action = reference.action(f"cloudwatch:{call.operation}").qualified
    names = [str(n) for n in call.params.get("AlarmNames") or []]
    if not names:
        names = [f"{call.params.get('AlarmNamePrefix') or ''}*"]
    return [Check(action, call.arn("cloudwatch", f"alarm:{name}")) for name in names]


def _autoscaling_target(call: Call, reference: Reference) -> list[Check]:
    """Application Auto Scaling target actions: the target's ARN (``scalable-target/<id>``, an opaque id);
    a target not yet registered is ``scalable-target/*``."""
    action = reference.action(f"application-autoscaling:{call.operation}")
    params = call.params
    arn = call.lookups.scalable_target_arn(
        call.region,
        str(params["ServiceNamespace"]),
        str(params["ResourceId"]),
        str(params["ScalableDimension"]),
    )
    resource = arn or call.arn("application-autoscaling", "scalable-target/*")
    context = request_tag_context(params.get("Tags"))
    context["application-autoscaling:service-namespace"] = str(params["ServiceNamespace"])
    context["application-autoscaling:scalable-dimension"] = str(params["ScalableDimension"])
    checks = [Check(action.qualified, resource, context)]
    checks.extend(_tag_on_create(call, action, request_tag_context(params.get("Tags")), checks))
    return checks


def _iam_service_linked_role(call: Call, reference: Reference) -> list[Check]:
    """``CreateServiceLinkedRole``: the role ``aws-service-role/<service>/<name>``, ``iam:AWSServiceName``."""
    service = str(call.params["AWSServiceName"])
    name = _SERVICE_LINKED_ROLE_NAMES.get(service)
    if name is None:
        raise UnresolvedResourceError(
            f"iam CreateServiceLinkedRole: the role name of {service} is not known locally"
        )
    arn = f"arn:{call.partition}:iam::{call.account}:role/aws-service-role/{service}/{name}"
    return [
        Check(reference.action("iam:CreateServiceLinkedRole").qualified, arn, {"iam:awsservicename": service})
    ]


_SERVICE_LINKED_ROLE_NAMES = {
    "spot.amazonaws.com": "AWSServiceRoleForEC2Spot",
    "sagemaker.application-autoscaling.amazonaws.com": (
        "AWSServiceRoleForApplicationAutoScaling_SageMakerEndpoint"
    ),
    "ec2scheduled.amazonaws.com": "AWSServiceRoleForEC2Scheduled",
}


def _ec2_tag_specs(params: dict[str, Any], data: dict[str, Any] | None = None) -> dict[str, dict[str, str]]:
    specs = list(params.get("TagSpecifications") or []) or list((data or {}).get("TagSpecifications") or [])
    found: dict[str, dict[str, str]] = {}
    for spec in specs:
        found.setdefault(str(spec.get("ResourceType")), {}).update(_tag_pairs(spec.get("Tags")))
    return found


def _ec2_create_tags(
    call: Call, reference: Reference, arns: dict[str, str], tags: dict[str, dict[str, str]]
) -> list[Check]:
    """Tag-on-create: ``ec2:CreateTags`` on each tagged resource, with ``ec2:CreateAction`` (EC2 User
    Guide, "Grant permission to tag Amazon EC2 resources during creation")."""
    create_tags = reference.action("ec2:CreateTags").qualified
    checks: list[Check] = []
    for resource_type, pairs in tags.items():
        if not pairs:
            continue
        arn = arns.get(resource_type) or call.arn("ec2", f"{resource_type}/*")
        context = request_tag_context(pairs)
        context["ec2:createaction"] = call.operation
        checks.append(Check(create_tags, arn, context))
    return checks


def _ec2_run_instances(call: Call, reference: Reference) -> list[Check]:
    """``RunInstances``: every resource the launch uses (Service Authorization Reference, Amazon EC2:
    image, instance, network interface, security group, subnet, volume are required; the launch
    template, capacity reservation, key pair and placement group when named), the request's tags on
    the instance and volume ARNs, then tag-on-create and the instance profile's ``iam:PassRole``."""
    action = reference.action("ec2:RunInstances").qualified
    params = call.params
    template: tuple[str, dict[str, Any]] | None = None
    if params.get("LaunchTemplate"):
        template = call.lookups.launch_template(call.region, dict(params["LaunchTemplate"]))
        if template is None:
            # EC2 answers InvalidLaunchTemplate*.NotFound before it authorizes what it cannot name.
            return []
    data = template[1] if template else {}

    def pick(name: str) -> Any:
        return params.get(name) if params.get(name) is not None else data.get(name)

    tags = _ec2_tag_specs(params, data)
    image = pick("ImageId")
    interfaces = list(pick("NetworkInterfaces") or [])
    subnet = pick("SubnetId") or next((n.get("SubnetId") for n in interfaces if n.get("SubnetId")), None)
    groups = list(pick("SecurityGroupIds") or []) + [g for n in interfaces for g in n.get("Groups") or []]
    arns = {
        "instance": call.arn("ec2", "instance/*"),
        "volume": call.arn("ec2", "volume/*"),
        "network-interface": call.arn("ec2", "network-interface/*"),
    }
    resources = [
        # An SSM alias names no image until EC2 resolves it: any image (only a grant on image/* matches).
        (
            call.arn(
                "ec2", "image/*" if str(image).startswith("resolve:ssm:") else f"image/{image}", account=""
            )
            if image
            else None,
            {},
        ),
        (arns["instance"], tags.get("instance", {})),
        (arns["network-interface"], tags.get("network-interface", {})),
        (arns["volume"], tags.get("volume", {})),
        (call.arn("ec2", f"subnet/{subnet}" if subnet else "subnet/*"), {}),
    ]
    resources.extend((call.arn("ec2", f"security-group/{g}"), {}) for g in groups or ["*"])
    if template is not None:
        resources.append((call.arn("ec2", f"launch-template/{template[0]}"), {}))
    reservation = (
        (pick("CapacityReservationSpecification") or {}).get("CapacityReservationTarget") or {}
    ).get("CapacityReservationId")
    if reservation:
        resources.append((call.arn("ec2", f"capacity-reservation/{reservation}"), {}))
    if pick("KeyName"):
        resources.append((call.arn("ec2", f"key-pair/{pick('KeyName')}"), {}))
    group_name = (pick("Placement") or {}).get("GroupName")
    if group_name:
        resources.append((call.arn("ec2", f"placement-group/{group_name}"), {}))
    checks = []
    for arn, pairs in resources:
        if arn is None:
            raise UnresolvedResourceError(
                "ec2 RunInstances: no ImageId in the request or its launch template"
            )
        checks.append(Check(action, arn, request_tag_context(pairs)))
    checks.extend(_ec2_create_tags(call, reference, arns, tags))
    profile = pick("IamInstanceProfile")
    if profile:
        role = call.lookups.instance_profile_role(dict(profile))
        if role is not None:
            checks.append(
                Check(
                    reference.action("iam:PassRole").qualified,
                    role,
                    {"iam:passedtoservice": "ec2.amazonaws.com"},
                )
            )
    return checks


def _ec2_purchase_capacity_block(call: Call, reference: Reference) -> list[Check]:
    """``PurchaseCapacityBlock``: the capacity reservation it creates (``capacity-reservation/*``) with the
    request's tags, then tag-on-create."""
    arn = call.arn("ec2", "capacity-reservation/*")
    tags = _ec2_tag_specs(call.params)
    checks = [
        Check(
            reference.action("ec2:PurchaseCapacityBlock").qualified,
            arn,
            request_tag_context(tags.get("capacity-reservation", {})),
        )
    ]
    checks.extend(_ec2_create_tags(call, reference, {"capacity-reservation": arn}, tags))
    return checks


def _ec2_instances(call: Call, reference: Reference) -> list[Check]:
    """``TerminateInstances``/``StopInstances``...: each instance's ARN (its tags for ``aws:ResourceTag``)."""
    action = reference.action(f"ec2:{call.operation}").qualified
    return [Check(action, call.arn("ec2", f"instance/{i}")) for i in call.params.get("InstanceIds") or []]


def _ec2_create_tags_call(call: Call, reference: Reference) -> list[Check]:
    """``CreateTags`` called on existing resources: each resource (by id prefix) with the request tags."""
    action = reference.action("ec2:CreateTags").qualified
    kinds = {
        "i": "instance",
        "cr": "capacity-reservation",
        "vol": "volume",
        "eni": "network-interface",
        "lt": "launch-template",
    }
    context = request_tag_context(call.params.get("Tags"))
    checks = []
    for resource in call.params.get("Resources") or []:
        kind = kinds.get(str(resource).split("-", 1)[0])
        if kind is None:
            raise UnresolvedResourceError(
                f"ec2 CreateTags: the resource type of {resource} is not known locally"
            )
        checks.append(Check(action, call.arn("ec2", f"{kind}/{resource}"), dict(context)))
    return checks


def _sqs_queue(call: Call, reference: Reference) -> list[Check]:
    """SQS actions on a queue given by ``QueueUrl``."""
    name = ACTION_NAMES.get((call.service, call.operation), f"sqs:{call.operation}")
    action = reference.action(name)
    if not action.resource_types:
        return [Check(action.qualified, "*")]
    if "QueueUrl" not in call.params:
        return [Check(action.qualified, arn) for arn in generic_resources(call, action)]
    return [Check(action.qualified, call.lookups.queue_arn(str(call.params["QueueUrl"])))]


_RESOLVERS: dict[tuple[str, str], Resolver] = {
    ("dynamodb", "TransactWriteItems"): _dynamodb_transact_write,
    ("dynamodb", "TransactGetItems"): _dynamodb_transact_get,
    ("dynamodb", "BatchWriteItem"): _dynamodb_batch,
    ("dynamodb", "BatchGetItem"): _dynamodb_batch,
    ("dynamodb", "Query"): _dynamodb_table_or_index,
    ("dynamodb", "Scan"): _dynamodb_table_or_index,
    ("lambda", "Invoke"): _lambda_invoke,
    ("lambda", "InvokeAsync"): _lambda_invoke,
    ("eventbridge", "PutEvents"): _events_put_events,
    **{
        ("eventbridge", operation): _events_rule
        for operation in (
            "PutRule",
            "PutTargets",
            "RemoveTargets",
            "DeleteRule",
            "DescribeRule",
            "EnableRule",
            "DisableRule",
            "ListTargetsByRule",
        )
    },
    ("sagemaker-runtime", "InvokeEndpoint"): _sagemaker_runtime_invoke,
    ("cloudwatch", "DescribeAlarms"): _cloudwatch_alarm_names,
    ("cloudwatch", "DeleteAlarms"): _cloudwatch_alarm_names,
    ("application-auto-scaling", "RegisterScalableTarget"): _autoscaling_target,
    ("application-auto-scaling", "DeregisterScalableTarget"): _autoscaling_target,
    ("application-auto-scaling", "PutScalingPolicy"): _autoscaling_target,
    ("application-auto-scaling", "DeleteScalingPolicy"): _autoscaling_target,
    ("iam", "CreateServiceLinkedRole"): _iam_service_linked_role,
    ("ec2", "RunInstances"): _ec2_run_instances,
    ("ec2", "PurchaseCapacityBlock"): _ec2_purchase_capacity_block,
    ("ec2", "TerminateInstances"): _ec2_instances,
    ("ec2", "StopInstances"): _ec2_instances,
    ("ec2", "StartInstances"): _ec2_instances,
    ("ec2", "CreateTags"): _ec2_create_tags_call,
    ("sqs", "SendMessage"): _sqs_queue,
    ("sqs", "SendMessageBatch"): _sqs_queue,
    ("sqs", "ReceiveMessage"): _sqs_queue,
    ("sqs", "DeleteMessage"): _sqs_queue,
    ("sqs", "GetQueueAttributes"): _sqs_queue,
}
"""Per-operation rules where the generic derivation from the reference would be wrong or impossible."""
