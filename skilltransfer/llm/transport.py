"""JSON over HTTP/1.1 to one endpoint: a small keep-alive connection pool on the standard library's ``http.client``.

The chat client's send path. A grid runs every stream's calls from one process, where the client's CPU per call
bounds how busy it can keep an endpoint (the GIL): a call through the OpenAI SDK cost ~1.3 ms of CPU (its request
options, httpx, pydantic models), through this ~0.26 ms. It sends the bytes the SDK sends for the same request
(compact JSON, UTF-8, keys in the caller's order) and leaves the meaning of the answer (status codes, error bodies)
to the caller.

Honoured from the environment as the SDK's HTTP stack does: ``HTTP_PROXY``/``HTTPS_PROXY`` (http:// proxies; HTTPS
through a CONNECT tunnel) and ``NO_PROXY``; ``SSL_CERT_FILE``/``SSL_CERT_DIR``, else the system's and certifi's
certificates. Failures before an answer raise `TransientModelError` ("timeout" or "connection"); a request on a
kept-alive connection the server had closed is sent once more on a new one first.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from skilltransfer import __version__
from skilltransfer.errors import InputError
from skilltransfer.llm.retry import TransientModelError

_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
"""What a kept-alive connection the server closed while idle fails with, before any answer."""


@dataclass(frozen=True)
class HttpReply:
    """A complete answer: status, headers (names lower-cased) and body."""

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` if it is not)."""
        return json.loads(self.body)

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")


def encode_json(payload: Any) -> bytes:
    """The request body as the OpenAI SDK writes it: compact separators, non-ASCII kept as UTF-8."""
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()  # the system store, and SSL_CERT_FILE / SSL_CERT_DIR when set
    if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
        try:
            import certifi

            context.load_verify_locations(certifi.where())
        except (ImportError, OSError):
            pass
    return context


def proxy_for(url: str) -> str | None:
    """The http:// proxy the environment names for ``url`` (None: direct); an InputError for any other kind."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    if not proxy.startswith("http://"):
        raise InputError(f"model endpoint {url}: the environment's {parts.scheme.upper()}_PROXY ({proxy!r}) is not "
                         "an http:// proxy: set an http:// proxy, or add the host to NO_PROXY")
    return proxy


def _proxy_authorization(proxy: str | None) -> dict[str, str]:
    """The Proxy-Authorization header of a proxy URL with credentials ({} without)."""
    parts = urllib.parse.urlsplit(proxy or "")
    if not parts.username:
        return {}
    user = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return {"Proxy-Authorization": "Basic " + base64.b64encode(user.encode()).decode()}


class JsonTransport:
    """POSTs JSON to paths under one base URL, keeping idle connections for reuse (thread-safe).

    Args:
        base_url: ``http(s)://host[:port]/prefix``.
        headers: sent with every request (e.g. Authorization).
        timeout_s: the limit on connecting and on each wait for data, as the SDK's (not a total).
    """

    def __init__(self, base_url: str, headers: dict[str, str], timeout_s: float) -> None:
        parts = urllib.parse.urlsplit(base_url)
        self.base_url = base_url
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}"
        self._headers = {"Accept": "application/json", "Content-Type": "application/json",
                         "User-Agent": f"skilltransfer/{__version__}", **headers}
        self._timeout_s = timeout_s
        self._proxy = proxy_for(base_url)
        self._proxy_headers = _proxy_authorization(self._proxy)
        if self._proxy is not None and not self._https:  # a forwarding proxy reads them from each request
            self._headers.update(self._proxy_headers)
        self._tls = _tls_context() if self._https else None
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._closed = False

    def _connect(self) -> http.client.HTTPConnection:
        if self._proxy is None:
            if self._https:
                return http.client.HTTPSConnection(self._host, self._port, timeout=self._timeout_s, context=self._tls)
            return http.client.HTTPConnection(self._host, self._port, timeout=self._timeout_s)
        proxy = urllib.parse.urlsplit(self._proxy)
        if self._https:  # a CONNECT tunnel through the proxy, TLS to the endpoint inside it
            tunnel = http.client.HTTPSConnection(proxy.hostname or "", proxy.port or 80, timeout=self._timeout_s,
                                                 context=self._tls)
            tunnel.set_tunnel(self._host, self._port, headers=self._proxy_headers)
            return tunnel
        return http.client.HTTPConnection(proxy.hostname or "", proxy.port or 80, timeout=self._timeout_s)

    def _target(self, path: str) -> str:
        if self._proxy is not None and not self._https:  # a forwarding proxy is sent the absolute URL
            return f"{self._origin}{self._prefix}{path}"
        return f"{self._prefix}{path}"

    def post(self, path: str, body: bytes) -> HttpReply:
        """POST ``body`` to ``path`` (e.g. ``/chat/completions``) and read the whole answer."""
        for attempt in range(2):
            with self._lock:
                reused = bool(self._idle)
                conn = self._idle.pop() if reused else self._connect()
            try:
                conn.request("POST", self._target(path), body=body, headers=self._headers)
                response = conn.getresponse()
                data = response.read()
            except TimeoutError as exc:
                conn.close()
                raise TransientModelError("timeout", f"no answer within {self._timeout_s} s") from exc
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                if isinstance(exc, _STALE) and reused and attempt == 0:
                    continue  # the server closed the idle connection: once more on a new one
                raise TransientModelError("connection", f"cannot connect to {self.base_url} ({exc!r})") from exc
            self._keep(conn, response.will_close)
            return HttpReply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        raise AssertionError("unreachable")  # pragma: no cover

    def _keep(self, conn: http.client.HTTPConnection, will_close: bool) -> None:
        with self._lock:
            if will_close or self._closed:
                conn.close()
            else:
                self._idle.append(conn)

    def close(self) -> None:
        """Close the idle connections, and each running request's when it ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
