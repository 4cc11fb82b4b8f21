"""The ``Bundle``: which sources to poll, how often, and what to tear down at the end.

cli builds one bundle per mode (live, demo, replay) and hands it to the app or to a headless
command. The app never constructs a source itself; tests build bundles from fakes or scenarios.
A bundle is frozen once built: a command that wants fewer sources, a recorder or another host
name gets a new bundle (``keeping``, ``recording``, ``on_host``...) that shares the sources and
their one close.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rltui.model import Reading, replace
from rltui.sources.base import Source, guarded_poll
from rltui.sources.record import Recorder
from rltui.sources.replay import Player, Scenario

if TYPE_CHECKING:  # the feed is the process side of many nodes; a bundle only holds it
    from rltui.remote.feed import Feed
    from rltui.sources.deadlogs import DeadLogFinder


@dataclass(frozen=True)
class SourceSpec:
    source: Source
    interval: float  # seconds between polls


@dataclass(frozen=True)
class Bundle:
    mode: str  # "live" | "demo" | "replay" | "offline"
    host: str = field(default_factory=socket.gethostname)
    job: str = ""
    specs: tuple[SourceSpec, ...] = ()
    player: Player | None = None  # replay mode: readings come from here instead of specs
    recorder: Recorder | None = None
    # The py-spy source, for on-demand dumps (``d``); also in ``specs`` unless periodic dumps
    # are off (pyspy.interval 0).
    stacks: Source | None = None
    # Across nodes: the feed of every node's readings (rltui.remote.feed); no local sources.
    feed: Feed | None = None
    closers: tuple[Callable[[], None], ...] = ()
    # set on the first close; shared by the bundles derived from this one, so that the sources
    # are closed once whichever of them is closed
    closed: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def __post_init__(self) -> None:
        # lists are taken too (tests, callers that build them up), and frozen as tuples
        object.__setattr__(self, "specs", tuple(self.specs))
        object.__setattr__(self, "closers", tuple(self.closers))

    def intervals(self) -> dict[str, float]:
        return {s.source.name: s.interval for s in self.specs}

    # -- derived bundles (the sources and the close are shared) ---------------------------------
    def keeping(self, *names: str) -> Bundle:
        """Only the sources of these names are polled; the others are still closed with it."""
        return self._only(lambda s: s.source.name in names)

    def without_periodic_stacks(self) -> Bundle:
        """No periodic py-spy rounds (saved dumps are the stacks to read)."""
        return self._only(lambda s: s.source is not self.stacks)

    def _only(self, keep: Callable[[SourceSpec], bool]) -> Bundle:
        kept = tuple(s for s in self.specs if keep(s))
        dropped = tuple(s.source.close for s in self.specs
                        if not keep(s) and s.source is not self.stacks)
        return replace(self, specs=kept, closers=self.closers + dropped)

    def recording(self, recorder: Recorder) -> Bundle:
        """Every reading also goes to ``recorder`` (closed with the bundle)."""
        return replace(self, recorder=recorder)

    def on_host(self, host: str) -> Bundle:
        return replace(self, host=host)

    def with_stacks(self, source: Source, interval: float | None = None) -> Bundle:
        """``source`` is the py-spy source (the d key); polled every ``interval`` s too when one
        is given."""
        specs = self.specs + ((SourceSpec(source, interval),) if interval else ())
        return replace(self, stacks=source, specs=specs)

    def close(self) -> None:
        """Close sources and run closers (stop the demo job). Idempotent, never raises."""
        if self.closed.is_set():
            return
        self.closed.set()
        sources = [spec.source for spec in self.specs]
        if self.stacks is not None and self.stacks not in sources:
            sources.append(self.stacks)
        for source in sources:
            try:
                source.close()
            except Exception:  # noqa: BLE001 - teardown must go on
                pass
        for closer in self.closers:
            try:
                closer()
            except Exception:  # noqa: BLE001
                pass
        if self.recorder is not None:
            self.recorder.close()


class RememberProcs:
    """Wraps the process source and remembers every job process it has reported, so the log
    source can follow the ranks' stdout/stderr files, including those of ranks that exited; and
    the logs of ranks that were gone before rltui started, found from what their job's living
    processes say (rltui.sources.deadlogs)."""

    MAX_GONE = 4096  # departed processes remembered for the log finder

    def __init__(self, source: Source, finder: DeadLogFinder | None = None) -> None:
        self.source = source
        self.name = source.name
        self._files: dict[str, tuple[int | None, int]] = {}
        self._current: tuple = ()
        self._gone: dict[tuple[str, int], object] = {}
        self._found: list = []
        self._finder = finder
        self._lock = threading.Lock()
        self._first = threading.Event()

    def poll(self) -> Reading:
        try:
            reading = self.source.poll()
            procs = getattr(reading.payload, "procs", ())
            with self._lock:
                before = {(p.host, p.pid): p for p in self._current}
                self._current = tuple(p for p in procs if not p.is_zombie)
                now = {(p.host, p.pid) for p in self._current}
                self._gone.update((k, p) for k, p in before.items() if k not in now)
                if len(self._gone) > self.MAX_GONE:
                    for key in list(self._gone)[:len(self._gone) - self.MAX_GONE]:
                        del self._gone[key]
                for p in procs:
                    for path in (p.stdout_path, p.stderr_path):
                        if path:
                            self._files[path] = (p.rank, p.pid)
                current, gone = self._current, list(self._gone.values())
            if self._finder is not None and reading.status == "ok":
                found = self._finder.find(current, gone)
                with self._lock:
                    self._found = found
        finally:
            self._first.set()  # after _current is set: a waiting stack round reads it next
        return reading

    def current(self, wait: float = 5.0) -> tuple:
        """The job's live processes as last polled. The first call waits (up to ``wait`` s)
        for the first poll, so the first stack round does not find an empty job."""
        self._first.wait(wait)
        with self._lock:
            return self._current

    def every(self) -> tuple:
        """Every job process seen: the live ones, then those gone since (a rank that wrote
        its Flight Recorder dump and died)."""
        with self._lock:
            return self._current + tuple(self._gone.values())

    def log_files(self) -> list[tuple]:
        """(path, rank, pid) of every file a job process wrote, then (path, rank, None, how it
        was found, the job's tie) of every log found for ranks that are gone."""
        with self._lock:
            return ([(path, rank, pid) for path, (rank, pid) in self._files.items()]
                    + [(f.path, f.rank, None, f.found, f.tie) for f in self._found])

    def close(self) -> None:
        self.source.close()


def log_source(settings, procs: RememberProcs | None, globs: Sequence[str] = (),
               config_paths: bool = True) -> Source:
    from rltui.parsing.steps import compile_custom
    from rltui.sources.logs import LogSource

    logs = settings.logs
    parsers = [compile_custom(p.name, p.regex, dict(p.metrics)) for p in logs.parsers]
    return LogSource(globs=(tuple(logs.paths) if config_paths else ()) + tuple(globs),
                     discover=procs.log_files if procs else None,
                     step_format=logs.format, custom_parsers=parsers,
                     completion_patterns=logs.completion_patterns)


def stack_specs(settings, procs: RememberProcs) -> tuple[Source, list[SourceSpec]]:
    """The py-spy source and its periodic spec (none when pyspy.interval is 0)."""
    from rltui.sources.stacks import StackSource

    source = StackSource(procs.current, settings.pyspy)
    interval = settings.pyspy.interval
    return source, ([SourceSpec(source, interval)] if interval > 0 else [])


def flight_recorder_spec(settings, given: Sequence[str] = (), urls: Sequence[str] = (),
                         procs: RememberProcs | None = None) -> list[SourceSpec]:
    """The Flight Recorder source: the given dumps, the files the ranks' environment names,
    torch's debug server; polled with the stacks (a file is read again only when it changed)."""
    from rltui.sources.flightrec import FlightRecorderSource
    if not (given or urls or procs):
        return []
    source = FlightRecorderSource(given, procs.every if procs else None, urls)
    interval = settings.pyspy.interval if settings.pyspy.interval > 0 else 10.0
    return [SourceSpec(source, interval)]


def live_bundle(settings, match: str | None = None, pids: Sequence[int] = (),
                logs: Sequence[str] = (), flight_recorder: Sequence[str] = (),
                torch_debug: Sequence[str] = ()) -> Bundle:
    from rltui.sources.nvml import NvmlSource
    from rltui.sources.procs import FULL_SCAN_S, ProcSource

    nvml = NvmlSource()
    from rltui.sources.deadlogs import DeadLogFinder
    procs = RememberProcs(ProcSource(match=match, pids=tuple(pids), gpu_map=nvml.gpu_pid_map,
                                     include_children=bool(pids), full_scan_s=FULL_SCAN_S),
                          DeadLogFinder())
    job = f"--match {match}" if match else (f"--pid {' '.join(map(str, pids))}" if pids
                                             else "ranks found by environment")
    stacks, stack_spec = stack_specs(settings, procs)
    return Bundle(mode="live", job=job, stacks=stacks, specs=[
        SourceSpec(nvml, settings.cadence.gpus),
        SourceSpec(procs, settings.cadence.procs),
        SourceSpec(log_source(settings, procs, logs), settings.cadence.logs),
        *stack_spec,
        *flight_recorder_spec(settings, flight_recorder, torch_debug, procs),
    ])


def offline_bundle(settings, logs: Sequence[str] = (), flight_recorder: Sequence[str] = (),
                   torch_debug: Sequence[str] = ()) -> Bundle:
    """Saved files only (``diagnose --log/--stacks/--flight-recorder`` without a live
    selection, or torch's debug server): the given logs and dumps, no process, GPU or py-spy
    source, nothing of the node mixed in. The debug server's stacks are the stack rounds."""
    stacks, stack_spec = None, []
    if torch_debug:
        from rltui.sources.torchdebug import DebugServerStacks
        stacks = DebugServerStacks(torch_debug)
        stack_spec = [SourceSpec(stacks, max(settings.pyspy.interval, 5.0))]
    return Bundle(mode="offline", job="saved files" if not torch_debug else
                  f"torch debug server {torch_debug[0]}", stacks=stacks, specs=[
        SourceSpec(log_source(settings, None, logs, config_paths=False), settings.cadence.logs),
        *stack_spec,
        *flight_recorder_spec(settings, flight_recorder, torch_debug),
    ])


def demo_bundle(settings, job) -> Bundle:
    """``job`` is a started ``rltui.demo.job.DemoJob``; the bundle stops it on close."""
    from rltui.sources.procs import ProcSource
    from rltui.sources.simgpu import SimGpuSource

    gpus = SimGpuSource(job)
    procs = RememberProcs(ProcSource(pids=tuple(job.pids), gpu_map=gpus.gpu_pid_map))
    stacks, stack_spec = stack_specs(settings, procs)
    return Bundle(mode="demo", job=f"demo: {job.scenario} ({len(job.pids)} ranks)", specs=[
        SourceSpec(gpus, settings.cadence.gpus),
        SourceSpec(procs, settings.cadence.procs),
        SourceSpec(log_source(settings, procs), settings.cadence.logs),
        *stack_spec,
    ], stacks=stacks, closers=[job.stop])


def replay_bundle(scenario: Scenario, speed: float = 1.0) -> Bundle:
    return Bundle(mode="replay", host=scenario.host or "replay",
                  job=scenario.job or scenario.path, player=Player(scenario, speed=speed))


def run_schedule(specs: Sequence[SourceSpec], duration: float,
                 on_reading: Callable[[Reading], None],
                 stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
    """Poll every source at its cadence for ``duration`` seconds (headless record/diagnose).

    Every source is polled once at the start and, when the duration allows, once more at the
    end, so rates (CPU %) have two samples even for a short run.
    """
    stop = stop or threading.Event()
    start = clock()
    due = [start] * len(specs)
    last = [float("-inf")] * len(specs)
    while not stop.is_set():
        now = clock()
        final = now - start >= duration
        for i, spec in enumerate(specs):
            # At the end every source gets its closing poll, whatever its cadence, unless it
            # was polled at this very moment (duration 0: a single poll each).
            floor = max(spec.interval, 0.05)
            closing = final and duration > 0 and now - last[i] >= 0.05
            if now >= due[i] or closing:
                on_reading(guarded_poll(spec.source))
                due[i], last[i] = now + floor, now
        if final:
            break
        wake = min(min(due), start + duration)
        stop.wait(max(0.0, wake - clock()))
