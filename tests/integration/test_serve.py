"""``rltui serve`` end to end with a real HTTP and websocket client: the page and every other
address need the URL's token (403 without it, with a wrong one, for the websocket too); a
session is the app run with --read-only unless --allow-actions; Ctrl-C ends the server and its
sessions. The browser itself: test_serve_browser.py."""

from __future__ import annotations

import aiohttp
import psutil
import pytest

from tests.integration.serving import SCENARIO, serving

pytestmark = [pytest.mark.integration, pytest.mark.slow]


async def status(session: aiohttp.ClientSession, url: str, **kw) -> tuple[int, str]:
    async with session.get(url, allow_redirects=False, **kw) as r:
        return r.status, await r.text()


def session_commands(server_pid: int) -> list[list[str]]:
    return [p.cmdline() for p in psutil.Process(server_pid).children(recursive=True)]


async def test_every_address_needs_the_token():
    with serving("--replay", str(SCENARIO)) as served:
        origin, token = served.origin, served.token
        wrong = "x" * len(token)  # the same length: only the comparison can refuse it
        async with aiohttp.ClientSession() as s:
            code, page = await status(s, served.url)
            assert code == 200
            assert 'class="textual-terminal"' in page  # textual-serve's page
            assert f'data-session-websocket-url="ws://{origin[7:]}/{token}/ws"' in page
            # through a tunnel the browser's address is another: the page follows it
            code, page = await status(s, served.url, headers={"Host": "localhost:9123"})
            assert f'"ws://localhost:9123/{token}/ws"' in page
            for path in ("/", f"/{wrong}/", "/static/js/textual.js",
                         f"/{wrong}/static/js/textual.js", "/ws", f"/{token[:-1]}/"):
                code, body = await status(s, origin + path)
                assert code == 403, (path, code)
                assert "needs the token" in body
            assert (await status(s, served.url + "static/js/textual.js"))[0] == 200
            assert (await status(s, f"{origin}/{token}"))[0] == 302  # on to /TOKEN/
            for path in ("/ws", f"/{wrong}/ws"):
                with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                    await s.ws_connect(origin + path + "?width=80&height=24")
                assert refused.value.status == 403
        assert session_commands(served.proc.pid) == []  # nothing was started for them
        assert served.stop() == 0


@pytest.mark.parametrize("allow", [False, True], ids=["read-only", "allow-actions"])
async def test_a_session_is_the_app_read_only_unless_allowed(allow):
    extra = ["--allow-actions"] if allow else []
    with serving("--replay", str(SCENARIO), *extra) as served:
        ws_url = served.url.replace("http://", "ws://") + "ws?width=120&height=40"
        async with aiohttp.ClientSession() as s, s.ws_connect(ws_url) as ws:
            while True:  # the app's first screen: its process is up
                msg = await ws.receive(timeout=60)
                assert msg.type in (aiohttp.WSMsgType.BINARY, aiohttp.WSMsgType.TEXT), msg
                if msg.type == aiohttp.WSMsgType.BINARY and len(msg.data) > 10:
                    break
            apps = [p for p in psutil.Process(served.proc.pid).children(recursive=True)
                    if "rltui" in p.cmdline()]
            assert len(apps) == 1
            argv = apps[0].cmdline()
            assert argv[argv.index("rltui") + 1:] == (
                [] if allow else ["--read-only"]) + ["replay", str(SCENARIO), "--speed=1"]
            assert (" --read-only " in served.banner[1] + " ") is not allow
            # Ctrl-C with the session open: the server ends, and the app with it
            assert served.stop() == 0
            gone, alive = psutil.wait_procs(apps, timeout=30)
            assert alive == []


def test_another_address_than_loopback_is_warned_of():
    with serving("--replay", str(SCENARIO), "--host", "127.0.0.2") as served:
        assert served.origin.startswith("http://127.0.0.2:")
        assert served.stop() == 0
        assert "warning: --host 127.0.0.2: anyone who can reach" in served.proc.stderr.read()
