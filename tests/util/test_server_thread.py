"""The one threaded aiohttp server of the mock endpoint and the viewer (`skilltransfer.util.server_thread`)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from skilltransfer.util.server_thread import ServerThread


def _app() -> web.Application:
    async def hello(_request: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application()
    app.router.add_get("/", hello)
    return app


def test_serves_from_a_thread_tells_the_bound_port_first_and_stops() -> None:
    bound: list[int] = []
    server = ServerThread("test-server")
    port = server.start(_app, "127.0.0.1", 0, on_bound=bound.append)
    try:
        assert bound == [port]
        assert port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
            assert reply.read() == b"hi"
    finally:
        server.stop()
    with pytest.raises(urllib.error.URLError, match="refused"), \
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
        pass


def test_a_port_in_use_is_the_binding_error() -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        with pytest.raises(OSError, match="in use"):
            ServerThread("test-server").start(_app, "127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()
