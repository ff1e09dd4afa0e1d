"""Checks a run or grid makes before its first task, in a few seconds: each OpenAI-compatible endpoint answers, and a
key is there where one is needed. A dead endpoint otherwise costs a model call's whole retry budget (300 s by default)
before its error line, after the run folder is made.

`check_endpoint` asks ``GET <base_url>/models`` once with a short timeout and returns what it learnt (the ids the
endpoint serves: a run records the served model id, `skilltransfer.log.provenance`). Only what proves the
endpoint unusable fails: no connection, a timeout, 401/403. An endpoint that answers ``/models`` with another status
(some gateways do not serve it) passes: its first call says what is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.settings.config import ModelSpec
from skilltransfer.util.http_client import HttpFailure, HttpStatusError, fetch_json, openai_headers, shown_url

CHECK_TIMEOUT_S = 5.0
"""How long the check waits for an endpoint's answer."""
OPENAI_URL = "https://api.openai.com/v1"


@dataclass(frozen=True)
class EndpointInfo:
    """What the check learnt of an endpoint (empty for models that have none: local, scripted, a replayed cache)."""

    base_url: str | None = None
    served: list[str] = field(default_factory=list)
    """The model ids ``/models`` lists."""


def model_string(model: ModelSpec) -> str:
    """The model as a ``--model`` string: ``openai/<id>``, ``<id>@<url>``, ``<url>`` or the registry name (the URL
    without credentials)."""
    name = model.resolved_name()
    if name != "openai":
        return name if not model.model else f"{name}:{model.model}"
    url = shown_url(model.resolved_base_url() or OPENAI_URL)  # no credentials in a message
    model_id = model.resolved_model()
    if url == OPENAI_URL:
        return f"openai/{model_id}" if model_id else "openai"
    return f"{model_id}@{url}" if model_id else url


def check_endpoint(model: ModelSpec, *, timeout_s: float = CHECK_TIMEOUT_S) -> EndpointInfo:
    """Check that ``model``'s endpoint answers and has the key it needs (see the module docstring).

    Raises:
        InputError: one line naming the model string and what was tried.
    """
    if model.resolved_name() != "openai" or (model.cache_path and model.cache_mode == "ro"):
        return EndpointInfo()
    url = (model.resolved_base_url() or OPENAI_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        return EndpointInfo()  # building the client says what is wrong with it
    key = model.resolved_api_key()
    where = f"model {model_string(model)!r}"
    if url == OPENAI_URL and not key:
        raise InputError(f"{where} needs an API key: set OPENAI_API_KEY or give --api-key (or -c models.<label>."
                         "api_key=...)")
    probe = f"{url}/models"
    shown = shown_url(probe)
    try:  # bounded in size, depth and total time: a dripping, flooding or deep reply is one error line
        payload: Any = fetch_json(probe, openai_headers(key, model.headers), deadline_s=timeout_s,
                                  max_bytes=1 << 20)
    except HttpStatusError as exc:
        if exc.status in (401, 403):
            raise InputError(f"{where}: the endpoint refused the API key (GET {shown}: HTTP {exc.status}); check "
                             "OPENAI_API_KEY or --api-key") from None
        return EndpointInfo(url)
    except untrusted.UntrustedFileError as exc:
        if exc.reason.startswith("not JSON"):
            return EndpointInfo(url)  # it answered, with something else than JSON: its first call tells
        raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc.reason})") from None
    except HttpFailure as exc:
        if exc.kind in ("too_large", "bad_response"):
            raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc})") from None
        raise InputError(f"{where}: the endpoint does not answer (tried GET {shown} for {timeout_s:g} s: "
                         f"{exc}); start the server or fix --model / --base-url") from None
    entries = payload.get("data") if isinstance(payload, dict) else None
    served = [str(e["id"]) for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)] \
        if isinstance(entries, list) else []
    return EndpointInfo(url, served)


def check_endpoints(models: list[ModelSpec], *, timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, EndpointInfo]:
    """`check_endpoint` for each distinct endpoint (key: the model string); the first failure raises."""
    out: dict[str, EndpointInfo] = {}
    for model in models:
        name = model_string(model)
        if name not in out:
            out[name] = check_endpoint(model, timeout_s=timeout_s)
    return out
