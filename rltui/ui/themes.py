"""Theme files to Textual themes, and the state colours read back from the active theme.

Where the files are: the shipped ones in ``themes/`` at the top of the source tree, packed into
the wheel as ``rltui/themes/`` (pyproject.toml's force-include), so they are found both in an
installed wheel and in a checkout run in place or installed editable; the user's own in the
``themes/`` folder beside the config file (``~/.config/rltui/themes/NAME.yaml`` by default).

A theme file holds Textual's colour-system keys (primary, background, ...), a ``palette`` of the
state colours rltui paints into table cells and ``ranks``, the colours of the rank tags of log
lines. All of it becomes one Textual ``Theme``: the palette and the rank colours travel as the
theme's variables (``$rltui-ok``, ``$rltui-rank-0`` ...), usable in the stylesheet. Table cells
are Rich text, which cannot read CSS variables, so ``palette_of`` reads the active theme's
variables back into a ``Palette`` value; nothing in the UI branches on a theme's name.

A bad user theme never stops the app: ``load_themes`` leaves it out and returns a message that
names the file, the line and the key (docs/themes.md).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from textual.color import Color, ColorParseError
from textual.theme import Theme

from rltui import shipped
from rltui.config import THEME_NAME, THEMES, themes_dir
from rltui.sources import safeopen

if TYPE_CHECKING:  # annotations only: importlib.abc's name is deprecated from 3.12
    from importlib.resources.abc import Traversable  # novermin (3.11+, checkers only)

# Textual's colour-system keys a theme file may set.
THEME_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground",
              "background", "surface", "panel", "boost")
MAX_THEME_BYTES = 64 * 1024  # a theme file is a few hundred bytes
MAX_RANKS = 32
RANK_PREFIX = "rltui-rank-"


class ThemeFileError(ValueError):
    """A theme file that cannot be used; the message names the file, line and key."""


@dataclass(frozen=True, slots=True)
class Palette:
    """State colours and rank tag colours, as Rich colour strings (``#rrggbb``)."""

    ok: str  # healthy value, busy GPU, source ok
    warn: str  # over a warning threshold, stale source, warning symptom
    bad: str  # failed source, critical symptom, zombie, ECC errors
    idle: str  # GPU at or below the idle threshold
    dim: str  # departed ranks, N/A, placeholders
    spark: str  # sparklines
    info: str  # informational symptoms and notes
    ranks: tuple[str, ...] = ()  # log line rank tags: rank N takes ranks[N % len(ranks)]

    def severity(self, severity: str) -> str:
        return {"critical": self.bad, "warning": self.warn}.get(severity, self.info)

    def status(self, status: str) -> str:
        return self.ok if status == "ok" else self.bad

    def rank(self, rank: int) -> str:
        """The tag colour of ``rank``'s log lines."""
        return self.ranks[rank % len(self.ranks)] if self.ranks else self.info

    def css_variables(self) -> dict[str, str]:
        """The palette as Textual theme variables: ``rltui-ok`` ... and ``rltui-rank-N``."""
        out = {f"rltui-{f.name}": getattr(self, f.name) for f in fields(self) if f.name != "ranks"}
        out.update({f"{RANK_PREFIX}{i}": c for i, c in enumerate(self.ranks)})
        return out


STATE_KEYS = tuple(f.name for f in fields(Palette) if f.name != "ranks")


@dataclass(frozen=True, slots=True)
class RltuiTheme:
    name: str
    textual: Theme
    palette: Palette
    source: str  # the file it came from, for messages


# -- where the files are ---------------------------------------------------------------------------
def shipped_folder() -> Traversable:
    """The shipped theme files: ``rltui/themes`` in an installed wheel, else the ``themes/``
    folder at the top of the checkout this package was imported from."""
    try:
        return shipped.shipped_folder("themes")
    except shipped.NotShipped as exc:
        raise ThemeFileError(f"the shipped theme files are missing ({exc}): a broken "
                             "install") from None


def theme_text(name: str) -> str:
    """The text of a shipped theme file."""
    return shipped_folder().joinpath(f"{name}.yaml").read_text(encoding="utf-8")


# -- parsing ---------------------------------------------------------------------------------------
def _colour(node: yaml.Node, where: str, key: str) -> tuple[str, str]:
    """(as written, as ``#rrggbb``) for a colour scalar, or ThemeFileError naming the line."""
    line = node.start_mark.line + 1
    if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"):
        raise ThemeFileError(f"{where} line {line}: {key}: no colour given (a colour that starts "
                             f"with # must be quoted: \"#3d8fd1\")")
    if not isinstance(node, yaml.ScalarNode):
        raise ThemeFileError(f"{where} line {line}: {key}: must be one colour, "
                             f"like \"#3d8fd1\", red or rgb(61,143,209)")
    try:
        colour = Color.parse(node.value.strip())
    except ColorParseError as exc:
        raise ThemeFileError(f"{where} line {line}: {key}: {node.value!r} is not a colour "
                             f"({exc})") from None
    return node.value.strip(), colour.hex6.lower()


def _mapping(node: yaml.Node, where: str, key: str) -> list[tuple[str, yaml.Node]]:
    line = node.start_mark.line + 1
    if not isinstance(node, yaml.MappingNode):
        raise ThemeFileError(f"{where} line {line}: {key or 'the top level'}: must be a mapping "
                             "of keys to values")
    seen: dict[str, int] = {}
    out = []
    for key_node, value_node in node.value:
        kline = key_node.start_mark.line + 1
        if not isinstance(key_node, yaml.ScalarNode):
            raise ThemeFileError(f"{where} line {kline}: keys must be plain names")
        name = f"{key}.{key_node.value}" if key else key_node.value
        if key_node.value in seen:
            raise ThemeFileError(f"{where} line {kline}: {name} is given twice (first on line "
                                 f"{seen[key_node.value]})")
        seen[key_node.value] = kline
        out.append((key_node.value, value_node))
    return out


def _compose(text: str, where: str) -> yaml.Node | None:
    from rltui.parsing.jobconfig import too_deep
    if len(text) > MAX_THEME_BYTES:
        raise ThemeFileError(f"{where}: {len(text):,} characters; a theme file holds at most "
                             f"{MAX_THEME_BYTES:,}")
    if too_deep(text):
        raise ThemeFileError(f"{where}: not valid YAML: nested too deeply")
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except RecursionError:
        raise ThemeFileError(f"{where}: not valid YAML: nested too deeply") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ThemeFileError(f"{where} line {line}: not valid YAML: {exc.reason}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ThemeFileError(f"{where}{at}: not valid YAML: {problem}") from None


def parse_theme(text: str, name: str, *, source: str | None = None,
                strict: bool = False) -> RltuiTheme:
    """A theme from a theme file's text. ``strict`` (the shipped files): every key given.
    Otherwise (the user's files) what a file leaves out comes from the shipped theme it
    ``extends`` (default: ``dark``, or ``light`` for ``dark: false``)."""
    where = source or f"theme {name}"
    root = _compose(text, where)
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        raise ThemeFileError(f"{where}: empty; a theme sets at least one key "
                             "(rltui docs themes)")
    keys = ("name", "extends", "dark", *THEME_KEYS, "palette", "ranks")
    given: dict[str, str] = {}  # Textual keys as written
    states: dict[str, str] = {}
    ranks: list[str] | None = None
    dark: bool | None = None
    extends: str | None = None
    for key, node in _mapping(root, where, ""):
        line = node.start_mark.line + 1
        if key == "name":
            if not isinstance(node, yaml.ScalarNode) or node.value != name:
                raise ThemeFileError(f"{where} line {line}: name: must be {name!r}, the file's "
                                     "name (or be left out)")
        elif key == "extends":
            if not isinstance(node, yaml.ScalarNode) or node.value not in THEMES:
                value = node.value if isinstance(node, yaml.ScalarNode) else "a list or mapping"
                raise ThemeFileError(f"{where} line {line}: extends: {value!r} is not a shipped "
                                     f"theme (one of {', '.join(THEMES)})")
            extends = node.value
        elif key == "dark":
            if not (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":bool")):
                raise ThemeFileError(f"{where} line {line}: dark: must be true or false")
            dark = node.value.lower() in ("true", "yes", "on")
        elif key in THEME_KEYS:
            given[key] = _colour(node, where, key)[0]
        elif key == "palette":
            for state, value in _mapping(node, where, "palette"):
                if state not in STATE_KEYS:
                    raise ThemeFileError(
                        f"{where} line {value.start_mark.line + 1}: palette.{state}: unknown "
                        f"colour (known: {', '.join(STATE_KEYS)})")
                states[state] = _colour(value, where, f"palette.{state}")[1]
        elif key == "ranks":
            if not isinstance(node, yaml.SequenceNode) or not 1 <= len(node.value) <= MAX_RANKS:
                raise ThemeFileError(f"{where} line {line}: ranks: must be a list of 1 to "
                                     f"{MAX_RANKS} colours, like [\"#61afef\", \"#c678dd\"]")
            ranks = [_colour(n, where, f"ranks[{i}]")[1] for i, n in enumerate(node.value)]
        else:
            raise ThemeFileError(f"{where} line {node.start_mark.line + 1}: unknown key "
                                 f"{key!r} (known: {', '.join(keys)})")
    if strict:
        missing = ["dark"] if dark is None else []
        missing += [] if "primary" in given else ["primary"]
        missing += [f"palette.{k}" for k in STATE_KEYS if k not in states]
        missing += ["ranks"] if ranks is None else []
        if missing:
            raise ThemeFileError(f"{where}: missing {', '.join(missing)} (a shipped theme sets "
                                 "every key)")
        base_theme, base_palette, base_dark = None, None, bool(dark)
    else:
        base = load_theme(extends or ("light" if dark is False else "dark"))
        base_theme, base_palette = base.textual, base.palette
        base_dark = base.textual.dark
    palette_values = {k: states.get(k, getattr(base_palette, k, "")) for k in STATE_KEYS}
    palette = Palette(**palette_values,
                      ranks=tuple(ranks if ranks is not None else base_palette.ranks))
    textual_keys = {k: getattr(base_theme, k) for k in THEME_KEYS
                    if base_theme is not None and getattr(base_theme, k) is not None}
    textual_keys.update(given)
    textual = Theme(name=name, dark=base_dark if dark is None else dark,
                    variables=palette.css_variables(), **textual_keys)
    try:
        textual.to_color_system()  # what Textual does with it when the theme is picked
    except Exception as exc:  # noqa: BLE001 - the file is bad, the app must go on
        raise ThemeFileError(f"{where}: Textual rejects these colours: {exc}") from None
    return RltuiTheme(name=name, textual=textual, palette=palette, source=where)


# -- the state colours of the active theme ---------------------------------------------------------
def palette_of(theme: Theme) -> Palette:
    """The state colours a Textual theme carries in its variables. A theme not made from an
    rltui file (one of Textual's own) gets its success/warning/error colours as ok/warn/bad and
    the shipped dark (or light) theme's colours for the rest."""
    variables = theme.variables
    if all(f"rltui-{k}" in variables for k in STATE_KEYS) and f"{RANK_PREFIX}0" in variables:
        ranks = []
        while f"{RANK_PREFIX}{len(ranks)}" in variables:
            ranks.append(variables[f"{RANK_PREFIX}{len(ranks)}"])
        return Palette(**{k: variables[f"rltui-{k}"] for k in STATE_KEYS}, ranks=tuple(ranks))
    base = load_theme("dark" if theme.dark else "light").palette
    system = theme.to_color_system().generate()
    own = {"ok": "success", "warn": "warning", "bad": "error"}
    values = {k: variables.get(f"rltui-{k}")
              or (Color.parse(system[own[k]]).hex6.lower() if k in own else getattr(base, k))
              for k in STATE_KEYS}
    return Palette(**values, ranks=base.ranks)


class ThemeVariables:
    """Mix into an App (before ``App``): every theme, Textual's own too, answers ``$rltui-*``
    in the stylesheet, from ``palette_of``."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return palette_of(self.current_theme).css_variables()  # type: ignore[attr-defined]


# -- loading ---------------------------------------------------------------------------------------
@cache
def load_theme(name: str) -> RltuiTheme:
    """Load a shipped theme by its settings name (``dark``, ``light``, ``colorblind``)."""
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r} (one of {', '.join(THEMES)})")
    return parse_theme(theme_text(name), name, source=f"shipped theme file {name}.yaml",
                       strict=True)


def load_all() -> dict[str, RltuiTheme]:
    """The shipped themes."""
    return {name: load_theme(name) for name in THEMES}


def read_user_theme(path: Path) -> RltuiTheme:
    """One of the user's theme files; ThemeFileError names the file, line and key."""
    where = f"theme file {path}"
    if not THEME_NAME.fullmatch(path.stem):
        raise ThemeFileError(f"{where}: the name {path.stem!r} is not a theme name (letters, "
                             "digits, '-' and '_')")
    try:
        # never a FIFO (it would hold the start), a device or another user's planted link
        raw = safeopen.read_bytes(path, MAX_THEME_BYTES + 1)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ThemeFileError(f"{where}: cannot read: {exc}") from None
    return parse_theme(text, path.stem, source=where)


def user_theme_files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.glob("*.yaml") if not p.name.startswith("."))
    except OSError:
        return []


def load_themes(config_path: str | Path | None) -> tuple[dict[str, RltuiTheme], list[str]]:
    """The shipped themes, then the user's from the ``themes/`` folder beside ``config_path``
    (none when it is None), and a message for each user file left out. A user theme named
    like a shipped one replaces it."""
    themes = load_all()
    problems: list[str] = []
    if config_path is None:
        return themes, problems
    for path in user_theme_files(themes_dir(Path(config_path))):
        try:
            themes[path.stem] = read_user_theme(path)
        except ThemeFileError as exc:
            problems.append(f"{exc}; theme left out")
    return themes, problems


def next_theme(current: str, names: tuple[str, ...] | list[str] = THEMES) -> str:
    """The theme after ``current`` in ``names`` (an unknown one restarts at the first)."""
    names = tuple(names)
    try:
        return names[(names.index(current) + 1) % len(names)]
    except ValueError:
        return names[0]

