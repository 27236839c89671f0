"""Benchmark 4: offering search with 200 ms of injected latency per call, concurrent vs sequential.

The search is parallel only through the reserve workflow's ``Map`` state (one ``search_offerings``
invocation per region, ``MaxConcurrency`` 8); inside one region the layer searches the requested duration
and the whole days either side of it one after the other
(``capacity.logic.steps.search.candidate_durations``). So this measures the layer's per-region search
function, ``capacity.logic.steps.search.search_offerings``, for 8 regions x 3 durations, called for all
regions at once (8 threads: what the Map does) and one region after the other (what a single function looping
over regions would do).

Every ``SearchTrainingPlanOfferings`` call goes through the real ``SageMakerAdapter`` to the local cloud's
AWS emulator (the same capacity market as ``make demo``) after sleeping 200 ms of real time: the wall-time
equivalent of the local cloud's ``latency`` fault (``FaultKind.LATENCY``), which waits in virtual time.
The ledger and offerings store are moto DynamoDB tables.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import time_machine
from capacity.adapters.dynamodb import OfferingStore
from capacity.adapters.sagemaker import SageMakerAdapter
from capacity.contracts.finding import SearchInput
from capacity.ledger import Ledger
from capacity.logic.steps.search import candidate_durations, search_offerings
from capacity.models import parse_request
from capacity.ports import Ports
from capacity.settings import Settings
from moto import mock_aws

from bench.report import Section
from localcloud.emulator import Emulator
from localcloud.emulator.common import RecordingSink
from tests.integration.support import START, base_request

REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "us-west-1",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-2",
)
LATENCY_SECONDS = 0.2


class _SlowEmulatedSageMaker:
    """The slice of a boto3 SageMaker client the search uses, answered by the emulator after a delay."""

    def __init__(
        self, emulator: Emulator, region: str, counter: dict[str, int], lock: threading.Lock
    ) -> None:
        self._emulator = emulator
        self._region = region
        self._counter = counter
        self._lock = lock

    def search_training_plan_offerings(self, **params: Any) -> dict[str, Any]:
        time.sleep(LATENCY_SECONDS)
        with self._lock:
            self._counter[self._region] = self._counter.get(self._region, 0) + 1
        return self._emulator.call("sagemaker", "SearchTrainingPlanOfferings", params, region=self._region)


def _create_tables() -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    for name, key in (("ledger", "sk"), ("offerings", "offering_key")):
        ddb.create_table(
            TableName=name,
            KeySchema=[
                {"AttributeName": "request_id", "KeyType": "HASH"},
                {"AttributeName": key, "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "request_id", "AttributeType": "S"},
                {"AttributeName": key, "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )


def _timed(label: str, ports: Ports, request_id: str, concurrent: bool) -> float:
    steps = [SearchInput(request_id=request_id, region=region) for region in REGIONS]
    began = time.perf_counter()
    if concurrent:
        with ThreadPoolExecutor(max_workers=len(REGIONS)) as pool:
            list(pool.map(lambda step: search_offerings(step, ports), steps))
    else:
        for step in steps:
            search_offerings(step, ports)
    elapsed = time.perf_counter() - began
    print(f"   {label}: {elapsed:.2f} s")
    return elapsed


def run(quick: bool = False) -> Section:
    """Wall time of 8 regions x 3 durations with 200 ms per call, concurrent and sequential."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "LEDGER_TABLE": "ledger",
        "OFFERINGS_TABLE": "offerings",
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    counter: dict[str, int] = {}
    lock = threading.Lock()
    try:
        with time_machine.travel(START, tick=True), mock_aws():
            _create_tables()
            emulator = Emulator(events=RecordingSink())
            dynamodb = boto3.client("dynamodb", region_name="us-east-1")
            ports = Ports(
                Settings.from_env(),
                ledger=Ledger("ledger", dynamodb),
                offerings=OfferingStore("offerings", dynamodb),
                sagemaker=lambda region: SageMakerAdapter(
                    region,
                    _SlowEmulatedSageMaker(emulator, region, counter, lock),  # type: ignore[arg-type]
                ),
            )
            request = parse_request(base_request(), now=None)
            ports.ledger.record_request(request, actor="bench")
            durations = candidate_durations(request)
            sequential = _timed("sequential", ports, request.id, concurrent=False)
            per_region = dict(counter)
            concurrent = _timed("concurrent", ports, request.id, concurrent=True)
            if counter != {region: 2 * calls for region, calls in per_region.items()}:
                raise RuntimeError(f"the two runs made different calls: {per_region}, {counter}")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    calls_each = sum(per_region.values())
    slowest_region = max(per_region.values())
    rows = [
        ["mode", "regions", "durations per region", "calls", "wall time (s)", "lower bound (s)"],
        [
            "sequential (one region after the other)",
            str(len(REGIONS)),
            str(len(durations)),
            str(calls_each),
            f"{sequential:.2f}",
            f"{calls_each * LATENCY_SECONDS:.2f}",
        ],
        [
            "concurrent (one per region, as the Map)",
            str(len(REGIONS)),
            str(len(durations)),
            str(calls_each),
            f"{concurrent:.2f}",
            f"{slowest_region * LATENCY_SECONDS:.2f}",
        ],
    ]
    return Section(
        title="4. Offering search with 200 ms latency per call",
        method=(
            "The search is parallel only through the reserve workflow's `Map` state (one `search_offerings` "
            "invocation per region, `MaxConcurrency` 8); within a region the layer searches the requested "
            "duration and one day either side in turn. So this calls the layer's per-region function "
            "`capacity.logic.steps.search.search_offerings` for 8 regions, concurrently (8 threads, "
            "as the Map) and sequentially, with every `SearchTrainingPlanOfferings` going through the real "
            "`SageMakerAdapter` to the local cloud's emulator after 200 ms of real sleep (the wall-time "
            "twin of the `latency` fault, which waits in virtual time). Ledger and offerings: moto DynamoDB."
        ),
        table=rows,
        notes=[
            f"Speed-up: {sequential / concurrent:.1f}x. Lower bounds: every call's 200 ms end to end "
            f"(sequential), the busiest region's calls end to end (concurrent). Regions where nothing "
            "feasible is found make a fourth call (half the instance count, for the alternatives message)."
        ],
    )
