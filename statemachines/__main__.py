"""``python -m statemachines [--check]``: see statemachines/generate.py."""

from statemachines.generate import main

raise SystemExit(main())
