"""The app with 64 simulated nodes x 8 ranks (agents replaying a recording over local pipes),
as pytest-benchmark runs it; tests/benchmarks/cluster_app.py is the script with the whole
report (and the lost node, and ``--nodes 128``).

One test, one set-up (64 agents take 10-20 s to start on 2 cores): every node live and all 512
ranks in the view, then

- the window (``RLTUI_BENCH_SECONDS``, default 20 s) of the app at its own 1 s cadence, measured
  as the script does it (full refresh per evaluation from the UI timer to the screen drawn, the
  monitor's CPU, the agents'); its numbers go to ``extra_info`` and are printed;
- pytest-benchmark's rounds: one synchronous update of the live 64-node state, as
  tests/benchmarks/test_ui_update.py times one for a single node: evaluate (the cluster core),
  hand the view to every pane, and every widget on screen drawing all its lines.

Asserted: the issue's 2 s for a full refresh (p95 of the window, and the mean of the rounds), and
that the cadence held (every evaluation drawn before the next). The CPU floor (25 % of one
core) is reported, not asserted: on the 2-core development machine the 64 agents and the
monitor share the cores with other work, and the numbers are in docs/performance.md.

A recording is made with the real recorder for each run (about 85 s) unless
``RLTUI_BENCH_RECORDING`` names one made by ``rltui record OUT --demo healthy --ranks 8`` (a
missing folder is recorded into and kept). Run:
``python -m pytest tests/benchmarks/test_cluster_app.py --benchmark-only -s``
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from textual.geometry import Region

from tests.benchmarks import cluster_app as bench

NODES = 64
SECONDS = float(os.environ.get("RLTUI_BENCH_SECONDS", "20"))
SETTLE_S = 5.0


def recording(tmp_path: Path) -> Path:
    given = os.environ.get("RLTUI_BENCH_RECORDING")
    folder = Path(given) if given else tmp_path / "recording"
    if not (folder / "scenario.json").exists():
        bench.record(folder, bench.STARTUP_ALLOWANCE_S + SETTLE_S + SECONDS)
    return folder


@pytest.mark.slow
@pytest.mark.timeout(600)  # a recording, 64 agents' start-up and the window
async def test_full_refresh_64_nodes_x_8_ranks(benchmark, tmp_path):
    # The recording is made here, after the benchmark fixture: with --benchmark-skip (the
    # default run) that fixture skips the test before anything is started.
    c = bench.Cluster(recording(tmp_path), NODES, tmp_path)
    try:
        async with c.app.run_test(size=bench.SIZE):
            watcher = asyncio.create_task(c.watch())
            try:
                await bench.all_up(c, 180.0)
                await bench.for_seconds(c.app, SETTLE_S)
                result = await bench.window(c, SECONDS)
                screen = c.app.main_screen
                assert screen.ranks.table.row_count == NODES * bench.PER_NODE

                def update() -> None:
                    c.app.tick()
                    for widget in screen._compositor.visible_widgets:
                        widget.render_lines(Region(0, 0, widget.size.width,
                                                   widget.size.height))

                benchmark.pedantic(update, rounds=10, iterations=1, warmup_rounds=1)
            finally:
                watcher.cancel()
    finally:
        c.close()
    benchmark.extra_info.update(result)
    print("\n" + bench.table({"all_live": result, "cores": os.cpu_count()}))
    assert result["not_drawn_before_next"] == 0
    assert result["refresh_s"]["p95"] <= bench.FLOOR_REFRESH_S
    assert benchmark.stats.stats.mean <= bench.FLOOR_REFRESH_S
