"""The wall clock of every Python process the docs test starts, moved ahead when the suite is run with
``--clock-ahead-days N`` (tests/conftest.py moves only pytest's own process; ``make serve``, ``capacity`` and
the Slack signer run in subprocesses, which time-machine in the parent does not reach).

Python imports ``sitecustomize`` at start-up from the first ``sys.path`` entry that has one: the docs test
puts this directory on ``PYTHONPATH`` and sets ``CAPACITY_TEST_CLOCK_AHEAD_DAYS``. The process then travels
that many days ahead with a ticking clock (time-machine, as the suite's own option does), and time-machine's
escape hatch, which the local cloud reads for "the real time" (a Slack signature's age, a SigV4 request's
time), is moved by the same amount: a year from now, every clock a person has is a year ahead, not only some.
"""

from __future__ import annotations

import os

_DAYS = os.environ.get("CAPACITY_TEST_CLOCK_AHEAD_DAYS")

if _DAYS and int(_DAYS):
    import datetime as _dt
    from typing import Any

    import time_machine as _tm

    _SHIFT = _dt.timedelta(days=int(_DAYS))

    class _ShiftedDatetime:
        """``escape_hatch.datetime.datetime`` moved by the same shift."""

        def __init__(self, original: Any) -> None:
            self._original = original

        def now(self, tz: _dt.tzinfo | None = None) -> _dt.datetime:
            moment: _dt.datetime = self._original.now(tz)
            return moment + _SHIFT

        def today(self) -> _dt.datetime:
            moment: _dt.datetime = self._original.today()
            return moment + _SHIFT

        def utcnow(self) -> _dt.datetime:
            moment: _dt.datetime = self._original.utcnow()
            return moment + _SHIFT

    class _ShiftedTime:
        """``escape_hatch.time`` moved by the same shift (``time`` and ``time_ns``; the rest as it was)."""

        def __init__(self, original: Any) -> None:
            self._original = original

        def time(self) -> float:
            return float(self._original.time()) + _SHIFT.total_seconds()

        def time_ns(self) -> int:
            return int(self._original.time_ns()) + int(_SHIFT.total_seconds()) * 1_000_000_000

        def __getattr__(self, name: str) -> Any:
            return getattr(self._original, name)

    _tm.escape_hatch.datetime.datetime = _ShiftedDatetime(_tm.escape_hatch.datetime.datetime)  # type: ignore[assignment]
    _tm.escape_hatch.time = _ShiftedTime(_tm.escape_hatch.time)  # type: ignore[assignment]
    _tm.travel(_dt.datetime.now(_dt.UTC) + _SHIFT, tick=True).start()
