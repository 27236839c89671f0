"""Fixtures of the integration tests: every local cloud's ledger holds only kinds the catalogue registers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from capacity.record_kinds import kind_of

from localcloud.cloud import LocalCloud


def unregistered_items(cloud: LocalCloud) -> list[tuple[str, str]]:
    """The ``(request_id, sk)`` of every ledger item of ``cloud`` whose kind :mod:`capacity.record_kinds`
    does not register (one ``Scan``, by the test's own client: not the application's call)."""
    client = cloud.client("dynamodb")
    kwargs: dict[str, Any] = {
        "TableName": cloud.stack.physical_id("LedgerTable"),
        "ProjectionExpression": "request_id, sk",
    }
    strays: list[tuple[str, str]] = []
    while True:
        page = client.scan(**kwargs)
        for item in page["Items"]:
            request_id, sk = item["request_id"]["S"], item["sk"]["S"]
            if kind_of(request_id, sk) is None:
                strays.append((request_id, sk))
        if "LastEvaluatedKey" not in page:
            return sorted(strays)
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


@pytest.fixture(autouse=True, scope="session")
def _ledger_kinds_registered() -> Iterator[None]:
    """Every local cloud of these tests reads its ledger when it stops: an item of a kind the catalogue does
    not register (a key written outside ``capacity/record_kinds.py``) fails the test, or the module, that
    stopped it (after the cloud is down, so the next one can start)."""
    stop = LocalCloud.stop

    def checked_stop(cloud: LocalCloud) -> None:
        strays = unregistered_items(cloud) if cloud.running else []
        stop(cloud)
        if strays:
            raise AssertionError(f"ledger items of no registered kind (capacity/record_kinds.py): {strays}")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalCloud, "stop", checked_stop)
        yield
