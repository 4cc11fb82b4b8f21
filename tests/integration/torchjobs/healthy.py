"""A healthy RL training loop: wait for rollouts (idle), update the policy (on CPU), all_reduce
the gradients, every step. Each rank prints ``phase NAME STEP`` as it enters a phase, so that
the test can dump it in two different phases."""

from __future__ import annotations

import time

import _rank
import torch
import torch.distributed as dist

PHASE_SECONDS = 0.8


class Trainer:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.weight = torch.randn(64, 64)

    def phase(self, name: str, step: int) -> None:
        print(f"phase {self.rank} {name} {step}", flush=True)

    def wait_for_rollouts(self, step: int) -> None:
        self.phase("rollout", step)
        time.sleep(PHASE_SECONDS)  # the inference engine generates meanwhile

    def update_policy(self, step: int) -> torch.Tensor:
        self.phase("update", step)
        x = torch.randn(64, 64)
        end = time.monotonic() + PHASE_SECONDS
        while time.monotonic() < end:
            x = torch.tanh(x @ self.weight)
        return x.sum(0)

    def train(self) -> None:
        for step in range(1, 100_000):
            self.wait_for_rollouts(step)
            grad = self.update_policy(step)
            dist.all_reduce(grad)


def main() -> None:
    rank, _ = _rank.init()
    Trainer(rank).train()


if __name__ == "__main__":
    main()
