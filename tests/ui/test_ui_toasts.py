"""Toasts stay with their screen: a notice raised on the main screen is not shown over the
compare screen, comes back (with the time it had left) on escape, and a notice raised on a
screen that is then closed goes with it. Under a modal dialog the screen below keeps its
toasts."""

from __future__ import annotations

import asyncio

from textual.command import CommandPalette
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
        while any(t.note.message == "short" and t.note.time_left > 0 for t in app._toasts):
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.05)
        await pilot.press("escape")
        await shown(pilot, app, ["long"])


async def test_a_long_session_keeps_only_the_toasts_still_up(replay_app):
    """A notice raised every poll for hours, with no screen change: the toasts remembered are
    those still up, not every one ever raised."""
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        for n in range(500):
            app.notify(f"poll {n}", timeout=0)  # over as soon as raised
        app.notify("still up", timeout=60)
        await shown(pilot, app, ["still up"])
        assert len(app._toasts) <= 1


async def test_a_toast_clicked_away_does_not_come_back(replay_app):
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("click me away", timeout=60)
        await shown(pilot, app, ["click me away"])
        await pilot.click(Toast)
        await shown(pilot, app, [])
        await pilot.press("s")  # another screen, then back
        assert isinstance(app.screen, StacksScreen)
        await shown(pilot, app, [])
        await pilot.press("escape")
        await shown(pilot, app, [])


async def test_a_toast_still_on_its_way_is_shown_once(replay_app):
    """The regrouping runs on the screen's turn, the toast's message on the app's: a regroup
    that comes between a notify and its message (forced here, in that order) must not raise
    the toast a second time."""
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("on its way", timeout=60)  # its message not handled yet
        app.push_screen(AskFolder("Where?", "."))  # the main screen stays in view below
        app._regroup()
        await until_idle(pilot, lambda: isinstance(app.screen, AskFolder), "the dialog")
        await shown(pilot, app, ["on its way"])


async def test_closing_the_palette_leaves_the_toasts_up(replay_app):
    """The command palette is a dialog over the main screen: its toasts stay in view while it
    is open, and closing it changes nothing on the main screen, so they are not taken down and
    put up again (a blink)."""
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        app.notify("before the palette", timeout=60)
        await shown(pilot, app, ["before the palette"])
        (before,) = app.screen.query(Toast)
        await pilot.press("ctrl+p")
        await until_idle(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await shown(pilot, app, ["before the palette"])
        await pilot.press("escape")
        await until_idle(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
        await shown(pilot, app, ["before the palette"])
        (after,) = app.screen.query(Toast)
        assert after is before


async def test_a_toast_raised_while_the_palette_is_open_outlives_it(replay_app):
    """The palette raises no notice of its own (its commands run once it has closed): one
    raised while it is open (a dump finished, a worker failed) is the screen's below, and
    stays when the palette closes."""
    app = replay_app("cleanup_deadlock_with_stacks")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await pilot.press("e")
        await pilot.press("ctrl+p")
        await until_idle(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        app.notify("raised under the palette", timeout=60)
        await shown(pilot, app, ["raised under the palette"])
        await pilot.press("escape")
        await until_idle(pilot, lambda: isinstance(app.screen, MainScreen), "the main screen")
        await shown(pilot, app, ["raised under the palette"])
