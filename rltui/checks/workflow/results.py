"""One run's outcome as the report keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATUSES = ("ok", "error", "timeout", "unfinished")


@dataclass
class RunResult:
    """``status``: ``ok`` (run returned; the reward may still be invalid, see ``invalid``),
    ``error`` (run raised), ``timeout`` (not done within the per-run timeout, or stuck in a
    blocked loop when the worker was ended), ``unfinished`` (the worker was cancelled or died
    first). ``run`` is the index in its step (concurrent: ``prompt * group_size + sample``)."""

    step: str
    run: int
    prompt: int
    status: str
    latency_s: float | None = None
    reward: Any = None
    invalid: dict | None = None
    error_type: str | None = None
    message: str | None = None
    traceback: str | None = None

    @property
    def valid(self) -> bool:
        """Returned a valid reward."""
        return self.status == "ok" and self.invalid is None

    @classmethod
    def from_message(cls, msg: dict) -> RunResult:
        status = msg.get("status")
        return cls(step=str(msg.get("step")), run=int(msg.get("run", 0)),
                   prompt=int(msg.get("prompt", 0)),
                   status=status if status in STATUSES else "error",
                   latency_s=msg.get("latency_s"), reward=msg.get("reward"),
                   invalid=msg.get("invalid"), error_type=msg.get("error_type"),
                   message=msg.get("message"), traceback=msg.get("traceback"))

    def to_json(self, traceback: bool = True) -> dict:
        """``traceback=False`` for the long per-run list: errors_by_type keeps one per type."""
        out = {"step": self.step, "run": self.run, "prompt": self.prompt, "status": self.status,
               "latency_s": self.latency_s, "reward": self.reward}
        if self.invalid:
            out["invalid"] = self.invalid
        if self.status == "error":
            out.update(error_type=self.error_type, message=self.message)
            if traceback:
                out["traceback"] = self.traceback
        elif self.message:
            out["message"] = self.message
        return out
