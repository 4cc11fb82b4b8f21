"""The timeline screen (``a``, and "View: Timeline" in the palette): per rank, its steps over
time and when it stopped, who stopped first first; the same chart as the incident report's."""

from __future__ import annotations

from textual.command import CommandList

from rltui.ui.commands import palette_commands
from rltui.ui.screens import MainScreen
from rltui.ui.screens.timeline import TimelineScreen
from tests.ui.helpers import until_idle


def _rows(text: str) -> list[str]:
    """The chart's rank lines: ``rank state ...``, in the order drawn."""
    return [line.split()[0] for line in text.splitlines()
            if line.strip()[:1].isdigit() and "|" in line]


async def test_the_timeline_key_shows_who_stopped_first(replay_app):
    app = replay_app("with_logs_stalled")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await pilot.press("a")
        assert isinstance(app.screen, TimelineScreen)
        text = app.screen.text
        assert text.startswith("Rank 3 of job ") and "stopped first" in text
        assert "it left the job" in text
        # rank 3 (exited at its last step) first, then the ranks that waited for it
        assert _rows(text)[0] == "3" and sorted(_rows(text)[1:]) == ["0", "1", "2"]
        lines = {line.split()[0]: line for line in text.splitlines() if "|" in line}
        assert " exited " in lines["3"] and " exit " in lines["3"]
        for rank in "012":
            assert " stopped " in lines[rank] and " log " in lines[rank]
            assert "X" in lines[rank]  # the mark where it stopped
        # each bar sits inside the same borders (one column per time slice)
        bars = [line[line.index("|"):] for line in lines.values()]
        assert len({len(b) for b in bars}) == 1
        await pilot.press("a")  # again: drawn anew, not stacked twice
        assert isinstance(app.screen, TimelineScreen)
        assert sum(isinstance(s, TimelineScreen) for s in app.screen_stack) == 1
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_ranks_that_stopped_stepping_when_a_peer_left_are_waiting_not_advancing(
        replay_app):
    """with_logs at 60 s: rank 3 left; ranks 0-2 logged no step since (16 s, several of their
    step intervals), under the steps-stalled limit: they wait for it, listed after it."""
    app = replay_app("with_logs")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e", "a")
        text = app.screen.text
        assert _rows(text) == ["3", "0", "1", "2"]
        for line in text.splitlines():
            if line.split()[:1] in (["0"], ["1"], ["2"]) and "|" in line:
                assert " stopped " in line and " log " in line and not line.rstrip().endswith(">|")


async def test_the_palette_opens_the_timeline(replay_app):
    app = replay_app("with_logs_stalled")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        assert "View: Timeline" in [t for t, _, _ in palette_commands(app)]
        await pilot.press("ctrl+p")
        await pilot.press(*"timeline")
        commands = app.screen.query_one(CommandList)  # the palette searches asynchronously
        await until_idle(pilot, lambda: commands.option_count and "Timeline" in str(
            commands.get_option_at_index(0).prompt), "the palette offers the timeline")
        await pilot.press("enter")
        await until_idle(pilot, lambda: isinstance(app.screen, TimelineScreen),
                         "the timeline opens")
        assert "Rank 3 of job" in app.screen.text


def test_timeline_snapshot(snap_compare, replay_app):
    """``with_logs`` played to 120 s, then ``a``, at 120x40. Must be visible: the title
    "Timeline: who stopped first, as of 22:15:20 · python -m verl.trainer.main_ppo"; the line
    "Rank 3 of job trainer-4100 stopped first, at 22:13:55: it left the job."; the axis from
    22:13:26 to 22:15:20 over the bars; rank 3 first, "exited", last step 7, stopped 22:13:55 by
    "exit", its bar of "#" steps and "=" ending in "X" and dots after; then ranks 0, 1, 2
    "stopped", last step 8, at 22:14:00 (when rank 3 left: none of them logged a step since)
    by "log", their "X" a few columns right of rank 3's; the legend line under them; the
    footer with "escape Close"."""
    assert snap_compare(replay_app("with_logs_stalled"), press=["e", "a"],
                        terminal_size=(120, 40))


async def test_two_jobs_at_80_columns_fit_the_chart_by_cutting_the_job_ids(replay_app):
    """80 columns, two jobs: the job column would push the bars off the screen; the ids are
    cut at the front (their -PID kept) so every chart line fits, and wide they are whole."""
    from rltui.ui.screens.timeline import CHROME, timeline_text
    app = replay_app("two_jobs")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        narrow = timeline_text(app.latest, 80).splitlines()
        wide = timeline_text(app.latest, 200).splitlines()
    bars = [line for line in narrow if line.endswith("|")]
    assert bars and max(len(line) for line in bars) <= 80 - CHROME
    assert any(" …po-4000 " in line for line in bars) and any(" …al-5000 " in line
                                                              for line in bars)
    assert any(" train_ppo-4000 " in line for line in wide)
