"""DynamoDB ``Query`` in moto at the cost of the partition it reads, not of the whole table.

moto 5.2's ``Table.query`` starts from ``Table.all_items()``, which lists *and sorts* every item of the table,
then keeps those of the queried partition: a one-reservation ledger query costs O(n log n) in the table's
size (56 ms at 160 items, 972 ms at 160,000 in issue 14), so a long ``serve`` session or a big soak slows
down as it runs. moto already stores a table's items by partition (``Table.items[hash][range]``); while a
query on the table's own key runs, :func:`install` makes ``all_items()`` answer that one partition, sorted
by its range key, which is the list moto would have kept after filtering. A query on an index keeps moto's
scan of every item (an index has no partition store in moto), but without the table-wide sort: moto sorts
the matching items itself (``sorted_items``). Answers, order, pagination and errors are moto's own.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from typing import Any

from moto.dynamodb.models.table import Table

_local = threading.local()
_saved: list[tuple[str, Callable[..., Any]]] = []


def _partition_items(table: Table, hash_key: Any) -> list[Any]:
    partition = table.items.get(hash_key)
    if partition is None:
        return []
    if not table.range_key_attr:
        return [partition]
    return sorted(partition.values(), key=lambda item: item.range_key)


def install() -> None:
    """Patch moto's ``Table.query`` and ``Table.all_items`` (idempotent); :func:`uninstall` reverts."""
    if _saved:
        return
    original_query = Table.query
    original_all_items = Table.all_items
    signature = inspect.signature(original_query)

    def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        # moto's backend passes index_name positionally or by name, depending on the version.
        index_name = signature.bind(self, hash_key, *args, **kwargs).arguments.get("index_name")
        previous = getattr(_local, "hint", None)
        _local.hint = (self, "index" if index_name else "partition", hash_key)
        try:
            return original_query(self, hash_key, *args, **kwargs)
        finally:
            _local.hint = previous

    def all_items(self: Table) -> list[Any]:
        hint = getattr(_local, "hint", None)
        if hint is None or hint[0] is not self:
            return original_all_items(self)
        _table, kind, hash_key = hint
        if kind == "partition" and hash_key is not None:
            return _partition_items(self, hash_key)
        # An index query filters every item and sorts the matches itself: no need to sort them all first.
        items: list[Any] = []
        for value in self.items.values():
            if self.range_key_attr:
                items.extend(value.values())
            else:
                items.append(value)
        return items

    _saved.extend([("query", original_query), ("all_items", original_all_items)])
    Table.query = query  # type: ignore[method-assign]
    Table.all_items = all_items  # type: ignore[method-assign]


def uninstall() -> None:
    """Put moto's own methods back (safe to call twice)."""
    while _saved:
        name, original = _saved.pop()
        setattr(Table, name, original)
