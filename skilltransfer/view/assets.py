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
