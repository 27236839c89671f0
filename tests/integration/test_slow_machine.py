"""``make demo``'s run on a machine made slow on purpose: every Lambda first burns real CPU
(``LOCALCLOUD_LAMBDA_CPU_SECONDS``). Virtual time stands still while code runs, so no Lambda timeout, wait
or deadline is hit, and the hang detector (no progress for ``--stall-seconds``) never fires however long
the whole run takes: it ends ``ok`` with the same story."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcloud.cli import main

ROOT = Path(__file__).resolve().parents[2]
CPU_SECONDS = 0.25
STALL_SECONDS = 8.0


def test_the_demo_succeeds_with_every_lambda_slowed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOCALCLOUD_LAMBDA_CPU_SECONDS", str(CPU_SECONDS))
    monkeypatch.chdir(ROOT)

    status = main(
        [
            "run",
            "events/api_post_reservation.json",
            "--stall-seconds",
            str(STALL_SECONDS),
            "--progress",
            "never",
            "--verbose",
        ]
    )
    out = capsys.readouterr().out

    assert status == 0, out[-3000:]
    assert out.split("== Result\n", 1)[1].startswith("  ok\n")
    assert "== Cost summary (GET /costs: from what ran)" in out.rsplit("== Result", 1)[1]  # the last section
    assert "ReservationReady (capacity.orchestrator)" in out
    assert "ReleaseCapacityStateMachine: execution" in out
    assert "SUCCEEDED" in out
    assert "Sandbox.Timedout" not in out
    invocations = sum(1 for line in out.splitlines() if line[22:31] == "lambda   ")
    # The premise: the CPU burnt in all (invocations x 0.25 s) is beyond the hang detector's limit, which a
    # wall-time cap of that size would have failed.
    assert invocations * CPU_SECONDS > STALL_SECONDS, invocations
