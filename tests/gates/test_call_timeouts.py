"""Every AWS call of a function fits well inside that function's timeout (issue 13, defect 3).

A call's worst case (every attempt timing out, plus botocore's standard-mode back-off) comes from the
function's ``AWS_CALL_TIMEOUTS`` (:class:`capacity.settings.CallTimeouts`); it must be at most half the
function's ``Timeout``, so one slow call surfaces as a named ``RetryableAwsError`` the state machine retries,
not as a Lambda stopped at its timeout in the middle of a step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from capacity.settings import CallTimeouts, Settings

from localcloud.template import Stack

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack() -> Stack:
    return Stack.load(ROOT / "template.yaml")


def test_every_functions_aws_calls_fit_in_half_its_timeout(stack: Stack) -> None:
    too_slow = {}
    for spec in stack.functions:
        timeouts = Settings.from_env(spec.environment).call_timeouts
        if timeouts.worst_case_seconds() > spec.timeout_seconds / 2:
            too_slow[spec.logical_id] = (timeouts.worst_case_seconds(), spec.timeout_seconds)
    assert too_slow == {}
    assert len(stack.functions) >= 15


def test_the_worst_case_counts_every_attempt_and_the_back_off_between() -> None:
    # 3 attempts x (3 s connect + 10 s read) + back-off 1 s + 2 s
    assert CallTimeouts(3, 10, 3).worst_case_seconds() == 42
    assert CallTimeouts(1, 2, 1).worst_case_seconds() == 3
    assert CallTimeouts.parse(" 1, 4 ,2").worst_case_seconds() == 11


@pytest.mark.parametrize("text", ["", "3,10", "3,10,0", "a,b,c", "3,-1,2", "1,2,3,4"])
def test_malformed_timeouts_are_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(ValueError, match="connect,read,attempts"):
        CallTimeouts.parse(text)
