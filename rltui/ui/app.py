"""The app: the monitor, the screens and the keys, fed by one driver.

Data flow. A driver (rltui/ui/drivers/) brings the readings: live and demo poll the bundle's
sources on threads, replay plays a recording at scenario time, across nodes a feed brings every
node's readings. A UI timer at ``cadence.ui`` asks the driver to evaluate (snapshot + diagnosis)
and the app hands the one ``View`` to every pane. The app never asks which mode it is in: the
driver says which mode-dependent actions apply (``Driver.actions``).

Tests await ``app.next_evaluation()`` / ``app.wait_for_evaluation(n)`` (``app.evaluations``
counts them; ``app.evaluated`` is an asyncio.Event set after each) instead of sleeping;
``app.latest`` is the last View, ``app.monitor`` the core.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from pathlib import Path

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.filter import ANSIToTruecolor, LineFilter
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from rltui.config import Settings, save_theme
from rltui.incident import default_folder
from rltui.logbook import LogBook
from rltui.model import Diagnosis, NodeSnapshot, replace
from rltui.monitor import Monitor
from rltui.sources.bundle import Bundle
from rltui.ui.commands import RltuiCommands
from rltui.ui.copying import Copying, CopyTarget, copy_binding
from rltui.ui.drivers import (
    MODE_ACTIONS,
    READ_ONLY_OFF,
    REPLAY_ACTIONS,
    Driver,
    driver_for,
)
from rltui.ui.drivers.live import MIN_INTERVAL
from rltui.ui.evidence import open_evidence
from rltui.ui.messages import DriverCall, ReadingArrived, View
from rltui.ui.screens import HelpScreen, LogFileScreen, MainScreen
from rltui.ui.screens.check import CheckScreen
from rltui.ui.screens.stacks import StacksScreen
from rltui.ui.themes import RltuiTheme, ThemeVariables, load_themes, next_theme, palette_of
from rltui.ui.toasts import ScreenToasts
from rltui.ui.widgets.log_facts import log_index
from rltui.ui.widgets.log_view import LogView, OpenLog
from rltui.ui.widgets.rank_table import RankPane
from rltui.ui.widgets.symptoms import OpenEvidence
from rltui.ui.zoom import toggle_zoom

SPEED = Binding.Group("Speed")  # + and - share one footer entry
REPORT_COPY_S = 15.0  # s after a report is written (its notice's time) when y copies its path


class RltuiApp(ScreenToasts, Copying, ThemeVariables, App[int]):
    CSS_PATH = "rltui.tcss"
    TITLE = "rltui"
    COMMANDS = App.COMMANDS | {RltuiCommands}
    BINDINGS = [
        # ctrl+c quits as in every terminal tool (Textual binds it to a "press ctrl+q" toast);
        # not a priority binding, so where text is selected (a form field, the screen) ctrl+c
        # copies it first, as Textual does. ctrl+q, Textual's own, quits too.
        Binding("q,ctrl+c", "quit", "Quit", id="rltui.quit",
                tooltip="also ctrl+q; ctrl+c copies instead while text is selected"),
        Binding("p,space", "toggle_pause", "Pause", id="rltui.pause",
                tooltip="freeze the screen; live: stop polling; replay: stop playback"),
        Binding("r", "refresh", "Refresh", id="rltui.refresh",
                tooltip="poll every source now and redraw"),
        Binding("z", "zoom", "Zoom", id="rltui.zoom",
                tooltip="fill the screen with the focused pane; again or escape to return"),
        # Theme and Report stay out of the footer so that the rest fits 80 columns; help (?)
        # and the command palette list them.
        Binding("t", "cycle_theme", "Theme", id="rltui.theme", show=False,
                tooltip="cycle dark, light, colour-blind; saved in the config file (a message "
                        "says where)"),
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
                tooltip="write an incident report (markdown and JSON) into a new folder; the "
                        "first time asks where (the current folder by default)"),
        Binding("a", "timeline", "Timeline", id="rltui.timeline", show=False,
                tooltip="per rank, its steps over time and when it stopped advancing, who "
                        "stopped first first"),
        copy_binding("rltui.copy"),
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
        # Clocks are attributes so a test can replace them.
        self.clock: Callable[[], float] = time.time
        self.monotonic: Callable[[], float] = time.monotonic
        self.driver: Driver = driver_for(bundle, self)
        self.logbook: LogBook = self.driver.logbook
        # The shipped themes and the user's (beside the config file); a bad file is left out
        # with a message shown once the screen is up.
        self.themes: dict[str, RltuiTheme]
        self.themes, self.theme_problems = load_themes(self.config_path)
        for theme in self.themes.values():
            self.register_theme(theme.textual)
        self.palette = self.themes.get(settings.theme, self.themes["dark"]).palette
        self.main_screen = MainScreen(self.logbook, across_nodes=self.driver.nodes_pane)
        self.latest: View | None = None
        self.evaluated = asyncio.Event()
        self.evaluations = 0  # evaluations shown on screen
        self.ingested = 0  # readings folded into the monitor
        self.evaluated_at: float | None = None  # the time of the view on screen
        self._bundle_closed = False
        self._stacks_shown: object = None  # the report the stacks screen shows
        # (a log holds an OOM, the stacks were read), as of the last view shown: the footer and
        # the m key follow it; found once per view, not once per binding check.
        self._footer_keys: tuple[bool, bool] = (False, False)
        self.source_lines: Callable[[str, int], object] | None = None  # set by build_app
        # Each report is a new folder, named by report_folder, in report_parent: None until
        # the user has chosen it (asked on the first report, kept for the session), offered
        # pre-filled with report_suggestion (build_app: the current folder). A test sets
        # report_parent to its tmp_path.
        self.report_folder: Callable[[float], str] = lambda now: default_folder(
            self.bundle.host, now)
        self.report_parent: Path | None = None
        self.report_suggestion = "."
        self.reports_written: list[tuple[Path, Path]] = []
        self.report_written_at: float | None = None  # self.monotonic() of the last one
        # Reads the job's and the model's configs for the OOM triage; set by build_app.
        self.oom_reporter: Callable[[NodeSnapshot, list], object] | None = None
        # kind -> factory of the check's form (build_app fills it; the checks screen runs them)
        self.check_forms: dict[str, Callable[[], object]] = {}
        # How a report reaches the disk; set by build_app (the app itself does no file I/O).
        self.report_writer: Callable[[str, dict], tuple[Path, Path]] | None = None
        self.theme = settings.theme if settings.theme in self.themes else "dark"
        self.read_only = False  # READ_ONLY_OFF hidden and inert (build_app)

    @property
    def escape_to_minimize(self) -> bool:
        """escape unzooms first, as everywhere, except in a text field (a filter, a search):
        there it clears the field, and the next escape unzooms."""
        if isinstance(self.focused, Input):
            return False
        return super().escape_to_minimize

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters less the ANSI-to-truecolor one: every colour rltui paints is
        truecolor already (themes are read into ``#rrggbb``, rltui.ui.themes; no markup names an
        ANSI colour), so that filter only copied each drawn line, 13 % of the monitor's CPU.
        A theme of ANSI colours (Textual's own) turns the filter off anyway; NO_COLOR and
        TEXTUAL_FILTERS=dim keep theirs."""
        return [f for f in super().get_line_filters() if not isinstance(f, ANSIToTruecolor)]

    # -- lifecycle ----------------------------------------------------------------------------
    def get_default_screen(self) -> Screen:
        return self.main_screen

    def on_mount(self) -> None:
        self.watch_toasts()
        self.set_interval(max(self.settings.cadence.ui, MIN_INTERVAL), self.tick,
                          name="evaluate")
        self.driver.start()
        for problem in self.theme_problems:
            self.notify(problem, title="Theme", severity="error", timeout=30)

    def on_unmount(self) -> None:
        self.cancel_checks()  # also when the app ends by a crash, not through exit()
        self.close_bundle()

    def close_bundle(self) -> None:
        """Close the bundle (stops the demo job) exactly once, however the app ends."""
        if not self._bundle_closed:
            self._bundle_closed = True
            self.bundle.close()

    # -- what the driver's threads hand the main thread -----------------------------------------
    def on_reading_arrived(self, message: ReadingArrived) -> None:
        self.driver.arrived(message.reading)

    def on_driver_call(self, message: DriverCall) -> None:
        message.call()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one worker-failure handler: a failed worker is a notification, not a crash."""
        worker = event.worker
        if event.state not in (WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        failed = event.state == WorkerState.ERROR
        if failed:
            self.notify(f"{worker.description or worker.name}: {worker.error!r}",
                        title="Worker failed", severity="error", timeout=10)
        self.driver.worker_ended(worker, failed)

    # -- evaluation -----------------------------------------------------------------------------
    def tick(self) -> None:
        """The UI timer: the driver advances a replay or evaluates the live state."""
        self.driver.tick()

    def evaluate_now(self, now: float) -> None:
        """Evaluate at ``now`` and show it on every pane."""
        view = self.driver.evaluate(now)
        self.evaluated_at = now
        self._show(view)
        self.evaluations += 1
        self.evaluated.set()
        self.driver.evaluated(now)

    def view_of(self, snapshot: NodeSnapshot, diagnosis: Diagnosis) -> View:
        """The view of one evaluation, with the app's palette and the driver's state."""
        monitor, driver = self.monitor, self.driver
        return View(snapshot=snapshot, diagnosis=diagnosis, history=monitor.history,
                    thresholds=self.settings.thresholds, palette=self.palette,
                    mode=driver.mode, intervals=driver.intervals(), paused=driver.paused,
                    replay=driver.replay_state(), stacks=monitor.stacks, jobs=monitor.jobs,
                    focus=monitor.focus, stacks_job=monitor.stacks_job)

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
        """Show the last evaluation again with the current pause, speed and palette."""
        latest, driver = self.latest, self.driver
        if latest is not None:
            self._show(replace(latest, palette=self.palette, paused=driver.paused,
                               replay=driver.replay_state(), intervals=driver.intervals()))

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
        return self.driver.paused

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.read_only and action in READ_ONLY_OFF:
            return False  # hidden from the footer, inert on its key (and left out of the palette)
        if action in MODE_ACTIONS and action not in self.driver.actions:
            return False  # hidden from the footer and inert in this mode
        if action == "oom_triage":
            return self._footer_keys[0]  # shown (and live) only when a log holds an OOM
        if action == "choose_job":
            return self.latest is not None and len(
                [v for v in self.latest.jobs if v.job is not None]) > 1
        if action == "show_stacks" and "dump_stacks" not in self.driver.actions:
            # Nothing can dump (a recording): no footer entry for stacks that are not there
            # (room on 80 columns).
            return self.latest is not None and self.latest.stacks is not None
        return True

    def action_toggle_pause(self) -> None:
        self.driver.toggle_pause()
        self._redraw()

    def action_refresh(self) -> None:
        self.driver.refresh()

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
        """Every rank's stack now (see docs/stacks.md); the driver knows how."""
        self.driver.dump()

    def action_show_stacks(self) -> None:
        if isinstance(self.screen, StacksScreen):
            return
        view = self.latest
        if view is None or view.stacks is None:
            state = view.snapshot.source("stacks") if view is not None else None
            if state is not None and state.status != "ok":
                self.notify(f"{state.message} {state.remedy}".strip(), title="No stacks",
                            severity="warning", timeout=15)
            else:
                self.notify(self.driver.no_stacks_hint, severity="warning")
            return
        self._stacks_shown = view.stacks
        self.push_screen(StacksScreen(view.stacks, source_lines=self.source_lines,
                                      subtitle=view.snapshot.job))

    def action_choose_job(self) -> None:
        view = self.latest
        if "choose_job" not in self.driver.actions:
            self.notify("This view is the one job the nodes were given for.",
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
        self.evaluate_now(self.evaluated_at if self.evaluated_at is not None else self.clock())

    def action_incident_report(self) -> None:
        """Write incident.md and incident.json for the ticket (see docs/incident-report.md):
        the report of the moment the key was pressed, into the folder asked for the first
        time."""
        view = self.latest
        if view is None:
            return
        if self.report_writer is None:
            self.notify("Reports cannot be written in this mode.", severity="warning")
            return
        from rltui import findings, incident
        now = self.clock()
        doc = findings.incident_document(
            view.findings(), self.logbook.tails(incident.LOG_TAIL),
            list(self.commands) + self.driver.stack_commands(view), generated_at=now)
        if self.report_parent is not None:
            self._write_report(self.report_parent, now, doc)
            return
        from rltui.ui.screens.ask_folder import AskFolder
        self.push_screen(
            AskFolder("Incident reports go into a new folder inside this one (asked once, "
                      "kept until rltui quits):", self.report_suggestion,
                      hint="enter: write the report there; escape: no report"),
            partial(self._report_parent_chosen, now, doc))

    def _report_parent_chosen(self, now: float, doc: dict, folder: str | None) -> None:
        if folder is None:
            self.notify("No report written.", title="Report", severity="information")
            return
        # absolute, so that the message says where it is whatever the terminal's folder
        self.report_parent = Path(folder).expanduser().absolute()
        self._write_report(self.report_parent, now, doc)

    def _write_report(self, parent: Path, now: float, doc: dict) -> None:
        assert self.report_writer is not None
        folder = parent / self.report_folder(now)
        try:
            written = self.report_writer(str(folder), doc)
        except OSError as exc:
            # asked again next time: the folder chosen may be the trouble
            self.report_parent = None
            self.notify(f"Report not written to {folder}: {exc.strerror or exc}. Press i to "
                        "choose another folder.", title="Report", severity="error",
                        timeout=15, markup=False)
            return
        self.reports_written.append(written)
        md, js = written
        self.report_written_at = self.monotonic()
        self.notify(f"Incident report written to {md.parent}: {md.name} and {js.name} "
                    "(y copies the path)", title="Report", timeout=REPORT_COPY_S, markup=False)

    # -- timeline -----------------------------------------------------------------------------
    def action_timeline(self) -> None:
        """Who stopped first: each rank's steps and its stop (docs/screen.md)."""
        view = self.latest
        if view is None:
            return
        from rltui.ui.screens.timeline import TimelineScreen
        if isinstance(self.screen, TimelineScreen):
            self.screen.show(view, self.size.width)  # the key again: drawn anew
        else:
            self.push_screen(TimelineScreen(view, self.size.width))

    def copy_target(self) -> CopyTarget | None:
        """``y``: while the notice of a report just written shows, the report's path (absolute:
        it is pasted into a ticket or another shell); else what the screen offers."""
        at = self.report_written_at
        if at is not None and self.reports_written and self.monotonic() - at < REPORT_COPY_S:
            md = self.reports_written[-1][0]
            return CopyTarget(str(md.absolute()), "the incident report's path", "report-path")
        return super().copy_target()

    # -- OOM ----------------------------------------------------------------------------------
    def _has_oom(self) -> bool:
        from rltui.diagnosis.oom.report import find_oom
        return self.latest is not None and find_oom(self.latest.snapshot) is not None

    def action_oom_triage(self) -> None:
        """Read the job's config (a worker: files) and show the OOM triage."""
        if self.driver.oom_refusal:
            self.notify(self.driver.oom_refusal, severity="warning", timeout=10)
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
        from rltui.ui.screens.oom import OomScreen
        if report is None:
            self.notify("No OOM in the logs.", severity="information")
            return
        if isinstance(self.screen, OomScreen):
            self.pop_screen()
        self.push_screen(OomScreen(report))

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

    def on_open_evidence(self, message: OpenEvidence) -> None:
        open_evidence(self, message.link)

    def open_log(self, rank: int | None, path: str | None = None,
                 line: int | None = None) -> None:
        """Open a rank's log (or one file's) full screen; at ``line`` of ``path`` if given."""
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
        self.push_screen(LogFileScreen(self.logbook, rank, path, self.latest, line))

    def action_cycle_theme(self) -> None:
        self.set_theme(next_theme(self.theme, tuple(self.themes)))

    def set_theme(self, name: str, remember: bool = True) -> None:
        """Use theme ``name``; ``remember``: write it into the config file and say so (where,
        or why not), since the file is the user's and changes on a key press."""
        self.theme = name
        if not remember:
            return
        if self.read_only:
            self.notify(f"Theme {name}, for this session: read-only, the config file is left as "
                        "it is.", title="Theme", markup=False)
            return
        if self.config_path is None:
            self.notify(f"Theme {name}, for this session: no config file to save it in.",
                        title="Theme", severity="warning")
            return
        try:
            path = save_theme(name, self.config_path)
        except (OSError, ValueError) as exc:
            self.notify(f"Theme {name} not saved to {self.config_path}: "
                        f"{getattr(exc, 'strerror', None) or exc}", title="Theme",
                        severity="error", timeout=15, markup=False)
            return
        self.notify(f"Theme {name} saved to {path}", title="Theme", markup=False)

    def watch_theme(self, name: str) -> None:
        self.palette = palette_of(self.current_theme)  # the colours come from the theme itself
        self._redraw()

    # -- replay keys (check_action lets them through only where the driver has them) ---------
    def action_step(self) -> None:
        self.driver.step()

    def action_to_end(self) -> None:
        self.driver.to_end()

    def action_faster(self) -> None:
        self.driver.faster()
        self._redraw()

    def action_slower(self) -> None:
        self.driver.slower()
        self._redraw()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own theme picker offers themes without rltui's palette and does not
        # remember the choice; rltui's "Theme: ..." commands replace it.
        for command in super().get_system_commands(screen):
            if command.title != "Theme":
                yield command


def build_app(bundle: Bundle, settings: Settings, config_path: str | Path | None = None,
              commands: Sequence[str] = (), job: str | None = None,
              job_config: str | None = None, model_config: str | None = None,
              read_only: bool = False) -> RltuiApp:
    """The one way to build the app, for the CLI and for tests alike. ``commands``: how rltui
    was started (redacted), quoted in incident reports; ``job``: the job shown alone
    (``--job``); ``job_config``, ``model_config``: what the OOM triage reads (--job-config,
    --model-config; without them the job's config is found from its command line, as
    ``rltui oom`` finds it); ``read_only``: the keys of READ_ONLY_OFF off (``rltui serve``)."""
    from rltui.incident import write_new_report
    from rltui.sources.clipboard import save_copy
    from rltui.sources.sourcelines import read_source

    app = RltuiApp(bundle, settings, config_path, commands)
    app.monitor.focus = job
    app.read_only = read_only
    # The compare screen shows source lines through this; across nodes the frames' files are
    # on the nodes, and this machine's copy (another version, or none) would mislead.
    app.source_lines = read_source if app.driver.reads_local_files else None
    app.report_writer = write_new_report
    try:
        app.report_suggestion = str(Path.cwd())
    except OSError:  # the folder rltui was started in is gone
        app.report_suggestion = str(Path("~").expanduser())
    app.copy_sink = save_copy

    def oom_reporter(snapshot, lines):
        from rltui.sources.oominputs import oom_report
        return oom_report(snapshot, lines, job_config=job_config, model_config=model_config)

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
