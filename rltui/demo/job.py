"""Launch the demo job: a store thread plus ``ranks`` rank processes, as torchrun would.

No rank outlives the launcher, however it ends:
- ``stop()`` (also the context manager and an ``atexit`` hook): SIGTERM, then SIGKILL, then reap;
- launcher killed (SIGKILL, or SIGTERM/SIGHUP with default handlers): every rank armed
  PR_SET_PDEATHSIG, and its store connection closes with the process;
- Ctrl-C in the terminal: ranks run in their own sessions, so only the launcher sees it, and its
  ``atexit`` hook stops them.

PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process. The ranks
are therefore spawned from a keeper thread that lives until ``stop()``, so that a caller on a
short-lived worker thread (a Textual worker, say) does not kill the job when it returns.

The run directory (logs, state files) is kept after ``stop()`` so its logs can still be read;
it is a fresh temporary directory unless ``run_dir`` is given.

Run standalone: ``python -m rltui.demo.job --scenario stall --ranks 4`` (Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from rltui.demo.scenarios import MAX_RANKS, MIN_RANKS, SCENARIOS, Scenario, check_name
from rltui.demo.store import StoreServer

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds ``rltui``


def read_rank_state(path: Path) -> dict[str, Any] | None:
    """A rank's published state, or None while it is missing or unreadable."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


class DemoJob:
    def __init__(self, scenario: str = "healthy", ranks: int = 4, run_dir: str | Path | None = None,
                 python: str = sys.executable, fail_step: int = 3, step_seconds: float = 1.0):
        self.scenario = check_name(scenario)
        if isinstance(ranks, bool) or not isinstance(ranks, int) \
                or not MIN_RANKS <= ranks <= MAX_RANKS:
            raise ValueError(f"ranks must be an integer from {MIN_RANKS} to {MAX_RANKS}, "
                             f"got {ranks!r}")
        if fail_step < 1:
            raise ValueError(f"fail_step must be 1 or more, got {fail_step!r}")
        if not step_seconds > 0:
            raise ValueError(f"step_seconds must be positive, got {step_seconds!r}")
        self.ranks = ranks
        self.python = python
        self.fail_step = fail_step
        self.step_seconds = step_seconds
        self.created_run_dir = run_dir is None
        self.run_dir = Path(tempfile.mkdtemp(prefix="rltui-demo-") if run_dir is None else run_dir)
        self._procs: list[subprocess.Popen] = []
        self.rank_args: list[str] = []  # the ranks' arguments (the OOM scenario's config)
        self._store: StoreServer | None = None
        self._keeper: threading.Thread | None = None
        self._release = threading.Event()
        self._spawned = threading.Event()
        self._spawn_error: BaseException | None = None
        self._stopped = False

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self) -> DemoJob:
        if self._keeper is not None:
            raise RuntimeError("this demo job was already started")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.scenario == "oom":  # configured as a verl run, so the triage has values to read
            from rltui.demo import jobconfig
            self.rank_args = jobconfig.write(self.run_dir)
        spec = Scenario(self.scenario, self.ranks, self.fail_step)
        self._store = StoreServer(self.ranks, stall_at_all_reduce=spec.stall_at_all_reduce).start()
        atexit.register(self.stop)
        self._keeper = threading.Thread(target=self._keep, name="rltui-demo-ranks", daemon=True)
        self._keeper.start()
        self._spawned.wait()
        if self._spawn_error is not None:
            self.stop()
            raise self._spawn_error
        (self.run_dir / "job.json").write_text(json.dumps({
            "scenario": self.scenario, "ranks": self.ranks, "fail_step": self.fail_step,
            "step_seconds": self.step_seconds, "master_port": self.master_port,
            "launcher_pid": os.getpid(), "pids": self.pids}, indent=1))
        return self

    def _keep(self) -> None:
        try:
            for rank in range(self.ranks):
                self._procs.append(self._spawn(rank))
        except BaseException as exc:  # noqa: BLE001 - handed to start() on the caller's thread
            self._spawn_error = exc
        self._spawned.set()
        # Reap ranks as they exit, as torchrun does, so an exited rank is gone, not a zombie.
        while not self._release.wait(0.5):
            for proc in self._procs:
                proc.poll()

    def _spawn(self, rank: int) -> subprocess.Popen:
        env = dict(os.environ)
        env.update({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "GROUP_RANK": "0",
            "ROLE_RANK": str(rank), "ROLE_NAME": "default",
            "WORLD_SIZE": str(self.ranks), "LOCAL_WORLD_SIZE": str(self.ranks),
            "ROLE_WORLD_SIZE": str(self.ranks),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.master_port),
            "TORCHELASTIC_RUN_ID": f"rltui-demo-{os.getpid()}",
            "RLTUI_DEMO_SCENARIO": self.scenario, "RLTUI_DEMO_DIR": str(self.run_dir),
            "RLTUI_DEMO_FAIL_STEP": str(self.fail_step),
            "RLTUI_DEMO_STEP_SECONDS": repr(self.step_seconds),
            "RLTUI_DEMO_LAUNCHER_PID": str(os.getpid()),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p),
        })
        with open(self.log_path(rank), "ab") as log:  # the child keeps its own descriptor
            return subprocess.Popen(
                [self.python, "-m", "rltui.demo.rank", *self.rank_args], stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env, cwd=self.run_dir, start_new_session=True)

    def stop(self, timeout: float = 3.0) -> None:
        """SIGTERM every live rank, SIGKILL those left after ``timeout`` s, reap; stop the store."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for proc in self._procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._signal_all(signal.SIGKILL)
        for proc in self._procs:
            proc.wait()
        self._release.set()
        if self._keeper is not None:
            self._keeper.join(timeout=2.0)
        if self._store is not None:
            self._store.stop()

    def _signal_all(self, sig: int) -> None:
        for proc in self._procs:
            if proc.poll() is None:  # not reaped, so the pid is still ours
                try:
                    os.killpg(proc.pid, sig)  # the rank leads its own session and group
                except ProcessLookupError:
                    pass

    def __enter__(self) -> DemoJob:
        return self if self._keeper is not None else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the monitor and the tests read ----------------------------------------------------

    @property
    def master_port(self) -> int:
        if self._store is None:
            raise RuntimeError("the demo job is not started")
        return self._store.port

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def rank_pids(self) -> dict[int, int]:
        return {rank: p.pid for rank, p in enumerate(self._procs)}

    def log_path(self, rank: int) -> Path:
        return self.run_dir / f"rank{rank}.log"

    @property
    def log_paths(self) -> list[Path]:
        return [self.log_path(r) for r in range(self.ranks)]

    def state_path(self, rank: int) -> Path:
        return self.run_dir / f"rank{rank}.state"

    def rank_state(self, rank: int) -> dict[str, Any] | None:
        return read_rank_state(self.state_path(rank))

    def exit_codes(self) -> dict[int, int | None]:
        """Per rank: None while it runs, else its exit code (negative: killed by that signal)."""
        return {rank: p.poll() for rank, p in enumerate(self._procs)}

    def alive(self) -> bool:
        """True while any rank process is still running."""
        return any(code is None for code in self.exit_codes().values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rltui.demo.job", description=__doc__.split(
        "\n")[0], epilog="scenarios: " + "; ".join(f"{k}: {v}" for k, v in SCENARIOS.items()))
    parser.add_argument("--scenario", default="healthy", choices=list(SCENARIOS))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--run-dir")
    parser.add_argument("--fail-step", type=int, default=3)
    parser.add_argument("--step-seconds", type=float, default=1.0)
    args = parser.parse_args(argv)
    # SIGTERM (kill, a closing terminal) must unwind through stop() like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    job = DemoJob(args.scenario, args.ranks, args.run_dir, fail_step=args.fail_step,
                  step_seconds=args.step_seconds)
    with job:
        print(json.dumps({"run_dir": str(job.run_dir), "pids": job.pids}), flush=True)
        print(f"demo job {args.scenario!r}: {args.ranks} ranks, logs in {job.run_dir}; "
              "Ctrl-C stops it", file=sys.stderr, flush=True)
        try:
            while job.alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
