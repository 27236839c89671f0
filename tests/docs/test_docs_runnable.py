"""Every command block of README.md and docs/*.md marked runnable runs as written and succeeds, on any date.

A block is runnable when its fence says so: ```` ```bash runnable ```` (GitHub shows it as any bash block).
It is run by ``bash -euo pipefail`` from the repository's root, so every command must succeed: ``curl``
lines say ``--fail-with-body``, ``capacity`` exits 0 only when it got what it asked for
(capacity_cli/exits.py). Two things differ from a person's terminal, and only these:

- a ``make serve ...`` line starts the server in the background (a person runs it in another terminal) and
  the block goes on once it answers; it listens on a free port, not 3000 (other tests run in parallel), so
  ``LOCALCLOUD_PORT`` names it (the Makefile and ``events/slack_signed_request.py`` read it) and the block's
  ``127.0.0.1:3000``/``localhost:3000`` are rewritten to it;
- with ``--clock-ahead-days N`` (tests/conftest.py) every Python process the block starts sees its wall
  clock N days ahead too (``tests/docs/clock_ahead/sitecustomize.py``): the server, ``capacity``, the Slack
  signer. ``make unit-future`` runs this file that way.

Blocks that need AWS or take minutes (``make demo``, ``make deploy``, ``--stack``) are plain ```` ```bash ````
blocks. The waits below only bound a hang; nothing here measures time.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = ("bash", "runnable")
HANG = 900.0
"""Seconds: a block (or a server start) that takes longer than this hangs; a slow machine never does."""
CLOCK_HOOK = Path(__file__).resolve().parent / "clock_ahead"
SERVE = re.compile(r"^make serve(?P<vars>(?:\s+[A-Z_]+=\S*)*)\s*(?:&\s*)?(?:#.*)?$")
LOCAL_URL = re.compile(r"(localhost|127\.0\.0\.1):3000\b")


@dataclass(frozen=True)
class Block:
    """A runnable block: where it is and its text."""

    path: Path
    line: int
    text: str

    @property
    def name(self) -> str:
        """``README.md:120``."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def runnable_blocks() -> list[Block]:
    """Every block fenced ```` ```bash runnable ```` in README.md and docs/*.md."""
    blocks = []
    for path in DOCUMENTS:
        lines = path.read_text(encoding="utf-8").splitlines()
        start: int | None = None
        tag: tuple[str, ...] = ()
        for number, line in enumerate(lines, start=1):
            if not line.startswith("```"):
                continue
            if start is None:
                start, tag = number, tuple(line[3:].split())
            else:
                if tag == MARKER:
                    blocks.append(Block(path, start, "\n".join(lines[start : number - 1]) + "\n"))
                start = None
    return blocks


def split_serve(text: str) -> tuple[list[str] | None, str]:
    """The ``make serve`` line's variables (None: the block needs no server) and the rest of the block."""
    serve: list[str] | None = None
    kept = []
    for line in text.splitlines():
        found = SERVE.match(line.strip())
        if found:
            serve = found.group("vars").split()
            continue
        kept.append(line)
    return serve, "\n".join(kept) + "\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(port: int, ahead_days: int) -> dict[str, str]:
    env = {
        **os.environ,
        "LOCALCLOUD_PORT": str(port),
        "CAPACITY_CONFIG": str(ROOT / "tests" / "docs" / "no-config.toml"),  # the reader's config: none
        "NO_COLOR": "1",
        "COLUMNS": "150",
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        env.pop(name, None)  # a person trying the quickstart need not have AWS credentials
    if ahead_days:
        env["CAPACITY_TEST_CLOCK_AHEAD_DAYS"] = str(ahead_days)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(CLOCK_HOOK), env.get("PYTHONPATH")]))
    return env


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30):
            return True
    except urllib.error.HTTPError:
        return True  # API Gateway's 403 for a path with no route: it answers
    except (OSError, urllib.error.URLError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # make and the server it started: their own group
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.fixture
def ahead_days(request: pytest.FixtureRequest) -> int:
    """``--clock-ahead-days``: how far ahead the wall clock of every process is."""
    return int(request.config.getoption("--clock-ahead-days"))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """The servers a block started (stopped afterwards, with their children)."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        _stop(process)


def test_the_docs_have_runnable_blocks() -> None:
    names = {block.name.split(":")[0] for block in runnable_blocks()}
    assert {"README.md", "docs/cli.md", "docs/api.md", "docs/slack.md"} <= names


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.name)
def test_a_runnable_block_runs_as_written(
    block: Block, ahead_days: int, served: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    port = _free_port()
    env = _environment(port, ahead_days)
    variables, script = split_serve(block.text)
    if variables is not None:
        log = (tmp_path / "serve.log").open("wb")
        server = subprocess.Popen(  # noqa: S603 - the Makefile's own target, as the block says
            ["make", "--no-print-directory", "serve", *variables],  # noqa: S607 - make is on PATH
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        served.append(server)
        began = time.monotonic()
        while not _answers(port):
            log_text = (tmp_path / "serve.log").read_text(errors="replace")
            assert server.poll() is None, f"make serve exited:\n{log_text}"
            assert time.monotonic() - began < HANG, f"make serve never answered:\n{log_text}"
            time.sleep(0.5)
    script = LOCAL_URL.sub(f"127.0.0.1:{port}", script)

    done = subprocess.run(  # noqa: S603 - the block as written
        ["bash", "-euo", "pipefail", "-c", script],  # noqa: S607 - bash is on PATH
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )

    assert done.returncode == 0, (
        f"{block.name} failed (exit {done.returncode}):\n{script}\n--- stdout\n{done.stdout}\n"
        f"--- stderr\n{done.stderr}"
    )
