"""A model at an endpoint as people write it, ``<id>@<url>``: the one split the model strings (``--model``) and the
embedder specs (``--embedder``) share, so a URL that carries credentials (``bge@http://user:pw@host/v1``) splits at
the ``@`` before the URL, not at the last one; and such a string as it is recorded and shown (`without_credentials`)."""

from __future__ import annotations

import re

_AT_URL = re.compile(r"^(?P<id>.*?)@(?P<url>https?://\S+)$")
"""``<id>@<url>``: the id is everything before the first ``@http://`` or ``@https://``."""


def split_at_url(text: str) -> tuple[str, str] | None:
    """(model id, URL) of ``<id>@<url>`` (the id stripped, possibly empty), else None."""
    match = _AT_URL.match(text.strip())
    if match is None:
        return None
    return match["id"].strip(), match["url"]


_CREDENTIALS = re.compile(r"(?i)\b(https?://)[^/@\s?#]*@")


def without_credentials(text: str) -> str:
    """``text`` with the credentials of every http(s) URL in it left out (``http://user:pw@host`` -> ``http://host``):
    what a setting that names an endpoint is recorded and shown as."""
    return _CREDENTIALS.sub(r"\1", text)
