"""``python -m localcloud_soak`` (the same command line as ``python -m localcloud soak``)."""

from __future__ import annotations

import sys

from localcloud_soak.run import main

if __name__ == "__main__":
    sys.exit(main())
