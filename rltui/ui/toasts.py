"""Toasts that stay with the screen they were raised on.

Textual keeps one list of notifications for the whole app and shows it on whatever screen is
on top, so "Report written to ..." raised on the main screen follows the user into the stack
compare screen, and a compare-screen notice sits over the main screen after escape. Here each
toast remembers its screen: it shows while that screen is visible (on top, or under a modal
dialog), is kept with the time it has left while another screen covers it, and goes with its
screen when that screen is closed. A toast raised before any screen is up shows everywhere.

Only Textual's public API is used: ``notify``, ``clear_notifications`` and the
``screen_change_signal``. On a change of the visible screens the app's toasts are cleared and
those of the visible screens raised again with their time left; the regrouping waits for the
next refresh, behind the notifications already posted, so one posted just before a screen
opens is not shown on the new screen.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from textual.app import App
from textual.screen import ModalScreen, Screen

MIN_LEFT_S = 0.5  # a toast with less time than this left is not raised again


class _Toast(NamedTuple):
    message: str
    title: str
    severity: Any  # Textual's SeverityLevel
    markup: bool
    deadline: float  # time.monotonic() when it expires
    screen: weakref.ReferenceType | None  # None: raised before any screen, shown on all


class ScreenToasts:
    """App mixin (before ``App`` in the bases): ``notify`` ties the toast to the current
    screen."""

    # notify is thread-safe in Textual (a worker may raise a toast): keep it so here
    _toasts_lock = threading.Lock()

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        app: App = self  # type: ignore[assignment]
        if timeout is None:
            timeout = app.NOTIFICATION_TIMEOUT
        try:
            screen: weakref.ReferenceType | None = weakref.ref(app.screen)
        except Exception:  # no screen yet (ScreenStackError): shown on every screen
            screen = None
        toast = _Toast(message, title, severity, markup, time.monotonic() + timeout, screen)
        with self._toasts_lock:
            self._toast_list().append(toast)
        super().notify(message, title=title, severity=severity,  # type: ignore[misc]
                       timeout=timeout, markup=markup)

    # -- regrouping on a screen change ----------------------------------------------------------
    def watch_toasts(self) -> None:
        """Start following screen changes (call once, from on_mount)."""
        app: App = self  # type: ignore[assignment]
        self._toasts_shown_for: tuple[int, ...] = self._visible_ids()
        app.screen_change_signal.subscribe(app, self._screen_changed)

    def _toast_list(self) -> list[_Toast]:
        try:
            return self._toasts
        except AttributeError:
            self._toasts: list[_Toast] = []
            return self._toasts

    def _visible(self) -> list[Screen]:
        """The screen on top and, under a modal dialog, the screens it lets through."""
        app: App = self  # type: ignore[assignment]
        shown: list[Screen] = []
        for screen in reversed(app.screen_stack):
            shown.append(screen)
            if not isinstance(screen, ModalScreen):
                break
        return shown

    def _visible_ids(self) -> tuple[int, ...]:
        return tuple(id(s) for s in self._visible())

    def _screen_changed(self, _screen: Screen) -> None:
        # After the next refresh: notifications posted before this change are handled first, and
        # the new screen has mounted what Textual's own refresh gave its toast rack (a toast
        # still being mounted would escape the clearing).
        later: Callable[..., object] = self.call_after_refresh  # type: ignore[attr-defined]
        later(self._regroup)

    def _regroup(self) -> None:
        visible = self._visible_ids()
        if visible == getattr(self, "_toasts_shown_for", ()):
            return  # the same screens: their toasts are on screen already
        self._toasts_shown_for = visible
        app: App = self  # type: ignore[assignment]
        stacked = {id(s) for s in app.screen_stack}
        now = time.monotonic()
        with self._toasts_lock:
            kept = [t for t in self._toast_list() if t.deadline - now > MIN_LEFT_S
                    and (t.screen is None or id(t.screen()) in stacked)]
            self._toasts = kept  # a closed screen's toasts go with it
        app.clear_notifications()
        for t in kept:
            if t.screen is None or id(t.screen()) in visible:
                super().notify(t.message, title=t.title,  # type: ignore[misc]
                               severity=t.severity, timeout=t.deadline - now, markup=t.markup)
