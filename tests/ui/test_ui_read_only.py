"""The read-only app (``rltui serve`` without --allow-actions; the hidden ``--read-only``): the
keys that change anything are hidden and inert, the palette leaves them out, the theme is
changed for the session but not saved. The same app without the flag does each of them, so
every check here can fail."""

from __future__ import annotations

import pytest

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.ui import build_app
from rltui.ui.commands import palette_commands
from rltui.ui.drivers import READ_ONLY_OFF
from rltui.ui.screens.check import CheckScreen
from tests.fakes.sources import FakeStackSource, live_bundle, procs_ok
from tests.ui.helpers import record_notes

FAST = Settings(cadence=Cadence(gpus=0.05, procs=0.05, ui=0.1),
                thresholds=Thresholds(stale_after_intervals=1000.0))
OFF_TITLES = ("Stacks: Dump every rank now", "Report: Write incident report",
              "Check: Rollout consistency", "Check: Agent workflow")


def make(tmp_path, read_only: bool):
    stacks = FakeStackSource("cleanup-deadlock")
    bundle = live_bundle(procs_ok(3)).with_stacks(stacks)  # on demand only: d is the one way
    app = build_app(bundle, FAST, config_path=tmp_path / "config.yaml", read_only=read_only)
    app.report_parent = tmp_path  # chosen already: `i` writes without asking
    app.report_folder = lambda now: "report"
    return app, stacks


def footer_keys(app) -> set[str]:
    return {b.binding.action for b in app.screen.active_bindings.values()
            if app.screen.check_action(b.binding.action, ()) is not False
            and app.check_action(b.binding.action, ()) is not False}


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "allowed"])
async def test_the_keys_that_change_anything(tmp_path, read_only):
    app, stacks = make(tmp_path, read_only)
    notes = record_notes(app)
    async with app.run_test(size=(200, 60)) as pilot:
        await app.wait_for_evaluation(after=0)
        titles = [t for t, _, _ in palette_commands(app)]
        assert all((t in titles) is not read_only for t in OFF_TITLES), titles
        assert all((app.check_action(a, ()) is False) is read_only for a in READ_ONLY_OFF)
        assert ("dump_stacks" in footer_keys(app)) is not read_only
        await pilot.press("d")
        await app.workers.wait_for_complete()
        assert stacks.on_demand == (0 if read_only else 1)
        await pilot.press("i")
        await pilot.pause()
        assert len(app.reports_written) == (0 if read_only else 1)
        assert (tmp_path / "report").exists() is not read_only
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CheckScreen) is not read_only
        if not read_only:
            await pilot.press("escape")
            await pilot.pause()
        before = app.theme
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != before  # the look changes in either case, for this session
        assert (tmp_path / "config.yaml").exists() is not read_only
        assert any(m.startswith(f"Theme {app.theme}, for this session: read-only")
                   for m in notes) is read_only, notes
        # what stays: the compare screen and the rest of the reading keys
        assert app.check_action("show_stacks", ()) is not False
        assert app.check_action("timeline", ()) is not False
