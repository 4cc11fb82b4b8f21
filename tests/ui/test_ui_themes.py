"""Themes: the shipped files, the user's own beside the config file, and colours read from the
active Textual theme (docs/themes.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.theme import BUILTIN_THEMES

from rltui.config import THEMES, ConfigError, Settings, load, save_theme, theme_names
from rltui.ui.commands import palette_commands
from rltui.ui.themes import (
    ThemeFileError,
    load_theme,
    load_themes,
    palette_of,
    parse_theme,
    read_user_theme,
    shipped_folder,
)
from tests.ui.test_ui_logs import colour, drawn_line, find, log_view


def user_theme(config_dir: Path, name: str, text: str) -> Path:
    folder = config_dir / "themes"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


MINE = """\
# my theme: the dark one with a green primary and my own rank colours
dark: true
primary: "#2e8b57"
palette:
  ok: lime            # a colour name is fine too
ranks: ["#ff00ff", "#00ffff", "#ffff00", "#ffffff"]
"""


def test_shipped_themes_are_found_in_the_source_tree():
    # In a checkout the files sit at the top of the tree (the wheel carries them inside the
    # package: tests/integration/test_wheel.py).
    folder = shipped_folder()
    assert sorted(p.name for p in folder.iterdir()) == ["colorblind.yaml", "dark.yaml",
                                                        "light.yaml"]


@pytest.mark.parametrize("name", ["dark", "light", "colorblind"])
def test_the_palette_is_read_back_from_the_textual_theme(name):
    theme = load_theme(name)
    assert palette_of(theme.textual) == theme.palette
    assert theme.textual.variables["rltui-rank-0"] == theme.palette.ranks[0]
    assert len(theme.palette.ranks) == len(set(theme.palette.ranks)) >= 6
    # rank tags never take a level colour
    assert not {theme.palette.warn, theme.palette.bad} & set(theme.palette.ranks)


def test_a_user_theme_overrides_what_it_names_and_extends_the_rest(tmp_path):
    user_theme(tmp_path, "mine", MINE)
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert problems == []
    assert list(themes) == ["dark", "light", "colorblind", "mine"]
    mine, dark = themes["mine"], themes["dark"]
    assert mine.textual.primary == "#2e8b57" and mine.textual.background == dark.textual.background
    assert mine.palette.ok == "#00ff00"  # lime, as #rrggbb for Rich
    assert mine.palette.warn == dark.palette.warn
    assert mine.palette.ranks == ("#ff00ff", "#00ffff", "#ffff00", "#ffffff")
    assert palette_of(mine.textual) == mine.palette
    # light for `dark: false`, or the one it names
    user_theme(tmp_path, "paper", "dark: false\nprimary: navy\n")
    user_theme(tmp_path, "safe", "extends: colorblind\npalette: {info: white}\n")
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert problems == []
    assert themes["paper"].palette.ranks == themes["light"].palette.ranks
    assert not themes["paper"].textual.dark
    assert themes["safe"].palette.bad == themes["colorblind"].palette.bad
    assert themes["safe"].palette.info == "#ffffff"


def test_a_user_theme_can_replace_a_shipped_one(tmp_path):
    user_theme(tmp_path, "dark", "palette:\n  ok: '#123456'\n")
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert problems == [] and themes["dark"].palette.ok == "#123456"
    assert load_theme("dark").palette.ok == "#4ebf71"  # the shipped one is still its base


BAD = [
    pytest.param("primary: #2e8b57\n", "line 1: primary: no colour given",
                 id="unquoted-hash"),
    pytest.param("palette:\n  ok: blu\n", "line 2: palette.ok: 'blu' is not a colour",
                 id="not-a-colour"),
    pytest.param("primary: red\ncolour: blue\n", "line 2: unknown key 'colour' (known:",
                 id="unknown-key"),
    pytest.param("palette:\n  okay: red\n", "line 2: palette.okay: unknown colour (known: ok,",
                 id="unknown-state"),
    pytest.param("ranks: red\n", "line 1: ranks: must be a list of 1 to 32 colours",
                 id="ranks-not-a-list"),
    pytest.param("ranks: [red, [1]]\n", "line 1: ranks[1]: must be one colour",
                 id="rank-not-a-colour"),
    pytest.param("dark: maybe\n", "line 1: dark: must be true or false", id="dark-not-bool"),
    pytest.param("name: other\n", "line 1: name: must be 'bad'", id="name-not-the-file's"),
    pytest.param("extends: nord\n", "line 1: extends: 'nord' is not a shipped theme",
                 id="extends-unknown"),
    pytest.param("primary: red\nprimary: blue\n", "line 2: primary is given twice (first on "
                 "line 1)", id="twice"),
    pytest.param("primary: red\n  bad indent: x\n", "line 2: not valid YAML", id="yaml"),
    pytest.param("- red\n", "line 1: the top level: must be a mapping", id="a-list"),
    pytest.param("# nothing\n", "empty", id="empty"),
    pytest.param("primary: red\n" + "#" * 70_000, "characters; a theme file holds at most",
                 id="huge"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_a_bad_user_theme_is_left_out_with_its_file_line_and_key(tmp_path, text, message):
    path = user_theme(tmp_path, "bad", text)
    user_theme(tmp_path, "good", "primary: red\n")
    themes, problems = load_themes(tmp_path / "config.yaml")  # never raises
    assert "bad" not in themes and "good" in themes
    assert len(problems) == 1
    assert problems[0].startswith(f"theme file {path}")
    assert message in problems[0], problems[0]
    assert problems[0].endswith("; theme left out")


def test_unreadable_and_misnamed_theme_files_are_reported(tmp_path):
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "latin1.yaml").write_bytes(b"primary: \xe9\n")
    (folder / "my theme.yaml").write_text("primary: red\n", encoding="utf-8")
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert set(themes) == {"dark", "light", "colorblind"}
    assert any("latin1.yaml: cannot read" in p for p in problems), problems
    assert any("'my theme' is not a theme name" in p for p in problems), problems
    with pytest.raises(ThemeFileError, match="cannot read"):
        read_user_theme(folder / "latin1.yaml")


def test_no_config_path_means_only_the_shipped_themes():
    themes, problems = load_themes(None)
    assert list(themes) == ["dark", "light", "colorblind"] and problems == []


def test_a_theme_that_textual_would_reject_is_caught_before_use():
    # Every colour is checked as Textual parses it, so a theme never fails when picked.
    with pytest.raises(ThemeFileError, match="line 1: boost: 'nope' is not a colour"):
        parse_theme("boost: nope\n", "x", source="theme file x.yaml")


def test_config_accepts_the_user_themes_and_remembers_them(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("theme: mine\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="line 1: theme: unknown theme 'mine'"):
        load(config)
    user_theme(tmp_path, "mine", MINE)
    assert theme_names(config) == ("dark", "light", "colorblind", "mine")
    assert load(config).theme == "mine"
    save_theme("light", config)
    save_theme("mine", config)
    assert config.read_text(encoding="utf-8") == "theme: mine\n"
    with pytest.raises(ValueError, match="neon"):
        save_theme("neon", config)


# -- in the app ------------------------------------------------------------------------------------
async def test_the_app_paints_with_a_user_theme_and_cycles_through_it(replay_app, tmp_path):
    user_theme(tmp_path, "mine", MINE)
    app = replay_app("with_logs", theme="mine")
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.press("e")
        assert app.theme == "mine" and app.palette.ok == "#00ff00"
        # The rank tags come from the theme's ranks (rank 3 of 4 colours).
        view = log_view(app)
        segments = drawn_line(view, find(view, "RuntimeError: NCCL"))
        assert colour(segments[0]) == "#ffffff"
        assert "Theme: mine" in [title for title, _, _ in palette_commands(app)]
        await pilot.press("t")  # after the last theme, the first
        assert app.theme == "dark" and app.palette == load_theme("dark").palette
        assert "theme: dark" in (tmp_path / "config.yaml").read_text(encoding="utf-8")
        assert colour(drawn_line(view, find(view, "RuntimeError: NCCL"))[0]) == \
            load_theme("dark").palette.ranks[3]


async def test_a_bad_user_theme_is_a_message_not_a_crash(replay_app, tmp_path):
    user_theme(tmp_path, "mine", "palette:\n  ok: blu\n")
    app = replay_app("rank_exited", theme="mine")  # the config named it; its file went bad
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.theme == "dark" and app.palette == load_theme("dark").palette
        messages = [n.message for n in app._notifications]
        assert any("mine.yaml line 2: palette.ok: 'blu' is not a colour" in m
                   for m in messages), messages


async def test_textual_own_themes_give_state_colours_too(replay_app):
    # A theme not made from an rltui file still answers $rltui-* and the palette.
    app = replay_app("rank_exited")
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await pilot.pause()
        nord = BUILTIN_THEMES["nord"]
        assert app.palette.ok == nord.success.lower()
        assert app.palette.ranks == load_theme("dark").palette.ranks
        assert app.get_css_variables()["rltui-warn"] == app.palette.warn


async def test_stacks_app_reads_the_user_themes(tmp_path):
    from rltui.ui.stacks_app import build_stacks_app
    from tests.ui.test_ui_stacks import report_of
    user_theme(tmp_path, "mine", MINE)
    report, problems = report_of("collective-mismatch")
    app = build_stacks_app(report, problems=problems, theme="mine",
                           config_path=tmp_path / "config.yaml")
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.theme == "mine" and app.palette.ok == "#00ff00"
        await pilot.press("t")
        assert app.theme == "dark"


def test_settings_default_theme_is_shipped():
    assert Settings().theme in load_themes(None)[0]


def test_the_example_in_the_docs_is_a_working_theme(tmp_path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "themes.md").read_text(encoding="utf-8")
    example = doc.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert "sea.yaml" in example.splitlines()[0]
    user_theme(tmp_path, "sea", example)
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert problems == [] and themes["sea"].palette.ranks[3] == "#ffffff"
    assert themes["sea"].palette.ok == themes["dark"].palette.ok


def test_a_fifo_in_the_themes_folder_is_left_out_without_holding_the_start(tmp_path):
    """A named pipe where a theme file should be: opened plainly it would block the app's start
    until someone wrote to it; it is refused as not a regular file."""
    import os
    folder = tmp_path / "themes"
    folder.mkdir()
    os.mkfifo(folder / "pipe.yaml")
    themes, problems = load_themes(tmp_path / "config.yaml")
    assert set(themes) == {"dark", "light", "colorblind"}
    assert any("pipe.yaml: cannot read" in p and "not a regular file" in p for p in problems), \
        problems


def test_lines_are_drawn_without_the_ansi_filter_but_no_color_still_applies(replay_app,
                                                                            monkeypatch):
    """rltui paints only truecolor, so Textual's ANSI-to-truecolor copy of every drawn line is
    left out; NO_COLOR's filter (read when the app is made) is kept."""
    from textual.filter import ANSIToTruecolor, Monochrome

    app = replay_app("healthy")
    assert not any(isinstance(f, ANSIToTruecolor) for f in app.get_line_filters())
    monkeypatch.setenv("NO_COLOR", "1")
    assert any(isinstance(f, Monochrome) for f in replay_app("healthy").get_line_filters())


@pytest.mark.parametrize("name", THEMES)
def test_every_shipped_theme_paints_truecolor_only(name):
    """What makes leaving the ANSI filter out safe: no colour of a shipped theme's palette is an
    ANSI colour (those would reach the terminal as its own palette's)."""
    from rich.style import Style

    palette = load_theme(name).palette
    for value in (palette.ok, palette.warn, palette.bad, palette.idle, palette.dim,
                   palette.spark, palette.info, *palette.ranks):
        assert Style.parse(value).color.type.name == "TRUECOLOR", (name, value)
