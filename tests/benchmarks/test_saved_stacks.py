"""Saved dumps read and classified, the whole process, against the json-parse floor.

Run: python -m pytest tests/benchmarks/test_saved_stacks.py --benchmark-enable -s
(add RLTUI_BENCH_65536=1 for the 65,536-file case: about a GB of files and minutes).

Each round of the ``*_whole_process`` cases is a fresh ``rltui diagnose --stacks PATH --json
--duration 0``, as a user would run it on what they saved: a folder of py-spy --json files, a
folder of py-spy text files, and one file holding every rank's text dump under Ray's line prefix
(a log with dumps inside). Target: 3 s each at 4,096.

``test_json_folder_against_the_floor`` runs, in the same session and alternately, the floor (a
script that only ``json.loads`` each file and groups the threads by their frames) and rltui's
whole process over the same folder; it prints the best CPU time (user + sys) and wall time of
each, their ratio and rltui's peak RSS, each child measured alone (``os.wait4`` in a small
launcher). Targets: at
most 1.5x the floor, at most 200 MiB at 65,536 files.

``test_json_folder_parse_and_merge`` is the parse path in one process (read the folder, merge,
classify) beside the floor's loop, without the interpreter's start-up: what the merge benchmark
(``test_stacks_merge.py``, Frame objects built directly) does not cover.

The children run with bytecode caching allowed (an installed rltui has its ``.pyc`` files); the
warm-up round writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

RANKS = 4096
DEPTH = 40
BIG = 65536
ROOT = Path(__file__).resolve().parents[2]

FLOOR = """
import json, os, sys
folder = sys.argv[1]
groups = {}
for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), "rb") as fh:
        doc = json.loads(fh.read())
    for t in doc:
        key = tuple((f["name"], f["filename"], f["line"]) for f in t["frames"])
        groups.setdefault(key, []).append(name)
print(len(groups))
"""


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


def _json_folder(folder: Path, ranks: int) -> Path:
    folder.mkdir()
    for r in range(ranks):
        (folder / f"rank{r}.json").write_text(_json(r))
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    base = tmp_path_factory.mktemp("saved")
    _json_folder(base / "json", RANKS)
    (base / "text").mkdir()
    for r in range(RANKS):
        (base / "text" / f"rank{r}.txt").write_text(_text(r))
    (base / "ray.log").write_text("".join(_text(r, f"(WorkerDict pid={10_000 + r}) ")
                                          for r in range(RANKS)))
    return base


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _diagnose_argv(path) -> list[str]:
    return [sys.executable, "-m", "rltui", "diagnose", "--stacks", str(path), "--json",
            "--duration", "0"]


def _diagnose(path) -> None:
    out = subprocess.run(_diagnose_argv(path), capture_output=True, text=True, check=False,
                         env=_env())
    doc = json.loads(out.stdout)
    assert doc["stacks"]["classes"], out.stderr


@pytest.mark.parametrize("form", ["json", "text", "ray.log"])
def test_saved_4096_dumps_whole_process(benchmark, saved, form):
    benchmark.pedantic(_diagnose, args=(saved / form,), rounds=3, warmup_rounds=1)


# -- against the floor -----------------------------------------------------------------------------

# A child's peak RSS counts what it was forked from (pytest's own memory, before the exec), so
# the measured process is forked by this small launcher, which reports its rusage alone.
LAUNCHER = """
import json, os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump([usage.ru_utime + usage.ru_stime, time.perf_counter() - t0, usage.ru_maxrss,
               os.waitstatus_to_exitcode(status)], fh)
"""


def _child(argv: list[str], out: Path) -> tuple[float, float, int, int]:
    """(CPU seconds user + sys, wall seconds, peak RSS in KiB, exit code) of one child alone."""
    figures = out.with_suffix(".usage")
    with open(out, "wb") as stdout, open(out.with_suffix(".err"), "wb") as stderr:
        subprocess.run([sys.executable, "-c", LAUNCHER, str(figures), *argv], stdout=stdout,
                       stderr=stderr, env=_env(), check=True)
    cpu, wall, rss, rc = json.loads(figures.read_text())
    return cpu, wall, rss, rc


def _against_floor(folder: Path, ranks: int, rounds: int, tmp: Path) -> dict:
    """Best of ``rounds`` for the floor and rltui over ``folder`` and over a folder of its first
    file alone (the start-up: the interpreter, and rltui importing itself), alternately."""
    one = tmp / "one"
    one.mkdir()
    first = min(os.listdir(folder))
    (one / first).write_bytes((folder / first).read_bytes())
    runs = {(who, where): [float("inf")] * 3 for who in ("floor", "rltui")
            for where in ("all", "one")}
    _child(_diagnose_argv(one), tmp / "warm.out")  # writes the bytecode
    _child([sys.executable, "-c", FLOOR, str(folder)], tmp / "warm.out")  # the page cache
    for _ in range(rounds):
        for (who, where), best in runs.items():
            path = folder if where == "all" else one
            argv = [sys.executable, "-c", FLOOR, str(path)] if who == "floor" \
                else _diagnose_argv(path)
            cpu, wall, rss, rc = _child(argv, tmp / f"{who}-{where}.out")
            assert rc in (0, 1), (tmp / f"{who}-{where}.err").read_text()[-2000:]
            runs[who, where] = [min(best[0], cpu), min(best[1], wall), min(best[2], rss)]
    doc = json.loads((tmp / "rltui-all.out").read_text())
    assert sum(c["count"] for c in doc["stacks"]["classes"]) == ranks
    (fc, fw, frss), (rc_, rw, rrss) = runs["floor", "all"], runs["rltui", "all"]
    f1, r1 = runs["floor", "one"][0], runs["rltui", "one"][0]
    figures = {"files": ranks, "floor_cpu_s": round(fc, 3), "floor_wall_s": round(fw, 3),
               "floor_rss_mib": round(frss / 1024, 1), "rltui_cpu_s": round(rc_, 3),
               "rltui_wall_s": round(rw, 3), "rltui_rss_mib": round(rrss / 1024, 1),
               "ratio_cpu": round(rc_ / fc, 2), "ratio_wall": round(rw / fw, 2),
               "floor_one_file_cpu_s": round(f1, 3), "rltui_one_file_cpu_s": round(r1, 3),
               "ratio_cpu_past_startup": round((rc_ - r1) / (fc - f1), 2)}
    print(f"\n{ranks} --json files, best of {rounds}: floor {fc:.2f} s CPU ({fw:.2f} s wall, "
          f"{frss / 1024:.0f} MiB); rltui {rc_:.2f} s CPU ({rw:.2f} s wall, "
          f"{rrss / 1024:.0f} MiB peak RSS); ratio {rc_ / fc:.2f}x CPU, {rw / fw:.2f}x wall. "
          f"One file: floor {f1:.2f} s, rltui {r1:.2f} s CPU (start-up); past start-up "
          f"{(rc_ - r1) / (fc - f1):.2f}x")
    return figures


def test_json_folder_against_the_floor(benchmark, saved, tmp_path):
    figures = benchmark.pedantic(_against_floor, args=(saved / "json", RANKS, 5, tmp_path),
                                 rounds=1, iterations=1)
    benchmark.extra_info.update(figures)


@pytest.mark.skipif(not os.environ.get("RLTUI_BENCH_65536"),
                    reason="writes 65,536 files (about 1 GB) and takes minutes: "
                           "set RLTUI_BENCH_65536=1")
def test_65536_json_files_against_the_floor(benchmark, tmp_path):
    folder = _json_folder(tmp_path / "json", BIG)
    figures = benchmark.pedantic(_against_floor, args=(folder, BIG, 2, tmp_path),
                                 rounds=1, iterations=1)
    benchmark.extra_info.update(figures)


# -- the parse path in one process -----------------------------------------------------------------

def _floor_in_process(folder: Path) -> int:
    groups: dict = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as fh:
            doc = json.loads(fh.read())
        for t in doc:
            key = tuple((f["name"], f["filename"], f["line"]) for f in t["frames"])
            groups.setdefault(key, []).append(name)
    return len(groups)


def _parse_and_merge(folder: Path):
    from rltui.diagnosis.stacks import classify, report_json
    from rltui.sources.dumpfolder import read_dump_folder
    dumps, _ = read_dump_folder(str(folder), rank_of_pid=lambda pid: None)
    report = classify([dumps])
    report_json(report)
    return report


def test_json_folder_parse_and_merge(benchmark, saved):
    folder = saved / "json"
    floor = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        _floor_in_process(folder)
        floor = min(floor, time.process_time() - t0)
    report = benchmark.pedantic(_parse_and_merge, args=(folder,), rounds=3, warmup_rounds=1)
    assert sum(len(c.members) for c in report.classes) == RANKS
    t0 = time.process_time()
    _parse_and_merge(folder)
    ours = time.process_time() - t0
    benchmark.extra_info.update(floor_cpu_s=round(floor, 3), rltui_cpu_s=round(ours, 3),
                                ratio_cpu=round(ours / floor, 2))
    print(f"\n{RANKS} --json files in one process: floor {floor:.3f} s CPU, read + merge + "
          f"classify {ours:.3f} s CPU ({ours / floor:.2f}x)")
