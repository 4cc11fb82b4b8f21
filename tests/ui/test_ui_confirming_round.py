"""A suspected hang confirms itself in the app: after a first stack round that suggests a hang,
a second round is taken a sample gap later, before the next periodic one (minutes away here),
and the verdict rests on both. The stack source is a fake fed with real saved py-spy dumps of a
cleanup deadlock; waits are on evaluations, never sleeps."""

from __future__ import annotations

import time

from rltui.config import Cadence, Settings
from rltui.diagnosis.thresholds import Thresholds
from rltui.ui import build_app
from tests.fakes.sources import FakeStackSource, live_bundle, procs_ok

GAP = 0.3
SETTINGS = Settings(cadence=Cadence(gpus=0.05, procs=0.05, ui=0.1),
                    thresholds=Thresholds(stale_after_intervals=1000.0, stack_sample_gap_s=GAP))
WAIT = 30.0  # a safety net on a loaded machine, not a bound anything is held to


def make(tmp_path, stacks: FakeStackSource, interval: float):
    bundle = live_bundle(procs_ok(3)).with_stacks(stacks, interval)
    return build_app(bundle, SETTINGS, config_path=tmp_path / "config.yaml")


async def test_a_suspected_hang_gets_a_second_round_before_the_periodic_one(tmp_path):
    stacks = FakeStackSource("cleanup-deadlock")
    app = make(tmp_path, stacks, interval=600.0)
    async with app.run_test(size=(200, 60)):
        deadline = time.monotonic() + WAIT
        view = await app.wait_for_evaluation(after=0, timeout=WAIT)
        while view.stacks is None or view.stacks.samples < 2:
            assert time.monotonic() < deadline, "no confirming round"
            view = await app.wait_for_evaluation(app.evaluations, timeout=WAIT)
        assert stacks.polls == 2 and app.driver.confirm_rounds == 1  # the first, then the confirming
        assert view.stacks.confirmed and view.stacks.pattern == "A"
        hang = next(s for s in view.diagnosis.symptoms if s.id == "hang-cleanup-deadlock")
        assert hang.severity == "critical"
        # once confirmed, nothing more is asked until the periodic round
        for _ in range(5):
            await app.wait_for_evaluation(app.evaluations, timeout=WAIT)
        assert stacks.polls == 2 and app.driver.confirm_rounds == 1


async def test_no_confirming_round_when_the_periodic_one_comes_soon(tmp_path):
    stacks = FakeStackSource("cleanup-deadlock")
    app = make(tmp_path, stacks, interval=GAP)  # every gap anyway
    async with app.run_test(size=(200, 60)):
        view = await app.wait_for_evaluation(after=0, timeout=WAIT)
        while view.stacks is None:
            view = await app.wait_for_evaluation(app.evaluations, timeout=WAIT)
        assert app.driver.confirm_rounds == 0


async def test_a_confirming_round_already_due_when_the_hang_is_read_still_comes(tmp_path):
    """The evaluation that reads the hang can come later than a sample gap after the first
    round (a loaded machine): the confirming round is then due at once and must still be taken
    (a zero-delay timer once lost it)."""
    stacks = FakeStackSource("cleanup-deadlock")
    settings = Settings(cadence=SETTINGS.cadence, thresholds=Thresholds(
        stale_after_intervals=1000.0, stack_sample_gap_s=1e-6))  # due before it is asked for
    bundle = live_bundle(procs_ok(3)).with_stacks(stacks, 600.0)
    app = build_app(bundle, settings, config_path=tmp_path / "config.yaml")
    async with app.run_test(size=(200, 60)):
        deadline = time.monotonic() + WAIT
        view = await app.wait_for_evaluation(after=0, timeout=WAIT)
        while view.stacks is None or view.stacks.samples < 2:
            assert time.monotonic() < deadline, "no confirming round"
            view = await app.wait_for_evaluation(app.evaluations, timeout=WAIT)
        assert stacks.polls == 2 and app.driver.confirm_rounds == 1
