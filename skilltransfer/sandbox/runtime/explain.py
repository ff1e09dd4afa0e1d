"""Errors that explain themselves: what an action's traceback and an API result's lookup errors tell the agent.

Small models repeat a failing line when the error only says ``list indices must be integers or slices, not str``.
Two things make the observation say what went wrong instead:

* ``format_error`` keeps only the frames of the agent's own code and, for a ``NameError``, adds Python's own
  ``Did you mean: ...?`` (printed by Python 3.12+, missing from 3.11's ``traceback`` module) from the names defined;
* ``explained`` returns a service's JSON result as ``ApiList``/``ApiDict``: plain ``list``/``dict`` subclasses (same
  ``repr``, ``==``, JSON and iteration) whose failing lookups name the API, what it returned and how to pick a value,
  plus the binding's ``lookup_note`` if it has one (an env's word on a frequent confusion about that API's result).

Standard library only: this module runs inside the sandbox worker.
"""

from __future__ import annotations

import builtins
import difflib
import traceback
from typing import Any

SHOWN_KEYS = 12


def format_error(exc: BaseException, names: dict[str, Any] | None = None) -> str:
    """A traceback keeping only the frames of the agent's own code (``<action>``, ``<skill>``), with a name hint."""
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(line for line in lines if 'File "' not in line or "<action>" in line or "<skill>" in line)
    hint = _name_hint(exc, names or {})
    if hint and "Did you mean" not in text:
        text = text.rstrip("\n") + f". {hint}\n"
    return text


def _name_hint(exc: BaseException, names: dict[str, Any]) -> str:
    name = getattr(exc, "name", None)
    if type(exc) is not NameError or not isinstance(name, str):
        return ""
    known = [key for key in names if not key.startswith("__")] + dir(builtins)
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return f"Did you mean: {close[0]!r}?" if close else ""


def explained(value: Any, source: str, note: str = "") -> Any:
    """``value`` (a decoded JSON result of ``source``) with its lists and dicts, at any depth, as ApiList/ApiDict."""
    if type(value) is list:
        return ApiList([explained(item, source, note) for item in value], source, note)
    if type(value) is dict:
        return ApiDict({key: explained(item, source, note) for key, item in value.items()}, source, note)
    return value


def _keys(mapping: dict[str, Any]) -> str:
    keys = [str(key) for key in mapping]
    more = f", ... ({len(keys) - SHOWN_KEYS} more)" if len(keys) > SHOWN_KEYS else ""
    return ", ".join(keys[:SHOWN_KEYS]) + more


def _noted(note: str) -> str:
    return f". {note}" if note else ""


class ApiList(list):
    """A list returned by an API; indexing it with a string or past its end says what it holds."""

    def __init__(self, items: list[Any], source: str, note: str = "") -> None:
        super().__init__(items)
        self.api_source = source
        self.api_note = note

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            raise TypeError(f"list indices must be integers or slices, not str. {self._described()}; "
                            f"{self._pick(index)}{_noted(self.api_note)}") from None
        try:
            return super().__getitem__(index)
        except IndexError:
            if not self:
                raise IndexError(f"list index out of range: {self.api_source}() returned an empty list "
                                 "(nothing matched; try another query, or a later page)") from None
            raise IndexError(f"list index out of range: {self.api_source}() returned {len(self)} item(s)") from None

    def _described(self) -> str:
        first = next(iter(self), None)
        if isinstance(first, dict) and all(isinstance(item, dict) for item in self):
            return f"{self.api_source}() returned a list of {len(self)} dicts with keys {_keys(first)}"
        return f"{self.api_source}() returned a list of {len(self)} item(s)"

    def _pick(self, wanted: str) -> str:
        for item in self:
            if isinstance(item, dict):
                for key, field in item.items():
                    if field == wanted:
                        return f'pick the item with e.g. next(x for x in result if x["{key}"] == "{wanted}")'
        return "loop over it, or index it with a number"


class ApiDict(dict):
    """A dict returned by an API; a missing key lists the keys it has."""

    def __init__(self, items: dict[str, Any], source: str, note: str = "") -> None:
        super().__init__(items)
        self.api_source = source
        self.api_note = note

    def __missing__(self, key: Any) -> Any:
        raise KeyError(f"{key!r}: not in this dict from {self.api_source}(); its keys are {_keys(self)}"
                       f"{_noted(self.api_note)}")
