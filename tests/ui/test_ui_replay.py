"""Replay mode: the player drives the monitor, keys move it, the panes show scenario time."""

from __future__ import annotations

from rltui.ui.widgets.cells import BLOCKS
from tests.ui.helpers import FakeClock, cell, drawn, gpu_message, header_text, rank_message


async def test_end_shows_rank_exited_and_idle_vs_busy(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        view = app.latest
        assert view.replay.finished and view.replay.position == view.replay.duration
        assert [s.id for s in view.diagnosis.symptoms] == ["rank-exited", "gpu-idle-vs-busy"]
        screen = app.main_screen
        ranks = screen.ranks.table
        assert ranks.row_count == 8
        # The departed rank keeps its place among the ranks, dimmed, with its GPU and role.
        assert ranks.get_row_index("d4103") == 3
        assert drawn(ranks, "d4103", "state") == ("exited", app.palette.dim)
        assert cell(ranks, "d4103", "gpu").text == "3"
        assert cell(ranks, "d4103", "role").text == "trainer"
        assert drawn(ranks, "p4100", "gpu_util") == ("0%", app.palette.idle)
        assert screen.ranks.border_title == "Ranks (7 running, 1 departed)"
        # Symptoms: by incident, the root cause first, severity as a word.
        options = screen.symptoms.options
        assert options.option_count == 2
        assert str(options.get_option_at_index(0).prompt).startswith("CRIT rank 3 exited")
        # the idle GPUs are the waiting ranks': a consequence, under the rank that exited
        assert str(options.get_option_at_index(1).prompt).startswith(" └ WARN 3 of the job's GPUs")
        assert "CRITICAL (2)" in header_text(app)


async def test_header_ages_are_scenario_time(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        text = header_text(app)
        # The last gpus reading is at the end, the last process scan half a second before.
        assert "gpus ok 0.0s" in text and "procs ok 0.5s" in text
        assert "replay 90.0/90.0s x1 end" in text
        assert "gpu-node-07" in text and "torchrun --nproc-per-node 8" in text


async def test_step_speed_and_pause_keys(replay_app):
    app = replay_app("rank_exited", paused=True)
    player = app.bundle.player
    async with app.run_test(size=(200, 60)) as pilot:
        assert player.position == 0.0 and "PAUSED" in header_text(app)
        await pilot.press("n")
        assert player.position == 1.0
        assert "replay 1.0/90.0s x1 PAUSED" in header_text(app)
        await pilot.press("plus")
        assert player.speed == 2.0 and "x2" in header_text(app)
        await pilot.press("minus", "minus")
        assert player.speed == 0.5 and "x0.5" in header_text(app)
        await pilot.press("space")
        assert not player.paused and "PAUSED" not in header_text(app)
        await pilot.press("p")
        assert player.paused


async def test_pause_stops_playback_and_resume_continues(replay_app):
    app = replay_app("rank_exited")
    clock = FakeClock()
    app.monotonic = clock
    player = app.bundle.player
    async with app.run_test(size=(200, 60)) as pilot:
        clock.advance(10.0)
        app.tick()
        assert player.position == 10.0
        ingested = app.ingested
        assert ingested > 0
        await pilot.press("p")
        clock.advance(10.0)
        app.tick()
        assert player.position == 10.0 and app.ingested == ingested
        await pilot.press("p")
        clock.advance(5.0)
        app.tick()
        assert player.position == 15.0 and app.ingested > ingested


async def test_every_evaluation_sets_the_event(replay_app):
    app = replay_app("rank_exited", paused=True)
    async with app.run_test(size=(80, 24)) as pilot:
        before = app.evaluations
        waiter = app.next_evaluation()
        await pilot.press("n")
        view = await waiter
        assert app.evaluations == before + 1
        assert view is app.latest and view.replay.position == 1.0


async def test_nvml_unavailable_says_so_and_ranks_still_show(replay_app):
    app = replay_app("nvml_unavailable")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        message = gpu_message(app)
        assert message.startswith("No NVIDIA driver or NVML library found: GPU data unavailable")
        assert "Install the NVIDIA driver" in message
        assert not app.main_screen.gpus.table.display
        assert app.main_screen.ranks.table.row_count == 4
        assert "gpus unavailable" in header_text(app)


async def test_container_pid_namespace_and_partial_rows(replay_app):
    app = replay_app("container_pidns")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        assert "another PID namespace" in gpu_message(app)
        assert app.main_screen.gpus.table.display
        ranks = app.main_screen.ranks.table
        assert cell(ranks, "p42", "pid").text == "42*"
        assert "only partly read: environ unreadable" in rank_message(app)


async def test_sparklines_follow_the_readings(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        gpus = app.main_screen.gpus.table
        # Long after the exit: waiting GPUs draw the lowest block, spinning ones the highest.
        assert set(cell(gpus, "gpu0", "util_spark").text) == {BLOCKS[0]}
        assert set(cell(gpus, "gpu5", "util_spark").text) == {BLOCKS[-1]}
