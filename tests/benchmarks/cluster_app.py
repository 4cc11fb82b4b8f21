"""The app across nodes: 64 simulated nodes x 8 ranks (by default), every pane refreshed within
2 s, the monitor under 25 % of one core.

Set-up: a recording of the demo job with 8 ranks made with the real recorder (``rltui record
--demo healthy --ranks 8``, default cadences: GPUs (simulated), processes and logs every 1 s,
py-spy rounds every 10 s), unless ``--recording DIR`` names one already made (a missing DIR is
recorded into and kept). Then one replay agent per node (tests/fakes/replay_agent.py: the real
wire protocol over local pipes, global ranks ``node x 8 + local``, world ``nodes x 8``,
``--loop``) started through the real ``AgentFeed``, and the app built by ``build_app`` on that
feed, headless under ``run_test`` at 200x60 with the default settings (UI cadence 1 s). It
waits, on evaluations, until every node is live and every rank is in ``view.cluster.ranks``,
lets it settle, then measures for ``--seconds``:

- full refresh, per evaluation: from the UI timer's callback starting (``app.tick``) to the end
  of the screen update after which no widget of the main screen has a repaint, layout or scroll
  pending, i.e. every pane was handed the view and what changed was composited and encoded as
  the escape sequences a terminal would get (headless Textual skips that encoding, so the
  benchmark does it and counts it in);
- its parts: the cluster core's ``evaluate``, handing the view to the panes, and the wait plus
  drawing until the screen is clean;
- the cadence: seconds between consecutive evaluations (the timer is due every 1 s);
- a reading's way to the screen: from its arrival on the feed's thread to the end of the first
  full refresh of an evaluation that included it (and, separately, how long it queued before
  the main thread folded it in);
- CPU: this process (every thread: the app's main thread, the 64 readers and their stderr
  drains) over the window as % of one core, split by thread from the kernel's per-thread
  times, and the main thread's split by part (evaluate, panes, screen updates, folding readings
  in) from ``time.thread_time`` around each; the agents' CPU (other processes) and the whole
  machine's, so a reader sees what else competed for the cores.

Then, unless ``--loss-seconds 0``, one agent process is killed (SIGKILL) and its relaunches fail
(a node that stays down): it waits until that node shows lost and its ranks unknown, and
measures the same for ``--loss-seconds``: the other nodes keep refreshing at the cadence.

    python tests/benchmarks/cluster_app.py [--nodes 64] [--seconds 30] [--recording DIR]
        [--profile FILE] [--json]

``--profile FILE`` runs cProfile on the main thread during the window (it slows the main thread,
so its refresh numbers are not the benchmark's) and prints the top functions. Prints a table
(``--json``: one line of JSON instead). Every agent is stopped at the end, also on failure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
PER_NODE = 8
SIZE = (200, 60)
FLOOR_REFRESH_S = 2.0
FLOOR_CPU_PERCENT = 25.0
# The feed's threads (rltui.remote.stream names them): one reader and one stderr drain per node.
READER_THREADS = ("rltui-agent-", "rltui-stderr-")
# The recording's config: the default cadences, written out so that the user's own config
# cannot change what is recorded; py-spy rounds at the default 10 s.
RECORD_CONFIG = ("cadence:\n  gpus: 1.0\n  procs: 1.0\n  logs: 1.0\n  ui: 1.0\n"
                 "pyspy:\n  interval: 10.0\n")
# Agents start together and each parses the whole recording first: on 2 cores 64 of them take
# 10-20 s to be live; the recording must outlast start-up, settling and the windows, since the
# replay sends the log lines only on its first pass (a log does not repeat its line numbers).
STARTUP_ALLOWANCE_S = 60.0


def record(out: Path, seconds: float, scenario: str = "healthy") -> Path:
    """A recording of the demo job with 8 ranks by the real recorder."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rltui-bench-config-") as folder:
        config = Path(folder) / "config.yaml"
        config.write_text(RECORD_CONFIG)
        subprocess.run([sys.executable, "-m", "rltui.cli", "record", str(out), "--demo",
                        scenario, "--ranks", str(PER_NODE), "--duration", str(round(seconds)),
                        "--config", str(config)], cwd=REPO, check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    return out


def host_name(node: int, nodes: int) -> str:
    return f"node{node + 1:0{max(2, len(str(nodes)))}d}"


def launches(recording: Path, nodes: int, victim: int | None = None,
             victim_flag: Path | None = None) -> list:
    """One replay agent per node. The victim's command runs only while ``victim_flag`` exists,
    so once the flag is gone and its agent killed, every relaunch fails: a node that stays
    down, as one whose ssh cannot connect."""
    from rltui.remote.transports import Launch
    out = []
    for node in range(nodes):
        host = host_name(node, nodes)
        argv: tuple[str, ...] = (
            sys.executable, "-m", "tests.fakes.replay_agent", "--host", host,
            "--scenario", str(recording), "--node-rank", str(node),
            "--ranks-per-node", str(PER_NODE), "--world", str(nodes * PER_NODE), "--loop")
        if node == victim and victim_flag is not None:
            argv = ("sh", "-c", 'test -e "$0" || exit 1; exec "$@"', str(victim_flag), *argv)
        out.append(Launch(host, "local", argv))
    return out


# -- what is measured ----------------------------------------------------------------------------

@dataclass
class Evaluation:
    fired: float  # monotonic: the UI timer's callback started
    readings: list[tuple[float, float, float]]  # (arrived, folded in, reading time) since last
    core_s: float = 0.0  # ClusterMonitor.evaluate (wall)
    show_s: float = 0.0  # MainScreen.show: every pane handed the view (wall)
    shown: float | None = None  # the callback returned
    drawn: float | None = None  # the screen update after which nothing was left to draw
    drawn_wall: float | None = None
    passes: int = 0  # screen updates it took


# Parts of the main thread's CPU time the probe accounts for (time.thread_time: the main
# thread's own CPU, not time spent waiting for the GIL or for a core).
PARTS = ("evaluate", "panes", "draw", "encode", "ingest", "probe")


@dataclass
class Probe:
    """Timestamps along the app's refresh path, by wrapping instance attributes of the app, its
    main screen, the cluster monitor and the log book before the app starts (rltui itself is
    not changed). Main thread only, except ``arrived``, filled by the feed's threads."""

    app: object
    evaluations: list[Evaluation] = field(default_factory=list)
    current: Evaluation | None = None
    arrived: dict[int, tuple[object, float]] = field(default_factory=dict)
    pending: list[tuple[float, float, float]] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    ingested: int = 0
    log_lines: int = 0
    terminal_bytes: int = 0

    def install(self) -> None:
        app = self.app
        screen = app.main_screen
        driver = app.driver
        cluster = getattr(driver, "cluster", None)
        assert cluster is not None, "the app has no feed"
        perf, cpu_now, cpu = time.perf_counter, time.thread_time, self.cpu

        feed_reading = driver.feed_reading

        def fed(host, reading) -> None:  # a feed thread
            self.arrived[id(reading)] = (reading, time.monotonic())
            feed_reading(host, reading)

        driver.feed_reading = fed

        ingest = cluster.ingest

        def ingest_timed(host, reading, skew_s=None):
            c0 = cpu_now()
            out = ingest(host, reading, skew_s)
            c1 = cpu_now()
            got = self.arrived.pop(id(reading), None)
            if got is not None:
                self.pending.append((got[1], time.monotonic(), out.timestamp))
            files = getattr(out.payload, "files", None)
            if files is not None:
                self.log_lines += sum(len(f.lines) for f in files)
            self.ingested += 1
            cpu["ingest"] += c1 - c0
            cpu["probe"] += cpu_now() - c1
            return out

        cluster.ingest = ingest_timed

        apply = app.logbook.apply

        def apply_timed(*args, **kwargs):
            c0 = cpu_now()
            try:
                return apply(*args, **kwargs)
            finally:
                cpu["ingest"] += cpu_now() - c0

        app.logbook.apply = apply_timed

        tick = app.tick

        def tick_timed() -> None:
            e = Evaluation(fired=time.monotonic(), readings=self.pending)
            self.pending = []
            self.current = e
            tick()
            e.shown = time.monotonic()
            self.evaluations.append(e)
            c0 = cpu_now()
            if self.clean():  # nothing changed on screen: drawn as it stands
                e.drawn, e.drawn_wall = e.shown, time.time()
            cpu["probe"] += cpu_now() - c0

        app.tick = tick_timed

        evaluate = cluster.evaluate

        def evaluate_timed(now):
            t0, c0 = perf(), cpu_now()
            try:
                return evaluate(now)
            finally:
                cpu["evaluate"] += cpu_now() - c0
                if self.current is not None:
                    self.current.core_s += perf() - t0

        cluster.evaluate = evaluate_timed

        show = screen.show

        def show_timed(view) -> None:
            t0, c0 = perf(), cpu_now()
            try:
                show(view)
            finally:
                cpu["panes"] += cpu_now() - c0
                if self.current is not None:
                    self.current.show_s += perf() - t0

        screen.show = show_timed

        # The screen's update timer calls this (bound when the timer is made, on the screen's
        # first idle: after this wrapper is in place).
        update = screen._on_timer_update

        def update_timed() -> None:
            c0 = cpu_now()
            update()
            c1 = cpu_now()
            cpu["draw"] += c1 - c0
            e = self.current
            if e is not None and e.shown is not None and e.drawn is None:
                e.passes += 1
                if self.clean():
                    e.drawn, e.drawn_wall = time.monotonic(), time.time()
            cpu["probe"] += cpu_now() - c1

        screen._on_timer_update = update_timed

        display = app._display

        def display_encoded(target, renderable) -> None:
            display(target, renderable)
            # What a terminal run does and headless skips: the update as escape sequences
            # (counted in "draw" as well, which it runs within).
            if renderable is not None and app.is_headless and hasattr(renderable,
                                                                      "render_segments"):
                c0 = cpu_now()
                self.terminal_bytes += len(renderable.render_segments(app.console))
                cpu["encode"] += cpu_now() - c0

        app._display = display_encoded

    def clean(self) -> bool:
        """Nothing left to draw: no shown widget of the main screen waits to be repainted,
        laid out or scrolled, and the screen has no update queued or pending."""
        screen = self.app.main_screen
        if (screen._layout_required or screen._scroll_required or screen._repaint_required
                or screen._recompose_required or screen._dirty_widgets
                or not screen._message_queue.empty()):
            return False
        # Hidden widgets (and what is inside them) are never drawn: a flag left on them (a
        # hidden Input keeps one) is not work pending.
        stack = [w for w in screen.children if w.display]
        while stack:
            widget = stack.pop()
            if (widget._repaint_required or widget._layout_required or widget._scroll_required
                    or widget._recompose_required):
                return False
            stack.extend(w for w in widget.children if w.display)
        return True


@dataclass
class CpuStamp:
    wall: float
    process: float
    threads: dict[str, float]  # CPU seconds of this process's threads, by what they do
    agents: dict[int, float]
    machine_busy: float
    machine_total: float
    probe: dict[str, float]  # the probe's running counters


def agent_pids(feed) -> list[int]:
    return [s.pid for s in feed.statuses() if s.pid is not None]


def stamp(feed, probe: Probe) -> CpuStamp:
    names = {t.native_id: t.name for t in threading.enumerate()}
    threads = {"main": 0.0, "readers": 0.0, "other": 0.0}
    for t in psutil.Process().threads():
        name = names.get(t.id, "")
        group = ("main" if name == "MainThread" else
                 "readers" if name.startswith(READER_THREADS) else "other")
        threads[group] += t.user_time + t.system_time
    agents = {}
    for pid in agent_pids(feed):
        try:
            cpu = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        agents[pid] = cpu.user + cpu.system
    m = psutil.cpu_times()._asdict()
    idle = m["idle"] + m.get("iowait", 0.0)
    # Linux counts guest time in user time as well.
    total = sum(v for k, v in m.items() if k not in ("guest", "guest_nice"))
    counters = {k: float(getattr(probe, k)) for k in ("ingested", "log_lines",
                                                       "terminal_bytes")}
    counters.update(probe.cpu)
    return CpuStamp(time.monotonic(), time.process_time(), threads, agents, total - idle, total,
                    counters)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p95": None, "max": None}
    return {"median": statistics.median(values), "p95": pct(values, 0.95), "max": max(values)}


def summarise(probe: Probe, a: CpuStamp, b: CpuStamp, nodes: int) -> dict:
    wall = b.wall - a.wall
    evs = [e for e in probe.evaluations if a.wall <= e.fired < b.wall]
    done = [e for e in evs if e.drawn is not None]
    fired = [e.fired for e in evs]
    to_screen = [e.drawn - arrived for e in done for arrived, _, _ in e.readings]
    queued = [ingested - arrived for e in evs for arrived, ingested, _ in e.readings]
    ages = [e.drawn_wall - t for e in done for _, _, t in e.readings]
    agents = sum(b.agents[p] - a.agents[p] for p in b.agents if p in a.agents)
    moved = {k: b.probe[k] - a.probe[k] for k in a.probe}
    return {
        "nodes": nodes, "ranks": nodes * PER_NODE, "seconds": round(wall, 1),
        "evaluations": len(evs), "not_drawn_before_next": len(evs) - len(done),
        "refresh_s": spread([e.drawn - e.fired for e in done]),
        "evaluate_s": spread([e.core_s for e in evs]),
        "hand_to_panes_s": spread([e.show_s for e in evs]),
        "drawing_s": spread([e.drawn - e.shown for e in done]),
        "screen_updates_per_refresh": spread([float(e.passes) for e in done]),
        "interval_s": spread([y - x for x, y in zip(fired, fired[1:])]),
        "reading_to_screen_s": spread(to_screen),
        "reading_queued_s": spread(queued),
        "reading_age_on_screen_s": spread(ages),
        "readings_per_s": round(moved["ingested"] / wall, 1),
        "log_lines_per_s": round(moved["log_lines"] / wall, 1),
        "terminal_kb_per_s": round(moved["terminal_bytes"] / 1024 / wall, 1),
        "main_thread_parts_cpu_percent": {k: round(100 * moved[k] / wall, 1) for k in PARTS},
        "cpu_percent_of_one_core": round(100 * (b.process - a.process) / wall, 1),
        "main_thread_cpu_percent": round(100 * (b.threads["main"] - a.threads["main"]) / wall,
                                         1),
        "reader_threads_cpu_percent": round(
            100 * (b.threads["readers"] - a.threads["readers"]) / wall, 1),
        "agents_cpu_percent": round(100 * agents / wall, 1),
        "agents_measured": len([p for p in b.agents if p in a.agents]),
        "machine_busy_percent_of_all_cores": round(
            100 * (b.machine_busy - a.machine_busy) / max(b.machine_total - a.machine_total,
                                                          1e-9), 1),
        "cores": os.cpu_count(),
    }


# -- the run -------------------------------------------------------------------------------------

def cluster_state(view) -> tuple[int, int, dict[str, str]]:
    """(live nodes, distinct live global ranks, state per host) of a view."""
    c = view.cluster
    states = {n.host: n.status.state for n in c.nodes}
    ranks = {r.rank for r in c.ranks if r.rank is not None and r.state == "live"}
    return sum(1 for s in states.values() if s == "live"), len(ranks), states


async def wait_for(app, predicate, timeout: float, what: str):
    """Evaluations until ``predicate(view)`` holds (the app evaluates every cadence.ui)."""
    deadline = time.monotonic() + timeout
    view = app.latest
    while view is None or not predicate(view):
        left = deadline - time.monotonic()
        if left <= 0:
            live, ranks, _ = cluster_state(view) if view is not None else (0, 0, {})
            raise TimeoutError(f"{what}: not within {timeout:.0f} s "
                               f"(live nodes {live}, live ranks {ranks})")
        view = await app.next_evaluation(timeout=left)
    return view


async def for_seconds(app, seconds: float) -> None:
    """Evaluations until ``seconds`` have passed (a window counted on evaluations)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        await app.next_evaluation(timeout=max(10.0, seconds))


class Cluster:
    """``nodes`` replay agents behind a real ``AgentFeed``, and the app built on it with the
    probe installed (not started: ``app.run_test`` starts it). ``close()`` ends every agent ever
    started, also when the app did not get to close the feed; ``watch()``, run beside the app,
    remembers each agent's pid (a relaunched node has a new one)."""

    def __init__(self, recording: Path, nodes: int, folder: Path,
                 victim: int | None = None) -> None:
        from rltui.config import Settings
        from rltui.remote.feed import AgentFeed
        from rltui.remote.hostlist import compress
        from rltui.sources.bundle import Bundle
        from rltui.ui.app import build_app

        self.nodes = nodes
        self.victim = victim
        self.flag = folder / "victim-up"
        self.flag.touch()
        self.pids: set[int] = set()
        self.feed = AgentFeed(launches(recording, nodes, victim, self.flag), cwd=str(REPO))
        bundle = Bundle(mode="live", host=compress(self.feed.hosts()), feed=self.feed,
                        closers=[self.feed.close])
        self.app = build_app(bundle, Settings(), config_path=folder / "config.yaml")
        self.probe = Probe(self.app)
        self.probe.install()

    async def watch(self) -> None:
        while True:
            self.pids.update(agent_pids(self.feed))
            await asyncio.sleep(1.0)  # bookkeeping for the clean-up, not a wait for an event

    def stamp(self) -> CpuStamp:
        return stamp(self.feed, self.probe)

    def close(self) -> None:
        self.feed.close()  # the app closed it already unless it failed first; idempotent
        self.pids.update(agent_pids(self.feed))
        end_agents(self.pids)


def end_agents(pids: set[int]) -> None:
    """Whatever agent outlived the feed's close: ended by its pid."""
    me = os.getpid()
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.ppid() == me:
                proc.kill()
                proc.wait(5)
        except psutil.Error:
            pass


async def all_up(c: Cluster, timeout: float) -> None:
    """Every node live and every one of its ranks in ``view.cluster.ranks``."""
    want = (c.nodes, c.nodes * PER_NODE)
    await wait_for(c.app, lambda v: cluster_state(v)[:2] == want, timeout,
                   f"{c.nodes} nodes live, {c.nodes * PER_NODE} ranks")


async def window(c: Cluster, seconds: float, profile: str | None = None) -> dict:
    """The measurements over ``seconds`` of evaluations; with ``profile``, cProfile of the main
    thread meanwhile (its top functions in ``profile_top``)."""
    profiler = cProfile.Profile() if profile else None
    a = c.stamp()
    if profiler is not None:
        profiler.enable()
    await for_seconds(c.app, seconds)
    if profiler is not None:
        profiler.disable()
    b = c.stamp()
    out = summarise(c.probe, a, b, c.nodes)
    if profiler is not None:
        profiler.dump_stats(profile)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        out["profile_top"] = text.getvalue()
    return out


async def lose_one(c: Cluster, seconds: float) -> dict:
    """Kill the victim's agent (its relaunches fail), wait until the view shows it lost and its
    ranks unknown, then the measurements over ``seconds``."""
    assert c.victim is not None
    host = host_name(c.victim, c.nodes)
    (status,) = [s for s in c.feed.statuses() if s.host == host]
    c.flag.unlink()
    t_kill = time.monotonic()
    os.kill(status.pid, signal.SIGKILL)
    others = c.nodes - 1

    def lost(view) -> bool:
        live, ranks, states = cluster_state(view)
        return (states[host] == "lost" and (live, ranks) == (others, others * PER_NODE)
                and unknown(view, host) == PER_NODE)

    await wait_for(c.app, lost, 30.0, f"{host} shown lost")
    shown_lost = time.monotonic() - t_kill
    out = await window(c, seconds)
    out["lost_host"] = host
    out["shown_lost_after_s"] = round(shown_lost, 2)
    # From the kill on, the wait until the node was shown lost included: none may be missed.
    fired = [e.fired for e in c.probe.evaluations if e.fired >= t_kill]
    out["interval_s_from_kill"] = spread([y - x for x, y in zip(fired, fired[1:])])
    return out


def unknown(view, host: str) -> int:
    return sum(1 for r in view.cluster.ranks if r.host == host and r.state == "unknown")


@dataclass
class Run:
    nodes: int = 64
    seconds: float = 30.0
    settle: float = 5.0
    loss_seconds: float = 10.0
    startup_timeout: float = 180.0
    profile: str | None = None


def run_app(recording: Path, run: Run, folder: Path) -> dict:
    victim = run.nodes // 2 if run.loss_seconds > 0 else None
    t0 = time.monotonic()
    c = Cluster(recording, run.nodes, folder, victim)

    async def main() -> dict:
        out: dict = {}
        async with c.app.run_test(size=SIZE):
            watcher = asyncio.create_task(c.watch())
            try:
                await all_up(c, run.startup_timeout)
                out["startup_s"] = round(time.monotonic() - t0, 1)
                await for_seconds(c.app, run.settle)
                out["all_live"] = await window(c, run.seconds, run.profile)
                if victim is not None:
                    out["one_node_lost"] = await lose_one(c, run.loss_seconds)
            finally:
                watcher.cancel()
        return out

    try:
        return asyncio.run(main())
    finally:
        c.close()


# -- output --------------------------------------------------------------------------------------

def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.0f}"


def table(result: dict) -> str:
    rows = []
    phases = [(k, result[k]) for k in ("all_live", "one_node_lost") if k in result]
    head = "| measured | " + " | ".join(
        "all nodes live" if k == "all_live" else f"{v['lost_host']} lost" for k, v in phases)
    rows.append(head + " |")
    rows.append("| --- |" + " --- |" * len(phases))

    def line(label: str, f) -> None:
        rows.append(f"| {label} | " + " | ".join(f(v) for _, v in phases) + " |")

    def trio(key: str):
        return lambda v: "{} / {} / {}".format(*(ms(v[key][q]) for q in ("median", "p95",
                                                                         "max")))

    line("nodes x ranks", lambda v: f"{v['nodes']} x {PER_NODE} = {v['ranks']}")
    line("window, evaluations", lambda v: f"{v['seconds']} s, {v['evaluations']}")
    line("full refresh, ms (median / p95 / max)", trio("refresh_s"))
    line("- evaluate (cluster core), ms", trio("evaluate_s"))
    line("- hand the view to the panes, ms", trio("hand_to_panes_s"))
    line("- until drawn, ms", trio("drawing_s"))
    line("evaluations not drawn before the next", lambda v: str(v["not_drawn_before_next"]))
    line("between evaluations, ms (cadence 1000)", trio("interval_s"))
    if "one_node_lost" in result:
        line("- from the kill on, ms", lambda v: trio("interval_s_from_kill")(v)
             if "interval_s_from_kill" in v else "")
        line("node shown lost after the kill, s", lambda v: str(v.get("shown_lost_after_s", "")))
    line("reading arrived -> on screen, ms", trio("reading_to_screen_s"))
    line("reading queued for the main thread, ms", trio("reading_queued_s"))
    line("readings per s (log lines per s)",
         lambda v: f"{v['readings_per_s']} ({v['log_lines_per_s']})")
    line("terminal output, KB per s", lambda v: str(v["terminal_kb_per_s"]))
    line("monitor CPU, % of one core", lambda v: str(v["cpu_percent_of_one_core"]))
    line("- main thread", lambda v: str(v["main_thread_cpu_percent"]))
    for part, label in (("evaluate", "evaluate (cluster core)"),
                        ("panes", "hand the view to the panes"),
                        ("draw", "screen updates (compositor, encoding)"),
                        ("encode", "of which terminal encoding"),
                        ("ingest", "fold readings in (monitor, log book)"),
                        ("probe", "this benchmark's probe")):
        line(f"  - {label}", lambda v, part=part: str(v["main_thread_parts_cpu_percent"][part]))
    line("  - the rest (message dispatch, timers, event loop)",
         lambda v: str(round(v["main_thread_cpu_percent"] - sum(
             x for k, x in v["main_thread_parts_cpu_percent"].items() if k != "encode"), 1)))
    line("- the feed's reader threads (decode, post)",
         lambda v: str(v["reader_threads_cpu_percent"]))
    line("agents' CPU, % of one core (all agents)", lambda v: str(v["agents_cpu_percent"]))
    line("machine busy, % of all cores", lambda v: str(v["machine_busy_percent_of_all_cores"]))
    out = "\n".join(rows)
    live = result.get("all_live")
    if live:
        met = []
        p95 = live["refresh_s"]["p95"]
        met.append(f"refresh p95 {ms(p95)} ms vs {FLOOR_REFRESH_S * 1000:.0f} ms: "
                   + ("met" if p95 is not None and p95 <= FLOOR_REFRESH_S else "NOT met"))
        cpu = live["cpu_percent_of_one_core"]
        met.append(f"monitor CPU {cpu} % vs {FLOOR_CPU_PERCENT:.0f} %: "
                   + ("met" if cpu <= FLOOR_CPU_PERCENT else "NOT met"))
        out += "\n\n" + "; ".join(met)
    out += f"\n{result.get('cores')} cores"
    if "startup_s" in result:
        out += f"; start-up until every node and rank was in view: {result['startup_s']} s"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--loss-seconds", type=float, default=10.0,
                    help="after the window: kill one agent, measure this long (0: no loss)")
    ap.add_argument("--recording", metavar="DIR",
                    help="a recording of 8 ranks to replay; recorded into when missing")
    ap.add_argument("--record-seconds", type=float,
                    help="length of a new recording (default: start-up allowance + settle + "
                         "window + loss window)")
    ap.add_argument("--profile", metavar="FILE", help="cProfile the main thread in the window")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    run = Run(nodes=args.nodes, seconds=args.seconds, settle=args.settle,
              loss_seconds=args.loss_seconds, profile=args.profile)
    folder = Path(tempfile.mkdtemp(prefix="rltui-cluster-bench-"))
    try:
        recording = Path(args.recording) if args.recording else folder / "recording"
        if not (recording / "scenario.json").exists():
            length = args.record_seconds or (STARTUP_ALLOWANCE_S + run.settle + run.seconds
                                             + run.loss_seconds)
            print(f"recording the demo job (8 ranks) for {length:.0f} s ...", file=sys.stderr)
            record(recording, length)
        result = run_app(recording, run, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    result["cores"] = os.cpu_count()
    profile = result.get("all_live", {}).pop("profile_top", None)
    print(json.dumps(result) if args.json else table(result))
    if profile and not args.json:
        print("\ncProfile of the main thread in the window (it slows that thread: the numbers "
              "above are not the benchmark's):\n" + profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
