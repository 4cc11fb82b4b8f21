"""``y`` in a real terminal: ``rltui stacks DIR`` inside a tmux server of its own. With
``set-clipboard on`` tmux takes the OSC 52 sequence into its paste buffer (``show-buffer``
prints the copied class); with tmux's default, ``external``, it drops it, and the app says so
and names the file. Skipped where tmux is not installed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rltui.diagnosis.copytext import stack_class_text
from tests.integration.tmux import ROOT, Tmux, notice, squeeze
from tests.ui.test_ui_stacks import report_of

FOLDER = "collective-mismatch"

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.fixture
def tmux(tmp_path):
    server = Tmux("rltui-copy")
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    server.start_app(["stacks", f"fixtures/stacks/{FOLDER}"], size=(120, 40), cwd=ROOT,
                     env={"XDG_RUNTIME_DIR": run, "XDG_CONFIG_HOME": tmp_path / "config"})
    server.run = run
    try:
        yield server
    finally:
        server.close()


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
