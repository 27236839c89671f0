"""Ports: what the workflow logic needs from the outside world, and the container handlers build.

Over 400 lines: the Protocol of every port beside the one container that builds them.

Logic functions (:mod:`capacity.logic`) take a :class:`Ports` and never create AWS clients themselves.
Handlers build ``Ports(Settings.from_env())``: each adapter is created on first use from the settings
(so a function only needs the environment variables of the adapters it really uses). Tests pass fakes
for any port through the constructor.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from capacity.adapters import clients
from capacity.adapters.policy_store import PolicyStore as PolicyStore  # noqa: PLC0414 - re-exported: the port logic names
from capacity.ledger import Ledger
from capacity.settings import Settings
from capacity.timeutil import utcnow

# The other adapters' modules are imported where the container first builds one (PLC0415 below): a cold
# start imports only the adapters its invocation uses (python -X importtime: 7-17 ms of a step's init).
if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

    from capacity.adapters.cloudwatch import AlarmState
    from capacity.adapters.dynamodb import OfferingStore
    from capacity.adapters.ec2 import LaunchTemplateVersion
    from capacity.adapters.sagemaker import ComponentInfo, EndpointInfo
    from capacity.adapters.scheduler import RequestSchedules
    from capacity.resources import (
        AlarmSpec,
        CapacityReservation,
        Extension,
        Instance,
        SlackMessage,
        TrainingPlan,
    )


class SageMakerPort(Protocol):
    """The SageMaker operations the logic uses (:class:`~capacity.adapters.sagemaker.SageMakerAdapter`)."""

    region: str

    def search_training_plan_offerings(
        self,
        *,
        instance_type: str,
        instance_count: int,
        start_after: datetime,
        end_before: datetime,
        duration_hours: int,
    ) -> list[dict[str, Any]]: ...

    def create_training_plan(
        self, *, name: str, offering_id: str, tags: Sequence[Mapping[str, str]]
    ) -> str: ...

    def describe_training_plan(self, name: str) -> TrainingPlan | None: ...

    def search_plan_extensions(self, plan_arn: str, hours: int) -> list[Extension]: ...

    def extend_training_plan(self, offering_id: str) -> Extension: ...

    def plan_extension_history(self, plan_arn: str) -> list[Extension]: ...

    def find_training_plan(self, name: str) -> TrainingPlan | None: ...

    def create_endpoint_config(
        self,
        *,
        name: str,
        variant: Mapping[str, Any],
        execution_role_arn: str,
        tags: Sequence[Mapping[str, str]],
    ) -> bool: ...

    def model_exists(self, name: str) -> bool: ...

    def describe_endpoint_config(self, name: str) -> dict[str, Any] | None: ...

    def delete_endpoint_config(self, name: str) -> bool: ...

    def create_endpoint(self, *, name: str, config_name: str, tags: Sequence[Mapping[str, str]]) -> bool: ...

    def describe_endpoint(self, name: str) -> EndpointInfo | None: ...

    def delete_endpoint(self, name: str) -> bool: ...

    def list_endpoint_names(self, name_contains: str) -> list[tuple[str, str]]: ...

    def list_endpoint_config_names(self, name_contains: str) -> list[tuple[str, str]]: ...

    def create_inference_component(
        self,
        *,
        name: str,
        endpoint_name: str,
        variant_name: str,
        specification: Mapping[str, Any],
        copy_count: int,
        tags: Sequence[Mapping[str, str]],
    ) -> bool: ...

    def describe_inference_component(self, name: str) -> ComponentInfo | None: ...

    def list_inference_components(
        self, *, endpoint_name: str | None = None, name_contains: str | None = None
    ) -> list[ComponentInfo]: ...

    def delete_inference_component(self, name: str) -> bool: ...

    def update_inference_component_copies(self, name: str, copies: int) -> None: ...

    def resource_tags(self, arn: str) -> dict[str, str] | None: ...


class AutoScalingPort(Protocol):
    """Scalable targets and policies of inference components
    (see :class:`~capacity.adapters.autoscaling.AutoScalingAdapter`)."""

    def register_component(
        self, component_name: str, *, min_copies: int, max_copies: int, tags: Sequence[Mapping[str, str]]
    ) -> None: ...

    def suspend_scale_in(self, component_name: str, *, suspended: bool) -> None: ...

    def put_invocations_policy(
        self,
        component_name: str,
        *,
        policy_name: str,
        target_value: float,
        scale_in_cooldown: int,
        scale_out_cooldown: int,
    ) -> str: ...

    def policy_names(self, component_name: str) -> list[str]: ...

    def delete_policy(self, component_name: str, policy_name: str) -> bool: ...

    def deregister_component(self, component_name: str) -> bool: ...

    def registered(self, component_names: Sequence[str]) -> list[str]: ...


class AlarmsPort(Protocol):
    """CloudWatch alarms and metric sums (see :class:`~capacity.adapters.cloudwatch.AlarmsAdapter`)."""

    def put_alarm(self, spec: AlarmSpec) -> None: ...

    def alarm_names(self, prefix: str) -> list[str]: ...

    def delete_alarms(self, names: Sequence[str]) -> None: ...

    def alarm_tags(self, arn: str) -> dict[str, str] | None: ...

    def alarm_state(self, name: str) -> AlarmState | None: ...

    def reset_alarm(self, name: str, reason: str) -> None: ...

    def metric_sum(
        self,
        *,
        metric_name: str,
        dimensions: Mapping[str, str],
        start: datetime,
        end: datetime,
        period: int = 60,
        namespace: str = ...,
    ) -> float: ...


class Ec2Port(Protocol):
    """The EC2 operations the logic uses (:class:`~capacity.adapters.ec2.Ec2Adapter`)."""

    region: str

    def describe_capacity_block_offerings(
        self,
        *,
        instance_type: str,
        instance_count: int,
        start_after: datetime,
        end_before: datetime,
        duration_hours: int,
    ) -> list[dict[str, Any]]: ...

    def purchase_capacity_block(
        self, *, offering_id: str, tags: Sequence[Mapping[str, str]], platform: str = "Linux/UNIX"
    ) -> CapacityReservation: ...

    def describe_capacity_reservation(self, reservation_id: str) -> CapacityReservation | None: ...

    def describe_block_extension_offerings(self, reservation_id: str, hours: int) -> list[Extension]: ...

    def purchase_block_extension(self, *, offering_id: str, reservation_id: str) -> Extension: ...

    def block_extension_history(self, reservation_id: str) -> list[Extension]: ...

    def find_capacity_reservations(self, request_id: str) -> list[CapacityReservation]: ...

    def run_instances(
        self,
        *,
        count: int,
        instance_type: str,
        launch_template: Mapping[str, str] | None,
        client_token: str,
        tags: Sequence[Mapping[str, str]],
        capacity_reservation_id: str | None = None,
        market_type: str | None = None,
    ) -> list[str]: ...

    def find_instances(self, request_id: str) -> list[Instance]: ...

    def terminate_instances(self, instance_ids: Sequence[str]) -> None: ...

    def launch_template_version(self, launch_template: Mapping[str, str]) -> LaunchTemplateVersion | None: ...

    def tagged_capacity_reservations(self) -> list[CapacityReservation]: ...


class IamPort(Protocol):
    """Reads instance profiles (:class:`~capacity.adapters.iam.IamAdapter`)."""

    def instance_profile_roles(self, profile: str) -> list[str] | None: ...

    def principal_tags(self, arn: str) -> dict[str, str] | None: ...


class EventsPort(Protocol):
    """Puts application events (see :class:`~capacity.adapters.events.EventPublisher`)."""

    def put(self, detail_type: str, detail: BaseModel, *, resources: Sequence[str] = ()) -> str: ...


class EventRulesPort(Protocol):
    """Rules on one region's default bus (see :class:`~capacity.adapters.events.EventRules`)."""

    def put_forwarding_rule(
        self, *, name: str, pattern: Mapping[str, Any], description: str, target_arn: str, role_arn: str
    ) -> None: ...

    def delete_rule(self, name: str) -> bool: ...


class SchedulerPort(Protocol):
    """One-time schedules putting an application event: release, idle checks (see
    :class:`~capacity.adapters.scheduler.ReleaseScheduler`)."""

    def schedule_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> bool: ...

    def schedule_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> bool: ...
    def move_release(self, *, name: str, at: datetime, request_id: str, reason: str) -> None: ...

    def move_event(
        self, *, name: str, at: datetime, detail_type: str, detail: BaseModel, description: str
    ) -> None: ...

    def delete(self, name: str) -> bool: ...


class ParametersPort(Protocol):
    """Parameter Store (see :class:`~capacity.adapters.ssm.Parameters`): where clients find an endpoint."""

    def get(self, name: str) -> str | None: ...

    def put(self, name: str, value: str, *, description: str) -> bool: ...

    def delete(self, name: str) -> bool: ...


class TaskTokensPort(Protocol):
    """Answers waiting Step Functions tasks (see :class:`~capacity.adapters.stepfunctions.TaskTokens`)."""

    def succeed(self, token: str, output: Mapping[str, Any]) -> None: ...

    def fail(self, token: str, *, error: str, cause: str) -> None: ...


class NotifierPort(Protocol):
    """Posts Slack messages (see :class:`~capacity.adapters.slack.SlackNotifier`)."""

    def post(self, message: SlackMessage) -> bool: ...

    def publish(self, message: SlackMessage) -> str | None:
        """Post and return the message's ``ts`` (a thread to reply in), or None if nothing was posted."""
        ...


class DirectoryPort(Protocol):
    """Reads Slack user groups (see :class:`~capacity.adapters.slack.SlackDirectory`)."""

    def usergroup_users(self, usergroup: str) -> frozenset[str]: ...


class _PerRegion[P]:
    """One port per region, made by ``make(region)`` on first use and reused."""

    def __init__(self, make: Callable[[str], P]) -> None:
        self._make = make
        self._ports: dict[str, P] = {}

    def __call__(self, region: str) -> P:
        if region not in self._ports:
            self._ports[region] = self._make(region)
        return self._ports[region]


class Ports:
    """Every collaborator of the logic, built lazily from :class:`~capacity.settings.Settings`.

    Args:
        settings: the function's settings.
        ledger, offerings, events, scheduler, tasks, slack: ready-made ports (tests); default: built
            from the settings on first use (a missing variable raises ``ConfigurationError`` then).
        sagemaker: region -> SageMaker port; default :class:`SageMakerAdapter` with the cached client.
        autoscaling: region -> Application Auto Scaling port; default :class:`AutoScalingAdapter`.
        alarms: region -> CloudWatch alarms port; default :class:`AlarmsAdapter`.
        ec2: region -> EC2 port; default :class:`~capacity.adapters.ec2.Ec2Adapter`.
        iam: the IAM port; default :class:`~capacity.adapters.iam.IamAdapter`.
        event_rules: region -> default-bus rules port; default :class:`~capacity.adapters.events.EventRules`.
        policy: the teams policy store; default built from env ``POLICY_TABLE`` (None when unset).
        slack_directory: Slack user groups; default :class:`~capacity.adapters.slack.SlackDirectory` with the
            bot token (env ``SLACK_BOT_TOKEN_SECRET_ARN``).
        clock: the current UTC time.
        request_schedules: the recurring reservation schedules (default: built from the settings).
        parameters: Parameter Store in the stack's region (default
            :class:`~capacity.adapters.ssm.Parameters`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        ledger: Ledger | None = None,
        offerings: OfferingStore | None = None,
        events: EventsPort | None = None,
        scheduler: SchedulerPort | None = None,
        tasks: TaskTokensPort | None = None,
        slack: NotifierPort | None = None,
        sagemaker: Callable[[str], SageMakerPort] | None = None,
        autoscaling: Callable[[str], AutoScalingPort] | None = None,
        alarms: Callable[[str], AlarmsPort] | None = None,
        clock: Callable[[], datetime] = utcnow,
        request_schedules: RequestSchedules | None = None,
        ec2: Callable[[str], Ec2Port] | None = None,
        iam: IamPort | None = None,
        event_rules: Callable[[str], EventRulesPort] | None = None,
        policy: PolicyStore | None = None,
        slack_directory: DirectoryPort | None = None,
        parameters: ParametersPort | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self._ledger = ledger
        self._offerings = offerings
        self._events = events
        self._scheduler = scheduler
        self._tasks = tasks
        self._slack = slack
        self._slack_directory = slack_directory
        self._parameters = parameters
        self._sagemaker = _PerRegion[SageMakerPort](sagemaker or self._new_sagemaker)
        self._autoscaling = _PerRegion[AutoScalingPort](autoscaling or self._new_autoscaling)
        self._alarms = _PerRegion[AlarmsPort](alarms or self._new_alarms)
        self._request_schedules = request_schedules
        self._ec2 = _PerRegion[Ec2Port](ec2 or self._new_ec2)
        self._iam = iam
        self._policy = policy
        self._event_rules = _PerRegion[EventRulesPort](event_rules or self._new_event_rules)

    def _new_sagemaker(self, region: str) -> SageMakerPort:
        from capacity.adapters.sagemaker import SageMakerAdapter  # noqa: PLC0415 - see the imports

        return SageMakerAdapter(region, clients.sagemaker(region, self.settings.call_timeouts))

    def _new_autoscaling(self, region: str) -> AutoScalingPort:
        from capacity.adapters.autoscaling import AutoScalingAdapter  # noqa: PLC0415 - see the imports

        timeouts = self.settings.call_timeouts
        return AutoScalingAdapter(region, clients.application_autoscaling(region, timeouts))

    def _new_alarms(self, region: str) -> AlarmsPort:
        from capacity.adapters.cloudwatch import AlarmsAdapter  # noqa: PLC0415 - see the imports

        return AlarmsAdapter(region, clients.cloudwatch(region, self.settings.call_timeouts))

    def _new_ec2(self, region: str) -> Ec2Port:
        from capacity.adapters.ec2 import Ec2Adapter  # noqa: PLC0415 - see the imports

        timeouts = self.settings.call_timeouts
        return Ec2Adapter(
            region, clients.client("ec2", region, timeouts), clients.client("ec2", region, timeouts.single())
        )

    def _new_event_rules(self, region: str) -> EventRulesPort:
        from capacity.adapters.events import EventRules  # noqa: PLC0415 - see the imports

        return EventRules(region, clients.events(region, self.settings.call_timeouts))

    @property
    def actor(self) -> str:
        """Who acts, for the ledger: the Lambda function name."""
        return self.settings.function_name

    @property
    def ledger(self) -> Ledger:
        """The reservations ledger (env ``LEDGER_TABLE``)."""
        if self._ledger is None:
            self._ledger = Ledger(
                self.settings.need("ledger_table"),
                clients.dynamodb(self.settings.region, self.settings.call_timeouts),
                clock=self.clock,
            )
        return self._ledger

    @property
    def offerings(self) -> OfferingStore:
        """The offerings store (env ``OFFERINGS_TABLE``)."""
        if self._offerings is None:
            from capacity.adapters.dynamodb import OfferingStore  # noqa: PLC0415 - see the imports

            self._offerings = OfferingStore(
                self.settings.need("offerings_table"),
                clients.dynamodb(self.settings.region, self.settings.call_timeouts),
                ttl_days=self.settings.offerings_ttl_days,
            )
        return self._offerings

    @property
    def events(self) -> EventsPort:
        """The application's event bus (env ``EVENT_BUS_NAME``)."""
        if self._events is None:
            from capacity.adapters.events import EventPublisher  # noqa: PLC0415 - see the imports

            self._events = EventPublisher(
                self.settings.need("event_bus_name"),
                clients.events(self.settings.region, self.settings.call_timeouts),
            )
        return self._events

    @property
    def scheduler(self) -> SchedulerPort:
        """Release schedules (env ``SCHEDULE_GROUP``; creating one also needs ``RELEASE_TARGET_ARN`` and
        ``SCHEDULER_ROLE_ARN``, deleting one does not)."""
        if self._scheduler is None:
            from capacity.adapters.scheduler import ReleaseScheduler  # noqa: PLC0415 - see the imports

            self._scheduler = ReleaseScheduler(
                clients.scheduler(self.settings.region, self.settings.call_timeouts),
                group=self.settings.need("schedule_group"),
                target_arn=self.settings.release_target_arn,
                role_arn=self.settings.scheduler_role_arn,
            )
        return self._scheduler

    @property
    def request_schedules(self) -> RequestSchedules:
        """Recurring reservation schedules (env ``REQUEST_SCHEDULE_GROUP``; creating one also needs
        ``SCHEDULED_REQUEST_FUNCTION_ARN`` and ``REQUEST_SCHEDULER_ROLE_ARN``)."""
        if self._request_schedules is None:
            from capacity.adapters.scheduler import RequestSchedules  # noqa: PLC0415 - see the imports

            self._request_schedules = RequestSchedules(
                clients.scheduler(self.settings.region, self.settings.call_timeouts),
                group=self.settings.need("request_schedule_group"),
                target_arn=self.settings.scheduled_request_function_arn,
                role_arn=self.settings.request_scheduler_role_arn,
            )
        return self._request_schedules

    @property
    def tasks(self) -> TaskTokensPort:
        """Step Functions task tokens."""
        if self._tasks is None:
            from capacity.adapters.stepfunctions import TaskTokens  # noqa: PLC0415 - see the imports

            self._tasks = TaskTokens(clients.stepfunctions(self.settings.region, self.settings.call_timeouts))
        return self._tasks

    @property
    def slack(self) -> NotifierPort:
        """Slack (no-op when ``SLACK_CHANNEL_ID`` or ``SLACK_BOT_TOKEN_SECRET_ARN`` is missing)."""
        if self._slack is None:
            from capacity.adapters.slack import SlackNotifier, token_from_secret  # noqa: PLC0415 - slack_sdk, when used

            secret = self.settings.slack_token_secret_arn
            provider = (lambda: token_from_secret(secret)) if secret else None
            self._slack = SlackNotifier(self.settings.slack_channel_id, provider)
        return self._slack

    @property
    def slack_directory(self) -> DirectoryPort:
        """Slack user groups, read with the bot token (every lookup raises ``ConfigurationError`` when
        ``SLACK_BOT_TOKEN_SECRET_ARN`` is not set)."""
        if self._slack_directory is None:
            from capacity.adapters.slack import SlackDirectory, token_from_secret  # noqa: PLC0415 - slack_sdk, when used

            secret = self.settings.slack_token_secret_arn
            provider = (lambda: token_from_secret(secret)) if secret else None
            timeouts = self.settings.call_timeouts
            seconds = max(1, round(timeouts.connect_seconds + timeouts.read_seconds))
            self._slack_directory = SlackDirectory(provider, timeout_seconds=seconds)
        return self._slack_directory

    @property
    def parameters(self) -> ParametersPort:
        """Parameter Store in the stack's region (where clients read a reservation's current endpoint)."""
        if self._parameters is None:
            from capacity.adapters.ssm import Parameters  # noqa: PLC0415 - see the imports

            region = self.settings.region
            self._parameters = Parameters(region, clients.client("ssm", region, self.settings.call_timeouts))
        return self._parameters

    def sagemaker(self, region: str) -> SageMakerPort:
        """The SageMaker port for ``region`` (one per region, reused)."""
        return self._sagemaker(region)

    def autoscaling(self, region: str) -> AutoScalingPort:
        """The Application Auto Scaling port for ``region`` (one per region, reused)."""
        return self._autoscaling(region)

    def alarms(self, region: str) -> AlarmsPort:
        """The CloudWatch alarms port for ``region`` (one per region, reused)."""
        return self._alarms(region)

    def ec2(self, region: str) -> Ec2Port:
        """The EC2 port for ``region`` (one per region, reused)."""
        return self._ec2(region)

    @property
    def iam(self) -> IamPort:
        """IAM (global; instance profiles)."""
        if self._iam is None:
            from capacity.adapters.iam import IamAdapter  # noqa: PLC0415 - see the imports

            region = self.settings.region
            self._iam = IamAdapter(region, clients.client("iam", region, self.settings.call_timeouts))
        return self._iam

    def slack_respond(self, response_url: str, text: str, **options: Any) -> bool:
        """Answer a Slack command or interaction through its ``response_url``
        (:func:`capacity.adapters.slack.respond`: ``blocks``, ``ephemeral``, ``replace_original``); False
        when Slack did not take it (logged, never raised)."""
        from capacity.adapters.slack import respond  # noqa: PLC0415 - slack_sdk, for the Slack door

        return respond(response_url, text, **options)

    def idempotency_store(self) -> DynamoDBPersistenceLayer:
        """The Powertools idempotency store in env ``IDEMPOTENCY_TABLE`` (PK ``id``), with the cached client
        (the doors that accept requests: API and scheduled requests).

        Raises:
            ConfigurationError: ``IDEMPOTENCY_TABLE`` is not set.
        """
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer  # noqa: PLC0415 - only two doors need it

        return DynamoDBPersistenceLayer(
            table_name=self.settings.need("idempotency_table"),
            # the function's own timeouts: the default ones (42 s a call) do not fit in the API's 29 s
            boto3_client=clients.dynamodb(self.settings.region, self.settings.call_timeouts),
        )

    @property
    def policy(self) -> PolicyStore | None:
        """The teams policy (env ``POLICY_TABLE``); None when the deployment has no policy table (then no
        team limits apply: every door still records the caller and refuses self-approval)."""
        if self._policy is None and self.settings.policy_table:
            self._policy = PolicyStore(
                self.settings.policy_table,
                clients.dynamodb(self.settings.region, self.settings.call_timeouts),
            )
        return self._policy

    def event_rules(self, region: str) -> EventRulesPort:
        """The rules port of ``region``'s default bus (one per region, reused)."""
        return self._event_rules(region)
