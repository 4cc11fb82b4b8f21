"""Agents on several hosts over real SSH: network namespaces on this machine, each with a real
OpenSSH server on its own address (tests/fakes/netns.py), reached by rltui's own ssh command
line (``ssh_argv`` with ``-F`` the test's ssh config) and read by ``AgentStream``.

The hosts share this machine's filesystem, so the remote rltui is this checkout's, run from
its path: the "rltui on a shared filesystem" case. Each host has its own PID namespace, so an
agent sees only its own host's processes. Every wait is on a message or a state change from a
queue (the timeouts are safety nets, never assertions); nothing sleeps.
"""

from __future__ import annotations

import os
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from rltui.agent.protocol import Hello, ReadingMessage
from rltui.remote.hostlist import parse_hosts
from rltui.remote.status import CLOSED, CONNECTING, LIVE, LOST
from rltui.remote.stream import AgentStream
from rltui.remote.timing import Backoff
from rltui.remote.transports import SSH, explain_exit, ssh_argv, ssh_launches
from tests.fakes.netns import Cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
WAIT = 60  # seconds: a safety net for a stuck test, not a performance bound
FAST = "cadence:\n  gpus: 0.2\n  procs: 0.2\n  logs: 0.2\n"
RANK_MARK = "rltui-multinode-test-rank"
# A rank stand-in: RANK in its environment, as torchrun gives it; says ready, then waits.
RANK_CODE = f"import sys  # {RANK_MARK}\nprint('ready', flush=True)\nsys.stdin.read()\n"


def remote_rltui() -> str:
    """This checkout's rltui by its path (the hosts share the filesystem): the venv's script
    when there is one, else this interpreter with the checkout on its path."""
    script = Path(sys.executable).parent / "rltui"
    if script.is_file():
        return str(script)
    return f"env PYTHONPATH={REPO} {sys.executable} -m rltui"


@pytest.fixture
def thread_errors(monkeypatch):
    """Exceptions that escape any thread (streams, sshd's log reader): there must be none."""
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    yield errors
    assert not errors, [f"{e.thread.name}: {e.exc_value!r}" for e in errors]


class Node:
    """One host's stream with its messages and states as queues, so tests wait on arrivals."""

    def __init__(self, cluster: Cluster, name: str, tmp: Path, *, rltui: str | None = None,
                 connect_timeout: int = 10, **stream_kwargs) -> None:
        self.host = cluster[name]
        self.log = tmp / f"{name}.log"
        self.log.write_text("".join(f"{name} line {i}\n" for i in range(1, 21)))
        config = tmp / "agent.yaml"
        config.write_text(FAST)
        self.argv = ssh_argv(
            name, ssh_options=cluster.ssh_options, remote_rltui=rltui or remote_rltui(),
            connect_timeout=connect_timeout,
            agent_args=["--config", str(config), "--log", str(self.log), "--no-stacks",
                        "--heartbeat", "0.2"])
        self.messages: queue.Queue = queue.Queue()
        self.states: queue.Queue = queue.Queue()
        stream_kwargs.setdefault("backoff", Backoff(initial=0.2, cap=1.0, jitter=0))
        self.stream = AgentStream(name, self.argv, transport=SSH, heartbeat=0.2,
                                  on_message=lambda s, m: self.messages.put(m),
                                  on_state=lambda s, st: self.states.put(st), **stream_kwargs)

    def start(self) -> Node:
        self.stream.start()
        return self

    def state(self, state: str, where=lambda st: True):
        while True:
            status = self.states.get(timeout=WAIT)
            if status.state == state and where(status):
                return status

    def message(self, kind: type = ReadingMessage, where=lambda m: True):
        while True:
            msg = self.messages.get(timeout=WAIT)
            if isinstance(msg, kind) and where(msg):
                return msg

    def fresh_reading(self, source: str = "procs") -> ReadingMessage:
        """A reading that arrives after this call: what came before is dropped unread."""
        while not self.messages.empty():
            self.messages.get_nowait()
        return self.message(ReadingMessage, lambda m: m.source == source)

    def agent_pids(self) -> list[int]:
        """This host's ``rltui agent`` processes (host pids), found in its namespace."""
        found = []
        for pid in self.host.pids():
            try:
                cmdline = psutil.Process(pid).cmdline()
            except psutil.NoSuchProcess:
                continue
            if "agent" in cmdline and "--host" in cmdline:
                found.append(pid)
        return found


@pytest.fixture
def nodes(cluster, tmp_path):
    made: list[Node] = []

    def make(name: str, **kwargs) -> Node:
        made.append(Node(cluster, name, tmp_path, **kwargs))
        return made[-1]
    yield make
    for node in made:
        node.stream.close(wait=False)
    for node in made:
        node.stream.join(WAIT)


def start_rank(host, rank: int) -> subprocess.Popen:
    """A real rank-like process on ``host`` (inside its namespaces), RANK in its env."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RANK": str(rank),
           "LOCAL_RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"}
    proc = host.run([sys.executable, "-c", RANK_CODE], env=env, stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE)
    ready, _, _ = select.select([proc.stdout], [], [], WAIT)
    assert ready and proc.stdout.readline() == b"ready\n", "the rank did not start"
    return proc


def ranks_in(msg: ReadingMessage) -> list:
    return [p for p in msg.reading.payload.procs
            if any(RANK_MARK in word for word in p.cmdline)]


# -- (a) two hosts, real ssh ----------------------------------------------------------------------


def test_two_hosts_say_hello_stream_and_answer_a_tail(cluster, tmp_path, thread_errors):
    cluster.add("node-a")
    cluster.add("node-b")
    launches = ssh_launches(parse_hosts("node-a,node-b"), ssh_options=cluster.ssh_options,
                            remote_rltui=remote_rltui())
    assert [(x.host, x.transport) for x in launches] == [("node-a", SSH), ("node-b", SSH)]
    nodes = {}
    for launch in launches:
        node = Node(cluster, launch.host, tmp_path)
        # the launch's command line, with the test's agent flags after rltui's own
        assert node.argv[:-1] == list(launch.argv[:-1])
        assert node.argv[-1].startswith(launch.argv[-1])
        nodes[launch.host] = node.start()
    try:
        for name, node in nodes.items():
            hello = node.message(Hello)
            assert hello.host == name and hello.agent.startswith("rltui ")
            live = node.state(LIVE)
            assert live.hello == hello and live.attempts == 1
            assert node.host.sessions(), "a real sshd session serves the stream"
            assert node.agent_pids(), "the agent runs in the host's own namespace"
            for source in ("procs", "logs", "gpus"):
                reading = node.message(ReadingMessage, lambda m: m.source == source)
                assert reading.host == name and reading.reading.source == source
            reply = node.stream.request("tail", lines=3).result(WAIT)
            assert reply.ok, reply.message
            (entry,) = reply.data["files"]
            assert entry["path"] == str(node.log.resolve())
            assert entry["lines"] == [f"{name} line {i}" for i in (18, 19, 20)]
        for node in nodes.values():
            node.stream.close(wait=False)
        for node in nodes.values():
            assert node.stream.join(WAIT)
            closed = node.state(CLOSED)
            assert closed.reason.startswith("the agent stopped"), closed.reason
    finally:
        for node in nodes.values():
            node.stream.close()


# -- (b) ranks belong to their host ---------------------------------------------------------------


def test_a_rank_on_host_b_is_seen_by_b_and_not_by_a(cluster, nodes, thread_errors):
    cluster.add("node-a")
    b = cluster.add("node-b")
    rank = start_rank(b, 1)
    try:
        node_a, node_b = nodes("node-a").start(), nodes("node-b").start()
        seen = node_b.message(ReadingMessage, lambda m: m.source == "procs" and ranks_in(m))
        (proc,) = ranks_in(seen)
        assert proc.rank == 1 and proc.world_size == 2
        # A's first procs reading after B's: taken while the rank runs, and without it
        after = node_a.fresh_reading("procs")
        assert after.host == "node-a" and not ranks_in(after)
        assert all(p.rank != 1 for p in after.reading.payload.procs)
    finally:
        rank.stdin.close()
        rank.wait(WAIT)


# -- (c) a host dropping mid-stream ---------------------------------------------------------------


def kill_agent(node: Node) -> None:
    (pid,) = node.agent_pids()
    os.kill(pid, signal.SIGKILL)


def kill_session(node: Node) -> None:
    for pid in node.host.sessions():  # the sshd child serving the connection
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("what", ["sshd", "session", "agent"])
def test_a_host_lost_mid_stream_leaves_the_other_streaming(cluster, nodes, what,
                                                           thread_errors):
    a = cluster.add("node-a")
    cluster.add("node-b")
    node_a, node_b = nodes("node-a").start(), nodes("node-b").start()
    node_a.message(ReadingMessage)
    node_b.message(ReadingMessage)
    node_a.state(LIVE)
    {"sshd": lambda: a.kill_sshd(), "session": lambda: kill_session(node_a),
     "agent": lambda: kill_agent(node_a)}[what]()

    lost = node_a.state(LOST)
    # ssh's own words, explained by explain_exit; a dropped node is worth retrying
    assert lost.reason == explain_exit(SSH, 255, lost.stderr), lost
    if what != "agent":
        assert "closed by remote host" in lost.reason, lost.reason
    assert lost.retry_at is not None and lost.last_seen is not None

    # B goes on: a reading that arrived after A was lost, and B still live
    after = node_b.fresh_reading()
    assert after.host == "node-b"
    assert node_b.stream.status().state == LIVE

    if what == "sshd":  # nothing listens on A now: the retries are refused ...
        refused = node_a.state(LOST, lambda st: st.attempts > 1)
        assert "connection refused" in refused.reason, refused.reason
        assert "is sshd running there" in refused.reason
        a.start_sshd()  # ... until sshd is back
    back = node_a.state(LIVE, lambda st: st.attempts > 1)
    assert back.hello is not None and back.hello.host == "node-a"
    assert node_a.fresh_reading().host == "node-a"


# -- (d) a host that does not answer --------------------------------------------------------------


@pytest.mark.parametrize("how, said", [
    ("silent", "timed out connecting to the node"),
    ("no sshd", "nothing answers ssh on the node (connection refused)"),
])
def test_a_host_that_does_not_answer_is_lost_with_sshs_reason(cluster, nodes, how, said,
                                                             thread_errors):
    cluster.add("node-a")
    c = cluster.add("node-c", sshd=False)
    if how == "silent":
        c.silence()  # packets vanish: only ConnectTimeout ends the wait
    node_a = nodes("node-a").start()
    node_c = nodes("node-c", connect_timeout=1, reconnect=False).start()
    assert node_c.state(CONNECTING).attempts == 1
    lost = node_c.state(LOST)
    assert lost.reason.startswith(said), lost.reason
    assert "ssh: connect to host" in lost.reason  # ssh's own line, kept
    assert lost.last_seen is None and lost.hello is None
    # A is not held up by C: it streams on after C is lost
    assert node_a.fresh_reading().host == "node-a"
    assert node_a.stream.status().state == LIVE


# -- (e) rltui missing on the host ----------------------------------------------------------------


def test_rltui_missing_on_the_host_is_explained_and_not_retried(cluster, nodes,
                                                                thread_errors):
    cluster.add("node-a")
    node = nodes("node-a", rltui="/nonexistent/rltui").start()
    lost = node.state(LOST)
    assert lost.reason.startswith("rltui is not installed on the node"), lost.reason
    assert "/nonexistent/rltui" in lost.reason  # the remote shell's own words
    assert "pip install rltui" in lost.reason and "--remote-rltui" in lost.reason
    assert lost.retry_at is None  # permanent: retrying cannot help
    assert node.stream.join(WAIT) and node.stream.status().attempts == 1
