"""Where ``y`` writes its copy (a private folder, a new 0600 file, scrubbed) and what the
environment says of OSC 52 (the tmux answer comes from a stand-in runner here; a real tmux
server: tests/integration/test_copy_tmux.py)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from rltui.sources.clipboard import (
    NO,
    UNLIKELY,
    YES,
    copies_folder,
    save_copy,
    terminal_osc52,
    write_copy,
)

SECRET = "hf_abcdefghijklmnopqrstuvwx"


def mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def tmux_says(value: str | None, calls: list | None = None):
    """A runner standing in for ``tmux show-options -sv set-clipboard``."""
    def run(cmd, **kwargs):
        if calls is not None:
            calls.append(cmd)
        if value is None:
            raise FileNotFoundError("tmux")
        return subprocess.CompletedProcess(cmd, 0, stdout=value + "\n", stderr="")
    return run


def test_runtime_dir_first_then_the_cache(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    assert copies_folder({"XDG_RUNTIME_DIR": str(run)}) == run / "rltui" / "copies"
    cache = tmp_path / "cache"
    assert copies_folder({"XDG_RUNTIME_DIR": str(tmp_path / "absent"),
                          "XDG_CACHE_HOME": str(cache)}) == cache / "rltui" / "copies"
    # relative values are ignored (the XDG spec)
    assert copies_folder({"XDG_RUNTIME_DIR": "run", "XDG_CACHE_HOME": "cache", "HOME": "/h"}
                         ).parts[-3:] == (".cache", "rltui", "copies")


def test_the_file_is_private_new_and_scrubbed(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    path = write_copy(f"HF_TOKEN={SECRET}\nline two\x1b[2J\n", "evidence", env, now=0)
    assert path.parent == tmp_path / "rltui" / "copies"
    assert mode(path.parent) == 0o700 and mode(path) == 0o600
    text = path.read_text()
    assert SECRET not in text and "HF_TOKEN=***" in text
    assert "\x1b" not in text and "line two\\x1b[2J\n" in text  # no escape reaches a terminal
    second = write_copy("again", "evidence", env, now=0)  # same second: a new name
    assert second != path and path.read_text() == text


def test_a_wide_open_folder_of_ours_is_closed_and_a_link_refused(tmp_path):
    folder = tmp_path / "rltui" / "copies"
    folder.mkdir(parents=True, mode=0o777)
    os.chmod(folder, 0o777)
    write_copy("x", "stack", {"XDG_RUNTIME_DIR": str(tmp_path)})
    assert mode(folder) == 0o700

    other = tmp_path / "other"
    elsewhere = tmp_path / "elsewhere"
    (other / "rltui").mkdir(parents=True)
    elsewhere.mkdir()
    (other / "rltui" / "copies").symlink_to(elsewhere)
    with pytest.raises(OSError, match="not a folder"):
        write_copy("x", "stack", {"XDG_RUNTIME_DIR": str(other)})
    assert list(elsewhere.iterdir()) == []


def test_the_newest_copies_are_kept(tmp_path):
    env = {"XDG_RUNTIME_DIR": str(tmp_path)}
    paths = [write_copy(str(n), "stack", env, now=1_700_000_000 + n, keep=3) for n in range(5)]
    assert sorted(p.name for p in paths[0].parent.iterdir()) == [p.name for p in paths[2:]]


@pytest.mark.parametrize("env, tmux, expected", [
    ({"TERM": "xterm-256color"}, None, YES),
    ({"TERM": "xterm-256color", "TMUX": "/tmp/tmux-1/default,1,0"}, "on", YES),
    ({"TERM": "tmux-256color", "TMUX": "/tmp/tmux-1/default,1,0"}, "external", UNLIKELY),
    ({"TERM": "screen", "TMUX": "/tmp/tmux-1/default,1,0"}, "off", UNLIKELY),
    ({"TERM": "screen", "TMUX": "/tmp/tmux-1/default,1,0"}, None, UNLIKELY),  # no answer
    ({"TERM": "screen", "STY": "123.pts-0"}, None, UNLIKELY),
    ({"TERM": "xterm-256color", "TERM_PROGRAM": "Apple_Terminal"}, None, UNLIKELY),
    ({"TERM": "linux"}, None, NO),
    ({"TERM": "dumb"}, None, NO),
    ({}, None, NO),
])
def test_what_the_environment_says_of_osc52(env, tmux, expected):
    calls: list = []
    verdict, why = terminal_osc52(env, tmux_says(tmux, calls))
    assert verdict == expected
    assert (why == "") == (expected == YES)
    if "TMUX" in env:  # the server the app runs in, by its socket
        assert calls == [["tmux", "-S", "/tmp/tmux-1/default", "show-options", "-sv",
                          "set-clipboard"]]
        if expected != YES:
            assert "set-clipboard on" in why
    else:
        assert calls == []


def test_save_copy_never_raises(tmp_path):
    (tmp_path / "rltui").write_text("")  # a file where the folder would go: even root fails
    env = {"TERM": "linux", "XDG_RUNTIME_DIR": str(tmp_path)}
    copied = save_copy("text", "evidence", env, tmux_says(None))
    assert copied.path is None and copied.error
    assert copied.osc52 == NO and "TERM=linux" in copied.why
