"""The embedded local cloud: the whole SAM application in one process, on a virtual clock.

Never deployed. See docs/localcloud.md for what is emulated and how faithfully.
"""

import sys
from pathlib import Path

# The serving simulation (layers/capacity/servingsim) is shared with the application's layer; the local
# cloud runs from the checkout, so it finds the package there (the Lambdas' loader adds the same directory).
_LAYER = str(Path(__file__).resolve().parent.parent / "layers" / "capacity")
if _LAYER not in sys.path:
    sys.path.append(_LAYER)

from localcloud import import_costs  # noqa: E402, F401 - before anything imports moto or time-machine
