"""``y`` in a real terminal: ``rltui stacks DIR`` inside a tmux server of its own. With
``set-clipboard on`` tmux takes the OSC 52 sequence into its paste buffer (``show-buffer``
prints the copied class); with tmux's default, ``external``, it drops it, and the app says so
and names the file. Skipped where tmux is not installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from rltui.diagnosis.copytext import stack_class_text
from tests.ui.test_ui_stacks import report_of

ROOT = Path(__file__).resolve().parents[2]
FOLDER = "collective-mismatch"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


class Tmux:
    """A tmux server on its own socket, without the user's configuration."""

    def __init__(self) -> None:
        self.name = f"rltui-copy-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.name, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=10, check=check)

    def until(self, condition, what: str, timeout: float = 30.0) -> str:
        """Poll the pane until ``condition(text)`` holds; the pane's text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self("capture-pane", "-p", "-J", "-t", "t").stdout
            if condition(text):
                return text
            assert time.monotonic() < deadline, f"never: {what}\n{text}"
            time.sleep(0.05)  # polling a terminal's screen: there is no event to wait on

    def close(self) -> None:
        socket = self("display-message", "-p", "#{socket_path}", check=False).stdout.strip()
        self("kill-server", check=False)
        if socket:  # tmux leaves its socket file behind
            Path(socket).unlink(missing_ok=True)


@pytest.fixture
def tmux(tmp_path):
    server = Tmux()
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    # COLUMNS and LINES (pytest sets them) would fix the app's size whatever tmux's is
    command = (f"cd {ROOT} && env -u COLUMNS -u LINES PYTHONPATH={ROOT} XDG_RUNTIME_DIR={run} "
               f"XDG_CONFIG_HOME={tmp_path / 'config'} {sys.executable} -m rltui stacks "
               f"fixtures/stacks/{FOLDER}; sleep 30")
    server("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", command)
    server.run = run
    try:
        yield server
    finally:
        server.close()


def notice(screen: str) -> str:
    """The toast's characters, from the screen's lines right of its left edge (``▌``), without
    spaces, line breaks and the borders of the panes beside it (a toast wraps anywhere)."""
    return squeeze("".join(line.rsplit("▌", 1)[1] for line in screen.splitlines()
                           if "▌" in line))


def squeeze(text: str) -> str:
    return re.sub(r"[\s│─╮╯╭╰▁▂▃▄▅▆▇█]", "", text)


def copies(run: Path) -> list[Path]:
    return sorted(run.rglob("copy-*.txt"))


def test_with_set_clipboard_on_the_class_lands_in_tmuxs_buffer(tmux):
    tmux("set-option", "-s", "set-clipboard", "on")
    tmux.until(lambda t: "Classes" in t, "the compare screen")
    tmux("send-keys", "-t", "t", "y")
    text = notice(tmux.until(lambda t: "OSC52" in notice(t), "the copy's notice"))
    assert text.startswith(squeeze("Copy Copied stack class #1 (0) (OSC 52); also in /")), text
    buffer = tmux("show-buffer").stdout
    report, _ = report_of(FOLDER)
    assert buffer == stack_class_text(report, 0)
    file, = copies(tmux.run)
    assert text.endswith(squeeze(f" also in {file}"))
    assert file.read_text() == buffer and oct(file.stat().st_mode & 0o777) == "0o600"


def test_with_tmuxs_default_the_notice_says_how_and_where(tmux):
    assert tmux("show-options", "-sv", "set-clipboard").stdout.strip() == "external"
    tmux.until(lambda t: "Classes" in t, "the compare screen")
    tmux("send-keys", "-t", "t", "y")
    text = notice(tmux.until(lambda t: "OSC52" in notice(t), "the copy's notice"))
    assert text == squeeze(f"Copy Stack class #1 (0) is in {copies(tmux.run)[0]}. Sent by "
                           "OSC 52 too, but tmux's set-clipboard is external, so tmux drops it "
                           "(`tmux set -g set-clipboard on` lets it through)."), text
    assert tmux("list-buffers").stdout == ""  # tmux took nothing
    file, = copies(tmux.run)
    assert file.read_text().startswith("# rltui stack class #1")
