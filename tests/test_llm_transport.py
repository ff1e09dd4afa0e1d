"""The chat client's HTTP path (`skilltransfer.llm.transport`) against its twin, the OpenAI SDK it replaced.

A raw socket server records the bytes each client sends and answers what a test scripts, so the two clients are
compared on the same wire: the request body, how an error answer is read, and what a closed keep-alive connection or
a proxy does.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from skilltransfer.errors import InputError
from skilltransfer.llm.config import ModelConfig
from skilltransfer.llm.mock_server import MockServer
from skilltransfer.llm.openai_client import OpenAIChatModel
from skilltransfer.llm.retry import ModelCallError

OK = json.dumps({"id": "c1", "object": "chat.completion", "created": 1, "model": "served-id",
                 "system_fingerprint": "fp_1",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}})
MESSAGES = [{"role": "system", "content": "Sys \u00e9 \u2713 \u2028 \U0001f600"},
            {"role": "user", "content": 'q\n"x"\t\\ </think>'}]


class RawServer:
    """Answers each request with the next scripted (status, body) and records (head, body) of what arrived.

    Args:
        replies: (status, body) per request, in order; the last one repeats.
        close_after_each: drop the connection after each answer without saying so (a server's idle timeout).
    """

    def __init__(self, replies: list[tuple[int, str]], close_after_each: bool = False) -> None:
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
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                while len(data) < length:
                    data += conn.recv(65536)
                body, data = data[:length], data[length:]
                self.requests.append((head.decode(), body))
                status, text = self.replies[min(len(self.requests), len(self.replies)) - 1]
                payload = text.encode()
                conn.sendall(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
                if self.close_after_each:
                    return

    def close(self) -> None:
        self._sock.close()


@contextmanager
def raw_server(replies: list[tuple[int, str]], close_after_each: bool = False) -> Iterator[RawServer]:
    server = RawServer(replies, close_after_each)
    try:
        yield server
    finally:
        server.close()


def ours(url: str, **config: Any) -> OpenAIChatModel:
    return OpenAIChatModel(ModelConfig(base_url=url, model="m", api_key="k", backoff_base_s=0.0, backoff_max_s=0.0,
                                       timeout_s=5.0, **config))


def sdk_send(url: str, body: dict[str, Any]) -> Any:
    """The request as the SDK path sent it: every field but the model in ``extra_body``."""
    client = openai.OpenAI(base_url=url, api_key="k", max_retries=0, timeout=5.0)
    fields = {key: value for key, value in body.items() if key not in ("model", "extra_body")}
    try:
        return client.chat.completions.create(model=body["model"], messages=[],
                                              extra_body={**fields, **(body.get("extra_body") or {})})
    finally:
        client.close()


def test_the_request_body_is_byte_for_byte_the_sdks() -> None:
    config: dict[str, Any] = {"params": {"temperature": 0.0, "top_p": 0.95, "seed": None},
                              "extra_body": {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20}}
    with raw_server([(200, OK)]) as server:
        model = ours(server.url, **config)
        model.complete(MESSAGES, max_tokens=5, stop=["Observation:"])
        sdk_send(server.url, model.request_body(MESSAGES, max_tokens=5, stop=["Observation:"]))
    (head, mine), (_, theirs) = server.requests
    assert mine == theirs
    assert head.startswith("POST /v1/chat/completions HTTP/1.1")
    assert "Authorization: Bearer k" in head


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
    from skilltransfer.llm.openai_client import error_body
    from skilltransfer.llm.transport import HttpReply

    with raw_server([(status, body)]) as server:
        with pytest.raises(openai.APIStatusError) as caught:
            sdk_send(server.url, {"model": "m", "messages": MESSAGES})
    parsed, message = error_body(HttpReply(status, {}, body.encode()))
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


def test_a_redirect_is_one_line_naming_where_it_points() -> None:
    class Redirects(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the handler's API)
            self.send_response(301)
            self.send_header("Location", "https://api.example.org/v1/chat/completions")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ModelCallError, match=r"redirects \(HTTP 301\) to https://api.example.org/v1/chat"):
            ours(f"http://127.0.0.1:{server.server_address[1]}/v1").complete(MESSAGES)
    finally:
        server.shutdown()
        server.server_close()


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


def test_a_keep_alive_connection_the_server_dropped_is_sent_again_at_once() -> None:
    with raw_server([(200, OK)], close_after_each=True) as server:
        model = ours(server.url)
        outs = [model.complete(MESSAGES) for _ in range(3)]
    assert [o.attempts for o in outs] == [1, 1, 1]  # no retry of the call: the transport resent on a new connection
    assert len(server.requests) == 3
    assert server.connections == 3


def test_connections_are_reused() -> None:
    with raw_server([(200, OK)]) as server:
        model = ours(server.url)
        for _ in range(4):
            model.complete(MESSAGES)
        model.close()
    assert (len(server.requests), server.connections) == (4, 1)


class _ForwardingProxy(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802 (the handler's API)
        type(self).seen.append((self.path, self.headers.get("Proxy-Authorization")))
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = urllib.request.Request(self.path, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request) as upstream:
            data = upstream.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_http_proxy_from_the_environment_is_used_and_no_proxy_bypasses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ForwardingProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    _ForwardingProxy.seen = []
    try:
        with MockServer(lambda _messages: "via proxy") as server:
            for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
                monkeypatch.delenv(name, raising=False)
            monkeypatch.setenv("http_proxy", f"http://me:p%40ss@127.0.0.1:{proxy.server_address[1]}")
            assert ours(server.url).complete(MESSAGES).text == "via proxy"
            assert _ForwardingProxy.seen == [(f"{server.url}/chat/completions", "Basic bWU6cEBzcw==")]  # me:p@ss
            monkeypatch.setenv("no_proxy", "127.0.0.1")
            assert ours(server.url).complete(MESSAGES).text == "via proxy"
            assert len(_ForwardingProxy.seen) == 1
            assert len(server.requests) == 2
            monkeypatch.delenv("no_proxy")
            monkeypatch.setenv("http_proxy", "socks5://127.0.0.1:1080")
            with pytest.raises(InputError, match="HTTP_PROXY .* not an http:// proxy"):
                ours(server.url)
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_chat_client_does_not_load_the_sdk() -> None:
    """The chat path sends with the standard library: the SDK's import and its deferred schema builds stay out."""
    probe = ("import sys\n"
             "from skilltransfer.llm import make_model\n"
             "make_model({'name': 'openai', 'base_url': 'http://127.0.0.1:9/v1', 'model': 'm'})\n"
             "print('openai' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


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
    for name in ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert ours(url).complete(MESSAGES).text == "hi"
        monkeypatch.delenv("SSL_CERT_FILE")
        with pytest.raises(ModelCallError, match="CERTIFICATE_VERIFY_FAILED"):  # a certificate no store vouches for
            ours(url, max_retries=0).complete(MESSAGES)
    finally:
        server.shutdown()
        server.server_close()
