"""Keys and screens: help, theme, zoom, the too-small message, the command palette."""

from __future__ import annotations

from textual.command import CommandList

from rltui.config import Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.ui.commands import palette_commands
from rltui.ui.screens import HelpScreen, MainScreen
from rltui.ui.themes import load_theme
from tests.ui.helpers import drawn, plain, until_idle


async def test_help_opens_lists_keys_and_thresholds_and_closes(replay_app):
    settings = Settings(thresholds=Thresholds(gpu_idle_pct=7.0, cpu_busy_pct=85.0))
    app = replay_app("rank_exited", settings=settings)
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = plain(app.screen.content)
        for words in ("Quit", "p / space", "Refresh", "Zoom", "Theme", "? / f1",
                      "Step (replay)", "tab / shift+tab", "ctrl+p"):
            assert words in text, words
        # Every threshold, with the value in force (not the default).
        for name in Thresholds.names():
            assert name in text, name
        assert "7%" in text and "85%" in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, MainScreen)


async def test_theme_cycles_and_is_remembered(replay_app, tmp_path):
    app = replay_app("rank_exited")
    config = tmp_path / "config.yaml"
    config.write_text("# my settings\nhistory: 300\n", encoding="utf-8")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        gpus = app.main_screen.gpus.table
        assert drawn(gpus, "gpu5", "util") == ("100%", load_theme("dark").palette.ok)
        await pilot.press("t")
        assert app.theme == "light"
        assert config.read_text(encoding="utf-8") == "# my settings\nhistory: 300\ntheme: light\n"
        await pilot.press("t")
        assert app.theme == "colorblind"
        assert "theme: colorblind" in config.read_text(encoding="utf-8")
        # Cells are repainted with the new palette, not left in the old one.
        assert drawn(gpus, "gpu5", "util") == ("100%", load_theme("colorblind").palette.ok)
        await pilot.press("t")
        assert app.theme == "dark"


async def test_zoom_maximizes_the_focused_pane_and_back(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.main_screen
        screen.ranks.table.focus()
        await pilot.press("z")
        assert screen.maximized is screen.ranks
        await pilot.press("z")
        assert screen.maximized is None
        await pilot.press("tab", "z")
        assert screen.maximized is screen.symptoms
        await pilot.press("escape")
        assert screen.maximized is None


async def test_enter_on_a_symptom_zooms_to_read_it(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("e")
        screen = app.main_screen
        screen.symptoms.options.focus()
        await pilot.press("down", "enter")
        assert screen.maximized is screen.symptoms
        detail = plain(screen.symptoms.detail.content)
        assert "gpu-idle-vs-busy" in detail and "Next steps" in detail


async def test_tab_moves_between_panes(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        screen = app.main_screen
        assert screen.focused is screen.gpus.table
        await pilot.press("tab")
        assert screen.focused is screen.ranks.table
        await pilot.press("tab")
        assert screen.focused is screen.symptoms.options
        await pilot.press("shift+tab")
        assert screen.focused is screen.ranks.table


async def test_too_small_message_and_recovery(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(40, 10)) as pilot:
        screen = app.main_screen
        assert screen.has_class("-too-small")
        assert str(screen.too_small.content) == ("terminal too small: 40x10, need at least "
                                                 "60x16")
        assert screen.too_small.display and not screen.query_one("#body").display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert not screen.has_class("-too-small")
        assert not screen.too_small.display and screen.query_one("#body").display


async def test_layout_follows_the_terminal(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.main_screen
        assert not screen.logs.display  # collapses at 24 rows
        assert "throttle" not in screen.gpus.table.columns  # compact columns
        assert "util_spark" in screen.gpus.table.columns  # but the util history fits
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        assert screen.logs.display
        assert {"throttle", "ecc", "sm", "mem_spark"} <= set(screen.gpus.table.columns)
        assert {"step", "stack", "role"} <= set(screen.ranks.table.columns)


async def test_palette_commands_and_titles(replay_app):
    app = replay_app("rank_exited")
    async with app.run_test(size=(200, 60)) as pilot:
        titles = [title for title, _, _ in palette_commands(app)]
        for title in ("View: Toggle pause", "View: Refresh now", "View: Help", "Theme: Dark",
                      "Theme: Light", "Theme: Colour-blind", "Replay: Jump to end",
                      "App: Quit"):
            assert title in titles
        assert all(": " in t for t in titles)
        # Textual's own theme picker would bypass rltui's palettes: it is not offered.
        assert "Theme" not in [c.title for c in app.get_system_commands(app.screen)]
        await pilot.press("ctrl+p")
        await pilot.press(*"colour")
        commands = app.screen.query_one(CommandList)  # the palette searches asynchronously
        await until_idle(pilot, lambda: commands.option_count and "Colour-blind" in str(
            commands.get_option_at_index(0).prompt), "the palette offers the theme")
        await pilot.press("enter")
        await pilot.pause()
        assert app.theme == "colorblind"


async def test_replay_keys_are_inert_in_live_mode(tmp_path):
    from rltui.ui import build_app
    from tests.fakes.sources import live_bundle, procs_ok

    app = build_app(live_bundle(procs_ok()), Settings(), config_path=tmp_path / "c.yaml")
    async with app.run_test() as pilot:
        assert app.check_action("step", ()) is False
        assert "Replay: Step one second" not in [t for t, _, _ in palette_commands(app)]
        await pilot.press("n", "e", "plus")  # nothing to do, nothing breaks
        assert app.is_running
