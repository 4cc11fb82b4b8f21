"""One UI update for 64 GPUs and 512 ranks must take at most 50 ms.

An update is what the live app does per tick: fold the newest GPU and process readings
(``ReadingArrived``), evaluate (snapshot + diagnosis), hand the view to every pane, and draw the
panes' lines as the next frame will (the tables format a row only when it is drawn, so the
drawing is where their cost is). The readings alternate between two states so that every tick
really changes cells (GPU util, memory, sparklines, CPU %). Run with ``--benchmark-enable`` (the default config skips
benchmarks): ``pytest --benchmark-only -p no:randomly tests/benchmarks/test_ui_update.py``.
"""

from __future__ import annotations

from textual.geometry import Region

from rltui.config import Cadence, Settings
from rltui.model import replace
from rltui.ui import build_app
from rltui.ui.messages import ReadingArrived
from tests.fakes.scenarios import big_readings
from tests.fakes.sources import FakeSource, live_bundle

BUDGET_S = 0.050


class Clock:
    def __init__(self) -> None:
        self.now = 2_000_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_one_ui_update_64_gpus_512_ranks(benchmark, tmp_path):
    readings = list(big_readings(gpus=64, ranks=512, duration=1))
    states = [readings[0:2], readings[2:4]]  # (gpus, procs) at two moments
    gpus = FakeSource("gpus", lambda n: states[0][0])
    procs = FakeSource("procs", lambda n: states[0][1])
    # Timers that never fire on their own: the benchmark drives every update itself.
    bundle = live_bundle(gpus, procs, interval=3600.0)
    app = build_app(bundle, Settings(cadence=Cadence(ui=3600.0)),
                    config_path=tmp_path / "config.yaml")
    clock = Clock()
    app.clock = clock
    async with app.run_test(size=(200, 60)) as pilot:
        await app.wait_for_evaluation(after=0, timeout=30)
        await pilot.pause()
        assert app.main_screen.ranks.table.row_count == 512
        assert app.main_screen.gpus.table.row_count == 64
        screen = app.main_screen
        panes = (screen.header, screen.gpus.table, screen.ranks.table, screen.symptoms.options,
                 screen.symptoms.detail)
        tick = 0

        def update() -> None:
            nonlocal tick
            tick += 1
            clock.now += 1.0
            for reading in states[tick % 2]:
                app.on_reading_arrived(ReadingArrived(replace(reading, timestamp=clock.now)))
            app.tick()
            for widget in panes:
                widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))

        benchmark.pedantic(update, rounds=40, iterations=1, warmup_rounds=3)
        await pilot.pause()
        cpu = app.main_screen.ranks.table.get_cell("p10000", "cpu").text
        assert cpu.endswith("%")
    assert benchmark.stats.stats.mean <= BUDGET_S, (
        f"one UI update took {benchmark.stats.stats.mean * 1000:.1f} ms on average")
