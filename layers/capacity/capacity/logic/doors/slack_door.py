"""The Slack door (``functions/slack``): the ``/gpu`` slash command and the approval buttons.

Over 400 lines: one door read top to bottom (verify, parse, command, answer); its commands share the parsing.

Every request is verified first (:func:`verify`): the body as Slack sent it (API Gateway's base64 decoded),
``X-Slack-Signature`` = ``v0=`` + HMAC-SHA256(signing secret, ``v0:{timestamp}:{body}``) checked with
``slack_sdk``'s ``SignatureVerifier``, ``X-Slack-Request-Timestamp`` within 5 minutes of now, and the
``(timestamp, signature)`` pair never seen before (Slack's "Verifying requests from Slack"). Anything
else is :class:`~capacity.errors.SlackUnauthorized` (HTTP 401) and nothing runs.

Slash command (``application/x-www-form-urlencoded``: ``command``, ``text``, ``user_id``, ``channel_id``,
``team_id``, ``response_url``...): ``/gpu <subcommand> ...``, see :data:`USAGE`.

- ``reserve``: the words become a request (:func:`request_from_words`) validated by
  :func:`~capacity.request.parse_request` (requester ``slack:<user id>``); then exactly one ``PutEvents``
  (``ReservationRequested`` with the channel and user, so progress lands in a thread there) and the ack.
- ``plan``: a dry run (:func:`capacity.logic.steps.plans.plan_reservation`) with a 2-second search budget so
  the answer still comes within Slack's 3 seconds; regions not searched in time are named (the REST API's
  ``POST /plans`` searches longer).
- ``status <id>``: the reservation's state and last steps. ``cancel <id>``: the requester or an approver
  only. ``extend <id> [<duration>]``: the extension offerings (a dry run), each with an Extend button.
  ``serve <id> until <date> [lead=<hours>]``: keep serving until then (issue 17; ``until none`` clears it).
  ``help`` (or nothing): the usage. Anything else: the usage with what was wrong.

Interactions (``payload`` = JSON ``block_actions``): the Approve/Reject buttons of the approval message,
the Cancel anyway button of a paid reservation, and the Extend buttons of ``/gpu extend`` (after Slack's
confirm dialog: the extension is requested, bought once by the ExtendCapacity workflow).
Only users in env ``SLACK_APPROVER_IDS`` may press them (others get an ephemeral refusal); the decision
goes through :func:`capacity.logic.doors.api.decide_approval` (the approver ``slack:<user id>`` is recorded in
the ledger, the waiting task is answered) and the approval message is replaced by the outcome.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol
from urllib.parse import parse_qs

from slack_sdk.signature import Clock, SignatureVerifier

from capacity import jsonsafe, messages
from capacity.errors import (
    BudgetExceeded,
    CapacityError,
    ConfigurationError,
    ExtensionRefused,
    InvalidRequest,
    NotAwaitingApproval,
    NotPermitted,
    PaidReservation,
    ReservationClosed,
    ReservationNotFound,
    RetryableAwsError,
    ScheduleExists,
    ScheduleNotFound,
    SlackUnauthorized,
    SlackUnavailable,
    TeamLimitExceeded,
)
from capacity.events import ReservationRequestedDetail, SlackOrigin
from capacity.logic.doors import api, extension_request, schedules, serve_until
from capacity.logic.governance import costs
from capacity.logic.governance.checks import require_in_scope
from capacity.logic.governance.policy import Viewer, charged_to, require_seen, viewer
from capacity.ports import Ports
from capacity.request import parse_request, require_not_a_successor
from capacity.timeutil import iso_z

SIGNATURE_WINDOW = timedelta(minutes=5)
"""Slack's replay window: a timestamp further than this from now is refused."""
PLAN_TIME_LIMIT_SECONDS = 2.0
"""Search budget of ``/gpu plan``: the answer must reach Slack within 3 seconds."""
DEFAULT_FLEX = timedelta(days=1)
"""Without ``until=``, the window is the duration plus one day (the plan may start up to a day late)."""

USAGE = """*Usage:* `/gpu <command>`
• `/gpu reserve <count> <instance type> <duration> [from <date>] [until <date>] models=<a,b> max=<USD> \
[regions=<r1,r2>] [approval=<USD>] [accelerators=<n>] [memory=<MB>] [cpus=<n>] [copies=<min:initial:max>] \
[timeout=<hours>] [id=<request id>] [team=<team>] [search_until=<date>] [search_every=<minutes, or 2h>] \
[serve_until=<date>] [lead=<hours, or 2d>]`
    e.g. `/gpu reserve 2 ml.p5.48xlarge 3d from 2026-12-10 regions=us-east-1,us-west-2 \
models=llama-eu,llama-us max=30000`
• `/gpu plan <same as reserve>`: which option (on demand now or a training plan), why, what it costs against \
the alternatives, the break-even utilisation of reserving, where capacity is (buys nothing)
• `/gpu status [<request id>]`: the reservation's state and history (without an id: the newest ones)
• `/gpu cancel <request id>`: release it now (the requester or an approver); a paid fee is not refunded, \
so a paid reservation asks first (a Cancel anyway button)
• `/gpu extend <request id> [<duration>]`: the extension offerings of a reservation (default `1d`: fee, \
new end, on-demand equivalent), each with an Extend button that asks to confirm (the requester, its team or \
an approver)
• `/gpu serve <request id> until <date> [lead=<hours>]`: keep its models served until then: ahead of each \
end it is extended in place, else the next reservation is bought and the clients moved onto it \
(`until none` stops it; the requester, its team or an approver)
• `/gpu costs [team=<team>] [month=<yyyy-mm>] [by=team|instance_type|region]`: paid, used and on-demand \
equivalent per team and month
• `/gpu schedule <name> <cron(...) or rate(...)> [tz=UTC] [after=<hours>] [window=<hours>] <reserve words \
without from/until/id>`: a recurring reservation (approvers), e.g. `/gpu schedule weekly-eval \
cron(30 11 ? * MON *) tz=UTC 2 ml.p5.48xlarge 1d models=llama-eu max=5000`; \
`/gpu schedule list`, `/gpu schedule delete <name>`
• `/gpu help`: this help
With `search_until=<date>`, when nothing fits now the request keeps looking until that date (UTC, at \
most the window's latest start) instead of failing: it looks again every `search_every` (default 15 \
minutes), the last look at that date; it buys as soon as something fits, says so in the thread if nothing \
does by then, and `/gpu cancel` stops it. `/gpu plan` says when it would look next.
With `serve_until=<date>` the models are kept served until then (as `/gpu serve` sets later): `lead` \
(default 48h) before the reservation ends it is extended in place, else the next reservation is bought \
within `max` for the whole chain and the clients moved onto it, else the thread is told then.
Durations are whole days (`3d`, or `72h`); dates are UTC (`2026-12-10` or `2026-12-10T11:30Z`); models are \
existing SageMaker models (`models=name`, one inference component each); `max` is the most to pay upfront \
in USD. Without `from` the window starts now and on-demand capacity is tried first; with a later `from` a \
training plan is reserved. `ml.g6.*` has no training plan: it runs on demand only, so give no `from` \
(a later `from`, e.g. `/gpu reserve 4 ml.g6.12xlarge 1d from 2026-12-10 ...`, is refused and the answer \
lists the types training plans reserve); when no region has on-demand capacity the request ends FAILED."""

_OPTIONS = {
    "models",
    "max",
    "regions",
    "approval",
    "accelerators",
    "memory",
    "cpus",
    "copies",
    "timeout",
    "id",
    "team",
    "from",
    "until",
    "search_until",
    "search_every",
    "serve_until",
    "lead",
}
_FIELD_NAMES = {
    "requester": "your Slack user",
    "instance_count": "count",
    "instance_type": "instance type",
    "duration_hours": "duration",
    "earliest_start": "from",
    "latest_end": "until",
    "max_upfront_fee_usd": "max",
    "approval_above_usd": "approval",
    "approval_timeout_hours": "timeout",
    "request_id": "id",
    "regions": "regions",
    "models": "models",
    "timezone": "tz",
    "start_after_hours": "after",
    "window_hours": "window",
    "schedule_expression": "expression",
    "search_every_minutes": "search_every",
    "serve_until": "serve_until",
    "rollover_lead_hours": "lead",
}
_DURATION = re.compile(r"^(\d{1,4})([dh])$")
_MINUTES = re.compile(r"^(\d{1,5})([mh]?)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ReplayGuard(Protocol):
    """Remembers verified signatures (:class:`~capacity.adapters.dynamodb.SignatureLog`)."""

    def first_use(self, key: str, *, expires_at: datetime) -> bool: ...


@dataclass(frozen=True)
class SlackAnswer:
    """What the door answers: HTTP ``status`` and a JSON ``body`` (Slack shows a command's body)."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)

    def proxy(self) -> dict[str, Any]:
        """The API Gateway proxy response."""
        return {
            "statusCode": self.status,
            "headers": {"Content-Type": "application/json"},
            "body": json.dumps(self.body),
            "isBase64Encoded": False,
        }


class UsageError(Exception):
    """A ``/gpu`` command that cannot be understood: the message says what is wrong."""


# ---------------------------------------------------------------------------------------- verification


def raw_body(event: Mapping[str, Any]) -> str:
    """The body exactly as Slack sent it (API Gateway base64-encodes it when ``isBase64Encoded``).

    Raises:
        SlackUnauthorized: the body is marked base64 but is not base64 UTF-8 (it cannot be verified).
    """
    body = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return str(body)
    try:
        return base64.b64decode(str(body), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise SlackUnauthorized("the body is marked base64-encoded but is not base64 UTF-8") from exc


def header(event: Mapping[str, Any], name: str) -> str | None:
    """A request header, case-insensitively (API Gateway keeps the client's spelling)."""
    for key, value in (event.get("headers") or {}).items():
        if str(key).lower() == name.lower():
            return None if value is None else str(value)
    return None


class _FixedClock(Clock):
    """``slack_sdk``'s clock answering the door's own clock (the local cloud's is virtual)."""

    def __init__(self, now: datetime) -> None:
        self._now = now.timestamp()

    def now(self) -> float:
        return self._now


def verify(event: Mapping[str, Any], *, signing_secret: str, now: datetime, guard: ReplayGuard) -> str:
    """Verify a Slack request; returns its body (decoded).

    Raises:
        SlackUnauthorized: no or malformed timestamp, a timestamp more than 5 minutes from ``now``, a
            signature that does not match, or a (timestamp, signature) already seen (a replay).
    """
    body = raw_body(event)
    timestamp = header(event, "X-Slack-Request-Timestamp")
    signature = header(event, "X-Slack-Signature")
    if not timestamp or not signature:
        raise SlackUnauthorized("missing X-Slack-Request-Timestamp or X-Slack-Signature")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise SlackUnauthorized("X-Slack-Request-Timestamp is not epoch seconds")
    sent = datetime.fromtimestamp(int(timestamp), UTC)
    if abs(now - sent) > SIGNATURE_WINDOW:
        raise SlackUnauthorized("the request timestamp is more than 5 minutes from now (stale or replayed)")
    verifier = SignatureVerifier(signing_secret, clock=_FixedClock(now))
    if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
        raise SlackUnauthorized("the request signature does not match")
    # Recorded only once the signature is valid, so forged requests cannot fill the table.
    if not guard.first_use(
        f"slack-signature#{timestamp}#{signature}", expires_at=sent + 2 * SIGNATURE_WINDOW
    ):
        raise SlackUnauthorized("this signed request was already received (replay)")
    return body


# ------------------------------------------------------------------------------------------ the command


def split_words(text: str) -> list[str]:
    """The command text as words (Slack clients may send non-breaking spaces)."""
    return text.replace("\u00a0", " ").split()


def _duration_hours(word: str) -> int:
    match = _DURATION.match(word.lower())
    if not match:
        raise UsageError(f"`{word}` is not a duration: use whole days like `3d` (or hours like `72h`)")
    value, unit = int(match.group(1)), match.group(2)
    return value * 24 if unit == "d" else value


def _lead_hours(value: str) -> int:
    """``lead=36``, ``36h`` or ``2d`` -> hours."""
    try:
        return int(value) if value.isdigit() else _duration_hours(value)
    except UsageError:
        raise UsageError(f"`lead={value}` must be hours like `36h` (or `36`) or days like `2d`") from None


def _instant(word: str, name: str) -> datetime:
    """``YYYY-MM-DD`` (00:00 UTC) or an ISO-8601 UTC time (``name``: the word or ``option=`` it came with)."""
    text = word.upper()
    if _DATE.match(text):
        text += "T00:00:00Z"
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise UsageError(
            f"`{name}{'' if name.endswith('=') else ' '}{word}` is not a date: use `2026-12-10` or "
            "`2026-12-10T11:30Z` (UTC)"
        ) from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _int(value: str, name: str) -> int:
    if not value.isdigit():
        raise UsageError(f"`{name}={value}` must be a whole number")
    return int(value)


def _usd(value: str, name: str) -> str:
    cleaned = value.replace("$", "").replace(",", "")
    try:
        amount = Decimal(cleaned)
    except InvalidOperation as exc:
        raise UsageError(f"`{name}={value}` must be an amount in US dollars, like `30000`") from exc
    if not amount.is_finite():
        raise UsageError(f"`{name}={value}` must be an amount in US dollars, like `30000`")
    return cleaned


def _copies(value: str) -> dict[str, int]:
    parts = value.split(":")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        raise UsageError(f"`copies={value}` must be `min:initial:max`, like `0:1:4`")
    low, initial, high = (int(part) for part in parts)
    return {"min": low, "initial": initial, "max": high}


def request_from_words(
    words: Sequence[str], *, user_id: str, now: datetime, default_region: str
) -> dict[str, Any]:
    """The request body (as ``POST /reservations`` takes it) of ``reserve``/``plan`` words.

    ``<count> <instance type> <duration> [from <date>] [until <date>] key=value...`` (see :data:`USAGE`);
    without ``from`` the window starts now; without ``until`` it lasts the duration plus one day.

    Raises:
        UsageError: a word or option that cannot be read (the message names it and the fix).
    """
    if len(words) < 3:
        raise UsageError("give at least `<count> <instance type> <duration>`, e.g. `2 ml.p5.48xlarge 3d`")
    count_word, instance_type, duration_word, *rest = words
    if not count_word.isdigit():
        raise UsageError(f"`{count_word}` is not an instance count: use 1, 2, 4, 8, 16, 32 or 64")
    options = _options(rest)
    for key, example in (("models", "models=llama-eu,llama-us"), ("max", "max=30000")):
        if key not in options:
            raise UsageError(f"`{key}=` is required, e.g. `{example}`")
    duration = _duration_hours(duration_word)
    start = _instant(options["from"], "from") if "from" in options else now.replace(second=0, microsecond=0)
    end = (
        _instant(options["until"], "until")
        if "until" in options
        else start + timedelta(hours=duration) + DEFAULT_FLEX
    )
    model = _model_options(options)
    body: dict[str, Any] = {
        "requester": f"slack:{user_id}",
        "instance_type": instance_type,
        "instance_count": int(count_word),
        "duration_hours": duration,
        "earliest_start": iso_z(start),
        "latest_end": iso_z(end),
        "regions": [r for r in options.get("regions", default_region).split(",") if r],
        "max_upfront_fee_usd": _usd(options["max"], "max"),
        "models": [
            {"name": name, "model_name": name, **model} for name in options["models"].split(",") if name
        ],
    }
    return body | _optional_fields(options)


def _optional_fields(options: Mapping[str, str]) -> dict[str, Any]:
    """The request fields of the optional ``reserve`` words that map one to one (:data:`USAGE`).

    Raises:
        UsageError: a value that cannot be read.
    """
    extra: dict[str, Any] = {}
    if "approval" in options:
        extra["approval_above_usd"] = _usd(options["approval"], "approval")
    if "timeout" in options:
        extra["approval_timeout_hours"] = _int(options["timeout"].rstrip("h"), "timeout")
    if "id" in options:
        extra["request_id"] = options["id"]
    if "team" in options:
        extra["team"] = options["team"]
    if "search_until" in options:
        extra["search_until"] = iso_z(_instant(options["search_until"], "search_until="))
    if "search_every" in options:
        extra["search_every_minutes"] = _minutes(options["search_every"], "search_every")
    if "serve_until" in options:
        extra["serve_until"] = iso_z(_instant(options["serve_until"], "serve_until="))
    if "lead" in options:
        if "serve_until" not in options:
            raise UsageError("`lead=` is when to act for `serve_until=`: give `serve_until=<date>` too")
        extra["rollover_lead_hours"] = _lead_hours(options["lead"])
    return extra


def _minutes(value: str, name: str) -> int:
    """``90``, ``90m`` -> 90; ``2h`` -> 120 (minutes)."""
    match = _MINUTES.match(value.lower())
    if not match:
        raise UsageError(f"`{name}={value}` must be minutes, like `90` or `90m`, or hours, like `2h`")
    return int(match.group(1)) * (60 if match.group(2) == "h" else 1)


def _options(rest: Sequence[str]) -> dict[str, str]:
    """``from <date>``, ``until <date>`` and ``key=value`` words.

    Raises:
        UsageError: an unknown word or option, or one given twice.
    """
    options: dict[str, str] = {}
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.lower() in ("from", "until") and index + 1 < len(rest):
            key, value, index = word.lower(), rest[index + 1], index + 2
        else:
            key, sep, value = word.partition("=")
            key, index = key.lower(), index + 1
            if not sep or key not in _OPTIONS or key in ("from", "until") or not value:
                raise UsageError(
                    f"`{word}` is not understood: options are `from <date>`, `until <date>` and "
                    + ", ".join(f"`{name}=`" for name in sorted(_OPTIONS - {"from", "until"}))
                )
        if key in options:
            raise UsageError(f"`{key}` is given twice: give it once")
        options[key] = value
    return options


def _model_options(options: Mapping[str, str]) -> dict[str, Any]:
    """What every model needs per copy (``accelerators``, ``memory``, ``cpus``) and its ``copies``."""
    model: dict[str, Any] = {}
    if "accelerators" in options:
        model["accelerators"] = _int(options["accelerators"], "accelerators")
    if "memory" in options:
        model["memory_mb"] = _int(options["memory"], "memory")
    if "cpus" in options:
        try:
            model["cpu_cores"] = float(options["cpus"])
        except ValueError as exc:
            raise UsageError(f"`cpus={options['cpus']}` must be a number of CPU cores") from exc
    if "copies" in options:
        model["copies"] = _copies(options["copies"])
    return model


def _invalid_text(exc: InvalidRequest) -> str:
    """The validation errors, named as the command's words."""
    lines = []
    for error in exc.errors:
        head, _, tail = error.field.partition(".")
        name = _FIELD_NAMES.get(head, head)
        where = f"{name}.{tail}" if tail and head == "models" else name
        lines.append(f"• `{where}`: {messages.escape(error.message)}")
    return "The request is not valid:\n" + "\n".join(lines)


def _ephemeral(text: str) -> SlackAnswer:
    return SlackAnswer(200, {"response_type": "ephemeral", "text": text})


def _usage(problem: str | None = None) -> SlackAnswer:
    """The usage, after ``problem`` (which may echo the user's words: escaped)."""
    return _ephemeral(f"{messages.escape(problem)}\n\n{USAGE}" if problem else USAGE)


@dataclass(frozen=True)
class Door:
    """What the door needs besides the ports.

    Attributes:
        signing_secret: returns the Slack signing secret (cached by the caller).
        guard: remembers verified signatures (replays).
        approvers: Slack user ids allowed to approve, reject and cancel any reservation.
        planner: ``(body, ports, time_limit_seconds, requester) -> plan`` for ``/gpu plan`` (None: not
            available); ``requester`` is ``slack:<user id>``, whose team judges the plan.
        respond: posts to an interaction's ``response_url`` (None: ``Ports.slack_respond``).
    """

    signing_secret: Callable[[], str]
    guard: ReplayGuard
    approvers: frozenset[str]
    planner: Callable[[Mapping[str, Any], Ports, float, str], Mapping[str, Any]] | None = None
    respond: Callable[..., bool] | None = None


def _responder(door: Door, ports: Ports) -> Callable[..., bool]:
    return door.respond or ports.slack_respond


def handle(event: Mapping[str, Any], ports: Ports, door: Door) -> SlackAnswer:
    """Verify and answer one API Gateway proxy event from Slack (a slash command or an interaction).

    Returns:
        401 ``{"message"}`` when verification fails; 200 with the command's answer otherwise (usage
        problems and refusals are 200 ephemeral messages, as Slack expects).
    """
    try:
        body = verify(event, signing_secret=door.signing_secret(), now=ports.clock(), guard=door.guard)
    except SlackUnauthorized as exc:
        return SlackAnswer(401, {"message": f"unauthorized: {exc}"})
    form = {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}
    if "payload" in form:
        return interaction(form["payload"], ports, door)
    return command(form, ports, door)


def command(form: Mapping[str, str], ports: Ports, door: Door) -> SlackAnswer:
    """Answer a verified ``/gpu`` slash command (form fields as Slack sends them)."""
    user_id = form.get("user_id", "")
    channel_id = form.get("channel_id", "")
    words = split_words(form.get("text", ""))
    if not user_id:
        return _usage("The command came without a user id.")
    subcommand, args = (words[0].lower(), words[1:]) if words else ("help", [])
    origin = (
        SlackOrigin(channel_id=channel_id, user_id=user_id, team_id=form.get("team_id") or None)
        if channel_id
        else None
    )
    handlers: dict[str, Callable[[], SlackAnswer]] = {
        "help": _usage,
        "reserve": lambda: _reserve(args, ports, user_id=user_id, origin=origin),
        "plan": lambda: _plan(args, ports, door, user_id=user_id),
        "status": lambda: _status(args, ports, door, user_id=user_id),
        "cancel": lambda: _cancel(args, ports, door, user_id=user_id),
        "schedule": lambda: _schedule(args, ports, door, user_id=user_id),
        "costs": lambda: _costs(args, ports, door, user_id=user_id),
        "extend": lambda: _extend(args, ports, door, user_id=user_id),
        "serve": lambda: _serve(args, ports, door, user_id=user_id),
    }
    run = handlers.get(subcommand) or (lambda: _usage(f"`{subcommand}` is not a /gpu command."))
    try:
        return run()
    except (UsageError, CapacityError) as exc:
        return _failure(exc)


def _failure(exc: Exception) -> SlackAnswer:
    """What the user sees of a command that could not be carried out (nothing was done, or see the text)."""
    if isinstance(exc, UsageError):
        return _usage(str(exc))
    if isinstance(exc, InvalidRequest):
        return _ephemeral(_invalid_text(exc))
    if isinstance(
        exc,
        (
            ReservationNotFound,
            ReservationClosed,
            ScheduleExists,
            ScheduleNotFound,
            NotPermitted,
            ExtensionRefused,
            BudgetExceeded,
            TeamLimitExceeded,
        ),
    ):
        return _ephemeral(messages.escape(exc))
    if isinstance(exc, SlackUnavailable):  # a user group of a team could not be read: nothing was done
        return _ephemeral(
            f"Slack is busy ({messages.escape(exc)}): nothing was done; send the command again."
        )
    if isinstance(exc, RetryableAwsError):  # nothing is lost: the same command again picks up
        return _ephemeral(f"AWS is busy ({messages.escape(exc)}): send the same command again.")
    if isinstance(exc, ConfigurationError):  # e.g. the Slack app lacks usergroups:read: an admin must fix it
        return _ephemeral(f"This deployment is misconfigured ({messages.escape(exc)}); nothing was done.")
    raise exc


def _reserve(args: Sequence[str], ports: Ports, *, user_id: str, origin: SlackOrigin | None) -> SlackAnswer:
    body = request_from_words(args, user_id=user_id, now=ports.clock(), default_region=ports.settings.region)
    body = charged_to(body, f"slack:{user_id}", ports)  # the Slack user requests; its team pays
    request = parse_request(body, now=ports.clock())
    require_not_a_successor(request)  # id=<root>-r<n> would take a chain's next id first
    require_in_scope(request, ports)
    ports.events.put(
        "ReservationRequested",
        ReservationRequestedDetail(request=request.model_dump(mode="json"), slack=origin),
    )
    return _ephemeral(
        f"Reservation `{request.id}` requested: {request.instance_count} x {request.instance_type} for "
        f"{request.duration_hours} h, budget ${request.max_upfront_fee_usd:,f}. Progress follows in a "
        f"thread in this channel; `/gpu status {request.id}` shows where it is."
    )


def _plan(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    if door.planner is None:
        return _ephemeral("Planning is not available here; use the REST API's `POST /plans`.")
    body = request_from_words(args, user_id=user_id, now=ports.clock(), default_region=ports.settings.region)
    result = door.planner({**body, "dry_run": True}, ports, PLAN_TIME_LIMIT_SECONDS, f"slack:{user_id}")
    return _ephemeral(plan_text(result))


def plan_text(result: Mapping[str, Any]) -> str:
    """A dry run's answer (:class:`~capacity.logic.steps.plans.PlanResult` as JSON): the decision and why,
    what the team has left this month, the recommended option with its cost against the alternatives and the
    break-even utilisation (``advice``), how on-demand availability was judged, the reservation it would buy,
    the best offerings, and the regions not searched within Slack's 3 seconds."""
    lines = [
        f"*Plan for {result.get('request_id')}: {result.get('decision')}*",
        str(result.get("reason") or ""),
    ]
    team = result.get("team")
    if isinstance(team, Mapping) and team.get("left"):  # what the Slack user's team may still commit
        left = str(team["left"])
        lines.append(f"{left[:1].upper()}{left[1:]}.")
    advice = result.get("advice")
    option = None
    if isinstance(advice, Mapping):
        option = advice.get("option")
        lines.append(str(advice.get("text") or ""))
        if advice.get("on_demand_check"):
            lines.append(f"On-demand capacity: {advice['on_demand_check']}.")
    pick = result.get("recommendation")
    if isinstance(pick, Mapping):
        label = "Pick" if option in (None, "training-plan", "capacity-block") else "If it reserves"
        lines.append(
            f"{label}: ${pick.get('upfront_fee_usd')} in {pick.get('region')} "
            f"({pick.get('availability_zone')}), {pick.get('start_time')} to {pick.get('end_time')}; "
            "on-demand equivalent "
            f"${pick.get('on_demand_equivalent_usd')}, saving {pick.get('saving_percent')}%, break-even "
            f"utilisation {pick.get('break_even_utilisation')}."
        )
    offerings = [o for o in result.get("offerings") or [] if isinstance(o, Mapping)]
    for rank, offering in enumerate(offerings[:5], start=1):
        lines.append(
            f"{rank}. ${offering.get('upfront_fee_usd')} {offering.get('region')} "
            f"{offering.get('start_time')} to {offering.get('end_time')} "
            f"(saving {offering.get('saving_percent')}%)"
        )
    late = result.get("regions_not_searched") or {}
    if late:
        lines.append(
            f"Not searched within Slack's 3 seconds: {', '.join(map(str, late))}; "
            "`POST /plans` searches longer."
        )
    errors = result.get("quota_errors") or {}
    if isinstance(errors, Mapping) and errors:
        lines.append("Quota errors: " + "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())))
    lines.append("Nothing was bought.")
    return "\n".join(messages.escape(line) for line in lines if line)


def _one_id(args: Sequence[str], what: str) -> str:
    if len(args) != 1:
        raise UsageError(f"`{what}` takes one request id, e.g. `/gpu {what} req-1a2b3c4d5e6f7a8b`")
    return args[0]


STATUS_LIST_LIMIT = 10


def _viewer(user_id: str, ports: Ports, door: Door) -> Viewer:
    """Who reads at Slack (``slack:<user id>``) and what it may see: the one read rule of every door
    (:func:`capacity.logic.governance.policy.viewer`); the deployment's Slack approvers, who may approve and
    cancel any reservation, see all."""
    return viewer(f"slack:{user_id}", ports, approves_all=user_id in door.approvers)


def _status(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    if not args:  # the newest reservations, one line each
        listed = api.list_reservations(ports, limit=STATUS_LIST_LIMIT, viewer=_viewer(user_id, ports, door))[
            "reservations"
        ]
        if not listed:
            return _ephemeral("No reservations yet. `/gpu help` shows how to make one.")
        lines = [
            f"• `{r['request_id']}` *{r.get('state') or 'SUBMITTED'}*: {r.get('instance_count')} x "
            f"{r.get('instance_type')} from {r.get('earliest_start')}, "
            f"by {messages.mention(str(r.get('requester')))}"
            for r in listed
        ]
        return _ephemeral(f"*The {len(lines)} newest reservations*\n" + "\n".join(lines))
    request_id = _one_id(args, "status")
    found = api.get_reservation(request_id, ports, viewer=_viewer(user_id, ports, door))
    history = found.get("history") or []
    steps = "\n".join(
        f"• {entry.get('at')}  {entry.get('state')}"
        + (
            f" ({messages.escape(entry['detail']['reason'])})"
            if isinstance(entry.get("detail"), dict) and entry["detail"].get("reason")
            else ""
        )
        for entry in history[-8:]
    )
    purchase = found.get("purchase")
    bought = (
        f"\n{_bought_label(purchase)} in {purchase.get('region')}, "
        f"${purchase.get('upfront_fee_usd')} upfront, "
        f"{purchase.get('start_time')} to {purchase.get('end_time')}."
        if isinstance(purchase, Mapping)
        else ""
    )
    return _ephemeral(f"*{request_id}* is *{found.get('state') or 'SUBMITTED'}*.{bought}\n{steps}".rstrip())


def _bought_label(purchase: Mapping[str, Any]) -> str:
    """What ``GET``'s ``purchase`` names, in its platform's words."""
    if purchase.get("capacity_reservation_id"):
        return f"Capacity block `{purchase['capacity_reservation_id']}`"
    if purchase.get("training_plan_name"):
        return f"Training plan `{purchase['training_plan_name']}`"
    return f"Capacity {purchase.get('market') or 'on-demand'}"


def _cancel(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    request_id = _one_id(args, "cancel")
    refused = _may_not_act(request_id, user_id, ports, door)
    if refused is not None:
        return _ephemeral(refused)
    try:
        result = api.cancel_reservation(request_id, ports, actor=f"slack:{user_id}")
    except PaidReservation as paid:
        return SlackAnswer(200, _confirm_cancel(request_id, paid))
    return _ephemeral(
        f"{request_id} is {result['status']}: whatever it holds is being released (the cost summary follows "
        "in its thread)."
    )


def _may_not_act(
    request_id: str, user_id: str, ports: Ports, door: Door, *, doing: str = "cancel"
) -> str | None:
    """Why ``user_id`` may not cancel (or extend: ``doing``) ``request_id`` (None: it may): the deployment's
    Slack approvers may, and so may the requester, the members of its team and its approvers (the API's
    rule, :func:`capacity.logic.doors.api.require_may_act`).

    Raises:
        ReservationNotFound: unknown, or ``user_id`` may not see it (answered as if it did not exist).
    """
    scope = _viewer(user_id, ports, door)
    if user_id in door.approvers:
        require_seen(ports, request_id, scope)  # they see all: only an unknown id is refused
        return None
    try:
        api.require_may_act(request_id, scope, ports, doing=doing)
    except NotPermitted as refused:
        return messages.escape(str(refused)) + "."
    return None


def _extend(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    """``/gpu extend <id> [<duration>]`` (default ``1d``): the extension offerings with an Extend button each
    (:func:`capacity.messages.extension_offers`); a dry run, nothing is bought here."""
    if not args or len(args) > 2:
        raise UsageError("give the reservation and how long: `/gpu extend <request id> 1d`")
    request_id = args[0]
    hours = _duration_hours(args[1]) if len(args) == 2 else 24
    refused = _may_not_act(request_id, user_id, ports, door, doing="extend")
    if refused is not None:
        return _ephemeral(refused)
    dry_run = extension_request.request_extension(
        request_id, {"duration_hours": hours}, ports, requester=f"slack:{user_id}"
    )
    offers = messages.extension_offers(request_id, hours, dry_run)
    return SlackAnswer(
        200, {"response_type": "ephemeral", "text": offers.text, "blocks": list(offers.blocks)}
    )


def _serve(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    """``/gpu serve <id> until <date> [lead=<hours>]``: set or move ``serve_until`` (the API's
    ``PATCH /reservations/{id}``, :func:`capacity.logic.doors.serve_until.set_serve_until`), the same callers
    as ``extend``; ``until none`` clears it."""
    if len(args) not in (3, 4) or args[1].lower() != "until":
        raise UsageError("give the reservation and until when: `/gpu serve <request id> until 2026-12-14`")
    request_id = args[0]
    body: dict[str, Any] = {
        "serve_until": None if args[2].lower() == "none" else iso_z(_instant(args[2], "until"))
    }
    if len(args) == 4:
        key, sep, value = args[3].partition("=")
        if key.lower() != "lead" or not sep:
            raise UsageError(f"`{args[3]}`: the only option is `lead=<hours>` (or `lead=2d`)")
        body["rollover_lead_hours"] = _lead_hours(value)
    refused = _may_not_act(request_id, user_id, ports, door, doing="keep serving")
    if refused is not None:
        return _ephemeral(refused)
    result = serve_until.set_serve_until(request_id, body, ports, actor=f"slack:{user_id}")
    until = result["serve_until"]
    if until is None:
        return _ephemeral(f"{request_id} is kept serving no longer than the reservations bought so far.")
    check = result["next_check"]
    when = f"at {check} ({result['rollover_lead_hours']} h before its end)" if check else "once it is bought"
    return _ephemeral(
        f"{request_id} is kept serving until {until}: {when} it is extended in place, or the next "
        "reservation is bought and the clients moved onto it (the thread hears each step)."
    )


def _extend_confirmed(value: str, user_id: str, response_url: str, ports: Ports, door: Door) -> None:
    """An Extend button pressed (after its confirm dialog): the same rule as ``/gpu extend``, then the
    purchase is requested with the offering the button names
    (:func:`capacity.logic.doors.extension_request.request_extension` puts ``ExtensionRequested``, or asks an
    approver above the threshold; the workflow buys it once however often the button is pressed). A stale
    offering, the budget or the team's month refuse it with the reason; nothing is bought then."""
    respond = _responder(door, ports)
    try:
        chosen = json.loads(value)
    except ValueError:
        chosen = None
    if not isinstance(chosen, dict) or not all(
        isinstance(chosen.get(key), kind)
        for key, kind in (("request_id", str), ("offering_id", str), ("duration_hours", int))
    ):
        respond(response_url, "This Extend button carries no offering; nothing was bought.", ephemeral=True)
        return
    request_id = str(chosen["request_id"])
    try:
        refused = _may_not_act(request_id, user_id, ports, door, doing="extend") if user_id else "no user"
        if refused is not None:
            respond(response_url, f"{refused} Nothing was bought.", ephemeral=True)
            return
        result = extension_request.request_extension(
            request_id,
            {"duration_hours": chosen["duration_hours"], "offering_id": chosen["offering_id"]},
            ports,
            requester=f"slack:{user_id}",
        )
    except CapacityError as exc:
        respond(response_url, messages.escape(f"{request_id}: {exc}"), ephemeral=True)
        return
    if result["status"] == "APPROVAL_REQUIRED":  # the thread has the approval request with its buttons
        respond(
            response_url,
            messages.escape(
                f"{request_id}: the extension costs more than the approval threshold; an approver of the "
                "team was asked in the reservation's thread. Nothing is bought until one approves."
            ),
            ephemeral=True,
            replace_original=True,
        )
        return
    requested = messages.extension_requested(request_id, result["offering"], by=f"slack:{user_id}")
    respond(response_url, requested.text, ephemeral=True, replace_original=True)


def _costs(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    """``/gpu costs [team=..] [month=yyyy-mm] [by=team|instance_type|region]``:
    :func:`capacity.logic.governance.costs.cost_report` as a fixed-width table (paid, used of reserved
    instance-hours, on-demand equivalent, saving)."""
    options: dict[str, str] = {}
    for word in args:
        key, sep, value = word.partition("=")
        if not sep or key not in ("team", "month", "by") or not value:
            raise UsageError(
                f"`{word}` is not understood: use `team=<team>`, `month=<yyyy-mm>`, `by=<team|...>`"
            )
        options[key] = value
    group_by = options.get("by", "team")
    if group_by not in ("team", "instance_type", "region"):
        raise UsageError(f"`by={group_by}`: group by team, instance_type or region")
    if "month" in options and not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", options["month"]):
        raise UsageError(f"`month={options['month']}` is not a month like 2026-12")
    report = costs.cost_report(
        ports,
        team=options.get("team"),
        month=options.get("month"),
        group_by=group_by,  # type: ignore[arg-type]
        viewer=_viewer(user_id, ports, door),
    )
    header = (
        f"{group_by:<16}{'month':<9}{'paid':>12}{'used/reserved inst-h':>24}{'on demand':>12}{'saving':>12}"
    )
    rows = [
        f"{messages.escape(row['group'])[:15]:<16}{row['month']:<9}{_money(row['paid_usd']):>12}"
        f"{row['used_instance_hours'] + '/' + row['reserved_instance_hours']:>24}"
        f"{_money(row['on_demand_equivalent_used_usd']):>12}{_money(row['saving_usd']):>12}"
        for row in [*report["rows"], report["totals"]]
    ]
    return _ephemeral(
        "*Costs, from what ran* (USD; saving negative: a loss)\n```\n" + "\n".join([header, *rows]) + "\n```"
    )


def _money(value: str) -> str:
    return f"${Decimal(value):,.2f}"


CANCEL_CONFIRMED = "cancel_paid_reservation"
"""``action_id`` of the Cancel anyway button of a paid reservation (value = the request id)."""


def _confirm_cancel(request_id: str, paid: PaidReservation) -> dict[str, Any]:
    """The ephemeral question before cancelling a paid reservation: every fee at stake (the upfront fee, paid
    extensions, extensions in flight, and those of the successors the cancel stops: the API's words,
    :func:`capacity.logic.doors.api.stake_text`), and a Cancel anyway button (Block Kit ``actions`` with a
    ``confirm`` dialog naming the total)."""
    at_stake = paid.details.get("at_stake")
    if not isinstance(at_stake, list) or not at_stake:
        at_stake = [{"request_id": request_id, **paid.details}]
    fee = str(paid.details.get("not_refunded_usd") or paid.details.get("upfront_fee_usd") or "0")
    text = (
        f"*{messages.escape(request_id)}*: {messages.escape(api.stake_text(at_stake))}. "
        "None of it is refunded. Cancel anyway?"
    )
    button = {
        "type": "button",
        "action_id": CANCEL_CONFIRMED,
        "style": "danger",
        "text": {"type": "plain_text", "text": "Cancel anyway"},
        "value": request_id,
        "confirm": {
            "title": {"type": "plain_text", "text": "Cancel a paid reservation?"},
            "text": {"type": "mrkdwn", "text": f"${Decimal(fee):,.2f} is not refunded."},
            "confirm": {"type": "plain_text", "text": "Cancel it"},
            "deny": {"type": "plain_text", "text": "Keep it"},
        },
    }
    blocks = [
        {"type": "section", "text": {"type": "mrkdwn", "text": text}},
        {"type": "actions", "elements": [button]},
    ]
    return {"response_type": "ephemeral", "text": text, "blocks": blocks}


_SCHEDULE_OPTIONS = {"tz": "timezone", "after": "start_after_hours", "window": "window_hours"}


def schedule_from_words(
    words: Sequence[str], *, user_id: str, now: datetime, default_region: str
) -> dict[str, Any]:
    """The ``POST /schedules`` body of ``/gpu schedule <name> <expression> [tz=] [after=] [window=] <reserve
    words>``; the expression is ``cron(...)`` (six fields, spaces allowed) or ``rate(...)``.

    Raises:
        UsageError: no name or expression, a time option in the reserve words, or an unreadable option.
    """
    if len(words) < 2:
        raise UsageError("give a name and a `cron(...)` or `rate(...)` expression, then the reserve words")
    name, first, *rest = words
    if not first.lower().startswith(("cron(", "rate(")):
        raise UsageError(
            f"`{first}` is not a schedule expression: use `cron(30 11 ? * MON *)` or `rate(7 days)`"
        )
    parts = [first]
    while not parts[-1].endswith(")") and rest:
        parts.append(rest.pop(0))
    if not parts[-1].endswith(")"):
        raise UsageError("the schedule expression has no closing `)`")
    body: dict[str, Any] = {"name": name, "schedule_expression": " ".join(parts), "timezone": "UTC"}
    words_left: list[str] = []
    for word in rest:
        key, sep, value = word.partition("=")
        field_name = _SCHEDULE_OPTIONS.get(key.lower()) if sep else None
        if field_name is None:
            words_left.append(word)
        elif field_name == "timezone":
            body["timezone"] = value
        else:
            body[field_name] = value and (_duration_hours(value) if not value.isdigit() else int(value))
    for word in words_left:
        if word.lower() in ("from", "until") or word.lower().startswith("id="):
            raise UsageError(
                f"`{word}`: each run's window and request id come from the schedule, leave it out"
            )
    request = request_from_words(words_left, user_id=user_id, now=now, default_region=default_region)
    body["request"] = {
        key: value for key, value in request.items() if key not in ("earliest_start", "latest_end")
    }
    return body


def _schedule(args: Sequence[str], ports: Ports, door: Door, *, user_id: str) -> SlackAnswer:
    action = args[0].lower() if args else "list"
    if action == "list":
        found = schedules.list_schedules(ports, limit=20, viewer=_viewer(user_id, ports, door))["schedules"]
        if not found:
            return _ephemeral("No schedules. `/gpu help` shows how to make one.")
        lines = [
            f"• `{s['name']}` {s['schedule_expression']} ({s['timezone']}, {s['state']}): "
            f"{s['request'].get('instance_count')} x {s['request'].get('instance_type')}, "
            f"requests `{s['request_id_pattern']}`"
            for s in found
        ]
        return _ephemeral("*Schedules*\n" + "\n".join(lines))
    if user_id not in door.approvers:  # a schedule spends money every time it fires
        return _ephemeral("Only approvers may create or delete schedules.")
    if action == "delete":
        name = _one_id(args[1:], "schedule delete")
        schedules.delete_schedule(name, ports, actor=f"slack:{user_id}")
        return _ephemeral(f"Schedule `{name}` deleted; reservations it already requested are not touched.")
    body = schedule_from_words(args, user_id=user_id, now=ports.clock(), default_region=ports.settings.region)
    try:
        view = schedules.create_schedule(body, ports, actor=f"slack:{user_id}")
    except InvalidRequest as exc:  # name the request's fields as the reserve words do
        raise InvalidRequest(
            [type(e)(e.field.removeprefix("request."), e.message) for e in exc.errors]
        ) from exc
    return _ephemeral(
        f"Schedule `{view['name']}` created: {view['schedule_expression']} ({view['timezone']}); each run "
        f"requests `{view['request_id_pattern']}` (a second firing on one date reserves nothing more)."
    )


# ------------------------------------------------------------------------------------------ the buttons

APPROVE = "approve_reservation"
REJECT = "reject_reservation"
EXTENSION_DECISIONS = (messages.APPROVE_EXTENSION, messages.REJECT_EXTENSION)


def _payload(text: str) -> dict[str, Any] | SlackAnswer:
    """The interaction's JSON ``payload`` (nesting bounded, :mod:`capacity.jsonsafe`), or the 400 to answer;
    a payload that is not an object is answered with an empty 200 (nothing to act on)."""
    try:
        payload = jsonsafe.loads(text, field="payload")
    except InvalidRequest as exc:
        return SlackAnswer(400, {"message": str(exc)})
    except ValueError:
        return SlackAnswer(400, {"message": "payload is not JSON"})
    return payload if isinstance(payload, dict) else SlackAnswer(200, {})


def interaction(payload_text: str, ports: Ports, door: Door) -> SlackAnswer:
    """Answer a verified interaction (``block_actions`` of the approval message's buttons).

    The HTTP answer is an empty 200 (Slack ignores its body for ``block_actions``); what the user sees
    goes to the interaction's ``response_url``: an ephemeral refusal for a non-approver or a decision
    that came too late, or the approval message replaced by the outcome.
    """
    payload = _payload(payload_text)
    if isinstance(payload, SlackAnswer):
        return payload
    if payload.get("type") != "block_actions":
        return SlackAnswer(200, {})
    actions = [a for a in payload.get("actions") or [] if isinstance(a, dict)]
    action = next(
        (
            a
            for a in actions
            if a.get("action_id") in (APPROVE, REJECT, CANCEL_CONFIRMED, *EXTENSION_DECISIONS)
            or str(a.get("action_id") or "").startswith(f"{messages.EXTEND_BUTTON}:")
        ),
        None,
    )
    user_id = str((payload.get("user") or {}).get("id") or "")
    response_url = str(payload.get("response_url") or "")
    if action is None:
        return SlackAnswer(200, {})
    pressed, value = str(action.get("action_id") or ""), str(action.get("value") or "")
    if pressed.startswith(f"{messages.EXTEND_BUTTON}:"):
        _extend_confirmed(value, user_id, response_url, ports, door)
    elif pressed == CANCEL_CONFIRMED:
        _cancel_confirmed(value, user_id, response_url, ports, door)
    elif not user_id or user_id not in door.approvers:  # approving a purchase or an extension
        _responder(door, ports)(
            response_url,
            f"Sorry {messages.mention(f'slack:{user_id}')}, only approvers may approve or reject "
            f"{messages.escape(value)}; nothing was changed.",
            ephemeral=True,
        )
    elif pressed in EXTENSION_DECISIONS:
        _decide_extension(
            value,
            approved=pressed == messages.APPROVE_EXTENSION,
            user_id=user_id,
            response_url=response_url,
            ports=ports,
            door=door,
        )
    else:
        _decide(
            value,
            approved=pressed == APPROVE,
            user_id=user_id,
            response_url=response_url,
            ports=ports,
            door=door,
        )
    return SlackAnswer(200, {})


def _cancel_confirmed(request_id: str, user_id: str, response_url: str, ports: Ports, door: Door) -> None:
    """The Cancel anyway press: the same rule as ``/gpu cancel`` (the requester or an approver), then the
    cancel with ``confirm``."""
    try:
        refused = _may_not_act(request_id, user_id, ports, door) if user_id else "no user"
        if refused is not None:
            _responder(door, ports)(response_url, f"{refused} Nothing was changed.", ephemeral=True)
            return
        result = api.cancel_reservation(request_id, ports, actor=f"slack:{user_id}", confirm=True)
    except (ReservationNotFound, ReservationClosed, RetryableAwsError) as exc:
        _responder(door, ports)(response_url, messages.escape(f"{request_id}: {exc}"), ephemeral=True)
        return
    _responder(door, ports)(
        response_url,
        f"{messages.escape(request_id)} is {result['status']} (the upfront fee is not refunded): whatever it "
        "holds "
        "is being released.",
        ephemeral=True,
        replace_original=True,
    )


def _decide_extension(
    value: str, *, approved: bool, user_id: str, response_url: str, ports: Ports, door: Door
) -> None:
    """An approver's press on an extension approval (value: JSON ``request_id``, ``extension_id``):
    :func:`capacity.logic.doors.extension_request.decide_extension_approval` with the signed user as the
    identity; the approval message is replaced by the outcome, or an ephemeral line says why not."""
    respond = _responder(door, ports)
    try:
        pressed = json.loads(value)
    except ValueError:
        pressed = None
    if not isinstance(pressed, dict) or not all(
        isinstance(pressed.get(key), str) for key in ("request_id", "extension_id")
    ):
        respond(response_url, "This button names no extension; nothing was changed.", ephemeral=True)
        return
    request_id, extension_id = str(pressed["request_id"]), str(pressed["extension_id"])
    try:
        result = extension_request.decide_extension_approval(
            request_id,
            extension_id,
            {"approved": approved, "reason": "pressed in Slack"},
            ports,
            identity=f"slack:{user_id}",
            viewer=_viewer(user_id, ports, door),
        )
    except (SlackUnavailable, ConfigurationError) as exc:  # who approves could not be checked
        respond(
            response_url,
            messages.escape(f"{request_id}: nothing was recorded ({exc}); press the button again later."),
            ephemeral=True,
        )
        return
    except RetryableAwsError as exc:  # the ledger failed: the decision may not be recorded
        respond(
            response_url,
            messages.escape(
                f"{request_id}: AWS is busy ({exc}); press again (a decision already recorded is passed on "
                "by itself)."
            ),
            ephemeral=True,
        )
        return
    except CapacityError as exc:
        respond(response_url, messages.escape(f"{request_id}: {exc}"), ephemeral=True)
        return
    decided = messages.extension_approval_decided(
        request_id, extension_id, approved=bool(result["approved"]), approver=str(result["approver"])
    )
    respond(response_url, decided.text, blocks=decided.blocks, ephemeral=False, replace_original=True)


def _decide(
    request_id: str, *, approved: bool, user_id: str, response_url: str, ports: Ports, door: Door
) -> None:
    """An approver's press: record the decision (its record hands it back: the outbox), and tell the approver
    what happened (the approval message replaced by the outcome, or an ephemeral line saying why not)."""
    approver = f"slack:{user_id}"
    try:
        result = api.decide_approval(
            request_id,
            {"approved": approved, "reason": "pressed in Slack"},
            ports,
            identity=approver,  # the signed request proves who pressed the button
            viewer=_viewer(user_id, ports, door),
        )
    except (NotAwaitingApproval, NotPermitted, ReservationNotFound, InvalidRequest) as exc:
        _responder(door, ports)(response_url, messages.escape(f"{request_id}: {exc}"), ephemeral=True)
        return
    except (
        SlackUnavailable,
        ConfigurationError,
    ) as exc:  # who approves could not be checked: nothing recorded
        _responder(door, ports)(
            response_url,
            messages.escape(f"{request_id}: nothing was recorded ({exc}); press the button again later."),
            ephemeral=True,
        )
        return
    except RetryableAwsError as exc:  # the ledger failed: the decision may not be recorded
        _responder(door, ports)(
            response_url,
            messages.escape(
                f"{request_id}: AWS is busy ({exc}); press the button again (a decision already recorded is "
                "handed to the waiting workflow by itself)."
            ),
            ephemeral=True,
        )
        return
    decided = messages.approval_decided(
        request_id, approved=bool(result["approved"]), approver=str(result["approver"])
    )
    _responder(door, ports)(
        response_url, decided.text, blocks=decided.blocks, ephemeral=False, replace_original=True
    )


__all__ = [
    "APPROVE",
    "CANCEL_CONFIRMED",
    "REJECT",
    "USAGE",
    "Door",
    "SlackAnswer",
    "UsageError",
    "command",
    "handle",
    "interaction",
    "plan_text",
    "request_from_words",
    "verify",
]
