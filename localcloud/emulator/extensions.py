"""Extending a reservation in place: what training plan extensions and capacity block extensions share.

Follows "Extend Capacity Blocks" (EC2 user guide) and "Extend a training plan using the SageMaker API"
(SageMaker developer guide). The EC2 guide's rules are applied to both kinds, the SageMaker guide being
silent on them (the less kind choice):

* only a reservation that is ``active``/``Active`` or ``scheduled``/``Scheduled`` can be extended, and not
  while another extension's payment is pending;
* an extension is requested between 56 days and 1 hour before the reservation ends; it starts where the
  reservation ends, in the same zone, for the same instances, and only if that capacity is free;
* the reservation lasts at most 182 days in all;
* the payment stays pending (``Timings.plan_pending`` / ``Timings.block_payment_pending``) and fails when it
  cannot complete within 12 hours or by 35 minutes before the reservation ends, whichever comes first; the
  end moves only once it is paid.

Faults (drawn on the purchase call): ``payment_failed`` fails the payment when it would have completed;
``stuck`` keeps it pending until its deadline, when it fails; ``insufficient_capacity`` is the operation's
own (see each service).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from localcloud.emulator.common import Timeline
from localcloud.emulator.market import Offering
from localcloud.faults import FaultKind

PAYMENT_WINDOW = timedelta(hours=12)
PAYMENT_DEADLINE_BEFORE_END = timedelta(minutes=35)
EARLIEST_BEFORE_END = timedelta(days=56)
LATEST_BEFORE_END = timedelta(hours=1)
MAX_TOTAL_DAYS = 182

PENDING = "pending"
SUCCEEDED = "succeeded"
FAILED = "failed"


@dataclass
class Extension:
    """One extension bought: the offering (start = the end it extends), when, and its payment over time
    (``pending`` -> ``succeeded`` | ``failed``)."""

    offering: Offering
    purchased: datetime
    payment: Timeline

    def status(self, now: datetime) -> str:
        """``pending``, ``succeeded`` or ``failed`` at ``now``."""
        return self.payment.at(now)

    @property
    def will_succeed(self) -> bool:
        """True when the payment is (or will be) ``succeeded``."""
        return self.payment.phases[-1][1] == SUCCEEDED

    @property
    def hours(self) -> int:
        """The hours it adds."""
        return self.offering.hours


def payment(
    now: datetime, pending: timedelta, current_end: datetime, faults: frozenset[FaultKind]
) -> Timeline:
    """The payment timeline of an extension bought at ``now`` for a reservation ending at ``current_end``."""
    deadline = max(now, min(now + PAYMENT_WINDOW, current_end - PAYMENT_DEADLINE_BEFORE_END))
    timeline = Timeline([(now, PENDING)])
    paid_at = now + pending
    if FaultKind.STUCK in faults or paid_at > deadline:
        timeline.add(deadline, FAILED)
    elif FaultKind.PAYMENT_FAILED in faults:
        timeline.add(paid_at, FAILED)
    else:
        timeline.add(paid_at, SUCCEEDED)
    return timeline


def end_at(base_end: datetime, extensions: Iterable[Extension], now: datetime) -> datetime:
    """The reservation's end as AWS reports it at ``now``: the paid extensions only."""
    return base_end + timedelta(hours=sum(item.hours for item in extensions if item.status(now) == SUCCEEDED))


def final_end(base_end: datetime, extensions: Iterable[Extension]) -> datetime:
    """The end once every payment has completed (what reclaims and expiries follow: a payment always
    completes or fails at least 35 minutes before the end it extends, before anything happens there)."""
    return base_end + timedelta(hours=sum(item.hours for item in extensions if item.will_succeed))


def refusal(
    *,
    status_ok: bool,
    status: str,
    extensions: Iterable[Extension],
    end: datetime,
    days: int,
    total_days: int,
    now: datetime,
    what: str,
) -> str | None:
    """Why ``what`` cannot be extended by ``days`` now (None: it can)."""
    if not status_ok:
        return f"{what} is {status}: only an active or scheduled reservation can be extended."
    if any(item.status(now) == PENDING for item in extensions):
        return (
            f"{what} has an extension whose payment is pending; extend it again once that payment completes."
        )
    if now < end - EARLIEST_BEFORE_END:
        return f"{what} ends more than 56 days from now: extensions open 56 days before its end."
    if now > end - LATEST_BEFORE_END:
        return f"{what} ends within the hour: an extension must be requested at least 1 hour before its end."
    if total_days + days > MAX_TOTAL_DAYS:
        return (
            f"{what} would last {total_days + days} days: a reservation lasts at most {MAX_TOTAL_DAYS} days."
        )
    return None
