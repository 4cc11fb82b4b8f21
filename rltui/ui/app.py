"""The composition root: a bundle of sources, the monitor, the screens and the keys.

Data flow. Live and demo: a timer per source starts a thread worker at the source's cadence;
the worker calls ``guarded_poll`` and posts ``ReadingArrived`` (never a second poll of a source
while one is in flight). On the main thread the reading is folded into the monitor. A UI timer
at ``cadence.ui`` evaluates (snapshot + diagnosis) and hands one ``View`` to every pane.
Replay: the same UI timer advances the player by the wall time that passed and evaluates at
scenario time, so ages and symptoms are the same on every run.

Tests await ``app.next_evaluation()`` / ``app.wait_for_evaluation(n)`` (``app.evaluations``
counts them; ``app.evaluated`` is an asyncio.Event set after each) instead of sleeping;
``app.latest`` is the last View, ``app.monitor`` the core.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Sequence

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from rltui.config import Settings, save_theme
from rltui.logbook import LogBook
from rltui.model import Diagnosis, NodeSnapshot, Reading
from rltui.monitor import Monitor
from rltui.sources.base import Source, guarded_poll
from rltui.sources.bundle import Bundle, SourceSpec
from rltui.ui.commands import RltuiCommands
from rltui.ui.across_nodes import AcrossNodes
from rltui.ui.messages import ReadingArrived, ReplayState, View
from rltui.incident import default_folder
from rltui.ui.screens import HelpScreen, LogFileScreen, MainScreen
from rltui.ui.screens.check import CheckScreen
from rltui.ui.screens.stacks import StacksScreen
from rltui.ui.themes import RltuiTheme, load_all, next_theme
from rltui.ui.widgets.log_facts import log_index
from rltui.ui.widgets.log_view import LogView, OpenLog
from rltui.ui.widgets.rank_table import RankPane
from rltui.ui.zoom import toggle_zoom

POLL_GROUP = "poll"
STACKS_ON_DEMAND = "stacks on demand"  # worker name of a `d` dump (beside the periodic one)
MIN_INTERVAL = 0.05  # s; a zero interval in a config must not spin the event loop
REPLAY_ACTIONS = {"step", "faster", "slower", "to_end"}
SPEED = Binding.Group("Speed")  # + and - share one footer entry


class RltuiApp(AcrossNodes, App[int]):
    CSS_PATH = "rltui.tcss"
    TITLE = "rltui"
    COMMANDS = App.COMMANDS | {RltuiCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="rltui.quit"),
        Binding("p,space", "toggle_pause", "Pause", id="rltui.pause",
                tooltip="freeze the screen; live: stop polling; replay: stop playback"),
        Binding("r", "refresh", "Refresh", id="rltui.refresh",
                tooltip="poll every source now and redraw"),
        Binding("z", "zoom", "Zoom", id="rltui.zoom",
                tooltip="fill the screen with the focused pane; again or escape to return"),
        # Theme and Report stay out of the footer so that the rest fits 80 columns; help (?)
        # and the command palette list them.
        Binding("t", "cycle_theme", "Theme", id="rltui.theme", show=False,
                tooltip="cycle dark, light, colour-blind; remembered in the config file"),
        Binding("question_mark,f1", "help", "Help", id="rltui.help"),
        Binding("n", "step", "Step", id="rltui.replay.step", tooltip="move on one second"),
        Binding("plus", "faster", "Faster", id="rltui.replay.faster", group=SPEED,
                tooltip="play faster"),
        Binding("minus", "slower", "Slower", id="rltui.replay.slower", group=SPEED,
                tooltip="play slower"),
        Binding("e", "to_end", "End", id="rltui.replay.end",
                tooltip="play to the end at once"),
        Binding("l", "logs", "Logs", id="rltui.logs.show",
                tooltip="go to the log pane (zoomed where the terminal is too short for it)"),
        Binding("d", "dump_stacks", "Dump", id="rltui.stacks.dump",
                tooltip="dump every rank's stack with py-spy now (each process pauses for "
                        "its own dump, for a consistent cut)"),
        Binding("s", "show_stacks", "Stacks", id="rltui.stacks.show",
                tooltip="compare the ranks' stacks: classes, merged tree, side-by-side diff"),
        Binding("m", "oom_triage", "OOM", id="rltui.oom",
                tooltip="triage the latest CUDA OOM: phase, config changes, a patch"),
        # priority: over the tables' vim "j" (down), but only while the node runs several
        # jobs (check_action); otherwise j moves down as before
        Binding("j", "choose_job", "Jobs", id="rltui.jobs", show=False, priority=True,
                tooltip="choose the job shown when the node runs several (every pane follows)"),
        Binding("i", "incident_report", "Report", id="rltui.report", show=False,
                tooltip="write an incident report (markdown and JSON) into the current folder"),
        Binding("c", "rollout_check", "Rollout check", id="rltui.check.rollout", show=False,
                tooltip="compare a reference model with the inference server, greedy, token by "
                        "token (runs on request)"),
        Binding("w", "workflow_check", "Workflow check", id="rltui.check.workflow", show=False,
                tooltip="run an agent workflow once, then at RL concurrency (runs on request)"),
    ]

    def __init__(self, bundle: Bundle, settings: Settings,
                 config_path: str | Path | None = None,
                 commands: Sequence[str] = ()) -> None:
        super().__init__()
        self.commands = tuple(commands)  # how rltui was started, for the incident report
        self.bundle = bundle
        self.settings = settings
        self.config_path = Path(config_path) if config_path else None
        self.monitor = Monitor(host=bundle.host, job=bundle.job,
                               thresholds=settings.thresholds, history_len=settings.history)
        self.logbook: LogBook = self.monitor.tracker.logbook
        # Across nodes (rltui/ui/across_nodes.py) a feed brings every node's readings.
        self._init_across_nodes(bundle.feed, bundle.job, settings.thresholds)
        self.themes: dict[str, RltuiTheme] = load_all()
        for theme in self.themes.values():
            self.register_theme(theme.textual)
        self.palette = self.themes.get(settings.theme, self.themes["dark"]).palette
        # Clocks are attributes so a test can replace them.
        self.clock: Callable[[], float] = time.time
        self.monotonic: Callable[[], float] = time.monotonic
        self.main_screen = MainScreen(self.logbook, across_nodes=self.feed is not None)
        self.latest: View | None = None
        self.evaluated = asyncio.Event()
        self.evaluations = 0  # evaluations shown on screen
        self.ingested = 0  # readings folded into the monitor
        self._paused = False  # live mode; replay pauses the player itself
        self._in_flight: set[str] = set()
        self._refreshing: set[str] = set()
        self._evaluated_at: float | None = None
        self._last_tick = 0.0
        self._bundle_closed = False
        self._stacks_shown: object = None  # the report the stacks screen shows
        self._confirming: object = None  # the stack round a confirming round was asked after
        self.confirm_rounds = 0  # confirming rounds asked for (a suspected hang each)
        # (a log holds an OOM, the stacks were read), as of the last view shown: the footer and
        # the m key follow it; found once per view, not once per binding check.
        self._footer_keys: tuple[bool, bool] = (False, False)
        self.source_lines: Callable[[str, int], object] | None = None  # set by build_app
        self.report_folder: Callable[[float], str] = lambda now: default_folder(
            self.bundle.host, now)  # a test points this into its tmp_path
        self.reports_written: list[tuple[Path, Path]] = []
        # Reads the job's and the model's configs for the OOM triage; set by build_app.
        self.oom_reporter: Callable[[NodeSnapshot, list], object] | None = None
        # kind -> factory of the check's form (build_app fills it; the checks screen runs them)
        self.check_forms: dict[str, Callable[[], object]] = {}
        # How a report reaches the disk; set by build_app (the app itself does no file I/O).
        self.report_writer: Callable[[str, dict], tuple[Path, Path]] | None = None
        player = bundle.player
        self.intervals = player.scenario.intervals() if player else bundle.intervals()
        self.theme = settings.theme if settings.theme in self.themes else "dark"

    # -- lifecycle ----------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return self.main_screen

    def on_mount(self) -> None:
        for spec in self.bundle.specs:
            self.set_interval(max(spec.interval, MIN_INTERVAL), partial(self._poll_due, spec),
                              name=f"poll {spec.source.name}")
        self.set_interval(max(self.settings.cadence.ui, MIN_INTERVAL), self.tick,
                          name="evaluate")
        player = self.bundle.player
        if player is not None:
            self._last_tick = self.monotonic()
            self._play(player.step(0.0))  # the readings of the first instant
        elif self.feed is not None:
            self.feed.start(self._feed_reading)
            self._evaluate(self.clock())  # every node "connecting" until its first line
        else:
            self.action_refresh()  # first poll of every source now, shown when all are in

    def on_unmount(self) -> None:
        self.cancel_checks()  # also when the app ends by a crash, not through exit()
        self.close_bundle()

    def close_bundle(self) -> None:
        """Close the bundle (stops the demo job) exactly once, however the app ends."""
        if not self._bundle_closed:
            self._bundle_closed = True
            self.bundle.close()

    # -- polling (live, demo) -----------------------------------------------------------------
    def _poll_due(self, spec: SourceSpec) -> None:
        if not self.paused:
            self._start_poll(spec)

    def _start_poll(self, spec: SourceSpec) -> bool:
        name = spec.source.name
        if name in self._in_flight:
            return False  # a slow source is never polled twice at once
        self._in_flight.add(name)
        self.run_worker(partial(self._poll_in_thread, spec.source), name=name, group=POLL_GROUP,
                        description=f"poll {name}", exit_on_error=False, start=True,
                        exclusive=False, thread=True)
        return True

    def _poll_in_thread(self, source: Source) -> Reading:
        # Worker thread: poll and post, nothing else (widgets belong to the main thread).
        reading = guarded_poll(source)
        self.post_message(ReadingArrived(reading))
        return reading

    def on_reading_arrived(self, message: ReadingArrived) -> None:
        reading = message.reading
        if self.bundle.recorder is not None:
            self.bundle.recorder.write(reading)
        self.monitor.ingest(reading)
        self.ingested += 1
        self._refresh_done(reading.source)

    def _refresh_done(self, name: str) -> None:
        if name in self._refreshing:
            self._refreshing.discard(name)
            if not self._refreshing:
                self._evaluate(self.clock())

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one worker-failure handler: a failed worker is a notification, not a crash."""
        worker = event.worker
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        if worker.group == POLL_GROUP:
            self._in_flight.discard(worker.name)
        if event.state == WorkerState.ERROR:
            self.notify(f"{worker.description or worker.name}: {worker.error!r}",
                        title="Worker failed", severity="error", timeout=10)
            if worker.group == POLL_GROUP:
                self._refresh_done(worker.name)

    # -- evaluation -----------------------------------------------------------------------------
    def tick(self) -> None:
        """The UI timer: advance a replay, or evaluate the live state."""
        player = self.bundle.player
        if player is not None:
            now = self.monotonic()
            elapsed, self._last_tick = now - self._last_tick, now
            readings = player.advance(elapsed)
            if readings or player.now != self._evaluated_at:
                self._play(readings)
            return
        if not self.paused:
            self._evaluate(self.clock())

    def _play(self, readings: Sequence[Reading]) -> None:
        """Fold replayed readings with a snapshot at each reading time, as the headless replay
        does (the rules read earlier snapshots through the history), then diagnose and show the
        state at the player's position."""
        player = self.bundle.player
        assert player is not None
        i = 0
        while i < len(readings):
            stamp = readings[i].timestamp
            while i < len(readings) and readings[i].timestamp == stamp:
                self.monitor.ingest(readings[i])
                self.ingested += 1
                i += 1
            if stamp < player.now:
                self.monitor.observe(stamp)
        self._evaluate(player.now)

    def _evaluate(self, now: float) -> None:
        if self.cluster is not None:
            view = self._evaluate_cluster(now)
        else:
            snapshot, diagnosis = self.monitor.evaluate(now)
            view = self._view(snapshot, diagnosis)
            self._confirm_if_suspected(now)
        self._evaluated_at = now
        self._show(view)
        self.evaluations += 1
        self.evaluated.set()

    def _confirm_if_suspected(self, now: float) -> None:
        """A suspected hang gets its confirming stack round a sample gap after the first one,
        before the next periodic round (rltui diagnose does the same): the verdict confirms
        itself within seconds instead of a whole py-spy interval. Live only; once per round."""
        spec = next((s for s in self.bundle.specs if s.source is self.bundle.stacks), None)
        if spec is None or self.bundle.player is not None or self.paused:
            return
        rounds = self.monitor.tracker.snapshot_rounds()
        if not rounds or rounds[-1] is self._confirming:
            return
        gap = self.settings.thresholds.stack_sample_gap_s
        if spec.interval <= gap * 1.5 or not self.monitor.suggests_hang():
            return  # the periodic round comes soon enough
        self._confirming = rounds[-1]
        # a second sample a gap after the first; a third (a busy-loop suspicion) 1.5 gaps
        # after the second, an offset no step period aliases with both
        offset = gap * 1.5 if self.monitor.stacks is not None and \
            self.monitor.stacks.samples >= 2 else gap
        delay = max(0.0, rounds[-1].started + offset - now)
        self.set_timer(delay, partial(self._start_poll, spec), name="confirming stack round")
        self.confirm_rounds += 1

    def _view(self, snapshot: NodeSnapshot, diagnosis: Diagnosis) -> View:
        player = self.bundle.player
        replay = None
        if player is not None:
            replay = ReplayState(position=player.position, duration=player.duration,
                                 speed=player.speed, paused=player.paused,
                                 finished=player.finished)
        return View(snapshot=snapshot, diagnosis=diagnosis, history=self.monitor.history,
                    thresholds=self.settings.thresholds, palette=self.palette,
                    mode=self.bundle.mode, intervals=self.intervals, paused=self.paused,
                    replay=replay, stacks=self.monitor.stacks, jobs=self.monitor.jobs,
                    focus=self.monitor.focus, stacks_job=self.monitor.stacks_job)

    def _show(self, view: View) -> None:
        self.latest = view
        try:
            screen = self.screen
        except ScreenStackError:
            return  # a poll that ends while the app shuts down: nothing left to draw on
        keys = (self._has_oom(), view.stacks is not None)
        if keys != self._footer_keys:  # the footer lists the m and s keys only when they work
            self._footer_keys = keys
            self.refresh_bindings()
        self.main_screen.show(view)
        if isinstance(screen, LogFileScreen):
            screen.show(view)  # it catches up by sequence number if it missed some
        elif isinstance(screen, StacksScreen) and view.stacks is not None:
            if view.stacks is not self._stacks_shown:
                self._stacks_shown = view.stacks
                screen.show_report(view.stacks)

    def _redraw(self) -> None:
        """Show the last evaluation again with the current mode, speed and palette."""
        latest = self.latest
        if latest is not None:
            self._show(replace(self._view(latest.snapshot, latest.diagnosis),
                               cluster=latest.cluster, history=latest.history,
                               stacks=latest.stacks))

    async def wait_for_evaluation(self, after: int, timeout: float = 5.0) -> View:
        """Wait until evaluation number ``after + 1`` (or a later one) is on screen."""
        async def reached() -> None:
            while self.evaluations <= after:
                self.evaluated.clear()
                await self.evaluated.wait()

        await asyncio.wait_for(reached(), timeout)
        assert self.latest is not None
        return self.latest

    def next_evaluation(self, timeout: float = 5.0) -> Awaitable[View]:
        """An awaitable for the first evaluation after this call (for tests and scripts):
        ``waiter = app.next_evaluation(); await pilot.press("n"); view = await waiter``."""
        return self.wait_for_evaluation(self.evaluations, timeout)

    # -- actions --------------------------------------------------------------------------------
    @property
    def paused(self) -> bool:
        player = self.bundle.player
        return player.paused if player is not None else self._paused

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        replay = self.bundle.player is not None
        if action in REPLAY_ACTIONS and not replay:
            return False  # hidden from the footer and inert outside replay
        if action in ("refresh", "dump_stacks") and replay:
            return False  # a recording has nothing new to poll
        if action == "oom_triage":
            return self._footer_keys[0]  # shown (and live) only when a log holds an OOM
        if action == "choose_job":
            return self.cluster is None and self.latest is not None and len(
                [v for v in self.latest.jobs if v.job is not None]) > 1
        if action == "show_stacks" and replay:
            # A recording without stacks gets no footer entry for them (room on 80 columns).
            return self.latest is not None and self.latest.stacks is not None
        return True

    def action_toggle_pause(self) -> None:
        player = self.bundle.player
        if player is not None:
            player.paused = not player.paused
            self._last_tick = self.monotonic()  # resuming must not jump by the paused time
        else:
            self._paused = not self._paused
        self._redraw()

    def action_refresh(self) -> None:
        player = self.bundle.player
        if player is not None:
            self._evaluate(player.now)
            return
        if self.feed is not None:
            self._evaluate(self.clock())  # the nodes send at their own cadence
            return
        self._refreshing = {spec.source.name for spec in self.bundle.specs}
        for spec in self.bundle.specs:
            self._start_poll(spec)  # one already in flight counts: its reading is as fresh
        if not self._refreshing:
            self._evaluate(self.clock())

    def action_zoom(self) -> None:
        if isinstance(self.screen, MainScreen):
            toggle_zoom(self.screen)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_bindings(), self.settings.thresholds,
                                        self.palette))

    def help_bindings(self) -> list[Binding]:
        """The app's bindings as the help screen lists them (replay keys marked), then the
        keys of the log views and the rank table, which work while those have focus."""
        out = []
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action in REPLAY_ACTIONS:
                b = replace(b, description=f"{b.description} (replay)")
            out.append(b)
        for where, bindings in (("logs", LogView.BINDINGS), ("ranks", RankPane.BINDINGS),
                                ("stacks screen", StacksScreen.BINDINGS),
                                ("check screens", CheckScreen.BINDINGS)):
            for b in bindings:
                assert isinstance(b, Binding)
                out.append(replace(b, description=f"{b.description} ({where})"))
        return out

    # -- stacks -------------------------------------------------------------------------------
    def action_dump_stacks(self) -> None:
        """On-demand py-spy round: a blocking dump for a consistent cut (see docs/stacks.md)."""
        if self.feed is not None:
            self._dump_nodes(self._in_flight, STACKS_ON_DEMAND, POLL_GROUP)
            return
        source = self.bundle.stacks
        if source is None:
            self.notify("No stack source in this mode.", severity="warning")
            return
        if STACKS_ON_DEMAND in self._in_flight:
            self.notify("A dump is already running.", severity="information")
            return
        count = len(self.latest.snapshot.live_procs) if self.latest else 0
        self.notify(f"Dumping {count} process(es) with py-spy...", timeout=3)
        self._in_flight.add(STACKS_ON_DEMAND)
        self._refreshing.add(source.name)  # evaluate as soon as the round is in
        self.run_worker(partial(self._dump_in_thread, source), name=STACKS_ON_DEMAND,
                        group=POLL_GROUP, description="py-spy dump", exit_on_error=False,
                        start=True, exclusive=False, thread=True)

    def _dump_in_thread(self, source) -> Reading:
        reading = guarded_poll(source, self.clock, poll=source.dump_now)
        self.post_message(ReadingArrived(reading))
        if reading.status != "ok":
            self.call_from_thread(self.notify, f"{reading.message} {reading.remedy}".strip(),
                                  title="py-spy", severity="error", timeout=15)
        return reading

    def action_show_stacks(self) -> None:
        if isinstance(self.screen, StacksScreen):
            return
        view = self.latest
        if view is None or view.stacks is None:
            state = view.snapshot.source("stacks") if view is not None else None
            if state is not None and state.status != "ok":
                self.notify(f"{state.message} {state.remedy}".strip(), title="No stacks",
                            severity="warning", timeout=15)
            elif self.bundle.stacks is not None or self.feed is not None:
                self.notify("No stacks yet: press d to dump every rank now.",
                            severity="warning")
            else:
                self.notify("No stacks in this recording.", severity="warning")
            return
        self._stacks_shown = view.stacks
        self.push_screen(StacksScreen(view.stacks, source_lines=self.source_lines,
                                      subtitle=view.snapshot.job))

    def action_choose_job(self) -> None:
        view = self.latest
        if self.cluster is not None:
            self.notify("Across nodes the view is the job the nodes were given for.",
                        severity="warning")
            return
        if view is None or len([v for v in view.jobs if v.job is not None]) < 2:
            self.notify("One job on this node: nothing to choose." if view and view.jobs
                        else "No training job found yet.", severity="information")
            return
        from rltui.ui.screens.jobs import JobPicker
        self.push_screen(JobPicker(view.jobs, self.monitor.focus, self.palette),
                         self.show_job)

    def show_job(self, job_id: str | None) -> None:
        """Narrow every pane to one job (``*``: all jobs again); None leaves it as it is."""
        if job_id is None:
            return
        self.monitor.focus = None if job_id == "*" else job_id
        self._stacks_shown = None
        self._evaluate(self._evaluated_at if self._evaluated_at is not None else self.clock())

    def action_incident_report(self) -> None:
        """Write incident.md and incident.json for the ticket (see docs/incident-report.md)."""
        view = self.latest
        if view is None:
            return
        from rltui import incident
        doc = incident.build(incident.ReportInputs(
            snapshot=view.snapshot, diagnosis=view.diagnosis, stacks=view.stacks,
            log_tails=self.logbook.tails(incident.LOG_TAIL),
            commands=list(self.commands) + self._stack_commands(view),
            mode=self.bundle.mode, generated_at=self.clock()))
        if view.cluster is not None:
            from rltui.remote.cluster_report import nodes_json
            doc["nodes"] = nodes_json(view.cluster)
        folder = self.report_folder(self.clock())
        if self.report_writer is None:
            self.notify("Reports cannot be written in this mode.", severity="warning")
            return
        try:
            written = self.report_writer(folder, doc)
        except OSError as exc:
            self.notify(f"Report not written to {folder}: {exc.strerror or exc}",
                        severity="error", timeout=15)
            return
        self.reports_written.append(written)
        self.notify(f"Incident report written: {written[0]} and {written[1].name}",
                    title="Report", timeout=15)

    def _stack_commands(self, view: View) -> list[str]:
        if view.cluster is not None:
            return self._node_commands(view)
        from rltui import incident
        return incident.stack_commands(view.snapshot)

    # -- OOM ----------------------------------------------------------------------------------
    def _has_oom(self) -> bool:
        from rltui.diagnosis.oom.report import find_oom
        return self.latest is not None and find_oom(self.latest.snapshot) is not None

    def action_oom_triage(self) -> None:
        """Read the job's config (a worker: files) and show the OOM triage."""
        if self.feed is not None:
            # The triage reads the job's config files, which are on the nodes, not here.
            self.notify("OOM triage reads the job's config files on this machine: run "
                        "`rltui oom` on the node that ran out of memory.", severity="warning",
                        timeout=10)
            return
        if self.latest is None or self.oom_reporter is None or not self._footer_keys[0]:
            self.notify("No OOM in the logs.", severity="information")
            return
        snapshot, lines = self.latest.snapshot, self.logbook.lines()
        self.run_worker(partial(self._oom_in_thread, snapshot, lines), name="oom triage",
                        group="oom", description="OOM triage", exit_on_error=False,
                        exclusive=True, thread=True)

    def _oom_in_thread(self, snapshot: NodeSnapshot, lines: list) -> None:
        report = self.oom_reporter(snapshot, lines)
        self.call_from_thread(self._show_oom, report)

    def _show_oom(self, report) -> None:
        from rltui.diagnosis.oom.report import report_text
        from rltui.ui.screens.oom import OomScreen
        if report is None:
            self.notify("No OOM in the logs.", severity="information")
            return
        title = (f"OOM triage: {report.phase.phase} ({report.phase.confidence} confidence), "
                 f"{report.framework}")
        if isinstance(self.screen, OomScreen):
            self.pop_screen()
        self.push_screen(OomScreen(title, report_text(report)))

    # -- checks on request ----------------------------------------------------------------------
    def action_rollout_check(self) -> None:
        self.open_check("rollout")

    def action_workflow_check(self) -> None:
        self.open_check("workflow")

    def open_check(self, kind: str):
        """Show a check's screen. One screen per check is installed on first use and kept, so
        a run goes on (and its results stay) while the user is back on the monitor. A check
        screen already on the stack (under a result's detail) is brought back, never pushed a
        second time; another check's screen (and what is above it) is closed first."""
        name = f"check-{kind}"
        if not self.is_screen_installed(name):
            self.install_screen(CheckScreen(self.check_forms[kind]()), name=name)
        screen = self.get_screen(name)
        stack = self.screen_stack
        if screen in stack:
            while self.screen is not screen:
                self.pop_screen()
            return screen
        for depth, below in enumerate(stack):
            if isinstance(below, CheckScreen):
                for _ in range(len(stack) - depth):
                    self.pop_screen()
                break
        self.push_screen(name)
        return screen

    def cancel_checks(self) -> None:
        """Ask every running check to stop (its thread would otherwise keep the process alive
        after the app closes: a thread cannot be interrupted, only asked)."""
        for kind in self.check_forms:
            name = f"check-{kind}"
            if self.is_screen_installed(name):
                screen = self.get_screen(name)
                if isinstance(screen, CheckScreen):
                    screen.cancel_run()

    def exit(self, *args, **kwargs) -> None:
        # on_unmount comes too late for a normal quit: the check's thread keeps the process
        # waiting before it (tests/ui/test_ui_checks.py::test_quitting_cancels_a_running_check)
        self.cancel_checks()
        super().exit(*args, **kwargs)

    # -- logs ---------------------------------------------------------------------------------
    def action_logs(self) -> None:
        screen = self.screen
        if isinstance(screen, LogFileScreen):
            screen.log_view.lines.focus()
        elif isinstance(screen, MainScreen):
            screen.reveal_logs()

    def log_view(self) -> LogView | None:
        """The log view a ``Logs:`` command acts on: the full-screen log when one is open,
        else the pane's (brought into view)."""
        screen = self.screen
        if isinstance(screen, LogFileScreen):
            return screen.log_view
        if isinstance(screen, MainScreen):
            screen.reveal_logs()
            return screen.logs.log_view
        return None

    def on_open_log(self, message: OpenLog) -> None:
        self.open_log(message.rank, message.path)

    def open_log(self, rank: int | None, path: str | None = None) -> None:
        """Open a rank's log (or one file's) full screen."""
        if self.latest is None:
            return
        index = log_index(self.latest.snapshot)
        if rank is not None and not index.files_of_rank(rank) and path is None:
            if rank not in self.main_screen.logs.log_view.buffer.ranks:
                self.notify(f"No log found for rank {rank}: its stdout/stderr are not files. "
                            "Add it with --log PATH_OR_GLOB.", severity="warning")
                return
        if isinstance(self.screen, LogFileScreen):
            self.pop_screen()
        self.push_screen(LogFileScreen(self.logbook, rank, path, self.latest))

    def action_cycle_theme(self) -> None:
        self.set_theme(next_theme(self.theme))

    def set_theme(self, name: str, remember: bool = True) -> None:
        self.theme = name
        if remember and self.config_path is not None:
            try:
                save_theme(name, self.config_path)
            except (OSError, ValueError) as exc:
                self.notify(f"theme not remembered: {exc}", severity="warning")

    def watch_theme(self, name: str) -> None:
        theme = self.themes.get(name)
        if theme is not None:
            self.palette = theme.palette
        self._redraw()

    def action_step(self) -> None:
        if self.bundle.player is not None:
            self._play(self.bundle.player.step(1.0))

    def action_to_end(self) -> None:
        if self.bundle.player is not None:
            self._play(self.bundle.player.to_end())

    def action_faster(self) -> None:
        if self.bundle.player is not None:
            self.bundle.player.faster()
            self._redraw()

    def action_slower(self) -> None:
        if self.bundle.player is not None:
            self.bundle.player.slower()
            self._redraw()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own theme picker offers themes without rltui's palette and does not
        # remember the choice; rltui's "Theme: ..." commands replace it.
        for command in super().get_system_commands(screen):
            if command.title != "Theme":
                yield command


def build_app(bundle: Bundle, settings: Settings, config_path: str | Path | None = None,
              commands: Sequence[str] = (), job: str | None = None) -> RltuiApp:
    """The one way to build the app, for the CLI and for tests alike. ``commands``: how rltui
    was started (redacted), quoted in incident reports; ``job``: the job shown alone
    (``--job``)."""
    from rltui.incident import write_report
    from rltui.sources.sourcelines import read_source

    app = RltuiApp(bundle, settings, config_path, commands)
    app.monitor.focus = job
    # The compare screen shows source lines through this; across nodes the frames' files are
    # on the nodes, and this machine's copy (another version, or none) would mislead.
    app.source_lines = read_source if bundle.feed is None else None
    app.report_writer = write_report

    def oom_reporter(snapshot, lines):
        from rltui.sources.oominputs import oom_report
        return oom_report(snapshot, lines)

    app.oom_reporter = oom_reporter
    app.check_forms = check_forms()
    return app


def check_forms() -> dict[str, Callable[[], object]]:
    """The checks the app offers, each a factory of its ``CheckForm`` (imported on first use:
    the rollout check's form pulls in nothing heavy, but its run does)."""
    def rollout():
        from rltui.checks.rollout.form import rollout_form
        return rollout_form()

    def workflow():
        from rltui.checks.workflow.form import workflow_form
        return workflow_form()

    return {"rollout": rollout, "workflow": workflow}
