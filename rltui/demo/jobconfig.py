"""What the demo's OOM scenario is configured with, written into its run folder: a small verl
config (the keys OOM triage reads, verl's documented defaults where the run sets nothing) and a
Qwen2-7B model config, named on the ranks' command line the way verl's launch scripts name them
(``--config-path``/``--config-name`` and ``key=value`` overrides). The ranks ignore their
arguments; rltui reads them, as it reads a real job's, so `rltui demo --scenario oom` shows the
triage a verl user gets: the framework, the values in use and the patch."""

from __future__ import annotations

import json
from pathlib import Path

CONFIG_NAME = "ppo_trainer"

# The sections OOM triage reads, as verl/trainer/config/ppo_trainer.yaml lays them out.
_CONFIG = """\
# written by rltui's demo: the keys its OOM triage reads, as verl's ppo_trainer.yaml has them
data:
  max_prompt_length: 1024
  max_response_length: 2048
  train_batch_size: 256
actor_rollout_ref:
  hybrid_engine: true
  model:
    path: null
    enable_gradient_checkpointing: true
    use_remove_padding: true
  actor:
    strategy: fsdp
    ppo_mini_batch_size: 64
    ppo_micro_batch_size_per_gpu: null
    use_dynamic_bsz: false
    ppo_max_token_len_per_gpu: 16384
    ulysses_sequence_parallel_size: 1
    fsdp_config:
      param_offload: false
      optimizer_offload: false
  ref:
    fsdp_config:
      param_offload: true
    log_prob_micro_batch_size_per_gpu: null
  rollout:
    name: vllm
    dtype: bfloat16
    gpu_memory_utilization: 0.6
    tensor_model_parallel_size: 2
    log_prob_micro_batch_size_per_gpu: null
    n: 5
trainer:
  n_gpus_per_node: 8
  nnodes: 1
"""

# Qwen2-7B's config.json (the shape the memory estimate reads), as published with the model.
_MODEL = {
    "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 3584,
    "intermediate_size": 18944, "num_attention_heads": 28, "num_hidden_layers": 28,
    "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 131072,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}

# What the run sets on its command line (verl's GRPO example: micro batches of 8).
_OVERRIDES = (
    "algorithm.adv_estimator=grpo",
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
)


def write(run_dir: Path) -> list[str]:
    """Write the config and the model config under ``run_dir``; the ranks' arguments."""
    config_dir, model_dir = run_dir / "config", run_dir / "model"
    config_dir.mkdir(parents=True, exist_ok=True)
    model_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / f"{CONFIG_NAME}.yaml").write_text(_CONFIG, encoding="utf-8")
    (model_dir / "config.json").write_text(json.dumps(_MODEL, indent=1), encoding="utf-8")
    return [f"--config-path={config_dir}", f"--config-name={CONFIG_NAME}",
            f"actor_rollout_ref.model.path={model_dir}", *_OVERRIDES]
