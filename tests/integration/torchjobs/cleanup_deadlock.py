"""Pattern A: the last rank raises inside the training loop; its cleanup calls a barrier (then
would destroy the group) while the other ranks wait in all_reduce for it.

``exit`` (default): the cleanup runs in the trainer's ``__exit__`` -> ``close``.
``finally``: a plain ``try/finally`` in ``main`` (no cleanup-named frame on the stack).
"""

from __future__ import annotations

import sys
import traceback

import _rank
import torch.distributed as dist


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            traceback.print_exception(*exc)  # the root cause, in this rank's log
        self.close()

    def close(self) -> None:
        _rank.ready("cleanup")
        dist.barrier()  # every rank "should" be here; the others are still in the loop
        dist.destroy_process_group()

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def train_step(self, step: int) -> None:
        grad = _rank.tensor(float(step))
        if step == _rank.FAIL_STEP:
            if self.rank == self.world - 1:
                raise RuntimeError("The size of tensor a (4096) must match the size of tensor "
                                   "b (4095) at non-singleton dimension 0")
            _rank.ready("all_reduce")
        self.sync_gradients(grad)

    def train(self) -> None:
        for step in range(1, 1000):
            self.train_step(step)


def main() -> None:
    rank, world = _rank.init()
    if sys.argv[1:] == ["finally"]:
        try:
            Trainer(rank, world).train()
        finally:
            _rank.ready("cleanup")
            dist.barrier()
            dist.destroy_process_group()
        return
    with Trainer(rank, world) as trainer:
        trainer.train()


if __name__ == "__main__":
    main()
