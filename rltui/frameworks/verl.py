"""verl (volcengine/verl): what rltui knows of it. Pure data, plus verl's own config checks.

Sources (read, not copied): ``verl/utils/logger/aggregate_logger.py`` (the step line),
``verl/trainer/config/ppo_trainer.yaml`` (the same values in the later split files
``actor/*.yaml``, ``rollout/rollout.yaml`` and ``_generated_ppo_trainer.yaml``) and
``verl/trainer/config/actor/megatron_actor.yaml`` (defaults), ``verl/trainer/main_ppo.py``
(``TaskRunner``), ``verl/single_controller/ray/base.py`` (``WorkerDict``), the workers under
``verl/workers/`` (phase frames), and the checks listed in ``_verl_checks.py``.
"""

from __future__ import annotations

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
    StepFormat,
    TitlePattern,
)
from rltui.frameworks._verl_checks import check_verl

VERL_YAML = "verl/trainer/config/ppo_trainer.yaml"
VERL_MEGATRON_YAML = "verl/trainer/config/actor/megatron_actor.yaml"
AR = "actor_rollout_ref"


def _verl(value: Any, note: str = "") -> Default:
    return Default(value, VERL_YAML, note=note)


# verl: ppo_trainer.yaml. Interpolations are kept as written there; ``effective`` resolves them.
# (The model path's documented default, ~/models/deepseek-llm-7b-chat, is a placeholder and is
# left out on purpose: no job runs with it.)
DEFAULTS: dict[str, Default] = {
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

# Names in use elsewhere (guides, the playbook, older docs) -> the key verl reads.
ALIASES = {
    f"{AR}.actor.gradient_checkpointing": f"{AR}.model.enable_gradient_checkpointing",
    f"{AR}.actor.enable_gradient_checkpointing": f"{AR}.model.enable_gradient_checkpointing",
}

CONFIG = ConfigFacts(
    drivers=r"(^|[/.])verl\.trainer\.|(^|/)verl/trainer/|main_ppo(\.py)?$",
    top_keys=("actor_rollout_ref",),
    style="hydra",
    default_config_name="ppo_trainer",
    model_path_keys=(f"{AR}.model.path",),
    defaults=DEFAULTS,
    aliases=ALIASES,
    check=check_verl,
    where="Hydra: --config-path/--config-name (default ppo_trainer) plus key=value overrides "
          "on the python3 -m verl.trainer.main_ppo command line",
)

# -- OOM phase: frames, calls in source lines, Ray tasks, log markers ---------------------------

_VERL = ("verl/",)
_AREAL = ("areal/",)

PHASE = PhaseFacts(
    drives=True,
    rules=(
        PhaseRule("engine-start", "_build_rollout", _VERL, "engine-start", "rollout",
                  "verl builds the rollout engine"),
        PhaseRule("weight-sync", "__enter__", ("sharding_manager",), "weight-sync", "actor",
                  "verl syncs the actor's weights into the rollout engine", generic=True),
        PhaseRule("weight-sync", "sync_weights _sync_weights sync_rollout_weights rollout_mode "
                  "update_weights", _VERL, "weight-sync", "actor",
                  "verl syncs the actor's weights into the rollout engine"),
        PhaseRule("generation", "generate_sequences _batch_level_generate_sequences "
                  "_req_level_generate_sequences _async_rollout_a_request", _VERL, "generation",
                  "rollout", "verl rollout generation"),
        PhaseRule("generation", "generate", ("verl/workers/rollout/",), "generation", "rollout",
                  "verl rollout generation", generic=True),
        PhaseRule("log-prob", "compute_ref_log_prob", _VERL, "log-prob", "ref",
                  "reference log-prob computation"),
        PhaseRule("log-prob", "compute_log_prob", _VERL, "log-prob", "actor",
                  "log-prob computation"),
        PhaseRule("log-prob", "compute_values", _VERL + _AREAL, "critic-update", "critic",
                  "critic value computation (compute_values)"),
        PhaseRule("log-prob", "compute_rm_score", _VERL, "log-prob", "", "reward model forward"),
        PhaseRule("update", "update_critic", _VERL, "critic-update", "critic", "critic update"),
        PhaseRule("update", "update_policy update_actor", _VERL, "update", "actor",
                  "actor update"),
        PhaseRule("update", "forward_backward_batch", _VERL, "update", "actor",
                  "actor update (Megatron)"),
        PhaseRule("update", "_optimizer_step", _VERL, "update", "actor", "actor optimizer step"),
    ),
    # The driver's `gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)`.
    calls=("generate_sequences", "compute_ref_log_prob", "compute_log_prob", "compute_values",
           "update_actor", "update_critic", "sync_weights"),
    # Ray task names of the worker groups: "actor_rollout_compute_ref_log_prob".
    task_prefixes=("actor_rollout_ref_", "actor_rollout_", "critic_", "ref_", "rollout_", "rm_",
                   "actor_"),
    markers=(
        LogMarker("step-done", r"\bstep:\d+ - ", None, "", "verl finished a step"),
        LogMarker("finished", r"After building sharding manager", None, "",
                  "the inference engine finished starting"),
        LogMarker("finished", r"After rollout generation", None, "", "verl finished generation"),
        LogMarker("finished", r"After update policy", None, "", "verl finished the actor update"),
        LogMarker("finished", r"After sync model weights in sharding manager", None, "",
                  "the weight sync finished"),
        LogMarker("engine-start", r"Before building (?:vllm|sglang) rollout|"
                  r"After building (?:vllm|sglang) rollout", "engine-start", "rollout",
                  "verl is building the rollout engine"),
        LogMarker("weight-sync", r"(?:Before|After) state_dict\(\) in sharding manager|"
                  r"sync_weights", "weight-sync", "actor", "weight sync running"),
        LogMarker("generation", r"After entering rollout sharding manager|generate_sequences",
                  "generation", "rollout", "verl generation running"),
        LogMarker("log-prob", r"compute_ref_log_prob|\bref_log_prob\b", "log-prob", "ref",
                  "reference log-prob running"),
        LogMarker("log-prob", r"compute_log_prob|\bold_log_prob\b", "log-prob", "actor",
                  "log-prob computation running"),
        LogMarker("update", r"Before update policy|update_policy|update_actor", "update", "actor",
                  "actor update running"),
    ),
)

# -- OOM knobs: the playbook's OOM table ----------------------------------------------------------

ROLLOUT_UTIL = f"{AR}.rollout.gpu_memory_utilization"
LOGPROB_MB = f"{AR}.rollout.log_prob_micro_batch_size_per_gpu"
REF_LOGPROB_MB = f"{AR}.ref.log_prob_micro_batch_size_per_gpu"
PPO_MB = f"{AR}.actor.ppo_micro_batch_size_per_gpu"
CKPT = f"{AR}.model.enable_gradient_checkpointing"
STRATEGY = f"{AR}.actor.strategy"
OFFLOAD_PARAM = f"{AR}.actor.fsdp_config.param_offload"
OFFLOAD_OPT = f"{AR}.actor.fsdp_config.optimizer_offload"
DYN = f"{AR}.actor.use_dynamic_bsz"
OFFLOAD_POLICY = f"{AR}.actor.fsdp_config.offload_policy"
PPO_TOKENS = f"{AR}.actor.ppo_max_token_len_per_gpu"
CRITIC_MB = "critic.ppo_micro_batch_size_per_gpu"
CRITIC_CKPT = "critic.model.enable_gradient_checkpointing"

FSDP2 = Knob(STRATEGY, "replace",
             "FSDP2 with offload_policy keeps parameters, gradients and optimizer states in host "
             "memory and streams them per layer: the actor's resident share on the GPU drops to "
             "about one layer", "host-device traffic every step: slower update; needs a verl "
             "version with FSDP2", args=("fsdp", "fsdp2"), also=((OFFLOAD_POLICY, True),))
LOGITS_WHY = ("log-prob computation materialises micro batch x sequence x vocabulary logits in "
              "fp32; halving the micro batch halves that peak")
MICRO_TRADEOFF = ("more, smaller forward passes: the log-prob phase gets slower; results are the "
                  "same")
SLOWER_ROLLOUT = "a smaller KV cache: fewer sequences decoded at once, slower rollout"

_ACTOR = (
    Knob(PPO_MB, "micro_halve",
         "activations scale with the micro batch; verl accumulates gradients over micro "
         "batches, so ppo_mini_batch_size (the effective batch) is unchanged",
         "more, smaller passes: the actor update gets slower", effect="estimate"),
    Knob(PPO_TOKENS, "tokens_down",
         "under dynamic batching the token budget per micro batch sets the activations",
         "more, smaller passes: the actor update gets slower"),
    Knob(CKPT, "true", "activations are recomputed in backward instead of kept",
         "about 30 % more compute in the actor update", effect="estimate"),
    Knob(OFFLOAD_OPT, "true",
         "the Adam states (8 bytes per parameter, sharded) move to host memory",
         "optimizer step on CPU transfers: slower update, more host memory", effect="estimate"),
    Knob(OFFLOAD_PARAM, "true",
         "the parameter shard lives in host memory outside the forward and backward",
         "host-device copies every step: slower", effect="estimate"),
    FSDP2,
)
_LOG_PROB = (
    Knob(LOGPROB_MB, "micro_halve", LOGITS_WHY, MICRO_TRADEOFF, effect="estimate"),
    Knob(REF_LOGPROB_MB, "micro_halve", LOGITS_WHY + " (reference model)", MICRO_TRADEOFF,
         effect="estimate"),
    Knob(f"{AR}.rollout.log_prob_max_token_len_per_gpu", "tokens_down",
         "under dynamic batching the token budget per micro batch sets the logits' size",
         MICRO_TRADEOFF),
    Knob(DYN, "dynamic_on",
         "dynamic batch sizes pack micro batches by token count (ppo_max_token_len_per_gpu) "
         "instead of by sequences: no micro batch exceeds the token limit",
         "micro batch boundaries change; throughput usually improves",
         args=(LOGPROB_MB, PPO_MB, PPO_TOKENS)),
)
_GENERATION = (
    Knob(ROLLOUT_UTIL, "fraction_down",
         "the rollout engine preallocates gpu_memory_utilization x the GPU for weights and KV "
         "cache; the rest of the step (log-prob, the actor's own copy) must fit beside it",
         SLOWER_ROLLOUT, effect="fraction"),
    Knob(LOGPROB_MB, "micro_halve", LOGITS_WHY, MICRO_TRADEOFF, effect="estimate"),
    Knob(CKPT, "true",
         "activations are recomputed in backward instead of kept: the actor's peak drops",
         "about 30 % more compute in the actor update", effect="estimate"),
    Knob(OFFLOAD_PARAM, "true",
         "FSDP keeps the actor's parameter shard in host memory between phases, leaving the "
         "GPU to the rollout engine",
         "host-device copies at every phase change: slower steps, more host memory",
         effect="estimate"),
    FSDP2,
)
KNOBS: dict[str, tuple[Knob, ...]] = {
    "engine-start": (
        Knob(ROLLOUT_UTIL, "fit_free",
             "the inference engine asks for gpu_memory_utilization x the GPU at start, and less "
             "than that is free", SLOWER_ROLLOUT, effect="fraction"),
    ),
    "generation": _GENERATION,
    "log-prob": _LOG_PROB,
    "actor-forward": _ACTOR,
    "actor-backward": _ACTOR,
    "critic-update": (
        Knob(CRITIC_MB, "micro_halve",
             "the critic's activations scale with its micro batch; gradients are accumulated, "
             "so its mini batch is unchanged", "slower critic update", effect="estimate"),
        Knob(CRITIC_CKPT, "true", "activations recomputed in the critic's backward",
             "about 30 % more compute in the critic update"),
    ),
    "weight-sync": (
        Knob(ROLLOUT_UTIL, "fraction_down",
             "syncing weights into the rollout engine needs room for a full gathered copy beside "
             "the engine's preallocated share", "a smaller KV cache: slower rollout",
             effect="fraction"),
        Knob(OFFLOAD_PARAM, "true", "the actor's shard leaves the GPU between phases",
             "slower phase changes", effect="estimate"),
    ),
    "unknown": (_LOG_PROB[0], _ACTOR[0], _ACTOR[1], _GENERATION[0]),
}


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def estimate_settings(get: Getter, phase: str, role: str) -> dict[str, Any]:
    """The memory estimate's settings from verl's keys (FSDP workers)."""
    nodes = _positive(get("trainer.nnodes")) or 1
    per_node = _positive(get("trainer.n_gpus_per_node")) or 1
    prompt = _positive(get("data.max_prompt_length"))
    response = _positive(get("data.max_response_length"))
    policy = get(STRATEGY) == "fsdp2" and bool(get(OFFLOAD_POLICY))
    out: dict[str, Any] = {
        "world_size": nodes * per_node,
        "fsdp": str(get(STRATEGY) or "fsdp").startswith("fsdp"),
        # FSDP2's offload_policy moves parameters, gradients and optimizer states to the host
        # (verl reads it only under fsdp2)
        "offload_params": bool(get(OFFLOAD_PARAM) or policy),
        "offload_optimizer": bool(get(OFFLOAD_OPT) or policy),
        "gradient_checkpointing": bool(get(CKPT)),
        "rollout_mem_fraction": get(ROLLOUT_UTIL),
    }
    if prompt and response:
        out["seq_len"] = prompt + response
    if phase == "critic-update":
        out["micro_batch"] = _positive(get(CRITIC_MB)) or 1
        out["gradient_checkpointing"] = bool(get(CRITIC_CKPT))
    else:
        out["micro_batch"] = _positive(get(PPO_MB)) or 1
    which = "ref" if role == "ref" else "rollout"
    out["log_prob_micro_batch"] = _positive(get(f"{AR}.{which}.log_prob_micro_batch_size_per_gpu"))
    return out


OOM = OomFacts(
    knobs=KNOBS,
    dynamic_key=DYN,
    seq_keys=("data.max_prompt_length", "data.max_response_length"),
    # FSDP keys mean nothing to a Megatron actor (verl ignores them).
    exclusive=(STRATEGY, "megatron", "fsdp"),
    patch_style="hydra",
    patch_header="# append to the python3 -m verl.trainer.main_ppo command line:",
    estimate=estimate_settings,
)

FRAMEWORK = Framework(
    name="verl",
    label="verl",
    kind="rl",
    packages=("verl",),
    path_marks=("/verl/",),
    steps=(
        StepFormat(
            name="verl", parser="verl", markers=("step:",),
            example="step:12 - actor/pg_loss:np.float64(-0.005) - critic/score/mean:0.43 - "
                    "timing_s/step:41.2 - ...",
            source="volcengine/verl verl/utils/logger/aggregate_logger.py",
            step_time="timing_s/step (older: timing/step)", joins_wraps=True),
    ),
    log_prefixes=("(TaskRunner pid=N) ", "(WorkerDict pid=N) "),
    titles=(
        # Ray names a process after the actor class it hosts (ray::Class) and, while a method
        # runs, ray::Class.method(); verl's colocated workers are one class, WorkerDict.
        TitlePattern(r"ray::TaskRunner(?:\.\w+\(\))?", "driver", "verl/trainer/main_ppo.py"),
        TitlePattern(r"ray::WorkerDict(?:\.(?:(?P<role>actor_rollout_ref|actor_rollout|critic|"
                     r"ref|rollout|rm|actor)_)?\w+\(\))?", "worker",
                     "verl/single_controller/ray/base.py"),
        TitlePattern(r"ray::(?P<role>AgentLoopWorker|AsyncvLLMServer|AsyncSglangServer|"
                     r"vLLMHttpServer|SGLangHttpServer|RewardManagerWorker|RewardLoopWorker)"
                     r"(?:\.\w+\(\))?", "", "verl/experimental/agent_loop/, "
                     "verl/workers/rollout/"),
    ),
    config=CONFIG,
    phase=PHASE,
    oom=OOM,
    sources=("volcengine/verl",),
)
