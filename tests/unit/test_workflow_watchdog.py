"""The worker's blocked-loop watchdog on a real event loop: one task that holds the loop past
the threshold is a block; many tasks that each run a short while in one turn of the loop (as
512 runs building their first request with the openai SDK do) keep the loop from answering as
long, but no call in them blocks, and that is not reported."""

from __future__ import annotations

import asyncio
import threading
import time

from rltui.checks.workflow.worker import Watchdog

THRESHOLD = 0.5


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def send(self, event: str, **fields) -> None:
        with self.lock:
            self.events.append((event, fields))

    def kinds(self) -> list[str]:
        with self.lock:
            return [e for e, _ in self.events if e != "alive"]


def run_with_watchdog(work) -> Recorder:
    """``work()`` (a coroutine function) on a fresh loop watched by a Watchdog; what the
    watchdog sent."""
    channel = Recorder()
    dog = Watchdog(channel, THRESHOLD)
    dog.start()

    async def main() -> None:
        dog.attach(asyncio.get_running_loop(), set())
        # wait until the watchdog has pinged and been answered once: it is watching
        while dog._sent == 0.0 or dog._waiting:
            await asyncio.sleep(0.01)
        await work()
        # a full watchdog cycle after the work, so that a late report would be seen
        sent = dog._sent
        while dog._sent == sent or dog._waiting:
            await asyncio.sleep(0.01)
        dog.detach()

    asyncio.run(main())
    return channel


def test_one_task_holding_the_loop_is_a_block():
    async def work() -> None:
        async def sleeper() -> None:
            time.sleep(3 * THRESHOLD)  # sync: holds the loop thread
        await asyncio.gather(sleeper())

    channel = run_with_watchdog(work)
    kinds = channel.kinds()
    assert kinds[:2] == ["loop_blocked", "loop_unblocked"], kinds
    blocked = dict(channel.events)["loop_blocked"]
    assert blocked["for_s"] > THRESHOLD
    assert any("time.sleep" in (f.get("code") or "") for f in blocked["stack"]), blocked["stack"]


def test_many_short_tasks_in_one_turn_are_not_a_block():
    """400 tasks of 5 ms each start in the same turn: the loop answers no ping for 2 s (four
    thresholds), yet each task held it for 5 ms."""
    async def work() -> None:
        async def short() -> None:
            time.sleep(0.005)
            await asyncio.sleep(0)

        loop = asyncio.get_running_loop()
        gap = [0.0]
        mark = time.monotonic()

        def answered() -> None:
            gap[0] = time.monotonic() - mark
        tasks = [asyncio.ensure_future(short()) for _ in range(400)]
        loop.call_soon(answered)  # runs only after every task's first step
        await asyncio.gather(*tasks)
        assert gap[0] > 4 * THRESHOLD * 0.9  # the loop really was unresponsive that long

    channel = run_with_watchdog(work)
    assert "loop_blocked" not in channel.kinds(), channel.events
