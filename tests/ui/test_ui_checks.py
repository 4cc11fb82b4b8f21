"""The check screens (`c` rollout consistency, `w` agent workflow), driven with Pilot against
real checks: the sample workflows on the loopback chat server, the tiny model served by the
engine server. Tests wait on the screen's ``finished`` event or on progress the check reports,
never on a clock."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rltui.checks.workflow.form import workflow_form
from rltui.model import replace
from rltui.ui.screens.check import CheckScreen
from rltui.ui.screens.text import TextScreen
from tests.fakes.agents.harness import AGENTS, chat_server, write_jsonl

pytestmark = pytest.mark.integration

SECRET = "sk-test-do-not-print-4242"


async def finished(screen: CheckScreen, pilot, timeout: float = 90.0) -> None:
    done = await asyncio.to_thread(screen.finished.wait, timeout)
    assert done, "the check did not finish"
    await pilot.pause()


def small_shape(screen: CheckScreen, **values: str) -> None:
    screen.set_values(**{"global_bs": "4", "group_size": "2", "rollout_dp_size": "1",
                         "timeout": "5", "path": str(AGENTS), **values})


def observe_workflow(app, phases: tuple[str, ...]):
    """Wrap the app's real workflow check so the test can wait on it: returns (started, the
    reports it returned, returned). ``started`` is set when progress of one of ``phases``
    arrives; ``returned`` once run has returned its report."""
    started, returned = threading.Event(), threading.Event()
    form = workflow_form()
    reports: list = []

    def run(spec, *, progress=None, cancel=None):
        def seen(update):
            if update.phase in phases:
                started.set()
            progress(update)
        report = form.run(spec, progress=seen, cancel=cancel)
        reports.append(report)
        returned.set()
        return report

    app.check_forms = {**app.check_forms, "workflow": lambda: replace(form, run=run)}
    return started, reports, returned


async def test_workflow_check_runs_from_the_screen(replay_app, tmp_path):
    """`w` opens the workflow form; a passing agent runs once then 4 x 2 at once; the summary
    says passed, the export holds the report without the API key, and the app keeps its
    monitor underneath."""
    rows = write_jsonl(tmp_path / "data.jsonl", [{"prompt": f"q{i}", "answer": f"q{i}"}
                                                 for i in range(4)])
    app = replay_app("rank_exited")
    with chat_server(api_key=SECRET) as url:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("w")
            screen = app.screen
            assert isinstance(screen, CheckScreen) and screen.form.kind == "workflow"
            screen.export_dir = tmp_path / "out"
            small_shape(screen, target="agent_echo:EchoAgent", data=str(rows), base_url=url,
                        api_key=SECRET)
            await pilot.press("ctrl+r")
            await finished(screen, pilot)
            status = str(screen.query_one("#check-status").render())
            assert status.startswith("passed"), status
            assert "8/8 completed" in status
            assert "sequential vs concurrent: agree" in status
            # the bar ends full: the last counted step (8 runs at once), not reset by the
            # uncounted "done" phase
            bar = screen.query_one("#check-progress")
            assert (bar.progress, bar.total) == (8, 8)
            await pilot.press("ctrl+o")
            files = sorted((tmp_path / "out").iterdir())
            assert [f.suffix for f in files] == [".json", ".md"]
            for f in files:
                assert SECRET not in f.read_text()
            await pilot.press("escape")
            assert not isinstance(app.screen, CheckScreen)


async def test_a_check_that_could_not_run_shows_no_progress_bar(replay_app, tmp_path):
    """A workflow whose module does not import never runs: the status says why, and no bar
    is left on screen (a full one would say that something ran to its end). A check that
    ran keeps its bar (test_workflow_check_runs_from_the_screen)."""
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("w")
        screen = app.screen
        small_shape(screen, target="agent_broken_import:Agent", prompt="q",
                    base_url="http://127.0.0.1:9/v1")
        await pilot.press("ctrl+r")
        row = screen.query_one("#check-progress-row")
        await finished(screen, pilot)
        status = str(screen.query_one("#check-status").render())
        assert status.startswith("setup error"), status
        assert not row.has_class("-shown") and not row.display
        # a second try, once the form is right, runs and has its bar again
        with chat_server() as url:
            small_shape(screen, target="agent_echo:EchoAgent", prompt="q", base_url=url)
            await pilot.press("ctrl+r")
            await finished(screen, pilot)
            assert str(screen.query_one("#check-status").render()).startswith("passed")
            bar = screen.query_one("#check-progress")
            assert row.has_class("-shown") and bar.total and bar.progress == bar.total


async def test_workflow_problems_listed_worst_first_with_detail(replay_app, tmp_path):
    """A workflow returning bad rewards: the table starts with the finding, and enter on it
    opens the finding in full with its advice."""
    rows = write_jsonl(tmp_path / "data.jsonl", [{"prompt": "q", "kind": "string"}])
    app = replay_app("rank_exited")
    with chat_server() as url:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("w")
            screen = app.screen
            small_shape(screen, target="agent_bad_reward:BadRewardAgent", data=str(rows),
                        base_url=url)
            await pilot.press("ctrl+r")
            await finished(screen, pilot)
            table = screen.query_one("#check-results")
            assert table.row_count >= 1
            first = [str(c) for c in table.get_row_at(0)]
            assert first[0] == "problem", first
            assert "reward" in " ".join(first)
            table.focus()
            await pilot.press("enter")
            assert isinstance(app.screen, TextScreen)
            body = str(app.screen.query_one(".text-body").render())
            assert "finite number" in body
            await pilot.press("escape")
            assert app.screen is screen


async def test_workflow_cancel_keeps_partial_results(replay_app, tmp_path):
    """Cancel while the concurrent step is in flight on a slow server: the check stops, the
    report is partial and still shown and exportable."""
    app = replay_app("rank_exited")
    concurrent_started, _, _ = observe_workflow(app, ("concurrent",))
    with chat_server() as url:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("w")
            screen = app.screen
            # the chat server delays answers for a model named echo@<seconds>
            small_shape(screen, target="agent_echo:EchoAgent", prompt="q", base_url=url,
                        timeout="30", kwargs='{"model": "echo@5"}')
            await pilot.press("ctrl+r")
            assert await asyncio.to_thread(concurrent_started.wait, 60)
            await pilot.press("ctrl+g")
            await finished(screen, pilot)
            assert screen.report is not None and screen.report.partial
            assert "partial" in str(screen.query_one("#check-status").render())
            assert not screen.query_one("#check-export").disabled


async def test_form_errors_do_not_start_a_run(replay_app):
    """An empty form: Run says what is missing and starts nothing."""
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CheckScreen) and screen.form.kind == "rollout"
        await pilot.press("ctrl+r")
        assert not screen.running
        status = str(screen.query_one("#check-status").render())
        assert status.startswith("Not started: fill in dataset, reference, server"), status
        screen.set_values(dataset="/nonexistent.jsonl", reference="x", server="y")
        await pilot.press("ctrl+r")
        assert "no such file" in str(screen.query_one("#check-status").render())


async def test_rollout_check_from_the_screen(replay_app, tiny_model, rollout_dataset,
                                             engine_server_perturbed):
    """`c` opens the rollout form; against a server of a perturbed model the summary says
    divergent, and the table lists the mismatches first with where they start."""
    app = replay_app("rank_exited")
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("c")
        screen = app.screen
        screen.set_values(dataset=str(rollout_dataset), reference=str(tiny_model),
                          server=engine_server_perturbed.v1, max_new_tokens="16", limit="4",
                          concurrency="2")
        assert screen.query_one("#check-export").disabled
        await pilot.press("ctrl+r")
        await finished(screen, pilot, timeout=180)
        status = str(screen.query_one("#check-status").render())
        assert status.startswith("divergent"), status
        table = screen.query_one("#check-results")
        assert table.row_count == 4
        first = [str(c) for c in table.get_row_at(0)]
        assert first[2] == "mismatch" and first[3].startswith("token "), first
        table.focus()
        await pilot.press("enter")
        assert isinstance(app.screen, TextScreen)
        assert "candidate" in str(app.screen.query_one(".text-body").render())


SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")]


@pytest.mark.parametrize("size", SIZES)
def test_rollout_form_snapshot(snap_compare, replay_app, size):
    """The rollout check's screen before a run. Must be visible: the title "Rollout
    consistency: reference vs inference server", the intro naming the same token ids and
    greedy, "(rltui docs rollout-check)", the form's labels (dataset, reference, server, model,
    max new tokens 256, limit, concurrency 8, api auto, tokenizer, timeout s, api key) with their
    placeholders as hints ("e.g. http://127.0.0.1:8000/v1", "default: all samples", "default:
    120 s per request"; at 80x24 the form scrolls: api key is below), the Run, Cancel (disabled) and
    Export (disabled) buttons, "Fill in the form and press Run (ctrl+r).", the empty results
    table's columns and the footer (esc Close, ^r Run, ^g Cancel, ^o Export)."""
    assert snap_compare(replay_app("rank_exited"), press=["c"], terminal_size=size)


def test_rollout_results_snapshot(snap_compare, replay_app, tiny_model, rollout_dataset,
                                  engine_server_perturbed):
    """The rollout check after a run against a perturbed model (8 samples, 16 new tokens),
    the form's fields then set to fixed text (the real port changes every run). Must be
    visible: the intro gone and the form shortened to a quarter of the screen (it scrolls), the
    progress bar at 100%, the summary "divergent: 8 of 8 compared, agreement 0%" with both
    accuracies and the log-prob line (mean |Δp|, its verdict, max |Δlogp|); the table sorted
    worst first: mismatches by earliest divergence ("token 0: '0' vs ' dog'"), each row with
    its dataset line, the answer marks (reference/candidate) and the |Δp| and |Δlogp| values
    ("-" where the outputs part at the first token); the table focused with the cursor on the
    worst row (enter opens it); Export enabled."""
    async def run_before(pilot) -> None:
        await pilot.press("c")
        screen = pilot.app.screen
        screen.set_values(dataset=str(rollout_dataset), reference=str(tiny_model),
                          server=engine_server_perturbed.v1, max_new_tokens="16", limit="8",
                          concurrency="4")
        await pilot.press("ctrl+r")
        await finished(screen, pilot, timeout=180)
        screen.set_values(dataset="prompts.jsonl", reference="tiny-model",
                          server="http://127.0.0.1:8000/v1")
        await pilot.pause()

    assert snap_compare(replay_app("rank_exited"), run_before=run_before,
                        terminal_size=(120, 40))


async def test_check_screens_never_stack_twice(replay_app):
    """`c` over a result's detail brings the rollout screen back instead of pushing a second
    copy; `w` from there closes the rollout screen and opens the workflow one."""
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        rollout = app.screen
        app.push_screen(TextScreen("detail", "text"))
        await pilot.pause()
        await pilot.press("c")
        assert app.screen is rollout
        assert [s for s in app.screen_stack if isinstance(s, CheckScreen)] == [rollout]
        app.push_screen(TextScreen("detail", "text"))
        await pilot.pause()
        await pilot.press("w")
        checks = [s for s in app.screen_stack if isinstance(s, CheckScreen)]
        assert len(checks) == 1 and checks[0].form.kind == "workflow"
        assert app.screen is checks[0]


async def test_quitting_cancels_a_running_check(replay_app, tmp_path):
    """q while a workflow check waits on a slow server: the check is told to stop, so its
    thread ends (with a partial report) instead of keeping rltui alive after the app closed."""
    app = replay_app("rank_exited")
    started, reports, returned = observe_workflow(app, ("single", "concurrent"))
    with chat_server() as url:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("w")
            screen = app.screen
            small_shape(screen, target="agent_echo:EchoAgent", prompt="q", base_url=url,
                        timeout="60", kwargs='{"model": "echo@60"}')
            await pilot.press("ctrl+r")
            assert await asyncio.to_thread(started.wait, 60)
            app.exit()
        # the server would answer in 60 s and the run's timeout is 60 s: only the cancel ends
        # it sooner
        assert await asyncio.to_thread(returned.wait, 30), \
            "the check kept running after the app closed"
    assert reports[0].partial
