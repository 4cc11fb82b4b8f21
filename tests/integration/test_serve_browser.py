"""``rltui serve`` in a real headless Chromium (Debian's chromium and chromium-driver, driven
with selenium): the page shows the header, the GPU and rank panes of a replayed scenario, `s`
opens the compare screen, and the page without the token is refused. Skipped, with the reason,
where no Chromium, driver or selenium is installed.

The terminal is drawn on a canvas (xterm.js), so the text is read from what the page's
websocket received (a wrapper installed before the page's own script), with the escape
sequences taken out. The screenshots are kept in RLTUI_TEST_ARTEFACTS (default
build/test-artefacts) under serve/.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.integration.serving import ROOT, SCENARIO, serving

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTEFACTS = Path(os.environ.get("RLTUI_TEST_ARTEFACTS", ROOT / "build" / "test-artefacts"))
# Every binary websocket message the page receives, kept for the test to read.
CAPTURE = """
window.__received = [];
const Native = window.WebSocket;
window.WebSocket = function (url, protocols) {
  const socket = protocols ? new Native(url, protocols) : new Native(url);
  socket.addEventListener("message", (e) => {
    if (typeof e.data !== "string") window.__received.push(Array.from(new Uint8Array(e.data)));
  });
  return socket;
};
window.WebSocket.prototype = Native.prototype;
"""
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                     rb"|\x1b[()][0-9A-B]|\x1b[=>78]")


@pytest.fixture
def browser():
    if not (CHROMIUM and DRIVER):
        pytest.skip("no chromium and chromedriver (Debian: apt-get install chromium "
                    "chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1400,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CAPTURE})
    try:
        yield driver
    finally:
        driver.quit()


def received(driver, since: int = 0) -> str:
    """The text the page's terminal has received (from message ``since`` on)."""
    chunks = driver.execute_script("return window.__received")[since:]
    return ESCAPES.sub(b"", bytes(b for c in chunks for b in c)).decode("utf-8", "replace")


def shows(driver, *words: str, since: int = 0, timeout: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: all(w in received(d, since) for w in words),
        message=f"the page never showed {words}")


def test_the_app_in_chromium(browser):
    out = ARTEFACTS / "serve"
    out.mkdir(parents=True, exist_ok=True)
    with serving("--replay", str(SCENARIO)) as served:
        browser.get(served.origin + "/")  # no token: refused
        assert "needs the token" in browser.page_source
        browser.save_screenshot(str(out / "refused.png"))

        browser.get(served.url)
        # the header (the app's name, the replay's clock, the job) and the GPU and rank panes
        shows(browser, "rltui", "replay", "cleanup-deadlock", "GPUs (4)", "Ranks (4")
        browser.save_screenshot(str(out / "main.png"))

        keys = browser.find_element("css selector", ".xterm-helper-textarea")
        mark = len(browser.execute_script("return window.__received"))
        keys.send_keys("e")  # the replay's end: its stack rounds are in, the hang found
        shows(browser, "Cleanup deadlock", since=mark)
        mark = len(browser.execute_script("return window.__received"))
        keys.send_keys("s")
        shows(browser, "Classes", "Merged stacks", "destroy_process_group", since=mark)
        browser.save_screenshot(str(out / "compare.png"))
        (out / "compare.txt").write_text(received(browser, mark))
        assert served.stop() == 0
