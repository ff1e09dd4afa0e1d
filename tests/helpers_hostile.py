"""Endpoints that misbehave, on 127.0.0.1 (a test helper; also runnable: ``python tests/helpers_hostile.py drip``).

Each answers ``GET /v1/models`` correctly (so the endpoint check passes) and the chat call (``POST``) as its mode
says:

- ``drip``: an answer (a 1 MB body that never comes whole), status line and headers included, one byte every
  ``every_s`` seconds;
- ``stall``: the status line and headers, then nothing;
- ``flood``: a 200 answer whose body never ends (``block`` bytes per write, as fast as the client reads);
- ``gzip-bomb``: a small gzip body that unpacks to ``bomb_mib`` MiB;
- ``deep``: a 200 answer of valid JSON, a chat answer with a field nested ``depth`` levels deep.
"""

from __future__ import annotations

import gzip
import json
import socket
import sys
import threading
import time

MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
MODES = ("drip", "stall", "flood", "gzip-bomb", "deep")


class HostileServer:
    """A raw-socket HTTP/1.1 server whose chat answers misbehave (see the module docstring).

    Args:
        mode: one of `MODES`.
        every_s: the wait between two bytes of ``drip``.
        block: bytes per write of ``flood``.
        bomb_mib: the unpacked size of ``gzip-bomb``'s body.
        depth: how deep ``deep`` nests.
    """

    def __init__(self, mode: str, *, every_s: float = 2.0, block: int = 1 << 20, bomb_mib: int = 64,
                 depth: int = 200_000) -> None:
        assert mode in MODES, mode
        self.depth = depth
        self.mode, self.every_s, self.block = mode, every_s, block
        self.bomb = gzip.compress(bytes(bomb_mib << 20), compresslevel=9) if mode == "gzip-bomb" else b""
        self.chat_requests = 0
        self.sent = 0
        """Bytes of chat answers sent."""
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        with conn:
            try:
                while not self._closed:
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
                    data = data[length:]
                    if head.startswith(b"GET"):
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                     + str(len(MODELS)).encode() + b"\r\n\r\n" + MODELS)
                        continue
                    self.chat_requests += 1
                    self._misbehave(conn)
                    return
            except OSError:
                return

    def _misbehave(self, conn: socket.socket) -> None:
        if self.mode == "drip":
            head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
            answer = head + b'{"choices": [{"message": {"content": "' + b"x" * 999960 + b'"}}]}'
            for byte in answer:
                if self._closed:
                    return
                conn.sendall(bytes([byte]))
                self.sent += 1
                time.sleep(self.every_s)
        elif self.mode == "stall":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
            while not self._closed:
                time.sleep(0.2)
        elif self.mode == "flood":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
            block = b'{"x": "' + b"x" * self.block
            while not self._closed:
                conn.sendall(block)
                self.sent += len(block)
        elif self.mode == "deep":
            body = (b'{"choices": [{"message": {"role": "assistant", "content": "Thought: done"}, "finish_reason": '
                    b'"stop", "data": [{"embedding": [0.1], "index": 0}], "deep": ' + b"[" * self.depth
                    + b"]" * self.depth + b"}]}")
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.sent += len(body)
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                         b"Content-Length: " + str(len(self.bomb)).encode() + b"\r\n\r\n" + self.bomb)
            self.sent += len(self.bomb)

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if __name__ == "__main__":
    server = HostileServer(sys.argv[1] if len(sys.argv) > 1 else "drip")
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()
