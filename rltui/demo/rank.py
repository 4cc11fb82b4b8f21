"""One rank of the demo job (``python -m rltui.demo.rank``), configured like a torchrun child.

Reads RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT and the RLTUI_DEMO_* variables set by
``rltui.demo.job.DemoJob``. It never outlives its launcher: PR_SET_PDEATHSIG kills it when the
launcher dies, and a lost store connection ends it at its next collective.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time
from pathlib import Path

from rltui.demo import dist
from rltui.demo.scenarios import Scenario
from rltui.demo.trainer import GiB, RankStatus, Trainer

PR_SET_PDEATHSIG = 1
PR_SET_PTRACER = 0x59616D61
PR_SET_PTRACER_ANY = ctypes.c_ulong(-1).value

log = logging.getLogger("Trainer")


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False  # not Linux: nothing to set


def _bind_to_launcher(launcher_pid: int) -> None:
    # Under yama ptrace_scope 1 only an ancestor may attach; this lets a non-root py-spy dump us.
    # It fails harmlessly where yama is absent.
    _prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if launcher_pid and os.getppid() != launcher_pid:
        os._exit(1)  # the launcher died before the death signal was armed


def _setup_logging(framework: str) -> None:
    if framework == "areal":
        fmt = logging.Formatter("(AReaL) %(asctime)s.%(msecs)03d %(name)s %(levelname)s: "
                                "%(message)s", datefmt="%Y%m%d-%H:%M:%S")
    else:
        fmt = logging.Formatter("%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    handler = logging.StreamHandler(sys.stdout)  # flushes every record
    handler.setFormatter(fmt)
    logging.basicConfig(level=logging.INFO, handlers=[handler])


def main() -> int:
    started = time.time()
    env = os.environ
    rank, local_rank = int(env["RANK"]), int(env["LOCAL_RANK"])
    world_size = int(env["WORLD_SIZE"])
    _bind_to_launcher(int(env.get("RLTUI_DEMO_LAUNCHER_PID", "0")))
    scenario = Scenario(env.get("RLTUI_DEMO_SCENARIO", "healthy"), world_size,
                        int(env.get("RLTUI_DEMO_FAIL_STEP", "3")))
    run_dir = Path(env.get("RLTUI_DEMO_DIR", "."))
    step_seconds = float(env.get("RLTUI_DEMO_STEP_SECONDS", "1.0"))
    timeout = float(env["RLTUI_DEMO_TIMEOUT"]) if env.get("RLTUI_DEMO_TIMEOUT") else None
    _setup_logging(scenario.framework)

    status = RankStatus(run_dir / f"rank{rank}.state", rank,
                        mem_bytes=(44 + (rank * 7) % 23) * GiB)  # 44-66 GiB, differs per rank
    status.set("compute", step=0)
    log.info("rank %d/%d (local rank %d) starting, scenario %s", rank, world_size, local_rank,
             scenario.name)
    log.info("Initializing process group: backend=gloo, MASTER_ADDR=%s, MASTER_PORT=%s",
             env.get("MASTER_ADDR"), env.get("MASTER_PORT"))
    try:
        dist.init_process_group(backend="gloo", timeout=timeout)
        dist.set_wait_hook(status.waiting)
        trainer = Trainer(scenario, rank, local_rank, step_seconds, status, started)
        trainer.device.launch(1.0)  # loading the model takes about one step
        log.info("Model loaded on cuda:%d (simulated), %.2fB parameters", local_rank, 7.62)
        if scenario.managed:
            with trainer:
                trainer.train()
        else:
            trainer.train()
    except dist.DistStoreError as exc:
        log.error("%s; the launcher is gone, exiting", exc)
        return 1
    status.set("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
