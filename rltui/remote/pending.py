"""Requests sent to an agent and waiting for their replies: a future and a timer per id."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any


class PendingRequests:
    """Ids are unique per stream (1, 2, 3 ...); a reply resolves its future, the timer fails it
    with TimeoutError, and ``fail_all`` fails the rest when the stream goes."""

    def __init__(self, host: str) -> None:
        self.host = host
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[Future, threading.Timer]] = {}
        self._last_id = 0

    def next_id(self) -> str:
        with self._lock:
            self._last_id += 1
            return str(self._last_id)

    def add(self, rid: str, op: str, timeout: float) -> Future:
        future: Future = Future()
        timer = threading.Timer(timeout, self._expire, (rid, op, timeout))
        timer.daemon = True
        with self._lock:
            self._pending[rid] = (future, timer)
        timer.start()
        return future

    def resolve(self, rid: str, reply: Any) -> bool:
        """False when no request waits for this id (it timed out, or was never sent)."""
        entry = self._pop(rid)
        if entry is not None:
            entry.set_result(reply)
        return entry is not None

    def fail(self, rid: str, error: BaseException) -> None:
        entry = self._pop(rid)
        if entry is not None:
            entry.set_exception(error)

    def fail_all(self, error: BaseException) -> None:
        with self._lock:
            ids = list(self._pending)
        for rid in ids:
            self.fail(rid, error)

    def _pop(self, rid: str) -> Future | None:
        with self._lock:
            entry = self._pending.pop(rid, None)
        if entry is None:
            return None
        future, timer = entry
        timer.cancel()
        return future

    def _expire(self, rid: str, op: str, timeout: float) -> None:
        self.fail(rid, TimeoutError(f"{op} on {self.host}: no reply in {timeout:g} s"))
