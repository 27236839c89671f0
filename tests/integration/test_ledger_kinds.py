"""The ledger holds only kinds the catalogue registers (capacity/record_kinds.py): the check every local cloud
of these tests makes when it stops (tests/integration/conftest.py) names an item of no registered kind."""

from __future__ import annotations

import pytest

from tests.integration.support import make_cloud


@pytest.mark.integration
def test_an_item_of_no_registered_kind_fails_the_cloud_that_holds_it() -> None:
    # Given a running local cloud whose ledger holds one registered item and one of no registered kind
    cloud = make_cloud()
    cloud.start()
    table = cloud.stack.physical_id("LedgerTable")
    for sk in ("PURCHASE", "NOT_A_KIND#1"):
        cloud.client("dynamodb").put_item(TableName=table, Item={"request_id": {"S": "r-1"}, "sk": {"S": sk}})

    # When it stops / Then the stray item is named, and the cloud is down all the same
    with pytest.raises(AssertionError, match=r"\('r-1', 'NOT_A_KIND#1'\)\]"):
        cloud.stop()
    assert not cloud.running
