"""The worker process seen from rltui: its start (a folder holding only the worker's modules, the
environment, the configuration on stdin), its JSON lines, its stderr tail, and its end. Also the
TCP probe of the base URL."""

from __future__ import annotations

import collections
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rltui.checks.workflow.spec import WorkflowSpec
from rltui.redact import redact_url

STDERR_LINES = 40
PROBE_TIMEOUT_S = 3.0
EOF = object()  # put on the line queue when the worker's stdout closes


class Worker:
    """One worker process: its lines on a queue, the tail of its stderr, and a kill switch."""

    def __init__(self, python: str, script: Path, cfg: dict, env: dict) -> None:
        self.lines: queue.Queue[Any] = queue.Queue()
        self.stderr: collections.deque = collections.deque(maxlen=STDERR_LINES)
        # A script path, not ``-m``: ``-m`` would put the current folder first on sys.path
        # whatever --path says.
        self.proc = subprocess.Popen(
            [python, str(script)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        payload = json.dumps(cfg).encode("utf-8")
        threading.Thread(target=self._feed, args=(payload,), daemon=True).start()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _feed(self, payload: bytes) -> None:
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.close()
        except OSError:
            pass  # it died before reading: its exit status tells why

    def _read_stdout(self) -> None:
        for raw in self.proc.stdout:
            try:
                self.lines.put(json.loads(raw))
            except ValueError:
                continue
        self.lines.put(EOF)

    def _read_stderr(self) -> None:
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip("\n")[:400])

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()

    def how_it_ended(self) -> str:
        code = self.proc.wait()
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"


WORKER_MODULES = ("worker.py", "taskdump.py", "taskgroups.py", "rewards.py")


def worker_package(into: Path) -> Path:
    """A minimal ``rltui`` package holding only the worker's modules (standard library only), for
    the worker's PYTHONPATH. Pointing it at rltui's own install instead would put rltui's whole
    environment (its torch, its site-packages) in front of the workflow's packages."""
    pkg = into / "rltui" / "checks" / "workflow"
    pkg.mkdir(parents=True)
    for folder in (into / "rltui", into / "rltui" / "checks", pkg):
        (folder / "__init__.py").write_text('"""rltui: the workflow worker\'s modules only."""\n')
    here = Path(__file__).resolve().parent
    for name in WORKER_MODULES:
        shutil.copyfile(here / name, pkg / name)
    return into


def worker_env(spec: WorkflowSpec, root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    if spec.resolved_base_url():
        env["OPENAI_BASE_URL"] = spec.resolved_base_url()
    if spec.resolved_api_key():
        env["OPENAI_API_KEY"] = spec.resolved_api_key()
    return env


def probe(url: str) -> dict:
    """Can a TCP connection reach the base URL's host and port?"""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return {"url": shown, "reachable": False, "error": "not an http(s) URL"}
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # http://[::1, a port out of range: validate() says so first
        return {"url": shown, "reachable": False, "error": f"not a valid URL ({exc})"}
    try:
        with socket.create_connection((parts.hostname, port), timeout=PROBE_TIMEOUT_S):
            return {"url": shown, "reachable": True, "error": None}
    except OSError as exc:
        return {"url": shown, "reachable": False,
                "error": f"{type(exc).__name__}: {exc.strerror or exc}"}
