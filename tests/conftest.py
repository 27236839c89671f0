"""Fixtures for the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localcloud import moto_costs


@pytest.fixture(autouse=True, scope="session")
def _botocore_caches() -> Iterator[None]:
    """botocore parses each service model's JSON once per session, and every unit test makes new clients:
    one data loader for the process instead, as every local cloud has (localcloud/moto_costs.py)."""
    with moto_costs.botocore_caches():
        yield
