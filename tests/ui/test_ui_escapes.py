"""Outside strings on the screen: a rank's role (its script's name), a log line and the log's
path can hold terminal escapes (a window title, a screen clear, colours), Rich markup and
secrets. The tables and the log pane draw them escaped and scrubbed, never raw."""

from __future__ import annotations

import time

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import OK, LogLine, LogPoll, LogUpdate, ProcPoll, Reading, replace
from rltui.ui import build_app
from tests.fakes.scenarios import proc
from tests.fakes.sources import FakeSource, live_bundle
from tests.ui.helpers import drawn, until_view

FAST = Settings(cadence=Cadence(gpus=0.05, procs=0.05, logs=0.05, ui=0.1),
                thresholds=Thresholds(stale_after_intervals=1000.0))
TITLE = "\x1b]0;owned-title\x07"
ROLE = f"train{TITLE}[bold red]x[/]"
SECRET_ROLE = "ray::Worker token=hf_FAKEfakeHuggingFace0123456789ab"
LINE = (f"INFO {TITLE}\x1b[2J\x1b[31mred\x1b[0m [bold red]x[/] \x9b2J "
        "token=hf_FAKEfakeHuggingFace0123456789ab")
RAW = ("\x1b", "\x07", "\x9b")


def _procs() -> FakeSource:
    return FakeSource("procs", lambda n: Reading("procs", time.time(), OK, ProcPoll(
        procs=(replace(proc(0, world=2), role=ROLE),
               replace(proc(1, world=2), role=SECRET_ROLE)))))


def _logs() -> FakeSource:
    def make(n: int) -> Reading:
        lines = (LogLine(1, LINE),) if n == 1 else ()
        return Reading("logs", time.time(), OK, LogPoll(files=(LogUpdate(
            path="/tmp/rank0-\x1b[2J.log", status=OK, rank=0, pid=4100, lines=lines),)))
    return FakeSource("logs", make)


async def test_the_rank_table_and_the_log_pane_show_outside_strings_escaped(tmp_path):
    app = build_app(live_bundle(_procs(), _logs()), FAST, config_path=tmp_path / "c.yaml")
    async with app.run_test(size=(240, 60)) as pilot:
        await app.wait_for_evaluation(after=0)
        table = app.main_screen.ranks.table
        text, _ = drawn(table, "p4100", "role")
        assert not [c for c in RAW if c in text]
        assert text.startswith("train\\x1b]0")  # shown escaped (cut to the column)
        assert table.get_cell("p4101", "role").text == "ray::Worker token=***"

        await pilot.press("e")
        view = app.main_screen.logs.log_view
        await until_view(app, lambda _: view.buffer.entries, "the log line in the pane")
        entry = view.buffer.entries[-1]
        assert entry.text.startswith("INFO \\x1b]0;owned-title\\x07\\x1b[2J\\x1b[31mred")
        assert "[bold red]x[/] \\x9b2J token=***" in entry.text
        assert "FAKEfake" not in entry.text
        view.lines.render_lines(view.lines.size.region)
        drawn_text = "".join(s.text for y in range(view.lines.size.height)
                             for s in view.lines.render_line(y))
        assert "owned-title" in drawn_text
        assert not [c for c in RAW if c in drawn_text]
