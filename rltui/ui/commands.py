"""Command palette (ctrl+p): every action under a ``category: Action`` title.

The palette runs the same actions as the keys, so a user who forgot a key can still find it;
replay commands appear only while replaying. ``Logs:`` commands act on the full-screen log when
one is open, else on the log pane (brought into view), and list one filter and one open command
per rank that has a log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider

from rltui.ui.drivers import READ_ONLY_OFF
from rltui.ui.messages import View
from rltui.ui.screens import MainScreen
from rltui.ui.widgets.log_view import LogView


class Modes(Protocol):
    actions: frozenset[str]  # which mode-dependent actions apply (the app's driver says)


class PaletteApp(Protocol):
    """What the palette reads and runs of the app (rltui.ui.app.RltuiApp, which imports this
    module to offer the palette): the same actions as the keys."""

    driver: Modes
    read_only: bool  # rltui serve: the palette leaves out READ_ONLY_OFF
    themes: Mapping[str, Any]  # by name: shipped, then the user's (rltui.ui.themes)
    latest: View | None
    main_screen: MainScreen

    def log_view(self) -> LogView | None: ...
    def show_job(self, job_id: str | None) -> None: ...
    def open_log(self, rank: int | None, path: str | None = None) -> None: ...
    def set_theme(self, name: str, remember: bool = True) -> None: ...
    def action_toggle_pause(self) -> None: ...
    def action_refresh(self) -> None: ...
    def action_zoom(self) -> None: ...
    def action_help(self) -> None: ...
    def action_cycle_theme(self) -> None: ...
    def action_step(self) -> None: ...
    def action_faster(self) -> None: ...
    def action_slower(self) -> None: ...
    def action_to_end(self) -> None: ...
    def action_dump_stacks(self) -> None: ...
    def action_show_stacks(self) -> None: ...
    def action_choose_job(self) -> None: ...
    def action_incident_report(self) -> None: ...
    def action_copy(self) -> None: ...
    def action_oom_triage(self) -> None: ...
    def action_timeline(self) -> None: ...
    def action_rollout_check(self) -> None: ...
    def action_workflow_check(self) -> None: ...
    def action_logs(self) -> None: ...
    async def action_quit(self) -> None: ...


THEME_TITLES = {"dark": "Dark", "light": "Light", "colorblind": "Colour-blind"}


def palette_commands(app: PaletteApp) -> list[tuple[str, Callable[[], object], str]]:
    """(title, callback, help) for every command the palette offers now."""
    commands: list[tuple[str, Callable[[], object], str]] = [
        ("View: Toggle pause", app.action_toggle_pause, "Stop or resume updates (p, space)"),
        ("View: Refresh now", app.action_refresh, "Poll every source now (r)"),
        ("View: Zoom focused pane", app.action_zoom, "Fill the screen with the pane (z)"),
        ("View: Help", app.action_help, "Keys and the thresholds behind the colours (?)"),
        ("Theme: Next", app.action_cycle_theme, "Cycle dark, light, colour-blind, yours (t)"),
    ]
    for name in app.themes:
        commands.append((f"Theme: {THEME_TITLES.get(name, name)}",
                         lambda name=name: app.set_theme(name), f"Use the {name} theme"))
    if "step" in app.driver.actions:
        commands += [
            ("Replay: Step one second", app.action_step, "Move on one second (n)"),
            ("Replay: Faster", app.action_faster, "Play faster (+)"),
            ("Replay: Slower", app.action_slower, "Play slower (-)"),
            ("Replay: Jump to end", app.action_to_end, "Play to the end at once (e)"),
        ]
    if "dump_stacks" in app.driver.actions:
        commands.append(("Stacks: Dump every rank now", app.action_dump_stacks,
                         "py-spy dump of every job process, a consistent cut (d)"))
    commands += [
        ("Stacks: Compare ranks", app.action_show_stacks,
         "Classes, merged tree and two ranks side by side (s)"),
        ("Report: Write incident report", app.action_incident_report,
         "incident.md and incident.json in a new folder here (i)"),
        ("View: Timeline", app.action_timeline,
         "Each rank's steps over time and when it stopped, who stopped first first (a)"),
        ("Copy: Evidence, stack class or report path", app.action_copy,
         "The selected symptom's evidence, the highlighted stack class or the report just "
         "written: OSC 52 and a private file (y)"),
        ("OOM: Triage the latest OOM", app.action_oom_triage,
         "Phase, ranked config changes and a patch (m)"),
        ("Check: Rollout consistency", app.action_rollout_check,
         "Reference model vs inference server, greedy, token by token (c)"),
        ("Check: Agent workflow", app.action_workflow_check,
         "One run, then RL-shaped concurrency: errors, timeouts, rewards (w)"),
    ]
    commands += job_commands(app)
    commands += log_commands(app)
    commands.append(("App: Quit", app.action_quit, "Quit rltui (q)"))
    if app.read_only:  # the palette calls the actions directly, past check_action
        commands = [c for c in commands if not _turned_off(c[1])]
    return commands


def _turned_off(callback: Callable[[], object]) -> bool:
    name = getattr(callback, "__name__", "")
    return name.startswith("action_") and name[len("action_"):] in READ_ONLY_OFF


def job_commands(app: PaletteApp) -> list[tuple[str, Callable[[], object], str]]:
    """One command per job when the node runs several, and one to show them all again."""
    view = app.latest
    jobs = [v.job for v in (view.jobs if view is not None else ()) if v.job is not None]
    if len(jobs) < 2:
        return []
    out: list[tuple[str, Callable[[], object], str]] = [
        ("Jobs: Choose", app.action_choose_job, "Pick the job every pane shows (j)"),
        ("Jobs: Show all", lambda: app.show_job("*"), "Every job's symptoms and ranks")]
    for job in jobs:
        out.append((f"Jobs: Show {job.id}", lambda i=job.id: app.show_job(i),
                    f"Only this job: ranks {len(job.ranks)}, {job.tie}"))
    return out


def log_commands(app: PaletteApp) -> list[tuple[str, Callable[[], object], str]]:
    def on_logs(action: str, *args: object) -> Callable[[], None]:
        def run() -> None:
            view = app.log_view()
            if view is not None:
                getattr(view, f"action_{action}")(*args)
        return run

    def filter_rank(rank: int | None) -> Callable[[], None]:
        def run() -> None:
            view = app.log_view()
            if view is not None:
                view.set_rank_filter(rank)
        return run

    commands: list[tuple[str, Callable[[], object], str]] = [
        ("Logs: Show", app.action_logs, "Go to the log pane (l)"),
        ("Logs: Toggle follow", on_logs("toggle_follow"),
         "New lines scroll the log to the end, or leave it where it is (f)"),
        ("Logs: Errors only", on_logs("errors_only"),
         "Only error lines and the tracebacks/OOM messages around them, or all lines (x)"),
        ("Logs: Search", on_logs("search"), "Find text in the kept lines (/, then n / N)"),
        ("Logs: Next error", on_logs("error", 1), "The next error, traceback or OOM (.)"),
        ("Logs: Previous error", on_logs("error", -1),
         "The previous error, traceback or OOM (,)"),
        ("Logs: All ranks", filter_rank(None), "Show every rank's lines (< >)"),
    ]
    for rank in app.main_screen.logs.ranks():
        commands.append((f"Logs: Filter rank {rank}", filter_rank(rank),
                         f"Show only rank {rank}'s lines (< >)"))
        commands.append((f"Logs: Open rank {rank} log",
                         lambda rank=rank: app.open_log(rank),
                         f"Rank {rank}'s log full screen (o)"))
    return commands


class RltuiCommands(Provider):
    async def discover(self) -> Hits:
        for title, callback, help_text in palette_commands(self.app):  # type: ignore[arg-type]
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, callback, help_text in palette_commands(self.app):  # type: ignore[arg-type]
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, help=help_text)
