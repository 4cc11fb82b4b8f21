"""The real ``transformers serve`` on 127.0.0.1, pinned to one local model folder, on CPU.

Readiness is uvicorn's own "Application startup complete" and "Uvicorn running on" lines, read
from the server's output by a thread that sets an event; uvicorn is started on port 0 and the
second line names the port it got, so no port is guessed and nothing polls. With a pinned model
the weights are loaded before uvicorn starts, so those lines mean requests can be served.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# A cold start imports torch and transformers (about 5 s here); generous for a busy machine, yet
# under pytest-timeout's 120 s so the failure shows the server's output.
READY_TIMEOUT_S = 100.0
_RUNNING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
_READY = "Application startup complete"


def serve_unavailable_reason() -> str | None:
    """Why ``transformers serve`` cannot run here, or None when it can."""
    try:
        from transformers.utils.import_utils import is_serve_available
    except ImportError as exc:
        return f"transformers is not importable: {exc}"
    if not is_serve_available():
        return "transformers serving extras are missing (pip install 'transformers[serving]')"
    return None


def _command() -> list[str]:
    script = Path(sys.executable).parent / "transformers"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "transformers.cli.transformers"]


class HFServe:
    """``with HFServe(folder) as server:`` ... ``server.v1``, ``server.model_name``."""

    def __init__(self, model_folder: Path | str, *, ready_timeout_s: float = READY_TIMEOUT_S,
                 extra_args: list[str] | None = None) -> None:
        self.model_folder = Path(model_folder)
        # transformers serve lists (and requires, when a request names one) the pinned model
        # under exactly the string it was started with.
        self.model_name = str(self.model_folder)
        self.ready_timeout_s = ready_timeout_s
        self.extra_args = list(extra_args or [])
        self.url: str | None = None
        self.v1: str | None = None
        self.output: list[str] = []
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._is_ready = False
        self._saw_startup = False
        self._home: str | None = None

    def __repr__(self) -> str:
        return f"HFServe({self.model_name!r}, url={self.url!r})"

    def start(self) -> HFServe:
        reason = serve_unavailable_reason()
        if reason is not None:
            import pytest

            pytest.skip(reason)
        # A private HF home: nothing from the user's cache is listed or touched.
        self._home = tempfile.mkdtemp(prefix="hf-serve-home-")
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=self._home,
                   HF_HUB_DISABLE_UPDATE_CHECK="1", HF_HUB_DISABLE_TELEMETRY="1",
                   PYTHONUNBUFFERED="1")
        command = _command() + [
            "serve", self.model_name, "--device", "cpu", "--host", "127.0.0.1", "--port", "0",
            *self.extra_args,
        ]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name="hf-serve-output", daemon=True)
        self._reader.start()
        # The reader sets the event on the ready line, and also when the output ends (the
        # process died), so one wait covers both.
        self._ready.wait(self.ready_timeout_s)
        if self.url is None or self._process.poll() is not None or not self._is_ready:
            why = ("exited with code %s" % self._process.poll() if self._process.poll() is not None
                   else "was not ready after %.0f s" % self.ready_timeout_s)
            self.stop()
            raise RuntimeError(f"transformers serve {why}; its output:\n" + "".join(self.output))
        return self

    def _read(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            self.output.append(line)
            if len(self.output) > 2000:  # keep the head (startup) and the recent tail
                del self.output[200:1200]
            match = _RUNNING.search(line)
            if match:
                self.url = f"http://127.0.0.1:{match.group(1)}"
                self.v1 = self.url + "/v1"
            self._saw_startup = self._saw_startup or _READY in line
            # uvicorn prints the startup line and the address line; either may come first.
            if self._saw_startup and self.url is not None and not self._is_ready:
                self._is_ready = True
                self._ready.set()
        self._ready.set()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=15)
            except ProcessLookupError:
                pass
        if process is not None:
            process.wait(timeout=15)
        if self._reader is not None:
            self._reader.join(timeout=10)
            self._reader = None
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None

    def __enter__(self) -> HFServe:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
