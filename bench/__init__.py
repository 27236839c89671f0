"""Benchmarks of issue 7: ``make bench`` (``python -m bench``) prints the figures, writes docs/benchmarks.md.

Plain scripts, not tests: figures are measured on this machine and reported, never asserted against a
time limit. Each module has ``run(quick) -> Section``; :mod:`bench.__main__` runs them in order.
"""
