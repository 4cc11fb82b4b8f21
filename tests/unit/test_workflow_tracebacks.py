"""Traceback excerpts for the text report: the user's frames and the exception survive the cut,
library frames go first."""

from __future__ import annotations

import pytest

from rltui.checks.workflow.tracebacks import GAP, excerpt, is_user_file

STDLIB = "/opt/py/lib/python3.11/asyncio/base_events.py"


def frame(path: str, line: int, code: str, marker: bool = False) -> str:
    out = f'  File "{path}", line {line}, in f{line}\n    {code}\n'
    return out + ("    " + "^" * len(code) + "\n" if marker else "")


def traceback_of(*frames: str, error: str = "ValueError: boom") -> str:
    return "Traceback (most recent call last):\n" + "".join(frames) + error + "\n"


@pytest.mark.parametrize("path, user", [
    ("/home/u/agent.py", True),
    ("agent.py", True),
    ("/opt/py/lib/python3.11/asyncio/streams.py", False),
    ("/usr/lib/python3.13t/json/decoder.py", False),
    ("/venv/lib/python3.11/site-packages/httpx/_client.py", False),
    ("/usr/lib/python3/dist-packages/requests/api.py", False),
    ("<frozen importlib._bootstrap>", False),
])
def test_whose_file(path, user):
    assert is_user_file(path) is user


def test_a_short_traceback_is_kept_whole():
    tb = traceback_of(frame("/home/u/a.py", 3, "x()", marker=True))
    assert excerpt(tb, 12) == tb.rstrip().splitlines()
    assert excerpt(None, 12) == [] and excerpt("", 12) == []


def test_the_entry_and_the_innermost_user_frame_survive_a_deep_library_stack():
    tb = traceback_of(frame("/home/u/agent.py", 10, "await chat(p)", marker=True),
                      frame("/home/u/client.py", 20, "await open_connection()", marker=True),
                      *[frame(STDLIB, n, f"await step{n}()", marker=True) for n in range(30)],
                      error="ConnectionRefusedError: refused")
    out = excerpt(tb, 12)
    assert len(out) <= 12
    assert out[0] == "Traceback (most recent call last):"
    assert out[1:5] == ['  File "/home/u/agent.py", line 10, in f10', "    await chat(p)",
                        '  File "/home/u/client.py", line 20, in f20',
                        "    await open_connection()"]
    assert out[5:7] == [f'  File "{STDLIB}", line 0, in f0', "    await step0()"]
    assert out[-2:] == [GAP, "ConnectionRefusedError: refused"]
    assert not any(set(line.strip()) <= {"^"} for line in out), "markers go first"


def test_frames_above_the_innermost_user_frame_are_marked_when_left_out():
    tb = traceback_of(frame("/home/u/agent.py", 1, "a()"),
                      *[frame(STDLIB, n, "lib()") for n in range(2, 8)],
                      frame("/home/u/reward.py", 9, "score(x)"),
                      *[frame(STDLIB, n, "lib()") for n in range(10, 40)])
    out = excerpt(tb, 10)
    inner = out.index('  File "/home/u/reward.py", line 9, in f9')
    assert out[inner - 1] == GAP and "/home/u/agent.py" in out[1]
    assert out[-1] == "ValueError: boom" and len(out) <= 10


def test_a_cut_never_leaves_a_file_line_without_its_source():
    tb = traceback_of(frame("/home/u/a.py", 1, "a()"),
                      *[frame(STDLIB, n, "lib()") for n in range(2, 30)])
    for limit in range(6, 20):
        out = excerpt(tb, limit)
        for i, line in enumerate(out):
            if line.lstrip().startswith("File "):
                assert i + 1 < len(out) and out[i + 1].startswith("    "), (limit, out)


def test_a_traceback_without_user_frames_keeps_its_last_lines():
    tb = traceback_of(*[frame(STDLIB, n, "lib()") for n in range(30)])
    assert excerpt(tb, 5) == tb.rstrip().splitlines()[-5:]


def test_a_long_message_keeps_its_first_lines():
    tb = traceback_of(frame("/home/u/a.py", 1, "a()"),
                      *[frame(STDLIB, n, "lib()") for n in range(2, 30)],
                      error="ValueError: first\n" + "\n".join(f"detail {i}" for i in range(20)))
    out = excerpt(tb, 12)
    assert "ValueError: first" in out and out[-1] == GAP
    assert '  File "/home/u/a.py", line 1, in f1' in out


def test_a_run_s_error_names_what_its_client_wrapped():
    """The openai SDK says "Connection error." over the HTTP client's error: the message shows
    the end of the ``raise ... from`` chain, once, and only when it says something new."""
    from rltui.checks.workflow.worker import _message

    def chained(outer: Exception, *causes: Exception) -> Exception:
        try:
            for cause in causes:
                try:
                    raise cause
                except Exception as exc:
                    raise outer from exc
        except Exception as exc:
            return exc
        return outer

    refused = ConnectionRefusedError(111, "Connect call failed")
    inner = OSError("All connection attempts failed")
    inner.__cause__ = refused
    outer = chained(RuntimeError("Connection error."), inner)
    assert _message(outer) == ("Connection error. (from ConnectionRefusedError: [Errno 111] "
                               "Connect call failed)")
    assert _message(ValueError("plain")) == "plain"
    same = chained(ValueError("bad key 7"), KeyError("bad key 7"))
    assert _message(same) == "bad key 7 (from KeyError: 'bad key 7')"
    said = chained(ValueError("wrapped: boom"), OSError("boom"))
    assert _message(said) == "wrapped: boom"
    bare = chained(ValueError("failed"), OSError())
    assert _message(bare) == "failed (from OSError)"
