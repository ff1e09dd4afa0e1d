"""An aiohttp application served on its own event loop from a daemon thread: the mock endpoint's and the viewer's
start and stop (``skilltransfer.llm.testing.mock_server``, ``skilltransfer.view.server``)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from aiohttp import web


class ServerThread:
    """Serves one application from a background thread (`start` returns once the port is bound; `stop` cleans up).

    Args:
        name: the thread's name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._port = 0

    def start(self, make_app: Callable[[], web.Application], host: str, port: int, *, backlog: int = 128,
              on_bound: Callable[[int], None] | None = None, timeout_s: float = 10.0) -> int:
        """Serve ``make_app()`` on ``host:port`` (0: a free port); returns the bound port. ``on_bound(port)`` runs
        once the port is bound, before the first request is handled.

        Raises:
            BaseException: what building or binding the application raised.
        """
        self._port = port
        self._thread = threading.Thread(target=self._serve, args=(make_app, host, backlog, on_bound), name=self.name,
                                        daemon=True)
        self._thread.start()
        self._ready.wait(timeout_s)
        if self._error is not None:
            raise self._error
        return self._port

    def stop(self) -> None:
        """Stop serving (handlers still running are cancelled) and join the thread."""
        if self._loop is not None and self._runner is not None and self._thread is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def _serve(self, make_app: Callable[[], web.Application], host: str, backlog: int,
               on_bound: Callable[[int], None] | None) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            runner = web.AppRunner(make_app(), access_log=None, shutdown_timeout=0.2)
            loop.run_until_complete(runner.setup())
            site = web.TCPSite(runner, host, self._port, backlog=backlog)
            loop.run_until_complete(site.start())
            sockets = getattr(site._server, "sockets", None)
            if sockets:
                self._port = int(sockets[0].getsockname()[1])
            if on_bound is not None:
                on_bound(self._port)
            self._runner, self._loop = runner, loop
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        loop.run_forever()
        loop.close()
