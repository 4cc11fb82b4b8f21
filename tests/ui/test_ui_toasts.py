"""Toasts stay with their screen: a notice raised on the main screen is not shown over the
compare screen, comes back (with the time it had left) on escape, and a notice raised on a
screen that is then closed goes with it. Under a modal dialog the screen below keeps its
toasts."""

from __future__ import annotations

import asyncio
import time

from textual.widgets._toast import Toast

from rltui.ui.screens import MainScreen
from rltui.ui.screens.ask_folder import AskFolder
from rltui.ui.screens.stacks import StacksScreen
from tests.ui.helpers import until_idle


def toasts(app) -> list[str]:
    """The messages of the toasts drawn on the screen on top."""
    return [str(t._notification.message) for t in app.screen.query(Toast)]


async def shown(pilot, app, expected: list[str]) -> None:
    """Wait until the toasts are regrouped for the screens now visible and those on screen
    are ``expected``; still so once the app has handled what was pending."""
    def settled() -> bool:
        return (app._toasts_shown_for == app._visible_ids()
                and sorted(toasts(app)) == sorted(expected))
    await until_idle(pilot, settled, f"toasts {expected}")
    await pilot.pause()
    assert sorted(toasts(app)) == sorted(expected)


async def test_a_toast_stays_with_the_screen_it_was_raised_on(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("raised on the main screen", timeout=60)
        await shown(pilot, app, ["raised on the main screen"])
        await pilot.press("s")
        assert isinstance(app.screen, StacksScreen)
        await shown(pilot, app, [])
        app.notify("raised on the compare screen", timeout=60)
        await shown(pilot, app, ["raised on the compare screen"])
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        # the main screen's notice is back; the compare screen's went with that screen
        await shown(pilot, app, ["raised on the main screen"])
        left = [t._notification.time_left for t in app.screen.query(Toast)]
        assert 0 < left[0] <= 60
        await pilot.press("s")
        await shown(pilot, app, [])  # and not raised again on a new compare screen


async def test_a_modal_dialog_lets_the_screen_below_keep_its_toasts(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("before the dialog", timeout=60)
        await shown(pilot, app, ["before the dialog"])
        app.push_screen(AskFolder("Where?", "."))
        await until_idle(pilot, lambda: isinstance(app.screen, AskFolder), "the dialog")
        await shown(pilot, app, ["before the dialog"])


async def test_an_expired_toast_is_not_raised_again(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("short", timeout=0.2)
        app.notify("long", timeout=60)
        await shown(pilot, app, ["short", "long"])
        await pilot.press("s")
        await shown(pilot, app, [])
        # wait on the short one's own expiry, not a guessed pause
        deadline = asyncio.get_running_loop().time() + 5
        while any(t.message == "short" and t.deadline > time.monotonic() for t in app._toasts):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        await pilot.press("escape")
        await shown(pilot, app, ["long"])
