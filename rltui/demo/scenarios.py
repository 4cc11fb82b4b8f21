"""The demo's scenarios: names, one-line descriptions, and what each one does to the job.

A fault is expressed as a property of the data a rank sees at a step (``batch_flags``), or of the
network (``stall_at_all_reduce``, applied by the store), never as an ``if scenario == ...`` inside
the training loop. The branches that diverge are then ordinary data-dependent branches, which is
how real hangs arise, and stack dumps of the demo show only training-loop frames.
"""

from __future__ import annotations

from dataclasses import dataclass

SCENARIOS: dict[str, str] = {
    "healthy": "All ranks train and all-reduce gradients every step; the log keeps advancing.",
    "stall": "Pattern C: from the fail step every rank waits in the same all_reduce, which never "
             "completes (a network stall).",
    "cleanup-deadlock": "Pattern A: the last pipeline stage raises; its __exit__ cleanup hangs in "
                        "destroy_process_group while the other stages wait in recv_object_list.",
    "collective-mismatch": "Pattern B: even ranks all_reduce from forward, odd ranks from "
                           "backward; the collectives never match.",
    "zero-step-completion": "AReaL-style: zero training steps, rank 0 logs 'Training completes!' "
                            "and hangs in destroy_process_group; the other ranks exit 0.",
    "rank-exit": "The last rank dies with a DataLoader RuntimeError (exit code 1); the others "
                 "wait in all_reduce.",
    "oom": "The last rank raises torch.OutOfMemoryError in compute_log_prob (exit code 1); the "
           "others wait in all_reduce.",
}

MIN_RANKS = 2  # every scenario needs someone to wait for someone else
MAX_RANKS = 64


def check_name(name: str) -> str:
    if name not in SCENARIOS:
        raise ValueError(f"unknown demo scenario {name!r}; valid scenarios: "
                         f"{', '.join(SCENARIOS)}")
    return name


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    world_size: int
    fail_step: int = 3  # 1-based: steps before it complete, this one goes wrong

    def __post_init__(self) -> None:
        check_name(self.name)

    @property
    def last_rank(self) -> int:
        return self.world_size - 1

    @property
    def total_steps(self) -> int | None:
        """Number of training steps; ``None`` trains until stopped."""
        return 0 if self.name == "zero-step-completion" else None

    @property
    def pipeline(self) -> bool:
        """Ranks are pipeline stages that exchange shapes point-to-point every step."""
        return self.name == "cleanup-deadlock"

    @property
    def managed(self) -> bool:
        """The trainer runs as a context manager whose ``__exit__`` tears the group down.

        That cleanup is what hangs in pattern A; in the other scenarios an exception simply ends
        the process with exit code 1, as in a plain ``main()`` under torchrun.
        """
        return self.name in ("cleanup-deadlock", "zero-step-completion")

    @property
    def framework(self) -> str:
        """Whose log style the ranks imitate: "areal" or "verl"."""
        return "areal" if self.name == "zero-step-completion" else "verl"

    @property
    def stall_at_all_reduce(self) -> int | None:
        """1-based number of the all_reduce whose result the store withholds (network stall).

        Each step of the non-pipeline loop runs exactly one all_reduce, so the fail step's
        gradient sync is the one that stalls.
        """
        return self.fail_step if self.name == "stall" else None

    def batch_flags(self, rank: int, step: int) -> dict[str, bool]:
        """Properties of the batch ``rank`` sees at ``step`` that send it down a faulty branch."""
        if step != self.fail_step:
            return {}
        last = rank == self.last_rank
        if self.name == "cleanup-deadlock" and last:
            return {"bad_shape": True}  # forward raises a shape error on the last stage
        if self.name == "collective-mismatch":
            # padded micro-batches sync token counts in forward; a loss-scale overflow syncs a
            # flag in backward: two different collectives at the same sequence number
            return {"padding": True} if rank % 2 == 0 else {"overflow": True}
        if self.name == "rank-exit" and last:
            return {"worker_killed": True}
        if self.name == "oom" and last:
            return {"long_sequence": True}
        return {}
