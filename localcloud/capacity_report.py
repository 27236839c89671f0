"""Reserved capacity against what ran, from the ledger: the capacity panel of a run's chart and the sizing
line of its cost summary (``make demo``, ``demo-ec2``, ``demo-extend``: ``reports/<name>.png``).

Read from the ledger items the application writes (this module reads them as data; the local cloud never
imports the application):

- **reserved**: each reservation's ``PURCHASE`` (``instance_count`` from ``start_time`` to ``end_time``),
  moved to the new end by each ``EXTENDED`` state (``detail.end_time``); a reservation counts from its start
  to its end, paid whether anything runs or not;
- **ran**: its ``USAGE#<time>`` observations (instances in service: the endpoint's ``CurrentInstanceCount``,
  the EC2 instances running) from ``READY`` (else ``DEPLOYING``) to ``RELEASING``, a step function (the
  count before the first observation in service is the first one), as ``GET /costs`` counts them;
- **marks**: the purchases (``PURCHASED``), extensions (``EXTENDED``), roll-overs (``ROLLED_OVER``: the
  clients moved to the successor) and releases (``RELEASING``).

The difference between the two lines is idle reserved capacity: paid for, never used. A reservation whose
instance count is above the most that ever ran on it was larger than its peak, by that many instances.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

STATE_PREFIX = "STATE#"
USAGE_PREFIX = "USAGE#"


def _at(value: Any) -> datetime:
    moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _money(value: Any) -> Decimal:
    try:
        return Decimal(str(value)) if value not in (None, "") else Decimal(0)
    except InvalidOperation:
        return Decimal(0)


@dataclass
class Held:
    """One reservation as the ledger tells it (see the module docstring)."""

    request_id: str
    instance_type: str
    count: int
    region: str
    start: datetime
    end: datetime
    fee: Decimal
    serving: tuple[datetime, datetime] | None
    usage: list[tuple[datetime, int]] = field(default_factory=list)
    marks: list[dict[str, str]] = field(default_factory=list)

    def reserved_at(self, moment: datetime) -> int:
        """Instances reserved at ``moment``."""
        return self.count if self.start <= moment < self.end else 0

    def ran_at(self, moment: datetime) -> int:
        """Instances in service at ``moment``."""
        if self.serving is None or not self.usage or not self.serving[0] <= moment < self.serving[1]:
            return 0
        count = self.usage[0][1]
        for at, instances in self.usage:
            if at > moment:
                break
            count = instances
        return count

    def peak(self) -> tuple[int, datetime | None]:
        """The most instances in service at once, and when it was first reached."""
        if self.serving is None or not self.usage:
            return 0, None
        moments = [self.serving[0], *(at for at, _ in self.usage if self.serving[0] <= at < self.serving[1])]
        best = max(moments, key=lambda moment: (self.ran_at(moment), -moment.timestamp()))
        return self.ran_at(best), best


def held_reservation(request_id: str, items: Sequence[Mapping[str, Any]], *, now: datetime) -> Held | None:
    """The reservation of ``request_id`` from its ledger items (plain values); None if nothing was bought."""
    by_sk = {str(item.get("sk")): item for item in items}
    purchase = by_sk.get("PURCHASE")
    if purchase is None or "PURCHASE_VOIDED" in by_sk or not purchase.get("start_time"):
        return None
    states = sorted(
        (i for i in items if str(i.get("sk", "")).startswith(STATE_PREFIX)), key=lambda i: i["sk"]
    )
    end = _at(purchase["end_time"])
    fee = _money(purchase.get("upfront_fee_usd"))
    marks: list[dict[str, str]] = []
    timeline = [(str(state.get("state")), _at(state["at"])) for state in states]
    begin = next((at for name, at in timeline if name == "READY"), None) or next(
        (at for name, at in timeline if name == "DEPLOYING"), None
    )
    stop = next((at for name, at in timeline if name == "RELEASING" and (begin is None or at >= begin)), None)
    for state in states:
        at, name, detail = _at(state["at"]), state.get("state"), state.get("detail") or {}
        if name == "PURCHASED":
            marks.append(_mark(at, "purchase", request_id, f"bought {request_id} (${fee:,.2f})"))
        elif name == "EXTENDED" and detail.get("end_time"):
            end = _at(detail["end_time"])
            fee += _money(state.get("money_usd"))
            marks.append(_mark(at, "extension", request_id, f"{request_id} extended to {end:%m-%d %H:%M}"))
        elif name == "RELEASING" and at == stop:
            marks.append(_mark(at, "release", request_id, f"{request_id} released"))
    rolled = by_sk.get("ROLLED_OVER")
    if rolled is not None and rolled.get("written_at"):
        successor = rolled.get("successor_id")
        text = f"{request_id} -> {successor} ({rolled.get('region')}): clients moved"
        marks.append(_mark(_at(rolled["written_at"]), "roll-over", request_id, text))
    usage = sorted(
        (_at(str(item["sk"]).split("#")[1]), int(item["instances"]))
        for item in items
        if str(item.get("sk", "")).startswith(USAGE_PREFIX) and item.get("instances") is not None
    )
    serving = None
    if begin is not None:
        serving = (begin, max(begin, min(stop or now, end)))
        usage = [point for point in usage if point[0] >= begin]
    return Held(
        request_id=request_id,
        instance_type=str(purchase.get("instance_type") or ""),
        count=int(purchase.get("instance_count") or 1),
        region=str(purchase.get("region") or ""),
        start=_at(purchase["start_time"]),
        end=end,
        fee=fee,
        serving=serving,
        usage=usage,
        marks=marks,
    )


def _mark(at: datetime, kind: str, request_id: str, text: str) -> dict[str, str]:
    return {"at": _iso(at), "kind": kind, "request_id": request_id, "text": text}


def _hours(points: Sequence[tuple[datetime, int]]) -> float:
    return sum(
        count * (following - at).total_seconds() / 3600
        for (at, count), (following, _) in itertools.pairwise(points)
    )


def capacity_view(ledgers: Mapping[str, Sequence[Mapping[str, Any]]], *, now: datetime) -> dict[str, Any]:
    """Reserved instances against instances in service over time, for every reservation bought (a JSON-safe
    dict: ``reservations``, ``series`` {``at``, ``reserved``, ``ran``}, ``marks``, ``instance_hours``
    {``reserved``, ``ran``, ``idle``}); an empty ``reservations`` list when nothing was bought.

    Args:
        ledgers: each request id's ledger items, plain values (:func:`read_ledgers`).
        now: the end of an observation still open (a reservation still serving).
    """
    held = [h for rid, items in sorted(ledgers.items()) if (h := held_reservation(rid, items, now=now))]
    moments: set[datetime] = set()
    for one in held:
        moments |= {one.start, one.end, *(at for at, _ in one.usage)}
        if one.serving is not None:
            moments |= set(one.serving)
    times = sorted(moments)
    reserved = [(t, sum(one.reserved_at(t) for one in held)) for t in times]
    ran = [(t, sum(one.ran_at(t) for one in held)) for t in times]
    reservations = []
    for one in held:
        peak, peak_at = one.peak()
        reservations.append(
            {
                "request_id": one.request_id,
                "instance_type": one.instance_type,
                "instance_count": one.count,
                "region": one.region,
                "start": _iso(one.start),
                "end": _iso(one.end),
                "fee_usd": str(one.fee),
                "peak_in_service": peak,
                "peak_at": _iso(peak_at) if peak_at else None,
                "reserved_instance_hours": round(one.count * (one.end - one.start).total_seconds() / 3600, 2),
            }
        )
    reserved_hours, ran_hours = _hours(reserved), _hours(ran)
    return {
        "reservations": reservations,
        "series": {
            "at": [_iso(t) for t in times],
            "reserved": [count for _, count in reserved],
            "ran": [count for _, count in ran],
        },
        "marks": sorted((m for one in held for m in one.marks), key=lambda m: m["at"]),
        "instance_hours": {
            "reserved": round(reserved_hours, 2),
            "ran": round(ran_hours, 2),
            "idle": round(reserved_hours - ran_hours, 2),
        },
    }


def sizing_lines(view: Mapping[str, Any], request_id: str) -> list[str]:
    """For the cost summary: when ``request_id`` reserved more instances than ever ran on it at once, by how
    many, the instance-hours and the share of the fee they stand for (none when it was sized to its peak or
    never served)."""
    found = next((r for r in view.get("reservations") or [] if r["request_id"] == request_id), None)
    if found is None or found["peak_at"] is None or found["peak_in_service"] >= found["instance_count"]:
        return []
    count, peak = int(found["instance_count"]), int(found["peak_in_service"])
    extra = count - peak
    hours = found["reserved_instance_hours"] * extra / count
    share = Decimal(found["fee_usd"]) * extra / count
    first = _at(found["peak_at"])
    return [
        f"    larger than its peak: {count} x {found['instance_type']} reserved, at most {peak} in service "
        f"(first at {first:%m-%d %H:%M} UTC): {extra} instance(s) more than ever ran, {hours:.2f} of its "
        f"{found['reserved_instance_hours']:.2f} reserved instance-hours ({100 * extra / count:.0f}%, about "
        f"${share:,.2f} of the fee) could never be used; {peak} x would have served what ran"
    ]


def read_ledgers(cloud: Any) -> dict[str, list[dict[str, Any]]]:
    """Every request's ledger items as plain values, by request id (the cloud's ``LedgerTable``, read as its
    own machinery: no faults, no IAM); empty for a template without the ledger."""
    try:
        table = cloud.stack.physical_id("LedgerTable")
    except Exception:  # a template without the ledger: nothing was bought through it
        return {}
    from boto3.dynamodb.types import TypeDeserializer  # noqa: PLC0415 - boto3 is the cloud's own

    plain = TypeDeserializer()
    client = cloud.client("dynamodb")
    found: dict[str, list[dict[str, Any]]] = {}
    with cloud.dispatcher.exempt():
        for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
            for item in page["Items"]:
                values = {key: plain.deserialize(value) for key, value in item.items()}
                found.setdefault(str(values["request_id"]), []).append(values)
    return found


def format_capacity(view: Mapping[str, Any]) -> str:
    """``== Reserved against what ran``: each reservation (instances, window, fee, the most in service), the
    instance-hours reserved, ran and idle, and the marks in time order."""
    lines = ["== Reserved against what ran (the chart's top panel)"]
    for item in view["reservations"]:
        start, end = _at(item["start"]), _at(item["end"])
        what = f"{item['instance_count']} x {item['instance_type']} in {item['region']}"
        lines.append(
            f"  {item['request_id']}: {what}, {start:%m-%d %H:%M} -> {end:%m-%d %H:%M} UTC "
            f"(${Decimal(item['fee_usd']):,.2f}); at most {item['peak_in_service']} in service"
        )
    hours = view["instance_hours"]
    share = f" ({100 * hours['idle'] / hours['reserved']:.0f}%)" if hours["reserved"] else ""
    lines.append(
        f"  instance-hours: {hours['reserved']:.2f} reserved, {hours['ran']:.2f} ran, "
        f"{hours['idle']:.2f} idle{share}"
    )
    lines.extend(f"  {_at(m['at']):%m-%d %H:%M}  {m['kind']:<10} {m['text']}" for m in view["marks"])
    return "\n".join(lines)
