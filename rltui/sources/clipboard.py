"""Where a copied text goes besides the terminal's clipboard, and whether that clipboard is
likely to take it.

The app copies through OSC 52 (the terminal sets its clipboard from an escape sequence: over
ssh too, and in tmux with ``set-clipboard on``). Whether the terminal did cannot be known: no
terminal answers. So every copy is also written to a file the user can ``cat`` or ``scp``, in
a private folder (0700; the file 0600, created new, never through a link):
``$XDG_RUNTIME_DIR/rltui/copies`` where that is set (a tmpfs only this user reads, emptied at
logout), else ``$XDG_CACHE_HOME/rltui/copies`` (``~/.cache``). The newest ``KEEP`` copies are
kept. And the environment is asked what it says about OSC 52 (``terminal_osc52``): the Linux
console and ``dumb`` have no clipboard (the sequence would be printed, so it is not sent);
tmux drops it unless ``set-clipboard`` is ``on`` (its default, ``external``, ignores it);
GNU screen and Apple's Terminal drop it too.

The text written is scrubbed (``rltui.scrub.outgoing_text``): nothing secret leaves rltui.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rltui.scrub import outgoing_text

KEEP = 20  # copies kept in the folder; older ones are removed
TMUX_TIMEOUT = 1.0  # s: a tmux server that does not answer is taken as "unknown"
YES, UNLIKELY, NO = "yes", "unlikely", "no"  # how likely the terminal takes OSC 52
NO_CLIPBOARD_TERMS = ("linux", "dumb", "cons25", "vt100", "vt220")


@dataclass(frozen=True, slots=True)
class Copied:
    """What became of one copy: the file (None when it could not be written, ``error`` says
    why) and what the environment says of OSC 52 (``osc52``: yes / unlikely / no, ``why``
    with the fix where there is one)."""

    path: Path | None
    error: str = ""
    osc52: str = YES
    why: str = ""


Runner = Callable[..., subprocess.CompletedProcess]


def tmux_set_clipboard(env: Mapping[str, str], run: Runner = subprocess.run) -> str | None:
    """The ``set-clipboard`` option of the tmux server the app runs in (``on``, ``external``,
    ``off``), asked on the socket ``$TMUX`` names; None when tmux does not answer."""
    socket = env.get("TMUX", "").split(",", 1)[0]
    cmd = ["tmux"] + (["-S", socket] if socket else []) + ["show-options", "-sv",
                                                           "set-clipboard"]
    try:
        done = run(cmd, capture_output=True, text=True, timeout=TMUX_TIMEOUT, check=False,
                   stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and value else None


def terminal_osc52(env: Mapping[str, str], run: Runner = subprocess.run) -> tuple[str, str]:
    """(yes | unlikely | no, why): what this environment says about OSC 52 reaching a
    clipboard. ``yes`` means nothing speaks against it (most terminals take it; a few ask the
    user first or ignore it, and nothing tells)."""
    term = env.get("TERM", "")
    if term in NO_CLIPBOARD_TERMS or not term:
        return NO, f"the terminal (TERM={term or 'unset'}) has no clipboard escape"
    if env.get("TMUX"):
        value = tmux_set_clipboard(env, run)
        if value != "on":
            return UNLIKELY, (f"tmux's set-clipboard is {value or 'unknown'}, so tmux drops "
                              "it (`tmux set -g set-clipboard on` lets it through)")
    elif term.startswith("screen") or env.get("STY"):
        return UNLIKELY, "GNU screen does not pass it to the terminal"
    if env.get("TERM_PROGRAM") == "Apple_Terminal":
        return UNLIKELY, "Apple's Terminal ignores it (iTerm2 and most others take it)"
    return YES, ""


def copies_folder(env: Mapping[str, str]) -> Path:
    """``$XDG_RUNTIME_DIR/rltui/copies``, else ``$XDG_CACHE_HOME/rltui/copies``
    (``~/.cache``). Relative values are ignored, as the XDG spec asks."""
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return Path(runtime) / "rltui" / "copies"
    cache = env.get("XDG_CACHE_HOME", "")
    base = Path(cache) if cache and os.path.isabs(cache) else Path.home() / ".cache"
    return base / "rltui" / "copies"


def _private_folder(folder: Path) -> None:
    """Create ``folder`` (and missing parents) 0700; refuse one that is a link, not a folder,
    or another user's, and take group and other access away from one of ours."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{folder} is not a folder (a link?)")
    if st.st_uid != os.getuid():
        raise OSError(f"{folder} belongs to another user")
    if st.st_mode & 0o077:
        os.chmod(folder, 0o700)


def _prune(folder: Path, keep: int) -> None:
    copies = sorted((p for p in folder.glob("copy-*.txt") if p.is_file()),
                    key=lambda p: p.name)  # names sort by time
    for old in copies[:-keep]:
        try:
            old.unlink()
        except OSError:
            pass  # gone already, or not ours to remove: the next copy tries again


def write_copy(text: str, kind: str, env: Mapping[str, str] | None = None,
               now: float | None = None, keep: int = KEEP) -> Path:
    """Write ``text`` (scrubbed) to a new 0600 file in the copies folder and return its path.
    ``kind`` names what it is (``evidence``, ``stack``, ``report-path``). Raises OSError."""
    env = os.environ if env is None else env
    folder = copies_folder(env)
    _private_folder(folder)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(time.time() if now is None else now))
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in kind) or "text"
    data = outgoing_text(text).encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in range(1, 1000):
        path = folder / (f"copy-{stamp}-{safe}.txt" if n == 1 else
                         f"copy-{stamp}-{safe}-{n}.txt")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue  # two copies in one second
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        _prune(folder, keep)
        return path
    raise OSError(f"{folder}: no free file name for {kind}")


def save_copy(text: str, kind: str, env: Mapping[str, str] | None = None,
              run: Runner = subprocess.run, now: float | None = None) -> Copied:
    """The app's copy sink (``RltuiApp.copy_sink``): the file written, and what the
    environment says of OSC 52. Never raises: a file that cannot be written is ``error``."""
    env = os.environ if env is None else env
    osc52, why = terminal_osc52(env, run)
    try:
        path: Path | None = write_copy(text, kind, env, now)
        error = ""
    except OSError as exc:
        path, error = None, str(exc.strerror or exc) + (f": {exc.filename}" if exc.filename
                                                         else "")
    return Copied(path=path, error=error, osc52=osc52, why=why)
