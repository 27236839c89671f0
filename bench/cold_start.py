"""Benchmark 2: cold start per function, next to a bare ``import boto3``.

Each sample is a fresh interpreter (a subprocess, like a new Lambda execution environment) that:

1. imports the function's handler module from ``functions/<name>/app.py`` with the layer on ``sys.path``
   (timed: **import**: Powertools, pydantic models, boto3 and the layer, as Lambda's init phase does);
2. then, untimed, stands up the local cloud (``localcloud.LocalCloud``: moto plus the emulator of training
   plans, capacity blocks and Slack) with the application's own template deployed;
3. then runs the handler once, in the same process, on the function's first sample event from events/
   (timed: **first invocation**: botocore client creation, validation, the AWS calls answered in-process).

No network: the AWS calls are answered in-process, so the figure is the code's own cold cost, without AWS's
latency. The reservation of the step events (``eval-week-49``) does not exist in the fresh ledger, so most
steps answer ``ReservationNotFound`` after their first DynamoDB read; the API function accepts the request
(202, one ``PutEvents``); the Slack function answers its signed sample (the cloud's clock starts at the
signature's timestamp). Environment variables are the function's own, resolved from the template.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench.report import Section, ms
from localcloud.template import Stack
from tests.gates.test_sample_events import sample_events

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import importlib.util, json, sys, time
spec_in = json.loads(sys.argv[1])
t0 = time.perf_counter()
for path in spec_in["layers"]:
    sys.path.insert(0, path)
sys.path.insert(0, spec_in["code_dir"])
spec = importlib.util.spec_from_file_location("app", spec_in["module"])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t1 = time.perf_counter()
from pathlib import Path
from localcloud.cloud import LocalCloud
# The whole stack on the local cloud (moto + the emulator of training plans, capacity blocks, Slack):
# every AWS call of the first invocation has an answer, none is a "not implemented" error path.
from datetime import UTC, datetime
event = json.loads(open(spec_in["event"]).read())
# A signed Slack sample is answered at the instant it was signed (Slack's 5-minute window), not 401.
signed_at = (event.get("headers") or {}).get("X-Slack-Request-Timestamp")
start = datetime.fromtimestamp(int(signed_at), UTC) if signed_at else None
cloud = LocalCloud(Path(spec_in["template"]), start=start)
cloud.start()
try:

    class Context:
        function_name = spec_in["name"]
        function_version = "$LATEST"
        invoked_function_arn = spec_in["arn"]
        memory_limit_in_mb = 512
        aws_request_id = "bench-0001"
        log_group_name = "/aws/lambda/bench"
        log_stream_name = "bench"
        def get_remaining_time_in_millis(self):
            return 60000

    handler = getattr(module, spec_in["handler"])
    t2 = time.perf_counter()
    try:
        result = handler(event, Context())
        outcome = str(result["statusCode"]) if isinstance(result, dict) and "statusCode" in result else "ok"
    except Exception as exc:
        outcome = type(exc).__name__
    t3 = time.perf_counter()
finally:
    cloud.stop()
print(json.dumps({"import": t1 - t0, "invoke": t3 - t2, "outcome": outcome}))
"""

_BOTO3 = "import time; t0 = time.perf_counter(); import boto3; print(time.perf_counter() - t0)"


def _env(environment: dict[str, str], name: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "POWERTOOLS_"))}
    env.update(environment)
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",  # noqa: S106 - moto's fake credentials
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_LAMBDA_FUNCTION_NAME=name,
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="WARNING",  # the figure is the code's cost, not the terminal's
    )
    return env


MAIN_EVENTS = {"api": "api_post_reservation.json"}
"""Functions with several sample events: the one to time (the API's is the demo's request)."""


def _preference(name: str, path: Path) -> tuple[bool, bool, str]:
    """Sort key: the main event (``MAIN_EVENTS``, else ``<name>.json``) first, then by name."""
    return (path.name != MAIN_EVENTS.get(name, f"{name}.json"), "post" not in path.name, path.name)


def _sample(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=ROOT, check=False, timeout=300
    )
    if done.returncode != 0:
        raise RuntimeError(f"{command[:2]} failed: {done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def run(quick: bool = False) -> Section:
    """Median import and first-invocation times per function over fresh interpreters."""
    samples = 1 if quick else 3
    stack = Stack.load(ROOT / "template.yaml")
    boto3_times = [float(_sample([sys.executable, "-c", _BOTO3], dict(os.environ))) for _ in range(samples)]
    boto3_ms = ms(statistics.median(boto3_times))
    print(f"   bare import boto3: {boto3_ms} ms")
    rows = [
        [
            "function",
            "sample event",
            "import (ms)",
            "import / boto3 (goal < 1.5x)",
            "first invocation (ms)",
            "total (ms)",
            "answer",
        ]
    ]
    bare = statistics.median(boto3_times)
    for spec in sorted(stack.functions, key=lambda f: f.logical_id):
        events = sorted(sample_events(spec.code_dir.name), key=lambda p: _preference(spec.code_dir.name, p))
        if not events:
            rows.append([spec.logical_id, "none", "-", "-", "-", "-", "no sample event"])
            continue
        module, _, handler = spec.handler.partition(".")
        child = {
            "name": spec.name,
            "arn": spec.arn,
            "code_dir": str(spec.code_dir),
            "module": str(spec.code_dir / f"{module}.py"),
            "handler": handler,
            "layers": [str(path) for path in spec.layer_dirs],
            "event": str(events[0]),
            "template": str(ROOT / "template.yaml"),
        }
        env = _env(spec.environment, spec.name)
        runs = [
            json.loads(_sample([sys.executable, "-c", _CHILD, json.dumps(child)], env))
            for _ in range(samples)
        ]
        imported = statistics.median(r["import"] for r in runs)
        invoked = statistics.median(r["invoke"] for r in runs)
        row = [
            spec.logical_id,
            str(events[0].relative_to(ROOT)),
            ms(imported),
            f"{imported / bare:.2f}x" if bare else "-",
            ms(invoked),
            ms(imported + invoked),
            runs[0]["outcome"],
        ]
        print("   " + "  ".join(row))
        rows.append(row)
    return Section(
        title="2. Cold start per function",
        method=(
            f"Median of {samples} fresh interpreter(s) per function (subprocesses): the handler module's "
            "import (the init phase), then its first invocation on its first sample event from `events/`, "
            "with the local cloud (moto and the emulator, the template deployed) answering the AWS calls "
            "in-process (set up untimed between the two). No network, so AWS's own latency is not in the "
            "figures. Answer: the handler's HTTP status, `ok`, or the exception it raised "
            "(`ReservationNotFound` is expected: the sample reservation is not in the fresh ledger). "
            f"For reference, a bare `import boto3` in a fresh interpreter of the same run: **{boto3_ms} ms** "
            f"(median of {samples})."
        ),
        table=rows,
        notes=[
            "Read the import column as the cold-start cost: the first invocation here runs after the local "
            "cloud's setup, which has already loaded botocore's service models, so client creation is "
            "cheaper than in a fresh Lambda environment."
        ],
    )
