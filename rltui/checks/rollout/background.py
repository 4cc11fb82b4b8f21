"""Blocking work that cannot be interrupted (loading a model or a tokenizer), run so that a
cancelled check does not wait for it, and neither does the process on its way out.

A ``ThreadPoolExecutor``'s threads are not daemons: Python joins them at exit, so a quit during
a 5-minute model load would wait out the load after the report was printed. A daemon thread
per load is left behind instead; what it returns after the run gave up on it is dropped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any


def in_daemon_thread(fn: Callable[..., Any], *args: Any, name: str) -> asyncio.Future:
    """``fn(*args)`` in a new daemon thread; its result or exception resolves the returned
    future of the running loop. Cancelling the future abandons the work (it runs on, unseen),
    and a loop closed meanwhile is no error."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if future.done():  # cancelled: nobody waits for it any more
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def work() -> None:
        try:
            outcome = (True, fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever awaits the future
            outcome = (False, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            pass  # the loop is closed: the run ended without it

    threading.Thread(target=work, name=name, daemon=True).start()
    return future
