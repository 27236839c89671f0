"""Events from every region reach the application: the forwarding rule of a region other than the stack's.

AWS puts its events on the default bus of the region where the resource lives (AWS_FACTS.md "EventBridge
across regions"): the alarms ``scale_components`` acts on and the expiration warning of a capacity block
bought in ``us-east-2`` go to ``us-east-2``'s default bus, where the stack has no rule. So, when the
application creates alarms (:func:`~capacity.logic.sagemaker.scaling.setup_scaling`) or buys a capacity
block (:class:`~capacity.logic.ec2.capacity_block.CapacityBlockBuyer`) in another region, it first puts one
rule on that
region's default bus (:func:`ensure_forwarding`): pattern :data:`FORWARDED_PATTERN` (this application's
alarm state changes and capacity block expiration warnings, nothing else), one target, the application's
bus in the stack's region, with the role ``FORWARDING_ROLE_ARN`` (``events:PutEvents`` on that bus only).
EventBridge delivers the same event there (its ``region`` still names where it happened), and the app
bus's rules for ``aws.cloudwatch``/``aws.ec2`` hand it to ``scale_components``/``capacity_block_events``.

The rule is removed when no reservation needs it (:func:`retire_forwarding`, at the end of every release):
no alarm of the application is left in the region, and no capacity block tagged by it is still to come or
running there for a reservation not yet released. Two reservations of one region never lose the rule to
each other's timing: a creator puts the rule again after creating what needs it, and a remover looks
again after deleting it and puts it back if something appeared meanwhile, so one of the two always sees
the other.
"""

from __future__ import annotations

import logging
from typing import Any

from capacity import TAG_REQUEST_ID
from capacity.naming import ALARM_PREFIX
from capacity.ports import Ports
from capacity.record_kinds import RELEASED_MARKER

logger = logging.getLogger(__name__)

CAPACITY_BLOCK_WARNINGS = (
    "Capacity Block Expiration Warning",
    "Capacity Block Reservation Expiration Warning",
)
"""Both detail-type spellings the EC2 guide has used for a block's expiration warning (AWS_FACTS.md)."""
FORWARDED_PATTERN: dict[str, Any] = {
    "$or": [
        {
            "source": ["aws.cloudwatch"],
            "detail-type": ["CloudWatch Alarm State Change"],
            "detail": {"alarmName": [{"prefix": ALARM_PREFIX}]},
        },
        {"source": ["aws.ec2"], "detail-type": list(CAPACITY_BLOCK_WARNINGS)},
    ]
}
"""What the forwarding rule matches: exactly what the stack's own rules match in its region."""


def ensure_forwarding(ports: Ports, region: str) -> bool:
    """Put (an idempotent upsert) the rule forwarding ``region``'s AWS events to the application's bus.

    Nothing to do in the stack's own region (its rules see its default bus). Call it before creating what
    emits the events, and again after (see the module docstring).

    Returns:
        True if the rule was put, False in the stack's region.

    Raises:
        ConfigurationError: ``FORWARDING_RULE_NAME``, ``FORWARDING_TARGET_ARN`` or ``FORWARDING_ROLE_ARN``
            is not configured.
        RetryableAwsError: throttling/5xx after retries (the step is retried).
    """
    settings = ports.settings
    if region == settings.region:
        return False
    ports.event_rules(region).put_forwarding_rule(
        name=settings.need("forwarding_rule_name"),
        pattern=FORWARDED_PATTERN,
        description=(
            f"Capacity Orchestrator: forwards this region's alarm state changes and capacity block "
            f"warnings to its bus in {settings.region}"
        ),
        target_arn=settings.need("forwarding_target_arn"),
        role_arn=settings.need("forwarding_role_arn"),
    )
    return True


def forwarding_needs(ports: Ports, region: str) -> list[str]:
    """What in ``region`` still needs its AWS events forwarded: the application's alarms (every stack's:
    they share the name prefix), and capacity blocks tagged with a request id that is not released (a
    request another stack owns counts too: keeping the rule is the safe side)."""
    needs = [f"alarm {name}" for name in ports.alarms(region).alarm_names(ALARM_PREFIX)]
    if needs:
        return needs
    for block in ports.ec2(region).tagged_capacity_reservations():
        request_id = block.tags.get(TAG_REQUEST_ID, "")
        if request_id and ports.ledger.get(request_id, RELEASED_MARKER) is None:
            needs.append(f"capacity block {block.reservation_id} ({request_id})")
    return needs


def retire_forwarding(ports: Ports, region: str) -> bool:
    """Delete ``region``'s forwarding rule when nothing needs it any more (after a release).

    Returns:
        True if the rule was deleted (and nothing started needing it meanwhile).

    Raises:
        ConfigurationError: the forwarding settings are missing.
        RetryableAwsError: throttling/5xx after retries.
    """
    settings = ports.settings
    if region == settings.region:
        return False
    needs = forwarding_needs(ports, region)
    if needs:
        logger.info("forwarding rule of %s kept: %s", region, ", ".join(needs[:5]))
        return False
    ports.event_rules(region).delete_rule(settings.need("forwarding_rule_name"))
    # A reservation that created alarms or bought a block while we looked puts the rule again after; if
    # it did so before our delete, it is gone now: look once more.
    if forwarding_needs(ports, region):
        ensure_forwarding(ports, region)
        return False
    logger.info("forwarding rule of %s deleted: no reservation needs it", region)
    return True
