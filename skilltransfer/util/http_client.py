"""Every HTTP request of the package goes through this module: chat, embeddings, ``/models`` and ``/props``, the
embedded model's server. It is built on httpx2 (the maintained httpx, on which the OpenAI SDK is built), and bounds
every request in time and size, because every endpoint is untrusted:

- **a deadline per call**: connecting, sending and the complete answer take at most ``deadline_s`` together. Every
  connect, read and write waits at most what is left of it, so a server that stalls, or drips its answer a byte at a
  time, is cut off at the deadline (httpx's own ``Timeout`` bounds each wait for data, not the call).
- **a bound on every answer**: the body is read as it arrives (``iter_bytes``, after gzip/deflate decoding, so a
  compressed answer is counted as it unpacks) and refused once it passes ``max_bytes``; it is never held whole.

What the OpenAI SDK gives its users on the same wire, httpx2 gives here too: proxies from the environment
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY`` with host names and CIDR ranges such as
``10.0.0.0/8``), ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` (else the system's certificates), credentials in the URL (sent
as Basic auth), gzip and deflate answers, kept-alive connections. `openai_headers` adds the headers the SDK sends
from its variables (``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``). Redirects are not followed.

A request that ends without a complete answer raises `HttpFailure` (``kind``: "timeout", "connection", "too_large"
or "bad_response"); an answer of any status is returned whole (`Answer`), its meaning left to the caller.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore2
import httpx2

from skilltransfer.errors import InputError
from skilltransfer.untrusted import MAX_DEPTH, UntrustedFileError, parse_json
from skilltransfer.util import secrets
from skilltransfer.version import __version__

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 64 << 20
"""Default bound on one answer (64 MiB): a chat answer of 100k tokens is under 1 MiB, an embedding batch a few MiB."""
MAX_LISTING_BYTES = 8 << 20
"""Bound on a ``/models`` or ``/props`` answer (8 MiB; a provider's full model list is 1-2 MiB)."""
CONNECT_TIMEOUT_S = 30.0
"""Most seconds one connection attempt may take (within the call's deadline): an endpoint whose host drops
connection attempts fails as "connection" soon, not at the end of a long deadline."""
USER_AGENT = f"skilltransfer/{__version__}"


class HttpFailure(OSError):
    """No complete answer: the deadline passed ("timeout"), no connection or a dropped one ("connection"), an answer
    over its bound ("too_large"), or one that cannot be decoded ("bad_response").

    ``str()`` is one line saying what happened.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __str__(self) -> str:
        return str(self.args[0])


class HttpStatusError(OSError):
    """`fetch_json`'s answer had an error status (``status``)."""

    def __init__(self, url: str, status: int) -> None:
        super().__init__(f"{url} answered HTTP {status}")
        self.status = status


@dataclass(frozen=True)
class Answer:
    """A complete answer: status, headers (case-insensitive ``get``) and body (decoded from gzip/deflate)."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self, max_depth: int = MAX_DEPTH) -> Any:
        """The body parsed as JSON, at most ``max_depth`` containers deep (`skilltransfer.untrusted.parse_json`:
        checked before the parser recurses).

        Raises:
            ValueError: not JSON, or nested too deeply (saying which).
        """
        try:
            return parse_json(self.body, "the answer", max_depth=max_depth)
        except UntrustedFileError as exc:
            raise ValueError(str(exc)) from None

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")


def encode_json(payload: Any) -> bytes:
    """A request body as the OpenAI SDK writes it: compact separators, non-ASCII kept as UTF-8."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def openai_headers(api_key: str | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers the OpenAI SDK sends with each request: ``Authorization: Bearer <key>`` (``sk-no-key`` without a
    key; local servers accept any), ``OpenAI-Organization`` from ``OPENAI_ORG_ID`` and ``OpenAI-Project`` from
    ``OPENAI_PROJECT_ID`` when set; then ``extra`` (a model's ``headers`` setting), which may replace any of them."""
    headers = {"Authorization": f"Bearer {api_key or 'sk-no-key'}"}
    if organization := os.environ.get("OPENAI_ORG_ID"):
        headers["OpenAI-Organization"] = organization
    if project := os.environ.get("OPENAI_PROJECT_ID"):
        headers["OpenAI-Project"] = project
    headers = {**headers, **(extra or {})}
    secrets.register_headers(headers)  # never shown in a message, whatever its bytes
    return headers


def shown_url(url: str) -> str:
    """``url`` without the credentials it may carry (for messages and logs)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


# --------------------------------------------------------------------------------------------- the deadline
_calls = threading.local()
"""``deadline``: the ``time.monotonic()`` by which this thread's request must be complete (None outside one)."""


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The wait an I/O step of this thread's request may take: ``timeout``, cut to what is left of the deadline."""
    deadline: float | None = getattr(_calls, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the call's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits at most what is left of the calling thread's deadline."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname,
                                                     _left(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore's network backend, its connections bounded by the calling thread's deadline (`_DeadlineStream`)."""

    def __init__(self, inner: httpcore2.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _left(timeout, httpcore2.ConnectTimeout), local_address,
                                         socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        return _DeadlineStream(self._inner.connect_unix_socket(path, _left(timeout, httpcore2.ConnectTimeout),
                                                               socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _bound_by_deadline(client: httpx2.Client) -> bool:
    """Give each connection pool of ``client`` (direct, and one per proxy) the deadline backend; whether all took it.

    httpx2 has no public hook for a pool's network backend (httpcore's pools take one; httpx2's transports build
    their pools themselves): this sets it on each pool before its first connection. Without it (another httpx2
    layout) the deadline is still checked as each piece of the answer arrives, and a wait for data lasts at most
    ``deadline_s``.
    """
    transports = [client._transport, *client._mounts.values()]  # noqa: SLF001 (see the docstring)
    pools: list[Any] = [getattr(t, "_pool", None) for t in transports if t is not None]
    if not all(isinstance(getattr(pool, "_network_backend", None), httpcore2.NetworkBackend) for pool in pools):
        return False
    for pool in pools:
        pool._network_backend = _DeadlineBackend(pool._network_backend)  # noqa: SLF001
    return True


# --------------------------------------------------------------------------------------------- the client
class HttpClient:
    """Requests to one endpoint over a pool of kept-alive connections (thread-safe; one per model or embedder).

    Args:
        base_url: ``http(s)://[user:password@]host[:port]/prefix``; paths given to `post_json` are appended to it.
        headers: sent with every request (e.g. `openai_headers`).
        deadline_s: the most seconds one request may take, answer included.
        max_bytes: the largest answer accepted (decoded).

    Raises:
        InputError: the URL is not http(s), or the environment names a proxy that cannot be used.
    """

    def __init__(self, base_url: str, headers: Mapping[str, str] | None = None, *, deadline_s: float,
                 max_bytes: int = MAX_ANSWER_BYTES) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown = shown_url(self.base_url)
        secrets.register_url(self.base_url)  # a password in the URL: never shown in a message
        secrets.register_headers(headers)
        if urlsplit(self.base_url).scheme not in ("http", "https"):
            raise InputError(f"endpoint {self.shown!r} is not an http(s) URL")
        self.deadline_s = deadline_s
        self.max_bytes = max_bytes
        defaults = {"Accept": "application/json", "Content-Type": "application/json", "User-Agent": USER_AGENT}
        try:
            self._client = httpx2.Client(headers={**defaults, **(headers or {})}, follow_redirects=False,
                                         trust_env=True, limits=httpx2.Limits(max_connections=None,
                                                                              max_keepalive_connections=256))
        except ImportError as exc:  # a socks5:// proxy without socksio
            raise InputError(f"endpoint {self.shown}: the environment names a proxy this install cannot use "
                             f"({exc}); pip install 'httpx2[socks]', or add the host to NO_PROXY") from None
        except ValueError as exc:
            raise InputError(f"endpoint {self.shown}: the environment's proxy setting is not usable ({exc}); fix "
                             "HTTP_PROXY / HTTPS_PROXY / ALL_PROXY, or add the host to NO_PROXY") from None
        self.exact_deadline = _bound_by_deadline(self._client)
        """Whether every wait is cut to the deadline (else it is checked as the answer arrives)."""
        if not self.exact_deadline:
            log.warning("httpx2 %s: the per-request deadline is checked as answers arrive only", httpx2.__version__)
        self._timeout = self._phases(deadline_s)

    @staticmethod
    def _phases(deadline_s: float) -> httpx2.Timeout:
        return httpx2.Timeout(deadline_s, connect=min(CONNECT_TIMEOUT_S, deadline_s))

    def post_json(self, path: str, body: bytes, *, deadline_s: float | None = None,
                  max_bytes: int | None = None) -> Answer:
        """POST the JSON ``body`` to ``base_url + path`` and read the whole answer (see `request`)."""
        return self.request("POST", self.base_url + path, body, deadline_s=deadline_s, max_bytes=max_bytes)

    def get(self, url: str, *, deadline_s: float | None = None, max_bytes: int | None = None) -> Answer:
        """GET an absolute URL (of this endpoint's server, e.g. ``/models`` or llama.cpp's ``/props``)."""
        return self.request("GET", url, None, deadline_s=deadline_s, max_bytes=max_bytes)

    def request(self, method: str, url: str, body: bytes | None, *, deadline_s: float | None = None,
                max_bytes: int | None = None) -> Answer:
        """Send one request and read its answer within the deadline and the size bound.

        Raises:
            HttpFailure: no complete answer (see the module docstring).
        """
        limit_s = self.deadline_s if deadline_s is None else deadline_s
        limit_bytes = self.max_bytes if max_bytes is None else max_bytes
        timeout = self._timeout if deadline_s is None else self._phases(limit_s)
        deadline = time.monotonic() + limit_s
        _calls.deadline = deadline
        try:
            with self._client.stream(method, url, content=body, timeout=timeout) as response:
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit_bytes and "content-encoding" not in response.headers:
                    raise _too_large(limit_bytes)
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > limit_bytes:
                        chunks.clear()  # not kept alive by the exception's traceback
                        raise _too_large(limit_bytes)
                    if time.monotonic() > deadline:
                        raise httpx2.ReadTimeout("the call's deadline has passed")
                    chunks.append(chunk)
                return Answer(response.status_code, response.headers, b"".join(chunks))
        except HttpFailure:
            raise
        except httpx2.TimeoutException as exc:
            if isinstance(exc, httpx2.ConnectTimeout) and time.monotonic() < deadline:
                raise HttpFailure("connection", f"cannot connect to {self.shown} (no connection within "
                                                f"{min(CONNECT_TIMEOUT_S, limit_s):g} s)") from None
            raise HttpFailure("timeout", f"no complete answer within {limit_s:g} s") from None
        except httpx2.InvalidURL as exc:
            raise InputError(f"endpoint {self.shown}: {url.replace(self.base_url, self.shown)!r} is not a valid URL "
                             f"({_short(exc)})") from None
        except httpx2.DecodingError as exc:
            raise HttpFailure("bad_response", f"an answer that cannot be decoded ({_short(exc)})") from None
        except (httpx2.TransportError, OSError) as exc:  # refused, reset, dropped, TLS, proxy, protocol errors
            what = f"cannot connect to {self.shown}" if isinstance(exc, httpx2.ConnectError | httpx2.ProxyError) \
                else f"the connection to {self.shown} failed"
            raise HttpFailure("connection", f"{what} ({type(exc).__name__}: {_short(exc)})") from None
        finally:
            _calls.deadline = None

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._client.close()


def _too_large(limit: int) -> HttpFailure:
    return HttpFailure("too_large", f"an answer over the {_size(limit)} limit, refused as it arrived")


def _size(count: int) -> str:
    return f"{count / (1 << 20):g} MiB" if count >= 1 << 20 else f"{count} bytes"


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fetch_json(url: str, headers: Mapping[str, str] | None = None, *, deadline_s: float = 10.0,
               max_bytes: int = MAX_LISTING_BYTES, max_depth: int = MAX_DEPTH,
               client: HttpClient | None = None) -> Any:
    """``GET url`` as JSON, bounded in time (``deadline_s`` in all), size and depth.

    Args:
        client: the endpoint's client to send it with (default: a new one for this request).

    Raises:
        HttpFailure: no complete answer (unreachable, too slow, too large).
        HttpStatusError: an answer with a status other than 2xx.
        UntrustedFileError: not JSON, or nested too deeply.
    """
    own = client is None
    sender = client or HttpClient(url, headers, deadline_s=deadline_s, max_bytes=max_bytes)
    try:
        answer = sender.get(url, deadline_s=deadline_s, max_bytes=max_bytes)
    finally:
        if own:
            sender.close()
    if not 200 <= answer.status < 300:
        raise HttpStatusError(shown_url(url), answer.status)
    return parse_json(answer.body, shown_url(url), max_depth=max_depth)
