"""What both checks' commands do on a terminal: one progress line on stderr, and Ctrl-C that
stops the check and still prints what it found. Standard library only (``rltui --help``
imports the commands)."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Callable
from typing import Any

EXIT_INTERRUPTED = 130  # Ctrl-C, as the shell reports a process ended by SIGINT


class ProgressLine:
    """One self-overwriting progress line on a terminal's stderr (a bar when the total is
    known); silent when stderr is not a terminal. Thread-safe: the check reports from its own
    thread."""

    def __init__(self, stream=None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.lock = threading.Lock()
        self.shown = False

    def __call__(self, progress) -> None:
        if not self.tty:
            return
        width = shutil.get_terminal_size((80, 20)).columns
        if progress.total:
            filled = int(20 * min(progress.done, progress.total) / progress.total)
            head = f"[{'#' * filled}{'.' * (20 - filled)}] {progress.done}/{progress.total} "
        else:
            head = ""
        line = (f"{head}{progress.phase}: {progress.message}").replace("\n", " ")[: width - 1]
        with self.lock:
            self.stream.write("\r\033[K" + line)
            self.stream.flush()
            self.shown = True

    def close(self) -> None:
        """Clear the line (before the report or a message is printed)."""
        with self.lock:
            if self.shown:
                self.stream.write("\r\033[K")
                self.stream.flush()
                self.shown = False


def run_interruptibly(run: Callable[..., Any], spec: Any, name: str) -> tuple[Any, bool]:
    """``run(spec, progress=, cancel=)`` in a thread so that Ctrl-C sets its cancel event and
    the partial report still comes back; a second Ctrl-C quits the process at once with exit
    code 130 (``os._exit``: no waiting for threads, nor a KeyboardInterrupt in Python's own
    shutdown). A workflow's child process ends by itself when rltui goes. Returns
    (report, interrupted)."""
    bar = ProgressLine()
    cancel, done = threading.Event(), threading.Event()
    box: dict = {}

    def work() -> None:
        try:
            box["report"] = run(spec, progress=bar, cancel=cancel)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            box["error"] = exc
        finally:
            done.set()

    # waited on through an Event: a Ctrl-C inside Thread.join can leave the thread looking
    # finished while it still runs
    interrupted = False
    try:
        # started inside the try: Thread.start waits for the thread to run, and a Ctrl-C in
        # that wait is the first Ctrl-C like any other (the thread exists by then)
        threading.Thread(target=work, name=f"rltui-{name}", daemon=True).start()
        while not done.wait(0.25):
            pass
    except KeyboardInterrupt:
        interrupted = True
        cancel.set()
        try:
            # inside the try: a second Ctrl-C can come as soon as the line is out, while
            # print is still returning
            bar.close()
            print("rltui: interrupted; stopping the check, the partial report follows (Ctrl-C "
                  "again to quit at once)", file=sys.stderr)
            while not done.wait(0.25):
                pass
        except KeyboardInterrupt:
            bar.close()
            _quit_now()
    bar.close()
    if "error" in box:
        raise box["error"]
    return box["report"], interrupted


def _quit_now() -> None:
    """Exit with 130 now: what was printed goes out first, nothing else runs (atexit
    handlers, thread joins), so "quit at once" holds whatever the check is stuck in."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: nothing more can be said
    os._exit(EXIT_INTERRUPTED)
