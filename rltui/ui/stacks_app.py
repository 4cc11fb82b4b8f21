"""``rltui stacks DIR``: the stack compare screen on its own, for saved py-spy dumps.

The app is the monitor's look without the monitor: the same theme files and palette (so the
colours match), the same stylesheet and help screen, and ``StacksScreen`` as its only screen
(``q``, ``ctrl+c`` or ``escape`` quits).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.screen import Screen

from rltui.diagnosis.stacks import StackReport
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import replace
from rltui.sources.clipboard import Copied
from rltui.ui.copying import Copying, copy_binding
from rltui.ui.screens.help import HelpScreen
from rltui.ui.screens.stacks import SourceLines, StacksScreen
from rltui.ui.themes import RltuiTheme, ThemeVariables, load_themes, next_theme, palette_of
from rltui.ui.toasts import ScreenToasts


class StacksApp(ScreenToasts, Copying, ThemeVariables, App[int]):
    CSS_PATH = "rltui.tcss"
    TITLE = "rltui stacks"
    BINDINGS = [
        # ctrl+c quits as in every terminal tool (see RltuiApp.BINDINGS)
        Binding("q,ctrl+c", "quit", "Quit", show=False, id="rltui.stacks.quit",
                tooltip="also ctrl+q; ctrl+c copies instead while text is selected"),
        Binding("t", "cycle_theme", "Theme", show=False, id="rltui.stacks.theme",
                tooltip="cycle dark, light, colour-blind, yours (not remembered here)"),
        Binding("question_mark,f1", "help", "Help", id="rltui.stacks.help"),
        copy_binding("rltui.stacks.copy"),
    ]

    def __init__(self, report: StackReport, *, problems: Sequence[str] = (),
                 source_lines: SourceLines | None = None, title: str = "",
                 theme: str = "dark", config_path: str | Path | None = None,
                 copy_sink: Callable[[str, str], Copied] | None = None) -> None:
        super().__init__()
        self.copy_sink = copy_sink
        self.themes: dict[str, RltuiTheme]
        self.themes, self.theme_problems = load_themes(config_path)
        for t in self.themes.values():
            self.register_theme(t.textual)
        name = theme if theme in self.themes else "dark"
        self.palette = self.themes[name].palette
        self.stacks_screen = StacksScreen(report, source_lines=source_lines, subtitle=title,
                                          problems=problems)
        if title:
            self.sub_title = title
        self.theme = name

    def get_default_screen(self) -> Screen:
        return self.stacks_screen

    def on_mount(self) -> None:
        self.watch_toasts()
        for problem in self.theme_problems:
            self.notify(problem, title="Theme", severity="error", timeout=30)

    def watch_theme(self, name: str) -> None:
        self.palette = palette_of(self.current_theme)

    def action_cycle_theme(self) -> None:
        self.theme = next_theme(self.theme, tuple(self.themes))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_bindings(), Thresholds(), self.palette))

    def help_bindings(self) -> list[Binding]:
        out = []
        for b in (*StacksScreen.BINDINGS, *self.BINDINGS):
            assert isinstance(b, Binding)
            out.append(replace(b))
        return out


def build_stacks_app(report: StackReport, *, problems: Sequence[str] = (),
                     source_lines: SourceLines | None = None, title: str = "",
                     theme: str = "dark",
                     config_path: str | Path | None = None,
                     copy_sink: Callable[[str, str], Copied] | None = None) -> StacksApp:
    """The app of ``rltui stacks DIR`` (for the CLI and tests alike): ``report`` from
    ``classify``, ``problems`` from reading the dumps, ``source_lines`` usually
    ``rltui.sources.sourcelines.read_source``, ``title`` the folder, ``theme`` the settings',
    ``config_path`` the config file (the user's themes are beside it), ``copy_sink`` where
    ``y`` writes its copies (``rltui.sources.clipboard.save_copy``; none: OSC 52 alone)."""
    return StacksApp(report, problems=problems, source_lines=source_lines, title=title,
                     theme=theme, config_path=config_path, copy_sink=copy_sink)
