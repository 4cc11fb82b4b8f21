"""Toasts that stay with the screen they were raised on.

Textual keeps one list of notifications for the whole app and shows it on whatever screen is
on top, so "Report written to ..." raised on the main screen follows the user into the stack
compare screen, and a compare-screen notice sits over the main screen after escape. Here each
toast remembers its screen: it shows while that screen is visible (on top, or under a modal
dialog), is kept with the time it has left while another screen covers it, and goes with its
screen when that screen is closed. A toast raised while the command palette is open is the
screen's below it; one raised before any screen is up shows everywhere.

Textual's public API does the work: ``notify`` posts a ``Notify`` message, the mixin's
``on_notify`` runs before the app's own handler and holds back a toast whose screen is covered
or closed by the time the message is handled, ``clear_notifications`` and the
``screen_change_signal`` regroup. One private hook is followed: the toast calls the app's
``_unnotify`` when it times out or is clicked away, so a dismissed toast is not raised again.

A toast is in one place at a time: on its way (its message posted, not handled yet), up, or
kept behind a covering screen. The regrouping only raises what is kept, so a toast on its way
is never raised twice, and expired ones are dropped whenever a toast arrives: a notice raised
every poll for hours keeps only those still up.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

from textual.app import App
from textual.notifications import Notification, Notify
from textual.screen import ModalScreen, Screen, SystemModalScreen

MIN_LEFT_S = 0.5  # a toast with less time than this left is not raised again


class _Toast(NamedTuple):
    note: Notification  # the last one raised for it: its raised_at and timeout give its time left
    screen: weakref.ReferenceType | None  # None: raised before any screen, shown on all
    up: bool = False  # in the app's notifications (False: kept while its screen is covered)


class ScreenToasts:
    """App mixin (before ``App`` in the bases): ``notify`` ties the toast to the current
    screen."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # notify is thread-safe in Textual (a worker may raise a toast): the toasts on their
        # way are the one thing shared with other threads; the rest is touched on the app's
        # loop only
        self._toasts_lock = threading.Lock()
        self._toasts_posted: dict[str, _Toast] = {}  # posted, not handled yet, by identity
        self._toasts: list[_Toast] = []  # up, or kept while their screen is covered
        self._toasts_shown_for: tuple[int, ...] = ()  # the visible screens at the last regroup

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        app: App = self  # type: ignore[assignment]
        if timeout is None:
            timeout = app.NOTIFICATION_TIMEOUT
        # The command palette (Textual's system dialog) raises nothing of its own, its commands
        # run once it has closed: a toast raised while it is open is the screen's below it.
        owner = next((s for s in reversed(app.screen_stack)
                      if not isinstance(s, SystemModalScreen)), None)
        # None: no screen yet, shown on every screen
        screen = weakref.ref(owner) if owner is not None else None
        # what App.notify does, with the notification kept to know it again in on_notify
        self._post(_Toast(Notification(message, title, severity, timeout, markup=markup), screen))

    def _post(self, toast: _Toast) -> None:
        with self._toasts_lock:
            self._toasts_posted[toast.note.identity] = toast
        app: App = self  # type: ignore[assignment]
        app.post_message(Notify(toast.note))

    def on_notify(self, event: Notify) -> None:
        """A toast's message, before the app's own handler: shown if its screen is visible
        now, else kept (its screen covered) or dropped (closed)."""
        with self._toasts_lock:
            toast = self._toasts_posted.pop(event.notification.identity, None)
        if toast is None:
            return  # not raised through notify: Textual's way
        up = self._shows(toast, self._visible_ids())
        stacked = self._stacked_ids()
        # the run-out ones go here, not only on a screen change: the list stays as long as
        # the toasts up or kept
        self._toasts = [t for t in self._toasts if self._alive(t, stacked)]
        if self._alive(toast, stacked):
            self._toasts.append(toast._replace(up=up))
        if not up:
            event.prevent_default()
            self._toasts_shown_for = ()  # the next regroup looks at it, whatever is visible

    def _unnotify(self, notification: Notification, refresh: bool = True) -> None:
        # Textual's toast calls this when it times out or is clicked away: forget it too
        self._toasts = [t for t in self._toasts if t.note.identity != notification.identity]
        super()._unnotify(notification, refresh)  # type: ignore[misc]

    # -- regrouping on a screen change ----------------------------------------------------------
    def watch_toasts(self) -> None:
        """Start following screen changes (call once, from on_mount)."""
        app: App = self  # type: ignore[assignment]
        self._toasts_shown_for = self._visible_ids()
        app.screen_change_signal.subscribe(app, self._screen_changed)

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

    def _stacked_ids(self) -> set[int]:
        app: App = self  # type: ignore[assignment]
        return {id(s) for s in app.screen_stack}

    @staticmethod
    def _shows(toast: _Toast, visible: tuple[int, ...]) -> bool:
        return toast.screen is None or id(toast.screen()) in visible

    @staticmethod
    def _alive(toast: _Toast, stacked: set[int]) -> bool:
        """Not run out, and its screen not closed."""
        return toast.note.time_left > 0 and (toast.screen is None
                                             or id(toast.screen()) in stacked)

    def _screen_changed(self, _screen: Screen) -> None:
        # After the next refresh: the new screen has mounted what Textual's own refresh gave
        # its toast rack (a toast still being mounted would escape the clearing).
        later: Callable[..., object] = self.call_after_refresh  # type: ignore[attr-defined]
        later(self._regroup)

    def _regroup(self) -> None:
        visible = self._visible_ids()
        if visible == self._toasts_shown_for:
            return  # the same screens: their toasts are on screen already
        self._toasts_shown_for = visible
        app: App = self  # type: ignore[assignment]
        toasts = self._toasts
        # Up, but its screen now covered or closed: take every toast down, then raise those
        # of the visible screens again. Nothing to take down (a dialog opened or closed over
        # the screen): the toasts up stay up, untouched (no blink), and only kept ones rise.
        down = any(t.up and t.note.time_left > 0 and not self._shows(t, visible)
                   for t in toasts)
        if down:
            app.clear_notifications()
        stacked = self._stacked_ids()
        kept: list[_Toast] = []
        for t in toasts:
            if not self._alive(t, stacked):
                continue  # run out, or its screen closed: it goes with it
            if not self._shows(t, visible):
                kept.append(t._replace(up=False))
            elif t.up and not down:
                kept.append(t)
            elif t.note.time_left > MIN_LEFT_S:
                # raised again as a new notification with the same clock: the time it had left
                n = t.note
                again = Notification(n.message, n.title, n.severity, n.timeout,
                                     markup=n.markup, raised_at=n.raised_at)
                self._post(t._replace(note=again, up=False))
        self._toasts = kept
