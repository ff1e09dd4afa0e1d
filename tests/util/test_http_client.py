"""The package's one HTTP module (`skilltransfer.util.http_client`) and the clients on it, against their twin, the
OpenAI SDK, on the same wire; and what it bounds: the deadline of a call and the size of an answer.

A raw socket server records the bytes each client sends and answers what a test scripts, so the two clients are
compared on the same wire: method, path, headers and body of a chat and an embeddings request, how an error answer is
read, what a closed keep-alive connection, a proxy, credentials in the URL or a gzip answer do.
"""

from __future__ import annotations

import ast
import base64
import gzip
import http.server
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from helpers_hostile import HostileServer

import skilltransfer
from skilltransfer.errors import InputError
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.openai_client import OpenAIChatModel, check_endpoint, error_body
from skilltransfer.llm.retry import ModelCallError
from skilltransfer.llm.testing.mock_server import MockServer
from skilltransfer.memory.endpoint_embedder import EndpointEmbedder
from skilltransfer.settings.config import ModelSpec
from skilltransfer.util.http_client import Answer, HttpClient, HttpFailure, fetch_json

OK = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "served-id",
                 "system_fingerprint": "fp_1",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
EMBEDDED = json.dumps({"object": "list", "model": "e", "data": [
    {"object": "embedding", "index": 1, "embedding": [0.0, 2.0]},
    {"object": "embedding", "index": 0, "embedding": [3.0, 4.0]}]})
MESSAGES = [{"role": "system", "content": "Sys \u00e9 \u2713 \u2028 \U0001f600"},
            {"role": "user", "content": 'q\n"x"\t\\ </think>'}]
PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy",
                   "NO_PROXY")
SDK_OWN = ("user-agent", "x-stainless-")
"""Headers only the SDK sends (its name and version, its telemetry): left out when the two are compared."""


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no proxy and no organisation or project in the environment."""
    for name in (*PROXY_VARIABLES, "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(name, raising=False)


class RawServer:
    """Answers each request with the next scripted reply and records (head, body) of what arrived.

    Args:
        replies: (status, body) or (status, body, extra header lines) per request, in order; the last one repeats.
            A bytes body is sent as it is.
        close_after_each: drop the connection after each answer without saying so (a server's idle timeout).
    """

    def __init__(self, replies: list[tuple[Any, ...]], close_after_each: bool = False) -> None:
        self.replies, self.close_after_each = replies, close_after_each
        self.requests: list[tuple[str, bytes]] = []
        self.connections = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, data = data.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")), 0)
                while len(data) < length:
                    data += conn.recv(65536)
                body, data = data[:length], data[length:]
                self.requests.append((head.decode(), body))
                status, text, *extra = self.replies[min(len(self.requests), len(self.replies)) - 1]
                payload = text if isinstance(text, bytes) else text.encode()
                lines = "".join(f"{line}\r\n" for line in (extra[0] if extra else []))
                try:
                    conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{lines}"
                                 f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                except OSError:  # the client refused the answer
                    return
                if self.close_after_each:
                    return

    def close(self) -> None:
        self._sock.close()


@contextmanager
def raw_server(replies: list[tuple[Any, ...]], close_after_each: bool = False) -> Iterator[RawServer]:
    server = RawServer(replies, close_after_each)
    try:
        yield server
    finally:
        server.close()


def headers_of(head: str) -> dict[str, str]:
    """A request head's headers, names lower-cased."""
    pairs = [line.split(":", 1) for line in head.split("\r\n")[1:]]
    return {name.strip().lower(): value.strip() for name, value in pairs}


def compared(head: str) -> tuple[str, dict[str, str]]:
    """(request line, headers) of a request head, less the headers only the SDK sends."""
    return head.split("\r\n")[0], {k: v for k, v in headers_of(head).items() if not k.startswith(SDK_OWN)}


def ours(url: str, **config: Any) -> OpenAIChatModel:
    return OpenAIChatModel(ModelConfig(**{"base_url": url, "model": "m", "api_key": "k", "backoff_base_s": 0.0,
                                          "backoff_max_s": 0.0, "timeout_s": 5.0, **config}))


def sdk_send(url: str, body: dict[str, Any]) -> Any:
    """The request as the SDK sends it: every field but the model in ``extra_body``."""
    client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=5.0)
    fields = {key: value for key, value in body.items() if key not in ("model", "extra_body")}
    try:
        return client.chat.completions.create(model=body["model"], messages=[],
                                              extra_body={**fields, **(body.get("extra_body") or {})})
    finally:
        client.close()


# --------------------------------------------------------------------------------------------- the twin
@pytest.mark.parametrize("variables", [{}, {"OPENAI_ORG_ID": "org-1", "OPENAI_PROJECT_ID": "proj_1"}])
def test_a_chat_request_is_the_sdks_on_the_wire(variables: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Method, path, headers (but the SDK's name and telemetry) and body, byte for byte."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    config: dict[str, Any] = {"params": {"temperature": 0.0, "top_p": 0.95, "seed": None},
                              "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}}
    with raw_server([(200, OK)]) as server:
        model = ours(server.url, **config)
        model.complete(MESSAGES, max_tokens=5, stop=["Observation:"])
        sdk_send(server.url, model.request_body(MESSAGES, max_tokens=5, stop=["Observation:"]))
    (mine, my_body), (theirs, their_body) = server.requests
    assert my_body == their_body
    assert compared(mine) == compared(theirs)
    line, headers = compared(mine)
    assert line == "POST /v1/chat/completions HTTP/1.1"
    assert headers["authorization"] == "Bearer k"
    assert headers["accept-encoding"].startswith("gzip, deflate")
    assert headers.get("openai-organization") == variables.get("OPENAI_ORG_ID")
    assert headers.get("openai-project") == variables.get("OPENAI_PROJECT_ID")


def test_an_embeddings_request_is_the_sdks_on_the_wire(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    with raw_server([(200, EMBEDDED)]) as server:
        vectors = EndpointEmbedder("e", server.url, api_key="k", backoff_base_s=0).embed(["a b", ""])
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0, timeout=5.0)
        client.embeddings.create(model="e", input=["a b", " "], encoding_format="float")
        client.close()
    (mine, my_body), (theirs, their_body) = server.requests
    assert my_body == their_body == b'{"model":"e","input":["a b"," "],"encoding_format":"float"}'
    assert compared(mine) == compared(theirs)
    assert compared(mine)[0] == "POST /v1/embeddings HTTP/1.1"
    assert np.allclose(vectors, [[0.6, 0.8], [0.0, 1.0]])  # in input order (by index), normalised


def test_a_models_headers_setting_is_sent_over_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj_env")
    with raw_server([(200, OK)]) as server:
        ours(server.url, headers={"X-Gateway-Key": "g1", "OpenAI-Project": "proj_mine"}).complete(MESSAGES)
    headers = headers_of(server.requests[0][0])
    assert (headers["x-gateway-key"], headers["openai-project"]) == ("g1", "proj_mine")


def test_credentials_in_the_url_are_sent_as_basic_auth_and_never_shown() -> None:
    """As the SDK: ``user:password@`` in the base URL is Basic auth (in place of the Bearer key); messages name the
    endpoint without them."""
    with raw_server([(200, OK), (404, "{}")]) as server:
        url = server.url.replace("http://", "http://me:p%40ss@")
        ours(url).complete(MESSAGES)
        with pytest.raises(ModelCallError) as refused:
            ours(url).complete(MESSAGES)
        with pytest.raises(openai.NotFoundError):
            sdk_send(url, {"model": "m", "messages": MESSAGES})
    basic = "Basic " + base64.b64encode(b"me:p@ss").decode()
    assert [headers_of(head)["authorization"] for head, _ in server.requests] == [basic] * 3
    assert server.url in str(refused.value)
    assert "p%40ss" not in str(refused.value)
    assert "me:" not in str(refused.value)


@pytest.mark.parametrize(("status", "body"), [
    (400, json.dumps({"error": {"message": "Unsupported parameter: 'stop'", "param": "stop", "type": "x"}})),
    (400, json.dumps({"object": "error", "message": "max_tokens is too large", "code": 400})),
    (422, json.dumps({"detail": "bad"})),
    (400, "plain text refusal"),
    (418, ""),
    (500, json.dumps({"error": {"code": 500, "message": "the request exceeds the available context size",
                                "n_ctx": 4096}})),
])
def test_an_error_answer_is_read_as_the_sdk_read_it(status: int, body: str) -> None:
    """The message and body the refusal handlers see are the SDK exception's ``message`` and (unwrapped) ``body``."""
    with raw_server([(status, body)]) as server:
        with pytest.raises(openai.APIStatusError) as caught:
            sdk_send(server.url, {"model": "m", "messages": MESSAGES})
    parsed, message = error_body(Answer(status, {}, body.encode()))
    assert message == caught.value.message
    unwrapped = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    assert unwrapped == caught.value.body


def test_refusals_keep_their_meaning() -> None:
    unsupported = json.dumps({"error": {"message": "Unsupported parameter: 'stop' is not supported with this model.",
                                        "type": "invalid_request_error", "param": "stop"}})
    with raw_server([(400, unsupported), (200, OK)]) as server:
        out = ours(server.url).complete(MESSAGES, stop=["Obs"])
    assert [json.loads(body).get("stop") for _, body in server.requests] == [["Obs"], None]  # adapted: dropped
    assert out.text == "hi"
    assert out.model == "served-id"
    assert out.raw_response["system_fingerprint"] == "fp_1"
    for status, says in ((401, "rejected the API key"), (403, "denied access"), (404, "has no model 'm'"),
                         (409, r"refused the request \(HTTP 409")):
        with raw_server([(status, "{}")]) as server:
            with pytest.raises(ModelCallError, match=says):
                ours(server.url).complete(MESSAGES)


def test_a_rate_limit_waits_as_the_server_asks(fast_retry_waits: Any) -> None:
    limited = (429, "{}", ["retry-after-ms: 1500"])
    with raw_server([limited, (200, OK)]) as server:
        out = ours(server.url, backoff_base_s=1.0, backoff_max_s=30.0).complete(MESSAGES)
    assert out.attempts == 2
    assert fast_retry_waits.waits[0] >= 1.5


def test_the_embedder_waits_as_the_server_asks_too(fast_retry_waits: Any) -> None:
    replies = [(429, "{}", ["Retry-After: 2"]), (503, "{}", ["retry-after-ms: 2500"]), (200, EMBEDDED)]
    with raw_server(replies) as server:
        assert EndpointEmbedder("e", server.url).embed(["a", "b"]).shape == (2, 2)
    assert len(fast_retry_waits.waits) == 2
    assert fast_retry_waits.waits[0] >= 2.0
    assert fast_retry_waits.waits[1] >= 2.5


def test_a_redirect_is_one_line_naming_where_it_points() -> None:
    moved = (301, "", ["Location: https://api.example.org/v1/chat/completions"])
    with raw_server([moved]) as server:
        with pytest.raises(ModelCallError, match=r"redirects \(HTTP 301\) to https://api.example.org/v1/chat"):
            ours(server.url).complete(MESSAGES)
        assert len(server.requests) == 1


@pytest.mark.parametrize("answer", [
    "not json", "[]", json.dumps({"choices": []}), json.dumps({"choices": ["x"]}), json.dumps({"choices": None}),
])
def test_an_unusable_answer_is_retried(answer: str) -> None:
    with raw_server([(200, answer), (200, OK)]) as server:
        out = ours(server.url).complete(MESSAGES)
    assert (out.text, out.attempts) == ("hi", 2)


def test_odd_fields_of_an_answer_fall_back_instead_of_crashing() -> None:
    odd = json.dumps({"model": 7, "choices": [{"message": None, "finish_reason": 3}],
                      "usage": {"prompt_tokens": True, "completion_tokens": "1",
                                "completion_tokens_details": {"reasoning_tokens": None}}})
    with raw_server([(200, odd)]) as server:
        out = ours(server.url).complete(MESSAGES)
    assert (out.text, out.finish_reason, out.model, out.usage_source) == ("", None, "m", "approx")


@pytest.mark.parametrize("answer", [
    json.dumps({"data": [{"index": 0, "embedding": [1.0]}]}),  # one vector for two texts
    json.dumps({"data": [{"index": 0, "embedding": "x"}, {"index": 1, "embedding": [1.0]}]}),
    json.dumps({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
    "not json",
])
def test_an_unusable_embeddings_answer_is_retried(answer: str) -> None:
    with raw_server([(200, answer), (200, EMBEDDED)]) as server:
        embedder = EndpointEmbedder("e", server.url, backoff_base_s=0)
        assert embedder.embed(["a", "b"]).shape == (2, 2)
    assert len(server.requests) == 2


def test_a_gzip_answer_is_read() -> None:
    """Read as the SDK reads it (it was taken for an unparsable answer and retried for the whole budget)."""
    packed = (200, gzip.compress(OK.encode()), ["Content-Encoding: gzip"])
    with raw_server([packed]) as server:
        out = ours(server.url).complete(MESSAGES)
        assert sdk_send(server.url, {"model": "m", "messages": MESSAGES}).choices[0].message.content == "hi"
    assert (out.text, out.attempts) == ("hi", 1)


# --------------------------------------------------------------------------------------------- connections
def test_a_keep_alive_connection_the_server_dropped_is_not_a_failure() -> None:
    with raw_server([(200, OK)], close_after_each=True) as server:
        model = ours(server.url)
        outs = []
        for _ in range(3):
            outs.append(model.complete(MESSAGES))
            time.sleep(0.05)  # the server's close arrives while the connection is idle
    assert [o.attempts for o in outs] == [1, 1, 1]
    assert (len(server.requests), server.connections) == (3, 3)


def test_connections_are_reused() -> None:
    with raw_server([(200, OK)]) as server:
        model = ours(server.url)
        for _ in range(4):
            model.complete(MESSAGES)
        model.close()
    assert (len(server.requests), server.connections) == (4, 1)


class _ForwardingProxy(http.server.BaseHTTPRequestHandler):
    """An http:// proxy: forwards each request (absolute URL) and records (path, Proxy-Authorization)."""

    seen: list[tuple[str, str | None]] = []

    def _forward(self) -> None:
        type(self).seen.append((self.path, self.headers.get("Proxy-Authorization")))
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if self.command == "POST" else None
        request = urllib.request.Request(self.path, data=body, method=self.command,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as upstream:
            data = upstream.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _forward  # noqa: N815 (the handler's API)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[str]:
    """A forwarding proxy's URL (``_ForwardingProxy.seen`` emptied)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ForwardingProxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _ForwardingProxy.seen = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_http_proxy_from_the_environment_is_used_and_no_proxy_bypasses_it(
        proxy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with MockServer(lambda _messages: "via proxy") as server:
        monkeypatch.setenv("http_proxy", proxy.replace("http://", "http://me:p%40ss@"))
        assert ours(server.url).complete(MESSAGES).text == "via proxy"
        assert _ForwardingProxy.seen == [(f"{server.url}/chat/completions", "Basic bWU6cEBzcw==")]  # me:p@ss
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        assert ours(server.url).complete(MESSAGES).text == "via proxy"
        assert len(_ForwardingProxy.seen) == 1
        assert len(server.requests) == 2


def test_all_proxy_is_used_for_every_scheme(proxy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with MockServer(lambda _messages: "via all_proxy") as server:
        monkeypatch.setenv("ALL_PROXY", proxy)
        assert ours(server.url).complete(MESSAGES).text == "via all_proxy"
        assert fetch_json(f"{server.url}/models")["data"][0]["id"]
    assert [path for path, _ in _ForwardingProxy.seen] == [f"{server.url}/chat/completions", f"{server.url}/models"]


@pytest.mark.parametrize(("no_proxy", "proxied"), [("127.0.0.0/8", False), ("10.0.0.0/8,192.168.0.0/16", True),
                                                   ("example.org, 127.0.0.1/32", False)])
def test_no_proxy_takes_cidr_ranges(no_proxy: str, proxied: bool, proxy: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with MockServer(lambda _messages: "ok") as server:
        monkeypatch.setenv("HTTP_PROXY", proxy)
        monkeypatch.setenv("NO_PROXY", no_proxy)
        assert ours(server.url).complete(MESSAGES).text == "ok"
    assert len(_ForwardingProxy.seen) == int(proxied)


def test_a_proxy_this_install_cannot_use_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("httpx2")
    try:
        import socksio  # noqa: F401
        pytest.skip("socksio is installed: a socks5:// proxy is usable")
    except ImportError:
        pass
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(InputError, match=r"proxy this install cannot use .* pip install 'httpx2\[socks\]'"):
        ours("http://127.0.0.1:9/v1")


class _Answers(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", str(len(OK)))
        self.end_headers()
        self.wfile.write(OK.encode())

    def log_message(self, *args: Any) -> None:
        pass


def test_https_verifies_the_endpoint_against_ssl_cert_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://127.0.0.1:{server.server_address[1]}/v1"
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert ours(url).complete(MESSAGES).text == "hi"
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(ModelCallError, match="CERTIFICATE_VERIFY_FAILED"):  # a certificate no store vouches for
            ours(url, max_retries=0).complete(MESSAGES)
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------------- the bounds
@pytest.mark.parametrize("mode", ["drip", "stall"])
def test_a_dripping_or_stalled_answer_ends_at_the_deadline(mode: str) -> None:
    """Every wait is cut to what is left of the call's deadline: the status line and headers dripping a byte every
    0.3 s, or headers and then nothing, end after the deadline (1.5 s), not a wait for data later."""
    with HostileServer(mode, every_s=0.3) as server:
        client = HttpClient(server.url, deadline_s=1.5)
        assert client.exact_deadline
        start = time.monotonic()
        with pytest.raises(HttpFailure, match=r"no complete answer within 1.5 s") as failed:
            client.post_json("/chat/completions", b"{}")
        took = time.monotonic() - start
    assert failed.value.kind == "timeout"
    assert 1.4 < took < 2.5


def test_a_stalled_call_is_retried_within_the_budget_then_one_line() -> None:
    """A call past its deadline is a transient failure: retried while the retry budget lasts (2.5 s: attempts at
    0, 1, 2 s, each cut at 1 s), then one line naming the endpoint and what happened."""
    with HostileServer("stall") as server:
        model = ours(server.url, timeout_s=1.0, retry_budget_s=2.5)
        start = time.monotonic()
        with pytest.raises(ModelCallError) as failed:
            model.complete(MESSAGES)
        took = time.monotonic() - start
        attempts = server.chat_requests
    message = str(failed.value)
    assert f"model endpoint {server.url} failed after {attempts} attempts" in message
    assert "timeout: no complete answer within 1 s (the model's timeout_s)" in message
    assert attempts == 3
    assert took < 1.0 * attempts + 1.0


def test_a_flood_is_refused_as_it_arrives() -> None:
    with HostileServer("flood", block=1 << 16) as server:
        model = ours(server.url, max_answer_mib=1, max_retries=1)
        with pytest.raises(ModelCallError, match=r"too_large: an answer over the 1 MiB limit, refused as it "
                                                 r"arrived \(the model's max_answer_mib\)"):
            model.complete(MESSAGES)
        assert server.chat_requests == 2
        assert server.sent < 2 * (16 << 20)  # the bound and what the sockets' buffers took: the connection was dropped


def test_a_gzip_bomb_is_bounded_as_it_unpacks() -> None:
    with HostileServer("gzip-bomb", bomb_mib=64) as server:
        assert len(server.bomb) < 1 << 20
        with pytest.raises(HttpFailure, match="over the 4 MiB limit") as failed:
            HttpClient(server.url, deadline_s=10, max_bytes=4 << 20).post_json("/chat/completions", b"{}")
    assert failed.value.kind == "too_large"


def test_a_declared_length_over_the_bound_is_refused_before_reading() -> None:
    with raw_server([(200, "x" * 5000)]) as server:
        with pytest.raises(HttpFailure, match="over the 4096 bytes limit"):
            HttpClient(server.url, deadline_s=5, max_bytes=4096).post_json("/chat/completions", b"{}")
        answer = HttpClient(server.url, deadline_s=5, max_bytes=5000).post_json("/chat/completions", b"{}")
    assert len(answer.body) == 5000


def test_the_embedders_and_the_model_lists_answers_are_bounded() -> None:
    with HostileServer("flood", block=1 << 16) as server:
        embedder = EndpointEmbedder("e", server.url, backoff_base_s=0, max_retries=0, max_answer_bytes=1 << 20)
        with pytest.raises(ModelCallError, match=f"embedding endpoint {server.url} failed .* too_large"):
            embedder.embed(["x"])
    listing = json.dumps({"data": [{"id": "m" * 1000}] * 9000})  # 9 MB
    with raw_server([(200, listing)]) as server:
        with pytest.raises(HttpFailure, match="over the 8 MiB limit"):
            fetch_json(f"{server.url}/models")
        with pytest.raises(InputError, match=r"model list is refused \(GET .*/models: an answer over the 1 MiB"):
            check_endpoint(ModelSpec(name="openai", model="m", base_url=server.url))
        assert ours(server.url).context_window is None  # the window probe gives up: unknown


# --------------------------------------------------------------------------------------------- one module
HTTP_MODULES = ("http.client", "urllib.request", "urllib.error", "httpx", "httpx2", "httpcore", "httpcore2", "openai",
                "requests", "urllib3")
"""What sends HTTP requests (``urllib.parse`` does not); aiohttp only for its server side (``aiohttp.web``: the mock
server and the viewer)."""
THE_MODULE = "skilltransfer/util/http_client.py"


def imported(node: ast.AST) -> list[str]:
    """The modules (or module.name) an import statement names (absolute imports only)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        return [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def test_one_module_sends_every_http_request_of_the_package() -> None:
    package = Path(skilltransfer.__file__).resolve().parent
    offenders = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package.parent).as_posix()
        if relative == THE_MODULE:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            for name in imported(node):
                client = any(name == m or name.startswith(f"{m}.") for m in HTTP_MODULES)
                if client or (name.split(".")[0] == "aiohttp" and not name.startswith("aiohttp.web")):
                    offenders.append(f"{relative}:{getattr(node, 'lineno', '?')}: {name}")
    assert not offenders, "send HTTP through skilltransfer.util.http_client:\n" + "\n".join(offenders)


def test_the_package_does_not_load_the_sdk() -> None:
    """Chat and embeddings send through the HTTP module: the SDK's import (and its schema builds) stay out; it is
    needed by the tests' twin only."""
    probe = ("import sys\n"
             "from skilltransfer.llm import make_model\n"
             "from skilltransfer.memory.embedders import make_embedder\n"
             "make_model({'name': 'openai', 'base_url': 'http://127.0.0.1:9/v1', 'model': 'm'})\n"
             "make_embedder('e@http://127.0.0.1:9/v1')\n"
             "print('openai' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
