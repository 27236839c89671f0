"""``python -m localcloud run EVENT_FILE`` / ``python -m localcloud serve`` (see :mod:`localcloud.cli`)."""

from __future__ import annotations

import sys

from localcloud.cli import main

if __name__ == "__main__":
    sys.exit(main())
