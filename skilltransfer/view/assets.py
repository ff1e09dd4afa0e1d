"""The page and its assets, shipped in the package (``skilltransfer/view/static``): nothing is fetched from a network.

The page has no inline script (the Content-Security-Policy allows scripts from the page's own origin only); it tells
the app whether it is served (``data-mode="server"``: JSON from ``api/``) or exported (``"static"``: data files
loaded as scripts, which a page opened from disk may load).
"""

from __future__ import annotations

from importlib import resources

ASSETS = {"app.js": "text/javascript", "style.css": "text/css"}
"""Asset name -> content type: the only files the server sends from the package."""

STATIC_CSP = ("default-src 'none'; script-src 'self' file:; style-src 'self' file:; img-src 'self' file:; "
              "connect-src 'none'; base-uri 'none'; form-action 'none'")
"""The exported page's policy (a meta tag: a page opened from disk has no response headers)."""


def single_page(data_json: str) -> str:
    """The page of a single-file export: the app and style inline (allowed by their hashes only) and every payload in
    one JSON block (``data_json``, ``<`` already escaped), which is data, not a script, so no other page can load
    it; figures are ``data:`` URLs inside it."""
    import base64
    import hashlib

    script = asset_bytes("app.js").decode("utf-8").replace("</", "<\\/")
    style = asset_bytes("style.css").decode("utf-8").replace("</", "<\\/")

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"

    policy = (f"default-src 'none'; script-src {digest(script)}; style-src {digest(style)}; img-src data:; "
              "connect-src 'none'; base-uri 'none'; form-action 'none'")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>skilltransfer view</title>
<style>{style}</style>
</head>
<body data-mode="static">
<header id="top"><a class="brand" href="#/">skilltransfer view</a><nav id="crumbs"></nav>
<span id="status" role="status"></span></header>
<main id="main"><p class="muted">Loading…</p></main>
<noscript>The viewer needs JavaScript (inside this file only; nothing is fetched).</noscript>
<script type="application/json" id="stv-data">{data_json}</script>
<script>{script}</script>
</body>
</html>
"""


def asset_bytes(name: str) -> bytes:
    """An asset's bytes (``name`` must be a key of `ASSETS`).

    Raises:
        KeyError: not an asset.
    """
    if name not in ASSETS:
        raise KeyError(name)
    return resources.files("skilltransfer.view").joinpath("static", name).read_bytes()


def page(mode: str) -> str:
    """The page's HTML for ``mode`` "server" or "static"."""
    policy = f'<meta http-equiv="Content-Security-Policy" content="{STATIC_CSP}">\n' if mode == "static" else ""
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
{policy}<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>skilltransfer view</title>
<link rel="stylesheet" href="assets/style.css">
</head>
<body data-mode="{mode}">
<header id="top"><a class="brand" href="#/">skilltransfer view</a><nav id="crumbs"></nav>
<span id="status" role="status"></span></header>
<main id="main"><p class="muted">Loading…</p></main>
<noscript>The viewer needs JavaScript (from this folder only; nothing is fetched from a network).</noscript>
<script src="assets/app.js"></script>
</body>
</html>
"""
