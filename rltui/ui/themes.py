"""Theme files (``rltui/themes/*.yaml``, shipped in the wheel) to Textual themes and palettes.

A theme file holds Textual's colour-system keys (primary, background, ...) and a ``palette`` of
the state colours rltui paints into table cells. Cells are Rich text, which cannot read CSS
variables, so the palette travels as a plain value object; it is also exported as CSS variables
(``$rltui-ok`` ...) so the stylesheet can use the same colours.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from importlib import resources

import yaml
from textual.theme import Theme

from rltui.config import THEMES

_THEME_KEYS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground",
               "background", "surface", "panel", "boost")


class ThemeFileError(ValueError):
    """A shipped theme file is malformed (a packaging bug, reported by the tests)."""


@dataclass(frozen=True, slots=True)
class Palette:
    """State colours, as Rich colour strings."""

    ok: str  # healthy value, busy GPU, source ok
    warn: str  # over a warning threshold, stale source, warning symptom
    bad: str  # failed source, critical symptom, zombie, ECC errors
    idle: str  # GPU at or below the idle threshold
    dim: str  # departed ranks, N/A, placeholders
    spark: str  # sparklines
    info: str  # informational symptoms and notes

    def severity(self, severity: str) -> str:
        return {"critical": self.bad, "warning": self.warn}.get(severity, self.info)

    def status(self, status: str) -> str:
        return self.ok if status == "ok" else self.bad

    def css_variables(self) -> dict[str, str]:
        return {f"rltui-{f.name}": getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class RltuiTheme:
    name: str
    textual: Theme
    palette: Palette


def theme_text(name: str) -> str:
    return resources.files("rltui").joinpath("themes", f"{name}.yaml").read_text(encoding="utf-8")


def parse_theme(text: str, name: str) -> RltuiTheme:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ThemeFileError(f"theme {name}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ThemeFileError(f"theme {name}: must be a mapping")
    raw_palette = data.get("palette")
    if not isinstance(raw_palette, dict):
        raise ThemeFileError(f"theme {name}: 'palette' mapping is missing")
    wanted = {f.name for f in fields(Palette)}
    missing = sorted(wanted - set(raw_palette))
    unknown = sorted(set(raw_palette) - wanted)
    if missing or unknown:
        raise ThemeFileError(f"theme {name}: palette missing {missing}, unknown {unknown}")
    palette = Palette(**{k: str(v) for k, v in raw_palette.items()})
    unknown_keys = sorted(set(data) - {"name", "dark", "palette", *_THEME_KEYS})
    if unknown_keys:
        raise ThemeFileError(f"theme {name}: unknown keys {unknown_keys}")
    if "primary" not in data:
        raise ThemeFileError(f"theme {name}: 'primary' is required")
    textual = Theme(
        name=name,
        dark=bool(data.get("dark", True)),
        variables=palette.css_variables(),
        **{k: str(data[k]) for k in _THEME_KEYS if k in data},
    )
    return RltuiTheme(name=name, textual=textual, palette=palette)


@cache
def load_theme(name: str) -> RltuiTheme:
    """Load a shipped theme by its settings name (``dark``, ``light``, ``colorblind``)."""
    if name not in THEMES:
        raise ValueError(f"unknown theme {name!r} (one of {', '.join(THEMES)})")
    return parse_theme(theme_text(name), name)


def load_all() -> dict[str, RltuiTheme]:
    return {name: load_theme(name) for name in THEMES}


def next_theme(current: str) -> str:
    """The theme after ``current`` in the cycle (an unknown one restarts at the first)."""
    try:
        return THEMES[(THEMES.index(current) + 1) % len(THEMES)]
    except ValueError:
        return THEMES[0]
