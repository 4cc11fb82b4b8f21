"""One rank frozen before the collective every other rank waits in, read from the Flight Recorder.

A few steps complete. At ``FAIL_STEP`` the last rank stops just before the gradient all_reduce
(parked outside any collective, as a rank stuck in I/O, in a driver call or on a lost node would
be) while the others wait in all_reduce #FAIL_STEP of the default group, from the same line. Its
Flight Recorder still dumps (its watcher thread runs): its last entry is all_reduce
#FAIL_STEP - 1, completed, and nothing is pending. The others' dumps hold all_reduce #FAIL_STEP
pending: the frozen rank is the one behind.

Dumped with py-spy, the waiting ranks show one stack (pattern C); the frozen rank, when it is
dumped too, is the odd one out.
"""

from __future__ import annotations

import _flightrec
import _rank
import torch.distributed as dist

FAIL_STEP = 4  # steps 1..3 complete


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def train_step(self, step: int) -> None:
        grad = _rank.tensor(float(step))
        if step == FAIL_STEP:
            if self.rank == self.world - 1:
                _rank.ready("frozen")
                _rank.park()
            _rank.ready("all_reduce")
        self.sync_gradients(grad)

    def train(self) -> None:
        for step in range(1, 1000):
            self.train_step(step)
            _flightrec.progress()


def main() -> None:
    rank, world = _rank.init()
    _flightrec.start(rank)
    Trainer(rank, world).train()


if __name__ == "__main__":
    main()
