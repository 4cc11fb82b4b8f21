"""The agent's own CPU with the default cadences (GPUs, processes and logs every 1 s, py-spy
rounds every 10 s), as a multi-node rltui would start it on each node.

Starts ``rltui agent`` with pipes and an empty config folder (the defaults), reads its stdout
like a consumer would, lets it settle, then reads the CPU time of the agent process (and of the
py-spy children it waited for) over the measuring window, and ends it with a stop request.
With ``--ranks N`` it first starts N rank-like processes (RANK in their environment, each
writing a log line every 0.5 s to its own stdout file) so the agent has a job to follow and
dump; the default, 0, is an idle node.

    python tests/benchmarks/agent_cpu.py [--seconds 30] [--ranks 0]

Prints one line of JSON: cpu_percent_of_one_core (the agent process), children_cpu_percent
(py-spy), lines and bytes per second on stdout, seconds, ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
RANK = ("import time, sys\nwhile True:\n"
        "    print(f'step {int(time.time())} loss 0.5', flush=True)\n    time.sleep(0.5)\n")


def start_ranks(n: int, folder: Path) -> list[subprocess.Popen]:
    procs = []
    for rank in range(n):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "RANK": str(rank),
               "LOCAL_RANK": str(rank), "WORLD_SIZE": str(n), "LOCAL_WORLD_SIZE": str(n)}
        with open(folder / f"rank{rank}.out", "wb") as out:
            procs.append(subprocess.Popen([os.path.realpath(sys.executable), "-c", RANK],
                                          env=env, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT))
    return procs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--ranks", type=int, default=0)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="rltui-agent-bench-"))
    ranks = start_ranks(args.ranks, folder)
    env = {k: v for k, v in os.environ.items() if k not in ("RLTUI_CONFIG", "RANK")}
    env["XDG_CONFIG_HOME"] = str(folder)  # no config there: the default cadences
    agent = subprocess.Popen([sys.executable, "-m", "rltui.cli", "agent"], cwd=REPO, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
    counts = {"lines": 0, "bytes": 0}
    hello = threading.Event()

    def consume() -> None:  # what rltui does with the stream, minus the decoding
        for line in agent.stdout:
            counts["lines"] += 1
            counts["bytes"] += len(line)
            hello.set()

    threading.Thread(target=consume, daemon=True).start()
    try:
        if not hello.wait(30):
            raise SystemExit("the agent did not say hello")
        proc = psutil.Process(agent.pid)
        time.sleep(args.settle)  # a benchmark window, not a wait for an event
        c0, w0, l0, b0 = proc.cpu_times(), time.monotonic(), counts["lines"], counts["bytes"]
        time.sleep(args.seconds)
        c1, w1, l1, b1 = proc.cpu_times(), time.monotonic(), counts["lines"], counts["bytes"]
    finally:
        try:
            agent.stdin.write(b'{"v": 1, "id": "bench", "op": "stop"}\n')
            agent.stdin.flush()
        except OSError:
            pass
        agent.wait(30)
        for rank in ranks:
            rank.kill()
            rank.wait()
    wall = w1 - w0
    print(json.dumps({
        "cpu_percent_of_one_core": round(100 * (sum(c1[:2]) - sum(c0[:2])) / wall, 2),
        "children_cpu_percent": round(100 * (sum(c1[2:4]) - sum(c0[2:4])) / wall, 2),
        "lines_per_s": round((l1 - l0) / wall, 1), "bytes_per_s": round((b1 - b0) / wall),
        "seconds": round(wall, 1), "ranks": args.ranks,
        "cadences": "defaults: gpus/procs/logs 1 s, py-spy every 10 s"}))


if __name__ == "__main__":
    main()
