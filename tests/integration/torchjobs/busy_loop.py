"""Busy loop: after a few good steps every rank polls for rewards that never come, on CPU, in a
plain Python loop (no collective, no sleep): the stacks stay in the same loop.

The loop looks at its inbox every ``--every`` turns (64 by default). With ``--every 1`` a dump
finds it inside ``rewards_ready`` about as often as in the loop itself."""

from __future__ import annotations

import sys

import _rank
import torch.distributed as dist


class RewardClient:
    def __init__(self) -> None:
        self.received = 0
        self.expected = 8

    def rewards_ready(self) -> bool:
        return self.received >= self.expected

    def wait_for_rewards(self, every: int) -> None:
        _rank.ready("poll")
        turns = 0
        while True:  # nothing ever fills the inbox
            turns += 1
            if turns % every == 0 and self.rewards_ready():
                break


def train(rank: int, every: int) -> None:
    client = RewardClient()
    for step in range(1, 1000):
        dist.all_reduce(_rank.tensor(float(step)))
        if step == _rank.FAIL_STEP:
            client.wait_for_rewards(every)


def main() -> None:
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 64
    rank, _ = _rank.init()
    train(rank, every)


if __name__ == "__main__":
    main()
