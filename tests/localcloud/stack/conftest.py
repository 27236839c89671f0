"""Fixtures for the local cloud's stack tests (template loader, delivery, scheduler, LocalCloud)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

FIXTURES = Path(__file__).parent / "fixtures"
TEMPLATE = FIXTURES / "template.yaml"
STACK_NAME = "fixture"


@pytest.fixture
def template_path() -> Path:
    """The fixture stack's SAM template."""
    return TEMPLATE


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """moto's mock, with Step Functions executing ASL, and fake credentials."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        yield
