"""Log following costs: opening a 2 GB log, and following 16 busy logs.

1. Open a 2 GB log and show its last step: FileTail creation, its first read (the last 4 MiB)
   and the step scan of that window, until the last StepRecord is in hand. Target: 0.5 s.
   The log is generated once (large writes) and kept in the temp directory for later runs;
   skipped with less than 5 GB of free disk.
2. Live cost: 16 files, each appended 100 lines/s by a writer process, LogSource polled every
   0.5 s for 20 s. CPU time of the polling process over wall time. Target: 3 % of one core.

Run: ``pytest tests/benchmarks/test_log_tail_cost.py --benchmark-only -s`` (pytest-benchmark
timings plus one JSON line per result), or as a script:
``python tests/benchmarks/test_log_tail_cost.py [open|live|all]``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":  # run as a script from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rltui.parsing.steps import scan_steps
from rltui.sources.logs import LogSource
from rltui.sources.tail import FileTail

BIG_SIZE = 2 << 30
FREE_NEEDED = 5 << 30
CACHE_DIR = Path(tempfile.gettempdir()) / "rltui-bench-logs"

CHATTER = ("(WorkerDict pid=2417) INFO 2026-03-01 12:00:00,000 worker.py:88] generate_sequences "
           "batch=256 prompt_len=512 response_len=1024 kv_cache_usage=0.83\n")


def _step_line(step: int) -> str:
    return (f"(TaskRunner pid=1234) step:{step} - actor/pg_loss:{-0.001 * (step % 7):.6f} - "
            f"actor/entropy:{0.5 + step % 3 * 0.01:.4f} - "
            f"critic/score/mean:{0.4 + step % 5 * 0.01:.4f} - "
            f"timing_s/step:{95.0 + step % 11:.3f} - response_length/mean:{512 + step % 13}\n")


def big_log() -> tuple[Path, int]:
    """A ~2 GB verl-style log (one step line per 20 lines); (path, last step)."""
    CACHE_DIR.mkdir(exist_ok=True)
    path = CACHE_DIR / "verl-2g.log"
    meta = CACHE_DIR / "verl-2g.json"
    if path.exists() and meta.exists():
        last = json.loads(meta.read_text()).get("last_step")
        if path.stat().st_size >= BIG_SIZE and last:
            return path, last
    step = 0
    with open(path, "wb") as f:
        written = 0
        while written < BIG_SIZE:
            block = []
            for _ in range(2000):
                step += 1
                block.append(_step_line(step) + CHATTER * 19)
            data = "".join(block).encode()
            f.write(data)
            written += len(data)
    meta.write_text(json.dumps({"last_step": step}))
    return path, step


def open_big_log(path: Path) -> tuple[float, int]:
    """Seconds from FileTail creation to the last StepRecord of the window; that step."""
    start = time.perf_counter()
    tail = FileTail(str(path))
    read = tail.read()
    chunk = "\n".join(text for _, text, _ in read.lines)
    steps = scan_steps(chunk, "auto", read.lines[0][0], time.time())
    elapsed = time.perf_counter() - start
    tail.close()
    return elapsed, steps[-1].step


def drop_cache(path: Path) -> bool:
    """Ask the kernel to forget the file's cached pages (a cold open); False if it cannot."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


# The writer: every 0.1 s, 10 lines to each file (100 lines/s/file); step lines now and then,
# torchrun rank prefixes, ANSI colour, a warning. Pacing by the clock is its job.
WRITER = r"""
import os, sys, time
paths = sys.argv[2:]
seconds = float(sys.argv[1])
fds = [os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) for p in paths]
chatter = ("INFO 2026-03-01 12:00:00,000 worker.py:88] generate_sequences batch=256 "
           "prompt_len=512 response_len=1024 kv_cache_usage=0.83")
n = 0
step = 0
start = time.monotonic()
tick = 0
sys.stdout.write("started\n"); sys.stdout.flush()
while time.monotonic() - start < seconds:
    for rank, fd in enumerate(fds):
        lines = []
        for k in range(10):
            i = n + k
            if i % 25 == 0:
                lines.append(f"[rank{rank}]:step:{i // 25} - actor/pg_loss:-0.0012 - "
                             f"actor/entropy:0.51 - critic/score/mean:0.42 - timing_s/step:97.1")
            elif i % 97 == 0:
                lines.append(f"[rank{rank}]:\x1b[33mWARNING\x1b[0m 12:00:00 slow rollout worker 3")
            else:
                lines.append(f"[rank{rank}]:{chatter} seq={i}")
        os.write(fd, ("\n".join(lines) + "\n").encode())
    n += 10
    tick += 1
    delay = start + tick * 0.1 - time.monotonic()
    if delay > 0:
        time.sleep(delay)
"""


def live_cost(seconds: float = 20.0, files: int = 16, interval: float = 0.5) -> dict:
    """CPU share of one core spent polling ``files`` logs growing 100 lines/s each."""
    workdir = Path(tempfile.mkdtemp(prefix="rltui-live-"))
    paths = [str(workdir / f"rank{r}.log") for r in range(files)]
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(seconds + 2.0), *paths],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline() == "started\n"
        source = LogSource([str(workdir / "*.log")])
        source.poll()  # the first look (history) is not the steady state
        lines = steps = polls = 0
        cpu0, wall0 = time.process_time(), time.monotonic()
        next_poll = wall0
        while time.monotonic() - wall0 < seconds:
            next_poll += interval
            delay = next_poll - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # the cadence the app polls at, not a wait for an event
            reading = source.poll()
            polls += 1
            for update in reading.payload.files:
                lines += len(update.lines)
                steps += len(update.steps)
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        source.close()
    finally:
        writer.wait(timeout=seconds + 30)
        shutil.rmtree(workdir, ignore_errors=True)
    return {"cpu_percent_of_one_core": round(100.0 * cpu / wall, 2), "seconds": round(wall, 1),
            "files": files, "polls": polls, "lines": lines, "steps": steps,
            "ms_per_poll": round(1000.0 * cpu / max(polls, 1), 2)}


def open_cost() -> dict:
    path, last_step = big_log()
    warm, step = min(open_big_log(path) for _ in range(3))
    assert step == last_step, (step, last_step)
    result = {"file_gb": round(path.stat().st_size / 2**30, 2), "last_step": step,
              "warm_seconds": round(warm, 4)}
    if drop_cache(path):
        result["cold_seconds"] = round(open_big_log(path)[0], 4)
    return result


def _enough_disk() -> bool:
    CACHE_DIR.mkdir(exist_ok=True)
    have = os.path.exists(CACHE_DIR / "verl-2g.log")
    return have or shutil.disk_usage(CACHE_DIR).free >= FREE_NEEDED


# -- pytest entry points (skipped unless benchmarks are enabled) ---------------------------------

def test_open_2gb_log_to_last_step(benchmark):
    import pytest

    if not _enough_disk():
        pytest.skip("needs 5 GB of free disk for the 2 GB log")
    path, last_step = big_log()
    elapsed, step = benchmark.pedantic(open_big_log, args=(path,), rounds=5, warmup_rounds=1)
    assert step == last_step
    print(json.dumps({"open_2gb_seconds": round(elapsed, 4), "last_step": step}))


def test_live_cost_16_files(benchmark):
    result = benchmark.pedantic(live_cost, rounds=1, iterations=1)
    benchmark.extra_info.update(result)
    print(json.dumps(result))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    if what in ("open", "all"):
        if _enough_disk():
            print(json.dumps({"open": open_cost()}))
        else:
            print(json.dumps({"open": "skipped: needs 5 GB of free disk"}))
    if what in ("live", "all"):
        print(json.dumps({"live": live_cost()}))
