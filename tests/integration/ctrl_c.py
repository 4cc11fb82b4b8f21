"""Ctrl-C for the tests of commands that run in a child process: the signal, the wait for its
end, and a kill when a test fails before the end (no child outlives its test)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator

END_WAIT = 60  # seconds: a safety net for a loaded machine, not a bound anything is held to


@contextlib.contextmanager
def reaped(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The process, killed and reaped on the way out if it has not ended by then."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def ctrl_c(process: subprocess.Popen) -> tuple[str, str]:
    """Send SIGINT (what Ctrl-C sends) and wait for the end: its stdout and stderr."""
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=END_WAIT)
