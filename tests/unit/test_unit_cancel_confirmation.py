"""A cancel's confirmation names every fee at stake (issue 28): the upfront fee, the paid extensions, each
extension whose payment is in flight, and those of the successors the cancel stops, in the API's 409 and in
Slack's question."""

from __future__ import annotations

from typing import Any

from capacity.errors import PaidReservation
from capacity.logic.doors import api, slack_door

PAID: dict[str, Any] = {
    "request_id": "eval-week-49",
    "upfront_fee_usd": "1990.60",
    "refunded_usd": "0",
    "saves_usd": "0",
    "what": "training plan co-eval-week-49",
    "end_time": "2026-12-11T11:30:00Z",
    "purchase_on_its_way": False,
    "extension_fees_usd": "663.53",
    "extensions_in_flight": [{"extension_id": "tpe-2", "upfront_fee_usd": "700"}],
}
SUCCESSOR: dict[str, Any] = {
    "request_id": "eval-week-49-r1",
    "upfront_fee_usd": "2100",
    "refunded_usd": "0",
    "saves_usd": "0",
    "what": "training plan co-eval-week-49-r1",
    "end_time": "2026-12-14T11:30:00Z",
    "purchase_on_its_way": False,
    "extension_fees_usd": "0",
    "extensions_in_flight": [],
}


def test_the_confirmation_names_every_fee_of_the_chain_and_the_total() -> None:
    text = api.stake_text([PAID, SUCCESSOR])

    assert (
        "reservation eval-week-49 has a paid training plan co-eval-week-49: its upfront fee $1,990.60" in text
    )
    assert "its paid extensions $663.53, not refunded either" in text
    assert "an extension (tpe-2) whose payment of $700.00 is in flight" in text
    assert (
        "Reservation eval-week-49-r1 has a paid training plan co-eval-week-49-r1: its upfront fee $2,100.00"
        in text
    )
    assert text.endswith("In all $5,454.13 is not refunded")


def test_one_fee_alone_needs_no_total() -> None:
    text = api.stake_text([SUCCESSOR])

    assert "In all" not in text
    assert "$2,100.00" in text


def test_slack_asks_with_every_fee_and_the_total_in_its_dialog() -> None:
    paid = PaidReservation("...", {**PAID, "at_stake": [PAID, SUCCESSOR], "not_refunded_usd": "5454.13"})

    answer = slack_door._confirm_cancel("eval-week-49", paid)

    assert "whose payment of $700.00 is in flight" in answer["text"]
    assert "eval-week-49-r1" in answer["text"]
    assert answer["text"].endswith("Cancel anyway?")
    (button,) = answer["blocks"][1]["elements"]
    assert button["confirm"]["text"]["text"] == "$5,454.13 is not refunded."
