"""What a hostile Flight Recorder dump puts on screen and in reports: terminal escapes and the 25
secret shapes (tests/data/secret_shapes.toml, all fake) planted in op names, frame names, file
names, group names and descriptions, and in the debug server's page headings. ``rltui diagnose
--flight-recorder`` (text), ``--json`` and ``--report DIR`` are run as a user runs them; no raw
escape reaches a text output and no secret any output."""

from __future__ import annotations

import http.server
import json
import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.compat import tomllib

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SHAPES = tomllib.loads((REPO / "tests" / "data" / "secret_shapes.toml")
                       .read_text(encoding="utf-8"))["shape"]
BAD = "\x1b]0;owned\x07\x1b[2J\x9b2J[bold red]x[/]"
RAW = ("\x1b", "\x07", "\x9b")
# Known limit (the scrubber's, as in docs/reliability.md): ``-k VALUE`` is told by the space
# before ``-k``; inside a path (``/srv/-k VALUE/``) it is not.
PATH_EXEMPT = {"-k"}


def record(rid: int, pending: bool, op: str, frames: list, pg: str) -> dict:
    return {"frames": frames, "record_id": rid, "process_group": [pg, "default_pg"],
            "collective_seq_id": rid + 1, "p2p_seq_id": 0, "op_id": rid + 1,
            "profiling_name": f"gloo:{op}", "time_created_ns": 1_790_000_000_000_000_000,
            "input_sizes": [[4]], "input_dtypes": ["Float"], "output_sizes": [[4]],
            "state": "scheduled" if pending else "completed", "retired": not pending,
            "is_p2p": False}


def plant(folder: Path) -> None:
    frames = []
    for s in SHAPES:
        w = s["written"]
        frames.append({"name": f"{BAD} {w}", "line": 1,
                       "filename": ("/srv/job/train.py" if w.split()[0] in PATH_EXEMPT
                                    else f"/srv/{w}/{BAD}.py")})
    for rank in (0, 1):
        op = f"all_reduce {BAD} {SHAPES[rank]['written']}" if rank else "all_gather"
        recs = [record(i, False, "all_reduce", frames, f"0 {BAD}") for i in range(3)]
        recs.append(record(3, True, op, frames, f"0 {BAD}"))
        doc = {"version": "2.10", "entries": recs,
               "pg_config": {f"0 {BAD}": {"name": f"0 {BAD}", "ranks": "[0, 1]",
                                          "desc": " ".join(s["written"] for s in SHAPES)}}}
        (folder / f"nccl_trace_rank_{rank}").write_bytes(pickle.dumps(doc, protocol=2))


def run(*args: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO), NO_COLOR="1")
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", *args], env=env,
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode in (0, 1), out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    return out.stdout + out.stderr


def leaks(text: str) -> list[str]:
    return [s["name"] for s in SHAPES if s["secret"] in text]


def test_dumps_with_escapes_and_secrets(tmp_path):
    dumps = tmp_path / "fr"
    dumps.mkdir()
    plant(dumps)
    text = run("--flight-recorder", str(dumps / "nccl_trace_rank_*"))
    assert "pending" in text
    as_json = run("--json", "--flight-recorder", str(dumps / "*"), "--report",
                  str(tmp_path / "rep"))
    doc = json.loads(as_json[:as_json.rindex("}") + 1])
    assert doc["flight_recorder"]["groups"]
    md = (tmp_path / "rep" / "incident.md").read_text(encoding="utf-8")
    inc = (tmp_path / "rep" / "incident.json").read_text(encoding="utf-8")
    for name, out in (("text", text), ("json", as_json), ("incident.md", md),
                      ("incident.json", inc)):
        assert leaks(out) == [], name
    for name, out in (("text", text), ("incident.md", md)):
        assert not any(c in out for c in RAW), name


class _Page(http.server.BaseHTTPRequestHandler):
    body = b""

    def log_message(self, *a) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)


def test_a_debug_server_page_with_escapes_and_secrets():
    heads = "".join(f"<h2>Rank {i}: {BAD} {s['written']}</h2><p>Failed to fetch: status=500</p>"
                    for i, s in enumerate(SHAPES))
    _Page.body = heads.encode()
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        text = run("--torch-debug", url)
        as_json = run("--json", "--torch-debug", url)
    finally:
        srv.shutdown()
        srv.server_close()
    assert leaks(text) == [] and leaks(as_json) == []
    assert not any(c in text for c in RAW)
