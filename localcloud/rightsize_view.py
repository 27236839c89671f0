"""``run --traffic``'s right-size plan (issue 33): before the reservation request is delivered, the same
request goes to ``POST /plans`` with the traffic profile as its ``load``, and the answer's ``right_size``
(each candidate instance count simulated on the load, its fee, the smallest meeting the target) is
printed; after the run the traffic report compares that prediction with what ran.

The local cloud knows nothing of the application: it speaks to it through the API, as a client would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from localcloud.proxy import plain_route, proxy_event
from localcloud.traffic import TrafficProfile, TrafficResult


def load_of(profile: TrafficProfile, *, max_rejected_percent: float = 1.0) -> dict[str, Any]:
    """The request's ``load`` for ``profile`` (its models and hourly rates) and the target."""
    return {
        "description": profile.description[:1000],
        "models": [
            {"model": item.model, "requests_per_minute": list(item.requests_per_minute)}
            for item in profile.models
        ],
        "max_rejected_percent": max_rejected_percent,
    }


def reservation_body(event: Any, kind: str) -> tuple[dict[str, Any], str | None] | None:
    """(request body, caller ARN) of a ``POST /reservations`` (an API proxy event or a plain request),
    else None."""
    if kind == "request" and isinstance(event, Mapping) and plain_route(event) == ("POST", "/reservations"):
        return dict(event), None
    if kind != "api" or not isinstance(event, Mapping):
        return None
    if str(event.get("httpMethod", "")).upper() != "POST" or event.get("path") != "/reservations":
        return None
    try:
        body = json.loads(str(event.get("body") or ""))
    except ValueError:
        return None
    identity = (event.get("requestContext") or {}).get("identity") or {}
    return (body, identity.get("userArn")) if isinstance(body, dict) else None


def plan_with_load(cloud: Any, body: dict[str, Any], caller: str, profile: TrafficProfile) -> dict[str, Any]:
    """``POST /plans`` with ``body`` and the profile's load; the answer's JSON (``{}`` if not 200)."""
    event = proxy_event(
        method="POST",
        path="/plans",
        body={**body, "load": load_of(profile)},
        routes=cloud.stack.api_routes,
        account_id=cloud.account_id,
        now=cloud.now(),
        identity=caller,
    )
    answer = cloud.api_request(event)
    if answer.get("statusCode") != 200:
        return {}
    parsed = json.loads(answer.get("body") or "{}")
    return parsed if isinstance(parsed, dict) else {}


def ask_plan(cloud: Any, event: Any, kind: str, profile: TrafficProfile, caller: str) -> dict[str, Any]:
    """For a ``POST /reservations`` event: ask ``POST /plans`` with the load, print the right-size block
    and return the answer (with ``_requested``, the count asked for); ``{}`` for any other event."""
    found = reservation_body(event, kind)
    if found is None:
        return {}
    body, who = found
    plan = plan_with_load(cloud, body, who or caller, profile)
    print(format_plan(plan))  # noqa: T201 - run's output: printed before the reservation is delivered
    return {**plan, "_requested": body.get("instance_count")}


def predicted_section(plan: Mapping[str, Any], result: TrafficResult) -> str:
    """The traffic report's closing section: predicted against measured ("" without a right-size plan)."""
    requested = plan.get("_requested")
    if not isinstance(requested, int):
        return ""
    line = compare(plan, result, requested)
    return f"\n\n== Right-size, predicted and measured\n{line}" if line else ""


def format_plan(plan: Mapping[str, Any]) -> str:
    """The right-size block: the sentence and one row per candidate count."""
    sizing = plan.get("right_size")
    if not isinstance(sizing, Mapping):
        return "== Right-size: the plan had no right_size answer (" + str(plan.get("reason", "no plan")) + ")"
    lines = [
        f"== Right-size (POST /plans with the traffic profile as load; target at most "
        f"{sizing['max_rejected_percent']:g}% refused)",
        f"   {sizing['text']}",
        f"   {'count':>5}  {'fee':>12}  {'refused':>8}  {'at peak':>8}  {'worst h':>8}  {'inst-h used':>11}  "
        f"{'idle':>6}  meets",
    ]
    for item in sizing.get("candidates", []):
        fee = item.get("upfront_fee_usd")
        fee_text = f"${float(fee):,.2f}" if fee is not None else "-"
        lines.append(
            f"   {item['instance_count']:>5}  {fee_text:>12}  {item['rejected_percent']:>7.2f}%  "
            f"{item['peak_rejected_percent']:>7.2f}%  {item['worst_hour_rejected_percent']:>7.2f}%  "
            f"{item['instance_hours_used']:>11.2f}  {item['idle_percent']:>5.1f}%  "
            f"{'yes' if item['meets_target'] else 'no'}"
        )
    needed = sizing.get("needed_instances_by_hour") or []
    if needed:
        lines.append(
            f"   instances needed per hour: peak {max(needed)}, mean {sum(needed) / len(needed):.2f}"
        )
    return "\n".join(lines)


def compare(plan: Mapping[str, Any], result: TrafficResult, reserved: int) -> str:
    """Predicted (the candidate of ``reserved`` instances) against what the replay measured."""
    sizing = plan.get("right_size")
    if not isinstance(sizing, Mapping) or result.deployment is None:
        return ""
    predicted = next((c for c in sizing.get("candidates", []) if c["instance_count"] == reserved), None)
    if predicted is None:
        return ""
    sent = sum(count.sent for count in result.hours.values())
    failed = sum(count.failed for count in result.hours.values())
    hours = 0.0
    for before, after in zip(result.samples, result.samples[1:], strict=False):
        hours += before.instances * (after.at - before.at).total_seconds() / 3600
    share = 100.0 * failed / sent if sent else 0.0
    return (
        f"   predicted for {reserved} x: {predicted['rejected_requests']:,} of {predicted['requests']:,} "
        f"refused ({predicted['rejected_percent']:.2f}%), {predicted['instance_hours_used']:.2f} "
        f"instance-hours; ran: {failed:,} of {sent:,} refused ({share:.2f}%), {hours:.2f} instance-hours"
    )
