"""Per-context-window accounting: main and subagent windows, peak context, communication tokens and share."""

from __future__ import annotations

import json

import pytest

from skilltransfer.metrics import ContextAccount


def test_account_of_a_task_with_two_subagents() -> None:
    account = ContextAccount()
    account.main.record_call(1000, 50)
    account.main.record_call(1400, 60)
    first = account.open_subagent("find_contact_email", sent_tokens=20, seed_tokens=300)
    first.record_call(300, 40)
    first.record_call(2000, 30)  # the subagent's own window grew past the main one
    first.returned_tokens = 15
    account.open_subagent("send_email", sent_tokens=30, seed_tokens=250).record_call(250, 20)
    account.skill_loads, account.nodes_opened = 1, 2
    assert account.main.peak_context == 1400
    assert account.peak_context == 2000
    assert account.subagent_calls == 2
    assert account.total_tokens == 1050 + 1460 + 340 + 2030 + 270
    # the seed prompt holds the inputs sent: they count once (seed + output returned)
    assert account.communication_tokens == (300 + 15) + (250 + 0)
    assert account.communication_share == pytest.approx(565 / account.total_tokens)
    data = json.loads(json.dumps(account.to_dict()))
    assert data["windows"][1]["communication_tokens"] == 315
    again = ContextAccount.from_dict(data)
    assert again == account
    assert again.to_dict() == account.to_dict()


def test_empty_account() -> None:
    account = ContextAccount()
    assert (account.peak_context, account.total_tokens, account.communication_share) == (0, 0, 0.0)
    assert ContextAccount.from_dict({}) == account
