"""Pending tasks captured from a live event loop, and their grouping by where they wait."""

from __future__ import annotations

import asyncio

from rltui.checks.workflow.taskdump import capture_tasks, frame_kind
from rltui.checks.workflow.taskgroups import group_tasks, where


async def _waiter(event: asyncio.Event) -> None:
    await event.wait()  # WAIT-HERE


async def _sleeper() -> None:
    await asyncio.sleep(3600)


def test_tasks_waiting_at_the_same_line_form_one_group():
    async def main():
        event = asyncio.Event()
        tasks = [asyncio.create_task(_waiter(event), name=f"rltui-run-concurrent-{i}")
                 for i in range(5)]
        tasks.append(asyncio.create_task(_sleeper(), name="helper"))
        await asyncio.sleep(0)
        not_started = asyncio.create_task(_sleeper(), name="rltui-run-concurrent-9")
        groups = group_tasks(capture_tasks(asyncio.get_running_loop(),
                                           skip={asyncio.current_task()}))
        for t in tasks + [not_started]:
            t.cancel()
        return groups

    groups = asyncio.run(main())
    assert [g["count"] for g in groups] == [5, 1, 1]
    first = groups[0]
    assert first["runs"] == [0, 1, 2, 3, 4]
    assert first["where"].startswith("test_workflow_taskdump.py:")
    assert first["where"].endswith("in _waiter")
    assert first["waiting_on"] == "Event.wait"
    assert "WAIT-HERE" in first["frames"][0]["code"]
    by_name = {g["tasks"][0]: g for g in groups[1:]}
    assert by_name["helper"]["runs"] == []
    assert "sleep" in by_name["helper"]["frames"][-1]["function"]
    assert by_name["rltui-run-concurrent-9"]["state"] == "not started"
    assert by_name["rltui-run-concurrent-9"]["runs"] == [9]
    assert first["state"] == "waiting"


def test_where_prefers_the_user_s_frame():
    frames = [{"file": "/app/agent.py", "line": 3, "function": "run", "kind": "user"},
              {"file": "/venv/lib/site-packages/httpx/x.py", "line": 9, "function": "send",
               "kind": "library"},
              {"file": "/usr/lib/python3.11/asyncio/locks.py", "line": 1, "function": "wait",
               "kind": "stdlib"}]
    assert where(frames)["file"] == "/app/agent.py"
    assert where(frames[1:])["function"] == "send"
    assert where(frames[2:])["function"] == "wait"
    assert where([]) is None


def test_frame_kinds():
    assert frame_kind(asyncio.__file__) == "stdlib"
    assert frame_kind("/venv/lib/python3.11/site-packages/openai/x.py") == "library"
    assert frame_kind(__file__) == "user"
