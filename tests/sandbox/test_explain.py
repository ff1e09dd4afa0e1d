"""Errors that explain themselves: NameError suggestions and API results whose failing lookups name the API."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import pytest

from skilltransfer.sandbox import NamespaceSpec, SandboxRunner, Services
from skilltransfer.sandbox.inprocess import InProcessRunner
from skilltransfer.sandbox.runtime.explain import ApiDict, ApiList, explained, format_error
from skilltransfer.sandbox.services import function

ACCOUNTS = [{"account_name": "email", "username": "ann@x.io", "password": "p1"},
            {"account_name": "contacts", "username": "ann", "password": "p2"}]


def raised(code: str, names: dict[str, object]) -> str:
    try:
        exec(compile(code, "<action>", "exec"), names)
    except Exception as exc:  # noqa: BLE001 - the test inspects whatever the code raised
        return format_error(exc, names)
    raise AssertionError("the code did not raise")


def test_results_look_like_plain_json_values() -> None:
    result = explained({"items": ACCOUNTS, "n": 2}, "apis.supervisor.show")
    assert isinstance(result, ApiDict)
    assert isinstance(result["items"], ApiList)
    assert isinstance(result["items"][0], dict)
    assert result == {"items": ACCOUNTS, "n": 2}
    assert repr(result) == repr({"items": ACCOUNTS, "n": 2})
    assert json.loads(json.dumps(result)) == result
    assert copy.deepcopy(result) == result
    assert pickle.loads(pickle.dumps(result)) == result
    assert result.get("missing") is None
    assert "missing" not in result
    assert result["items"][-1:] == ACCOUNTS[-1:]


def test_indexing_a_list_with_a_string_names_the_api_its_keys_and_the_matching_item() -> None:
    names = {"accounts": explained(ACCOUNTS, "apis.supervisor.show_account_passwords")}
    error = raised('accounts["contacts"]', names)
    assert "TypeError: list indices must be integers or slices, not str." in error
    assert "show_account_passwords() returned a list of 2 dicts with keys account_name, username" in error
    assert 'next(x for x in result if x["account_name"] == "contacts")' in error
    assert "loop over it, or index it with a number" in raised('accounts["nobody"]', names)


def test_a_missing_key_lists_the_keys_and_an_empty_result_says_so() -> None:
    names = {"accounts": explained(ACCOUNTS, "apis.supervisor.show_account_passwords"),
             "found": explained([], "apis.contacts.search_contacts")}
    error = raised('accounts[0]["phone"]', names)
    assert "KeyError" in error
    assert "'phone': not in this dict from apis.supervisor.show_account_passwords()" in error
    assert "its keys are account_name, username, password" in error
    assert "search_contacts() returned an empty list" in raised("found[0]", names)
    assert "returned 2 item(s)" in raised("accounts[5]", names)


def test_a_name_error_suggests_a_close_name() -> None:
    suggested = raised("print(account)", {"accounts": 1})
    assert "NameError: name 'account' is not defined. Did you mean: 'accounts'?" in suggested
    assert "Did you mean" not in raised("print(token)", {"accounts": 1})
    assert "Did you mean" not in format_error(ValueError("account"), {"accounts": 1})


def test_a_binding_note_is_added_to_failing_lookups() -> None:
    names = {"accounts": explained(ACCOUNTS, "apis.supervisor.show_account_passwords", "Tokens come from login")}
    assert raised('accounts[0]["access_token"]', names).rstrip().endswith(". Tokens come from login\"")
    assert raised('accounts["access_token"]', names).rstrip().endswith("a number. Tokens come from login")


@pytest.mark.parametrize("sandboxed", [True, False])
def test_service_results_explain_themselves_in_both_runners(tmp_path: Path, sandboxed: bool) -> None:
    services = Services()
    services.register("apis.supervisor.show_account_passwords", lambda: ACCOUNTS)
    spec = NamespaceSpec(bindings={"accounts": function("apis.supervisor.show_account_passwords")})
    runner = SandboxRunner(tmp_path, spec, services) if sandboxed else InProcessRunner(tmp_path, spec, services)
    try:
        result = runner.execute(f'rows = accounts()\nprint(rows == {ACCOUNTS!r})\nrows["contacts"]')
        assert result.output.strip() == "True"
        assert 'x["account_name"] == "contacts"' in (result.error or "")
        assert "Did you mean: 'rows'?" in (runner.execute("print(row)").error or "")
    finally:
        runner.close()
