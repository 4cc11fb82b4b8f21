"""What every job script shares: join the gloo group from the launcher's environment, say when
the rank is about to block, and make sure no rank outlives the test that started it.

A rank is started with ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` (torchrun's
variables) and ``TORCHJOB_PARENT``, the pid of the test process: the rank dies with it (Linux
parent-death signal) and in any case after ``TORCHJOB_LIFETIME`` seconds.
"""

from __future__ import annotations

import ctypes
import datetime
import os
import signal
import sys
import threading
import warnings

warnings.filterwarnings("ignore")  # torch without numpy warns on import; keep stderr readable

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# Long enough that nothing times out while the test looks: a hung NCCL job waits 30 minutes.
PG_TIMEOUT = datetime.timedelta(hours=1)
FAIL_STEP = 2  # the step at which a job's fault strikes; steps before it complete


def _die_with_the_test() -> None:
    lifetime = int(os.environ.get("TORCHJOB_LIFETIME", "300"))
    signal.alarm(lifetime)  # default action: terminate
    parent = int(os.environ.get("TORCHJOB_PARENT", "0"))
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if parent and os.getppid() != parent:  # the test died before the signal was armed
        os._exit(3)


def init() -> tuple[int, int]:
    """Join the default group (gloo, env://); returns (rank, world size)."""
    _die_with_the_test()
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    return dist.get_rank(), dist.get_world_size()


def ready(what: str) -> None:
    """Tell the test this rank is about to block in ``what`` (one stdout line)."""
    print(f"ready {dist.get_rank()} {what}", flush=True)


def park() -> None:
    """Block for good outside any collective (a rank that never reaches the call)."""
    threading.Event().wait()


def tensor(value: float = 1.0, n: int = 4) -> torch.Tensor:
    return torch.full((n,), value)


def keep_sockets_open() -> None:
    """Fork a child that holds this rank's sockets open and idles (as a DataLoader worker
    forked after the group was made does), so the peers keep waiting after the rank dies
    instead of gloo noticing a closed socket. The child dies with the test."""
    if os.fork() == 0:
        signal.alarm(int(os.environ.get("TORCHJOB_LIFETIME", "300")))
        signal.pause()
        os._exit(0)
