"""A real, small Ray cluster for the Ray feed's tests: a head started with ``ray start --head
--block`` (the dashboard on, profiling on unless asked otherwise), more nodes in network
namespaces (tests/fakes/netns.py), and a driver that starts actors and hangs them.

Each ``ray start --block`` runs in a session of its own, and every process Ray starts for that
node (GCS, raylet, dashboard and its modules, agents, workers) stays in that session, so
teardown kills exactly that session, whatever failed. ``ray stop --force`` is not used: it
kills every Ray process of the machine, other clusters' included. A node in a namespace goes
with the namespace's PID 1 (``Host.kill_sshd``). Ports are free ones, Ray's session files go
to a short temporary folder of their own (Ray's unix socket paths must stay under 107 bytes),
and the cluster is kept small: few CPUs, an 80 MB object store.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).parent / "ray")
DRIVER = Path(__file__).resolve().parent / "ray_driver.py"
WAIT = 120.0  # seconds: a safety net for a stuck start on a loaded 2-core machine
OBJECT_STORE = 80_000_000  # bytes: Ray's minimum is 75 MiB
STARTED = "Ray runtime started."
# `ray start` gives a raylet 30 s (hard-coded in Ray) to register with the GCS; on an
# overloaded machine (other test runs on the same two cores) that can pass. A second attempt
# is a fresh start of that node, as an operator would do; the feed is not under test there.
ATTEMPTS = 2


def missing() -> str | None:
    """Why a Ray cluster cannot be started here (a skip reason), or None."""
    for module, what in (("ray", "ray[default]"), ("aiohttp", "ray[default] (the dashboard)"),
                         ("torch", "torch (the actors' collectives)")):
        if importlib.util.find_spec(module) is None:
            return f"{what} is not installed"
    if not os.access(RAY, os.X_OK):
        return f"no `ray` command beside this Python ({RAY})"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class _Lines:
    """A child's output, kept, with a wait for the first line that holds a marker."""

    def __init__(self, stream) -> None:
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._done = False
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for raw in stream:
            with self._cond:
                self.lines.append(raw.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def wait_for(self, marker: str, timeout: float = WAIT) -> str | None:
        """The first line holding ``marker``; None when the output ends or time runs out."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                found = next((line for line in self.lines if marker in line), None)
                left = deadline - time.monotonic()
                if found is not None or self._done or left <= 0:
                    return found
                self._cond.wait(left)

    def text(self) -> str:
        with self._cond:
            return "\n".join(self.lines[-80:])


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (a Ray node started in its own session)."""
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getsid(proc.pid) == sid:
                os.kill(proc.pid, signal.SIGKILL)


class RayHead:
    """``with RayHead() as head:``; ``head.dashboard`` (HOST:PORT) is what ``--ray`` takes,
    ``head.gcs`` what ``ray start --address`` and ``ray.init`` take."""

    def __init__(self, *, node_ip: str | None = None, dashboard_host: str = "127.0.0.1",
                 profiling: bool = True, num_cpus: int = 2,
                 auth_token: str | None = None) -> None:
        # auth_token: the head runs with Ray's token authentication (RAY_AUTH_MODE=token)
        self.auth_token = auth_token
        self.node_ip = node_ip
        self.dashboard_host = dashboard_host
        self.profiling = profiling
        self.num_cpus = num_cpus
        self.gcs_port = free_port()
        self.dashboard_port = free_port(dashboard_host)
        self.temp = Path(tempfile.mkdtemp(prefix="rltray"))
        self.proc: subprocess.Popen | None = None
        self.out: _Lines | None = None
        self._others: list[tuple[subprocess.Popen, _Lines]] = []  # drivers, local nodes
        self._temps: list[Path] = [self.temp]

    @property
    def dashboard(self) -> str:
        return f"{self.dashboard_host}:{self.dashboard_port}"

    @property
    def gcs(self) -> str:
        return f"{self.node_ip or '127.0.0.1'}:{self.gcs_port}"

    def __enter__(self) -> RayHead:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def env(self) -> dict[str, str]:
        # RAY_AUTH_MODE: a token left in ~/.ray by another Ray on this machine would make the
        # dashboard answer 401 to every request of the tests
        env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1",
                   RAY_AUTH_MODE="disabled")
        if self.auth_token:
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.auth_token)
        # Ray's dashboard agent runs py-spy by name: the interpreter's own scripts (a venv's
        # bin, where py-spy is installed) come first even when the venv is not activated.
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        env.pop("RAY_ADDRESS", None)
        if self.profiling:
            env["RAY_DASHBOARD_ENABLE_PROFILING"] = "1"
        else:
            env.pop("RAY_DASHBOARD_ENABLE_PROFILING", None)
        return env

    def start(self) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            if self._start_head():
                self.wait_dashboard()
                return
            failure = self.out.text() if self.out is not None else ""
            self._stop_head()
            if attempt == ATTEMPTS:
                raise RuntimeError(f"ray start --head did not start:\n{failure}")
            self.gcs_port = free_port()  # the dead attempt's ports may linger in TIME_WAIT
            self.dashboard_port = free_port(self.dashboard_host)

    def _start_head(self) -> bool:
        argv = [RAY, "start", "--head", "--block", "--port", str(self.gcs_port),
                "--dashboard-host", self.dashboard_host,
                "--dashboard-port", str(self.dashboard_port),
                "--ray-client-server-port", str(free_port()),
                "--dashboard-agent-listen-port", str(free_port()),
                "--num-cpus", str(self.num_cpus), "--object-store-memory", str(OBJECT_STORE),
                "--temp-dir", str(self.temp), "--include-dashboard", "true",
                "--disable-usage-stats"]
        if self.node_ip:
            argv += ["--node-ip-address", self.node_ip]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=self.env(),
                                     start_new_session=True)
        self.out = _Lines(self.proc.stdout)
        return self.out.wait_for(STARTED) is not None

    def _stop_head(self) -> None:
        if self.proc is not None:
            _kill_session(self.proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(WAIT)
            if self.out is not None:
                self.out.thread.join(WAIT)
        self.proc = self.out = None

    def wait_dashboard(self) -> None:
        """Until the state API lists this head ALIVE. Polled with a deadline: the dashboard
        starts its HTTP modules after `ray start` says it started, and tells no one."""
        url = f"http://{self.dashboard}/api/v0/nodes"
        headers = {"Authorization": f"Bearer {self.auth_token}"} if self.auth_token else {}
        deadline = time.monotonic() + WAIT
        last = ""
        while time.monotonic() < deadline:
            try:
                request = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(request, timeout=5) as answer:
                    rows = json.load(answer)["data"]["result"]["result"]
                if any(r.get("state") == "ALIVE" for r in rows):
                    return
            except Exception as exc:  # noqa: BLE001 - not up yet
                last = repr(exc)
            time.sleep(0.2)
        raise RuntimeError(f"the dashboard at {self.dashboard} never answered ({last})")

    def run_driver(self, *args: str, env: dict[str, str] | None = None) -> Driver:
        """The test job's driver (ray_driver.py), connected to this cluster."""
        proc = subprocess.Popen([sys.executable, str(DRIVER), self.gcs, *args],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                env={**self.env(), **(env or {}),
                                     "RAY_DRIVER_PARENT": str(os.getpid())},
                                start_new_session=True)
        lines = _Lines(proc.stdout)
        self._others.append((proc, lines))
        return Driver(proc, lines)

    def add_node_in(self, host, *, resources: dict[str, float], num_cpus: int = 1
                    ) -> subprocess.Popen:
        """A worker node in a network namespace (tests.fakes.netns.Host), joined to this
        head; returns once `ray start` says it started."""
        for attempt in range(1, ATTEMPTS + 1):
            temp = Path(tempfile.mkdtemp(prefix="rltray"))
            self._temps.append(temp)
            argv = [RAY, "start", "--block", "--address", self.gcs,
                    "--node-ip-address", host.address, "--num-cpus", str(num_cpus),
                    "--object-store-memory", str(OBJECT_STORE), "--temp-dir", str(temp),
                    "--resources", json.dumps(resources), "--disable-usage-stats"]
            proc = host.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=self.env(),
                            start_new_session=True)
            lines = _Lines(proc.stdout)
            self._others.append((proc, lines))
            if lines.wait_for(STARTED) is not None:
                return proc
            _kill_session(proc.pid)
            if attempt == ATTEMPTS:
                raise RuntimeError(f"ray start on {host.name} did not start:\n{lines.text()}")
            # A raylet that registered after `ray start` gave up is still ALIVE in the GCS:
            # the next attempt starts once Ray has declared it dead, so that the cluster has
            # one live node at that address, as a real node that was restarted.
            self.wait_no_live_node(host.address)
        raise AssertionError("unreachable")

    def wait_no_live_node(self, ip: str) -> None:
        """Until the state API lists no ALIVE node at ``ip``. Polled with a deadline: Ray
        declares a node dead on its own schedule (missed health checks), and tells no one."""
        url = f"http://{self.dashboard}/api/v0/nodes?limit=10000"
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            with urllib.request.urlopen(url, timeout=10) as answer:
                rows = json.load(answer)["data"]["result"]["result"]
            if not any(r.get("node_ip") == ip and r.get("state") == "ALIVE" for r in rows):
                return
            time.sleep(0.5)
        raise RuntimeError(f"Ray still lists a live node at {ip} after {WAIT:g} s")

    def kill_dashboard(self) -> None:
        """End the head's dashboard (and its module processes), nothing else."""
        assert self.proc is not None
        for proc in psutil.Process(self.proc.pid).children():
            with contextlib.suppress(psutil.Error):
                if any("dashboard/dashboard.py" in part for part in proc.cmdline()):
                    for child in proc.children(recursive=True):
                        child.kill()
                    proc.kill()
                    proc.wait(WAIT)

    def close(self) -> None:
        """Everything goes, whatever failed before: drivers, nodes started here, the head's
        session, the session files."""
        for proc, lines in self._others:
            with contextlib.suppress(OSError):
                _kill_session(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(WAIT)
            lines.thread.join(WAIT)
        self._stop_head()
        for temp in self._temps:
            shutil.rmtree(temp, ignore_errors=True)


class Driver:
    """The driver process: ``ready()`` waits for its ``ready {json}`` line (the actors' pids,
    ranks and nodes, once every actor is up)."""

    def __init__(self, proc: subprocess.Popen, lines: _Lines) -> None:
        self.proc = proc
        self.lines = lines

    def ready(self, timeout: float = WAIT) -> dict:
        line = self.lines.wait_for("ready ", timeout)
        if line is None:
            raise RuntimeError(f"the Ray driver did not start its actors:\n{self.lines.text()}")
        return json.loads(line.split("ready ", 1)[1])
