"""The agent's stdout: whole protocol lines, one writer at a time, and nothing after ``bye``.

Three threads write (polls, stack rounds with their replies, requests) and the main thread
writes heartbeats and the last line; a lock keeps every line whole. A write that finds the pipe
closed (the consumer went away: ssh dropped, rltui quit) marks the output broken and calls
``on_broken`` once, which stops the agent without a word: there is no one left to tell.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from rltui.agent.outbound import reading_lines
from rltui.agent.protocol import Message, encode
from rltui.model import Reading


class Output:
    def __init__(self, fd: int, host: str, on_broken: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.time) -> None:
        self.fd = fd
        self.host = host
        self.clock = clock
        self._on_broken = on_broken
        self._lock = threading.Lock()
        self._closed = False
        self.broken = False
        self.lines = 0

    def now(self) -> float:
        return self.clock()

    def send(self, msg: Message) -> bool:
        return self._write([encode(msg)])

    def send_reading(self, reading: Reading) -> bool:
        return self._write(reading_lines(self.host, self.clock(), reading))

    def close_with(self, msg: Message | None) -> None:
        """Write ``msg`` (the bye) as the last line; later sends write nothing."""
        data = [encode(msg)] if msg is not None else []
        self._write(data, last=True)

    @property
    def closed(self) -> bool:
        return self._closed

    def _write(self, lines: list[bytes], last: bool = False) -> bool:
        with self._lock:
            if self._closed:
                return False
            try:
                for line in lines:
                    _write_all(self.fd, line)
                    self.lines += 1
            except OSError:  # EPIPE or a closed descriptor: the consumer is gone
                self._closed = self.broken = True
            else:
                if last:
                    self._closed = True
                return True
        self._on_broken()
        return False


def _write_all(fd: int, data: bytes) -> None:
    # A pipe takes a big line in pieces: os.write may return after part of it.
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
