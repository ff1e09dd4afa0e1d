"""What an OpenAI-compatible endpoint says of itself, asked once: ``GET <base_url>/models``; and the check a run or
grid makes with it before its first task.

`probe_endpoint` asks and returns the answer as a value (`EndpointProbe`) that travels to everyone who needs it, so a
run asks once (a grid: once per endpoint): the check (`check_endpoint`: the endpoint answers, the key is accepted),
the model id a run records when none is given (`served_model`: the endpoint's only model) and the client's context
window (`EndpointProbe.window`; ``make_model(config, probe=...)``). A client built without a probe asks once itself,
for both. The answer is untrusted input: bounded in size, depth and time, and read field by field.

The check takes a few seconds where a dead endpoint would otherwise cost a model call's whole retry budget (300 s by
default) before its error line, after the run folder is made. Only what proves the endpoint unusable fails: no
connection, a timeout, 401/403, a model list refused as too large or malformed. An endpoint that answers ``/models``
with another status (some gateways do not serve it) passes: its first call says what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from skilltransfer import untrusted
from skilltransfer.errors import InputError
from skilltransfer.llm.config import OPENAI_URL, ModelConfig
from skilltransfer.llm.context import window_from_models
from skilltransfer.util.http_client import (
    MAX_LISTING_BYTES,
    HttpClient,
    HttpFailure,
    HttpStatusError,
    fetch_json,
    openai_headers,
    shown_url,
)

PROBE_TIMEOUT_S = 10.0
"""How long a probe waits for the model list by default (the run's check waits `CHECK_TIMEOUT_S`)."""
CHECK_TIMEOUT_S = 5.0
"""How long the check before a run waits for an endpoint's answer."""
EndpointKey = tuple[str, str | None, tuple[tuple[str, str], ...]]
"""An endpoint as the check tells endpoints apart: its URL, key and extra headers."""
_Model = TypeVar("_Model", bound=ModelConfig)


@dataclass(frozen=True)
class EndpointProbe:
    """An endpoint's answer to ``GET <base_url>/models`` (or why there is none).

    Attributes:
        base_url: the endpoint asked (without a trailing ``/``).
        payload: the parsed answer; None when none was read.
        error: why none was read (an `OSError` of `skilltransfer.util.http_client`: no answer, an HTTP status, not
            JSON, too large); None when it answered.
    """

    base_url: str
    payload: Any = None
    error: OSError | None = None

    @property
    def served(self) -> list[str]:
        """The model ids the answer lists (none when it did not answer with a model list)."""
        entries = self.payload.get("data") if isinstance(self.payload, dict) else None
        if not isinstance(entries, list):
            return []
        return [str(e["id"]) for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]

    @property
    def llama_cpp(self) -> bool:
        """Whether the answer is llama.cpp's server's (its entries carry ``meta``; its running window is asked from
        ``/props``)."""
        entries = self.payload.get("data") if isinstance(self.payload, dict) else None
        return isinstance(entries, list) and any(isinstance(e, dict) and "meta" in e for e in entries)

    def window(self, model: str | None) -> int | None:
        """The context window the answer reports for ``model`` (else for its first entry); None: unknown."""
        return window_from_models(self.payload, model) if self.error is None else None

    def only_model(self) -> str:
        """The id of the one model the endpoint serves.

        Raises:
            InputError: it did not answer with a model list, or serves none or several (naming them and the flag
                that chooses one).
        """
        shown = shown_url(self.base_url)
        if self.error is not None or not isinstance(self.payload, dict) or not isinstance(self.payload.get("data"),
                                                                                           list):
            why = f": {self.error}" if self.error is not None else " did not answer with a model list"
            raise InputError(f"cannot read the model list of {shown} (GET {shown}/models{why}); give the model id: "
                             f"--model <id>@{shown} (or set SKILLTRANSFER_MODEL)")
        ids = self.served
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise InputError(f"the endpoint {shown} serves no model; give one: --model <id>@{shown}")
        listed = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
        raise InputError(f"the endpoint {shown} serves several models ({listed}); choose one: --model {ids[0]}@{shown}")


def probe_endpoint(base_url: str, api_key: str | None = None, headers: Mapping[str, str] | None = None, *,
                   timeout_s: float = PROBE_TIMEOUT_S, max_bytes: int = MAX_LISTING_BYTES,
                   client: HttpClient | None = None) -> EndpointProbe:
    """Ask ``GET <base_url>/models`` once; never raises (a failure is the probe's ``error``).

    Args:
        api_key, headers: the model's key and extra headers (``ModelConfig.headers``).
        timeout_s: the whole request's deadline.
        client: the endpoint's HTTP client to ask with (default: a new connection).
    """
    url = base_url.rstrip("/")
    try:  # bounded in size, depth and total time: a dripping, flooding or deep reply is an error, not a hang
        payload = fetch_json(f"{url}/models", openai_headers(api_key, headers), deadline_s=timeout_s,
                             max_bytes=max_bytes, client=client)
    except OSError as exc:
        return EndpointProbe(url, error=exc)
    return EndpointProbe(url, payload)


# --------------------------------------------------------------------------------------------- the check
def model_string(model: ModelConfig) -> str:
    """The model as a ``--model`` string: ``openai/<id>``, ``<id>@<url>``, ``<url>`` or the registry name (the URL
    without credentials)."""
    name = _name(model)
    if name != "openai":
        return name if not model.model else f"{name}:{model.model}"
    url = shown_url(model.resolved_base_url() or OPENAI_URL)  # no credentials in a message
    model_id = model.resolved_model()
    if url == OPENAI_URL:
        return f"openai/{model_id}" if model_id else "openai"
    return f"{model_id}@{url}" if model_id else url


def _name(model: ModelConfig) -> str:
    return model.name or ("openai" if model.resolved_base_url() else "local")


def endpoint_key(model: ModelConfig) -> EndpointKey | None:
    """The endpoint ``model`` is served from, when the check asks it (an "openai" model at an http(s) URL, not
    replayed from a read-only cache); None otherwise."""
    if _name(model) != "openai" or (model.cache_path and model.cache_mode == "ro"):
        return None
    url = (model.resolved_base_url() or OPENAI_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        return None  # building the client says what is wrong with it
    return url, model.resolved_api_key(), tuple(sorted(model.headers.items()))


def check_endpoint(model: ModelConfig, *, timeout_s: float = CHECK_TIMEOUT_S) -> EndpointProbe | None:
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
                         "OPENAI_API_KEY or --api-key")
    if isinstance(exc, untrusted.UntrustedFileError) and not exc.reason.startswith("not JSON"):
        raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc.reason})")
    if isinstance(exc, HttpFailure):
        if exc.kind in ("too_large", "bad_response"):
            raise InputError(f"{where}: the endpoint's model list is refused (GET {shown}: {exc})")
        raise InputError(f"{where}: the endpoint does not answer (tried GET {shown} for {timeout_s:g} s: "
                         f"{exc}); start the server or fix --model / --base-url")
    return probe  # answered (another status, or not JSON: its first call tells)


def check_endpoints(models: Iterable[ModelConfig], *,
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


def served_model(model: _Model, probe: EndpointProbe | None) -> tuple[_Model, EndpointProbe | None]:
    """``model`` with its model id read from its endpoint's answer when none is given (flag, spec or
    SKILLTRANSFER_MODEL) and the endpoint is not OpenAI's: its only model, so a run records (and the report tells
    apart) the model it ran; and the answer (``probe``, else asked now when the id is needed).

    Raises:
        InputError: no id is given and the endpoint serves none or several (naming them), or gave no model list.
    """
    url = (model.resolved_base_url() or OPENAI_URL).rstrip("/")
    if _name(model) != "openai" or model.resolved_model() or url == OPENAI_URL \
            or not url.startswith(("http://", "https://")):
        return model, probe
    if probe is None:  # not checked (a replayed cache): asked for the id alone, as the client would
        probe = probe_endpoint(url, model.resolved_api_key(), model.headers)
    return model.model_copy(update={"model": probe.only_model()}), probe
