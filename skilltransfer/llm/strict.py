"""Strict APIs: parameters an endpoint rejects are adapted once per model for the run.

OpenAI's reasoning models (o-series, GPT-5) answer HTTP 400 to ``max_tokens`` (they want ``max_completion_tokens``),
to ``stop`` and to a ``temperature`` other than 1, with an error body that names the parameter::

    {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use
     'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
     "code": "unsupported_parameter"}}

`ParamAdapter` learns from such a refusal (as LiteLLM's ``drop_params`` does by a table, here from the endpoint's own
answer): ``max_tokens`` is renamed ``max_completion_tokens``, any other named parameter is dropped; the request is
sent again, and every later request of the model is sent adapted. One ``warning:`` line names each change. The
changes (`ParamAdapter.changes`) are recorded in the run's ``config.json`` and handed back on resume, so a resumed or
repeated run sends what the first one ended up sending. Requests that carry a parameter (or a value) no answered
request carried yet go one at a time, so a run gets at most one refusal per rejected parameter.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from skilltransfer.util.terminal import echo

RENAMES: dict[str, str] = {"max_tokens": "max_completion_tokens"}
"""A rejected parameter sent under another name instead."""
DROPPED = "dropped"
ADAPTABLE = ("max_tokens", "stop", "temperature", "top_p", "seed", "presence_penalty", "frequency_penalty",
             "logit_bias", "logprobs", "top_logprobs", "n", "reasoning_effort", "parallel_tool_calls")
"""Parameters that may be adapted when an endpoint rejects them by name (never ``model`` or ``messages``)."""
BY_VALUE = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "reasoning_effort")
"""Parameters an endpoint may accept at one value and reject at another: confirmed per value."""
_NAMED = re.compile(r"Unsupported (?:parameter|value): '(\w+)'")


def rejected_parameter(status: int, body: Any, message: str, sent: Mapping[str, Any]) -> str | None:
    """The parameter a 400 refusal names (its ``param``, else ``Unsupported parameter: 'x'`` in the message), when
    it is one `ParamAdapter` may adapt and the request carried it; None otherwise."""
    if status != 400:
        return None
    error = body.get("error", body) if isinstance(body, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    if not isinstance(param, str):
        match = _NAMED.search(message or "")
        param = match.group(1) if match else None
    extra = sent.get("extra_body")
    if param in ADAPTABLE and (param in sent or (isinstance(extra, dict) and param in extra)):
        return param
    return None


def _key(name: str, value: Any) -> str:
    return f"{name}={value!r}" if name in BY_VALUE else name


def cut_at_stop(text: str, stop: str | Sequence[str] | None) -> tuple[str, bool]:
    """``text`` cut before the first occurrence of a stop string (as a server honouring ``stop`` would), and whether
    it was cut."""
    stops = [stop] if isinstance(stop, str) else [s for s in (stop or []) if isinstance(s, str) and s]
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return (text[: min(found)], True) if found else (text, False)


class ParamAdapter:
    """The parameter changes of one model for the run.

    Args:
        label: names the model in the warning line.
        known: changes recorded earlier (a resumed run's ``config.json``), applied from the first request.
    """

    def __init__(self, label: str, known: Mapping[str, str] | None = None) -> None:
        self.label = label
        self.changes: dict[str, str] = {}
        """Rejected parameter -> what is sent instead (``max_completion_tokens``) or ``dropped``."""
        self.refusals: dict[str, int] = {}
        """Refusals received per parameter (a run gets at most one each)."""
        self._confirmed: set[str] = set()
        self._lock = threading.Lock()
        self.learning = threading.Lock()
        """Held by a request that carries something not confirmed yet (see the module docstring)."""
        self.adopt(known or {})

    def adopt(self, changes: Mapping[str, str]) -> None:
        """Apply recorded changes (silently: they were announced when learnt)."""
        with self._lock:
            for name, change in changes.items():
                if name in ADAPTABLE and change in (RENAMES.get(name), DROPPED):
                    self.changes[name] = change

    def apply(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``body`` with the changes made (in ``extra_body`` too)."""
        with self._lock:
            changes = dict(self.changes)
        out = dict(body)
        for part in (out, out.get("extra_body")):
            if not isinstance(part, dict):
                continue
            for name, change in changes.items():
                if name in part:
                    value = part.pop(name)
                    if change != DROPPED:
                        part.setdefault(change, value)
        return out

    def unconfirmed(self, body: Mapping[str, Any]) -> bool:
        """Whether ``body`` carries an adaptable parameter (or value) that no answered request carried."""
        keys = _keys(body)
        with self._lock:
            return not keys <= self._confirmed

    def confirm(self, body: Mapping[str, Any]) -> None:
        """Record that the endpoint answered ``body``."""
        keys = _keys(body)
        with self._lock:
            self._confirmed |= keys

    def learn(self, name: str) -> None:
        """Adapt ``name`` from now on, with one warning line."""
        change = RENAMES.get(name, DROPPED)
        with self._lock:
            self.refusals[name] = self.refusals.get(name, 0) + 1
            if self.changes.get(name) == change:
                return
            self.changes[name] = change
        what = f"sends {change} instead" if change != DROPPED else "drops it"
        line = f"warning: model {self.label} rejected {name!r} (HTTP 400); the run {what} from now on " \
               "(recorded in config.json)"
        echo(line, err=True)


def _keys(body: Mapping[str, Any]) -> set[str]:
    extra = body.get("extra_body")
    parts = [body, extra] if isinstance(extra, dict) else [body]
    return {_key(name, part[name]) for part in parts for name in [*ADAPTABLE, *RENAMES.values()] if name in part}


def _adapter(model: Any) -> ParamAdapter | None:
    from skilltransfer.llm.context import model_chain

    return next((part.adapter for part in model_chain(model)
                 if isinstance(getattr(part, "adapter", None), ParamAdapter)), None)


def param_changes(model: Any) -> dict[str, str]:
    """The parameter changes a model (or the model it wraps) learnt so far; {} for a model without an adapter."""
    adapter = _adapter(model)
    return dict(adapter.changes) if adapter is not None else {}


def adopt_param_changes(model: Any, changes: Mapping[str, str]) -> None:
    """Send ``changes`` (a resumed run's record) from the model's next request on; no-op without an adapter."""
    adapter = _adapter(model)
    if adapter is not None and changes:
        adapter.adopt(changes)
