"""Keys and words: ctrl+c quits (and still copies a selection), `t` says where the theme was
saved or why it was not, `i` asks where reports go the first time and says where each one was
written."""

from __future__ import annotations

import json

from textual.widgets import Input

from rltui.ui.screens import HelpScreen, MainScreen
from rltui.ui.screens.ask_folder import AskFolder
from rltui.ui.screens.check import CheckScreen
from tests.ui.helpers import plain, record_notes


async def test_ctrl_c_quits_the_app(replay_app):
    app = replay_app("rank_exited")
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_evaluation(after=0)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0
    assert notes == []  # no "press ctrl+q to quit" toast


async def test_ctrl_c_quits_from_another_screen_and_ctrl_q_still_does(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running


async def test_ctrl_c_in_a_form_field_copies_a_selection_and_quits_without_one(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("c")
        screen = app.screen
        assert isinstance(screen, CheckScreen)
        field = screen.query_one("#field-server", Input)
        field.focus()
        field.value = "http://127.0.0.1:8000/v1"
        field.select_all()
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running and app.clipboard == "http://127.0.0.1:8000/v1"
        field.selection = type(field.selection)(0, 0)  # nothing selected any more
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running


async def test_ctrl_c_quits_the_stacks_app():
    from tests.ui.test_ui_stacks import stacks_app
    app = stacks_app("cleanup-deadlock")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert not app.is_running


async def test_help_says_ctrl_c_quits(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("f1")
        text = plain(app.screen.content)
        assert "q / ^c" in text
        assert "rltui docs" in text


async def test_t_says_where_the_theme_was_saved(replay_app, tmp_path):
    app = replay_app("rank_exited")
    notes = record_notes(app)
    config = tmp_path / "config.yaml"
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert app.theme == "light"
        assert notes == [f"Theme light saved to {config}"]
        assert config.read_text(encoding="utf-8") == "theme: light\n"


async def test_t_says_when_the_theme_could_not_be_saved(replay_app, tmp_path):
    app = replay_app("rank_exited")
    notes = record_notes(app)
    (tmp_path / "config.yaml").mkdir()  # the config path is a folder: nothing can be written
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("t")
        await pilot.pause()
        assert app.theme == "light"  # used all the same, for this session
        assert len(notes) == 1 and notes[0].startswith(
            f"Theme light not saved to {tmp_path / 'config.yaml'}: "), notes


async def _report_asked(app, pilot) -> AskFolder:
    await app.wait_for_evaluation(after=0)
    await pilot.press("i")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, AskFolder)
    return screen


async def test_i_asks_for_the_folder_once_and_says_where_the_report_is(replay_app, tmp_path,
                                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative answer is taken from here, made absolute
    app = replay_app("rank_exited")
    app.report_suggestion = str(tmp_path)
    names = iter(["first", "second"])
    app.report_folder = lambda now: next(names)
    notes = record_notes(app)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _report_asked(app, pilot)
        field = screen.query_one(Input)
        assert field.value == str(tmp_path)  # pre-filled with the suggestion
        field.value = "reports"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.report_parent == tmp_path / "reports"
        (md, js), = app.reports_written
        assert md == tmp_path / "reports" / "first" / "incident.md"
        assert json.loads(js.read_text())["host"] == app.bundle.host
        assert notes[-1] == (f"Incident report written to {tmp_path / 'reports' / 'first'}: "
                             "incident.md and incident.json (y copies the path)")
        # the second report goes to the same folder without asking
        await pilot.press("i")
        await pilot.pause()
        assert isinstance(app.screen, MainScreen)
        assert app.reports_written[1][0] == tmp_path / "reports" / "second" / "incident.md"
        assert notes[-1].startswith(f"Incident report written to {tmp_path / 'reports'}/second")


async def test_escape_at_the_folder_question_writes_nothing_and_asks_again(replay_app,
                                                                           tmp_path):
    app = replay_app("rank_exited")
    app.report_suggestion = str(tmp_path)
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await _report_asked(app, pilot)
        await pilot.press("escape")
        await pilot.pause()
        assert app.reports_written == [] and app.report_parent is None
        assert notes == ["No report written."]
        await _report_asked(app, pilot)  # asked again next time
    assert list(tmp_path.iterdir()) == []


async def test_a_folder_that_cannot_be_written_is_asked_again(replay_app, tmp_path):
    (tmp_path / "blocker").write_text("x")
    app = replay_app("rank_exited")
    app.report_folder = lambda now: "report"
    notes = record_notes(app)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await _report_asked(app, pilot)
        screen.query_one(Input).value = str(tmp_path / "blocker")
        await pilot.press("enter")
        await pilot.pause()
        assert app.reports_written == [] and app.report_parent is None
        assert notes[-1].startswith(f"Report not written to {tmp_path / 'blocker' / 'report'}")
        assert "Press i to choose another folder" in notes[-1]
        screen = await _report_asked(app, pilot)
        screen.query_one(Input).value = str(tmp_path / "fine")
        await pilot.press("enter")
        await pilot.pause()
        assert app.reports_written[0][0] == tmp_path / "fine" / "report" / "incident.md"
