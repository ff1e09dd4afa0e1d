"""Model strings as people write them (``--model openai/gpt-4o``, ``--model Qwen/Qwen2.5-7B@http://gpu:8000/v1``,
``--model local``, ``--model scripted:replies.jsonl``, ``--model mypkg.models:MyChat``), turned into `ModelConfig`
fields (`ModelConfig.parse` builds the typed description from one).

Forms:

- ``local`` or ``local:<file.gguf>``: the embedded llama.cpp model (the bundled one, or that GGUF file).
- ``openai`` or ``openai/<id>``: OpenAI's API (https://api.openai.com/v1, key from OPENAI_API_KEY) unless
  ``--base-url`` or OPENAI_BASE_URL names another endpoint.
- ``<id>@<url>`` (also written ``vllm/<id>@<url>`` or ``openai/<id>@<url>``): model ``<id>`` at any
  OpenAI-compatible endpoint (vLLM, llama.cpp's server, the mock server, ...).
- ``<url>`` or ``vllm/<url>``: the only model that endpoint serves (read from its ``/v1/models``).
- ``scripted:<file.jsonl>``: the scripted test double replaying that file's replies.
- ``<module>:<Class>``: your own chat-model class, importable from ``sys.path`` (docs/models.md: what it must do;
  a spec file names one only with ``--allow-import <module>``).
"""

from __future__ import annotations

import re

from skilltransfer.errors import InputError

OPENAI_URL = "https://api.openai.com/v1"
"""The endpoint of ``openai`` / ``openai/<id>`` when no other endpoint is configured."""
FORMS = ("openai/<id>", "<id>@<url> (any OpenAI-compatible endpoint; also vllm/<id>@<url>)",
         "<url> (the endpoint's only model)", "local[:<file.gguf>]", "scripted:<file.jsonl>",
         "<module>:<Class> (your own chat-model class)")
"""The model string forms, as error messages list them."""
_PROVIDERS = ("openai/", "vllm/")
_AT_URL = re.compile(r"^(?P<id>.*)@(?P<url>https?://\S+)$")
CLASS_TARGET = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
"""A ``module:Class`` target (dotted names on both sides)."""


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://")) and bool(text.split("://", 1)[1].strip("/"))


def parse_model_string(text: str, *, flag: str = "--model") -> dict[str, str]:
    """The `ModelConfig` fields a model string sets (``name``, and ``model``, ``base_url``, ``script`` as given;
    ``name`` is a registry name or a ``module:Class`` target).

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
    if CLASS_TARGET.match(spec):
        return {"name": spec}
    raise InputError(f"{flag} {text!r} is not a model string; write one of: {', '.join(FORMS)}")
