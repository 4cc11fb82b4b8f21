"""Pattern B, two ways.

``ops``: the last rank gets an empty batch, skips the gradient all_reduce and goes on to gather
metrics (all_gather) while the others wait in all_reduce: different collectives.

``sites``: a two-stage pipeline whose schedule went wrong: stage 0 waits to receive activations
and stage 1 waits to receive gradients. Both wait in recv, called from different places.
"""

from __future__ import annotations

import sys

import _rank
import torch.distributed as dist


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def log_metrics(self, loss) -> None:
        gathered = [_rank.tensor(0.0, 1) for _ in range(self.world)]
        dist.all_gather(gathered, loss)

    def train_step(self, step: int) -> None:
        batch = 0 if (step == _rank.FAIL_STEP and self.rank == self.world - 1) else 8
        loss = _rank.tensor(1.0 / step, 1)
        if batch:  # a data-dependent branch: no gradient to reduce for an empty batch
            if step == _rank.FAIL_STEP:
                _rank.ready("all_reduce")
            self.sync_gradients(_rank.tensor(float(step)))
        elif step == _rank.FAIL_STEP:
            _rank.ready("all_gather")
        self.log_metrics(loss)

    def train(self) -> None:
        for step in range(1, 1000):
            self.train_step(step)


class PipelineStage:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.peer = 1 - rank

    def recv_activations(self):
        buf = _rank.tensor(0.0)
        dist.recv(buf, src=self.peer)
        return buf

    def recv_gradients(self):
        buf = _rank.tensor(0.0)
        dist.recv(buf, src=self.peer)
        return buf

    def step(self) -> None:
        _rank.ready("recv")
        if self.rank == 0:
            self.recv_activations()  # stage 0 should have sent first
        else:
            self.recv_gradients()


def main() -> None:
    rank, world = _rank.init()
    if sys.argv[1:] == ["sites"]:
        PipelineStage(rank).step()
    else:
        Trainer(rank, world).train()


if __name__ == "__main__":
    main()
