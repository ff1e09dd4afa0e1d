"""The secrets the process holds (API keys, passwords in endpoint and proxy URLs, credential headers) and their
redaction by value from every message that reaches a terminal (`skilltransfer.util.terminal`, the CLI's ``error:``
line).

A message may quote a secret in any form: as given, with the line break it carried (``Illegal header value
b'Bearer sk-...\\n'``), escaped as Python shows bytes or strings, percent-encoded as in a URL, or as the Basic auth
header of a URL's credentials. `redact` replaces each of those forms of every known secret with ``***``, so what a
message says no longer depends on how it was made. Secrets are known once registered (`register`, `register_url`,
`register_headers`: the HTTP client registers the key, headers and URL of every endpoint it is built for) and from
the environment (``OPENAI_API_KEY`` and the proxy variables), read at each call.

`api_key` is the one reading of a key: surrounding whitespace (the line break ``export KEY=$(...)`` or a CRLF file
leaves) is trimmed with a warning; a key with a control character or space inside is refused without being shown.
"""

from __future__ import annotations

import base64
import logging
import os
import threading
from collections.abc import Mapping
from urllib.parse import quote, unquote, urlsplit

from skilltransfer.errors import InputError

log = logging.getLogger(__name__)

REDACTED = "***"
"""What a secret reads as in a message."""
MIN_CHARS = 6
"""Shorter values are not redacted by value (a test's ``--api-key x`` would blank every ``x``); a URL's password is
never shown anyway (`skilltransfer.util.http_client.shown_url`)."""
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
"""The environment variables whose URLs may carry a proxy password."""
CREDENTIAL_HEADER_WORDS = ("auth", "key", "token", "secret", "password", "cookie", "session", "signature")
"""A header whose name holds one of these (case-insensitively) carries a credential; its value is a secret."""
_PLACEHOLDERS = frozenset({"sk-no-key"})
"""Stand-ins the toolkit sends without a key: not secrets."""

_known: set[str] = set()
_lock = threading.Lock()
_warned: set[int] = set()


def _forms(value: str) -> set[str]:
    """The forms a message may quote ``value`` in (see the module docstring), each at least `MIN_CHARS` long."""
    forms = {value, value.strip(), repr(value)[1:-1], quote(value, safe=""), unquote(value)}
    try:
        forms.add(repr(value.encode("utf-8"))[2:-1])
    except UnicodeEncodeError:  # lone surrogates: no bytes form
        pass
    forms.update(part for part in value.split() if len(part) >= MIN_CHARS)  # a key that carried a line break
    return {form for form in forms if len(form) >= MIN_CHARS and form not in _PLACEHOLDERS}


def register(*values: str | None) -> None:
    """Know each of ``values`` as a secret from now on (None, empty and short values are ignored)."""
    forms: set[str] = set()
    for value in values:
        if isinstance(value, str) and value.strip():
            forms |= _forms(value)
    if forms:
        with _lock:
            _known.update(forms)


def register_url(url: str | None) -> None:
    """Know the password a URL carries (``http://user:password@host``), and its Basic auth value, as secrets."""
    if not url:
        return
    try:
        parts = urlsplit(url.strip())
        user, password = parts.username, parts.password
    except ValueError:  # not a URL: nothing to find
        return
    if password:
        pair = f"{unquote(user or '')}:{unquote(password)}"
        register(password, unquote(password), base64.b64encode(pair.encode("utf-8")).decode("ascii"))


def register_headers(headers: Mapping[str, str] | None) -> None:
    """Know the values of credential headers (``Authorization`` and every name in `CREDENTIAL_HEADER_WORDS`)."""
    for name, value in (headers or {}).items():
        if any(word in name.lower() for word in CREDENTIAL_HEADER_WORDS):
            scheme, _, credential = str(value).partition(" ")
            register(str(value), credential if scheme.lower() in ("bearer", "basic", "token") else None)


_ENVIRONMENT = ("OPENAI_API_KEY", *PROXY_VARIABLES)
_cache: tuple[tuple[object, ...], list[str]] = ((), [])
"""(what `known` was computed from, its answer): redaction runs on every printed segment."""


def _environment(values: tuple[str | None, ...]) -> set[str]:
    key, *proxies = values
    forms = _forms(key) if key else set()
    for url in proxies:
        try:
            password = urlsplit(url.strip()).password if url else None
        except ValueError:
            password = None
        if password:
            forms |= _forms(password) | _forms(unquote(password))
    return forms


def known() -> list[str]:
    """Every form of every secret known now, longest first (the order `redact` replaces them in)."""
    global _cache
    values = tuple(os.environ.get(name) for name in _ENVIRONMENT)
    with _lock:
        basis = (len(_known), *values)
        if _cache[0] != basis:
            _cache = (basis, sorted(_known | _environment(values), key=len, reverse=True))
        return _cache[1]


def redact(text: str, forms: list[str] | None = None) -> str:
    """``text`` with every form of every known secret (``forms``: `known`, asked now when not given) replaced by
    `REDACTED`."""
    for secret in known() if forms is None else forms:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def api_key(value: str | None, source: str = "OPENAI_API_KEY") -> str | None:
    """The key ``value`` (from ``source``, named in messages) as it can be sent: surrounding whitespace trimmed with
    a ``warning:`` (once per key and source), registered as a secret; None for none.

    Raises:
        InputError: the key holds a space, control or non-ASCII character inside (the message does not show it).
    """
    if value is None or not value.strip():
        return None
    register(value)
    key = value.strip()
    if not all(0x21 <= ord(c) <= 0x7e for c in key):  # what an HTTP header carries without complaint
        raise InputError(f"{source} holds a line break, space, control or non-ASCII character inside (its value is "
                         "not shown): a key is one word of printable ASCII; set it again without them")
    if key != value and hash((source, value)) not in _warned:
        _warned.add(hash((source, value)))
        log.warning("warning: %s ends or starts with a line break or space; it is sent without them", source)
    return key
