"""The monitor's own CPU while it watches a job (target: at most 3 % of one core).

Starts a demo job of N ranks in its own process (its process-group store is not the monitor's
cost), then the monitor in a real terminal (tmux, 200x60) watching it with default discovery and
eight fake NVML GPUs (this machine has none; see watch_with_fake_gpus.py). After a settling
period it reads the CPU time of the monitor process alone over the measuring window.
With --demo-app it measures `rltui demo` instead, whose process also hosts the demo's store.

    python tests/benchmarks/monitor_cpu.py [--seconds 60] [--ranks 8] [--scenario healthy]

Prints one line of JSON: cpu_percent_of_one_core (the monitor process), children_cpu_percent
(the py-spy dumps it ran in the window), seconds, ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil


def find_monitor(session: str, deadline: float) -> psutil.Process:
    pane_pid = int(subprocess.check_output(
        ["tmux", "display-message", "-p", "-t", session, "#{pane_pid}"], text=True))
    while time.monotonic() < deadline:
        for proc in [psutil.Process(pane_pid), *psutil.Process(pane_pid).children(recursive=True)]:
            try:
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            if (any(part.endswith("rltui") for part in cmd[:2]) or cmd[1:3] == ["-m", "rltui"]
                    or any(part.endswith("watch_with_fake_gpus.py") for part in cmd[:2])):
                return proc
        time.sleep(0.2)
    raise SystemExit("rltui did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--scenario", default="healthy")
    ap.add_argument("--settle", type=float, default=5.0)
    ap.add_argument("--width", type=int, default=200)
    ap.add_argument("--height", type=int, default=60)
    ap.add_argument("--demo-app", action="store_true")
    ap.add_argument("--config", help="YAML config for the monitor (e.g. other cadences)")
    args = ap.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("needs tmux")
    session = f"rltui-bench-{os.getpid()}"
    config = args.config or os.path.join(tempfile.mkdtemp(), "config.yaml")
    job = None
    if args.demo_app:
        cmd = (f"RLTUI_CONFIG={config} {sys.executable} -m rltui demo --ranks {args.ranks} "
               f"--scenario {args.scenario}")
    else:
        job = subprocess.Popen([sys.executable, "-m", "rltui.demo.job", "--ranks",
                                str(args.ranks), "--scenario", args.scenario],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        json.loads(job.stdout.readline())  # the job prints its pids once the ranks run
        here = os.path.dirname(os.path.abspath(__file__))
        cmd = (f"RLTUI_CONFIG={config} {sys.executable} -m rltui.__main__ --version >/dev/null;"
               f" RLTUI_CONFIG={config} exec {sys.executable} "
               f"{os.path.join(here, 'watch_with_fake_gpus.py')}")
    subprocess.check_call(["tmux", "new-session", "-d", "-s", session, "-x", str(args.width),
                           "-y", str(args.height), cmd])
    try:
        proc = find_monitor(session, time.monotonic() + 30)
        time.sleep(args.settle)  # a benchmark window, not a wait for an event
        # Own CPU, and that of the children it waited for: the py-spy dumps it runs.
        c0 = proc.cpu_times()
        w0 = time.monotonic()
        time.sleep(args.seconds)
        c1 = proc.cpu_times()
        w1 = time.monotonic()
        t0, t1 = sum(c0[:2]), sum(c1[:2])
        k0, k1 = sum(c0[2:4]), sum(c1[2:4])
    finally:
        subprocess.call(["tmux", "send-keys", "-t", session, "q"])
        time.sleep(2)
        subprocess.call(["tmux", "kill-session", "-t", session], stderr=subprocess.DEVNULL)
        if job is not None:
            job.terminate()
            job.wait(10)
    print(json.dumps({"cpu_percent_of_one_core": round(100 * (t1 - t0) / (w1 - w0), 2),
                      "children_cpu_percent": round(100 * (k1 - k0) / (w1 - w0), 2),
                      "seconds": round(w1 - w0, 1), "ranks": args.ranks,
                      "scenario": args.scenario, "terminal": f"{args.width}x{args.height}",
                      "monitor": "rltui demo" if args.demo_app else "live, 8 fake NVML GPUs"}))


if __name__ == "__main__":
    main()
