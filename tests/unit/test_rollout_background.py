"""``in_daemon_thread``: a load the run can give up on, without the run or the process waiting
for it (a ThreadPoolExecutor's threads are joined at exit)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rltui.checks.rollout.background import in_daemon_thread


def test_the_result_comes_back_from_a_daemon_thread():
    seen = {}

    def load(a, b):
        seen["daemon"] = threading.current_thread().daemon
        seen["name"] = threading.current_thread().name
        return a + b

    async def main():
        return await in_daemon_thread(load, 2, 3, name="rltui-test-load")

    assert asyncio.run(main()) == 5
    assert seen == {"daemon": True, "name": "rltui-test-load"}


def test_an_exception_reaches_whoever_awaits():
    def load():
        raise LookupError("no such model")

    async def main():
        await in_daemon_thread(load, name="rltui-test-load")

    with pytest.raises(LookupError, match="no such model"):
        asyncio.run(main())


def test_an_abandoned_load_runs_on_unseen_after_the_loop_is_closed(monkeypatch):
    """The run gives up on a blocked load and its loop closes; when the load ends later, its
    result is dropped without an error in the thread."""
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    errors = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))

    def load():
        started.set()
        release.wait()
        ended.set()
        return "model"

    async def main():
        future = in_daemon_thread(load, name="rltui-test-abandoned")
        await asyncio.get_running_loop().run_in_executor(None, started.wait)
        future.cancel()
        with pytest.raises(asyncio.CancelledError):
            await future
        return [t for t in threading.enumerate() if t.name == "rltui-test-abandoned"]

    loop = asyncio.new_event_loop()
    threads = loop.run_until_complete(main())
    loop.close()
    assert len(threads) == 1 and threads[0].daemon and threads[0].is_alive()
    release.set()
    threads[0].join()
    assert ended.is_set() and errors == []


def test_a_cancelled_future_drops_a_late_result_while_the_loop_still_runs():
    release = threading.Event()

    errors = []

    async def main():
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _loop, context: errors.append(context))
        future = in_daemon_thread(release.wait, name="rltui-test-late")
        future.cancel()
        release.set()
        thread = next(t for t in threading.enumerate() if t.name == "rltui-test-late")
        # the thread hands its result to the loop before it ends, so that callback has run
        # (and must not have raised) by the time this join's own result comes back
        await loop.run_in_executor(None, thread.join)
        return future.cancelled()

    assert asyncio.run(main()) and errors == []
