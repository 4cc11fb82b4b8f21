"""Zoom: one pane fills the screen, the same way on every screen that has panes."""

from __future__ import annotations

from textual.screen import Screen


def toggle_zoom(screen: Screen) -> None:
    """Zoom the focused pane (focusing the first one if none is), or zoom back out."""
    if screen.maximized is not None:
        screen.minimize()
        return
    if screen.focused is None:
        screen.focus_next()
    if screen.focused is not None:
        screen.maximize(screen.focused)
