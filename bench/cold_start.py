"""Benchmark 2: cold start per function, next to a bare ``import boto3``.

Each sample is a fresh interpreter (a subprocess, like a new Lambda execution environment) that:

1. imports the function's handler module as it ships (:mod:`bench.shipped`: ``.aws-sam/build/<LogicalId>``
   and the built layer on ``sys.path``, no site-packages, no pyc written; timed: **import**: Powertools,
   pydantic models, boto3 and the layer, as Lambda's init phase does);
2. then, untimed, puts the repository and the venv on ``sys.path`` and stands up the local cloud
   (``localcloud.LocalCloud``: moto plus the emulator of training plans, capacity blocks and Slack) with the
   application's own template deployed;
3. then runs the handler once, in the same process, on the function's first sample event from events/
   (timed: **first invocation**: botocore client creation, validation, the AWS calls answered in-process).

Each sample also lists the modules the import loaded that are not ours (:data:`bench.shipped.LIBRARIES`);
a fresh interpreter imports just those (:func:`bench.shipped.floor_statement`): the function's **libraries
floor**, and the row's gap is its ratio minus the floor's (issue 31: within 0.1x).

Each sample is paired with a bare ``import boto3`` from the built layer (the goal's baseline) and from the
venv, each in its own fresh interpreter; a row shows the medians and the median of the pairs' ratios.

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
from pathlib import Path

from bench import shipped
from bench.report import Section, ms
from localcloud.template import Stack
from tests.gates.test_sample_events import sample_events

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import importlib, json, time
spec_in = json.loads(sys.argv[1])
before = set(sys.modules)
t0, w0 = time.process_time(), time.perf_counter()
module = importlib.import_module(spec_in["module"])  # as Lambda's runtime imports the handler's module
t1, w1 = time.process_time(), time.perf_counter()
compiled = len(_COMPILED)
libraries = _libraries(before, spec_in["module"])
sys.path += spec_in["tools"]  # the local cloud (the repository, moto and the rest of the venv)
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
    t2 = time.process_time()
    try:
        result = handler(event, Context())
        outcome = str(result["statusCode"]) if isinstance(result, dict) and "statusCode" in result else "ok"
    except Exception as exc:
        outcome = type(exc).__name__
    t3 = time.process_time()
finally:
    cloud.stop()
times = {"import": t1 - t0, "wall": w1 - w0, "invoke": t3 - t2}
print(json.dumps({**times, "outcome": outcome, "compiled": compiled, "libraries": libraries}))
"""


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


SHIPPED_RATIOS: dict[str, float] = {}
"""Each function's median import / shipped bare ``import boto3`` from the last :func:`run` (benchmark 7
reads it)."""

SHIPPED_FLOORS: dict[str, float] = {}
"""Each function's libraries floor / shipped bare ``import boto3`` from the last :func:`run`: the modules its
import loads that are not ours (:data:`bench.shipped.LIBRARIES`), imported alone."""

MAIN_EVENTS = {"api": "api_post_reservation.json"}
"""Functions with several sample events: the one to time (the API's is the demo's request)."""


def _preference(name: str, path: Path) -> tuple[bool, bool, str]:
    """Sort key: the main event (``MAIN_EVENTS``, else ``<name>.json``) first, then by name."""
    return (path.name != MAIN_EVENTS.get(name, f"{name}.json"), "post" not in path.name, path.name)


def run(quick: bool = False) -> Section:
    """Per function, the medians of paired samples: the shipped handler's import and first invocation, and
    a bare ``import boto3`` from the shipped layer and from the venv (:mod:`bench.shipped`)."""
    samples = 3 if quick else 5
    stack = Stack.load(ROOT / "template.yaml")
    layer = shipped.layer_path()
    tools = [str(ROOT), str(shipped.VENV_PACKAGES)]
    rows = [
        [
            "function",
            "sample event",
            "import (CPU ms)",
            "import / shipped boto3 (goal < 1.5x)",
            "libraries floor / shipped boto3",
            "gap (goal <= 0.1x)",
            "import / venv boto3",
            "modules compiled at import",
            "first invocation (CPU ms)",
            "total (CPU ms)",
            "answer",
        ]
    ]
    baselines: list[shipped.Boto3] = []
    for spec in sorted(stack.functions, key=lambda f: f.logical_id):
        events = sorted(sample_events(spec.code_dir.name), key=lambda p: _preference(spec.code_dir.name, p))
        if not events:
            rows.append([spec.logical_id, "none", *["-"] * 8, "no sample event"])
            continue
        module, _, handler = spec.handler.partition(".")
        child = {
            "name": spec.name,
            "arn": spec.arn,
            "module": module,
            "handler": handler,
            "tools": tools,
            "event": str(events[0]),
            "template": str(ROOT / "template.yaml"),
        }
        command = shipped.command([str(shipped.function_dir(spec.logical_id)), *layer], _CHILD)
        env = _env(spec.environment, spec.name)
        runs, pairs, floors = [], [], []
        for _ in range(samples):
            pairs.append(shipped.bare_boto3())
            runs.append(shipped.run([*command, json.dumps(child)], env))
            # The same libraries without any of our modules, in a fresh interpreter: the function's floor.
            floors.append(shipped.import_cpu(layer, shipped.floor_statement(runs[-1]["libraries"]), env))
        baselines += pairs
        imported = statistics.median(r["import"] for r in runs)
        invoked = statistics.median(r["invoke"] for r in runs)
        ratio = statistics.median(r["import"] / p.shipped for r, p in zip(runs, pairs, strict=True))
        floor = statistics.median(f / p.shipped for f, p in zip(floors, pairs, strict=True))
        SHIPPED_RATIOS[spec.logical_id] = ratio
        SHIPPED_FLOORS[spec.logical_id] = floor
        row = [
            spec.logical_id,
            str(events[0].relative_to(ROOT)),
            ms(imported),
            f"{ratio:.2f}x",
            f"{floor:.2f}x",
            f"{ratio - floor:+.2f}x",
            f"{statistics.median(r['import'] / p.venv for r, p in zip(runs, pairs, strict=True)):.2f}x",
            str(max(r["compiled"] for r in runs)),
            ms(invoked),
            ms(imported + invoked),
            runs[0]["outcome"],
        ]
        wall = statistics.median(r["wall"] for r in runs)
        print("   " + "  ".join(row) + f"  (import wall {ms(wall)} ms)", flush=True)
        rows.append(row)
    shipped_ms = ms(statistics.median(b.shipped for b in baselines))
    venv_ms = ms(statistics.median(b.venv for b in baselines))
    print(f"   bare import boto3: {shipped_ms} ms from the built layer, {venv_ms} ms from the venv")
    return Section(
        title="2. Cold start per function",
        method=(
            f"{samples} fresh interpreters per function (subprocesses), each importing the handler module as "
            "it ships: `.aws-sam/build/<LogicalId>` and the layer `make build` wrote "
            "(`.aws-sam/build/CapacityLayer/python`, compiled) on `sys.path`, neither the venv's "
            "site-packages nor `PYTHONPATH`, no pyc written (`python -I -S -B`; the layer's arm64 "
            "pydantic-core swapped for this machine's build of the same version). Then its first invocation "
            "on its first sample event from `events/`, with the local cloud (moto and the emulator, the "
            "template deployed) answering the AWS calls in-process (set up untimed between the two). Each "
            "sample is paired with a bare `import boto3` in a fresh interpreter from the built layer (the "
            "goal's baseline: the same files Lambda loads) and from the venv; the ratios are the medians of "
            "the pairs' ratios, the other figures medians. Times are the child's CPU time (user + system), "
            "not wall time: on a machine shared with other work the wall clock also counts the waits for a "
            "core, which swung paired ratios of one handler from 1.4x to 4.6x. No network, so AWS's own "
            "latency is not in the figures. Answer: the handler's HTTP status, `ok`, or the exception it "
            "raised (`ReservationNotFound` is expected: the sample reservation is not in the fresh ledger). "
            "Libraries floor: each sample's child lists the modules its handler's import added to "
            "`sys.modules` that are neither the handler's nor under `capacity` or `servingsim` (Python's, "
            "Powertools', pydantic's, boto3's, slack_sdk's), and a fresh `python -I -S -B` interpreter from "
            "the built layer imports exactly those, in the same order (paired with the same bare boto3); the "
            "gap is the ratio minus the floor's: what our own modules cost (goal: within 0.1x). "
            f"A bare `import boto3` in this run: **{shipped_ms} ms** from the built layer, **{venv_ms} ms** "
            "from the venv (CPU, medians of every pair)."
        ),
        table=rows,
        notes=[
            "Read the import column as the cold-start cost: the first invocation here runs after the local "
            "cloud's setup, which has already loaded botocore's service models, so client creation is "
            "cheaper than in a fresh Lambda environment. Modules compiled at import: the `.py` files "
            "imported without a valid pyc (compiled at every cold start: Lambda's code directories are "
            "read-only), the most of any sample."
        ],
    )
