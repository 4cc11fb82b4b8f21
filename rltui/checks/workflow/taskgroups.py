"""Pending tasks grouped by where they wait, and how a frame is named. Pure; standard library
only (the worker imports it under the workflow's interpreter, the report in rltui's).

A frame is ``{"file", "line", "function", "code", "kind"}`` with kind ``user``, ``library``
(site-packages) or ``stdlib``. A task is ``{"name", "frames" (outermost first), "state"
(``waiting``, ``not started``, ``running``), "waiting_on"}``, where ``waiting_on`` names the
method the innermost frame is in (``Event.wait``). Tasks that wait at the same place (same
frames, same state) form one group: a deadlock shows as one large group waiting on a lock or
event, next to the one task that holds it.
"""

from __future__ import annotations

import os

STATE_TEXT = {"not started": "not started yet",
              "running": "running: this task holds the event loop"}


def where(frames: list) -> dict | None:
    """The frame to name as the place: the innermost frame of the user's code, else the innermost
    outside the standard library, else the innermost."""
    for kind in ("user", "library"):
        for f in reversed(frames):
            if f.get("kind") == kind:
                return f
    return frames[-1] if frames else None


def frame_text(frame: dict | None) -> str:
    if not frame:
        return "(no Python frame)"
    return f"{os.path.basename(frame['file'])}:{frame['line']} in {frame['function']}"


def run_index(name: str) -> int | None:
    """The run index of the worker's own run tasks (named ``rltui-run-<step>-<index>``)."""
    if name.startswith("rltui-run-"):
        tail = name.rsplit("-", 1)[-1]
        if tail.isdigit():
            return int(tail)
    return None


def group_tasks(tasks: list) -> list:
    """Tasks grouped by where they wait, largest group first: ``{"where", "count", "runs",
    "tasks" (names, first 20), "waiting_on", "frames"}``."""
    groups: dict = {}
    for task in tasks:
        state = task.get("state", "waiting")
        key = (tuple((f["file"], f["line"], f["function"]) for f in task["frames"]),
               task.get("waiting_on", ""), state)
        group = groups.get(key)
        if group is None:
            place = frame_text(where(task["frames"])) if task["frames"] else None
            group = groups[key] = {"where": place or STATE_TEXT.get(state, "(no Python frame)"),
                                   "count": 0, "runs": [], "tasks": [], "state": state,
                                   "waiting_on": task.get("waiting_on") or None,
                                   "frames": task["frames"]}
        group["count"] += 1
        index = run_index(task["name"])
        if index is not None:
            group["runs"].append(index)
        if len(group["tasks"]) < 20:
            group["tasks"].append(task["name"])
    for group in groups.values():
        group["runs"].sort()
        group["tasks"].sort(key=lambda name: (run_index(name) is None, run_index(name) or 0,
                                              name))
    return sorted(groups.values(), key=lambda g: -g["count"])
