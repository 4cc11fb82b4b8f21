"""The last rank raises at the fail step (a real traceback on its stderr) and dies, while the
others wait for it in all_reduce, before anyone watches: the on-call engineer arrives after the
fact. Gloo would notice the closed socket, so before dying the rank forks a child that keeps its
sockets open (as a DataLoader worker forked after the group was created does); the child keeps
the rank's environment (RANK included), idles, and dies with the test.
"""

from __future__ import annotations

import os
import sys
import time

import _rank
import torch.distributed as dist


def load_batch(step: int) -> None:
    raise RuntimeError(f"CUDA error: an illegal memory access was encountered (step {step})")


def train(rank: int, world: int) -> None:
    for step in range(1, 1000):
        grad = _rank.tensor(float(step))
        if step == _rank.FAIL_STEP:
            if rank == world - 1:
                _rank.keep_sockets_open()  # the "worker" holding the sockets
                try:
                    load_batch(step)
                except RuntimeError:
                    import traceback
                    traceback.print_exc()
                    sys.stderr.flush()
                    os._exit(1)
            _rank.ready("all_reduce")
        dist.all_reduce(grad)
        print(f"step:{step} - timing_s/step:0.5", file=sys.stderr, flush=True)
        time.sleep(0.1)


def main() -> None:
    train(*_rank.init())


if __name__ == "__main__":
    main()
