"""A rank dies (``os._exit``) at the fail step while the others wait for it in all_reduce.

With NCCL the survivors would hang until the group's timeout. Gloo notices a closed socket at
once and raises instead, so before dying the rank forks a child that keeps its sockets open, as
a DataLoader worker forked after the group was created does. The child sleeps, idle, until the
test kills the rank's process group.
"""

from __future__ import annotations

import os
import sys

import _rank
import torch.distributed as dist


def train(rank: int, world: int) -> None:
    for step in range(1, 1000):
        grad = _rank.tensor(float(step))
        if step == _rank.FAIL_STEP:
            if rank == world - 1:
                _rank.keep_sockets_open()  # the "worker" holding the sockets
                print("RuntimeError: DataLoader worker (pid(s) 4242) exited unexpectedly",
                      file=sys.stderr, flush=True)
                os._exit(1)
            _rank.ready("all_reduce")
        dist.all_reduce(grad)


def main() -> None:
    train(*_rank.init())


if __name__ == "__main__":
    main()
