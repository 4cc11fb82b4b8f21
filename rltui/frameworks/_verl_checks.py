"""verl's own start-up checks, as rltui reads them (pure; kept apart from ``verl.py`` for size).

Read, not copied, from volcengine/verl: ``verl/trainer/ppo/ray_trainer.py`` (``_validate_config``),
``verl/workers/config/actor.py`` and ``critic.py`` (``validate``), ``verl/workers/fsdp_workers.py``
(the per-GPU normalisation and the rollout mesh), ``verl/utils/seqlen_balancing.py``
(``rearrange_micro_batches``) and ``verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py``.
Each rule is skipped when its inputs are unknown or not numbers (it cannot be decided).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rltui.frameworks._types import as_int as _int
from rltui.frameworks._types import fraction_problem as _fraction

AR = "actor_rollout_ref"


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


def check_verl(get: Callable[[str], Any]) -> list[str]:
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
