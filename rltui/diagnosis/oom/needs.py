"""From a job's config to the memory estimate's settings, per framework and phase (pure).

``need_for`` returns the function the suggestions use to price a change: config values in, the
bytes the failing phase holds on one GPU out (``MemoryEstimate.phase_total``). ``estimate_for``
is the estimate of the config as it is, for the report.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Callable, Mapping

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.estimate import ModelShape, estimate
from rltui.diagnosis.oom.types import JobConfig, OomNumbers, OomPhase

_DATA_PARALLEL = re.compile(r"d(\d+)")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _verl(get: Callable[[str], Any], phase: OomPhase) -> dict[str, Any]:
    ar = "actor_rollout_ref"
    nodes = _int(get("trainer.nnodes")) or 1
    per_node = _int(get("trainer.n_gpus_per_node")) or 1
    prompt, response = _int(get("data.max_prompt_length")), _int(get("data.max_response_length"))
    policy = (get(f"{ar}.actor.strategy") == "fsdp2"
              and bool(get(f"{ar}.actor.fsdp_config.offload_policy")))
    out: dict[str, Any] = {
        "world_size": nodes * per_node,
        "fsdp": str(get(f"{ar}.actor.strategy") or "fsdp").startswith("fsdp"),
        # FSDP2's offload_policy moves parameters, gradients and optimizer states to the host
        # (verl reads it only under fsdp2)
        "offload_params": bool(get(f"{ar}.actor.fsdp_config.param_offload") or policy),
        "offload_optimizer": bool(get(f"{ar}.actor.fsdp_config.optimizer_offload") or policy),
        "gradient_checkpointing": bool(get(f"{ar}.model.enable_gradient_checkpointing")),
        "rollout_mem_fraction": get(f"{ar}.rollout.gpu_memory_utilization"),
    }
    if prompt and response:
        out["seq_len"] = prompt + response
    if phase.phase == "critic-update":
        out["micro_batch"] = _int(get("critic.ppo_micro_batch_size_per_gpu")) or 1
        out["gradient_checkpointing"] = bool(get("critic.model.enable_gradient_checkpointing"))
    else:
        out["micro_batch"] = _int(get(f"{ar}.actor.ppo_micro_batch_size_per_gpu")) or 1
    role = "ref" if phase.role == "ref" else "rollout"
    out["log_prob_micro_batch"] = _int(get(f"{ar}.{role}.log_prob_micro_batch_size_per_gpu"))
    return out


def _areal(get: Callable[[str], Any], phase: OomPhase) -> dict[str, Any]:
    # AReaL packs sequences into micro batches of at most max_tokens_per_mb tokens: one
    # micro batch of that many tokens is the activation and logits peak.
    tokens = _int(get("actor.mb_spec.max_tokens_per_mb"))
    alloc = str(get("allocation_mode") or "")
    train = alloc.split("+")[-1]
    dp = _DATA_PARALLEL.search(train)
    out: dict[str, Any] = {
        "world_size": int(dp.group(1)) if dp else 1,
        "gradient_checkpointing": bool(get("actor.gradient_checkpointing")),
        "micro_batch": 1,
        "log_prob_micro_batch": 1,
    }
    if tokens:
        out["seq_len"] = tokens
    return out


SETTINGS = {"verl": _verl, "areal": _areal}


def settings_for(config: JobConfig, values: Mapping[str, Any], phase: OomPhase,
                 numbers: OomNumbers) -> dict[str, Any] | None:
    build = SETTINGS.get(config.framework)
    if build is None:
        return None
    cfg = replace(config, values=values)

    def get(key: str) -> Any:
        return frameworks.effective(cfg, key).value

    out = {k: v for k, v in build(get, phase).items() if v is not None}
    fraction = out.get("rollout_mem_fraction")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= 1:
        out.pop("rollout_mem_fraction", None)
    if numbers.capacity:
        out["gpu_capacity"] = numbers.capacity
    return out


def need_for(shape: ModelShape, config: JobConfig, phase: OomPhase, numbers: OomNumbers
             ) -> Callable[[Mapping[str, Any]], int | None]:
    def need(values: Mapping[str, Any]) -> int | None:
        kw = settings_for(config, values, phase, numbers)
        if kw is None:
            return None
        try:
            return estimate(shape, **kw).phase_total(phase.phase)
        except ValueError:
            return None
    return need


def estimate_for(shape: ModelShape, config: JobConfig, phase: OomPhase,
                 numbers: OomNumbers) -> dict[str, Any] | None:
    kw = settings_for(config, config.values, phase, numbers)
    if kw is None:
        return None  # no framework config: batch and sequence sizes unknown, no estimate
    try:
        return estimate(shape, **kw).to_json()
    except ValueError:
        return None
