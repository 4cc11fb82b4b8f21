"""``y`` on each screen: the monitor copies the selected symptom's evidence, the compare screen
the highlighted stack class, and, while the notice of a report just written shows, the
report's path. Each test reads what the app wrote to the terminal (the OSC 52 sequence, caught
at Textual's headless driver) and the file the copy sink wrote, and checks they hold the same
scrubbed text."""

from __future__ import annotations

import base64
import os
import re
import stat
import time
from pathlib import Path

import pytest
from textual.drivers.headless_driver import HeadlessDriver

from rltui.config import Cadence, Settings
from rltui.diagnosis.copytext import stack_class_text
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import OK, LogEvent, LogLine, LogPoll, LogUpdate, ProcPoll, Reading
from rltui.parsing.pyspy import parse_text
from rltui.sources.clipboard import save_copy
from rltui.ui import build_app
from rltui.ui.screens.stacks import StacksScreen
from tests.fakes.scenarios import proc
from tests.fakes.sources import FakeSource, FakeStackSource, live_bundle, procs_ok
from tests.ui.helpers import FakeClock, dump_now, record_notes, until_idle
from tests.ui.test_ui_stacks import report_of

SECRET = "hf_abcdefghijklmnopqrstuvwx"
ERROR_LINE = f"RuntimeError: 401 Unauthorized for HF_TOKEN={SECRET}"
OSC52 = re.compile(r"\x1b\]52;c;([A-Za-z0-9+/=]*)\x07")
FAST = Settings(cadence=Cadence(gpus=0.05, procs=0.05, ui=0.1),
                thresholds=Thresholds(stale_after_intervals=1000.0, rank_exit_grace_s=0.0))


@pytest.fixture
def terminal(monkeypatch, tmp_path) -> list[str]:
    """A terminal that takes OSC 52 (xterm, no tmux), the copies under tmp_path, and what the
    app writes to the terminal, as written."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    for name in ("TMUX", "STY", "TERM_PROGRAM"):
        monkeypatch.delenv(name, raising=False)
    written: list[str] = []
    monkeypatch.setattr(HeadlessDriver, "write", lambda self, data: written.append(data))
    return written


async def press_y(pilot, notes: list[str]) -> str:
    """Press y and wait for its notice."""
    before = len(notes)
    await pilot.press("y")
    await until_idle(pilot, lambda: len(notes) > before, "the copy's notice")
    return notes[-1]


def sent(written: list[str]) -> list[str]:
    """The texts the app put on the clipboard through OSC 52, in order."""
    return [base64.b64decode(m).decode() for m in OSC52.findall("".join(written))]


def copied_file(notes: list[str]) -> Path:
    """The file the last copy notice names."""
    path = Path(re.search(r"(/\S+\.txt)", notes[-1]).group(1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, notes[-1]
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    return path


def crashing_job() -> list[FakeSource]:
    """Two ranks; rank 0's log ends in an error that names a token, then rank 0 exits: a
    rank-exited symptom whose evidence quotes that line."""
    def procs(n: int) -> Reading:
        return Reading("procs", time.time(), OK, ProcPoll(procs=tuple(
            proc(r, world=2) for r in range(2) if n < 4 or r != 0)))

    def logs(n: int) -> Reading:
        first = n == 1
        lines = (LogLine(1, "Traceback (most recent call last):", "error"),
                 LogLine(2, ERROR_LINE, "error")) if first else ()
        events = (LogEvent("traceback", 1, 2, time.time(), ERROR_LINE,
                           "Traceback (most recent call last):\n" + ERROR_LINE),) if first else ()
        return Reading("logs", time.time(), OK, LogPoll(files=(LogUpdate(
            path="/var/log/job/rank0.log", status=OK, rank=0, pid=4100, format="verl",
            lines=lines, events=events),)))

    return [FakeSource("procs", procs), FakeSource("logs", logs)]


async def test_y_copies_the_selected_symptoms_evidence_with_the_token_hidden(terminal, tmp_path):
    app = build_app(live_bundle(*crashing_job()), FAST, config_path=tmp_path / "config.yaml")
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await app.wait_for_evaluation(after=0)
        while "rank-exited" not in [s.id for s in view.diagnosis.symptoms]:
            view = await app.wait_for_evaluation(app.evaluations)
        await press_y(pilot, notes)
    clip, = sent(terminal)
    assert clip.startswith("CRITICAL  rank 0 crashed (RuntimeError)")
    assert "Evidence:\n  - rank 0 (pid 4100): exited" in clip
    assert "HF_TOKEN=***" in clip and SECRET not in clip
    assert app.clipboard == clip
    assert 'Copied the evidence of "rank 0 crashed' in notes[-1] and "(OSC 52); also in" in notes[-1]
    assert copied_file(notes).read_text() == clip


async def test_y_on_the_compare_screen_copies_the_highlighted_class(terminal):
    from rltui.ui.stacks_app import build_stacks_app
    report, _ = report_of("collective-mismatch")
    assert len(report.classes) >= 2
    app = build_stacks_app(report, copy_sink=save_copy)
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, StacksScreen)
        await press_y(pilot, notes)
        first = copied_file(notes)
        screen.class_pane.table.focus()
        await pilot.press("down")
        await press_y(pilot, notes)
        second = copied_file(notes)
    one, two = sent(terminal)
    assert one == stack_class_text(report, 0) and two == stack_class_text(report, 1)
    assert first.read_text() == one and second.read_text() == two
    assert "Copied stack class #2 (" in notes[-1]
    thread = parse_text(two)[0].threads[0]  # a dump again, innermost frame first
    assert [f.name for f in thread.frames] == [f.name for f in reversed(report.classes[1].frames)]


async def test_y_after_i_copies_the_reports_path_until_its_notice_goes(terminal, tmp_path):
    bundle = live_bundle(procs_ok(3)).with_stacks(FakeStackSource("collective-mismatch"))
    app = build_app(bundle, FAST, config_path=tmp_path / "config.yaml")
    app.report_folder = lambda now: str(tmp_path / "report")
    app.report_parent = tmp_path  # asked once otherwise (a folder box)
    clock = FakeClock()
    app.monotonic = clock
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_evaluation(after=0)
        view = await dump_now(app, pilot, lambda v: v.stacks is not None
                              and v.diagnosis.symptoms)
        before = len(notes)
        await pilot.press("i")
        await until_idle(pilot, lambda: len(notes) > before, "the report's notice")
        assert "(y copies the path)" in notes[-1]
        assert "Copied the incident report's path" in await press_y(pilot, notes)
        path_file = copied_file(notes)
        clock.now += 15.0  # the report's notice is gone: y is the evidence again
        assert "Copied the evidence of" in await press_y(pilot, notes)
    md, _ = app.reports_written[0]
    path, evidence = sent(terminal)
    assert path == str(tmp_path / "report" / "incident.md") and Path(path).is_file()
    assert path_file.read_text() == path
    assert evidence.startswith(view.diagnosis.symptoms[0].severity.upper())


async def test_on_the_linux_console_nothing_is_sent_and_the_notice_names_the_file(
        terminal, monkeypatch, tmp_path):
    monkeypatch.setenv("TERM", "linux")  # the console would print the sequence
    app = build_app(live_bundle(*crashing_job()), FAST, config_path=tmp_path / "config.yaml")
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await app.wait_for_evaluation(after=0)
        while not view.diagnosis.symptoms:
            view = await app.wait_for_evaluation(app.evaluations)
        await press_y(pilot, notes)
    assert sent(terminal) == []
    assert notes[-1].startswith('The evidence of "rank 0 crashed')
    assert notes[-1].endswith(": the terminal (TERM=linux) has no clipboard escape.")
    text = copied_file(notes).read_text()
    assert text.startswith("CRITICAL") and SECRET not in text


async def test_y_with_nothing_to_copy_says_what_it_copies(terminal, tmp_path):
    app = build_app(live_bundle(procs_ok(2)), FAST, config_path=tmp_path / "config.yaml")
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_evaluation(after=0)
        await pilot.press("question_mark")  # the help screen has nothing to copy
        await until_idle(pilot, lambda: app.screen is not app.main_screen, "the help screen")
        await press_y(pilot, notes)
    assert sent(terminal) == []
    assert notes[-1].startswith("Nothing to copy here")
    assert not any(Path(os.environ["XDG_RUNTIME_DIR"]).rglob("copy-*"))
