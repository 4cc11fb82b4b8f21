"""A rank that skipped a collective and sits behind, read from the Flight Recorder.

An on-policy RL loop: each rank's rollout generator (a thread) makes a batch with the weights the
trainer last published; the trainer takes that batch, all_reduces the gradients and publishes
the new weights, which starts the next batch. At ``FAIL_STEP`` every prompt of the last rank's
batch is filtered out (all its samples got the same reward, so no advantage is left), the batch
is empty and the rank skips the update: a data-dependent branch with no all_reduce and no new
weights. It goes on to the next step and waits for a batch made with weights it never published.

The other ranks wait in all_reduce #FAIL_STEP of the default group; the last rank waits on its
rollout buffer (``RolloutBuffer.wait_for_batch``, outside any collective). Its Flight Recorder's
last entry is all_reduce #FAIL_STEP - 1, completed, nothing pending: it is behind by one.
"""

from __future__ import annotations

import threading

import _flightrec
import _rank
import torch.distributed as dist

FAIL_STEP = 4  # steps 1..3 complete
BATCH = 8


class RolloutBuffer:
    """Batches made by a generator thread, each with the weights version it was made with."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.cond = threading.Condition()
        self.published = 0  # the weights version the generator should use next
        self.batches: dict[int, int] = {}  # weights version -> batch size (after filtering)
        threading.Thread(target=self._generate, name="rollout-generator", daemon=True).start()

    def _generate(self) -> None:
        made = -1
        while True:
            with self.cond:
                self.cond.wait_for(lambda: self.published > made)
                made = self.published
                # zero reward variance on every prompt of this rank's batch: all filtered out
                filtered = made == FAIL_STEP - 1 and self.rank == self.world - 1
                self.batches[made] = 0 if filtered else BATCH
                self.cond.notify_all()

    def publish(self, version: int) -> None:
        with self.cond:
            self.published = version
            self.cond.notify_all()

    def wait_for_batch(self, version: int) -> int:
        with self.cond:
            self.cond.wait_for(lambda: version in self.batches)
            return self.batches.pop(version)


class Trainer:
    def __init__(self, rank: int, world: int) -> None:
        self.rank, self.world = rank, world
        self.version = 0
        self.rollouts = RolloutBuffer(rank, world)

    def sync_gradients(self, grad) -> None:
        dist.all_reduce(grad)

    def train_step(self, step: int) -> None:
        batch = self.rollouts.wait_for_batch(self.version)
        if batch == 0:  # nothing to learn from: skip the update (and the all_reduce)
            _rank.ready("skipped")
            return
        if step == FAIL_STEP:
            _rank.ready("all_reduce")
        self.sync_gradients(_rank.tensor(float(step)))
        self.version += 1
        self.rollouts.publish(self.version)

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
