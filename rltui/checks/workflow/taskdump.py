"""Capture where the event loop's tasks wait, and where a blocked loop thread is stuck. Runs in
the worker process (it reads live tasks and frames); the shapes it produces and their grouping
are in ``taskgroups``. Standard library only: the worker may run under the user's interpreter.
"""

from __future__ import annotations

import asyncio
import inspect
import linecache
import os
import sys
import sysconfig
import traceback
from collections.abc import Iterable
from typing import Any

MAX_FRAMES = 40
MAX_TASKS = 2000
_OWN_FILES: set = set()


def _stdlib_dirs() -> tuple:
    paths = sysconfig.get_paths()
    return tuple(os.path.realpath(paths[k]) + os.sep for k in ("stdlib", "platstdlib")
                 if paths.get(k))


_STDLIB = _stdlib_dirs()


def frame_kind(filename: str) -> str:
    if "site-packages" in filename or "dist-packages" in filename:
        return "library"
    real = os.path.realpath(filename) if filename and not filename.startswith("<") else filename
    if filename.startswith("<frozen") or any(real.startswith(d) for d in _STDLIB):
        return "stdlib"
    return "user"


def ignore_file(filename: str) -> None:
    """Frames from this file (the worker's own wrappers) are left out of dumps."""
    _OWN_FILES.add(filename)


def _frame(filename: str, lineno: int | None, function: str, code: str = "") -> dict:
    if not code and lineno:
        code = linecache.getline(filename, lineno).strip()
    return {"file": filename, "line": lineno or 0, "function": function, "code": code[:160],
            "kind": frame_kind(filename)}


def _coro_chain(coro: Any) -> tuple[list, Any]:
    """The frames of a coroutine and the ones it awaits (outermost first), and the innermost
    awaited object that is not a coroutine (a Future, usually)."""
    frames = []
    for _ in range(MAX_FRAMES):
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) \
            or getattr(coro, "ag_frame", None)
        if frame is None:
            break
        frames.append(frame)
        nxt = getattr(coro, "cr_await", None)
        if nxt is None:
            nxt = getattr(coro, "gi_yieldfrom", None)
        if nxt is None:
            return frames, None
        coro = nxt
    return frames, coro


def _owner(frame: Any) -> str:
    """``Event.wait`` for a frame of a method, else the function's name."""
    name = frame.f_code.co_name
    try:
        owner = frame.f_locals.get("self")
    except Exception:  # noqa: BLE001 - reading another thread's frame must never raise
        owner = None
    return f"{type(owner).__name__}.{name}" if owner is not None else name


def _state(coro: Any) -> str:
    try:
        return inspect.getcoroutinestate(coro) if inspect.iscoroutine(coro) else ""
    except Exception:  # noqa: BLE001
        return ""


def capture_task(task: asyncio.Task) -> dict:
    coro = task.get_coro()
    frames, leaf = _coro_chain(coro)
    state = {inspect.CORO_CREATED: "not started", inspect.CORO_RUNNING: "running"}.get(
        _state(coro), "waiting")
    if state != "waiting":
        waiting_on = ""
    elif frames:
        waiting_on = _owner(frames[-1])
    else:
        waiting_on = type(leaf).__name__ if leaf is not None else ""
    out = [_frame(f.f_code.co_filename, f.f_lineno, f.f_code.co_name) for f in frames]
    out = [f for f in out if f["file"] not in _OWN_FILES]
    return {"name": task.get_name(), "frames": out[-MAX_FRAMES:], "state": state,
            "waiting_on": waiting_on}


def capture_tasks(loop: asyncio.AbstractEventLoop, skip: Iterable = ()) -> list:
    """Every pending task of ``loop`` but ``skip`` (the worker's own bookkeeping tasks). Safe to
    call from another thread while the loop thread is stuck."""
    for _ in range(5):
        try:
            own = set(skip)
            tasks = [t for t in list(asyncio.all_tasks(loop)) if t not in own]
            break
        except RuntimeError:  # the task set changed while being read (another thread)
            continue
    else:
        return []
    return [capture_task(t) for t in tasks[:MAX_TASKS]]


def capture_thread(thread_id: int) -> list:
    """The Python stack of a thread (outermost first), e.g. the loop thread while it is blocked."""
    frame = sys._current_frames().get(thread_id)
    if frame is None:
        return []
    frames = [_frame(s.filename, s.lineno, s.name, s.line or "")
              for s in traceback.extract_stack(frame)]
    # Below the worker's own frames (runpy, the loop's machinery, the run wrapper) is the part
    # that matters: the workflow's code that holds the loop.
    own = [i for i, f in enumerate(frames) if f["file"] in _OWN_FILES]
    if own and own[-1] + 1 < len(frames):
        frames = frames[own[-1] + 1:]
    return frames[-MAX_FRAMES:]


