"""A long run for Flight Recorder dumps of the size users have: 2,000 records and more.

Every step all_reduces the gradients on the default group and the rollout statistics on their
own gloo group, from three call sites (the statistics every other step from a second one), so
the ring buffer (TORCH_FR_BUFFER_SIZE=2000) wraps with a mix of groups, sizes and frames. After
``TORCHJOB_STEPS`` steps (default 1,100: 2,200 collectives) the last rank stops before the next
gradient all_reduce; the others wait in it and every rank dumps its buffer (``_flightrec``).
"""

from __future__ import annotations

import os

import _flightrec
import _rank
import torch.distributed as dist


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.stats_group = dist.new_group(backend="gloo")

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def reduce_stats(self, stats) -> None:
        dist.all_reduce(stats, group=self.stats_group)

    def reduce_rollout_stats(self, stats) -> None:
        dist.all_reduce(stats, group=self.stats_group)

    def train_step(self, step: int) -> None:
        self.sync_gradients(_rank.tensor(float(step), 8))
        if step % 2:
            self.reduce_stats(_rank.tensor(1.0, 2))
        else:
            self.reduce_rollout_stats(_rank.tensor(1.0, 3))
        _flightrec.progress()

    def train(self, steps: int) -> None:
        for step in range(1, steps + 1):
            self.train_step(step)
        if self.rank == self.world - 1:
            _rank.ready("stopped")
            _rank.park()
        _rank.ready("all_reduce")
        self.sync_gradients(_rank.tensor(0.0, 8))


def main() -> None:
    rank, world = _rank.init()
    _flightrec.start(rank)
    Trainer(rank, world).train(int(os.environ.get("TORCHJOB_STEPS", "1100")))


if __name__ == "__main__":
    main()
