"""A real ``rltui serve`` for the serve tests: started in its own process group on a port the
system picks, its URL read from the first line it prints, stopped with Ctrl-C (SIGINT) and its
group killed if anything is left."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
SCENARIO = ROOT / "fixtures" / "scenarios" / "demo-cleanup-deadlock"  # has stack rounds
URL = re.compile(r"^rltui serve: open (http://([^/]+)/([A-Za-z0-9_-]+)/)$")


@dataclass
class Served:
    proc: subprocess.Popen
    url: str  # with the token: http://HOST:PORT/TOKEN/
    origin: str  # http://HOST:PORT
    token: str
    banner: list[str] = field(default_factory=list)

    def stop(self) -> int:
        """Ctrl-C, as a user stops it; the exit status."""
        self.proc.send_signal(signal.SIGINT)
        return self.proc.wait(timeout=30)


@contextmanager
def serving(*argv: str) -> Iterator[Served]:
    pytest.importorskip("textual_serve", reason="rltui serve needs the serve extra")
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # each session's `python -m rltui` too
    proc = subprocess.Popen([sys.executable, "-m", "rltui", "serve", "--port", "0", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env, start_new_session=True)
    try:
        first = proc.stdout.readline().rstrip("\n")  # printed once the port is bound
        m = URL.match(first)
        assert m, f"first line {first!r}; stderr: {proc.stderr.read() if not first else ''}"
        banner = [first]
        while not banner[-1].startswith("  Ctrl+C"):
            banner.append(proc.stdout.readline().rstrip("\n"))
        yield Served(proc, m.group(1), f"http://{m.group(2)}", m.group(3), banner)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group is left
        except ProcessLookupError:
            pass
        proc.wait()
