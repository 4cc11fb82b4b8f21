"""Start the loopback chat server for tests, and where the sample agents live."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

AGENTS = Path(__file__).resolve().parent
SERVER = AGENTS / "chat_server.py"


@contextmanager
def chat_server(api_key: str | None = None,
                requests: queue.Queue[str] | None = None) -> Iterator[str]:
    """A running chat server; yields its base URL (``http://127.0.0.1:PORT/v1``). Waits on the
    line the server prints once it accepts connections, never on a clock. With ``requests``,
    each request's ``METHOD PATH`` is put on that queue as it arrives."""
    cmd = [sys.executable, str(SERVER), "--port", "0"] + (["--api-key", api_key] if api_key
                                                          else [])
    if requests is not None:
        cmd.append("--log-requests")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        if not line.startswith("listening "):
            raise RuntimeError(f"chat server did not start: {line!r} {proc.stderr.read()}")
        if requests is not None:
            threading.Thread(target=_forward, args=(proc.stdout, requests), daemon=True).start()
        yield line.split(" ", 1)[1].strip()
    finally:
        proc.kill()
        proc.wait()


def _forward(stream, requests: queue.Queue[str]) -> None:
    for line in stream:
        if line.startswith("request "):
            requests.put(line.split(" ", 1)[1].strip())


def write_jsonl(path: Path, rows: list) -> Path:
    import json
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
