"""The log feature in the UI: the merged log pane, its keys, the full-screen rank log, and the
rank table's last step, step time and ETA.

The ``with_logs`` scenario (tests/fakes/scenarios.py): 4 ranks writing verl step lines and a
driver log; rank 2 hits a CUDA OOM at 30 s, rank 3 dies with a traceback at 40 s and exits at
42 s, the others stop stepping at 44 s. Played to its end (60 s) unless a test says otherwise.
"""

from __future__ import annotations

from statistics import median

import pytest
from rich.segment import Segment

from rltui.model import LogFileState, LogPoll, StepRecord
from rltui.ui.commands import palette_commands
from rltui.ui.screens import HelpScreen, LogFileScreen, MainScreen
from rltui.ui.themes import load_theme
from rltui.ui.widgets.log_facts import eta, log_index, step_summary, step_times
from rltui.ui.widgets.log_pane import HOW_LOGS_ARE_FOUND
from rltui.ui.widgets.log_view import LogView
from rltui.units import duration
from tests.fakes.scenarios import LOG_DIR, T0, TRACEBACK, WAITING_GLOB
from tests.ui.helpers import cell, drawn, plain


def log_view(app) -> LogView:
    return app.main_screen.logs.log_view


def shown_texts(view: LogView) -> list[str]:
    buf = view.buffer
    return [buf.row(i)[1].text for i in range(len(buf.shown))]


def drawn_line(view: LogView, pos: int) -> list[Segment]:
    """The segments the view draws for the entry at ``pos`` (it must be on screen)."""
    lines = view.lines
    row = view.buffer.row_of(pos)
    assert row is not None, "entry filtered out"
    y = row - int(lines.scroll_y)
    assert 0 <= y < lines.size.height, "entry not on screen"
    lines.render_lines(lines.size.region)  # sets the paint-time base style
    return list(lines.render_line(y))


def colour(segment: Segment) -> str | None:
    style = segment.style
    return style.color.get_truecolor().hex if style and style.color else None


def find(view: LogView, text: str) -> int:
    """Absolute position of the newest entry containing ``text``."""
    buf = view.buffer
    for i in range(len(buf.entries) - 1, -1, -1):
        if text in buf.entries[i].text:
            return buf.base + i
    raise AssertionError(f"no line with {text!r}")


async def test_lines_from_four_ranks_appear_with_tags_and_colours(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        view = log_view(app)
        buf = view.buffer
        pal = app.palette
        # Every line the LogBook holds, in arrival order, tagged by rank: ranks 0-1 from the
        # log source, rank 2 through its pid, rank 3 through its stdout path.
        assert len(buf.entries) == len(app.monitor.tracker.logbook.lines())
        assert {e.tag for e in buf.entries} == {"r0", "r1", "r2", "r3", "driver"}
        assert buf.ranks == {0, 1, 2, 3}
        # Follow is on: the newest line is on screen, at the bottom.
        assert view.lines.follow and view.lines.scroll_y == view.lines.max_scroll_y
        # The traceback's exception line: r3 tag in rank 3's colour, the text in the error
        # colour. A warning line is painted warn.
        segments = drawn_line(view, find(view, "RuntimeError: NCCL"))
        assert segments[0].text.strip() == "r3"
        assert colour(segments[0]) == load_theme("dark").palette.ranks[3]
        assert segments[1].text.startswith("RuntimeError") and colour(segments[1]) == pal.bad
        await pilot.press("l")
        await pilot.press("x")  # errors only (the warning is above the screen otherwise)
        await pilot.press("x")
        view.lines.jump(find(view, "WARNING: retrying"))
        segments = drawn_line(view, find(view, "WARNING: retrying"))
        assert colour(segments[1]) == pal.warn
        # A line wider than the pane ends in an ellipsis; scrolled right, the over-long line
        # shows it was cut.
        cut = find(view, "sample response")
        view.lines.jump(cut)
        assert drawn_line(view, cut)[-1].text == "…"
        view.lines.action_sideways(1000)
        assert view.lines.scroll_x > 0
        assert " [cut]" in [segment.text for segment in drawn_line(view, cut)]
        assert drawn_line(view, cut)[0].text.strip() == "r1"  # the tag stays put
        # The status line carries the job's progress (the ETA of rank 3, furthest behind); the
        # title only what rarely changes, since a new title repaints the whole pane.
        logs = app.main_screen.logs
        assert logs.border_title == "Logs (5 files)"
        assert logs.log_view.progress == "step 7-8/100 · eta 6m53s"
        assert logs.log_view.status.render().plain.startswith("step 7-8/100 · eta 6m53s")


async def test_colourblind_theme_uses_its_safe_rank_colours(replay_app):
    app = replay_app("with_logs", theme="colorblind")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        view = log_view(app)
        segments = drawn_line(view, find(view, "RuntimeError: NCCL"))
        assert colour(segments[0]) == load_theme("colorblind").palette.ranks[3]
        assert colour(segments[1]) == load_theme("colorblind").palette.bad


async def test_follow_off_keeps_the_view_while_lines_arrive(replay_app):
    app = replay_app("with_logs", paused=True)
    player = app.bundle.player
    async with app.run_test(size=(200, 60)) as pilot:
        for _ in range(25):
            await pilot.press("n")
        view = log_view(app)
        lines = view.lines
        await pilot.press("l")
        assert app.screen.focused is lines
        assert lines.follow and lines.scroll_y == lines.max_scroll_y > 0
        await pilot.press("f")
        assert not lines.follow
        await pilot.press("up", "up", "up")
        top, scroll, rows = lines.top_position(), lines.scroll_y, len(view.buffer.shown)
        # With the log focused and no search, n is still the replay's step.
        await pilot.press("n", "n", "n", "n", "n")
        assert player.position == 30.0
        assert len(view.buffer.shown) > rows  # new lines came in below
        assert lines.scroll_y == scroll and lines.top_position() == top
        assert "follow off" in plain(view.status.content)
        await pilot.press("f")  # follow again: straight to the newest line
        assert lines.follow and lines.scroll_y == lines.max_scroll_y
        await pilot.press("n")
        assert lines.scroll_y == lines.max_scroll_y
        # Reading back (a move up) turns follow off by itself.
        await pilot.press("pageup")
        assert not lines.follow


async def test_search_highlights_and_jumps(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "slash")
        view = log_view(app)
        assert app.screen.focused is view.search_box
        await pilot.press(*"step:5", "enter")
        buf = view.buffer
        assert app.screen.focused is view.lines and not view.search_box.display
        assert len(buf.matches) == 4  # one per rank
        # The first hit is the newest one: logs are read from their end.
        assert view.lines.cursor == buf.matches[-1]
        assert not view.lines.follow
        assert "/step:5 4 of 4" in plain(view.status.content)
        segments = drawn_line(view, view.lines.cursor)
        hit = next(s for s in segments if s.text == "step:5")
        after = segments[segments.index(hit) + 1]
        assert hit.style.bgcolor is not None and hit.style.bgcolor != after.style.bgcolor
        await pilot.press("N")
        assert view.lines.cursor == buf.matches[-2]
        await pilot.press("N", "N")
        assert view.lines.cursor == buf.matches[0]
        await pilot.press("N")  # no earlier match: the cursor stays
        assert view.lines.cursor == buf.matches[0]
        await pilot.press("n")
        assert view.lines.cursor == buf.matches[1]
        assert "2 of 4" in plain(view.status.content)
        # Smart case: an upper-case letter makes the search exact.
        await pilot.press("slash", *"Traceback", "enter")
        assert len(buf.matches) == 1
        await pilot.press("slash", *"TRACEBACK", "enter")
        assert buf.matches == []
        assert "no match" in plain(view.status.content)
        # Escape clears the search; n is the replay's again.
        await pilot.press("escape")
        assert buf.query == "" and app.check_action("step", ())
        assert view.check_action("find", (1,)) is False


async def test_errors_only_filter(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "x")
        view = log_view(app)
        texts = shown_texts(view)
        # The OOM line and rank 3's whole traceback (its frames have no level of their own: the
        # parsers' event says where the traceback starts and ends).
        assert texts == [
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has "
            "a total capacity of 79.10 GiB of which 1.05 GiB is free.",
            *(t for t, _ in TRACEBACK)]
        assert "errors only" in plain(view.status.content)
        await pilot.press("x")
        assert len(view.buffer.shown) == len(view.buffer.entries)


async def test_rank_filter_cycles_through_the_ranks(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "greater_than_sign")
        view = log_view(app)
        buf = view.buffer
        assert buf.rank_filter == 0
        assert {buf.row(i)[1].rank for i in range(len(buf.shown))} == {0}
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        assert buf.rank_filter == 3
        assert {buf.row(i)[1].tag for i in range(len(buf.shown))} == {"r3"}
        logs = app.main_screen.logs
        state = log_index(app.latest.snapshot).for_rank(3)
        assert logs.border_title == "Logs (5 files) rank 3"
        assert logs.log_view.progress == step_summary(state)
        assert step_summary(state).startswith("step 7/100 · 4.")
        assert step_summary(state).endswith("/step · eta 6m53s")
        await pilot.press("greater_than_sign")  # past the last rank: all ranks again
        assert buf.rank_filter is None and len(buf.shown) == len(buf.entries)
        await pilot.press("less_than_sign")
        assert buf.rank_filter == 3
        # Filters combine: rank 3's errors are its traceback.
        await pilot.press("x")
        assert shown_texts(view) == [t for t, _ in TRACEBACK]


async def test_next_and_previous_error(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "comma")
        view = log_view(app)
        buf = view.buffer
        # Backwards from the bottom: the traceback is one stop, at its first line.
        assert buf.at(view.lines.cursor).text == "Traceback (most recent call last):"
        await pilot.press("comma")
        assert buf.at(view.lines.cursor).text.startswith("torch.OutOfMemoryError")
        await pilot.press("comma")  # nothing earlier: stays
        assert buf.at(view.lines.cursor).text.startswith("torch.OutOfMemoryError")
        await pilot.press("full_stop")
        assert buf.at(view.lines.cursor).text == "Traceback (most recent call last):"
        await pilot.press("full_stop")  # the exception line belongs to the same traceback
        assert buf.at(view.lines.cursor).text == "Traceback (most recent call last):"
        assert not view.lines.follow


async def test_open_a_rank_log_full_screen_and_close(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "less_than_sign", "o")
        screen = app.screen
        assert isinstance(screen, LogFileScreen) and screen.rank == 3
        state = log_index(app.latest.snapshot).for_rank(3)
        entries = screen.log_view.buffer.entries
        assert [e.line_no for e in entries] == list(range(1, state.lines_seen + 1))
        title = plain(screen.title_bar.content)
        assert "rank 3 log" in title and f"{LOG_DIR}/rank3.log" in title
        assert "step 7/100" in title
        assert app.screen.focused is screen.log_view.lines
        # The same keys: the previous error is the traceback.
        await pilot.press("comma")
        assert screen.log_view.buffer.at(screen.log_view.lines.cursor).text.startswith(
            "Traceback")
        await pilot.press("o", "less_than_sign")  # one rank here: nothing to open or cycle
        assert app.screen is screen and screen.log_view.buffer.rank_filter is None
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        # From the rank table: o opens the highlighted rank's log (rank 2: matched by pid).
        app.main_screen.ranks.table.focus()
        await pilot.press("down", "down", "o")
        assert isinstance(app.screen, LogFileScreen) and app.screen.rank == 2
        assert {e.path for e in app.screen.log_view.buffer.entries} == {f"{LOG_DIR}/rank2.log"}
        await pilot.press("escape")
        # Unfiltered, o opens the rank of the line at the cursor (a search hit here).
        await pilot.press("l", "greater_than_sign", "slash", *"grad_norm", "enter", "o")
        assert isinstance(app.screen, LogFileScreen) and app.screen.rank == 1


async def test_rank_log_screen_takes_new_lines(replay_app):
    app = replay_app("with_logs", paused=True)
    async with app.run_test(size=(200, 60)) as pilot:
        for _ in range(10):
            await pilot.press("n")
        app.open_log(0)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, LogFileScreen)
        before = len(screen.log_view.buffer.entries)
        await pilot.press("n", "n", "n", "n")
        assert len(screen.log_view.buffer.entries) > before
        assert {e.rank for e in screen.log_view.buffer.entries} == {0}


async def test_rank_table_last_step_age_step_time_and_eta(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        ranks = app.main_screen.ranks.table
        dim = app.palette.dim
        # Rank 0 logged step 8 at 40.2 s; the replay ends at 60 s.
        assert cell(ranks, "p4100", "step").text == "8 · 20s"
        # Rank 2's log is matched through its pid, rank 3's through its stdout path; rank 3
        # has departed and keeps its last step, dimmed.
        assert cell(ranks, "p4102", "step").text == "8 · 20s"
        assert drawn(ranks, "d4103", "step") == ("7 · 24s", dim)
        # Step time: one bar per step interval, the slow step 6 the tallest; then the last.
        trend = cell(ranks, "p4100", "step_time").text
        assert trend.split() == ["▅▄▄▅▇▄▅", "4.6s"]
        # ETA: 92 steps left at the median step time (4.6 s).
        state = log_index(app.latest.snapshot).for_rank(0)
        assert median(step_times(state.recent_steps)) == pytest.approx(4.6)
        assert cell(ranks, "p4100", "eta").text == duration(92 * 4.6) == "7m03s"


def test_eta_only_where_the_total_is_known():
    steps = tuple(StepRecord(s, s, T0 + 5 * s, time=T0 + 5 * s) for s in range(1, 5))
    known = LogFileState("a.log", last_step=4, total_steps=10, recent_steps=steps)
    assert eta(known) == 30.0
    assert eta(LogFileState("a.log", last_step=4, recent_steps=steps)) is None
    assert eta(LogFileState("a.log", last_step=10, total_steps=10, recent_steps=steps)) == 0
    # A restart (the step going back) starts the step times over.
    restarted = steps + (StepRecord(1, 9, T0 + 100, time=T0 + 100),
                         StepRecord(3, 10, T0 + 104, time=T0 + 104))
    assert step_times(restarted) == [2.0]


async def test_eta_is_blank_without_a_total(replay_app, tmp_path):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        table = app.main_screen.ranks.table
        key = next(k for k in table.row_keys if cell(table, k, "rank").text == "1")
        assert cell(table, key, "eta").text == "6m35s"
        # the same view, its logs not knowing the total, shown by the pane
        from rltui.model import replace
        view = app.latest
        logs = tuple(replace(log, total_steps=None) for log in view.snapshot.logs)
        app.main_screen.ranks.show(replace(view, snapshot=replace(view.snapshot, logs=logs)))
        assert cell(table, key, "eta").text == "-" and cell(table, key, "step").text == "8 · 20s"


async def test_no_log_files_says_how_logs_are_found(replay_app):
    app = replay_app("logs_waiting")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        logs = app.main_screen.logs
        text = str(logs.message.content)
        assert text.startswith(HOW_LOGS_ARE_FOUND)
        assert f"--log {LOG_DIR}/*.log: no match yet, waiting for it to appear." in text
        assert logs.message.display and not logs.log_view.display
        assert cell(app.main_screen.ranks.table, "p4100", "step").text == "-"


async def test_a_glob_still_waiting_beside_files(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        logs = app.main_screen.logs
        assert str(logs.message.content) == (f"--log {WAITING_GLOB}: no match yet, waiting for "
                                             "it to appear.")
        assert logs.log_view.display


async def test_short_terminal_l_zooms_the_log_pane_and_escape_returns(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        screen = app.main_screen
        assert not screen.logs.display
        await pilot.press("l")
        assert screen.maximized is screen.logs and screen.logs.display
        assert screen.focused is screen.logs.log_view.lines
        await pilot.press("escape")
        assert screen.maximized is None
        await pilot.pause()
        assert screen.focused is screen.ranks.table  # not left on the hidden pane


async def test_palette_log_commands(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        commands = {title: run for title, run, _ in palette_commands(app)}
        for title in ("Logs: Toggle follow", "Logs: Errors only", "Logs: Search",
                      "Logs: Filter rank 0", "Logs: Filter rank 3", "Logs: Open rank 3 log",
                      "Logs: All ranks", "Logs: Next error", "Logs: Previous error"):
            assert title in commands, title
        view = log_view(app)
        commands["Logs: Filter rank 2"]()
        await pilot.pause()
        assert view.buffer.rank_filter == 2
        # On a short terminal a log command brings the hidden pane up.
        assert app.main_screen.maximized is app.main_screen.logs
        commands["Logs: Toggle follow"]()
        assert not view.follow
        commands["Logs: Open rank 3 log"]()
        await pilot.pause()
        assert isinstance(app.screen, LogFileScreen) and app.screen.rank == 3
        # Over the full-screen log, Logs: commands act on it.
        commands = {title: run for title, run, _ in palette_commands(app)}
        commands["Logs: Errors only"]()
        assert app.screen.log_view.buffer.errors_only and not view.buffer.errors_only


async def test_help_lists_the_log_keys(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = plain(app.screen.content)
        for words in ("Follow (logs)", "Search (logs)", "Next match (logs)", "Errors (logs)",
                      "Next error (logs)", "Next rank (logs)", "Open log (logs)",
                      "Open log (ranks)", "Logs"):
            assert words in text, words


def test_bindings_have_ids_descriptions_and_no_terminal_unsafe_keys():
    from rltui.ui.app import RltuiApp
    from rltui.ui.screens.log_file import LogFileScreen as Screen
    from rltui.ui.widgets.rank_table import RankPane

    bindings = [*RltuiApp.BINDINGS, *LogView.BINDINGS, *RankPane.BINDINGS, *Screen.BINDINGS]
    keys = [k.strip() for b in bindings for k in b.key.split(",")]
    assert not {"ctrl+h", "ctrl+m", "ctrl+i"} & set(keys)
    assert all(b.id and b.description for b in bindings)
    app_keys = {k.strip() for b in RltuiApp.BINDINGS for k in b.key.split(",")}
    # Log keys that would shadow an app key: only n, and only during a search.
    assert {k.strip() for b in LogView.BINDINGS for k in b.key.split(",")} & app_keys == {"n"}


async def test_a_match_off_to_the_right_scrolls_into_view(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e", "l", "slash", *"timing_s/step:8", "enter")
        view = log_view(app)
        lines = view.lines
        assert len(view.buffer.matches) == 1 and lines.scroll_x > 0
        hit = next(s for s in drawn_line(view, lines.cursor) if s.text == "timing_s/step:8")
        assert hit.style.bgcolor is not None
        await pilot.press("comma")  # an error jump shows the line from its start
        assert lines.scroll_x == 0


def test_queued_log_readings_are_never_coalesced():
    from rltui.model import OK, Reading
    from rltui.ui.messages import ReadingArrived

    older = ReadingArrived(Reading("logs", T0, OK, LogPoll()))
    newer = ReadingArrived(Reading("logs", T0 + 1, OK, LogPoll()))
    assert not newer.can_replace(older)  # each carries only its own new lines
    gpus = ReadingArrived(Reading("gpus", T0, OK))
    assert ReadingArrived(Reading("gpus", T0 + 1, OK)).can_replace(gpus)


async def test_zoom_on_the_log_pane(replay_app):
    app = replay_app("with_logs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "l", "z")
        assert app.main_screen.maximized is app.main_screen.logs
        await pilot.press("z")
        assert app.main_screen.maximized is None
        assert app.main_screen.focused is app.main_screen.logs.log_view.lines  # still shown


async def test_a_following_live_pane_takes_new_lines_at_most_every_two_seconds():
    """Following repaints the whole pane, so live updates are paced; errors and replay are not."""
    from types import SimpleNamespace

    from textual.app import App

    from rltui.logbook import TaggedLine
    from rltui.model import LogLine, NodeSnapshot
    from rltui.ui.widgets.log_pane import FOLLOW_REPAINT_S, LogPane

    plain = [TaggedLine(1, "rank0.log", 0, LogLine(1, "step:1 - loss:0.1"))]
    error = [TaggedLine(2, "rank0.log", 0, LogLine(2, "RuntimeError: boom", level="error"))]

    def view(t, mode="live"):
        return SimpleNamespace(mode=mode, snapshot=NodeSnapshot(timestamp=t))

    async with App().run_test():
        pane = LogPane()
        assert not pane._wait(view(100.0), plain)  # nothing shown yet: take it
        pane._fed_at = 100.0
        assert pane._wait(view(101.0), plain)
        assert not pane._wait(view(100.0 + FOLLOW_REPAINT_S), plain)
        assert not pane._wait(view(101.0), error)
        assert not pane._wait(view(101.0, mode="replay"), plain)
        assert not pane._wait(view(101.0), [])
