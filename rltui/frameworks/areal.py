"""AReaL (inclusionAI/AReaL): what rltui knows of it. Pure data, plus AReaL's config checks.

Sources (read, not copied): ``areal/utils/stats_logger.py`` and ``areal/utils/logging.py`` (the
step header and its stats table), ``areal/api/cli_args.py`` (the dataclass defaults;
docs/cli_reference.md is generated from it), docs/best_practices/handling_oom.md (the token
budget rule), ``areal/engine/`` and ``areal/trainer/`` (phase frames).
"""

from __future__ import annotations

import re
from typing import Any

from rltui.frameworks._types import (
    ConfigFacts,
    Default,
    Framework,
    Getter,
    Knob,
    LogMarker,
    OomFacts,
    PhaseFacts,
    PhaseRule,
    StallCheck,
    StepFormat,
    as_int,
    fraction_problem,
)

AREAL_ARGS = "areal/api/cli_args.py"


def _areal(value: Any, fallback: str | None = None, note: str = "") -> Default:
    return Default(value, AREAL_ARGS, fallback=fallback, note=note)


# AReaL: the dataclass defaults of areal/api/cli_args.py (GRPOConfig and its parts). The
# rollout knobs live under ``rollout`` (InferenceEngineConfig), the SGLang server's under
# ``sglang``, generation under ``gconfig``.
DEFAULTS: dict[str, Default] = {
    "rollout.max_concurrent_rollouts": _areal(
        None, fallback="rollout.consumer_batch_size", note="None: consumer_batch_size"),
    "rollout.consumer_batch_size": _areal(1),
    "rollout.queue_size": _areal(None, note="None: max_concurrent_rollouts x 16"),
    "rollout.max_head_offpolicyness": _areal(0),
    "sglang.mem_fraction_static": _areal(0.9),
    "sglang.context_length": _areal(32768),
    "sglang.max_running_requests": _areal(None),
    "sglang.chunked_prefill_size": _areal(-1),
    "sglang.max_prefill_tokens": _areal(32768),
    "sglang.cpu_offload_gb": _areal(0),
    "vllm.gpu_memory_utilization": _areal(0.9),
    "vllm.max_num_seqs": _areal(256),
    "vllm.max_model_len": _areal(32768),
    "actor.mb_spec.n_mbs": _areal(1),
    "actor.mb_spec.max_tokens_per_mb": _areal(None, note="None: split by n_mbs only"),
    "actor.gradient_checkpointing": _areal(
        False, note="True in the first AReaL-lite releases; False in current cli_args.py"),
    "actor.dtype": _areal("bfloat16"),
    "actor.pad_to_maximum": _areal(False),
    "actor.fsdp.offload_params": _areal(False),
    "actor.optimizer.offload": _areal(False),
    "actor.ppo_n_minibatches": _areal(4),
    "actor.group_size": _areal(1),
    "ref.mb_spec.max_tokens_per_mb": _areal(None),
    "gconfig.n_samples": _areal(1),
    "gconfig.max_new_tokens": _areal(16384),
    "train_dataset.batch_size": _areal(1),
    "train_dataset.max_length": _areal(None, note="None: prompts are not filtered by length"),
    "allocation_mode": _areal(""),
    "cluster.n_nodes": _areal(32),
    "cluster.n_gpus_per_node": _areal(8),
}

ALIASES = {
    "max_concurrent_rollouts": "rollout.max_concurrent_rollouts",
    "max_head_offpolicyness": "rollout.max_head_offpolicyness",
    "consumer_batch_size": "rollout.consumer_batch_size",
    "queue_size": "rollout.queue_size",
    "mem_fraction_static": "sglang.mem_fraction_static",
    "max_new_tokens": "gconfig.max_new_tokens",
}


def check(get: Getter) -> list[str]:
    out: list[str] = []
    # handling_oom.md: a micro batch holds at least one whole sequence (prompt + generation);
    # AReaL packs whole sequences, so a smaller budget cannot place the longest one.
    prompt = as_int(get("train_dataset.max_length"))
    new = as_int(get("gconfig.max_new_tokens"))
    if prompt is not None and new is not None:
        for key in ("actor.mb_spec.max_tokens_per_mb", "ref.mb_spec.max_tokens_per_mb"):
            budget = as_int(get(key))
            if budget is not None and budget < prompt + new:
                out.append(f"{key} ({budget}) must be >= train_dataset.max_length ({prompt}) + "
                           f"gconfig.max_new_tokens ({new}) = {prompt + new}")
    for key in ("rollout.max_concurrent_rollouts", "rollout.consumer_batch_size"):
        value = as_int(get(key))
        if value is not None and value < 1:
            out.append(f"{key} ({value}) must be at least 1")
    out += fraction_problem(get, "sglang.mem_fraction_static")
    out += fraction_problem(get, "vllm.gpu_memory_utilization")
    return out


CONFIG = ConfigFacts(
    drivers=r"^areal\.|(^|/)areal/|(^|/)realhf/|^realhf\.",
    top_keys=("gconfig", "allocation_mode", "max_head_offpolicyness", "sglang"),
    nested_keys=(("rollout", ("max_head_offpolicyness", "max_concurrent_rollouts")),),
    all_keys=("actor", "rollout"),
    style="yaml",
    model_path_keys=("actor.path", "model_path"),
    defaults=DEFAULTS,
    aliases=ALIASES,
    check=check,
    where="one YAML file (--config x.yaml) plus key=value overrides; "
          "python -m areal.launcher.local train.py --config x.yaml",
)

_AREAL = ("areal/",)

PHASE = PhaseFacts(
    drives=True,
    rules=(
        PhaseRule("weight-sync", "update_weights _update_weights_from_distributed "
                  "_update_weights_from_disk upload_weights _update_bucket_weights_from_distributed "
                  "update_weights_from_tensor _update_weights_from_tensor", _AREAL, "weight-sync",
                  "actor", "AReaL sends the actor's weights to the inference servers"),
        PhaseRule("generation", "rollout_batch prepare_batch arun_episode agenerate", _AREAL,
                  "generation", "rollout", "AReaL rollout"),
        PhaseRule("log-prob", "compute_logp", _AREAL, "log-prob", "actor", "log-prob computation"),
        PhaseRule("log-prob", "forward", ("areal/engine/fsdp_engine.py",
                                          "areal/engine/megatron_engine.py",
                                          "areal/engine/base_hf_engine.py"), "log-prob", "actor",
                  "AReaL engine forward (no gradient)", generic=True),
        PhaseRule("update", "ppo_update train_batch", _AREAL, "update", "actor", "PPO update"),
    ),
    calls=("compute_logp", "ppo_update", "update_weights"),
    markers=(
        LogMarker("step-done", r"Train step \d+/\d+ done", None, "", "AReaL finished a step"),
        LogMarker("log-prob", r"compute_logp|recompute logp", "log-prob", "actor",
                  "log-prob computation running"),
        LogMarker("update", r"\bppo_update\b|\bppo update\b|\btrain_batch\b", "update",
                  "actor", "actor update running"),
        LogMarker("update", r"(?<![\w/])[Rr]ollout(?![\w/])", "generation", "rollout",
                  "AReaL rollout", own=True),
    ),
)

CONCURRENT = "rollout.max_concurrent_rollouts"
MEM_FRACTION = "sglang.mem_fraction_static"
MAX_TOKENS = "actor.mb_spec.max_tokens_per_mb"
CKPT = "actor.gradient_checkpointing"
MICRO_TRADEOFF = ("more, smaller forward passes: the log-prob phase gets slower; results are the "
                  "same")

_ACTOR = (
    Knob(MAX_TOKENS, "tokens_down",
         "activations scale with the tokens in a micro batch; gradients are accumulated, so "
         "the batch is unchanged", "more, smaller passes: slower update", effect="estimate"),
    Knob(CKPT, "true", "activations recomputed in backward",
         "about 30 % more compute in the update", effect="estimate"),
)
_GENERATION = (
    Knob(CONCURRENT, "halve", "fewer rollouts in flight hold fewer KV-cache blocks and responses",
         "lower rollout throughput"),
    Knob(MEM_FRACTION, "fraction_down",
         "the SGLang server's static share leaves the rest of the GPU to other work",
         "a smaller KV cache: slower rollout", effect="fraction"),
)
KNOBS: dict[str, tuple[Knob, ...]] = {
    "engine-start": (
        Knob("vllm.gpu_memory_utilization", "fit_free",
             "vLLM asks for gpu_memory_utilization x the GPU at start, and less than that is free",
             "a smaller KV cache: slower rollout", effect="fraction"),
        # Only SGLang's own "increase --mem-fraction-static" asks for more.
        Knob(MEM_FRACTION, "fraction_up",
             "SGLang could not fit the weights and a minimal KV cache in mem_fraction_static of "
             "the GPU (its own message asks to increase it)",
             "less memory left on that GPU for anything else (fine on dedicated rollout GPUs)",
             args=("sglang",)),
    ),
    "generation": _GENERATION,
    "log-prob": (
        Knob(MAX_TOKENS, "tokens_down",
             "micro batches are packed up to max_tokens_per_mb tokens; the logits of a micro batch "
             "scale with it", MICRO_TRADEOFF, effect="estimate"),
    ),
    "actor-forward": _ACTOR,
    "actor-backward": _ACTOR,
    "critic-update": _ACTOR,
    "weight-sync": _GENERATION,
    "unknown": _ACTOR + _GENERATION,
}

_DATA_PARALLEL = re.compile(r"d(\d+)")


def estimate_settings(get: Getter, phase: str, role: str) -> dict[str, Any]:
    """AReaL packs sequences into micro batches of at most max_tokens_per_mb tokens: one micro
    batch of that many tokens is the activation and logits peak."""
    tokens = get(MAX_TOKENS)
    tokens = tokens if as_int(tokens) and tokens > 0 else None
    train = str(get("allocation_mode") or "").split("+")[-1]
    dp = _DATA_PARALLEL.search(train)
    out: dict[str, Any] = {
        "world_size": int(dp.group(1)) if dp else 1,
        "gradient_checkpointing": bool(get(CKPT)),
        "micro_batch": 1,
        "log_prob_micro_batch": 1,
    }
    if tokens:
        out["seq_len"] = tokens
    return out


# Settings that make asynchronous rollout wait (playbook section 2), read when steps stall.
STALLS = (
    StallCheck("rollout.max_head_offpolicyness", "equals", 0,
               "rollout.max_head_offpolicyness is 0{default}: every rollout waits for the latest "
               "weights, so generation stops at each weight update and a slow update stalls the "
               "whole loop; allow some staleness (2-4) unless the run must be strictly "
               "on-policy", " (the default)"),
    StallCheck("rollout.max_concurrent_rollouts", "at-most", 4,
               "rollout.max_concurrent_rollouts is {value}{default}: so few rollouts in flight "
               "keep the trainer waiting for data; raise it towards the training batch size",
               " (the default: consumer_batch_size)"),
)

OOM = OomFacts(
    knobs=KNOBS,
    seq_keys=("train_dataset.max_length", "gconfig.max_new_tokens"),
    ref_renames=(("actor.mb_spec", "ref.mb_spec"),),
    patch_style="yaml",
    patch_header="# in the experiment YAML:",
    estimate=estimate_settings,
    stalls=STALLS,
)

FRAMEWORK = Framework(
    name="areal",
    label="AReaL",
    kind="rl",
    packages=("areal", "realhf"),
    path_marks=("/areal/", "/realhf/"),
    steps=(
        StepFormat(
            name="areal", parser="areal", markers=("Step ", "\u2502", "\u2558"),
            example="(AReaL) 20260521-18:37:16.123 StatsLogger INFO: Epoch 1/1 Step 3/100 Train "
                    "step 3/100 done. then Stats (1/1): and a box table",
            source="inclusionAI/AReaL areal/utils/stats_logger.py, areal/utils/logging.py",
            step_time="timeperf/train_step (the training part of the step only)"),
    ),
    log_prefixes=("[main]    (merged.log role, padded to 10 columns)", "(AReaL) header"),
    config=CONFIG,
    phase=PHASE,
    oom=OOM,
    sources=("inclusionAI/AReaL",),
)
