"""The fault soak: randomized reservation lifecycles on the local cloud, checked for the money rules.

A test harness, not part of the runtime: it lives beside :mod:`localcloud` (which reaches it only from the
``python -m localcloud soak`` entry point) and is described in :mod:`localcloud_soak.scenario` and
docs/soak.md.
"""
