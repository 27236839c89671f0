"""Every date a person meets in a command of README.md and docs/*.md, or in a sample request they send to
``make serve`` or ``capacity --local``, is ahead of the clock it is used against on any day: those clocks
start at the sample events' time (one instant, the same in the local cloud, the CLI and the samples), and a
date is at most eight weeks after it (what a capacity block may be bought ahead). A command for AWS
(``--stack``, ``make smoke``) names no date at all: only times relative to the API's clock (``+14d``)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from capacity_cli.targets import SAMPLE_EPOCH as CLI_EPOCH
from localcloud.serving import SAMPLE_EPOCH

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SAMPLES = ["reservation_request.json", "schedule_request.json", "api_post_reservation.json"]
DATE = re.compile(r"\b(20\d\d-\d\d-\d\d)(?:T(\d\d:\d\d(?::\d\d)?)Z?)?")
AHEAD = timedelta(weeks=8)
AWS = re.compile(r"--stack\b|make (smoke|deploy|remove)\b")


def _command_lines() -> list[tuple[str, str]]:
    """``(where, line)`` for every line of a ``bash`` or unlabelled fenced block (Slack commands)."""
    found = []
    for path in DOCUMENTS:
        fence: str | None = None
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].split()[0] if line[3:].split() else ""
                continue
            if fence in ("bash", ""):
                found.append((f"{path.relative_to(ROOT)}:{number}", line))
    return found


def _instant(date: str, time: str | None) -> datetime:
    return datetime.fromisoformat(f"{date}T{time or '00:00'}").replace(tzinfo=UTC)


def test_the_clocks_start_where_the_samples_are_written() -> None:
    event = json.loads((ROOT / "events" / "api_post_reservation.json").read_text())
    written = datetime.fromtimestamp(event["requestContext"]["requestTimeEpoch"] / 1000, UTC)

    assert SAMPLE_EPOCH == CLI_EPOCH == written == datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_every_date_in_a_command_is_ahead_of_the_local_clocks() -> None:
    late = [
        (where, found.group(0))
        for where, line in _command_lines()
        for found in DATE.finditer(line)
        if not SAMPLE_EPOCH <= _instant(found.group(1), found.group(2)) <= SAMPLE_EPOCH + AHEAD
    ]

    assert late == []


def test_a_command_for_aws_names_no_date() -> None:
    dated = [(where, line) for where, line in _command_lines() if AWS.search(line) and DATE.search(line)]

    assert dated == []


def test_the_sample_requests_sent_to_the_local_api_are_ahead_of_its_clock() -> None:
    times = []
    for name in SAMPLES:
        text = (ROOT / "events" / name).read_text()
        times += [(name, _instant(d, t)) for d, t in DATE.findall(text)]

    assert times  # the samples carry windows
    assert [(name, at) for name, at in times if not SAMPLE_EPOCH <= at <= SAMPLE_EPOCH + AHEAD] == []
