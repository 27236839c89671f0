"""Fixtures for the runtime tests: moto + virtual clock + Lambda runtime + dispatcher, without a template."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from moto import mock_aws

from localcloud import patches
from localcloud.clock import VirtualClock
from localcloud.dispatch import Dispatcher
from localcloud.faults import FaultInjector
from localcloud.lambdas import LambdaRuntime
from localcloud.slack import Outbox
from tests.localcloud.runtime.rt_support import (
    FUNCTION_NAMES,
    REGION,
    START,
    FakeEmulator,
    Harness,
    function_spec,
)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials and region, as LocalCloud sets them."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def harness(aws_env: None) -> Iterator[Harness]:
    """Everything started; torn down in reverse order."""
    clock = VirtualClock(START)
    base_env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
    }
    lambdas = LambdaRuntime([function_spec(name) for name in FUNCTION_NAMES], clock, base_env, seed=7)
    emulator = FakeEmulator(clock)
    faults = FaultInjector(seed=7)
    dispatcher = Dispatcher(clock=clock, lambdas=lambdas, emulator=emulator, faults=faults)
    outbox = Outbox()
    mock = mock_aws(
        config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    )
    mock.start()
    clock.start()
    patches.install(clock, dispatcher, outbox=outbox)
    try:
        yield Harness(clock, lambdas, dispatcher, emulator, faults, outbox)
    finally:
        patches.uninstall()
        clock.stop()
        lambdas.close()
        mock.stop()
