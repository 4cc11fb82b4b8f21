"""4,096 saved dumps read and classified, the whole process (target: 3 s each).

Run: python -m pytest tests/benchmarks/test_saved_stacks.py --benchmark-enable
Each round is a fresh ``rltui diagnose --stacks PATH --json --duration 0``, as a user would run
it on what they saved: a folder of py-spy --json files, a folder of py-spy text files, and one
file holding every rank's text dump under Ray's line prefix (a log with dumps inside).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

RANKS = 4096
DEPTH = 40


def _frames(rank: int) -> list[tuple[str, str, int]]:
    loop = [(f"Trainer.step_{i}", f"verl/trainer/layer_{i}.py", 10 + i) for i in range(DEPTH - 4)]
    op = "all_reduce" if rank % 64 else "broadcast"
    return [(op, "torch/distributed/distributed_c10d.py", 2501),
            ("wrapper", "torch/distributed/c10d_logger.py", 83),
            *loop, ("main", "train.py", 300), ("<module>", "train.py", 310)]


def _text(rank: int, prefix: str = "") -> str:
    pid = 10_000 + rank
    lines = [f"Process {pid}: python train.py", "Python v3.11.9 (/usr/bin/python3.11)", "",
             f'Thread {pid} (idle): "MainThread"']
    lines += [f"    {n} ({f}:{ln})" for n, f, ln in _frames(rank)]
    lines += [f"Thread {pid + 1} (idle): \"Thread-1\"", "    wait (threading.py:320)",
              "    _bootstrap (threading.py:1002)"]
    return "".join(f"{prefix}{line}\n" for line in lines)


def _json(rank: int) -> str:
    pid = 10_000 + rank
    return json.dumps([{"pid": pid, "thread_id": pid, "thread_name": "MainThread",
                        "os_thread_id": pid, "active": False, "owns_gil": False,
                        "frames": [{"name": n, "filename": f, "short_filename": f, "line": ln,
                                    "module": None, "locals": None} for n, f, ln in
                                   _frames(rank)]}])


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    base = tmp_path_factory.mktemp("saved")
    (base / "json").mkdir()
    (base / "text").mkdir()
    for r in range(RANKS):
        (base / "json" / f"rank{r}.json").write_text(_json(r))
        (base / "text" / f"rank{r}.txt").write_text(_text(r))
    (base / "ray.log").write_text("".join(_text(r, f"(WorkerDict pid={10_000 + r}) ")
                                          for r in range(RANKS)))
    return base


def _diagnose(path) -> None:
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--stacks", str(path),
                          "--json", "--duration", "0"], capture_output=True, text=True,
                         check=False)
    doc = json.loads(out.stdout)
    assert doc["stacks"]["classes"], out.stderr


@pytest.mark.parametrize("form", ["json", "text", "ray.log"])
def test_saved_4096_dumps_whole_process(benchmark, saved, form):
    benchmark.pedantic(_diagnose, args=(saved / form,), rounds=3, warmup_rounds=1)
