"""Pattern C: every rank that is dumped waits in the same all_reduce from the same line.

The last rank joins the group but never calls the collective, like a peer on another node that
stalled: the test dumps ranks 0..N-2 only, which all show the same stack.
"""

from __future__ import annotations

import _rank
import torch.distributed as dist


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def train_step(self, step: int) -> None:
        grad = _rank.tensor(float(step))
        if step == _rank.FAIL_STEP:
            if self.rank == self.world - 1:
                _rank.ready("stalled peer")
                _rank.park()
            _rank.ready("all_reduce")
        self.sync_gradients(grad)

    def train(self) -> None:
        for step in range(1, 1000):
            self.train_step(step)


def main() -> None:
    rank, world = _rank.init()
    Trainer(rank, world).train()


if __name__ == "__main__":
    main()
