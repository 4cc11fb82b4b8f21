"""AgentStream against real processes over real pipes.

A fake agent (written by the tests below) speaks the wire protocol with rltui's own encoder and
real model values, and misbehaves on request: it crashes, goes silent, lies about its clock,
writes garbage. Every wait is on a message, a state change or a future (the timeouts on them
are safety nets, never assertions); the one test of slowness moves an injected clock.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rltui.agent.protocol import Heartbeat, Hello, ReadingMessage, Reply
from rltui.model import GpuPoll, GpuSample
from rltui.remote.hostlist import Target
from rltui.remote.status import CLOSED, CONNECTING, LIVE, LOST, SLOW
from rltui.remote.stream import AgentStream
from rltui.remote.timing import Backoff, SkewEstimator
from rltui.remote.transports import SSH, local_argv, ssh_argv, ssh_launches

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WAIT = 60  # seconds: a safety net for a stuck test, not a performance bound

FAKE_AGENT = r'''
import argparse, json, os, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--host", required=True)
p.add_argument("--heartbeat", type=float, default=0.2)
p.add_argument("--offset", type=float, default=0.0)
p.add_argument("--readings", type=int, default=0)
p.add_argument("--mode", default="normal")
p.add_argument("--fail-first")
p.add_argument("--ignore-op", default="")
args = p.parse_args()

if args.fail_first and not os.path.exists(args.fail_first):
    open(args.fail_first, "w").close()
    sys.stderr.write("fake: cannot start on the first run\n")
    sys.exit(1)

lock = threading.Lock()
out = sys.stdout.buffer

def raw(data):
    with lock:
        out.write(data)
        out.flush()

def send(type_, **fields):
    msg = {"v": fields.pop("v", 1), "type": type_, "host": args.host,
           "t": time.time() + args.offset}
    msg.update(fields)
    raw(json.dumps(msg).encode() + b"\n")

send("hello", agent="rltui fake", pid=os.getpid(), job="test", sources={"gpus": 1.0},
     v=2 if args.mode == "newer" else 1)

if args.readings:
    # real model values through rltui's own encoder
    from rltui.agent.protocol import ReadingMessage, encode
    from rltui.model import GpuPoll, GpuSample, Reading
    for i in range(args.readings):
        reading = Reading("gpus", 1000.0 + i, "ok",
                          GpuPoll((GpuSample(0, "H100", "GPU-0", util=float(i)),)))
        raw(encode(ReadingMessage(args.host, time.time() + args.offset, reading)))

if args.mode == "garbage":
    raw(b"\xff\xfe\x00 not utf-8\n")
    raw(b"this is not json\n")
    raw(b"[1, 2, 3]\n")
    raw(b'{"type": "heartbeat", "host": "x", "t": 1}\n')
    raw(json.dumps({"v": 1, "type": "reading", "host": args.host, "t": 1, "source": "gpus",
                    "reading": {"source": "gpus", "timestamp": "noon"}}).encode() + b"\n")
    raw(b"x" * (9 << 20) + b"\n")
    send("frobnicate", extra=1)
    send("heartbeat", marker="after-garbage")
elif args.mode == "close-stdout":
    os.close(1)
    time.sleep(3600)
elif args.mode == "storm":
    for i in range(30):
        raw(b"garbage line %d\n" % i)

def beat():
    while args.heartbeat > 0:
        time.sleep(args.heartbeat)
        send("heartbeat")

if args.mode not in ("silent", "newer"):
    threading.Thread(target=beat, daemon=True).start()

for line in sys.stdin.buffer:
    req = json.loads(line)
    op = req["op"]
    if op in args.ignore_op.split(","):
        continue
    if op == "stop":
        send("reply", id=req["id"], ok=True, message="stopping")
        send("bye", reason="asked to stop")
        sys.exit(0)
    if op == "tail":
        send("reply", id=req["id"], ok=True, message="", data={"lines": ["a", "b"]})
    else:
        send("reply", id=req["id"], ok=False, message=f"unknown op {op}")
if "stdin-eof" not in args.ignore_op:
    send("bye", reason="stdin closed")
    sys.exit(0)
while True:  # an agent that ignores stop and end of input
    time.sleep(3600)
'''


@pytest.fixture
def fake_agent(tmp_path):
    path = tmp_path / "fake_agent.py"
    path.write_text(FAKE_AGENT)

    def argv(host: str, *args: str) -> list[str]:
        return [sys.executable, str(path), "--host", host, *args]
    return argv


@pytest.fixture
def thread_errors(monkeypatch):
    """Exceptions that escape any thread: there must be none."""
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", lambda info: errors.append(info))
    yield errors
    assert not errors, [f"{e.thread.name}: {e.exc_value!r}" for e in errors]


class Recorder:
    """on_message/on_state as queues, so tests wait on what arrives."""

    def __init__(self) -> None:
        self.messages: queue.Queue = queue.Queue()
        self.states: queue.Queue = queue.Queue()

    def on_message(self, stream, msg) -> None:
        self.messages.put(msg)

    def on_state(self, stream, status) -> None:
        self.states.put(status)

    def next_message(self, kind: type, where=lambda m: True):
        while True:
            msg = self.messages.get(timeout=WAIT)
            if isinstance(msg, kind) and where(msg):
                return msg

    def wait_state(self, state: str):
        while True:
            status = self.states.get(timeout=WAIT)
            if status.state == state:
                return status


def open_stream(host, argv, recorder=None, **kwargs) -> AgentStream:
    recorder = recorder or Recorder()
    kwargs.setdefault("heartbeat", 0.2)
    return AgentStream(host, argv, on_message=recorder.on_message, on_state=recorder.on_state,
                       **kwargs).start()


def test_a_normal_stream_delivers_hello_readings_heartbeats_and_closes(fake_agent,
                                                                       thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--readings", "3"), rec)
    try:
        assert rec.wait_state(CONNECTING).attempts == 1
        hello = rec.next_message(Hello)
        assert (hello.host, hello.job, hello.sources) == ("node01", "test", {"gpus": 1.0})
        assert rec.wait_state(LIVE).hello == hello
        readings = [rec.next_message(ReadingMessage) for _ in range(3)]
        assert [m.reading.payload for m in readings] == [
            GpuPoll((GpuSample(0, "H100", "GPU-0", util=float(i)),)) for i in range(3)]
        assert rec.next_message(Heartbeat).host == "node01"
        status = stream.status()
        assert status.state == LIVE and status.last_seen is not None and not status.problems
        assert abs(stream.skew) < 30  # same machine: only the pipe's delay
    finally:
        stream.close()
    closed = rec.wait_state(CLOSED)
    assert stream.join(0) and closed.retry_at is None
    assert closed.reason == "the agent stopped: asked to stop"  # the stop request, then bye
    assert stream._proc.returncode == 0


def test_an_agent_killed_mid_stream_is_lost_and_the_others_keep_streaming(fake_agent,
                                                                         thread_errors):
    a_rec, b_rec = Recorder(), Recorder()
    a = open_stream("node01", fake_agent("node01"), a_rec,
                    backoff=Backoff(initial=600, cap=600))
    b = open_stream("node02", fake_agent("node02"), b_rec)
    try:
        a_rec.next_message(Heartbeat)
        b_rec.next_message(Heartbeat)
        os.kill(a.status().pid, signal.SIGKILL)
        lost = a_rec.wait_state(LOST)
        assert "killed by SIGKILL" in lost.reason
        assert lost.last_seen is not None and lost.retry_at is not None  # it will retry
        for _ in range(3):  # node02 goes on, unaware
            assert b_rec.next_message(Heartbeat).host == "node02"
        assert b.status().state == LIVE
    finally:
        for s in (a, b):
            s.close(wait=False)
        assert a.join(WAIT) and b.join(WAIT)


class FakeMonotonic:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_silent_agent_turns_slow_and_live_again_when_it_speaks(fake_agent, thread_errors):
    clock = FakeMonotonic()
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--mode", "silent"), rec,
                         heartbeat=2.0, slow_after=3, monotonic=clock)
    try:
        rec.wait_state(LIVE)
        clock.now += 5.9
        assert stream.status().state == LIVE  # under 3 heartbeats of silence
        clock.now += 0.2
        assert stream.status().state == SLOW
        assert rec.wait_state(SLOW).last_seen is not None
        reply = stream.request("tail", lines=2).result(WAIT)
        assert reply.ok and reply.data == {"lines": ["a", "b"]}
        rec.wait_state(LIVE)
    finally:
        stream.close()


def test_a_crash_at_start_is_explained_and_retried_after_a_backoff(fake_agent, tmp_path,
                                                                   thread_errors):
    delays: list[float] = []
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--fail-first", str(tmp_path / "ran")),
                         rec, sleep=delays.append, backoff=Backoff(initial=1, cap=8))
    try:
        lost = rec.wait_state(LOST)
        assert lost.reason == ("exited with status 1 (fake: cannot start on the first run)")
        assert lost.retry_at is not None and lost.attempts == 1
        live = rec.wait_state(LIVE)
        assert live.attempts == 2 and live.reason == ""
        assert len(delays) == 1 and 0.5 <= delays[0] <= 1.0  # 1 s, less up to half jitter
    finally:
        stream.close()


def test_garbage_huge_lines_and_bad_readings_are_problems_not_crashes(fake_agent,
                                                                      thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--mode", "garbage", "--heartbeat", "0"),
                         rec)
    try:
        rec.next_message(Heartbeat)  # the line after the garbage: it kept reading
        status = stream.status()
        assert status.state == LIVE
        kinds = [p.kind for p in status.problems]
        assert kinds == ["not-utf8", "not-json", "not-object", "version", "reading", "too-long",
                         "unknown"]
        assert "8 MiB" in status.problems[5].message
        assert "frobnicate" in status.problems[6].message
    finally:
        stream.close()


def test_a_storm_of_bad_lines_makes_the_stream_lost(fake_agent, thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--mode", "storm"), rec,
                         reconnect=False, storm_limit=10)
    lost = rec.wait_state(LOST)
    assert "10 of the last 11 lines were not valid agent messages" in lost.reason
    assert lost.retry_at is None and stream.join(WAIT)


def test_an_agent_that_closes_its_output_is_lost_and_ended(fake_agent, thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--mode", "close-stdout"), rec,
                         reconnect=False, close_grace=0.5)
    lost = rec.wait_state(LOST)
    assert lost.reason == "the agent closed its output but kept running (rltui ended it)"
    assert stream.join(WAIT) and stream._proc.returncode == -signal.SIGKILL


def test_a_newer_protocol_is_lost_at_once_with_the_upgrade_message(fake_agent, thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--mode", "newer"), rec)
    lost = rec.wait_state(LOST)
    assert "upgrade rltui" in lost.reason
    assert lost.retry_at is None and stream.join(WAIT)  # retrying cannot help


def test_clock_skew_is_measured_from_hello_and_heartbeats(fake_agent, thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--offset", "100"), rec)
    try:
        rec.next_message(Heartbeat)
        rec.next_message(Heartbeat)
        assert -101 < stream.skew < -99  # the node's clock is 100 s ahead
        beat = rec.next_message(Heartbeat)
        assert abs(stream.to_local(beat.t) - (beat.t - 100)) < 1
    finally:
        stream.close()


def test_requests_get_their_replies_time_out_or_fail_when_the_stream_goes(fake_agent,
                                                                          thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--ignore-op", "dump"), rec,
                         backoff=Backoff(initial=600, cap=600))
    rec.wait_state(LIVE)
    futures = [stream.request("tail", lines=5) for _ in range(5)]
    assert [f.result(WAIT).data for f in futures] == [{"lines": ["a", "b"]}] * 5
    assert {f.result().id for f in futures} == {"1", "2", "3", "4", "5"}
    refused = stream.request("frob").result(WAIT)
    assert isinstance(refused, Reply) and not refused.ok
    with pytest.raises(TimeoutError, match="dump on node01: no reply in 0.2 s"):
        stream.request("dump", timeout=0.2).result(WAIT)
    pending = stream.request("dump", timeout=600)
    os.kill(stream.status().pid, signal.SIGKILL)
    with pytest.raises(ConnectionError, match="node01 lost: killed by SIGKILL"):
        pending.result(WAIT)
    stream.close()
    with pytest.raises(ConnectionError, match="node01 is closed"):
        stream.request("tail").result(WAIT)


def test_a_missing_program_is_lost_for_good_with_the_remedy(thread_errors):
    rec = Recorder()
    stream = open_stream("node01", ["/nonexistent/bin/ssh", "node01"], rec, transport=SSH)
    lost = rec.wait_state(LOST)
    assert lost.reason == ("/nonexistent/bin/ssh is not found on this machine: install the "
                           "OpenSSH client (openssh-client)")
    assert lost.retry_at is None and stream.join(WAIT)


def test_a_consumer_that_raises_does_not_end_the_stream(fake_agent, thread_errors):
    seen: queue.Queue = queue.Queue()

    def on_message(stream, msg):
        seen.put(msg)
        raise RuntimeError("consumer bug")
    stream = AgentStream("node01", fake_agent("node01"), on_message=on_message,
                         heartbeat=0.2).start()
    try:
        for _ in range(3):
            seen.get(timeout=WAIT)
        status = stream.status()
        assert status.state == LIVE
        assert status.problems[0].kind == "callback"
        assert "RuntimeError: consumer bug" in status.problems[0].message
    finally:
        stream.close()


def test_close_terminates_an_agent_that_ignores_stop(fake_agent, thread_errors):
    rec = Recorder()
    stream = open_stream("node01", fake_agent("node01", "--ignore-op", "stop,stdin-eof"), rec,
                         close_grace=0.5)
    rec.wait_state(LIVE)
    proc = stream._proc
    stream.close()
    assert stream.join(0) and rec.wait_state(CLOSED).reason == "killed by SIGTERM"
    assert proc.returncode == -signal.SIGTERM


def test_a_stream_closed_before_it_starts_is_closed(fake_agent, thread_errors):
    rec = Recorder()
    stream = AgentStream("node01", fake_agent("node01"), on_state=rec.on_state)
    stream.close()
    assert stream.join(0) and rec.wait_state(CLOSED).reason == "closed before it started"
    assert stream.request("tail").exception(WAIT).args == ("node01 is closed: closed before it "
                                                           "started",)


def test_sixty_four_streams_at_once_stay_responsive(tmp_path, thread_errors):
    """64 agents over local pipes: all live, all heartbeating; one killed, the rest go on.

    A functional test: every wait is on messages; how long it takes is not measured."""
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)  # without --readings it imports no rltui: 64 start fast
    recs = [Recorder() for _ in range(64)]
    streams = [open_stream(f"sim{i:02d}", [sys.executable, "-S", str(script),
                                           "--host", f"sim{i:02d}"], recs[i],
                           backoff=Backoff(initial=600, cap=600))
               for i in range(64)]
    try:
        for rec in recs:
            rec.next_message(Heartbeat)
        os.kill(streams[0].status().pid, signal.SIGKILL)
        assert "SIGKILL" in recs[0].wait_state(LOST).reason
        for i, rec in enumerate(recs[1:], 1):
            rec.next_message(Heartbeat)
            rec.next_message(Heartbeat)
            assert streams[i].status().state == LIVE
        assert len({s.status().pid for s in streams}) == 64
    finally:
        for s in streams:
            s.close(wait=False)
        assert all(s.join(WAIT) for s in streams)
    assert {s.status().state for s in streams} == {CLOSED}


needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="no OpenSSH client")
# no user config, no known_hosts: the test machine's own ssh settings must not matter
SSH_ISOLATED = ["-F", "/dev/null", "-o", "UserKnownHostsFile=/dev/null"]


@needs_ssh
def test_real_ssh_accepts_the_command_line_it_is_given():
    argv = ssh_argv(Target("node01", "alice"), ssh_options=SSH_ISOLATED)
    # -G: print the configuration this command line makes, without connecting
    out = subprocess.run([argv[0], "-G", *argv[1:]], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    config = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert (config["user"], config["hostname"], config["batchmode"], config["connecttimeout"],
            config["serveraliveinterval"], config["serveralivecountmax"]) == (
        "alice", "node01", "yes", "10", "5", "3")


@needs_ssh
def test_a_refused_ssh_connection_is_lost_with_the_reason(thread_errors):
    """The real ssh client against a closed port on this machine."""
    rec = Recorder()
    launch = ssh_launches([Target("127.0.0.1")], ssh_options=[*SSH_ISOLATED, "-p", "1"])[0]
    stream = AgentStream.for_launch(launch, on_state=rec.on_state, reconnect=False).start()
    lost = rec.wait_state(LOST)
    assert lost.reason.startswith("nothing answers ssh on the node (connection refused)")
    assert "is sshd running there" in lost.reason
    assert stream.join(WAIT)


def test_the_real_agent_streams_a_log_and_answers_a_tail(tmp_path, thread_errors):
    log = tmp_path / "train.log"
    log.write_text("step 1 loss 2.5\nstep 2 loss 2.4\n")
    rec = Recorder()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    stream = open_stream("simnode", local_argv("simnode", agent_args=[
        "--log", str(log), "--no-stacks", "--heartbeat", "0.2"]), rec, env=env, cwd=str(REPO))
    try:
        hello = rec.next_message(Hello)
        assert hello.host == "simnode" and hello.pid == stream.status().pid
        logs = rec.next_message(ReadingMessage, lambda m: m.source == "logs")
        assert logs.host == "simnode" and logs.reading.status == "ok"
        rec.next_message(Heartbeat)
        reply = stream.request("tail", path=str(log), lines=1).result(WAIT)
        assert reply.ok, reply.message
        assert "step 2 loss 2.4" in str(reply.data)
        assert stream.skew is not None and abs(stream.skew) < 30
    finally:
        stream.close()
    assert rec.wait_state(CLOSED)
    assert stream._proc.returncode == 0


# -- pure parts: backoff and skew ------------------------------------------------------------

class FixedRandom:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def test_backoff_doubles_to_the_cap_and_jitter_only_shortens():
    b = Backoff(initial=1, factor=2, cap=60, jitter=0.5, rng=FixedRandom(0.0))
    assert [b.delay(n) for n in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert b.delay(10_000) == 60
    short = Backoff(initial=1, cap=60, jitter=0.5, rng=FixedRandom(0.999999))
    assert [round(short.delay(n), 3) for n in range(3)] == [0.5, 1.0, 2.0]
    with pytest.raises(ValueError):
        Backoff(initial=0)


def test_skew_is_the_smallest_offset_seen_and_forgets_old_samples():
    est = SkewEstimator(window=3)
    assert est.value is None and est.to_local(5.0) == 5.0
    for received, sent in [(100.5, 200.0), (101.0, 200.9), (102.2, 201.0)]:
        est.add(received, sent)
    assert est.value == pytest.approx(-99.9)  # the least delayed sample
    assert est.to_local(300.0) == pytest.approx(200.1)
    est.add(110.0, 200.0)  # -90 pushes out the oldest (-99.5); -99.9 is still the least
    assert est.value == pytest.approx(-99.9)
    est.add(111.0, 200.0)  # now -99.9 leaves too: a stepped clock is forgotten in time
    assert est.value == pytest.approx(-98.8)
