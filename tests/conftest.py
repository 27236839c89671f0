"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from localcloud import moto_costs


@pytest.fixture(autouse=True, scope="session")
def _botocore_caches() -> Iterator[None]:
    """botocore parses each service model's JSON once per session, and every unit test makes new clients:
    one data loader for the process instead, as every local cloud has (localcloud/moto_costs.py)."""
    with moto_costs.botocore_caches():
        yield


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--clock-ahead-days",
        type=int,
        default=0,
        help="run the tests with the wall clock moved this many days ahead (the clock keeps ticking): a test "
        "that passes only until some date fails here first (make unit-future, part of make test)",
    )


_AHEAD: list[time_machine.travel] = []


def pytest_configure(config: pytest.Config) -> None:
    """Move the clock before collection, so module-level "now"s are read in the future too."""
    days = int(config.getoption("--clock-ahead-days"))
    if days:
        travel = time_machine.travel(datetime.now(UTC) + timedelta(days=days), tick=True)
        travel.start()
        _AHEAD.append(travel)


def pytest_unconfigure(config: pytest.Config) -> None:
    while _AHEAD:
        _AHEAD.pop().stop()
