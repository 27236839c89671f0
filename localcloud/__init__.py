"""The embedded local cloud: the whole SAM application in one process, on a virtual clock.

Never deployed. See docs/localcloud.md for what is emulated and how faithfully.
"""

from localcloud import import_costs  # noqa: F401 - before anything imports moto or time-machine
