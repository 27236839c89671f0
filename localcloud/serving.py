"""``serve``'s driver: virtual time follows real time while the cloud is idle, and requests are served in
virtual time, so real compute never counts against a virtual deadline.

On AWS a request's Lambda has its timeout (29 s behind API Gateway) of *its own* time; Slack's signature is
checked within 5 minutes of the instant Slack signed it. A local cloud that ran its clock at ``--speed``
times the real one, whatever the simulation was doing, would charge every real millisecond of Python (0.1 s
of real work is 6 virtual minutes at 3600x) to the request being served: a 502 where AWS answers, a Slack
signature "more than 5 minutes from now". So :class:`RealTimeDriver`:

- while requests are being served (concurrently, each on a thread of its own, as API Gateway does), runs
  the simulation without a real-time target, as ``python -m localcloud run`` does: a request's Lambda runs
  at a standing virtual instant, and virtual time moves under it only by what it (or anything else in the
  simulation) waits for: a back-off, a retry;
- between requests, advances virtual time by ``speed`` times the real time it spent *waiting* for one
  (never the real time spent simulating): schedules, alarms and workflows progress as on AWS, slower than
  ``speed`` when the machine is busy, never skipping a deadline;
- with ``hold`` (``serve``'s default), virtual time stands at its start until the first request arrives
  (:meth:`RealTimeDriver.wake`): ``serve`` starts at :data:`SAMPLE_EPOCH`, and the samples' dates (a week
  after it) stay ahead of the clock however long the server waited to be called, at any ``SPEED``;
- a Lambda that really waits past its timeout in virtual time is still stopped there (the runtime's
  deadline), as on AWS.

:class:`SlackClock` keeps Slack's 5-minute window honest under that clock: Slack signs with real time, the
handler reads virtual time. A request signed with the local signing secret is re-signed at the virtual
instant that is as old as the request is in real time (a request 6 real minutes old is still refused; a
forged signature is passed on untouched and refused).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any

from localcloud.cloud import LocalCloud

SAMPLE_EPOCH = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
"""The instant the sample events are written at (``events/``: ``requestTimeEpoch`` 1795953600000, the Slack
samples' timestamps): where ``serve`` starts its virtual clock unless ``--start`` says otherwise (and
``capacity --local`` too, ``capacity_cli.targets.SAMPLE_EPOCH``), so every date in the samples and in the
docs' command blocks (a window from 2026-12-06, ``from 2026-12-10``) is ahead of the clock on any day."""
SLACK_TIMESTAMP = "X-Slack-Request-Timestamp"
SLACK_SIGNATURE = "X-Slack-Signature"


class RealTimeDriver:
    """Drives ``cloud`` for ``serve`` (see the module docstring).

    Args:
        cloud: a started local cloud; the driver must run in the thread that started it (the clock's owner).
        speed: virtual seconds per real second of waiting (> 0).
        tick: the longest real wait between two advances of virtual time (seconds).
        hold: keep virtual time at its start until the first request (:meth:`wake`).

    :meth:`submit` is what the HTTP server calls (any thread); :meth:`step` and :meth:`serve_forever` run in
    the driving thread.
    """

    def __init__(
        self,
        cloud: LocalCloud,
        *,
        speed: float,
        tick: float = 0.2,
        slack_clock: SlackClock | None = None,
        hold: bool = False,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.cloud = cloud
        self.slack_clock = slack_clock
        self.speed = speed
        self.tick = tick
        self._requests: queue.Queue[tuple[dict[str, Any], Future[dict[str, Any]]]] = queue.Queue()
        self._idle_since = time.monotonic()
        self._lock = threading.Lock()
        self._in_flight = 0
        self._serial = itertools.count(1)
        self._woken = threading.Event()
        if not hold:
            self._woken.set()

    @property
    def held(self) -> bool:
        """True while virtual time waits for the first request (``hold``)."""
        return not self._woken.is_set()

    def wake(self) -> None:
        """A request arrived (any thread): from now on virtual time follows real time at ``speed``."""
        self._woken.set()

    def submit(self, event: dict[str, Any]) -> dict[str, Any]:
        """Hand an API Gateway proxy event to the driving thread and wait for the response (HTTP threads).

        Raises:
            BaseException: what serving the request raised.
        """
        answer: Future[dict[str, Any]] = Future()
        self.wake()
        self._requests.put((event, answer))
        return answer.result()

    def step(self, wait: float | None = None) -> int:
        """Serve the requests waiting (until every one is answered), else wait up to ``wait`` (default
        ``tick``) real seconds for one, then advance virtual time by ``speed`` times the real time spent
        waiting. Returns the requests served."""
        served = self._serve_waiting()
        if not served:
            try:
                item = self._requests.get(timeout=self.tick if wait is None else wait)
            except queue.Empty:
                item = None
            waited = time.monotonic() - self._idle_since if not self.held else 0.0
            if waited > 0:
                self.cloud.run(
                    until=self.cloud.now() + timedelta(seconds=waited * self.speed),
                    stop_when=lambda: not self._requests.empty(),
                )
            if item is not None:
                self._start(*item)
                served = 1 + self._serve_waiting()
        while self._busy():
            # In virtual time only: the requests' own waits move the clock, real compute does not.
            result = self.cloud.run(stop_when=lambda: not self._busy() or not self._requests.empty())
            served += self._serve_waiting()
            if result.reason == "idle" and self._busy():
                time.sleep(0.001)  # a request thread between the simulation's waits (starting, answering)
        self._idle_since = time.monotonic()  # what the simulation just took is not waiting
        return served

    def _busy(self) -> bool:
        with self._lock:
            return self._in_flight > 0

    def serve_forever(self, stop: threading.Event, after_step: Callable[[], None] | None = None) -> None:
        """:meth:`step` until ``stop`` is set; ``after_step`` runs after each (printing the timeline)."""
        while not stop.is_set():
            self.step()
            if after_step is not None:
                after_step()

    def _serve_waiting(self) -> int:
        served = 0
        while True:
            try:
                event, answer = self._requests.get_nowait()
            except queue.Empty:
                return served
            self._start(event, answer)
            served += 1

    def _start(self, event: dict[str, Any], answer: Future[dict[str, Any]]) -> None:
        """Serve one request on a thread of its own (a simulation thread: the clock waits for it). A Slack
        signature is moved onto virtual time here, once the clock has caught up with the request's arrival."""
        if self.slack_clock is not None:
            event = self.slack_clock.translate_event(event)
        with self._lock:
            self._in_flight += 1
        threading.Thread(
            target=self._serve, args=(event, answer), name=f"api-request-{next(self._serial)}", daemon=True
        ).start()

    def _serve(self, event: dict[str, Any], answer: Future[dict[str, Any]]) -> None:
        try:
            response = self.cloud.api_request(event)
        except BaseException as exc:  # handed to the HTTP thread, which answers 502
            answer.set_exception(exc)
        else:
            answer.set_result(response)
        finally:
            with self._lock:
                self._in_flight -= 1
            self.cloud.clock.touch()


class SlackClock:
    """Re-signs Slack requests at the virtual instant as old as they are in real time (module docstring).

    Args:
        signing_secret: the local Slack signing secret (``SlackSigningSecret`` in local_values.json).
        virtual_now: the simulation's clock; ``real_now``: the real one (both tz-aware UTC).
    """

    def __init__(
        self,
        signing_secret: str,
        *,
        virtual_now: Callable[[], datetime],
        real_now: Callable[[], datetime],
    ) -> None:
        self._secret = signing_secret.encode("utf-8")
        self._virtual_now = virtual_now
        self._real_now = real_now

    def _sign(self, timestamp: str, body: bytes) -> str:
        base = b"v0:" + timestamp.encode("ascii") + b":" + body
        return "v0=" + hmac.new(self._secret, base, hashlib.sha256).hexdigest()

    def translate_event(self, event: dict[str, Any]) -> dict[str, Any]:
        """The proxy event with its Slack headers translated (:meth:`translate`), else unchanged."""
        body = str(event.get("body") or "")
        raw = base64.b64decode(body) if event.get("isBase64Encoded") else body.encode("utf-8")
        headers = [(str(k), str(v)) for k, v in (event.get("headers") or {}).items()]
        moved = self.translate(headers, raw)
        if moved == headers:
            return event
        values = dict(moved)
        multi = {
            key: [values[key]] if key in values else list(v)
            for key, v in (event.get("multiValueHeaders") or {}).items()
        }
        return {**event, "headers": values, "multiValueHeaders": multi}

    def translate(self, headers: list[tuple[str, str]], body: bytes) -> list[tuple[str, str]]:
        """The headers with ``X-Slack-Request-Timestamp`` moved to virtual time and the signature redone, when
        the request carries a valid local signature; otherwise unchanged."""
        found = {key.lower(): value for key, value in headers}
        timestamp = found.get(SLACK_TIMESTAMP.lower())
        signature = found.get(SLACK_SIGNATURE.lower())
        if not timestamp or not signature or not (timestamp.isascii() and timestamp.isdigit()):
            return headers
        if not hmac.compare_digest(self._sign(timestamp, body), signature):
            return headers  # not signed with the local secret: the handler refuses it, as Slack's would be
        age = self._real_now().timestamp() - int(timestamp)
        moved = str(int(self._virtual_now().timestamp() - age))
        replaced = {SLACK_TIMESTAMP.lower(): moved, SLACK_SIGNATURE.lower(): self._sign(moved, body)}
        return [(key, replaced.get(key.lower(), value)) for key, value in headers]
