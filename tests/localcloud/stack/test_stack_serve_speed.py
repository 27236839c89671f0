"""``make serve`` at its default speed (3600x) with every Lambda slowed down on purpose (real CPU work
injected before each handler, ``LOCALCLOUD_LAMBDA_CPU_SECONDS``): real compute never counts against a virtual
deadline, so the README's POST then GET answer as on AWS, and a Slack request signed with real time is
accepted. The server runs as ``python -m localcloud serve`` in a subprocess, the command ``make serve`` runs.

The waits below only bound a hang (a server that never answers); nothing here measures time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from capacity.timeutil import iso_z

from events.slack_signed_request import COMMAND_PATH, command_body, headers, local_secret

ROOT = Path(__file__).resolve().parents[3]
HANG = 300.0  # seconds: only a server that never answers reaches this


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _call(
    url: str, *, data: bytes | None = None, sent: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=sent or {}, method=method)  # noqa: S310 - local
    try:
        with urllib.request.urlopen(request, timeout=HANG) as answer:  # noqa: S310 - a local URL
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


@pytest.fixture(scope="module")
def slow_server() -> Iterator[str]:
    """``serve --speed 3600`` whose every Lambda first burns 0.05 s of real CPU (180 virtual s at 3600x,
    six times the API function's 29 s timeout if real time counted)."""
    port = _free_port()
    env = {**os.environ, "LOCALCLOUD_LAMBDA_CPU_SECONDS": "0.05", "PYTHONUNBUFFERED": "1"}
    # --start now: these tests are about real time against virtual time, from the real date.
    command = [sys.executable, "-m", "localcloud", "serve", "--speed", "3600", "--port", str(port)]
    process = subprocess.Popen(  # noqa: S603 - our own module
        [*command, "--start", "now"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        began = time.monotonic()
        while True:
            try:
                _call(url + "/")
                break
            except (ConnectionError, urllib.error.URLError) as exc:
                if process.poll() is not None or time.monotonic() - began > HANG:
                    raise RuntimeError(
                        f"serve did not start: {process.stderr.read().decode() if process.stderr else ''}"
                    ) from exc
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _server_now(url: str) -> datetime:
    """The server's (virtual) clock, from its ``Date`` header."""
    return datetime.fromtimestamp(time.time() + _virtual_ahead_seconds(url), UTC)


def test_a_post_then_a_get_answer_at_3600x_with_slow_lambdas(slow_server: str) -> None:
    # The sample body, its window moved to a week after the server's clock (which starts at the real time)
    sample = json.loads((ROOT / "events" / "reservation_request.json").read_text())
    start = _server_now(slow_server).replace(minute=0, second=0, microsecond=0) + timedelta(days=7)
    sample |= {"earliest_start": iso_z(start), "latest_end": iso_z(start + timedelta(days=7))}
    body = json.dumps(sample).encode()
    posted = _call(
        slow_server + "/reservations", data=body, sent={"Content-Type": "application/json"}, method="POST"
    )
    assert posted[0] == 202, posted
    request_id = json.loads(posted[1])["request_id"]

    status, text = _call(f"{slow_server}/reservations/{request_id}")

    assert status == 200, text
    assert json.loads(text)["request_id"] == request_id


def _virtual_ahead_seconds(url: str) -> float:
    """How far the server's (virtual) clock, its ``Date`` header, is ahead of the real one."""
    request = urllib.request.Request(url + "/", method="GET")  # noqa: S310 - a local URL
    try:
        with urllib.request.urlopen(request, timeout=HANG) as answer:  # noqa: S310 - a local URL
            date = answer.headers["Date"]
    except urllib.error.HTTPError as exc:  # no route at / answers 403, with its Date header
        date = exc.headers["Date"]
    return parsedate_to_datetime(date).timestamp() - time.time()


def test_a_slack_command_signed_with_real_time_is_accepted_at_3600x(slow_server: str) -> None:
    # Given the simulation's clock an hour or more ahead of the real one (a real second idle is an hour)
    began = time.monotonic()
    while _virtual_ahead_seconds(slow_server) < 3600:
        assert time.monotonic() - began < HANG, "the virtual clock does not move"
        time.sleep(0.2)
    # When Slack signs with its own (real) clock
    body = command_body("help")
    sent = headers(body, secret=local_secret(), timestamp=int(time.time()))

    status, text = _call(slow_server + COMMAND_PATH, data=body.encode(), sent=sent, method="POST")

    assert status == 200, text
    assert "/gpu" in text


def test_a_slack_request_six_real_minutes_old_is_still_refused(slow_server: str) -> None:
    body = command_body("help")
    sent = headers(body, secret=local_secret(), timestamp=int(time.time()) - 360)

    status, text = _call(slow_server + COMMAND_PATH, data=body.encode(), sent=sent, method="POST")

    assert status == 401, text
    assert "more than 5 minutes" in text
