"""The embedded local cloud: the whole SAM application in one process, on a virtual clock.

Never deployed. See docs/localcloud.md for what is emulated and how faithfully.
"""
