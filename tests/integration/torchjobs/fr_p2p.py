"""A send/recv mismatch in a two-stage pipeline, with the Flight Recorder on.

Each step stage 0 sends its activations to stage 1, stage 1 sends the gradients back, and both
all_reduce the loss for logging. At ``FAIL_STEP`` stage 0's schedule is wrong (it thinks its
warm-up is over and waits for gradients before sending activations): stage 0 waits in recv
called from ``PipelineStage.recv_gradients`` and stage 1 in recv called from
``PipelineStage.recv_activations``. Each waits for the other to send.

gloo's Flight Recorder records no send or recv at all: the dumps hold only the completed loss
all_reduces (#1 .. #FAIL_STEP - 1 of the default group) and nothing pending. Only the stacks
show the two receives.
"""

from __future__ import annotations

import _flightrec
import _rank
import torch.distributed as dist

FAIL_STEP = 4  # steps 1..3 complete


class PipelineStage:
    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.peer = 1 - rank

    def send_activations(self, step: int) -> None:
        dist.send(_rank.tensor(float(step)), dst=self.peer)

    def recv_activations(self):
        buf = _rank.tensor(0.0)
        dist.recv(buf, src=self.peer)
        return buf

    def send_gradients(self, step: int) -> None:
        dist.send(_rank.tensor(-float(step)), dst=self.peer)

    def recv_gradients(self):
        buf = _rank.tensor(0.0)
        dist.recv(buf, src=self.peer)
        return buf

    def schedule(self, step: int) -> list[str]:
        if self.rank == 0:
            warmup_over = step == FAIL_STEP  # the off-by-one: no forward sent yet
            return ["recv_gradients", "send_activations"] if warmup_over else \
                ["send_activations", "recv_gradients"]
        return ["recv_activations", "send_gradients"]

    def step(self, step: int) -> None:
        for action in self.schedule(step):
            if step == FAIL_STEP and action.startswith("recv"):
                _rank.ready("recv")
            if action.startswith("send"):
                getattr(self, action)(step)
            else:
                getattr(self, action)()
        loss = _rank.tensor(1.0 / step, 1)
        dist.all_reduce(loss)

    def train(self) -> None:
        for step in range(1, 1000):
            self.step(step)
            _flightrec.progress()


def main() -> None:
    rank, _ = _rank.init()
    _flightrec.start(rank)
    PipelineStage(rank).train()


if __name__ == "__main__":
    main()
