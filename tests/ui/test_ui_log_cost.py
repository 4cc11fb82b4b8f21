"""What the log feature costs the UI thread: new lines are appended, a burst is capped, old
lines leave in chunks, and 16 ranks writing 100 lines/s each cost a few milliseconds per update.
"""

from __future__ import annotations

from rltui.logbook import LogBook
from rltui.model import LogLine, LogPoll, LogUpdate
from rltui.ui.widgets.log_buffer import MARKER, LogBuffer
from tests.fakes.scenarios import T0


def _poll(files: int, per_file: int, start: int, now: float) -> LogPoll:
    return LogPoll(files=tuple(
        LogUpdate(path=f"/jobs/big/rank{r}.log", status="ok", rank=r,
                  lines=tuple(LogLine(start + i, f"INFO step {start + i} rank {r} loss 0.1234 "
                                      "throughput 2900 tokens/s", level="error" if i == 7
                                      else "") for i in range(per_file)))
        for r in range(files)))


def test_a_burst_keeps_both_ends_and_says_what_it_skipped():
    book = LogBook()
    book.apply(_poll(4, 1250, 1, T0))
    buf = LogBuffer(max_batch=2000)
    added, dropped = buf.add(book.lines())
    assert (added, dropped) == (2001, 0)
    marker = [e for e in buf.entries if e.flags & MARKER]
    assert len(marker) == 1
    assert marker[0].text.startswith("... 3000 lines skipped")
    assert "3 error line(s) among them" in marker[0].text  # those of files 1-3
    assert buf.entries[0].line_no == 1 and buf.entries[-1].line_no == 1250


def test_old_lines_leave_in_chunks_and_positions_stay_valid():
    book = LogBook(max_lines=50_000)
    buf = LogBuffer(max_entries=1000, max_batch=None)
    buf.set_query("rank 3")
    for tick in range(30):
        book.apply(_poll(4, 25, 1 + tick * 25, T0 + tick))
    buf.add(book.lines())
    assert len(buf.entries) <= 1100 and buf.base > 0
    assert buf.shown[0] == buf.base and buf.shown[-1] == buf.end - 1
    assert all(buf.at(p) is not None and "rank 3" in buf.at(p).text for p in buf.matches)


async def test_sixteen_growing_logs_are_appended_and_followed(replay_app):
    """16 ranks writing 100 lines/s each, one evaluation a second: each update appends 1600
    lines and the view follows them. What an update costs is measured, not asserted here:
    tests/benchmarks/test_ui_update.py and docs/performance.md."""
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        book = app.monitor.tracker.logbook
        pane = app.main_screen.logs
        lines = pane.log_view.lines
        for tick in range(10):
            book.apply(_poll(16, 100, 1 + tick * 100, T0 + tick))
            app.action_refresh()  # replay: evaluate and show again
            lines.render_lines(lines.size.region)
        await pilot.pause()
        assert lines.follow and lines.scroll_y == lines.max_scroll_y
        assert pane.log_view.buffer.entries[-1].text.startswith("INFO step 1000 rank 15")
