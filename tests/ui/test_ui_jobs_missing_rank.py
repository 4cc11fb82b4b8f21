"""Two jobs on one node, both with a rank 2, and job "crash" lost its rank 2 before rltui
started (a gap in its WORLD_SIZE: no process, no pid, only its log beside its peers' logs). The
rank table's row for that missing rank reads its own job's rank-2 log (its last step, `o`), not
the other job's rank-2 log, which steps on and would otherwise win as the newest rank-2 file.

The scenario is written here (the ``two_jobs`` scenario has no logs): job "crash" (ranks 0-1 of
3, pids 4100-4101, rendezvous 127.0.0.1:29500), its rank 2's log found from the job (the log
source's ``tie``), stopped at step 2 with a traceback; job "demo" (ranks 0-3, pids 5100-5103,
127.0.0.1:29501) stepping every second to step 20.
"""

from __future__ import annotations

from pathlib import Path

from rltui import jobs
from rltui.config import Settings
from rltui.model import (
    OK,
    LogEvent,
    LogLine,
    LogPoll,
    LogUpdate,
    ProcInfo,
    ProcPoll,
    Reading,
    StepRecord,
    replace,
)
from rltui.ui import build_app
from rltui.ui.screens import LogFileScreen
from tests.fakes.scenarios import T0, bundle, proc, write
from tests.ui.helpers import cell

DURATION = 20
CRASH_DIR, DEMO_DIR = "/jobs/crash/logs", "/jobs/demo/logs"
CRASH_RANK2 = f"{CRASH_DIR}/rank2.log"
DEMO_RANK2 = f"{DEMO_DIR}/rank2.log"
ERROR = "RuntimeError: rank 2 of the crash job lost its data loader"


def ranked(job: str, base: int, rank: int, world: int, port: int) -> ProcInfo:
    return replace(proc(rank, pid_base=base, world=world, role=job), ppid=1,
                   cmdline=("python", f"{job}.py"),
                   stdout_path=f"/jobs/{job}/logs/rank{rank}.log",
                   stderr_path=f"/jobs/{job}/logs/rank{rank}.log",
                   job_env=(("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(port))))


class File:
    """One log file's news, poll by poll."""

    def __init__(self, path: str, rank: int, pid: int | None = None, tie: str = "",
                 found: str = "") -> None:
        self.path, self.rank, self.pid, self.tie, self.found = path, rank, pid, tie, found
        self.line_no = 0
        self.lines: list[LogLine] = []
        self.steps: list[StepRecord] = []
        self.events: list[LogEvent] = []

    def step(self, n: int, when: float) -> None:
        self.line_no += 1
        self.lines.append(LogLine(self.line_no, f"step:{n} - actor/pg_loss:0.1 - "
                                                f"timing_s/step:1.0"))
        self.steps.append(StepRecord(n, self.line_no, when, time=when, total=100))

    def crash(self, when: float) -> None:
        first = self.line_no + 1
        for text in ("Traceback (most recent call last):",
                     '  File "/jobs/crash/crash.py", line 40, in <module>', ERROR):
            self.line_no += 1
            self.lines.append(LogLine(self.line_no, text, level="error"))
        self.events.append(LogEvent("traceback", first, self.line_no, when, ERROR,
                                    "\n".join(line.text for line in self.lines[-3:])))

    def update(self) -> LogUpdate:
        out = LogUpdate(path=self.path, status=OK, rank=self.rank, pid=self.pid, format="verl",
                        lines=tuple(self.lines), steps=tuple(self.steps),
                        events=tuple(self.events), tie=self.tie, found=self.found)
        self.lines, self.steps, self.events = [], [], []
        return out


def two_jobs_one_missing_rank(path: Path) -> Path:
    crash = [ranked("crash", 4100, r, 3, 29500) for r in (0, 1)]
    demo = [ranked("demo", 5100, r, 4, 29501) for r in range(4)]
    tie = jobs.master(crash[0])
    files = [File(f"{CRASH_DIR}/rank{r}.log", r, 4100 + r) for r in (0, 1)]
    files.append(File(CRASH_RANK2, 2, tie=tie, found=f"beside {CRASH_DIR}/rank0.log"))
    files += [File(f"{DEMO_DIR}/rank{r}.log", r, 5100 + r) for r in range(4)]
    readings: list[Reading] = []
    for s in range(DURATION + 1):
        now = T0 + s + 0.25
        if s == 0:
            # rank 2 of "crash" stepped twice and died before rltui started
            files[2].step(1, T0 - 30)
            files[2].step(2, T0 - 25)
            files[2].crash(T0 - 24)
            for f in files[:2]:  # its peers got as far, then wait for it
                f.step(1, T0 - 30)
                f.step(2, T0 - 25)
        for f in files[3:]:
            f.step(s + 1, now)
        readings.append(Reading("procs", T0 + s, OK,
                                ProcPoll(procs=(*crash, *demo), how="env RANK/LOCAL_RANK")))
        readings.append(Reading("logs", now, OK, LogPoll(files=tuple(f.update() for f in files))))
    return write(path, readings, job="two jobs, one missing a rank",
                 description="crash: rank 2 missing from WORLD_SIZE 3; demo: healthy",
                 intervals={"procs": 1.0, "logs": 1.0})


def two_jobs_app(tmp_path):
    return build_app(bundle(two_jobs_one_missing_rank(tmp_path / "scenario")),
                     Settings(theme="dark"), config_path=tmp_path / "config.yaml")


def missing_row(table) -> str:
    (key,) = [k for k in table.row_keys if k.startswith("m")]
    return key


async def test_a_missing_rank_reads_its_own_job_s_log_not_the_other_job_s(tmp_path):
    app = two_jobs_app(tmp_path)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        view = app.latest
        assert len(view.snapshot.jobs) == 2 and view.focus is None  # both jobs, one table
        table = app.main_screen.ranks.table
        # the one row without a process: the crash job's rank 2, missing from its WORLD_SIZE
        key = missing_row(table)
        assert cell(table, key, "rank").text == "2"
        # its last step is its own log's (2), not the demo job's rank 2 (step 21, newer)
        assert cell(table, key, "step").text.startswith("2 ")
        # and how it left, from the same file: crashed (its traceback), not just gone
        assert cell(table, key, "state").style == app.palette.bad
        # the demo job's rank 2 row reads the demo job's file
        assert cell(table, "p5102", "step").text.startswith(f"{DURATION + 1} ")
        # `o` on the row opens the crash job's rank-2 log, the traceback in it
        table.focus()
        table.cursor_row = table.get_row_index(key)
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, LogFileScreen)
        assert app.screen.path == CRASH_RANK2
        assert ERROR in [entry.text for entry in app.screen.log_view.buffer.entries]


async def test_the_rank_log_screen_shows_its_own_job_s_lines_only(tmp_path):
    """Opened from a rank-2 row with two jobs on the node: that job's rank-2 file alone, in
    its lines and its title (no "+1 more"), for the missing rank and the live one alike."""
    app = two_jobs_app(tmp_path)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        table = app.main_screen.ranks.table
        table.focus()
        table.cursor_row = table.get_row_index(missing_row(table))
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, LogFileScreen)
        paths = {entry.path for entry in app.screen.log_view.buffer.entries}
        assert paths == {CRASH_RANK2}
        title = str(app.screen.title_bar.render())
        assert CRASH_RANK2 in title and "more" not in title, title
        # and the other job's rank 2, from its own row: its own file only
        await pilot.press("escape")
        await pilot.pause()
        demo = next(k for k in table.row_keys
                    if str(cell(table, k, "rank").text) == "2" and k != missing_row(table))
        table.cursor_row = table.get_row_index(demo)
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, LogFileScreen)
        assert {entry.path for entry in app.screen.log_view.buffer.entries} == {DEMO_RANK2}


async def test_the_rank_log_screen_keeps_its_job_when_the_focus_changes(tmp_path):
    """Opened (palette, `o` with a rank filter) while the pane shows the crash job alone, the
    rank-2 log is the crash job's; `j` to the demo job, then back to all jobs, while it stays
    open must not pour the demo job's rank-2 lines into it, nor retitle it with that file."""
    scenario = two_jobs_one_missing_rank(tmp_path / "scenario")
    played = bundle(scenario)
    played.player.paused = True
    app = build_app(played, Settings(theme="dark"), config_path=tmp_path / "config.yaml")
    async with app.run_test(size=(200, 60)) as pilot:
        app.action_step()
        await pilot.pause()
        crash, demo = sorted(v.job.id for v in app.latest.jobs if v.job is not None)
        assert crash.startswith("crash") and demo.startswith("demo")
        app.show_job(crash)
        app.open_log(2)  # no path: the rank's job is the one shown alone
        await pilot.pause()
        assert isinstance(app.screen, LogFileScreen)
        screen = app.screen
        assert {entry.path for entry in screen.log_view.buffer.entries} == {CRASH_RANK2}
        for focus in (demo, "*"):
            app.show_job(focus)
            for _ in range(2):  # the demo job's rank 2 steps on every second
                app.action_step()
            await pilot.pause()
            assert app.screen is screen
            assert {entry.path for entry in screen.log_view.buffer.entries} == {CRASH_RANK2}
            title = str(screen.title_bar.render())
            assert CRASH_RANK2 in title and DEMO_RANK2 not in title, title
