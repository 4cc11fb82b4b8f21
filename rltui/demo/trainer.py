"""The demo's training loop.

Small classes named after verl, Megatron and AReaL so that a stack dump of a demo rank reads like
one of a real job: ``Trainer.train -> train_step -> _sync_gradients -> all_reduce``, a pipeline
``step -> _shape_inference -> recv_object_list``, ``__exit__ -> close -> destroy ->
destroy_process_group``. Nothing is computed for real: "GPU work" is a short CPU burst (so an
active rank shows busy frames) followed by a sleep that stands for waiting on the device. Faults
arrive as properties of the batch (see ``scenarios.Scenario.batch_flags``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rltui.demo import dist
from rltui.demo.scenarios import Scenario

GiB = 1 << 30
log = logging.getLogger("Trainer")
stats_log = logging.getLogger("StatsLogger")


class OutOfMemoryError(RuntimeError):
    """Stand-in for torch.OutOfMemoryError; tracebacks print it under torch's name."""


OutOfMemoryError.__module__ = "torch"


def oom_message(local_rank: int, pid: int) -> str:
    """PyTorch's current CUDA OOM text (c10/cuda/CUDACachingAllocator.cpp), real figures."""
    return ("CUDA out of memory. Tried to allocate 13.91 GiB. GPU "
            f"{local_rank} has a total capacity of 79.11 GiB of which 8.85 GiB is free. Process "
            f"{pid} has 70.25 GiB memory in use. Of the allocated memory 60.49 GiB is allocated "
            "by PyTorch, and 6.77 GiB is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
            "documentation for Memory Management  "
            "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


class RankStatus:
    """Publishes this rank's phase to ``rank{N}.state`` for the simulated GPUs.

    Written only when phase or step changes, atomically (write, then rename), so a reader sees
    the old file or the new one, never half of one.
    """

    def __init__(self, path: Path, rank: int, mem_bytes: int):
        self.path = path
        self.rank = rank
        self.phase = ""
        self.step = 0
        self.mem_bytes = mem_bytes

    def set(self, phase: str, step: int | None = None, mem_bytes: int | None = None) -> None:
        step = self.step if step is None else step
        mem_bytes = self.mem_bytes if mem_bytes is None else mem_bytes
        if (phase, step, mem_bytes) == (self.phase, self.step, self.mem_bytes):
            return
        self.phase, self.step, self.mem_bytes = phase, step, mem_bytes
        doc = {"rank": self.rank, "pid": os.getpid(), "phase": phase, "step": step,
               "mem_bytes": mem_bytes, "time": time.time()}
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        try:
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, self.path)
        except OSError:
            pass  # the run dir vanished: the demo carries on, only its GPUs look idle

    def waiting(self, blocked: bool) -> None:
        """Wait hook of the process group: a computing rank that blocks on its peers is idle."""
        if blocked and self.phase == "compute":
            self.set("wait")
        elif not blocked and self.phase == "wait":
            self.set("compute")


class Device:
    """Simulated GPU work: a short CPU burst, then a sleep standing for the kernels running."""

    def __init__(self, step_seconds: float):
        self.step_seconds = step_seconds

    def launch(self, share: float) -> None:
        seconds = share * self.step_seconds
        burst = min(0.01, 0.03 * seconds)  # keeps a healthy rank at a few % of one core
        start = time.perf_counter()
        acc = 0.0
        while time.perf_counter() - start < burst:
            acc += sum(i * 0.5 for i in range(200))
        self.synchronize(seconds - (time.perf_counter() - start))

    def synchronize(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


def entropy_from_logits(logits: list[float], batch: dict[str, Any]) -> float:
    if batch.get("long_sequence"):
        raise OutOfMemoryError(oom_message(batch["local_rank"], os.getpid()))
    return 0.61 - 0.002 * batch["step"] + 0.01 * logits[0]


class StatefulDataLoader:
    def __init__(self, scenario: Scenario, rank: int, local_rank: int):
        self.scenario = scenario
        self.rank = rank
        self.local_rank = local_rank

    def __len__(self) -> int:
        total = self.scenario.total_steps
        return 10**9 if total is None else total

    def __iter__(self) -> Iterator[dict[str, Any]]:
        total = self.scenario.total_steps
        steps = itertools.count(1) if total is None else range(1, total + 1)
        for step in steps:
            yield self._fetch(step)

    def _fetch(self, step: int) -> dict[str, Any]:
        flags = self.scenario.batch_flags(self.rank, step)
        if flags.get("worker_killed"):
            raise RuntimeError(f"DataLoader worker (pid(s) {os.getpid() + 1}) exited unexpectedly")
        return {"step": step, "local_rank": self.local_rank, **flags}


class FSDPActor:
    """Actor engine: log-prob, forward and backward, and the teardown of the process group."""

    def __init__(self, rank: int, device: Device, status: RankStatus, eager: bool):
        self.rank = rank
        self.device = device
        self.status = status
        # Workers build the engine lazily at their first step; the driver owns it from the start.
        self.initialized = eager

    def compute_log_prob(self, batch: dict[str, Any]) -> float:
        self.initialized = True
        return self._forward_micro_batch(batch)

    def _forward_micro_batch(self, batch: dict[str, Any]) -> float:
        if batch.get("long_sequence"):
            self.status.set("compute", mem_bytes=int(70.25 * GiB))  # the spike before the OOM
        self.device.launch(0.3)
        return entropy_from_logits([random.random()], batch)

    def forward(self, batch: dict[str, Any]) -> float:
        if batch.get("padding"):
            # normalise the loss by the global number of valid tokens
            counts = [4096.0 - 17 * batch["step"], 8.0]
            dist.all_reduce(counts)
        self.device.launch(0.3)
        if batch.get("bad_shape"):
            raise RuntimeError("The size of tensor a (4096) must match the size of tensor b "
                               "(2048) at non-singleton dimension 1")
        return 0.1 / batch["step"]

    def backward(self, batch: dict[str, Any], loss: float) -> None:
        self.device.launch(0.4)
        if batch.get("overflow"):
            found_inf = [1.0]  # the loss scaler saw inf gradients: every rank must skip the step
            dist.all_reduce(found_inf, op=dist.ReduceOp.MAX)

    def destroy(self) -> None:
        if not self.initialized:
            return
        dist.destroy_process_group()


class PipelineSchedule:
    """1F1B-style schedule: each stage learns its output-gradient shape from the next stage."""

    def __init__(self, rank: int, world_size: int):
        self.rank = rank
        self.world_size = world_size

    def step(self, step: int) -> dict[str, Any]:
        return self._shape_inference(step)

    def _shape_inference(self, step: int) -> dict[str, Any]:
        meta: list[Any] = [{"shape": [4, 2048, 4096], "dtype": "bfloat16", "step": step}]
        if self.rank < self.world_size - 1:
            dist.recv_object_list(meta, src=self.rank + 1)
        if self.rank > 0:
            dist.send_object_list(meta, dst=self.rank - 1)
        return meta[0]


class Trainer:
    def __init__(self, scenario: Scenario, rank: int, local_rank: int, step_seconds: float,
                 status: RankStatus, started: float | None = None):
        self.scenario = scenario
        self.rank = rank
        self.status = status
        self.device = Device(step_seconds)
        self.loader = StatefulDataLoader(scenario, rank, local_rank)
        self.actor = FSDPActor(rank, self.device, status, eager=rank == 0)
        self.schedule = (PipelineSchedule(rank, scenario.world_size) if scenario.pipeline
                         else None)
        self.started = time.time() if started is None else started  # for the elapsed time

    def __enter__(self) -> Trainer:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is not None:
            log.error("Training failed with exception: %s", exc, exc_info=(exc_type, exc, tb))
        self.close()
        return False

    def close(self) -> None:
        if self.rank == 0 and self.scenario.framework == "areal":
            stats_log.info("Training completes! Total time elapsed %.2f.",
                           time.time() - self.started)
        self.status.set("cleanup")
        self.actor.destroy()
        self.status.set("done")

    def train(self) -> None:
        total = self.scenario.total_steps
        if total == 0:
            log.warning("train dataset yields 0 batches per epoch (dataset size 6 < "
                        "train_batch_size 8, drop_last=True): 0 training steps")
        log.info("Total training steps: %s", "until stopped" if total is None else total)
        if self.schedule is not None:
            return self._run_train()
        for batch in self.loader:
            began = time.perf_counter()
            self.train_step(batch)
            self._log_step(batch["step"], time.perf_counter() - began)

    def _run_train(self) -> None:
        for batch in self.loader:
            began = time.perf_counter()
            self.train_step(batch)
            self.schedule.step(batch["step"])
            self._log_step(batch["step"], time.perf_counter() - began)

    def train_step(self, batch: dict[str, Any]) -> None:
        self.status.set("compute", step=batch["step"])
        self.actor.compute_log_prob(batch)
        loss = self.actor.forward(batch)
        self.actor.backward(batch, loss)
        if self.schedule is None:  # pipeline stages exchange activations instead
            self._sync_gradients(batch["step"])

    def _sync_gradients(self, step: int) -> None:
        grads = [0.87 / step, 0.01 * self.rank, 1.0, 0.5]
        dist.all_reduce(grads)

    def _log_step(self, step: int, seconds: float) -> None:
        rng = random.Random(step * 7919 + self.rank)
        metrics = {
            "timing_s/step": round(seconds, 3),
            "actor/pg_loss": round(rng.uniform(-0.03, 0.01), 4),
            "actor/entropy": round(max(0.05, 0.65 - 0.004 * step + rng.uniform(-0.02, 0.02)), 4),
            "critic/score/mean": round(min(0.95, 0.3 + 0.01 * step + rng.uniform(-0.05, 0.05)), 4),
            "response_length/mean": round(512 + rng.uniform(-40, 40), 1),
            "actor/grad_norm": round(0.87 + rng.uniform(-0.2, 0.2), 4),
            "perf/throughput": round(1834 + rng.uniform(-120, 120), 1),
        }
        print(" - ".join([f"step:{step}", *(f"{k}:{v}" for k, v in metrics.items())]),
              flush=True)
