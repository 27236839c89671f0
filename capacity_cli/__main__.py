"""``python -m capacity_cli``: the same as the ``capacity`` console script."""

from __future__ import annotations

from capacity_cli.app import main

if __name__ == "__main__":
    main()
