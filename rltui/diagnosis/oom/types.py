"""Value types of OOM triage (pure). Shared by the phase reader, the config model, the memory
estimate and the suggestions; ``rltui.diagnosis.oom`` assembles them into an ``OomReport``.

Sizes are bytes (int); a value nobody could know is ``None``, never a made-up zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rltui.frameworks import config_frameworks

# Phases of an RL training step where an OOM happens (``OomPhase.phase``).
PHASES = ("engine-start", "generation", "log-prob", "actor-forward", "actor-backward",
          "critic-update", "weight-sync", "unknown")
CONFIDENCES = ("high", "medium", "low")
# The frameworks whose job config rltui reads (rltui.frameworks.config_frameworks), and unknown.
FRAMEWORKS = (*(f.name for f in config_frameworks()), "unknown")


@dataclass(frozen=True, slots=True)
class OomNumbers:
    """What the error message says (PyTorch caching allocator, or an inference engine)."""

    kind: str = "cuda-oom"  # cuda-oom | engine-oom | ray-oom | host-oom (SIGKILL, no traceback)
    gpu: int | None = None
    requested: int | None = None  # "Tried to allocate"
    capacity: int | None = None
    free: int | None = None
    allocated: int | None = None  # allocated by PyTorch
    reserved_unallocated: int | None = None  # fragmentation
    others: tuple[tuple[int, int], ...] = ()  # (pid, bytes) of other processes on the GPU
    this_process: int | None = None
    engine: str = ""  # vllm | sglang (engine-oom)
    detail: tuple[tuple[str, Any], ...] = ()  # the parser's other fields, by name
    text: str = ""  # the message itself (bounded)


@dataclass(frozen=True, slots=True)
class OomPhase:
    phase: str = "unknown"  # one of PHASES
    confidence: str = "low"  # one of CONFIDENCES
    reason: str = ""  # which frame or line decided, in words
    role: str = ""  # actor | ref | critic | rollout | "" (who was computing)


@dataclass(frozen=True, slots=True)
class ConfigValue:
    key: str  # dotted path, e.g. "actor_rollout_ref.rollout.log_prob_micro_batch_size"
    value: Any
    default: bool  # True: absent from the job's config, the framework's documented default


@dataclass(frozen=True, slots=True)
class JobConfig:
    """The job's effective config: the file(s) plus the overrides of its command line."""

    framework: str = "unknown"  # one of FRAMEWORKS
    values: Mapping[str, Any] = field(default_factory=dict)  # nested, after overrides
    sources: tuple[str, ...] = ()  # files read and where overrides came from
    overrides: tuple[str, ...] = ()  # key=value overrides applied, in order
    problems: tuple[str, ...] = ()  # what could not be read or understood


@dataclass(frozen=True, slots=True)
class Suggestion:
    key: str  # dotted key path (a dotted path in the framework's config tree); "env:NAME" for a variable
    current: Any
    proposed: Any
    why: str
    tradeoff: str
    effect_bytes: int | None = None  # expected memory saved on the failing GPU (positive)
    current_is_default: bool = False
    also: tuple[tuple[str, Any], ...] = ()  # companion changes that keep the config valid
    # What the estimate says the failing phase holds on one GPU, before and after the change
    need_before: int | None = None
    need_after: int | None = None


@dataclass(frozen=True, slots=True)
class OomReport:
    numbers: OomNumbers
    phase: OomPhase
    framework: str = "unknown"
    suggestions: tuple[Suggestion, ...] = ()
    patch: str = ""  # the framework's patch style (Hydra overrides or a YAML fragment), env lines
    estimate: Mapping[str, Any] | None = None  # components in bytes, before and after
    notes: tuple[str, ...] = ()
    config_sources: tuple[str, ...] = ()  # the job config's files and overrides read (JobConfig)
