"""Checks a run or grid makes before its first task, in a few seconds: each OpenAI-compatible endpoint answers, and a
key is there where one is needed. A dead endpoint otherwise costs a model call's whole retry budget (300 s by default)
before its error line, after the run folder is made.

`check_endpoint` asks ``GET <base_url>/models`` once with a short timeout (`skilltransfer.llm.endpoint`) and returns
the answer (`EndpointProbe`), which the run then passes on: the model id a run records when none is given, and the
client's context window, come from it, so a run asks ``/models`` once (a grid: once per endpoint). Only what proves
the endpoint unusable fails: no connection, a timeout, 401/403. An endpoint that answers ``/models`` with another
status (some gateways do not serve it) passes: its first call says what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.llm.endpoint import EndpointProbe, probe_endpoint
from skilltransfer.llm.modelstring import OPENAI_URL
from skilltransfer.settings.config import ModelSpec
from skilltransfer.util.http_client import HttpFailure, HttpStatusError, shown_url

CHECK_TIMEOUT_S = 5.0
"""How long the check waits for an endpoint's answer."""
EndpointKey = tuple[str, str | None, tuple[tuple[str, str], ...]]
"""An endpoint as the check tells endpoints apart: its URL, key and extra headers."""


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


def endpoint_key(model: ModelSpec) -> EndpointKey | None:
    """The endpoint ``model`` is served from, when the check asks it (an "openai" model at an http(s) URL, not
    replayed from a read-only cache); None otherwise."""
    if model.resolved_name() != "openai" or (model.cache_path and model.cache_mode == "ro"):
        return None
    url = (model.resolved_base_url() or OPENAI_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        return None  # building the client says what is wrong with it
    return url, model.resolved_api_key(), tuple(sorted(model.headers.items()))


def check_endpoint(model: ModelSpec, *, timeout_s: float = CHECK_TIMEOUT_S) -> EndpointProbe | None:
    """Check that ``model``'s endpoint answers and has the key it needs (see the module docstring); its answer, or
    None for a model that has no endpoint to ask (`endpoint_key`).

    Raises:
        InputError: one line naming the model string and what was tried.
    """
    key = endpoint_key(model)
    if key is None:
        return None
    url, api_key, _ = key
    where = f"model {model_string(model)!r}"
    if url == OPENAI_URL and not api_key:
        raise InputError(f"{where} needs an API key: set OPENAI_API_KEY or give --api-key (or -c models.<label>."
                         "api_key=...)")
    probe = probe_endpoint(url, api_key, model.headers, timeout_s=timeout_s, max_bytes=1 << 20)
    shown = shown_url(f"{url}/models")
    exc = probe.error
    if isinstance(exc, HttpStatusError) and exc.status in (401, 403):
        raise InputError(f"{where}: the endpoint refused the API key (GET {shown}: HTTP {exc.status}); check "
                         "OPENAI_API_KEY or --api-key") from None
    if isinstance(exc, untrusted.UntrustedFileError) and not exc.reason.startswith("not JSON"):
        raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc.reason})") from None
    if isinstance(exc, HttpFailure):
        if exc.kind in ("too_large", "bad_response"):
            raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc})") from None
        raise InputError(f"{where}: the endpoint does not answer (tried GET {shown} for {timeout_s:g} s: "
                         f"{exc}); start the server or fix --model / --base-url") from None
    return probe  # answered (another status, or not JSON: its first call tells)


def check_endpoints(models: Iterable[ModelSpec], *,
                    timeout_s: float = CHECK_TIMEOUT_S) -> dict[EndpointKey, EndpointProbe]:
    """`check_endpoint` once for each distinct endpoint (`endpoint_key`) of ``models``; the first failure raises."""
    out: dict[EndpointKey, EndpointProbe] = {}
    for model in models:
        key = endpoint_key(model)
        if key is not None and key not in out:
            probe = check_endpoint(model, timeout_s=timeout_s)
            if probe is not None:
                out[key] = probe
    return out


def served_model(model: ModelSpec, probe: EndpointProbe | None) -> tuple[ModelSpec, EndpointProbe | None]:
    """``model`` with its model id read from its endpoint's answer when none is given (flag, spec or
    SKILLTRANSFER_MODEL) and the endpoint is not OpenAI's: its only model, so a run records (and the report tells
    apart) the model it ran; and the answer (``probe``, else asked now when the id is needed).

    Raises:
        InputError: no id is given and the endpoint serves none or several (naming them), or gave no model list.
    """
    url = (model.resolved_base_url() or OPENAI_URL).rstrip("/")
    if model.resolved_name() != "openai" or model.resolved_model() or url == OPENAI_URL \
            or not url.startswith(("http://", "https://")):
        return model, probe
    if probe is None:  # not checked (a replayed cache): asked for the id alone, as the client would
        probe = probe_endpoint(url, model.resolved_api_key(), model.headers)
    return model.model_copy(update={"model": probe.only_model()}), probe
