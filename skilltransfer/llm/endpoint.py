"""What an OpenAI-compatible endpoint says of itself, asked once: ``GET <base_url>/models``.

`probe_endpoint` asks and returns the answer as a value (`EndpointProbe`) that travels to everyone who needs it, so a
run asks once: the run's endpoint check (`skilltransfer.runner.preflight`: the endpoint answers, the key is
accepted), the model id a run records when none is given (the endpoint's only model, `EndpointProbe.only_model`)
and the client's context window (`EndpointProbe.window`; ``OpenAIChatModel(config, probe=...)``). A client built
without a probe asks once itself, for both. The answer is untrusted input: bounded in size, depth and time, and read
field by field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.llm.context import window_from_models
from skilltransfer.util.http_client import MAX_LISTING_BYTES, HttpClient, fetch_json, openai_headers, shown_url

PROBE_TIMEOUT_S = 10.0
"""How long a probe waits for the model list by default (the run's check waits less, `runner.preflight`)."""


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
