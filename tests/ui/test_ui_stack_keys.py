"""The main screen's stack keys and column: `d` dumps now, `i` writes the incident report, the
rank table shows each rank's class. Sources are fakes fed with real saved py-spy dumps."""

from __future__ import annotations

import json

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import DENIED
from rltui.ui import build_app
from tests.fakes.sources import FakeStackSource, live_bundle, procs_ok
from tests.ui.helpers import dump_now, record_notes

FAST = Settings(cadence=Cadence(gpus=0.05, procs=0.05, ui=0.1),
                thresholds=Thresholds(stale_after_intervals=1000.0))


def make(tmp_path, stacks: FakeStackSource):
    bundle = live_bundle(procs_ok(3)).with_stacks(stacks)  # on demand only (pyspy.interval 0)
    app = build_app(bundle, FAST, config_path=tmp_path / "config.yaml",
                    commands=["rltui --pid 1"])
    app.report_parent = tmp_path  # chosen already: `i` writes without asking
    app.report_folder = lambda now: "report"
    return app


def stack_cells(app) -> list[str]:
    table = app.main_screen.ranks.table
    return [table.get_cell(key, "stack").text for key in table.row_keys]


async def test_d_dumps_on_demand_and_the_rank_table_shows_the_classes(tmp_path):
    stacks = FakeStackSource("cleanup-deadlock")
    app = make(tmp_path, stacks)
    async with app.run_test(size=(200, 60)) as pilot:
        view = await app.wait_for_evaluation(after=0)
        assert view.stacks is None
        waiter = app.wait_for_evaluation(app.evaluations)
        await pilot.press("d")
        await app.workers.wait_for_complete()
        view = await waiter
        while view.stacks is None:  # the round arrives on a later evaluation
            view = await app.wait_for_evaluation(app.evaluations)
        assert (stacks.on_demand, stacks.polls) == (1, 0)
        assert view.stacks.pattern == "A"
        assert "hang-cleanup-deadlock" in [s.id for s in view.diagnosis.symptoms]
        await pilot.pause()
        assert stack_cells(app) == ["#1 recv_object_list", "#1 recv_object_list",
                             "#2 destroy_process_group"]


async def test_d_with_ptrace_denied_says_how_to_fix_it_once(tmp_path):
    stacks = FakeStackSource(failure=(DENIED, "ptrace denied for all 3 processes",
                                      "run as root, or sysctl kernel.yama.ptrace_scope=0"))
    app = make(tmp_path, stacks)
    notes = record_notes(app)
    async with app.run_test(size=(200, 60)) as pilot:
        await app.wait_for_evaluation(after=0)
        view = await dump_now(app, pilot, lambda v: v.snapshot.source("stacks") is not None)
        assert view.snapshot.source("stacks").status == DENIED
        await pilot.pause()
        assert len([m for m in notes if "ptrace_scope" in m]) == 1, notes
        await pilot.press("s")  # nothing to compare: a message with the fix, no screen
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_i_writes_the_incident_report_with_stacks_and_commands(tmp_path):
    app = make(tmp_path, FakeStackSource("collective-mismatch"))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_evaluation(after=0)
        await dump_now(app, pilot, lambda v: v.stacks is not None)
        await pilot.press("i")
        await pilot.pause()
        assert len(app.reports_written) == 1
        md, js = app.reports_written[0]
        doc = json.loads(js.read_text())
        assert doc["stacks"]["pattern"] == "B"
        assert doc["commands"][0] == "rltui --pid 1"
        assert any(c.startswith("py-spy dump --pid ") for c in doc["commands"])
        assert "## Stacks" in md.read_text()


async def test_i_into_an_unwritable_folder_is_a_message_not_a_crash(tmp_path):
    app = make(tmp_path, FakeStackSource())
    (tmp_path / "blocker").write_text("x")
    app.report_folder = lambda now: "blocker/report"
    notes = record_notes(app)
    async with app.run_test() as pilot:
        await app.wait_for_evaluation(after=0)
        await pilot.press("i")
        await pilot.pause()
        assert app.reports_written == []
        assert any(m.startswith("Report not written") for m in notes), notes


async def test_s_opens_the_compare_screen_and_it_follows_new_rounds(replay_app):
    from rltui.ui.screens.stacks import StacksScreen
    app = replay_app("cleanup_deadlock_with_stacks", paused=True)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("s")  # before the first round: a message, no screen
        await pilot.pause()
        assert app.screen is app.main_screen
        await pilot.press("e")
        await pilot.pause()
        assert app.latest.stacks.samples == 3
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StacksScreen)
        assert app.screen.report is app.latest.stacks
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen
        assert [c for c in stack_cells(app)] == ["#1 recv_object_list", "#1 recv_object_list",
                                                 "#2 destroy_process_group"]


async def test_the_compare_screen_follows_new_rounds_while_open(tmp_path):
    from rltui.ui.screens.stacks import StacksScreen
    stacks = FakeStackSource("collective-mismatch")
    app = make(tmp_path, stacks)
    async with app.run_test(size=(200, 60)) as pilot:
        await app.wait_for_evaluation(after=0)

        async def dump() -> None:
            await pilot.press("d")
            await app.workers.wait_for_complete()
            view = await app.wait_for_evaluation(app.evaluations)
            while view.stacks is None or view.snapshot.stacks[-1].dumps != stacks.dumps:
                view = await app.wait_for_evaluation(app.evaluations)
            await pilot.pause()

        await dump()
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StacksScreen) and screen.report.pattern == "B"
        stacks.dumps = FakeStackSource("stall").dumps  # the next round: every rank alike
        await dump()  # `d` works from the compare screen too
        assert app.screen is screen
        assert screen.report is app.latest.stacks and screen.report.samples >= 1
        assert {c.op.name for c in screen.report.classes if c.op} == {"all_reduce"}
        assert screen.report is not None and len(screen.report.classes) == 1


async def test_m_opens_the_oom_triage_of_the_latest_oom(replay_app):
    """The with_logs recording: rank 2 logs a CUDA OOM at 40 s. Before it, `m` is hidden and
    inert; after it, `m` reads the (absent) job config in a worker and shows the triage."""
    from rltui.ui.screens.oom import OomScreen
    app = replay_app("with_logs", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.check_action("oom_triage", ()) is False
        await pilot.press("e")
        await pilot.pause()
        assert app.check_action("oom_triage", ()) is True
        await pilot.press("m")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, OomScreen)
        assert "OOM (cuda-oom) on GPU 2" in app.screen.text
        assert "Suggestions, most direct first:" in app.screen.text
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.main_screen


async def test_enter_on_the_oom_symptom_opens_its_triage(replay_app):
    """The OOM screen opens from the symptom itself (the cuda-oom row), not only with m."""
    from rltui.ui.screens.oom import OomScreen
    app = replay_app("with_logs", paused=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("e")
        await pilot.pause()
        pane = app.main_screen.symptoms
        ids = [s.id for s in app.latest.diagnosis.symptoms]
        pane.options.focus()
        pane.options.highlighted = ids.index("cuda-oom")
        await pilot.press("enter")
        # The action runs after the key's handler, then its worker reads the configs: wait
        # for each step to settle (bounded) rather than for a time.
        for _ in range(50):
            await pilot.pause()
            await app.workers.wait_for_complete()
            if isinstance(app.screen, OomScreen):
                break
        assert isinstance(app.screen, OomScreen)
