"""Fixtures for the emulator's tests: moto active, the virtual clock frozen at START, a recording sink."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from moto import mock_aws

from localcloud.emulator import Emulator
from localcloud.emulator.common import RecordingSink
from localcloud.faults import FaultKind
from tests.localcloud.emulator.support import START, Call


@pytest.fixture
def aws() -> Iterator[None]:
    """moto's backends, as the runtime has them (the emulator writes metrics into moto's CloudWatch)."""
    with mock_aws():
        yield


@pytest.fixture
def clock() -> Iterator[time_machine.Traveller]:
    """The virtual clock, frozen at START; tests move it with ``shift``/``move_to``."""
    with time_machine.travel(START, tick=False) as traveller:
        yield traveller


@pytest.fixture
def sink() -> RecordingSink:
    """Records the AWS events the emulator puts."""
    return RecordingSink()


@pytest.fixture
def emulator(aws: None, clock: time_machine.Traveller, sink: RecordingSink) -> Emulator:
    """An emulator with the default market (seed 7)."""
    return Emulator(events=sink)


@pytest.fixture
def call(emulator: Emulator) -> Call:
    """``call(service, operation, region=..., faults=..., **params)`` on the emulator."""

    def _call(
        service: str,
        operation: str,
        region: str = "us-east-1",
        faults: frozenset[FaultKind] = frozenset(),
        **params: Any,
    ) -> dict[str, Any]:
        return emulator.call(service, operation, params, region=region, faults=faults)

    return _call
