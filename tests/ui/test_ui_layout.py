"""The main screen's layout: folded tables at 80x24 with symptoms, the symptoms' floor of rows
when tall, zoom filling the screen (rltui.ui.screens.main, rltui.tablesummary)."""

from __future__ import annotations

import pytest


async def _end(pilot) -> None:
    await pilot.press("e")
    await pilot.pause()
    await pilot.pause()


async def test_short_terminal_folds_the_tables_and_the_incident_takes_the_room(replay_app):
    app = replay_app("ranks64")
    async with app.run_test(size=(80, 24)) as pilot:
        await _end(pilot)
        main = app.main_screen
        assert main.gpus.folded and main.ranks.folded
        assert str(main.gpus.summary.render()) == "8 GPUs: 6 busy, 2 idle, 61-78 GiB"
        assert str(main.ranks.summary.render()) == \
            "64 ranks: 48 running, 15 sleeping, 1 exited"
        assert main.gpus.region.height == 2 and main.ranks.region.height == 2
        assert main.symptoms.region.height >= 15
        assert main.symptoms.evidence_box.region.height >= 8  # the evidence has its lines
        assert main.symptoms.options in main.focused.ancestors_with_self


async def test_without_symptoms_the_tables_stay(replay_app):
    app = replay_app("nvml_unavailable")
    async with app.run_test(size=(80, 24)) as pilot:
        await _end(pilot)
        assert not app.main_screen.ranks.folded


async def test_zoom_on_a_folded_pane_shows_its_table_full_screen_and_folds_back(replay_app):
    app = replay_app("ranks16")
    async with app.run_test(size=(80, 24)) as pilot:
        await _end(pilot)
        main = app.main_screen
        main.ranks.summary.focus()
        await pilot.press("z")
        await pilot.pause()
        assert main.maximized is main.ranks and not main.ranks.folded
        assert main.ranks.region.height == 23 and main.ranks.table.region.height >= 20
        await pilot.press("z")
        await pilot.pause()
        assert main.ranks.folded and main.focused is main.ranks.summary


@pytest.mark.parametrize("pane", ["gpus", "ranks"])
async def test_zoom_fills_the_screen_on_a_tall_terminal(replay_app, pane):
    app = replay_app("ranks16")
    async with app.run_test(size=(120, 40)) as pilot:
        await _end(pilot)
        main = app.main_screen
        getattr(main, pane).table.focus()
        await pilot.press("z")
        await pilot.pause()
        zoomed = getattr(main, pane)
        assert main.maximized is zoomed
        assert zoomed.region.height == 39 and zoomed.region.width == 120


async def test_tall_terminal_keeps_rows_for_the_symptoms(replay_app):
    app = replay_app("ranks16")
    async with app.run_test(size=(120, 40)) as pilot:
        await _end(pilot)
        main = app.main_screen
        assert not main.ranks.folded
        assert main.ranks.region.height <= 12  # it scrolls: 16 ranks, 11 rows
        assert main.symptoms.region.height >= 14
        assert main.symptoms.region.bottom <= 39  # on screen, above the footer


async def test_a_folded_pane_with_no_table_says_its_message_once(replay_app):
    """No NVML at 80x24: the GPU pane has no table, only its message. Folded, the summary line
    carries the message (cut to one line) and the three-line message is not shown beside it;
    unfolded, the message is back."""
    app = replay_app("nvml_unavailable")
    async with app.run_test(size=(80, 24)) as pilot:
        await _end(pilot)
        gpus = app.main_screen.gpus
        assert not gpus.table_wanted and gpus.message.display
        gpus.fold(True)
        await pilot.pause()
        assert not gpus.message.display
        assert str(gpus.summary.render()).startswith("No NVIDIA driver")
        gpus.fold(False)
        await pilot.pause()
        assert gpus.message.display


async def test_with_two_jobs_the_folded_rank_line_counts_each_job_apart(replay_app):
    """Two jobs on the node at 80x24: the folded rank line says each job's ranks under its
    name, the job with the departed rank first, not ten ranks of one job."""
    app = replay_app("two_jobs")
    async with app.run_test(size=(80, 24)) as pilot:
        await _end(pilot)
        ranks = app.main_screen.ranks
        assert ranks.folded
        assert ranks.summary_text() == ("train_ppo 5 ranks: 3 running, 1 exited, 1 sleeping · "
                                        "eval 5 ranks: 4 running, 1 sleeping")
