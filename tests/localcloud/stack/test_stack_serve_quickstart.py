"""``make serve`` for a person trying the quickstart on any day: its virtual clock starts at the sample
events' time (not the wall clock) and stands there until the first request, the sample request is accepted as
written, and the models Slack's sample ``/gpu reserve`` names exist (``--setup``), as they must on AWS.

The server runs as ``python -m localcloud serve`` in a subprocess at ``make serve``'s default speed (3600x),
as tests/localcloud/stack/test_stack_serve_speed.py does. The waits below only bound a hang (a server that
never answers, a reservation that never moves); nothing here measures time."""

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

from events.slack_signed_request import COMMAND_PATH, command_body, headers, local_secret
from localcloud.cloud import LocalCloud
from localcloud.serving import SAMPLE_EPOCH, RealTimeDriver

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = Path(__file__).parent / "fixtures" / "template.yaml"
HANG = 600.0  # seconds: only a server that never answers reaches this


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _call(
    url: str, *, data: bytes | None = None, sent: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, str, datetime]:
    request = urllib.request.Request(url, data=data, headers=sent or {}, method=method)  # noqa: S310 - local
    try:
        with urllib.request.urlopen(request, timeout=HANG) as answer:  # noqa: S310 - a local URL
            return int(answer.status), answer.read().decode(), parsedate_to_datetime(answer.headers["Date"])
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(), parsedate_to_datetime(exc.headers["Date"])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, datetime]]:
    """``serve --speed 3600 --setup`` the two sample models (what ``make serve`` runs), and the ``Date`` of
    the first answer it gave."""
    port = _free_port()
    process = subprocess.Popen(  # noqa: S603 - our own module
        [
            sys.executable,
            "-m",
            "localcloud",
            "serve",
            "--speed",
            "3600",
            "--port",
            str(port),
            "--setup",
            "events/sagemaker_create_model_llama_eu.json",
            "--setup",
            "events/sagemaker_create_model_llama_us.json",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        began = time.monotonic()
        while True:
            try:
                first = _call(url + "/")[2]
                break
            except (ConnectionError, urllib.error.URLError) as exc:
                if process.poll() is not None or time.monotonic() - began > HANG:
                    raise RuntimeError(
                        f"serve did not start: {process.stderr.read().decode() if process.stderr else ''}"
                    ) from exc
                time.sleep(0.2)
        yield url, first
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_serve_starts_at_the_sample_events_time_not_the_wall_clock(server: tuple[str, datetime]) -> None:
    _, first = server

    # The first answer is the sample events' instant (give or take a driver step), whatever the date today.
    assert SAMPLE_EPOCH <= first < SAMPLE_EPOCH + timedelta(days=1)


def test_the_sample_request_is_accepted_as_written_on_any_day(server: tuple[str, datetime]) -> None:
    url, _ = server
    body = (ROOT / "events" / "reservation_request.json").read_bytes()  # a window from 2026-12-06

    status, text, _ = _call(
        url + "/reservations", data=body, sent={"Content-Type": "application/json"}, method="POST"
    )

    assert status == 202, text
    assert json.loads(text)["request_id"] == "eval-week-49"


def test_a_slack_reserve_naming_the_sample_models_waits_for_an_approver(server: tuple[str, datetime]) -> None:
    url, _ = server
    words = "reserve 2 ml.p5.48xlarge 3d from 2026-12-10 models=llama-eu,llama-us max=30000 approval=1000"
    body = command_body(f"{words} id=slack-quickstart")
    sent = headers(body, secret=local_secret(), timestamp=int(time.time()))

    status, text, _ = _call(url + COMMAND_PATH, data=body.encode(), sent=sent, method="POST")

    assert status == 200, text
    state = None
    began = time.monotonic()
    while state not in ("AWAITING_APPROVAL", "FAILED", "REJECTED"):
        assert time.monotonic() - began < HANG, f"slack-quickstart stays {state}"
        time.sleep(0.2)
        code, answer, _ = _call(url + "/reservations/slack-quickstart")
        state = json.loads(answer).get("state") if code == 200 else None
    # Not FAILED with ModelNotFound: serve created llama-eu and llama-us first, as their owner would on AWS.
    assert state == "AWAITING_APPROVAL", answer


def test_a_held_clock_stands_until_the_first_request_then_follows_real_time() -> None:
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    with LocalCloud(FIXTURE, start=start, stack_name="fixture") as cloud:
        driver = RealTimeDriver(cloud, speed=3600, tick=0.05, hold=True)

        driver.step(wait=0.2)
        driver.step(wait=0.2)
        held = cloud.now()
        driver.wake()  # what the HTTP server calls as a request arrives
        driver.step(wait=0.2)
        driver.step(wait=0.2)

        assert held == start
        assert cloud.now() > start
