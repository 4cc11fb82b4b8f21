"""``RayFeed`` against real Ray clusters (tests/fakes/ray_cluster.py), with no mock of Ray.

A head on this machine runs a verl-shaped job (tests/fakes/ray_driver.py): three actors with
``RANK``/``WORLD_SIZE`` in their runtime_env, in one gloo group, hung in a real collective
mismatch. The feed finds the node, its workers and actors through the dashboard's state API,
takes their stacks through Ray's own traceback endpoint (py-spy run by Ray's dashboard agent),
and rltui's cluster monitor names the hang from those stacks. A second head runs with
profiling off, then loses its dashboard. Where this machine can make network namespaces, a
second Ray node in a namespace joins a third head and is killed. Bad addresses (nothing
listening, the GCS port, a web server that is not Ray, HTTP failures, redirects elsewhere,
hostile JSON) end in one clear message, the feed's ``error``, never a traceback.

Ray is heavy on a 2-core machine: each head is started once per module or test, with 2 CPUs
and an 80 MB object store.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rltui.cluster import ClusterMonitor
from rltui.diagnosis.stacks import COLLECTIVE_MISMATCH
from rltui.model import OK, UNAVAILABLE, Reading
from rltui.remote.ray import RayFeed
from rltui.remote.ray.address import parse_address
from rltui.remote.ray.client import (
    BAD_JSON,
    HTTP,
    NO_STATE_API,
    NOT_HTTP,
    REFUSED,
    TIMEOUT,
    DashboardClient,
    DashboardError,
)
from rltui.remote.ray.stacks import PROFILING_REMEDY
from rltui.remote.status import LIVE, LOST
from rltui.serialize import reading_to_data
from tests.fakes import ray_cluster
from tests.fakes.ray_cluster import RayHead, free_port

# A head's start takes 10-30 s on a loaded 2-core machine; the module's first test pays for it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

DATA = Path(__file__).resolve().parent.parent / "data" / "ray"
WAIT = 90.0  # seconds for anything the cluster does on its own schedule (a safety net)
SECRET = "sk-rltui-test-secret-0123456789"  # the driver puts it into the actors' runtime_env


@pytest.fixture(scope="module")
def ray_ok() -> None:
    # ImportError too: a ray that is installed but broken cannot start a cluster either
    pytest.importorskip("ray", reason="ray[default] is not installed (pip install "
                                      "'ray[default]'): no Ray cluster to test against",
                        exc_type=ImportError)
    reason = ray_cluster.missing()
    if reason:
        pytest.skip(f"no Ray cluster here: {reason}")


@pytest.fixture(scope="module")
def hung(ray_ok):
    """A head running the mismatch job: ranks 0-1 in all_reduce, rank 2 in all_gather."""
    with RayHead() as head:
        job = head.run_driver("mismatch", "3").ready()
        yield head, job


class Readings:
    """What a feed sends, in order, for a test to wait on (each reading is an event)."""

    def __init__(self, also: Callable[[str, Reading], None] | None = None) -> None:
        self.queue: queue.Queue[tuple[str, Reading]] = queue.Queue()
        self.seen: list[tuple[str, Reading]] = []
        self.also = also

    def __call__(self, host: str, reading: Reading) -> None:
        if self.also is not None:
            self.also(host, reading)
        self.queue.put((host, reading))

    def next(self, want: Callable[[str, Reading], bool], timeout: float = WAIT
             ) -> tuple[str, Reading]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no such reading within {timeout:g} s; got "
                                     f"{[(h, r.source, r.status) for h, r in self.seen[-8:]]}")
            try:
                host, reading = self.queue.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append((host, reading))
            if want(host, reading):
                return host, reading


def source(name: str, host: str | None = None) -> Callable[[str, Reading], bool]:
    return lambda h, r: r.source == name and (host is None or h == host)


def actors(job: dict, ranked: bool = True) -> list[dict]:
    return [a for a in job["actors"] if (a["rank"] is not None) == ranked]


def first_frames(reading: Reading) -> dict[int, str]:
    """rank -> the innermost frame of its main thread."""
    return {d.rank: d.threads[0].frames[0].name for d in reading.payload.dumps
            if d.rank is not None and d.status == OK and d.threads and d.threads[0].frames}


# -- one node, a real hang -------------------------------------------------------------------------

def test_feed_lists_the_node_its_workers_and_actors(hung):
    head, job = hung
    got = Readings()
    feed = RayFeed(head.dashboard, interval=1.0, stack_interval=2.0)
    try:
        feed.start(got)
        host, procs = got.next(source("procs"))
        _, gpus = got.next(source("gpus", host))
        _, periodic = got.next(source("stacks", host))  # the first round follows the first poll
        assert periodic.payload.trigger == "periodic" and periodic.status == OK
        assert {d.pid for d in periodic.payload.dumps} >= {a["pid"] for a in actors(job)}
        ip = job["actors"][0]["node_ip"]
        assert host == ip  # a node is known by its Ray node name: its IP unless --node-name
        assert feed.hosts() == [ip] and feed.run_on(ip) == ""  # its commands run here
        assert feed.intervals() == {"procs": 1.0, "gpus": 1.0, "stacks": 2.0}
        (status,) = feed.statuses()
        assert (status.host, status.state, status.reason, status.skew) == (ip, LIVE, "", None)
        assert feed.job == f"ray {head.dashboard}" and feed.kind == "ray" and feed.error == ""
        by_pid = {p.pid: p for p in procs.payload.procs}
        for actor in actors(job):
            p = by_pid[actor["pid"]]
            assert (p.name, p.role, p.rank, p.world_size, p.local_rank) == (
                actor["name"], "Trainer", actor["rank"], 3, actor["rank"])
            assert p.debug_env == (("NCCL_DEBUG", "INFO"),)
        assert by_pid[job["driver"]].role == "driver"
        assert procs.status == OK and procs.payload.how.startswith("Ray state API")
        # no GPU on a CPU machine is said as such; a GPU machine's agent lists them
        assert gpus.status == OK and gpus.payload.gpus or (
            gpus.status == UNAVAILABLE
            and gpus.message == "Ray's dashboard agent reports no GPUs on this node")
        assert SECRET not in json.dumps(reading_to_data(procs))
    finally:
        feed.close()
    assert [s.state for s in feed.statuses()] == ["closed"]
    feed.close()  # idempotent


def test_stacks_through_ray_name_the_collective_mismatch(hung):
    head, job = hung
    monitor = ClusterMonitor(job="ray")
    got = Readings(also=lambda h, r: monitor.ingest(h, r))
    feed = RayFeed(head.dashboard, interval=1.0, stack_interval=0)
    want = {0: "all_reduce", 1: "all_reduce", 2: "all_gather"}
    try:
        feed.start(got)
        host, _ = got.next(source("procs"))
        # Polled: nothing tells when a rank's thread has entered the collective; the actors
        # were set up when the driver said ready, the calls were sent after.
        deadline = time.monotonic() + WAIT
        while True:
            began = time.time()
            futures = feed.dump_all(timeout=30)
            assert set(futures) == {host}
            ok, message = futures[host].result(timeout=40)
            _, stacks = got.next(source("stacks", host))
            assert ok and stacks.status == OK, message
            if first_frames(stacks) == want or time.monotonic() > deadline:
                break
        assert first_frames(stacks) == want
        poll = stacks.payload
        assert (poll.trigger, poll.nonblocking, poll.native) == ("on-demand", False, False)
        assert poll.started >= began
        # The round's command, as the incident report lists it, run as a user would paste it:
        # the same dump of rank 2 from the real dashboard.
        pid = next(a["pid"] for a in actors(job) if a["rank"] == 2)
        text = run_pasted(poll.command.format(pid=pid))
        assert text.startswith(f"Process {pid}: ") and "all_gather" in text
        assert {d.pid for d in poll.dumps} >= {a["pid"] for a in actors(job)} | {job["driver"]}
        assert message.startswith("dumped ")
        for s in feed.statuses():
            monitor.update_status(s)
        _, diagnosis = monitor.evaluate(time.time())
        found = {s.id: s for s in diagnosis.symptoms}
        assert COLLECTIVE_MISMATCH in found, [s.id for s in diagnosis.symptoms]
        report = monitor.stacks
        assert (report.pattern, report.suspect_ranks) == ("B", (2,))
        assert "all_gather" in report.explanation and "all_reduce" in report.explanation
        # the driver (and any actor without a rank) is left out of the comparison
        assert job["driver"] in report.other_pids
    finally:
        feed.close()


def test_a_traceback_that_fails_for_one_worker(hung):
    head, job = hung
    victim = next(a for a in job["actors"] if a["name"] == "victim")
    got = Readings()
    # One poll only (the next is an hour away): the feed still lists the victim when its
    # traceback is asked, as it would between two polls.
    feed = RayFeed(head.dashboard, interval=3600, stack_interval=0)
    try:
        feed.start(got)
        host, procs = got.next(source("procs"))
        assert victim["pid"] in {p.pid for p in procs.payload.procs}
        os.kill(victim["pid"], signal.SIGKILL)
        ok, message = feed.dump_all(timeout=30)[host].result(timeout=40)
        _, stacks = got.next(source("stacks", host))
        dumps = {d.pid: d for d in stacks.payload.dumps}
        assert dumps[victim["pid"]].status == "exited"
        assert "Check that the process is running" in dumps[victim["pid"]].message
        assert all(dumps[a["pid"]].status == OK for a in actors(job))
        assert ok and stacks.status == OK
        assert message == (f"dumped {len(dumps) - 1} of {len(dumps)} workers; 1 exited before "
                           "the dump")
    finally:
        feed.close()


def test_rltui_diagnose_ray_names_the_hang_across_the_cluster(hung, tmp_path):
    """The headless command end to end: ``rltui diagnose --ray`` lists the node with its ranks,
    asks Ray for every worker's stack at the end of the run and names pattern B."""
    head, job = hung
    # A round every second, and rounds a second apart are two samples: the hang is confirmed
    # (stuck, critical) within a short run.
    config = tmp_path / "config.yaml"
    config.write_text("pyspy:\n  interval: 1.0\nthresholds:\n  stack_sample_gap_s: 1.0\n")
    done = subprocess.run(
        [sys.executable, "-m", "rltui", "diagnose", "--ray", head.dashboard, "--duration", "3",
         "--config", str(config), "--json", "--report", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=WAIT + 60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert done.returncode == 1, done.stderr  # critical: confirmed over two samples
    doc = json.loads(done.stdout)
    (node,) = doc["nodes"]
    assert node["state"] == "live" and node["ranks"] == [0, 1, 2]
    assert doc["stacks"]["pattern"] == "B" and doc["stacks"]["suspect_ranks"] == [2]
    found = {x["id"]: x for x in doc["symptoms"]}
    assert found[COLLECTIVE_MISMATCH]["severity"] == "critical"
    assert SECRET not in done.stdout and SECRET not in done.stderr
    report = json.loads((tmp_path / "report" / "incident.json").read_text())
    assert [n["host"] for n in report["nodes"]] == [node["host"]]
    # each worker's stack command asks the dashboard from here (no ssh to the node first)
    curls = [c for c in report["commands"] if c.startswith("curl ")]
    assert curls and all(c.startswith(f"curl -sSg 'http://{head.dashboard}/worker/traceback?")
                         for c in curls)


async def test_the_app_on_a_ray_cluster_shows_its_node_and_ranks(hung, tmp_path):
    """``rltui --ray``: the app's nodes pane and rank table from Ray's dashboard."""
    from rltui.config import Cadence, Settings
    from rltui.sources.bundle import Bundle
    from rltui.ui import build_app
    head, job = hung
    feed = RayFeed(head.dashboard, interval=0.5, stack_interval=0)
    app = build_app(Bundle(mode="live", host="ray", feed=feed, closers=[feed.close]),
                    Settings(cadence=Cadence(ui=0.2)), config_path=tmp_path / "config.yaml")
    async with app.run_test(size=(200, 60)) as pilot:
        deadline = time.monotonic() + WAIT
        while True:
            view = await app.next_evaluation(timeout=WAIT)
            ranks = {r.rank for r in view.cluster.ranks if r.rank is not None}
            if ranks == {0, 1, 2} or time.monotonic() > deadline:
                break
        assert ranks == {0, 1, 2}
        (node,) = view.cluster.nodes
        assert node.status.state == LIVE
        await pilot.pause()
        table = app.main_screen.ranks.table
        assert {str(table.get_cell(k, "node").text) for k in table.row_keys} == {node.host}


def run_pasted(line: str) -> str:
    """What a shell line of the incident report's commands prints, run as the shell would run
    it (curl where there is one; else the URL it asks, fetched here)."""
    argv = shlex.split(line)
    assert argv[0] == "curl"
    if shutil.which("curl"):
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout
    with urllib.request.urlopen(argv[-1], timeout=60) as answer:
        return answer.read().decode()


def test_the_gcs_port_instead_of_the_dashboard(hung):
    head, _ = hung
    feed = RayFeed(f"127.0.0.1:{head.gcs_port}", timeout=5)
    feed.poll_once()  # what the poll thread does, once, here
    # No poll ever succeeded: there are no nodes to mark lost, the error is all there is.
    assert feed.statuses() == [] and feed.hosts() == [] and feed.dump_all() == {}
    assert "does not speak HTTP/1.1" in feed.error and "GCS, 6379 by default" in feed.error
    assert "--ray HEAD:8265" in feed.error
    feed.close()


# -- profiling off, then the dashboard gone --------------------------------------------------------

def test_profiling_off_then_the_dashboard_gone(ray_ok):
    with RayHead(profiling=False) as head:
        job = head.run_driver("spread").ready()
        got = Readings()
        feed = RayFeed(head.dashboard, interval=3600, stack_interval=0, timeout=5)
        try:
            feed.start(got)
            host, procs = got.next(source("procs"))
            assert job["actors"][0]["pid"] in {p.pid for p in procs.payload.procs}
            ok, message = feed.dump_all(timeout=30)[host].result(timeout=40)
            _, stacks = got.next(source("stacks", host))
            assert (ok, stacks.status, stacks.payload) == (False, UNAVAILABLE, None)
            assert message == ("Ray's dashboard refuses stack traces: profiling is disabled on "
                               "the head")
            assert stacks.remedy == PROFILING_REMEDY
            head.kill_dashboard()
            before = time.time()
            feed.poll_once()
            (status,) = feed.statuses()
            assert status.state == LOST and status.last_seen is not None
            assert status.reason.startswith(f"nothing listens at {head.dashboard} (connection "
                                            "refused)")
            assert status.retry_at is not None and status.retry_at >= before
            assert feed.error == status.reason
            # short, without the host (the app prints "host: message"): the why is the error
            assert feed.dump_all()[host].result(timeout=5) == (
                False, "not dumped: the Ray dashboard cannot be read")
        finally:
            feed.close()


# -- a second node in a network namespace ----------------------------------------------------------

def test_a_node_in_a_namespace_is_listed_dumped_and_lost(ray_ok, cluster):
    timings = {}
    began = time.monotonic()
    node_b = cluster.add("rayb")
    bridge = str(cluster.subnet[1])
    # The head must be reachable from the namespace: its node address and its dashboard on
    # the bridge, not 127.0.0.1.
    with RayHead(node_ip=bridge, dashboard_host=bridge) as head:
        timings["head"] = time.monotonic() - began
        head.add_node_in(node_b, resources={"rayb": 1})
        timings["node b"] = time.monotonic() - began
        job = head.run_driver("spread", bridge, node_b.address).ready()
        timings["actors"] = time.monotonic() - began
        pids = {a["node_ip"]: a["pid"] for a in job["actors"]}
        got = Readings()
        feed = RayFeed(head.dashboard, interval=1.0, stack_interval=0)
        try:
            feed.start(got)
            listed: dict[str, set[int]] = {}
            while set(listed) != {bridge, node_b.address}:
                host, procs = got.next(source("procs"))
                listed[host] = {p.pid for p in procs.payload.procs}
            assert feed.hosts() == [bridge, node_b.address]  # the head first
            assert all(pids[ip] in listed[ip] for ip in pids)
            assert [s.state for s in feed.statuses()] == [LIVE, LIVE]
            results = {h: f.result(timeout=40) for h, f in feed.dump_all(timeout=30).items()}
            assert all(ok for ok, _ in results.values()), results
            rounds = {}
            while set(rounds) != {bridge, node_b.address}:
                host, stacks = got.next(source("stacks"))
                rounds[host] = stacks
            remote = {d.pid: d for d in rounds[node_b.address].payload.dumps}
            # dumped by the agent on node B, in node B's own PID namespace
            frames = [f.name for f in remote[pids[node_b.address]].threads[0].frames]
            assert "Sleeper.block" in frames
            node_b.kill_sshd()  # PID 1 of the namespace: every Ray process there dies
            killed = time.monotonic()
            # Ray's GCS decides the node is dead on its own schedule (missed health checks);
            # the head's readings keep coming meanwhile, each after a poll.
            while True:
                host, reading = got.next(source("procs", bridge))
                state = {s.host: s for s in feed.statuses()}
                if state[node_b.address].state == LOST:
                    break
            timings["lost after kill"] = time.monotonic() - killed
            lost = state[node_b.address]
            assert lost.reason.startswith("Ray marked the node dead: ")
            assert len(lost.reason) > len("Ray marked the node dead: ") + 10  # Ray's own words
            assert state[bridge].state == LIVE
            _, later = got.next(source("procs", bridge))
            assert later.timestamp > lost.since  # the head keeps updating
            after = feed.dump_all(timeout=30)
            assert after[node_b.address].result(timeout=5) == (
                False, "not dumped: Ray marked the node dead")
            assert after[bridge].result(timeout=40)[0] is True
        finally:
            feed.close()
    print("ray namespace test timings (s): "
          + ", ".join(f"{k} {v:.1f}" for k, v in timings.items()))


# -- bad addresses and broken answers (no Ray needed) ----------------------------------------------

def test_nothing_listening_then_a_dashboard_there():
    port = free_port()
    feed = RayFeed(f"127.0.0.1:{port}", interval=3600, stack_interval=0, timeout=5)
    try:
        feed.poll_once()
        # No node was ever seen: no status says anything, the error says it all.
        assert feed.statuses() == [] and feed.dump_all() == {}
        assert feed.error.startswith(f"nothing listens at 127.0.0.1:{port} (connection "
                                     "refused): no Ray dashboard there")
        assert "--dashboard-host 0.0.0.0" in feed.error and "ssh -N -L 8265" in feed.error
        with script_server(port) as server:  # the dashboard comes up on that port
            serve(server, "two_nodes")
            feed.poll_once()
            assert feed.error == "" and [s.state for s in feed.statuses()] == [LIVE, LIVE]
    finally:
        feed.close()


def test_the_feed_thread_survives_an_unreachable_dashboard():
    feed = RayFeed(f"127.0.0.1:{free_port()}", interval=0.2, timeout=2)
    got = Readings()
    feed.start(got)

    def threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("rltui-ray-")]
    try:
        assert feed.wait_settled(10) and "connection refused" in feed.error
        first = feed.polls
        assert first >= 1
        # The thread goes on polling after failures. Polled: the feed tells no one of a poll.
        deadline = time.monotonic() + 20
        while feed.polls < first + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert feed.polls >= first + 3 and "connection refused" in feed.error
        assert len(threads()) == 2
    finally:
        feed.close()
    assert threads() == []
    assert got.queue.empty()


def test_a_web_server_that_is_not_ray(tmp_path):
    server = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "0", "--bind",
                               "127.0.0.1", "--directory", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port N ..."
        port = int(line.split(" port ")[1].split()[0])
        feed = RayFeed(f"http://127.0.0.1:{port}", timeout=5)
        feed.poll_once()
        assert feed.error.startswith(f"127.0.0.1:{port} answers HTTP but is not a Ray dashboard "
                                     "(/api/v0/nodes: 404 Not Found, text/html)")
        feed.close()
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


SLOW, REDIRECT = "slow", "redirect"  # an answer's content type that says how to answer


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers of a dashboard in trouble, by path (a real HTTP server on loopback): (status,
    content type, body); content type SLOW: the answer waits (until teardown); REDIRECT: the
    body is the Location."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.server.asked.append(self.path)
        self.server.auth.append(self.headers.get("Authorization"))
        path = self.path.split("?")[0]
        token = self.server.token  # Ray's token authentication, with Ray's own answers
        sent = self.headers.get("Authorization")
        if token is not None and sent != f"Bearer {token}":
            status, said = ((401, b"Unauthorized: Missing authentication token") if sent is None
                            else (403, b"Forbidden: Invalid authentication token"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(said)))
            self.end_headers()
            self.wfile.write(said)
            return
        if path == "/close":
            self.close_connection = True
            self.connection.shutdown(2)
            return
        status, ctype, body = self.server.script.get(path, (404, "text/plain", "404: Not Found"))
        if path == "/slow" or ctype == SLOW:
            self.server.release.wait(10)
        data = body.encode() if ctype != REDIRECT else b""
        self.send_response(status)
        if ctype == REDIRECT:
            self.send_header("Location", body)
        else:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up on a slow answer: that is the test

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def script_server(port: int = 0) -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Scripted)
    server.daemon_threads = True
    server.script = {}
    server.asked = []  # request targets, as sent (a proxy gets whole URLs)
    server.auth = []  # the Authorization header of each request (None: not sent)
    server.token = None
    server.release = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def scripted():
    with script_server() as server:
        yield server


@pytest.mark.parametrize("path, answer, kind, said", [
    ("/api/v0/nodes", (500, "application/json",
                       '{"result": false, "msg": "GCS unavailable", "data": {}}'),
     HTTP, "with HTTP 500: 'GCS unavailable'"),
    ("/api/v0/nodes", (502, "text/html", "<html>Bad Gateway</html>"), HTTP,
     "with HTTP 502: '<html>Bad Gateway</html>'"),
    ("/api/v0/nodes", (401, "text/plain", "Unauthorized"), HTTP,
     "refuses rltui (HTTP 401 on /api/v0/nodes): 'Unauthorized'"),
    ("/api/v0/nodes", (200, "text/html", "<html>login</html>"), BAD_JSON,
     "with text/html that is not JSON: '<html>login</html>'"),
    ("/api/v0/nodes", (200, "application/json", '{"data": 3}'), BAD_JSON,
     "is not a state API answer"),
])
def test_broken_answers(scripted, path, answer, kind, said):
    scripted.script[path] = answer
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    with pytest.raises(DashboardError) as caught:
        client.state_list("nodes")
    assert caught.value.kind == kind and said in caught.value.message


def test_a_ray_without_the_state_api(scripted):
    scripted.script["/api/version"] = (200, "application/json", '{"ray_version": "1.13.0"}')
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    with pytest.raises(DashboardError) as caught:
        client.state_list("nodes")
    assert caught.value.kind == NO_STATE_API
    assert caught.value.message.endswith("the Ray 1.13.0 dashboard at 127.0.0.1:"
                                         f"{scripted.server_port} has no /api/v0/nodes: its "
                                         "state API is missing")
    assert caught.value.remedy == "rltui needs Ray 2.0 or newer on the cluster."


def test_a_connection_closed_without_an_answer_and_a_slow_one(scripted):
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=1)
    with pytest.raises(DashboardError) as caught:
        client.get("/close")
    assert caught.value.kind == NOT_HTTP and "closed the connection" in caught.value.message
    with pytest.raises(DashboardError) as caught:
        client.get("/slow")
    assert caught.value.kind == TIMEOUT
    assert caught.value.message == (f"the Ray dashboard at 127.0.0.1:{scripted.server_port} "
                                    "did not answer within 1 s")
    assert "--connect-timeout S" in caught.value.remedy  # the option that sets it
    with pytest.raises(DashboardError) as caught:
        DashboardClient(parse_address(f"127.0.0.1:{free_port()}")).get("/")
    assert caught.value.kind == REFUSED


# -- the feed's states on answers captured from a real dashboard, served again -------------------

def serve(server, prefix: str) -> None:
    """Answer as the real dashboard did (tests/data/ray/<prefix>_*.json)."""
    for name, path in (("nodes", "/api/v0/nodes"), ("actors", "/api/v0/actors"),
                       ("workers", "/api/v0/workers"), ("summary", "/nodes")):
        body = (DATA / f"{prefix}_{name}.json").read_text()
        server.script[path] = (200, "application/json", body)


def test_node_states_follow_the_dashboard(scripted):
    serve(scripted, "two_nodes")
    got = Readings()
    feed = RayFeed(f"127.0.0.1:{scripted.server_port}", interval=3600, stack_interval=0,
                   timeout=5)
    try:
        feed.start(got)
        seen = {got.next(source("procs"))[0], got.next(source("procs"))[0]}
        assert seen == {"10.201.50.1", "10.201.50.2"}
        assert feed.hosts() == ["10.201.50.1", "10.201.50.2"]  # the head first
        assert [s.state for s in feed.statuses()] == [LIVE, LIVE]
        serve(scripted, "node_dead")
        feed.poll_once()
        head, dead = feed.statuses()
        assert (head.state, dead.state) == (LIVE, LOST)
        assert dead.reason == ("Ray marked the node dead: Unexpected termination: health check "
                               "failed due to missing too many heartbeats")
        assert dead.retry_at is None and dead.last_seen is not None
        assert feed.dump_all()["10.201.50.2"].result(timeout=5) == (
            False, "not dumped: Ray marked the node dead")
        scripted.script["/api/v0/nodes"] = (503, "text/html", "<html>restarting</html>")
        feed.poll_once()
        assert {s.state for s in feed.statuses()} == {LOST}
        assert all(s.reason == feed.error and s.retry_at is not None for s in feed.statuses())
        assert "HTTP 503" in feed.error
        serve(scripted, "node_dead")
        feed.poll_once()  # the dashboard is back: the head is live again, the dead node not
        assert [s.state for s in feed.statuses()] == [LIVE, LOST] and feed.error == ""
    finally:
        feed.close()


DEEP = "[" * 200_000 + "]" * 200_000  # far deeper than Python's recursion limit


@pytest.mark.parametrize("answer, said", [
    ((200, SLOW, "{}"), "did not answer within 1 s"),
    ((404, "text/html", "<html>nope</html>"), "answers HTTP but is not a Ray dashboard"),
    ((503, "text/html", "<html>restarting</html>"), "answered /api/v0/nodes with HTTP 503"),
    ((401, "text/plain", "Unauthorized"), "refuses rltui (HTTP 401 on /api/v0/nodes)"),
    ((200, "text/html", "<html>login</html>"), "with text/html that is not JSON"),
    ((200, "application/json", DEEP), "with JSON nested too deeply to read"),
    ((200, "application/json", '{"data": 3}'), "/api/v0/nodes is not a state API answer"),
], ids=["timeout", "not-ray", "http-503", "http-401", "not-json", "deep-json", "not-state-api"])
def test_every_failure_of_the_node_listing_is_the_error_until_a_poll_succeeds(scripted, answer,
                                                                              said):
    serve(scripted, "two_nodes")
    feed = RayFeed(f"127.0.0.1:{scripted.server_port}", interval=3600, stack_interval=0,
                   timeout=1)
    try:
        feed.poll_once()
        assert feed.error == "" and [s.state for s in feed.statuses()] == [LIVE, LIVE]
        scripted.script["/api/v0/nodes"] = answer
        feed.poll_once()  # never raises: a hostile answer is an error like any other
        assert said in feed.error and "bug in rltui" not in feed.error
        assert all((s.state, s.reason) == (LOST, feed.error) for s in feed.statuses())
        serve(scripted, "two_nodes")
        feed.poll_once()
        assert feed.error == "" and [s.state for s in feed.statuses()] == [LIVE, LIVE]
        assert feed.polls == 3
    finally:
        feed.close()


def test_the_error_holds_no_credentials(scripted):
    token, password = "hf_" + "x" * 30, "pw-hunter2-rltui"
    feed = RayFeed(f"127.0.0.1:{scripted.server_port}", timeout=5)
    try:
        said = f"proxy: Authorization: Bearer {token} with api_key={SECRET}"
        scripted.script["/api/v0/nodes"] = (500, "application/json", json.dumps(
            {"result": False, "msg": said, "data": {}}))
        feed.poll_once()
        assert "HTTP 500" in feed.error and "proxy: Authorization: ***" in feed.error
        assert token not in feed.error and SECRET not in feed.error
        login = f"http://admin:{password}@127.0.0.1:{free_port()}/login?token={token}"
        scripted.script["/api/v0/nodes"] = (302, REDIRECT, login)
        feed.poll_once()
        assert "redirects /api/v0/nodes to another host" in feed.error
        assert password not in feed.error and token not in feed.error
    finally:
        feed.close()


def test_a_redirect_to_another_host_is_refused_and_one_within_it_followed(scripted):
    with script_server() as other:  # another port of this host: another server
        serve(other, "two_nodes")
        elsewhere = f"http://127.0.0.1:{other.server_port}/api/v0/nodes"
        scripted.script["/api/v0/nodes"] = (302, REDIRECT, elsewhere)
        client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
        with pytest.raises(DashboardError) as caught:
            client.state_list("nodes")
        assert caught.value.kind == HTTP and caught.value.status == 302
        assert caught.value.message == (f"127.0.0.1:{scripted.server_port} redirects "
                                        f"/api/v0/nodes to another host ({elsewhere}, HTTP "
                                        "302): not followed")
        assert "give --ray the dashboard's own address" in caught.value.remedy
        assert other.asked == []  # not even asked
    # within the address (a proxy moving the dashboard under a prefix): followed
    serve(scripted, "two_nodes")
    scripted.script["/ray/api/v0/nodes"] = scripted.script["/api/v0/nodes"]
    scripted.script["/api/v0/nodes"] = (307, REDIRECT, "/ray/api/v0/nodes")
    listed, _ = client.state_list("nodes")
    assert [r["node_ip"] for r in listed] == ["10.201.50.1", "10.201.50.2"]


def test_no_proxy_from_the_environment(scripted, monkeypatch):
    """An ssh tunnel's 127.0.0.1:8265 sent to a corporate proxy would reach the proxy's own
    machine: rltui talks to the address given, whatever http_proxy says."""
    with script_server() as proxy:
        for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
                     "ALL_PROXY"):
            monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.server_port}")
        monkeypatch.delenv("no_proxy", raising=False)
        monkeypatch.delenv("NO_PROXY", raising=False)
        serve(scripted, "two_nodes")
        client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
        listed, _ = client.state_list("nodes")
        assert len(listed) == 2 and proxy.asked == []
        assert [a.split("?")[0] for a in scripted.asked] == ["/api/v0/nodes"]


def test_a_summary_with_numbers_that_are_none_keeps_the_nodes_and_says_why(scripted):
    """A hostile agent's "inf" never reaches int(): the summary is an answer rltui cannot read,
    and the summary is optional (the nodes and workers stand, the gpus reading says why)."""
    serve(scripted, "mismatch")
    data = json.loads((DATA / "mismatch_summary.json").read_text())
    data["data"]["summary"][0]["gpus"] = [{"index": 0, "name": "NVIDIA H100", "uuid": "GPU-1",
                                           "memoryUsed": "inf", "memoryTotal": 81559.0,
                                           "processesPids": []}]
    scripted.script["/nodes"] = (200, "application/json", json.dumps(data))
    got = Readings()
    feed = RayFeed(f"127.0.0.1:{scripted.server_port}", interval=3600, stack_interval=0,
                   timeout=5)
    try:
        feed.start(got)
        host, procs = got.next(source("procs"))
        _, gpus = got.next(source("gpus", host))
        assert procs.status == OK and len(procs.payload.procs) == 6
        assert gpus.status == UNAVAILABLE
        assert gpus.message == (f"Ray's node summary could not be read: 127.0.0.1:"
                                f"{scripted.server_port} answered /nodes?view=summary with "
                                "memoryUsed 'inf', which is no finite number in range")
        assert feed.error == ""
    finally:
        feed.close()


# -- Ray's token authentication (RAY_AUTH_MODE=token, Ray 2.52+) ------------------------------------

TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def no_ray_token(monkeypatch, tmp_path):
    """No token anywhere rltui would look: the environment and the home folder are the test's."""
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_a_dashboard_that_asks_for_the_token_gets_it_and_only_then(scripted, no_ray_token,
                                                                   monkeypatch):
    serve(scripted, "two_nodes")
    scripted.token = TOKEN
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    assert len(client.state_list("nodes")[0]) == 2
    assert client.token_source == "RAY_AUTH_TOKEN"
    # asked once without it, then with it, and with it from then on
    assert scripted.auth[0] is None and set(scripted.auth[1:]) == {f"Bearer {TOKEN}"}


def test_a_dashboard_without_authentication_never_sees_the_token(scripted, no_ray_token,
                                                                 monkeypatch):
    serve(scripted, "two_nodes")
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    client.state_list("nodes")
    assert set(scripted.auth) == {None} and client.token_source is None


def test_a_401_that_is_not_ray_s_never_gets_the_token(scripted, no_ray_token, monkeypatch):
    """A mistyped address whose server answers 401 (another web app, a proxy) is not Ray's
    token check: the token is not sent there."""
    scripted.script["/api/v0/nodes"] = (401, "text/plain", "Unauthorized")
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    with pytest.raises(DashboardError) as caught:
        client.state_list("nodes")
    assert set(scripted.auth) == {None} and "Not Ray's own token check" in caught.value.remedy


def test_a_token_that_is_not_one_word_is_never_sent(scripted, no_ray_token, monkeypatch):
    serve(scripted, "two_nodes")
    scripted.token = TOKEN
    monkeypatch.setenv("RAY_AUTH_TOKEN", "abc\nsecret-part")
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    with pytest.raises(DashboardError) as caught:
        client.state_list("nodes")
    error = caught.value
    assert "not one word" in error.remedy and "secret-part" not in error.message + error.remedy
    assert set(scripted.auth) == {None}


def test_threads_that_raced_the_first_401_all_get_the_answer(scripted, no_ray_token,
                                                             monkeypatch):
    """Several threads ask at once before anyone has the token: each retries with it (none
    reports the token as refused)."""
    serve(scripted, "two_nodes")
    scripted.token = TOKEN
    monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    results, errors = [], []

    def ask() -> None:
        try:
            results.append(len(client.state_list("nodes")[0]))
        except DashboardError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and results == [2] * 8


def test_the_token_file_in_the_home_folder_is_used(scripted, no_ray_token, tmp_path):
    serve(scripted, "two_nodes")
    scripted.token = TOKEN
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text(TOKEN + "\n")
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    assert len(client.state_list("nodes")[0]) == 2
    assert client.token_source == str(tmp_path / ".ray" / "auth_token")


@pytest.mark.parametrize("token, status, said", [
    (None, 401, "rltui found none: set RAY_AUTH_TOKEN"),
    # Ray answers a wrong token with 403 "Forbidden: Invalid authentication token"
    ("wrong-token-value", 403,
     "The Ray auth token rltui sent (from RAY_AUTH_TOKEN) was refused"),
])
def test_no_token_or_a_wrong_one_says_what_to_do_and_never_shows_it(scripted, no_ray_token,
                                                                    monkeypatch, token, status,
                                                                    said):
    serve(scripted, "two_nodes")
    scripted.token = TOKEN
    if token:
        monkeypatch.setenv("RAY_AUTH_TOKEN", token)
    client = DashboardClient(parse_address(f"127.0.0.1:{scripted.server_port}"), timeout=5)
    with pytest.raises(DashboardError) as caught:
        client.state_list("nodes")
    error = caught.value
    assert error.status == status and said in error.remedy, error.remedy
    assert "wrong-token-value" not in error.message + error.remedy


def test_a_real_ray_head_with_token_authentication(ray_ok, no_ray_token, monkeypatch):
    """Ray 2.60 itself, RAY_AUTH_MODE=token: without the token the feed says what to do; with
    RAY_AUTH_TOKEN set as Ray's own clients read it, the node is live."""
    with RayHead(auth_token=TOKEN) as head:
        feed = RayFeed(head.dashboard, interval=3600, stack_interval=0, timeout=10)
        try:
            feed.poll_once()
            assert "HTTP 401" in feed.error and "RAY_AUTH_TOKEN" in feed.error, feed.error
        finally:
            feed.close()
        monkeypatch.setenv("RAY_AUTH_TOKEN", TOKEN)
        feed = RayFeed(head.dashboard, interval=3600, stack_interval=0, timeout=10)
        try:
            feed.poll_once()
            assert feed.error == "" and [s.state for s in feed.statuses()] == [LIVE]
        finally:
            feed.close()
