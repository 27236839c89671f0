"""Fixtures for the runtime tests: moto + virtual clock + Lambda runtime + dispatcher, without a template."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.localcloud.runtime.rt_support import REGION, Harness, running_harness


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
    with running_harness() as started:
        yield started
