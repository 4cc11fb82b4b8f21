"""The web side of ``rltui serve``: Textualize's textual-serve behind a token.

textual-serve runs the served command once per browser session (a shell command, the
session's terminal on the process's stdin and stdout) and talks to the page over a websocket.
Every one of its routes (the page, the websocket, its scripts and fonts, downloads) is mounted
under ``/<token>/``, and one middleware in front refuses (403) any path whose first segment is
not the token. The token sits in the path rather than in a query string because the page's
script appends its own ``?width=...`` to the websocket's address, and every URL the page
builds from its base then carries the token with it. No cookie stands in for it: a cookie
would be sent by any page of the browser, the token only by a URL the user was given.

Imported by rltui.cli.serve only, so that no other command loads textual-serve or aiohttp.
"""

from __future__ import annotations

import asyncio
import hmac
import re
import signal
from collections.abc import Callable

from aiohttp import web
from textual_serve.server import Server

SHUTDOWN_S = 5.0  # how long open sessions get to end before their handlers are cancelled
# A Host header as a browser sends it (name or address, optional port): the page's URLs are
# built from it, so anything else falls back to the address the server is bound to.
HOST_HEADER = re.compile(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?")
REFUSED = ("rltui serve: this address needs the token printed when the server started "
           "(http://HOST:PORT/TOKEN/).\n")


def token_gate(token: str):
    """The middleware: the path's first segment must be the token (compared in constant time);
    ``/<token>`` alone is sent on to ``/<token>/``."""
    expected = token.encode()

    @web.middleware
    async def gate(request: web.Request, handler):
        first = request.path.split("/", 2)[1]  # the path always starts with "/"
        if not hmac.compare_digest(first.encode("utf-8", "surrogateescape"), expected):
            raise web.HTTPForbidden(text=REFUSED)
        if request.path == f"/{token}":
            raise web.HTTPFound(f"/{token}/")
        response = await handler(request)
        if not response.prepared:  # a websocket's headers are sent already
            # the page loads a font sheet from the web: its address must not carry the token
            response.headers["Referrer-Policy"] = "no-referrer"
            response.headers["Cache-Control"] = "no-store"
        return response

    return gate


class TokenServer(Server):
    """textual-serve's server with the page's addresses taken from the request: through
    ``ssh -L 9000:127.0.0.1:8000`` the browser is at localhost:9000, and the page must send it
    back there (textual-serve would write the server's own host and port)."""

    def __init__(self, command: str, host: str, port: int, title: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.bound_url = self.public_url

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        host = request.host
        # (set and read with no await between: sessions never see each other's address)
        self.public_url = (f"{request.scheme}://{host}" if HOST_HEADER.fullmatch(host or "")
                           else self.bound_url)
        return await super().handle_index(request)

    async def on_startup(self, app: web.Application) -> None:
        """rltui prints its own lines (with the token) once the port is bound."""


async def serve(command: str, host: str, port: int, token: str, title: str,
                ready: Callable[[int], None]) -> None:
    """Serve until SIGINT or SIGTERM; ``ready(port)`` once listening (the port the system
    chose when ``port`` is 0)."""
    server = TokenServer(command, host, port, title)
    served = await server._make_app()
    root = web.Application(middlewares=[token_gate(token)])
    root.add_subapp(f"/{token}", served)
    # no access log: each line would hold the token
    runner = web.AppRunner(root, access_log=None, handle_signals=False,
                           shutdown_timeout=SHUTDOWN_S)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0][1]
        server.port, server.bound_url = bound, _url(host, bound)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        ready(bound)
        await stop.wait()
    finally:
        # each open session's handler is cancelled, and textual-serve then tells its app to quit
        await runner.cleanup()


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
