"""Model strings as people write them (``--model openai/gpt-4o``, ``--model Qwen/Qwen2.5-7B@http://gpu:8000/v1``,
``--model local``, ``--model scripted:replies.jsonl``), turned into `ModelConfig` fields; and the model id an
OpenAI-compatible endpoint serves when it serves exactly one (``GET /v1/models``).

Forms:

- ``local`` or ``local:<file.gguf>``: the embedded llama.cpp model (the bundled one, or that GGUF file).
- ``openai`` or ``openai/<id>``: OpenAI's API (https://api.openai.com/v1, key from OPENAI_API_KEY) unless
  ``--base-url`` or OPENAI_BASE_URL names another endpoint.
- ``<id>@<url>`` (also written ``vllm/<id>@<url>`` or ``openai/<id>@<url>``): model ``<id>`` at any
  OpenAI-compatible endpoint (vLLM, llama.cpp's server, the mock server, ...).
- ``<url>`` or ``vllm/<url>``: the only model that endpoint serves (read from its ``/v1/models``).
- ``scripted:<file.jsonl>``: the scripted test double replaying that file's replies.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from skilltransfer.errors import InputError
from skilltransfer.util.http_client import fetch_json, openai_headers, shown_url

OPENAI_URL = "https://api.openai.com/v1"
"""The endpoint of ``openai`` / ``openai/<id>`` when no other endpoint is configured."""
FORMS = ("openai/<id>", "<id>@<url> (any OpenAI-compatible endpoint; also vllm/<id>@<url>)",
         "<url> (the endpoint's only model)", "local[:<file.gguf>]", "scripted:<file.jsonl>")
"""The model string forms, as error messages list them."""
_PROVIDERS = ("openai/", "vllm/")
_AT_URL = re.compile(r"^(?P<id>.*)@(?P<url>https?://\S+)$")


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://")) and bool(text.split("://", 1)[1].strip("/"))


def parse_model_string(text: str, *, flag: str = "--model") -> dict[str, str]:
    """The `ModelConfig` fields a model string sets (``name``, and ``model``, ``base_url``, ``script`` as given).

    Raises:
        InputError: a string of none of the forms (the message lists them and names ``flag``).
    """
    spec = text.strip()
    if spec in ("local", "openai", "scripted"):
        return {"name": spec}
    for name, field in (("local:", "model"), ("scripted:", "script")):
        if spec.startswith(name):
            value = spec[len(name):].strip()
            if not value:
                raise InputError(f"{flag} {text!r}: give a file after {name!r} ({name}<file>)")
            return {"name": name[:-1], field: value}
    provider = next((p for p in _PROVIDERS if spec.startswith(p)), "")
    rest = spec[len(provider):]
    match = _AT_URL.match(rest)
    if match is not None:
        model_id, url = match["id"].strip(), match["url"]
        if not model_id:
            return {"name": "openai", "base_url": url}
        return {"name": "openai", "model": model_id, "base_url": url}
    if _is_url(rest):
        return {"name": "openai", "base_url": rest}
    if provider and rest.strip():
        return {"name": "openai", "model": rest.strip()}
    raise InputError(f"{flag} {text!r} is not a model string; write one of: {', '.join(FORMS)}")


def served_model_ids(base_url: str, api_key: str | None = None, *, timeout_s: float = 10.0,
                     headers: Mapping[str, str] | None = None) -> list[str]:
    """The model ids ``GET <base_url>/models`` lists (``headers``: a model's ``headers`` setting).

    Raises:
        InputError: the endpoint cannot be reached or does not answer with a model list.
    """
    url = f"{base_url.rstrip('/')}/models"
    base_url, shown = shown_url(base_url), shown_url(url)
    try:  # bounded in size, depth and total time (an endpoint is untrusted input too)
        payload: Any = fetch_json(url, openai_headers(api_key, headers), deadline_s=timeout_s)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read the model list of {base_url} (GET {shown}: {exc}); give the model id: "
                         f"--model <id>@{base_url} (or set SKILLTRANSFER_MODEL)") from None
    entries = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{shown} did not answer with a model list; give the model id: --model <id>@{base_url}")
    return [str(e["id"]) for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


def only_served_model(base_url: str, api_key: str | None = None,
                      headers: Mapping[str, str] | None = None) -> str:
    """The id of the one model an endpoint serves.

    Raises:
        InputError: it serves none or several (naming them and the flag that chooses one).
    """
    ids = served_model_ids(base_url, api_key, headers=headers)
    base_url = shown_url(base_url)
    if len(ids) == 1:
        return ids[0]
    if not ids:
        raise InputError(f"the endpoint {base_url} serves no model; give one: --model <id>@{base_url}")
    shown = ", ".join(ids[:8]) + (f", ... ({len(ids)} in all)" if len(ids) > 8 else "")
    raise InputError(f"the endpoint {base_url} serves several models ({shown}); choose one: "
                     f"--model {ids[0]}@{base_url}")
