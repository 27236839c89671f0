"""The local cloud's IAM: every AWS call a principal of the stack makes is authorized as AWS would.
Kept whole: one policy evaluation (identity, resource-based, trust, explicit deny) and the Iam applying it.

:class:`Iam` reads the stack's policies once (after the SAM transform, as ``sam deploy`` would create
them): each role's inline policies, the AWS managed policies it attaches (documents from moto's bundled
copy, ``moto/iam/aws_managed_policies.py``), ``AWS::IAM::Policy``/``ManagedPolicy`` resources attached to
it, its trust policy; and the resource-based policies: Lambda permissions (``AWS::Lambda::Permission``),
SQS queue policies, SNS topic policies and EventBridge event bus policies (``AWS::Events::EventBusPolicy``).

A call is authorized (:meth:`Iam.authorize`) for the principal the calling thread acts as
(:mod:`localcloud.iam.context`); calls made as the local cloud's machinery are not evaluated. Within the
account, an identity-based *or* a resource-based ``Allow`` allows; an explicit ``Deny`` in either wins
(IAM User Guide, "Policy evaluation logic", "Cross-account policy evaluation logic" for the same-account
case). A denial answers the service's own error with AWS's message and is recorded
(:attr:`Iam.denials`, and the timeline); a call whose action or resource cannot be derived raises
:class:`IamEvaluationError`, never allows.
"""

from __future__ import annotations

import fnmatch
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from localcloud.contracts import AwsError
from localcloud.iam import context as principals
from localcloud.iam.context import Principal
from localcloud.iam.policy import Decision, PolicyError, RequestContext, Statement, decide, parse_policy
from localcloud.iam.requests import Call, Check, Lookups, UnresolvedResourceError, checks_for
from localcloud.iam.sar import UnknownActionError, reference

__all__ = ["RECORD_CHECKS_ENV", "Denial", "Iam", "IamEvaluationError", "TargetCaller", "denied_error"]

RECORD_CHECKS_ENV = "LOCALCLOUD_RECORD_CHECKS"
"""Set to a file path, every allowed call of a stack role is appended there with its checks (``make
record-calls``; tests/gates/recorded_calls.json keeps them)."""


class IamEvaluationError(RuntimeError):
    """The local cloud cannot authorize a call (unknown action, underivable resource): an internal error
    naming the service and operation. It is raised to the caller: nothing is silently allowed."""


class StackLike(Protocol):
    """What :class:`Iam` reads from :class:`localcloud.template.Stack`."""

    account_id: str
    region: str
    partition: str
    resources: dict[str, Any]

    def arn(self, logical_id: str) -> str:
        """``Fn::GetAtt [logical_id, Arn]``."""
        ...

    def physical_id(self, logical_id: str) -> str:
        """``Ref logical_id``."""
        ...


@dataclass(frozen=True)
class Denial:
    """One denied authorization.

    Attributes:
        at: virtual UTC time.
        principal: the caller's ARN (an assumed-role session, or a service principal).
        role: the role's name ("" for a service principal).
        action: the IAM action (``sagemaker:ListTags``).
        resource: the resource ARN (or ``*``).
        service, operation: the API call (``sagemaker``, ``ListTags``); for a delivery, the target kind.
        explicit: an explicit ``Deny`` matched (else nothing allowed).
        message: the message the caller received.
    """

    at: datetime
    principal: str
    role: str
    action: str
    resource: str
    service: str
    operation: str
    explicit: bool
    message: str


@dataclass(frozen=True)
class TargetCaller:
    """Who delivers to a target: ``service`` (``events.amazonaws.com``, ``scheduler.amazonaws.com``), the
    rule's or schedule's ARN (``source_arn``) and the target's ``RoleArn`` (None when it has none)."""

    service: str
    source_arn: str
    role_arn: str | None


# The error each service answers for a denied call (code, HTTP status); default AccessDeniedException 400
# (SageMaker, DynamoDB, Step Functions, EventBridge, Scheduler, Secrets Manager, Application Auto Scaling,
# CloudWatch Logs: each API reference's "Common errors").
_DENIED: dict[str, tuple[str, int]] = {
    "ec2": ("UnauthorizedOperation", 403),
    "cloudwatch": ("AccessDenied", 403),
    "iam": ("AccessDenied", 403),
    "sts": ("AccessDenied", 403),
    "s3": ("AccessDenied", 403),
    "sqs": ("AccessDenied", 403),
    "sns": ("AuthorizationError", 403),
    "lambda": ("AccessDeniedException", 403),
}
_DENIED_DEFAULT = ("AccessDeniedException", 400)


def denied_message(principal_arn: str, action: str, resource: str, *, explicit: bool, where: str) -> str:
    """AWS's denial text: ``User: <arn> is not authorized to perform: <action> on resource: <arn> because
    no <where>-based policy allows the <action> action`` (or ``with an explicit deny in a <where>-based
    policy``)."""
    reason = (
        f"with an explicit deny in a {where}-based policy"
        if explicit
        else f"because no {where}-based policy allows the {action} action"
    )
    return f"User: {principal_arn} is not authorized to perform: {action} on resource: {resource} {reason}"


def denied_error(service: str, message: str) -> AwsError:
    """The service's own error for a denied call (EC2 prefixes its message and adds an encoded blob)."""
    code, status = _DENIED.get(service, _DENIED_DEFAULT)
    if service == "ec2":
        message = (
            f"You are not authorized to perform this operation. {message}. "
            "Encoded authorization failure message: localcloud-not-encoded"
        )
    return AwsError(code, message, status)


_MANAGED: list[dict[str, Any]] = []
_MANAGED_LOCK = threading.Lock()


def aws_managed_policy(arn: str) -> Any:
    """The document of an AWS managed policy (``arn:aws:iam::aws:policy/<path><name>``), from moto's copy.

    Raises:
        KeyError: moto has no such policy.
    """
    with _MANAGED_LOCK:
        if not _MANAGED:
            from moto.iam.aws_managed_policies import aws_managed_policies_data  # noqa: PLC0415 - 4.7 MB

            _MANAGED.append(json.loads(aws_managed_policies_data))
        data = _MANAGED[0]
    name = arn.rsplit("/", 1)[-1]
    entry = data[name]
    path = arn.split(":policy", 1)[1][: -len(name)] or "/"
    if entry.get("Path", "/") != path:
        raise KeyError(arn)
    return entry["Document"]


class Iam:
    """IAM evaluation for one local cloud (see the module docstring).

    Args:
        stack: the transformed template.
        lookups: reads current state (tags, launch templates...) for resource ARNs and conditions.
        now: the virtual clock's ``now``.
        on_denial: called with each :class:`Denial` (the cloud puts it on its timeline).

    Attributes:
        denials: every denial, in order.
        evaluated: number of authorizations made (checks, not calls).
    """

    def __init__(
        self,
        stack: StackLike,
        *,
        lookups: Lookups,
        now: Callable[[], datetime],
        on_denial: Callable[[Denial], None] | None = None,
    ) -> None:
        self.stack = stack
        self.lookups = lookups
        self.now = now
        self.on_denial = on_denial
        self.denials: list[Denial] = []
        self.evaluated = 0
        self._lock = threading.Lock()
        self._identity: dict[str, tuple[Statement, ...]] | None = None
        self._trust: dict[str, tuple[Statement, ...]] = {}
        self._resource: dict[str, tuple[Statement, ...]] = {}
        self._function_roles: dict[str, str] = {}
        self._machine_roles: dict[str, str] = {}
        self._role_ids: dict[str, str] = {}
        self._callers: list[tuple[str, tuple[Statement, ...]]] = []

    # ------------------------------------------------------------------------------------------- index

    def index(self) -> None:  # noqa: C901 - one pass over every policy kind of the stack, each indexed its way
        """Parse every policy of the stack (once; :meth:`authorize` calls it on first use).

        Raises:
            PolicyError: a policy the evaluator cannot read (names the resource).
        """
        if self._identity is not None:
            return
        stack = self.stack
        identity: dict[str, list[Statement]] = {}
        role_by_name: dict[str, str] = {}
        for logical_id, resource in stack.resources.items():
            if resource.type != "AWS::IAM::Role":
                continue
            arn = stack.arn(logical_id)
            role_by_name[stack.physical_id(logical_id)] = arn
            self._role_ids[arn] = logical_id
            statements = identity.setdefault(arn, [])
            props = resource.properties
            for policy in props.get("Policies") or []:
                where = f"role {logical_id} policy {policy.get('PolicyName')}"
                statements.extend(parse_policy(policy["PolicyDocument"], where))
            for managed in props.get("ManagedPolicyArns") or []:
                statements.extend(self._managed(str(managed), logical_id))
            trust = props.get("AssumeRolePolicyDocument")
            if trust:
                self._trust[arn] = parse_policy(trust, f"role {logical_id} trust policy", resource_based=True)
        for logical_id, resource in stack.resources.items():
            if resource.type in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                document = parse_policy(
                    resource.properties["PolicyDocument"], f"{resource.type} {logical_id}"
                )
                for role in resource.properties.get("Roles") or []:
                    attached = str(role) if str(role).startswith("arn:") else role_by_name.get(str(role))
                    if attached is not None:
                        identity.setdefault(attached, []).extend(document)
            elif resource.type == "AWS::Lambda::Function":
                self._function_roles[stack.physical_id(logical_id)] = str(resource.properties.get("Role", ""))
            elif resource.type == "AWS::StepFunctions::StateMachine":
                self._machine_roles[stack.physical_id(logical_id)] = str(
                    resource.properties.get("RoleArn", "")
                )
        self._index_resource_policies()
        self._identity = {arn: tuple(statements) for arn, statements in identity.items()}

    def add_role_policy(self, role_arn: str, document: dict[str, Any]) -> None:
        """Give a role outside the stack (a developer's, another team's) an identity policy, so calls made
        as it (:func:`localcloud.iam.acting_as`) are evaluated like any other: tests of the doors that must
        stay closed to the rest of the account.

        Raises:
            PolicyError: the document cannot be read.
        """
        self.index()
        statements = parse_policy(document, f"role {role_arn} (added)")
        with self._lock:
            identity = self._identity or {}
            identity[role_arn] = (*identity.get(role_arn, ()), *statements)
            self._identity = identity

    def add_caller_policy(self, principal: str, document: dict[str, Any], *, source: str) -> None:
        """Give the API's callers matching ``principal`` (an ARN pattern with ``*``/``?``, such as
        ``arn:aws:sts::123456789012:assumed-role/MlPlatform/*``) an identity policy: what an administrator
        attaches to the account's roles and users (deploy/*-policy.json). :meth:`authorize_caller` reads them.

        Raises:
            PolicyError: the document cannot be read.
        """
        statements = parse_policy(document, f"caller policy {source} for {principal}")
        with self._lock:
            self._callers.append((principal, statements))

    def caller_statements(self, caller_arn: str) -> tuple[Statement, ...]:
        """Every statement of the caller policies whose principal pattern matches ``caller_arn``."""
        with self._lock:
            callers = list(self._callers)
        return tuple(
            s for pattern, found in callers if fnmatch.fnmatchcase(caller_arn, pattern) for s in found
        )

    def authorize_caller(self, caller_arn: str, resource: str, *, operation: str) -> Denial | None:
        """An API caller's ``execute-api:Invoke`` on a route (``arn:aws:execute-api:<region>:<account>:
        <api id>/<stage>/<METHOD>/<path>``), as API Gateway checks an ``AWS_IAM`` route: the caller's identity
        policies must allow it (API Gateway Developer Guide, "Control access to a REST API with IAM
        permissions"); no caller policy is no permission.

        Returns:
            None when allowed, else the :class:`Denial` (recorded).
        """
        context = RequestContext(
            {"aws:principalarn": caller_arn, "aws:principalaccount": caller_arn.split(":")[4] or None}
        )
        with self._lock:
            self.evaluated += 1
        decision = decide(self.caller_statements(caller_arn), "execute-api:Invoke", resource, context)
        if decision is Decision.ALLOW:
            return None
        return self._deny(
            caller_arn,
            "",
            Check("execute-api:Invoke", resource),
            "execute-api",
            operation,
            explicit=decision is Decision.EXPLICIT_DENY,
            where="identity",
        )

    def _managed(self, arn: str, logical_id: str) -> tuple[Statement, ...]:
        for other_id, resource in self.stack.resources.items():
            if resource.type == "AWS::IAM::ManagedPolicy" and self.stack.physical_id(other_id) == arn:
                return ()  # attached through its own resource's document (indexed with it)
        try:
            document = aws_managed_policy(arn)
        except KeyError as exc:
            raise PolicyError(
                f"role {logical_id}: managed policy {arn} is not in moto's AWS managed policies"
            ) from exc
        return parse_policy(document, f"role {logical_id} managed policy {arn}")

    def _index_resource_policies(self) -> None:  # noqa: C901 - one branch per resource policy kind
        stack = self.stack
        found: dict[str, list[Statement]] = {}
        for logical_id, resource in stack.resources.items():
            props = resource.properties
            if resource.type == "AWS::Lambda::Permission":
                function = self.lookups.function_arn(str(props["FunctionName"]), stack.region)
                principal = str(props["Principal"])
                document: dict[str, Any] = {
                    "Sid": logical_id,
                    "Effect": "Allow",
                    "Principal": "*"
                    if principal == "*"
                    else {"Service": principal}
                    if principal.endswith(".amazonaws.com")
                    else {"AWS": principal},
                    "Action": props["Action"],
                    "Resource": function,
                }
                condition: dict[str, Any] = {}
                if props.get("SourceArn"):
                    condition["ArnLike"] = {"aws:SourceArn": props["SourceArn"]}
                if props.get("SourceAccount"):
                    condition["StringEquals"] = {"aws:SourceAccount": props["SourceAccount"]}
                if condition:
                    document["Condition"] = condition
                found.setdefault(function, []).extend(
                    parse_policy(document, f"AWS::Lambda::Permission {logical_id}", resource_based=True)
                )
            elif resource.type == "AWS::SQS::QueuePolicy":
                statements = parse_policy(
                    props["PolicyDocument"], f"{resource.type} {logical_id}", resource_based=True
                )
                for queue in props.get("Queues") or []:
                    found.setdefault(self.lookups.queue_arn(str(queue)), []).extend(statements)
            elif resource.type == "AWS::SNS::TopicPolicy":
                statements = parse_policy(
                    props["PolicyDocument"], f"{resource.type} {logical_id}", resource_based=True
                )
                for topic in props.get("Topics") or []:
                    found.setdefault(str(topic), []).extend(statements)
            elif resource.type == "AWS::Events::EventBusPolicy":
                bus = str(props.get("EventBusName") or "default")
                bus_arn = (
                    bus
                    if bus.startswith("arn:")
                    else (f"arn:{stack.partition}:events:{stack.region}:{stack.account_id}:event-bus/{bus}")
                )
                raw = props.get("Statement")
                if raw is None:  # the older form: Action, Principal, Condition properties
                    raw = {
                        "Effect": "Allow",
                        "Action": props.get("Action"),
                        "Principal": {"AWS": props.get("Principal")},
                    }
                    if props.get("Condition"):
                        raw["Condition"] = {
                            "StringEquals": {props["Condition"]["Key"]: props["Condition"]["Value"]}
                        }
                raw = {"Sid": props.get("StatementId", logical_id), "Resource": bus_arn, **raw}
                found.setdefault(bus_arn, []).extend(
                    parse_policy(raw, f"{resource.type} {logical_id}", resource_based=True)
                )
        self._resource = {arn: tuple(statements) for arn, statements in found.items()}

    # ------------------------------------------------------------------------------------- principals

    def function_principal(self, function_name: str) -> Principal:
        """The execution role session a function's invocations run as (session name = function name).

        Raises:
            IamEvaluationError: the function has no role in the template.
        """
        self.index()
        role = self._function_roles.get(function_name)
        if not role:
            raise IamEvaluationError(f"function {function_name} has no execution role in the template")
        return Principal(role, function_name, "lambda")

    def role_of(self, function_name: str) -> str:
        """The function's execution role ARN.

        Raises:
            IamEvaluationError: the function has no role in the template.
        """
        return self.function_principal(function_name).role_arn

    def authorize_function(
        self, function_name: str, action: str, resource: str, *, service: str, operation: str
    ) -> Denial | None:
        """What Lambda itself does with a function's execution role (an event source mapping reading its
        stream): ``action`` on ``resource`` by the role's policies.

        Returns:
            None when allowed, else the :class:`Denial` (recorded).
        """
        principal = self.function_principal(function_name)
        return self._check_role(principal, Check(action, resource), service, operation, self.stack.region)

    def function_scope(self, function_name: str) -> AbstractContextManager[None]:
        """Act as the function's execution role in the block (the Lambda runtime wraps handlers in it)."""
        return principals.acting_as(self.function_principal(function_name))

    def machine_role(self, state_machine_arn: str) -> str | None:
        """The role of a state machine of the stack (by ARN), if known."""
        self.index()
        return self._machine_roles.get(state_machine_arn.rsplit(":", 1)[-1])

    # ----------------------------------------------------------------------------------- authorization

    def authorize(
        self, service: str, operation: str, params: Callable[[], dict[str, Any]], region: str
    ) -> AwsError | None:
        """Authorize one API call for the calling thread's principal.

        Args:
            service: botocore's hyphenated service id.
            operation: the API operation.
            params: returns the request parameters (called only when a principal is evaluated).
            region: the region the client calls.

        Returns:
            None when allowed (or not evaluated: machinery); else the service's denial error.

        Raises:
            IamEvaluationError: the action or a required resource cannot be derived.
        """
        principal = principals.current()
        if principal is None:
            return None
        self.index()
        try:
            call = Call(
                service,
                operation,
                params(),
                region,
                self.stack.account_id,
                self.stack.partition,
                self.lookups,
            )
            checks = checks_for(call, reference())
        except (UnresolvedResourceError, UnknownActionError, KeyError, TypeError) as exc:
            raise IamEvaluationError(f"IAM cannot authorize {service} {operation}: {exc}") from exc
        for check in checks:
            denial = self._check_role(principal, check, service, operation, region)
            if denial is not None:
                return denied_error(service, denial.message)
        if RECORD_CHECKS_ENV in os.environ:
            self._record(principal, service, operation, region, checks)
        return None

    def _record(
        self, principal: Principal, service: str, operation: str, region: str, checks: list[Check]
    ) -> None:
        """Append the allowed call's checks to the file ``$LOCALCLOUD_RECORD_CHECKS`` names (JSON lines):
        what tests/gates/test_dependent_actions.py replays against the template (``make record-calls``)."""
        role = self._role_ids.get(principal.role_arn)
        if role is None:
            return  # a role outside the stack (a test's): not the product's
        line = json.dumps(
            {
                "role": role,
                "service": service,
                "operation": operation,
                "region": region,
                "account": self.stack.account_id,
                "stack_region": self.stack.region,
                "stack_name": getattr(self.stack, "stack_name", ""),
                "parameters": getattr(self.stack, "parameter_overrides", {}),
                "checks": [
                    {
                        "action": c.action,
                        "resource": c.resource,
                        "context": {k: v for k, v in c.context.items() if not callable(v)},
                        "resource_tags": c.read_tags[0] if c.read_tags else None,
                    }
                    for c in checks
                ],
            },
            sort_keys=True,
        )
        with self._lock, Path(os.environ[RECORD_CHECKS_ENV]).open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def evaluate(
        self, role_arn: str, check: Check, *, service: str, operation: str, region: str
    ) -> Denial | None:
        """Evaluate one check as a session of the role (no call made): how a gate replays a recorded call.

        Returns:
            None when allowed, else the :class:`Denial` (recorded).
        """
        self.index()
        return self._check_role(Principal(role_arn, "replay", "lambda"), check, service, operation, region)

    def role_arn(self, logical_id: str) -> str:
        """The ARN of a role of the stack by its logical id.

        Raises:
            KeyError: no such role.
        """
        self.index()
        found = next((arn for arn, lid in self._role_ids.items() if lid == logical_id), None)
        if found is None:
            raise KeyError(logical_id)
        return found

    def _check_role(
        self, principal: Principal, check: Check, service: str, operation: str, region: str
    ) -> Denial | None:
        base: dict[str, Any] = {
            "aws:principalarn": principal.role_arn,
            "aws:principalaccount": principal.account,
            "aws:principaltype": "AssumedRole",
            "aws:requestedregion": region,
        }
        context = RequestContext({**base, **check.context}, check.resource_tags)
        identity = (self._identity or {}).get(principal.role_arn, ())
        resource_statements = [
            s
            for s in self._resource_policy(check.resource)
            if s.names_principal(
                principal_arn=principal.arn,
                role_arn=principal.role_arn,
                account=principal.account,
                service=None,
            )
        ]
        with self._lock:
            self.evaluated += 1
        by_identity = decide(identity, check.action, check.resource, context)
        by_resource = decide(resource_statements, check.action, check.resource, context)
        if Decision.EXPLICIT_DENY in (by_identity, by_resource):
            where = "identity" if by_identity is Decision.EXPLICIT_DENY else "resource"
            return self._deny(
                principal.arn, principal.role_name, check, service, operation, explicit=True, where=where
            )
        if Decision.ALLOW in (by_identity, by_resource):
            return None
        return self._deny(
            principal.arn, principal.role_name, check, service, operation, explicit=False, where="identity"
        )

    def _resource_policy(self, resource: str) -> tuple[Statement, ...]:
        statements = self._resource.get(resource)
        if statements is None and ":lambda:" in resource and resource.count(":") > 6:
            statements = self._resource.get(resource.rsplit(":", 1)[0])  # a qualified function ARN
        return statements or ()

    def authorize_service(
        self, service_principal: str, action: str, resource: str, *, source_arn: str, operation: str
    ) -> Denial | None:
        """A service (``apigateway.amazonaws.com``, ``events.amazonaws.com``) acting on a resource: only the
        resource's own policy can allow it (a Lambda permission, a queue policy...).

        Returns:
            None when allowed, else the :class:`Denial` (recorded).
        """
        self.index()
        context = RequestContext(
            {
                "aws:sourcearn": source_arn,
                "aws:sourceaccount": self.stack.account_id,
                "aws:principalservicename": service_principal,
            }
        )
        statements = [
            s
            for s in self._resource_policy(resource)
            if s.names_principal(principal_arn=None, role_arn=None, account=None, service=service_principal)
        ]
        with self._lock:
            self.evaluated += 1
        decision = decide(statements, action, resource, context)
        if decision is Decision.ALLOW:
            return None
        check = Check(action, resource)
        return self._deny(
            service_principal,
            "",
            check,
            resource.split(":")[2],
            operation,
            explicit=decision is Decision.EXPLICIT_DENY,
            where="resource",
        )

    def authorize_target(self, caller: TargetCaller, target_arn: str) -> Denial | None:
        """EventBridge or Scheduler delivering to a target: the target's ``RoleArn`` must be assumable by the
        service (its trust policy) and allow the delivery action on the target; a Lambda, SQS or SNS target
        of a rule without a role needs its resource-based policy to allow the service instead.

        Returns:
            None when allowed, else the :class:`Denial` (recorded).
        """
        self.index()
        parts = target_arn.split(":", 5)
        service = parts[2] if len(parts) == 6 else ""
        action = {
            "lambda": "lambda:InvokeFunction",
            "states": "states:StartExecution",
            "events": "events:PutEvents",
            "sqs": "sqs:SendMessage",
            "sns": "sns:Publish",
        }.get(service)
        if action is None:
            return None  # not a target kind the local cloud delivers (delivery reports it)
        if caller.role_arn is None:
            if caller.service == "events.amazonaws.com" and service in ("lambda", "sqs", "sns"):
                return self.authorize_service(
                    caller.service, action, target_arn, source_arn=caller.source_arn, operation="deliver"
                )
            return self._deny(
                caller.service,
                "",
                Check(action, target_arn),
                service,
                "deliver",
                explicit=False,
                where="identity",
            )
        refused = self.assume(caller)
        if refused is not None:
            return refused
        principal = Principal(caller.role_arn, _session_name(caller), caller.service.split(".", 1)[0])
        check = Check(action, target_arn)
        if service == "events":
            check.context = {}
        return self._check_role(principal, check, service, "deliver", self.stack.region)

    def assume(self, caller: TargetCaller) -> Denial | None:
        """May the service assume the caller's role? Its trust policy must allow ``sts:AssumeRole`` for the
        service principal (with ``aws:SourceArn``/``aws:SourceAccount`` of the rule or schedule).

        Returns:
            None when it may (or there is no role), else the :class:`Denial` (recorded).
        """
        self.index()
        if caller.role_arn is None:
            return None
        trust = RequestContext(
            {"aws:sourcearn": caller.source_arn, "aws:sourceaccount": self.stack.account_id}
        )
        statements = [
            s
            for s in self._trust.get(caller.role_arn, ())
            if s.names_principal(principal_arn=None, role_arn=None, account=None, service=caller.service)
        ]
        with self._lock:
            self.evaluated += 1
        if decide(statements, "sts:AssumeRole", caller.role_arn, trust) is Decision.ALLOW:
            return None
        return self._deny(
            caller.service,
            "",
            Check("sts:AssumeRole", caller.role_arn),
            "sts",
            "AssumeRole",
            explicit=False,
            where="resource",
        )

    def target_scope(self, caller: TargetCaller) -> AbstractContextManager[None]:
        """Act as the target's role (a Scheduler universal target's API call is made as that role)."""
        if caller.role_arn is None:
            return nullcontext()
        return principals.acting_as(Principal(caller.role_arn, _session_name(caller), "scheduler"))

    def _deny(
        self,
        principal_arn: str,
        role: str,
        check: Check,
        service: str,
        operation: str,
        *,
        explicit: bool,
        where: str,
    ) -> Denial:
        message = denied_message(principal_arn, check.action, check.resource, explicit=explicit, where=where)
        denial = Denial(
            self.now(),
            principal_arn,
            role,
            check.action,
            check.resource,
            service,
            operation,
            explicit,
            message,
        )
        with self._lock:
            self.denials.append(denial)
        if self.on_denial is not None:
            self.on_denial(denial)
        return denial

    # ------------------------------------------------------------------------------------ installation

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Thread inheritance of principals and Step Functions executions acting as their state machine's
        role, for the block (process-wide)."""
        from moto.stepfunctions.parser.models import StepFunctionsParserBackend  # noqa: PLC0415

        principals.install_thread_inheritance()
        original = StepFunctionsParserBackend.start_execution
        iam = self

        def start_execution(backend: Any, state_machine_arn: str, *args: Any, **kwargs: Any) -> Any:
            role = iam.machine_role(state_machine_arn)
            if role is None:
                machine = backend.describe_state_machine(state_machine_arn)
                role = str(getattr(machine, "roleArn", "") or "") or None
            if role is None:
                return original(backend, state_machine_arn, *args, **kwargs)
            name = kwargs.get("name") or (args[0] if args else None) or "execution"
            with principals.acting_as(Principal(role, str(name)[:64], "states")):
                return original(backend, state_machine_arn, *args, **kwargs)

        StepFunctionsParserBackend.start_execution = start_execution  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            StepFunctionsParserBackend.start_execution = original  # type: ignore[method-assign]
            principals.uninstall_thread_inheritance()


def _session_name(caller: TargetCaller) -> str:
    # Services name their sessions with an opaque id; the rule's or schedule's name is clearer locally.
    return caller.source_arn.rsplit("/", 1)[-1][:64]
