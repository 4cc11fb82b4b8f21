"""The frameworks' documented defaults and the constraints they enforce (pure).

OOM triage reads the job's config (``JobConfig``); a key the job does not set takes the
framework's documented default, flagged as a default. ``check`` lists the rules the framework
itself enforces at start (batch divisibility, micro batch settings, token budgets), so a
suggested change never yields a config the framework rejects. Every default and rule names the
file it comes from; docs/job-config.md lists them.

Sources (read, not copied):
- verl: ``verl/trainer/config/ppo_trainer.yaml`` (the same values in the later split files
  ``actor/*.yaml``, ``rollout/rollout.yaml`` and ``_generated_ppo_trainer.yaml``),
  ``verl/trainer/config/actor/megatron_actor.yaml``; the checks in
  ``verl/trainer/ppo/ray_trainer.py`` (``_validate_config``), ``verl/workers/config/actor.py``
  and ``critic.py`` (``validate``), ``verl/workers/fsdp_workers.py`` (the per-GPU normalisation
  and the rollout mesh), ``verl/utils/seqlen_balancing.py`` (``rearrange_micro_batches``) and
  ``verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py``.
- AReaL: ``areal/api/cli_args.py`` (the dataclass defaults; docs/cli_reference.md is generated
  from it) and docs/best_practices/handling_oom.md for the token budget rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rltui.diagnosis.oom.types import ConfigValue, JobConfig
from rltui.parsing.jobconfig import get_path

VERL_YAML = "verl/trainer/config/ppo_trainer.yaml"
VERL_MEGATRON_YAML = "verl/trainer/config/actor/megatron_actor.yaml"
AREAL_ARGS = "areal/api/cli_args.py"


@dataclass(frozen=True, slots=True)
class Default:
    value: Any  # may be an interpolation "${other.key}", resolved by ``effective``
    source: str  # the file in the framework's repository that documents it
    fallback: str | None = None  # when the value is None the framework uses this key's value
    note: str = ""


def _verl(value: Any, note: str = "") -> Default:
    return Default(value, VERL_YAML, note=note)


def _areal(value: Any, fallback: str | None = None, note: str = "") -> Default:
    return Default(value, AREAL_ARGS, fallback=fallback, note=note)


AR = "actor_rollout_ref"

# verl: ppo_trainer.yaml. Interpolations are kept as written there; ``effective`` resolves them.
# (The model path's documented default, ~/models/deepseek-llm-7b-chat, is a placeholder and is
# left out on purpose: no job runs with it.)
VERL_DEFAULTS: dict[str, Default] = {
    "data.train_batch_size": _verl(1024),
    "data.max_prompt_length": _verl(512),
    "data.max_response_length": _verl(512),
    f"{AR}.model.enable_gradient_checkpointing": _verl(True),
    f"{AR}.model.enable_activation_offload": _verl(False),
    f"{AR}.model.use_remove_padding": _verl(False),
    f"{AR}.actor.strategy": _verl("fsdp"),
    f"{AR}.actor.ppo_mini_batch_size": _verl(256),
    f"{AR}.actor.ppo_micro_batch_size": _verl(None, "deprecated; use ppo_micro_batch_size_per_gpu"),
    f"{AR}.actor.ppo_micro_batch_size_per_gpu": _verl(None),
    f"{AR}.actor.use_dynamic_bsz": _verl(False),
    f"{AR}.actor.ppo_max_token_len_per_gpu": _verl(16384),
    f"{AR}.actor.ppo_epochs": _verl(1),
    f"{AR}.actor.ulysses_sequence_parallel_size": _verl(1),
    f"{AR}.actor.use_kl_loss": _verl(False),
    f"{AR}.actor.fsdp_config.param_offload": _verl(False),
    f"{AR}.actor.fsdp_config.optimizer_offload": _verl(False),
    f"{AR}.actor.fsdp_config.offload_policy": _verl(False, "fsdp2 only"),
    f"{AR}.actor.fsdp_config.reshard_after_forward": _verl(True, "fsdp2 only"),
    f"{AR}.actor.fsdp_config.fsdp_size": _verl(-1),
    f"{AR}.actor.megatron.tensor_model_parallel_size": Default(1, VERL_MEGATRON_YAML),
    f"{AR}.actor.megatron.pipeline_model_parallel_size": Default(1, VERL_MEGATRON_YAML),
    f"{AR}.actor.megatron.context_parallel_size": Default(1, VERL_MEGATRON_YAML),
    f"{AR}.ref.log_prob_micro_batch_size": _verl(None, "deprecated; use the _per_gpu key"),
    f"{AR}.ref.log_prob_micro_batch_size_per_gpu": _verl(None),
    f"{AR}.ref.log_prob_use_dynamic_bsz": _verl("${actor_rollout_ref.actor.use_dynamic_bsz}"),
    f"{AR}.ref.log_prob_max_token_len_per_gpu":
        _verl("${actor_rollout_ref.actor.ppo_max_token_len_per_gpu}"),
    f"{AR}.ref.ulysses_sequence_parallel_size":
        _verl("${actor_rollout_ref.actor.ulysses_sequence_parallel_size}"),
    f"{AR}.ref.fsdp_config.param_offload": _verl(False),
    f"{AR}.rollout.name": _verl("vllm", "newer verl versions require it to be set"),
    f"{AR}.rollout.n": _verl(1),
    f"{AR}.rollout.gpu_memory_utilization": _verl(0.5),
    f"{AR}.rollout.tensor_model_parallel_size": _verl(2),
    f"{AR}.rollout.dtype": _verl("bfloat16"),
    f"{AR}.rollout.max_num_batched_tokens": _verl(8192),
    f"{AR}.rollout.max_num_seqs": _verl(1024),
    f"{AR}.rollout.max_model_len": _verl(None, "None: prompt_length + response_length"),
    f"{AR}.rollout.enable_chunked_prefill": _verl(True),
    f"{AR}.rollout.free_cache_engine": _verl(True),
    f"{AR}.rollout.prompt_length": _verl("${data.max_prompt_length}"),
    f"{AR}.rollout.response_length": _verl("${data.max_response_length}"),
    f"{AR}.rollout.log_prob_micro_batch_size": _verl(None, "deprecated; use the _per_gpu key"),
    f"{AR}.rollout.log_prob_micro_batch_size_per_gpu": _verl(None),
    f"{AR}.rollout.log_prob_use_dynamic_bsz":
        _verl("${actor_rollout_ref.actor.use_dynamic_bsz}"),
    f"{AR}.rollout.log_prob_max_token_len_per_gpu":
        _verl("${actor_rollout_ref.actor.ppo_max_token_len_per_gpu}"),
    "critic.enable": _verl(None, "None: a critic exactly when algorithm.adv_estimator is gae"),
    "critic.strategy": _verl("fsdp"),
    "critic.rollout_n": _verl("${actor_rollout_ref.rollout.n}"),
    "critic.ppo_mini_batch_size": _verl("${actor_rollout_ref.actor.ppo_mini_batch_size}"),
    "critic.ppo_micro_batch_size": _verl(None, "deprecated; use ppo_micro_batch_size_per_gpu"),
    "critic.ppo_micro_batch_size_per_gpu": _verl(None),
    "critic.use_dynamic_bsz": _verl("${actor_rollout_ref.actor.use_dynamic_bsz}"),
    "critic.ppo_max_token_len_per_gpu": _verl(32768),
    "critic.forward_max_token_len_per_gpu": _verl("${critic.ppo_max_token_len_per_gpu}"),
    "critic.ulysses_sequence_parallel_size": _verl(1),
    "critic.model.enable_gradient_checkpointing": _verl(True),
    "critic.model.use_remove_padding": _verl(False),
    "critic.model.fsdp_config.param_offload": _verl(False),
    "critic.model.fsdp_config.optimizer_offload": _verl(False),
    "critic.model.fsdp_config.offload_policy": _verl(False),
    "algorithm.adv_estimator": _verl("gae"),
    "algorithm.use_kl_in_reward": _verl(False),
    "reward_model.enable": _verl(False),
    "trainer.n_gpus_per_node": _verl(8),
    "trainer.nnodes": _verl(1),
}

# AReaL: the dataclass defaults of areal/api/cli_args.py (GRPOConfig and its parts). The
# rollout knobs live under ``rollout`` (InferenceEngineConfig), the SGLang server's under
# ``sglang``, generation under ``gconfig``.
AREAL_DEFAULTS: dict[str, Default] = {
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

DEFAULTS: dict[str, dict[str, Default]] = {"verl": VERL_DEFAULTS, "areal": AREAL_DEFAULTS}

# Names in use elsewhere (guides, the playbook, older docs) -> the key the framework reads.
ALIASES: dict[str, dict[str, str]] = {
    "verl": {
        f"{AR}.actor.gradient_checkpointing": f"{AR}.model.enable_gradient_checkpointing",
        f"{AR}.actor.enable_gradient_checkpointing": f"{AR}.model.enable_gradient_checkpointing",
    },
    "areal": {
        "max_concurrent_rollouts": "rollout.max_concurrent_rollouts",
        "max_head_offpolicyness": "rollout.max_head_offpolicyness",
        "consumer_batch_size": "rollout.consumer_batch_size",
        "queue_size": "rollout.queue_size",
        "mem_fraction_static": "sglang.mem_fraction_static",
        "max_new_tokens": "gconfig.max_new_tokens",
    },
}

_MAX_DEPTH = 8
_WHOLE = re.compile(r"^\$\{([^${}]+)\}$")
_INNER = re.compile(r"\$\{([^${}]+)\}")


def canonical_key(framework: str, key: str) -> str:
    return ALIASES.get(framework, {}).get(key, key)


def documented_default(framework: str, key: str) -> Default | None:
    return DEFAULTS.get(framework, {}).get(canonical_key(framework, key))


def effective(config: JobConfig, key: str) -> ConfigValue:
    """The value the job runs with: from its config (after overrides), else the framework's
    documented default (``default=True``), else ``None`` (``default=True``: nothing known).
    Aliases resolve to the framework's own key (returned in ``ConfigValue.key``); ``${...}``
    interpolations resolve against the config and the defaults."""
    value, default, key = _lookup(config.framework, config.values, key, 0)
    return ConfigValue(key=key, value=value, default=default)


def _lookup(framework: str, values: Mapping[str, Any], key: str,
            depth: int) -> tuple[Any, bool, str]:
    canon = canonical_key(framework, key)
    found, value = get_path(values, canon)
    if not found and canon != key:
        found, value = get_path(values, key)  # written under the alias (AReaL would refuse it)
    default_entry = DEFAULTS.get(framework, {}).get(canon)
    is_default = not found
    if not found:
        value = default_entry.value if default_entry is not None else None
    value = _resolve(framework, values, canon, value, depth)
    if value is None and default_entry is not None and default_entry.fallback \
            and depth < _MAX_DEPTH:
        value = _lookup(framework, values, default_entry.fallback, depth + 1)[0]
    return value, is_default, canon


def _resolve(framework: str, values: Mapping[str, Any], key: str, value: Any, depth: int) -> Any:
    """``${a.b}``, ``${oc.select:a.b,default}`` and relative ``${.sibling}`` interpolations;
    inside a longer string each is replaced by its text. Unresolvable ones stay as written."""
    if not isinstance(value, str) or "${" not in value or depth >= _MAX_DEPTH:
        return value
    whole = _WHOLE.match(value)
    if whole:
        return _interpolate(framework, values, key, whole.group(1), depth, value)

    def text(m: re.Match) -> str:
        got = _interpolate(framework, values, key, m.group(1), depth, m.group(0))
        return m.group(0) if isinstance(got, str) and got == m.group(0) else _text(got)

    return _INNER.sub(text, value)


def _interpolate(framework: str, values: Mapping[str, Any], key: str, body: str, depth: int,
                 written: str) -> Any:
    body = body.strip()
    fallback_given = False
    fallback: Any = None
    if body.startswith("oc.select:"):
        body, sep, raw_default = body[len("oc.select:"):].partition(",")
        if sep:
            fallback_given = True
            fallback = _scalar(raw_default.strip())
    elif ":" in body:
        return written  # a resolver rltui does not know (oc.env, ...)
    target = _absolute(key, body.strip())
    if target is None:
        return written
    found_in_config, _ = get_path(values, target)
    known = found_in_config or target in DEFAULTS.get(framework, {})
    if not known:
        return fallback if fallback_given else written
    return _lookup(framework, values, target, depth + 1)[0]


def _absolute(key: str, ref: str) -> str | None:
    if not ref.startswith("."):
        return ref
    dots = len(ref) - len(ref.lstrip("."))
    parent = key.split(".")[:-1]
    up = dots - 1
    if up > len(parent):
        return None
    base = parent[:len(parent) - up] if up else parent
    rest = ref[dots:]
    return ".".join([*base, rest]) if rest else None


def _scalar(raw: str) -> Any:
    low = raw.lower()
    if low == "null":
        return None
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw.strip("'\"")


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- constraints ----------------------------------------------------------------------------------

def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check(framework: str, values: Mapping[str, Any]) -> list[str]:
    """The framework's own start-up checks that a config fails, one sentence each naming the
    keys and values. Keys absent from ``values`` take their documented defaults. A rule whose
    inputs are unknown or not numbers is skipped (it cannot be decided)."""
    def get(key: str) -> Any:
        return _lookup(framework, values, key, 0)[0]

    if framework == "verl":
        return _check_verl(get)
    if framework == "areal":
        return _check_areal(get)
    return []


def _mini_and_global_micro(prefix: str, tbs: int | None, mini: int | None,
                           micro_global: int | None, sp: int, n_gpus: int | None) -> list[str]:
    """verl's checks of a mini batch against the train batch and the (deprecated) global micro
    batch, the same for the actor and the critic."""
    out = []
    if tbs is not None and mini is not None and tbs < mini:
        out.append(f"data.train_batch_size ({tbs}) must be >= {prefix}.ppo_mini_batch_size "
                   f"({mini})")
    if micro_global is not None and mini is not None and micro_global > 0:
        if mini % micro_global:
            out.append(f"{prefix}.ppo_mini_batch_size ({mini}) must be divisible by "
                       f"{prefix}.ppo_micro_batch_size ({micro_global})")
        if n_gpus and micro_global * sp < n_gpus:
            out.append(f"{prefix}.ppo_micro_batch_size ({micro_global}) x "
                       f"ulysses_sequence_parallel_size ({sp}) must be >= the GPU count "
                       f"({n_gpus})")
    return out


def _both_or_neither(get: Callable[[str], Any], section: str, name: str,
                     why: str) -> list[str]:
    """verl's check_mutually_exclusive: exactly one of the deprecated global key and its
    _per_gpu form must be set."""
    old, new = f"{section}.{name}", f"{section}.{name}_per_gpu"
    a, b = get(old), get(new)
    if a is not None and b is not None:
        return [(f"{old} ({a}) and {new} ({b}) are both set; verl accepts only {new} "
                 "(the other is deprecated)")]
    if a is None and b is None:
        return [f"neither {new} nor {old} is set; verl requires one {why}"]
    return []


def _check_verl(get: Callable[[str], Any]) -> list[str]:
    out: list[str] = []
    per_node, nodes = _int(get("trainer.n_gpus_per_node")), _int(get("trainer.nnodes"))
    n_gpus = per_node * nodes if per_node is not None and nodes is not None else None
    tbs = _int(get("data.train_batch_size"))
    n = _int(get(f"{AR}.rollout.n"))
    strategy = get(f"{AR}.actor.strategy")
    dyn = get(f"{AR}.actor.use_dynamic_bsz") is True
    sp = _int(get(f"{AR}.actor.ulysses_sequence_parallel_size")) or 1
    mini = _int(get(f"{AR}.actor.ppo_mini_batch_size"))
    micro_gpu = _int(get(f"{AR}.actor.ppo_micro_batch_size_per_gpu"))
    micro_global = _int(get(f"{AR}.actor.ppo_micro_batch_size"))
    seq = _seq_len(get)

    # ray_trainer._validate_config: the whole batch splits evenly over the data-parallel ranks.
    if tbs is not None and n is not None and n_gpus:
        real = tbs * n
        if strategy == "megatron":
            tp = _int(get(f"{AR}.actor.megatron.tensor_model_parallel_size")) or 1
            pp = _int(get(f"{AR}.actor.megatron.pipeline_model_parallel_size")) or 1
            cp = _int(get(f"{AR}.actor.megatron.context_parallel_size")) or 1
            if n_gpus % (tp * pp * cp):
                out.append(f"the GPU count trainer.n_gpus_per_node x trainer.nnodes = {n_gpus} "
                           f"must be divisible by megatron tensor x pipeline x context parallel "
                           f"sizes = {tp} x {pp} x {cp}")
            elif micro_gpu is not None:
                minimal = n_gpus // (tp * pp * cp) * micro_gpu
                if real % minimal:
                    out.append(f"data.train_batch_size ({tbs}) x {AR}.rollout.n ({n}) = {real} "
                               f"must be divisible by the data-parallel size "
                               f"{n_gpus // (tp * pp * cp)} x {AR}.actor.ppo_micro_batch_size_"
                               f"per_gpu ({micro_gpu}) = {minimal}")
        elif real % n_gpus:
            out.append(f"data.train_batch_size ({tbs}) x {AR}.rollout.n ({n}) = {real} must be "
                       f"divisible by the GPU count trainer.n_gpus_per_node x trainer.nnodes "
                       f"= {n_gpus}")

    # ActorConfig.__post_init__ / validate (older: ray_trainer._validate_config).
    if not dyn:
        out += _both_or_neither(get, f"{AR}.actor", "ppo_micro_batch_size",
                                "when use_dynamic_bsz is false")
        out += _mini_and_global_micro(f"{AR}.actor", tbs, mini, micro_global, sp, n_gpus)

    # fsdp_workers.ActorRolloutRefWorker: the mini batch per GPU after normalisation.
    if strategy in ("fsdp", "fsdp2") and mini is not None and n is not None and n_gpus:
        out += _per_gpu_mini(f"{AR}.actor", mini, n, n_gpus, sp, micro_gpu,
                             f"{AR}.rollout.n")

    # check_mutually_exclusive for the log-prob passes (rollout always, ref when used).
    if not dyn:
        out += _both_or_neither(get, f"{AR}.rollout", "log_prob_micro_batch_size",
                                "when actor.use_dynamic_bsz is false")
        if _uses_ref(get):
            out += _both_or_neither(get, f"{AR}.ref", "log_prob_micro_batch_size",
                                    "when the reference policy is used and "
                                    "actor.use_dynamic_bsz is false")

    # seqlen_balancing.rearrange_micro_batches: a token budget holds one whole sequence.
    if seq is not None:
        budgets = [(f"{AR}.actor.use_dynamic_bsz", f"{AR}.actor.ppo_max_token_len_per_gpu", sp),
                   (f"{AR}.rollout.log_prob_use_dynamic_bsz",
                    f"{AR}.rollout.log_prob_max_token_len_per_gpu", sp)]
        if _uses_ref(get):
            ref_sp = _int(get(f"{AR}.ref.ulysses_sequence_parallel_size")) or 1
            budgets.append((f"{AR}.ref.log_prob_use_dynamic_bsz",
                            f"{AR}.ref.log_prob_max_token_len_per_gpu", ref_sp))
        if _uses_critic(get):
            csp = _int(get("critic.ulysses_sequence_parallel_size")) or 1
            budgets += [("critic.use_dynamic_bsz", "critic.ppo_max_token_len_per_gpu", csp),
                        ("critic.use_dynamic_bsz", "critic.forward_max_token_len_per_gpu", csp)]
        for flag, budget_key, factor in budgets:
            budget = _int(get(budget_key))
            if get(flag) is True and budget is not None and budget * factor < seq:
                extra = f" x ulysses_sequence_parallel_size ({factor})" if factor > 1 else ""
                out.append(f"{budget_key} ({budget}){extra} must be >= the longest sequence, "
                           f"data.max_prompt_length + data.max_response_length = {seq}, when "
                           f"{flag.rsplit('.', 1)[-1]} is true")

    # critic (FSDPCriticConfig and CriticWorker), when the run has one.
    if _uses_critic(get):
        out += _check_verl_critic(get, tbs, n_gpus)

    # Ulysses sequence parallelism needs padding removed (FSDPActorConfig / FSDPCriticConfig).
    if sp > 1 and get(f"{AR}.model.use_remove_padding") is not True:
        out.append(f"{AR}.actor.ulysses_sequence_parallel_size ({sp}) > 1 needs "
                   f"{AR}.model.use_remove_padding=true")

    # fsdp_workers._build_rollout: the rollout's tensor parallel groups tile the GPUs.
    tp = _int(get(f"{AR}.rollout.tensor_model_parallel_size"))
    if tp is not None and n_gpus and (tp < 1 or n_gpus % tp):
        out.append(f"the GPU count trainer.n_gpus_per_node x trainer.nnodes = {n_gpus} must "
                   f"be divisible by {AR}.rollout.tensor_model_parallel_size ({tp})")

    # vllm_rollout_spmd: chunked prefill needs a token budget of at least one whole sequence.
    if get(f"{AR}.rollout.name") in ("vllm", None) and get(f"{AR}.rollout.enable_chunked_prefill"):
        batched = _int(get(f"{AR}.rollout.max_num_batched_tokens"))
        model_len = _int(get(f"{AR}.rollout.max_model_len"))
        prompt = _int(get(f"{AR}.rollout.prompt_length"))
        response = _int(get(f"{AR}.rollout.response_length"))
        if model_len is None and prompt is not None and response is not None:
            model_len = prompt + response
        if batched is not None and model_len is not None and batched < model_len:
            out.append(f"{AR}.rollout.max_num_batched_tokens ({batched}) must be >= "
                       f"max_model_len ({model_len}) while "
                       f"{AR}.rollout.enable_chunked_prefill is true")

    out += _fraction(get, f"{AR}.rollout.gpu_memory_utilization")
    return out


def _per_gpu_mini(section: str, mini: int, n: int, n_gpus: int, sp: int, micro_gpu: int | None,
                  n_key: str) -> list[str]:
    dp = n_gpus // sp if sp else n_gpus
    if dp <= 0:
        return [f"ulysses_sequence_parallel_size ({sp}) is larger than the GPU count ({n_gpus})"]
    per_gpu = mini * n // dp
    where = (f"{section}.ppo_mini_batch_size ({mini}) x {n_key} ({n}) / "
             f"{dp} data-parallel ranks = {per_gpu} per GPU")
    if per_gpu <= 0:
        return [f"{where}; verl needs at least 1"]
    if micro_gpu is not None and micro_gpu > 0 and per_gpu % micro_gpu:
        return [(f"{where}, which must be divisible by "
                 f"{section}.ppo_micro_batch_size_per_gpu ({micro_gpu})")]
    return []


def _check_verl_critic(get: Callable[[str], Any], tbs: int | None,
                       n_gpus: int | None) -> list[str]:
    out: list[str] = []
    dyn = get("critic.use_dynamic_bsz") is True
    mini = _int(get("critic.ppo_mini_batch_size"))
    micro_gpu = _int(get("critic.ppo_micro_batch_size_per_gpu"))
    micro_global = _int(get("critic.ppo_micro_batch_size"))
    sp = _int(get("critic.ulysses_sequence_parallel_size")) or 1
    n = _int(get("critic.rollout_n"))
    if not dyn:
        out += _both_or_neither(get, "critic", "ppo_micro_batch_size",
                                "when the run has a critic and use_dynamic_bsz is false")
        out += _mini_and_global_micro("critic", tbs, mini, micro_global, sp, n_gpus)
    if get("critic.strategy") in ("fsdp", "fsdp2") and mini is not None and n is not None \
            and n_gpus:
        out += _per_gpu_mini("critic", mini, n, n_gpus, sp, micro_gpu, "critic.rollout_n")
    if sp > 1 and get("critic.model.use_remove_padding") is not True:
        out.append(f"critic.ulysses_sequence_parallel_size ({sp}) > 1 needs "
                   "critic.model.use_remove_padding=true")
    return out


def _uses_ref(get: Callable[[str], Any]) -> bool:
    """main_ppo adds the reference policy for a KL loss or an in-reward KL penalty."""
    return get(f"{AR}.actor.use_kl_loss") is True or get("algorithm.use_kl_in_reward") is True


def _uses_critic(get: Callable[[str], Any]) -> bool:
    """RayPPOTrainer: critic.enable when set, else a critic exactly for GAE."""
    enable = get("critic.enable")
    if enable is not None:
        return bool(enable)
    return get("algorithm.adv_estimator") == "gae"


def _seq_len(get: Callable[[str], Any]) -> int | None:
    prompt, response = _int(get("data.max_prompt_length")), _int(get("data.max_response_length"))
    return prompt + response if prompt is not None and response is not None else None


def _fraction(get: Callable[[str], Any], key: str) -> list[str]:
    value = get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not 0 < value <= 1:
        return [f"{key} ({value}) must be a fraction of the GPU in (0, 1]"]
    return []


def _check_areal(get: Callable[[str], Any]) -> list[str]:
    out: list[str] = []
    # handling_oom.md: a micro batch holds at least one whole sequence (prompt + generation);
    # AReaL packs whole sequences, so a smaller budget cannot place the longest one.
    prompt = _int(get("train_dataset.max_length"))
    new = _int(get("gconfig.max_new_tokens"))
    if prompt is not None and new is not None:
        for key in ("actor.mb_spec.max_tokens_per_mb", "ref.mb_spec.max_tokens_per_mb"):
            budget = _int(get(key))
            if budget is not None and budget < prompt + new:
                out.append(f"{key} ({budget}) must be >= train_dataset.max_length ({prompt}) + "
                           f"gconfig.max_new_tokens ({new}) = {prompt + new}")
    for key in ("rollout.max_concurrent_rollouts", "rollout.consumer_batch_size"):
        value = _int(get(key))
        if value is not None and value < 1:
            out.append(f"{key} ({value}) must be at least 1")
    out += _fraction(get, "sglang.mem_fraction_static")
    out += _fraction(get, "vllm.gpu_memory_utilization")
    return out
