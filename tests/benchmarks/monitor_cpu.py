"""The monitor's own CPU and memory while it watches a job, beside nvitop and gpustat.

Starts a demo job of N ranks in its own process (its process-group store is not the monitor's
cost), then, each in its own real terminal (tmux, 200x60) and all over the same window: rltui
(`python -m rltui`, default discovery), and the peers nvitop and gpustat at the same 1 s
interval. Every tool imports the same ``pynvml``: the project's NVML fake behind a shim
(nvml_shim/pynvml.py), eight GPUs with the job's ranks on them; processes, psutil, logs, py-spy,
the UI and the terminal are real. After a settling period it reads each process's CPU time over
the window, and its resident memory at the end. A peer that cannot be imported is skipped, with
the reason (install them with the project's `bench` dependency group).

    python tests/benchmarks/monitor_cpu.py [--seconds 60] [--ranks 8] [--rounds off|on]
        [--peers nvitop,gpustat] [--no-job]

``--rounds off`` sets py-spy's periodic interval to 0 (no rounds), ``on`` keeps the configured
one (10 s by default). ``--no-job`` watches the GPUs alone. With --demo-app it measures
`rltui demo` alone instead, whose process also hosts the demo's store.

Prints one line of JSON: per tool cpu_percent_of_one_core, children_cpu_percent (for rltui the
py-spy dumps it ran in the window), rss_mib; rltui's figures also at the top level
(cpu_percent_of_one_core, children_cpu_percent) and each peer's CPU as a ratio to rltui's.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SHIM = os.path.join(HERE, "nvml_shim")
PEERS = {"nvitop": ["-m", "nvitop", "--interval", "1"],
         "gpustat": ["-m", "gpustat", "--interval", "1"]}


def find_tool(session: str, marker: tuple[str, ...], deadline: float) -> psutil.Process:
    pane_pid = int(subprocess.check_output(
        ["tmux", "display-message", "-p", "-t", session, "#{pane_pid}"], text=True))
    while time.monotonic() < deadline:
        try:
            procs = [psutil.Process(pane_pid), *psutil.Process(pane_pid).children(recursive=True)]
        except psutil.Error:
            procs = []
        for proc in procs:
            try:
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            if tuple(cmd[1:1 + len(marker)]) == marker:
                return proc
        time.sleep(0.2)
    raise SystemExit(f"{' '.join(marker)} did not start in {session}")


def peer_missing(name: str) -> str | None:
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        return f"cannot import {name}: {exc}"
    return None if found is not None else \
        f"{name} is not installed (pip install the project's bench dependency group)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--settle", type=float, default=8.0)
    ap.add_argument("--width", type=int, default=200)
    ap.add_argument("--height", type=int, default=60)
    ap.add_argument("--rounds", choices=("on", "off"), default="on",
                    help="py-spy's periodic rounds (off: pyspy.interval 0)")
    ap.add_argument("--peers", default="nvitop,gpustat",
                    help="comma-separated peers measured beside rltui ('' for none)")
    ap.add_argument("--no-job", action="store_true", help="watch the fake GPUs, no job")
    ap.add_argument("--demo-app", action="store_true")
    ap.add_argument("--config", help="YAML config for the monitor (e.g. other cadences)")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux")
    config = args.config or os.path.join(tempfile.mkdtemp(), "config.yaml")
    if not args.config and args.rounds == "off":
        with open(config, "w") as fh:
            fh.write("pyspy:\n  interval: 0\n")
    job, pids = None, []
    if not (args.demo_app or args.no_job):
        job = subprocess.Popen([sys.executable, "-m", "rltui.demo.job", "--ranks",
                                str(args.ranks), "--scenario", args.scenario],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
        started = json.loads(job.stdout.readline())  # the job prints its pids once ranks run
        pids = [int(p) for p in started.get("pids", started.get("ranks", []))] \
            if isinstance(started, dict) else [int(p) for p in started]
    env = (f"PYTHONPATH={SHIM}:{ROOT} RLTUI_CONFIG={config} "
           f"RLTUI_FAKE_GPU_PIDS={','.join(map(str, pids))}")
    tools: dict[str, tuple[str, tuple[str, ...]]] = {}
    skipped: dict[str, str] = {}
    if args.demo_app:
        tools["rltui"] = (f"{env} exec {sys.executable} -m rltui demo --ranks {args.ranks} "
                          f"--scenario {args.scenario}", ("-m", "rltui"))
    else:
        tools["rltui"] = (f"{env} exec {sys.executable} -m rltui", ("-m", "rltui"))
        for name in [p for p in args.peers.split(",") if p]:
            reason = peer_missing(name)
            if reason:
                skipped[name] = reason
                continue
            argv = PEERS[name]
            tools[name] = (f"{env} TERM=xterm-256color exec {sys.executable} {' '.join(argv)}",
                           tuple(argv[:2]))
    sessions = {name: f"rltui-bench-{os.getpid()}-{name}" for name in tools}
    results: dict[str, dict] = {}
    try:
        for name, (cmd, _marker) in tools.items():
            subprocess.check_call(["tmux", "new-session", "-d", "-s", sessions[name], "-x",
                                   str(args.width), "-y", str(args.height), cmd])
        procs = {name: find_tool(sessions[name], marker, time.monotonic() + 30)
                 for name, (_cmd, marker) in tools.items()}
        time.sleep(args.settle)  # a benchmark window, not a wait for an event
        # Own CPU, and that of the children it waited for (rltui: the py-spy dumps it runs).
        c0 = {name: proc.cpu_times() for name, proc in procs.items()}
        w0 = time.monotonic()
        time.sleep(args.seconds)
        c1 = {name: proc.cpu_times() for name, proc in procs.items()}
        w1 = time.monotonic()
        # What rltui watched: default discovery also finds any other job on the machine (a
        # test's demo job), which a measurement of this job alone must not include.
        screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", sessions["rltui"]],
                                capture_output=True, text=True, check=False).stdout
        seen = re.search(r"Ranks \((\d+) running", screen)
        for name, proc in procs.items():
            own = sum(c1[name][:2]) - sum(c0[name][:2])
            kids = sum(c1[name][2:4]) - sum(c0[name][2:4])
            results[name] = {"cpu_percent_of_one_core": round(100 * own / (w1 - w0), 2),
                             "children_cpu_percent": round(100 * kids / (w1 - w0), 2),
                             "rss_mib": round(proc.memory_info().rss / 2**20, 1)}
    finally:
        for session in sessions.values():
            subprocess.call(["tmux", "send-keys", "-t", session, "q"],
                            stderr=subprocess.DEVNULL)
        time.sleep(2)
        for session in sessions.values():
            subprocess.call(["tmux", "kill-session", "-t", session], stderr=subprocess.DEVNULL)
        if job is not None:
            job.terminate()
            job.wait(10)
    mine = results["rltui"]
    for name, figures in results.items():
        if name != "rltui" and mine["cpu_percent_of_one_core"]:
            figures["cpu_ratio_to_rltui"] = round(
                figures["cpu_percent_of_one_core"] / mine["cpu_percent_of_one_core"], 2)
    print(json.dumps({**{k: mine[k] for k in ("cpu_percent_of_one_core",
                                               "children_cpu_percent", "rss_mib")},
                      "tools": results, "skipped": skipped,
                      "seconds": round(w1 - w0, 1), "ranks": 0 if args.no_job else args.ranks,
                      "ranks_on_screen": int(seen.group(1)) if seen else None,
                      "rounds": args.rounds, "scenario": args.scenario,
                      "terminal": f"{args.width}x{args.height}",
                      "monitor": "rltui demo" if args.demo_app else "live, 8 fake NVML GPUs"}))


if __name__ == "__main__":
    main()
