"""Zoom: one pane fills the screen, the same way on every screen that has panes."""

from __future__ import annotations

from textual.screen import Screen
from textual.widget import Widget


def toggle_zoom(screen: Screen) -> None:
    """Zoom the focused pane (focusing the first one if none is), or zoom back out."""
    if screen.maximized is not None:
        screen.minimize()
        return
    if screen.focused is None:
        screen.focus_next()
    focused = screen.focused
    if focused is None or screen.maximize(focused):
        return
    # a widget that cannot be maximized itself (a folded pane's line): its pane
    pane = next((w for w in focused.ancestors if isinstance(w, Widget) and w.allow_maximize),
                None)
    if pane is not None:
        screen.maximize(pane, container=False)
