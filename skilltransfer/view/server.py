"""The local viewer server (aiohttp): the page and its assets from the package, the `Catalog` payloads as JSON.

Read-only and local: only GET, bound to 127.0.0.1 unless told otherwise, and only requests whose ``Host`` is the
address it was started on (so a web page elsewhere cannot reach it through DNS rebinding). No client value becomes a
file path: runs and figures are looked up by key among the folders found, assets by name in a fixed table. Every
response carries a strict Content-Security-Policy (scripts and styles from the page's own origin only).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from skilltransfer.errors import InputError
from skilltransfer.util.server_thread import ServerThread
from skilltransfer.view.assets import ASSETS, asset_bytes, page
from skilltransfer.view.data import PNG_MAGIC, Catalog, UnsafeFile, read_figure

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "Cache-Control": "no-store", "Cross-Origin-Resource-Policy": "same-origin"}
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any) -> web.Response:
    return web.Response(body=json.dumps(data, ensure_ascii=True).encode("ascii"), content_type="application/json")


def make_app(catalog: Catalog, *, allowed_hosts: set[str] | None = None) -> web.Application:
    """The viewer's app over ``catalog``; ``allowed_hosts`` are the ``Host`` values served (None: any; the set may
    be filled after the app is made, once the port is known)."""

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if allowed_hosts is not None and request.host not in allowed_hosts:
            response: web.StreamResponse = web.Response(status=421, text="misdirected request")
        else:
            try:
                response = await handler(request)
            except web.HTTPException as exc:
                response = web.Response(status=exc.status, text=exc.text or "", headers={
                    k: v for k, v in exc.headers.items() if k.lower() != "content-type"})
            except UnsafeFile as exc:
                response = web.Response(status=403, text=str(exc))
            except InputError as exc:
                response = web.Response(status=404, text=str(exc))
        response.headers.update(HEADERS)
        return response

    async def index(_request: web.Request) -> web.Response:
        return web.Response(body=page("server").encode("utf-8"), content_type="text/html", charset="utf-8")

    async def asset(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound()
        return web.Response(body=asset_bytes(name), content_type=ASSETS[name])

    async def api_index(_request: web.Request) -> web.Response:
        return _json(await asyncio.to_thread(catalog.index))

    async def api_run(request: web.Request) -> web.Response:
        return _json(await asyncio.to_thread(catalog.run, request.match_info["key"]))

    async def api_task(request: web.Request) -> web.Response:
        text = request.match_info["position"]
        if not text.isdigit():
            raise web.HTTPNotFound()
        return _json(await asyncio.to_thread(catalog.task, request.match_info["key"], int(text)))

    async def api_report(request: web.Request) -> web.Response:
        return _json(await asyncio.to_thread(catalog.report, request.match_info["key"]))

    async def figure(request: web.Request) -> web.Response:
        path = await asyncio.to_thread(catalog.figure, request.match_info["key"])
        data = await asyncio.to_thread(read_figure, path)
        if not data.startswith(PNG_MAGIC):
            raise web.HTTPNotFound()
        return web.Response(body=data, content_type="image/png")

    async def atif(request: web.Request) -> web.Response:
        from skilltransfer.report.atif import document_text, task_document

        text = request.match_info["position"]
        if not text.isdigit():
            raise web.HTTPNotFound()
        entry = await asyncio.to_thread(catalog.find, request.match_info["key"])
        document = await asyncio.to_thread(task_document, entry.path, int(text))
        return web.Response(body=document_text(document).encode("ascii"), content_type="application/json",
                            headers={"Content-Disposition": f'attachment; filename="task-{int(text) + 1}.atif.json"'})

    async def no_icon(_request: web.Request) -> web.Response:
        return web.Response(status=204)

    app = web.Application(middlewares=[guard])
    app.router.add_get("/", index)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/assets/{name}", asset)
    app.router.add_get("/api/index", api_index)
    app.router.add_get("/api/run/{key}", api_run)
    app.router.add_get("/api/task/{key}/{position}", api_task)
    app.router.add_get("/api/report/{key}", api_report)
    app.router.add_get("/figure/{key}.png", figure)
    app.router.add_get("/atif/{key}/{position}.json", atif)
    return app


def hosts_for(host: str, port: int) -> set[str]:
    """The ``Host`` header values a server on ``host:port`` answers (local names for a loopback address)."""
    names = set(LOCAL_HOSTS) if host in ("127.0.0.1", "localhost", "::1") else {host}
    return {f"{name}:{port}" for name in names} | ({host} if port == 80 else set())


class ViewServer:
    """The viewer served from a thread (``with ViewServer(catalog) as server: server.url``); `serve` is the
    command's blocking form.

    Args:
        catalog: the runs.
        host: the address to bind (127.0.0.1: this machine only).
        port: the port (0: a free one).
    """

    def __init__(self, catalog: Catalog, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.catalog, self.host, self.port = catalog, host, port
        self._server = ServerThread("skilltransfer-view")

    @property
    def url(self) -> str:
        return f"http://{'localhost' if self.host in ('127.0.0.1', '::1') else self.host}:{self.port}/"

    def start(self) -> ViewServer:
        """Serve from a background thread.

        Raises:
            InputError: the address cannot be bound.
        """
        hosts: set[str] = set()  # filled once the port is bound
        try:
            self.port = self._server.start(lambda: make_app(self.catalog, allowed_hosts=hosts), self.host, self.port,
                                           on_bound=lambda port: hosts.update(hosts_for(self.host, port)),
                                           timeout_s=30)
        except Exception as exc:
            raise InputError(f"cannot serve on {self.host}:{self.port}: {exc}") from None
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ViewServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
