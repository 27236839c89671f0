"""Write (or check) ``docs/openapi.json``: the REST API's OpenAPI document as Powertools generates it.

``python scripts/export_openapi.py`` rewrites the file; ``--check`` exits 1 when the committed file differs
from what ``functions/api/app.py`` generates (``make openapi`` / ``make openapi-check``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DOCUMENT = ROOT / "docs" / "openapi.json"


def load_api() -> ModuleType:
    """Import ``functions/api/app.py`` (with the layer on the path) under the name ``api_app``."""
    layer = str(ROOT / "layers" / "capacity")
    if layer not in sys.path:
        sys.path.insert(0, layer)
    os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
    spec = importlib.util.spec_from_file_location("api_app", ROOT / "functions" / "api" / "app.py")
    if spec is None or spec.loader is None:  # pragma: no cover - the file is in the repository
        raise RuntimeError("functions/api/app.py not found")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate() -> str:
    """The document, pretty-printed with sorted keys and a final newline (stable diffs)."""
    document = json.loads(load_api().openapi_json())
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the document, or with ``--check`` compare it with the committed one."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if docs/openapi.json is out of date")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = DOCUMENT.read_text() if DOCUMENT.exists() else ""
        if current != text:
            print(f"{DOCUMENT.relative_to(ROOT)} is out of date: run `make openapi`", file=sys.stderr)
            return 1
        print(f"{DOCUMENT.relative_to(ROOT)} is up to date")
        return 0
    DOCUMENT.write_text(text)
    print(f"wrote {DOCUMENT.relative_to(ROOT)} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
