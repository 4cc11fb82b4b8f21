"""A real terminal for the app's tests: a tmux server on a socket of its own, without the user's
configuration, one window named ``t``. Keys go in with ``send-keys``, the screen comes back
with ``capture-pane``, and waits poll the screen against a deadline."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXITED = "rltui exited with status"


class Tmux:
    """A tmux server on its own socket, without the user's configuration."""

    def __init__(self, prefix: str = "rltui") -> None:
        self.name = f"{prefix}-{uuid.uuid4().hex[:8]}"

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["tmux", "-L", self.name, "-f", "/dev/null", *args],
                              capture_output=True, text=True, timeout=10, check=check)

    def start_app(self, args: Sequence[str], *, size: tuple[int, int], cwd: Path,
                  env: Mapping[str, str]) -> None:
        """``python -m rltui ARGS`` in the window, this checkout's whatever the folder it runs
        in. When it ends, the shell that started it prints its exit status and stays, so that
        tmux reads that line (a pane whose process has ended can lose its last output)."""
        settings = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
        # COLUMNS and LINES (pytest sets them) would fix the app's size whatever tmux's is
        command = (f"cd {shlex.quote(str(cwd))} && env -u COLUMNS -u LINES "
                   f"PYTHONPATH={shlex.quote(str(ROOT))} {settings} "
                   f"{shlex.quote(sys.executable)} -m rltui {shlex.join(args)}; "
                   f'echo "{EXITED} $?"; exec sleep infinity')
        width, height = size
        self("new-session", "-d", "-s", "t", "-x", str(width), "-y", str(height), command)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-J", "-t", "t").stdout

    def keys(self, *keys: str) -> None:
        """Keys as tmux names them (``Enter``, ``Escape``, ``C-c``); other words are typed."""
        self("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        """Characters as they are, ``/`` and ``;`` included (never read as key names)."""
        self("send-keys", "-t", "t", "-l", text)

    def until(self, condition: Callable[[str], object], what: str,
              timeout: float = 30.0) -> str:
        """Poll the pane until ``condition(text)`` holds; the pane's text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if condition(text):
                return text
            assert time.monotonic() < deadline, f"never: {what}\n{text}"
            time.sleep(0.05)  # polling a terminal's screen: there is no event to wait on

    def shows(self, *words: str, timeout: float = 30.0) -> str:
        """Wait until every one of ``words`` is on the screen; the screen."""
        return self.until(lambda text: all(w in text for w in words),
                          f"{words!r} on the screen", timeout)

    def close(self) -> None:
        socket = self("display-message", "-p", "#{socket_path}", check=False).stdout.strip()
        self("kill-server", check=False)
        if socket:  # tmux leaves its socket file behind
            Path(socket).unlink(missing_ok=True)


def notice(screen: str) -> str:
    """The toasts' characters, from the screen's lines right of their left edge (``▌``),
    without spaces, line breaks and the borders of the panes beside them (a toast wraps
    anywhere, a path included)."""
    return squeeze("".join(line.rsplit("▌", 1)[1] for line in screen.splitlines()
                           if "▌" in line))


def squeeze(text: str) -> str:
    return re.sub(r"[\s│─╮╯╭╰▁▂▃▄▅▆▇█]", "", text)


def exit_status(screen: str) -> int | None:
    """The app's exit status, once the shell that started it (Tmux.start_app) has said it."""
    found = re.search(rf"^{EXITED} (\d+)$", screen, re.MULTILINE)
    return int(found[1]) if found else None
