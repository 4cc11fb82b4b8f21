"""A hostile agent over real pipes: readings far over what a node has (30,000 processes, 5,000
GPUs, 16,000 log lines in one reading), eight processes all claiming rank 0 on one node, and a
clock 1e300 s off. The consumer keeps to the documented limits of one reading
(rltui.agent.protocol MAX_READING_*), says what it dropped, notes the duplicate rank, and gives
the node up with a one-line reason instead of printing a 300-digit skew."""

from __future__ import annotations

import queue
import re
import sys
import time
from pathlib import Path

import pytest

from rltui.agent import protocol
from rltui.agent.protocol import ReadingMessage
from rltui.cluster.monitor import ClusterMonitor
from rltui.remote.status import LOST
from rltui.remote.stream import AgentStream

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WAIT = 60  # a safety net for a stuck test, not a performance bound

HOSTILE = r'''
import json, os, sys, time
host, mode = sys.argv[1], sys.argv[2]
out = sys.stdout.buffer
def send(type_, t=None, **fields):
    msg = {"v": 1, "type": type_, "host": host, "t": time.time() if t is None else t}
    msg.update(fields)
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()
def reading(source, payload):
    send("reading", source=source, reading={"source": source, "timestamp": time.time(),
                                            "status": "ok", "payload": payload})
if mode == "skew":
    send("hello", t=time.time() - 1e300, agent="rltui evil", pid=os.getpid())
else:
    send("hello", agent="rltui evil", pid=os.getpid(), sources={"procs": 1.0})
    # eight processes claim rank 0, then 29,992 more without a rank
    procs = [{"pid": 1000 + i, "rank": 0, "local_rank": 0} for i in range(8)]
    procs += [{"pid": 2000 + i} for i in range(29_992)]
    reading("procs", {"procs": procs})
    reading("gpus", {"gpus": [{"index": i, "name": "EVIL", "uuid": f"g{i}"}
                              for i in range(5000)]})
    lines = [{"line_no": i, "text": "x"} for i in range(16_000)]
    reading("logs", {"files": [{"path": "/a.log", "status": "ok", "lines": lines[:9000]},
                               {"path": "/b.log", "status": "ok", "lines": lines[9000:]}]})
    send("heartbeat")
sys.stdin.read()
'''


def run(mode: str) -> tuple[AgentStream, queue.Queue]:
    got: queue.Queue = queue.Queue()
    stream = AgentStream("evil", [sys.executable, "-c", HOSTILE, "evil", mode],
                         on_message=lambda s, m: got.put(m), reconnect=False,
                         env={"PYTHONPATH": str(REPO)})
    return stream.start(), got


def readings(got: queue.Queue, n: int) -> dict[str, ReadingMessage]:
    out: dict[str, ReadingMessage] = {}
    while len(out) < n:
        msg = got.get(timeout=WAIT)
        if isinstance(msg, ReadingMessage):
            out[msg.source] = msg
    return out


def test_a_flood_is_cut_to_the_limits_with_a_note_and_the_duplicate_rank_is_noted():
    stream, got = run("flood")
    try:
        by_source = readings(got, 3)
    finally:
        stream.close()
    procs = by_source["procs"].reading.payload.procs
    assert len(procs) == protocol.MAX_READING_PROCS
    assert len(by_source["gpus"].reading.payload.gpus) == protocol.MAX_READING_GPUS
    kept = sum(len(f.lines) for f in by_source["logs"].reading.payload.files)
    assert kept == protocol.MAX_READING_LOG_LINES
    said = [p.message for p in stream.status().problems if p.kind == "limit"]
    assert any(f"{30_000 - protocol.MAX_READING_PROCS} processes over "
               f"{protocol.MAX_READING_PROCS}" in m for m in said), said
    assert any(f"{5000 - protocol.MAX_READING_GPUS} GPUs over" in m for m in said), said
    assert any(f"{16_000 - protocol.MAX_READING_LOG_LINES} log lines over" in m
               for m in said), said

    monitor = ClusterMonitor(["evil"])
    for msg in by_source.values():
        monitor.ingest("evil", msg.reading)
    snap, diagnosis = monitor.evaluate(time.time())
    notes = " | ".join(diagnosis.notes)
    assert "evil: 8 processes claim rank 0 (pids 1000, 1001, 1002, 1003 and 4 more)" in notes


def test_a_clock_1e300_seconds_off_is_an_error_state_on_one_short_line():
    stream, got = run("skew")
    try:
        deadline = time.monotonic() + WAIT
        while stream.status().state != LOST:
            assert time.monotonic() < deadline, stream.status()
            time.sleep(0.01)
        status = stream.status()
    finally:
        stream.close()
    assert status.skew is None  # never measured from a clock that cannot be placed
    assert "the node's clock is -1e+300 s off" in status.reason, status.reason
    assert len(status.reason) < 200 and not re.search(r"\d{20}", status.reason)
    assert any(p.kind == "clock" for p in status.problems)
