""":class:`CloudLookups`: the state IAM evaluation reads (tags, launch templates...), from the emulator and
moto, without going through the dispatcher (these reads are the authorizer's, not a caller's)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit


class CloudLookups:
    """:class:`localcloud.iam.requests.Lookups` over a running local cloud.

    Args:
        emulator: the AWS emulator (None: SageMaker/EC2 state comes from nowhere).
        functions: resolves a function name, ARN or partial ARN to its spec (the Lambda runtime's lookup).
        account_id, partition: the account.
    """

    def __init__(self, emulator: Any, functions: Any, *, account_id: str, partition: str = "aws") -> None:
        self.emulator = emulator
        self.functions = functions
        self.account_id = account_id
        self.partition = partition

    def resource_tags(self, arn: str) -> dict[str, str] | None:
        """Current tags of a SageMaker, EC2 (instance, capacity reservation), Application Auto Scaling or
        CloudWatch alarm resource; None when unknown."""
        parts = arn.split(":", 5)
        if len(parts) < 6:
            return None
        service, region, resource = parts[2], parts[3], parts[5]
        try:
            return self._tags(service, region, resource, arn)
        except Exception:  # the emulator's AwsError, moto's own errors: an unknown resource has no tags
            return None

    def _tags(self, service: str, region: str, resource: str, arn: str) -> dict[str, str] | None:
        if service == "cloudwatch":
            from moto.cloudwatch.models import cloudwatch_backends  # noqa: PLC0415

            tags = cloudwatch_backends[self.account_id][region].list_tags_for_resource(arn)
            return {str(k): str(v) for k, v in (tags or {}).items()}
        if self.emulator is None:
            return None
        if service == "sagemaker":
            answer = self.emulator.call("sagemaker", "ListTags", {"ResourceArn": arn}, region=region)
            return _pairs(answer.get("Tags"))
        if service == "ec2":
            return self._ec2_tags(region, resource)
        if service == "application-autoscaling":
            answer = self.emulator.call(
                "application-auto-scaling", "ListTagsForResource", {"ResourceARN": arn}, region=region
            )
            return {str(k): str(v) for k, v in (answer.get("Tags") or {}).items()}
        return None

    def _ec2_tags(self, region: str, resource: str) -> dict[str, str] | None:
        kind, _, ident = resource.partition("/")
        if kind == "instance":
            answer = self.emulator.call("ec2", "DescribeInstances", {"InstanceIds": [ident]}, region=region)
            for reservation in answer.get("Reservations") or []:
                for instance in reservation.get("Instances") or []:
                    return _pairs(instance.get("Tags"))
        if kind == "capacity-reservation":
            answer = self.emulator.call(
                "ec2", "DescribeCapacityReservations", {"CapacityReservationIds": [ident]}, region=region
            )
            for reservation in answer.get("CapacityReservations") or []:
                return _pairs(reservation.get("Tags"))
        return None

    def scalable_target_arn(
        self, region: str, namespace: str, resource_id: str, dimension: str
    ) -> str | None:
        """The emulator's ARN of a registered scalable target (None if not registered)."""
        autoscaling = getattr(self.emulator, "autoscaling", None)
        if autoscaling is None:
            return None
        target = autoscaling.targets.get((region, namespace, resource_id, dimension))
        return None if target is None else str(target.arn)

    def launch_template(self, region: str, spec: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """(id, version data) of a launch template in moto's EC2 backend, None if it does not exist."""
        from moto.ec2.models import ec2_backends  # noqa: PLC0415

        backend = ec2_backends[self.account_id][region]
        template_id = spec.get("LaunchTemplateId")
        if template_id is None and spec.get("LaunchTemplateName") is not None:
            template_id = backend.launch_template_name_to_ids.get(spec["LaunchTemplateName"])
        template = backend.launch_templates.get(template_id) if template_id else None
        if template is None:
            return None
        try:
            version = template.get_version(spec.get("Version") or "$Default")
        except Exception:  # moto's own error for an unknown version
            return None
        return str(template_id), dict(version.data)

    def instance_profile_role(self, profile: dict[str, Any]) -> str | None:
        """The first role of an instance profile (moto's IAM backend), by ``Arn`` or ``Name``."""
        from moto.iam.models import iam_backends  # noqa: PLC0415

        backend = iam_backends[self.account_id][self.partition]
        for item in backend.instance_profiles.values():
            if profile.get("Arn") in (item.arn,) or profile.get("Name") == item.name:
                roles = list(item.roles)
                return str(roles[0].arn) if roles else None
        return None

    def function_arn(self, name_or_arn: str, region: str) -> str:
        """A function's ARN (the qualifier, if any, kept) from a name, ARN or partial ARN."""
        qualifier = ""
        if name_or_arn.startswith("arn:"):
            parts = name_or_arn.split(":")
            if len(parts) > 7:
                qualifier = f":{parts[7]}"
            name = parts[6] if len(parts) > 6 else name_or_arn
            region = parts[3] or region
        elif ":function:" in name_or_arn:
            name, _, qualifier = name_or_arn.split(":function:", 1)[1].partition(":")
            qualifier = f":{qualifier}" if qualifier else ""
        else:
            name, _, qualifier = name_or_arn.partition(":")
            qualifier = f":{qualifier}" if qualifier else ""
        if self.functions is not None and self.functions.knows(name):
            base = str(self.functions.function(name).arn)
        else:
            base = f"arn:{self.partition}:lambda:{region}:{self.account_id}:function:{name}"
        return base + qualifier

    def queue_arn(self, queue_url: str) -> str:
        """A queue URL (``https://sqs.<region>.amazonaws.com/<account>/<name>``) as its ARN."""
        if queue_url.startswith("arn:"):
            return queue_url
        split = urlsplit(queue_url)
        host_parts = split.netloc.split(".")
        region = host_parts[1] if len(host_parts) > 2 and host_parts[0] == "sqs" else "us-east-1"
        path = [p for p in split.path.split("/") if p]
        account, name = (path[0], path[1]) if len(path) >= 2 else (self.account_id, path[-1] if path else "")
        return f"arn:{self.partition}:sqs:{region}:{account}:{name}"


def _pairs(tags: Any) -> dict[str, str]:
    return {str(t["Key"]): str(t.get("Value", "")) for t in tags or [] if isinstance(t, dict) and "Key" in t}
