"""A cross-group ordering deadlock, read from the Flight Recorder.

Gradients are all_reduced on the default group; rollout statistics on a second gloo group that
spans every rank (``dist.new_group``). Both go through one helper, ``Trainer.reduce_in``, called
from ``Trainer.train_step`` in a loop over the groups in the order the rank chose, so every
rank's Python stack is the same (``all_reduce <- reduce_in <- Trainer.train_step``, same lines):
from the stacks alone this is "every rank in the same collective" (pattern C).

A few steps complete with the order (default, stats) on every rank. At ``FAIL_STEP`` ranks in
the first half keep that order and the others put the statistics first (an ordering that
depended on a per-rank condition, here whether the rank's rollouts finished early). Each half
then waits in a collective of a different group for the other half: the first half in
all_reduce #FAIL_STEP of the default group, the second half in all_reduce #FAIL_STEP of the
stats group. Only the Flight Recorder's pending entries (group and sequence number) tell the
two apart.

Each rank prints ``ready RANK all_reduce GROUP`` before the step that hangs, and writes its
Flight Recorder dump once it stalled (``_flightrec``).
"""

from __future__ import annotations

import _flightrec
import _rank
import torch.distributed as dist

FAIL_STEP = 4  # steps 1..3 complete: the dumps hold completed collectives of both groups


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.stats_group = dist.new_group(backend="gloo")

    def reduce_in(self, tensor, group) -> None:
        dist.all_reduce(tensor, group=group)
        _flightrec.progress()

    def order(self, step: int, grads, stats) -> list:
        default, mine = (grads, None), (stats, self.stats_group)
        rollouts_done_early = step == FAIL_STEP and self.rank >= self.world // 2
        return [mine, default] if rollouts_done_early else [default, mine]

    def train_step(self, step: int) -> None:
        grads, stats = _rank.tensor(float(step)), _rank.tensor(1.0, 2)
        order = self.order(step, grads, stats)
        if step == FAIL_STEP:
            _rank.ready("all_reduce " + ("default" if order[0][1] is None else "stats"))
        for tensor, group in order:
            self.reduce_in(tensor, group)

    def train(self) -> None:
        for step in range(1, 1000):
            self.train_step(step)


def main() -> None:
    rank, world = _rank.init()
    _flightrec.start(rank)
    Trainer(rank, world).train()


if __name__ == "__main__":
    main()
