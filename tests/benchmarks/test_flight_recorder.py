"""The Flight Recorder dumps of 1,024 ranks x 2,000 records, read and analysed (floor: 1 s).

Run: python -m pytest tests/benchmarks/test_flight_recorder.py --benchmark-enable -s

The dumps are real: torch 2.13's own pickles of a gloo job whose buffer wrapped
(fixtures/flight_recorder/gloo-2.10-long: 2,000 records of two groups and three call sites),
rank 0's for ranks 0-1022 (pending all_reduce #1101) and rank 1's for rank 1023 (stopped before
it). Side by side, from the same run: what a user runs instead, torch's Flight Recorder loader
(``torch.distributed.flight_recorder.components.loader.read_dir``, the first step of ``fr_trace``:
a whole ``pickle.load`` of every file, nothing analysed yet). And the app's re-read of unchanged
dumps (each file stat'ed, none read again).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from rltui.diagnosis.flightrec import analyse
from rltui.sources.flightrec import FlightRecorderSource

RANKS = 1024
LONG = Path(__file__).resolve().parents[2] / "fixtures" / "flight_recorder" / "gloo-2.10-long"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    base = tmp_path_factory.mktemp("fr")
    for r in range(RANKS):
        src = LONG / ("nccl_trace_rank_1" if r == RANKS - 1 else "nccl_trace_rank_0")
        shutil.copyfile(src, base / f"nccl_trace_rank_{r}")
    return base


def read_and_analyse(folder: Path):
    poll = FlightRecorderSource([str(folder / "nccl_trace_rank_*")]).poll().payload
    return analyse(poll, expected_ranks=range(RANKS))


def test_read_and_analyse_1024_ranks(benchmark, folder):
    fa = benchmark.pedantic(read_and_analyse, args=(folder,), rounds=5, iterations=1)
    assert len(fa.dumps) == RANKS and all(d.total == 2000 for d in fa.dumps)
    assert fa.pattern == "C" and fa.suspects == (RANKS - 1,)
    ours = benchmark.stats.stats.median
    # the app's next polls: nothing changed, nothing read again
    source = FlightRecorderSource([str(folder / "nccl_trace_rank_*")])
    source.poll()
    t0 = time.perf_counter()
    source.poll()
    again = time.perf_counter() - t0
    # torch's own loader over the same files
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir
    args = JobConfig().parse_args([str(folder)])
    t0 = time.perf_counter()
    details, _ = read_dir(args)
    theirs = time.perf_counter() - t0
    assert len(details) == RANKS
    print(f"\nrltui read + analyse {RANKS} x 2000: {ours:.3f} s (median of 5); unchanged "
          f"re-poll {again:.3f} s; torch's fr_trace loader (load only) {theirs:.3f} s; "
          f"ratio {theirs / ours:.1f}x")
