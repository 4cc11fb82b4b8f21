"""Live mode with fake sources: thread workers, pause, refresh, failures, teardown."""

from __future__ import annotations

import threading

import pytest
from textual.worker import WorkerFailed

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.ui import build_app
from rltui.ui.drivers.live import POLL_GROUP
from tests.fakes.scenarios import NO_NVML
from tests.fakes.sources import gpus_ok, gpus_unavailable, live_bundle, procs_ok
from tests.ui.helpers import gpu_message, header_text, record_intervals, until_idle

# Fast cadences keep the tests short; a loaded test machine may be late by a few intervals, so
# staleness is tested on its own (test_ui_units) rather than here.
FAST = Settings(cadence=Cadence(gpus=0.05, procs=0.05, ui=0.1),
                thresholds=Thresholds(stale_after_intervals=1000.0))


def make(tmp_path, *sources, closers=None):
    bundle = live_bundle(*sources, interval=0.05, closers=closers)
    return build_app(bundle, FAST, config_path=tmp_path / "config.yaml")


async def settle(app, pilot) -> None:
    """Let in-flight polls finish and their messages be handled."""
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_first_evaluation_shows_every_source(tmp_path):
    gpus, procs = gpus_ok(4), procs_ok(4)
    app = make(tmp_path, gpus, procs)
    async with app.run_test(size=(200, 60)):
        view = await app.wait_for_evaluation(after=0)
        names = {s.name for s in view.snapshot.sources}
        assert names == {"gpus", "procs"}
        assert app.main_screen.gpus.table.row_count == 4
        assert app.main_screen.ranks.table.row_count == 4
        assert "gpus ok" in header_text(app) and "procs ok" in header_text(app)


async def test_pause_stops_polling_and_ingesting_resume_continues(tmp_path):
    gpus, procs = gpus_ok(), procs_ok()
    app = make(tmp_path, gpus, procs)
    timers = record_intervals(app)
    async with app.run_test() as pilot:
        await app.wait_for_evaluation(after=0)
        assert set(timers) == {"evaluate", "poll gpus", "poll procs"}
        await pilot.press("p")
        await settle(app, pilot)
        polls, ingested, evaluations = (gpus.polls, procs.polls), app.ingested, app.evaluations
        assert "PAUSED" in header_text(app)
        for _ in range(3):  # several poll and UI intervals pass: every timer fires, by hand
            for fire in timers.values():
                fire()
        await settle(app, pilot)
        assert (gpus.polls, procs.polls) == polls
        assert app.ingested == ingested and app.evaluations == evaluations
        await pilot.press("space")
        assert "PAUSED" not in header_text(app)
        await app.next_evaluation()
        await app.next_evaluation()
        assert gpus.polls > polls[0] and procs.polls > polls[1]
        assert app.ingested > ingested


async def test_refresh_polls_every_source_now(tmp_path):
    gpus, procs = gpus_ok(), procs_ok()
    slow = Settings(cadence=Cadence(ui=60.0))
    bundle = live_bundle(gpus, procs, interval=60.0)  # timers would not poll again for a minute
    app = build_app(bundle, slow, config_path=tmp_path / "config.yaml")
    async with app.run_test() as pilot:
        await app.wait_for_evaluation(after=0)
        await settle(app, pilot)
        assert (gpus.polls, procs.polls) == (1, 1)
        waiter = app.next_evaluation()
        await pilot.press("r")
        await waiter
        assert (gpus.polls, procs.polls) == (2, 2)


async def test_a_source_is_never_polled_twice_at_once(tmp_path):
    gpus = gpus_ok()
    gpus.gate = threading.Event()
    app = make(tmp_path, gpus)
    timers = record_intervals(app)
    try:
        async with app.run_test() as pilot:
            await until_idle(pilot, lambda: gpus.polls == 1, "the first poll")
            for _ in range(3):  # its interval passes, again and again, while the poll hangs
                timers["poll gpus"]()
            # the hung poll is still the one running worker (a second would be there at once)
            assert [w.name for w in app.workers if w.group == POLL_GROUP] == ["gpus"]
            assert gpus.polls == 1
            gpus.gate.set()
            await settle(app, pilot)  # the hung poll ends
            timers["poll gpus"]()  # the next interval polls again
            await app.workers.wait_for_complete()
            assert gpus.polls > 1
    finally:
        gpus.gate.set()


async def test_failing_source_shows_its_message_while_others_update(tmp_path):
    gpus, procs = gpus_unavailable(), procs_ok(4)
    app = make(tmp_path, gpus, procs)
    async with app.run_test(size=(80, 24)):
        await app.wait_for_evaluation(after=0)
        assert gpu_message(app).startswith(NO_NVML)
        assert not app.main_screen.gpus.table.display
        assert "gpus unavailable" in header_text(app)
        ranks = app.main_screen.ranks.table
        assert ranks.row_count == 4
        cpu_before = ranks.get_cell("p4100", "cpu").text
        scans = procs.polls
        await app.next_evaluation()
        await app.next_evaluation()
        assert procs.polls > scans
        assert ranks.get_cell("p4100", "cpu").text != cpu_before  # the fake's CPU moves


async def test_a_source_that_raises_becomes_an_error_state(tmp_path):
    gpus, procs = gpus_ok(), procs_ok()
    gpus.error = RuntimeError("driver went away")
    app = make(tmp_path, gpus, procs)
    async with app.run_test(size=(200, 60)):
        await app.wait_for_evaluation(after=0)
        assert "RuntimeError: driver went away" in gpu_message(app)
        assert "gpus error" in header_text(app)
        assert app.main_screen.ranks.table.row_count == 4


async def test_failed_worker_is_a_notification_not_a_crash(tmp_path):
    app = make(tmp_path, procs_ok())
    notes: list[str] = []
    async with app.run_test() as pilot:
        app.notify = lambda message, **kw: notes.append(message)  # type: ignore[method-assign]

        def boom() -> None:
            raise ValueError("worker exploded")

        worker = app.run_worker(boom, name="gpus", group=POLL_GROUP, description="poll gpus",
                                exit_on_error=False, thread=True)
        with pytest.raises(WorkerFailed):
            await worker.wait()
        await pilot.pause()
        assert any("worker exploded" in n for n in notes)
        assert app.is_running


async def test_bundle_closed_exactly_once_on_quit(tmp_path):
    closed: list[int] = []
    gpus, procs = gpus_ok(), procs_ok()
    app = make(tmp_path, gpus, procs, closers=[lambda: closed.append(1)])
    async with app.run_test() as pilot:
        await app.wait_for_evaluation(after=0)
        await pilot.press("q")
    assert closed == [1] and gpus.closed == 1 and procs.closed == 1
    app.close_bundle()
    assert closed == [1]


async def test_bundle_closed_once_when_the_app_crashes(tmp_path):
    closed: list[int] = []
    app = make(tmp_path, procs_ok(), closers=[lambda: closed.append(1)])

    def crash() -> None:
        raise RuntimeError("bug in a pane")

    with pytest.raises(RuntimeError, match="bug in a pane"):
        async with app.run_test() as pilot:
            app.call_later(crash)
            await pilot.pause()
    assert closed == [1]


async def test_recorder_gets_every_ingested_reading(tmp_path):
    from rltui.sources.record import Recorder
    from rltui.sources.replay import load

    gpus, procs = gpus_ok(), procs_ok()
    bundle = live_bundle(gpus, procs, interval=0.05)
    bundle = bundle.recording(Recorder(tmp_path / "rec", host="test-node",
                                       intervals=bundle.intervals()))
    app = build_app(bundle, FAST, config_path=tmp_path / "config.yaml")
    async with app.run_test() as pilot:
        await app.wait_for_evaluation(after=0)
        await pilot.press("p")
        await settle(app, pilot)
        ingested = app.ingested
    assert len(load(tmp_path / "rec").readings) == ingested
