"""Keep the AWS calls the integration tests made, for tests/gates/test_dependent_actions.py.

Reads the JSON lines ``$LOCALCLOUD_RECORD_CHECKS`` collected (every allowed call a role of the stack made,
with the checks IAM evaluated: the action, each dependent action, their resources and context), keeps at
most two examples of each (role, operation, actions) and writes them, sorted, to the output file.

Usage: python scripts/record_calls.py RECORDED.jsonl tests/gates/recorded_calls.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

EXAMPLES = 2
"""Examples kept per (role, service, operation, set of actions): resource names differ per request."""


def keep(lines: list[str]) -> list[dict[str, Any]]:
    """The deduplicated records, sorted by role, service, operation."""
    kept: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for line in lines:
        if not line.strip() or line in seen:
            continue
        seen.add(line)
        record = json.loads(line)
        actions = sorted({c["action"] for c in record["checks"]})
        key = (record["role"], record["service"], record["operation"], *actions)
        examples = kept.setdefault(key, [])
        if len(examples) < EXAMPLES:
            examples.append(record)
    return [record for key in sorted(kept) for record in kept[key]]


def main(argv: list[str]) -> int:
    """Write the kept records; prints how many calls and operations."""
    source, target = Path(argv[1]), Path(argv[2])
    records = keep(source.read_text(encoding="utf-8").splitlines())
    target.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    operations = {(r["role"], r["service"], r["operation"]) for r in records}
    print(f"{target}: {len(records)} calls, {len(operations)} (role, operation) pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
