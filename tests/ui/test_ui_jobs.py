"""Several jobs on one node in the app: the header names them worst first, ``j`` (and the
palette) choose the job shown, and every pane follows: the rank table, the symptoms, the GPUs.
The two-jobs replay: train_ppo (ranks 0-3, rank 2 exited) beside eval (ranks 0-3, healthy)."""

from __future__ import annotations

from rltui.ui.screens.jobs import JobPicker
from tests.ui.helpers import header_text


async def test_the_header_names_both_jobs_worst_first(replay_app):
    app = replay_app("two_jobs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        text = header_text(app)
        assert "2 jobs: train_ppo-4000 (3/4 live) CRITICAL, eval-5000 (4) ok" in text
        # both jobs' ranks 0-3 in one table, each row its own process; one symptom, the
        # crashed job's, with no mix of the two jobs' GPUs
        assert app.main_screen.ranks.table.row_count == 10  # 2 launchers, 7 ranks, 1 departed
        (symptom,) = app.latest.diagnosis.symptoms
        assert symptom.id == "rank-exited" and symptom.job == "train_ppo-4000"


async def test_j_shows_one_job_and_every_pane_follows(replay_app):
    app = replay_app("two_jobs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "j")
        await pilot.pause()
        assert isinstance(app.screen, JobPicker)
        await pilot.press("down", "down", "enter")  # All jobs, train_ppo, eval
        await pilot.pause()
        view = app.latest
        assert view.focus == "eval-5000"
        assert {p.pid for p in view.snapshot.procs} == {5000, 5100, 5101, 5102, 5103}
        assert view.diagnosis.verdict == "healthy" and not view.diagnosis.symptoms
        assert {g.index for g in view.snapshot.gpus} == {4, 5, 6, 7}
        assert app.main_screen.ranks.table.row_count == 5
        assert "job eval-5000 (1 of 2, j: all)" in header_text(app)
        # the choice holds while the replay moves on, and "All jobs" brings both back
        await pilot.press("j")
        await pilot.pause()
        await pilot.press("up", "up", "enter")
        await pilot.pause()
        assert app.latest.focus is None and app.main_screen.ranks.table.row_count == 10


async def test_escape_keeps_the_job_shown(replay_app):
    app = replay_app("two_jobs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "j")
        await pilot.pause()
        assert isinstance(app.screen, JobPicker)
        await pilot.press("escape")
        await pilot.pause()
        assert app.latest.focus is None and not isinstance(app.screen, JobPicker)


async def test_one_job_has_nothing_to_choose(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e", "j")
        await pilot.pause()
        assert not isinstance(app.screen, JobPicker)
        assert "jobs:" not in header_text(app)
        # with one job, j is the tables' vim "down" as before
        table = app.main_screen.ranks.table
        table.focus()
        await pilot.pause()
        before = table.cursor_row
        await pilot.press("j")
        await pilot.pause()
        assert table.cursor_row == before + 1


async def test_the_palette_offers_each_job(replay_app):
    from rltui.ui.commands import palette_commands
    app = replay_app("two_jobs")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        titles = [t for t, _, _ in palette_commands(app)]
        assert {"Jobs: Choose", "Jobs: Show all", "Jobs: Show train_ppo-4000",
                "Jobs: Show eval-5000"} <= set(titles)
        run = dict((t, f) for t, f, _ in palette_commands(app))
        run["Jobs: Show train_ppo-4000"]()
        await pilot.pause()
        assert app.latest.focus == "train_ppo-4000"
        assert [s.id for s in app.latest.diagnosis.symptoms] == ["rank-exited"]
