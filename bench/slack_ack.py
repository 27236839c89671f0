"""Benchmark 3: Slack acknowledgement latency, p50 and p99, warm and cold.

Needs ``functions/slack/app.py`` (issue 5); without it the benchmark is skipped with that reason.

Each request is an API Gateway REST proxy ``POST`` with a form body (``application/x-www-form-urlencoded``,
as Slack sends slash commands), signed as Slack signs it: ``X-Slack-Request-Timestamp`` and
``X-Slack-Signature = v0=HMAC-SHA256(signing secret, "v0:{timestamp}:{body}")`` (slack_sdk's
``SignatureVerifier``), with the local cloud's signing secret (localcloud/local_values.json) and its
virtual clock's time. The body is the first ``events/**/slack*.json`` sample event whose text asks for
``help`` (else the first POST sample, else ``/gpu help``), so no request starts a reservation. Each
request carries its own ``trigger_id`` (Slack gives every command a new one), so its signature differs from
the others: the door refuses a second request with the same timestamp and signature as a replay, and the
virtual clock does not move between requests.

- **warm**: one local cloud, one first request to warm the function, then 1,000 requests through
  ``LocalCloud.api_request`` (the function runs in-process; the local cloud's routing is included).
- **cold**: fresh interpreters (subprocesses), each starting a local cloud untimed and timing its first
  request: the handler module's import and first invocation (the local cloud has already imported boto3 and
  the layer's dependencies, so benchmark 2 gives the import cost of a truly fresh environment).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from base64 import b64decode
from itertools import count
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from slack_sdk.signature import SignatureVerifier

from bench.report import Section, ms, percentile

ROOT = Path(__file__).resolve().parents[1]
SLACK_APP = ROOT / "functions/slack/app.py"
WARM_REQUESTS = 1000
COLD_SAMPLES = 20
TITLE = "3. Slack acknowledgement latency"


def _template_event() -> dict[str, Any]:
    """A Slack slash command as an API Gateway proxy event (a sample event if there is one)."""
    samples = []
    for path in sorted((ROOT / "events").glob("**/slack*.json")):
        event = json.loads(path.read_text())
        if str(event.get("httpMethod", "")).upper() == "POST":
            samples.append(event)
    for event in samples:
        if "help" in str(event.get("body") or ""):
            return dict(event)
    if samples:
        return dict(samples[0])
    base: dict[str, Any] = json.loads((ROOT / "events/api_post_reservation.json").read_text())
    base.update(
        path="/slack/commands",
        resource="/slack/commands",
        body=urlencode({"command": "/gpu", "text": "help", "user_id": "U0BENCH", "channel_id": "C0BENCH"}),
        isBase64Encoded=False,
    )
    return base


_TRIGGERS = count(1)


def signed(event: dict[str, Any], secret: str, now: int) -> dict[str, Any]:
    """``event`` with a fresh ``trigger_id`` and Slack signature headers for its body at ``now`` (epoch s)."""
    body = str(event.get("body") or "")
    if event.get("isBase64Encoded"):
        body = b64decode(body).decode()
    form = [(k, v) for k, v in parse_qsl(body, keep_blank_values=True) if k != "trigger_id"]
    body = urlencode([*form, ("trigger_id", f"bench.{next(_TRIGGERS)}")])
    headers = {k: v for k, v in (event.get("headers") or {}).items() if not k.lower().startswith("x-slack")}
    headers.update(
        {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": str(now),
            "X-Slack-Signature": SignatureVerifier(secret).generate_signature(timestamp=str(now), body=body),
        }
    )
    return {
        **event,
        "body": body,
        "isBase64Encoded": False,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
    }


def _cloud() -> Any:
    from localcloud.cloud import LocalCloud
    from tests.integration.support import START, TEMPLATE

    return LocalCloud(TEMPLATE, start=START, seed=7, parameter_overrides={"SlackChannelId": "C0BENCH"})


def _secret() -> str:
    from localcloud.template import load_local_values

    return str(load_local_values()["SecretsManager"]["SlackSigningSecret"])


def first_request_seconds() -> float:
    """In a fresh local cloud: seconds of the first signed request (the cold figure of one interpreter)."""
    event, secret = _template_event(), _secret()
    with _cloud() as cloud:
        request = signed(event, secret, int(cloud.now().timestamp()))
        began = time.perf_counter()
        answer = cloud.api_request(request)
        elapsed = time.perf_counter() - began
    if answer["statusCode"] >= 400:
        raise RuntimeError(f"the Slack function answered {answer['statusCode']}: {answer['body'][:300]}")
    return elapsed


def _warm() -> list[float]:
    event, secret = _template_event(), _secret()
    times = []
    with _cloud() as cloud:
        cloud.api_request(signed(event, secret, int(cloud.now().timestamp())))
        for _ in range(WARM_REQUESTS):
            request = signed(event, secret, int(cloud.now().timestamp()))
            began = time.perf_counter()
            answer = cloud.api_request(request)
            times.append(time.perf_counter() - began)
            if answer["statusCode"] >= 400:
                raise RuntimeError(
                    f"the Slack function answered {answer['statusCode']}: {answer['body'][:300]}"
                )
    return times


def _cold(samples: int) -> list[float]:
    code = "from bench.slack_ack import first_request_seconds; print(first_request_seconds())"
    times = []
    for _ in range(samples):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False, timeout=600
        )
        if done.returncode != 0:
            raise RuntimeError(f"cold sample failed: {done.stderr[-1500:]}")
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return times


def run(quick: bool = False) -> Section:
    """p50/p99 of 1,000 warm requests and of cold first requests; skipped without the function."""
    cold_samples = 5 if quick else COLD_SAMPLES
    method = (
        "API Gateway REST proxy POSTs with a form body, signed with the local signing secret as Slack signs "
        f"them (slack_sdk `SignatureVerifier`). Warm: {WARM_REQUESTS} requests to one local cloud after one "
        f"warm-up. Cold: the first request of {cold_samples} fresh interpreters (local cloud started "
        "untimed)."
    )
    if not SLACK_APP.exists():
        reason = "functions/slack/app.py does not exist on this branch yet (issue 5 adds it)."
        print(f"   skipped: {reason}")
        return Section(title=TITLE, method=method, skipped=reason)
    try:
        warm = _warm()
        cold = _cold(cold_samples)
    except Exception as exc:
        print(f"   failed: {exc}")
        return Section(title=TITLE, method=method, skipped=f"the benchmark failed: {exc}")
    rows = [["", "requests", "p50 (ms)", "p99 (ms)", "max (ms)"]]
    for label, times in (("warm", warm), ("cold", cold)):
        row = [label, str(len(times)), ms(percentile(times, 50)), ms(percentile(times, 99)), ms(max(times))]
        print("   " + "  ".join(row))
        rows.append(row)
    return Section(
        title=TITLE, method=method, table=rows, notes=["Slack's limit for the acknowledgement: 3 s."]
    )
