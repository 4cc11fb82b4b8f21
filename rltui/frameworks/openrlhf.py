"""OpenRLHF (OpenRLHF/OpenRLHF): what rltui knows of it (pure data).

Sources (read, not copied): ``openrlhf/trainer/ppo_trainer.py`` (the ``Global step`` log line
and the ``Episode [i/n]`` progress bar), ``openrlhf/trainer/ppo_utils/`` and
``openrlhf/trainer/ray/`` (``ppo_actor.py``'s ``Train epoch [i/n]`` bar, the model actors and
``vllm_engine.py``), ``openrlhf/utils/logging_utils.py`` (vLLM's log format),
``openrlhf/cli/train_ppo_ray.py`` (the flags the OOM knobs name) and
``openrlhf/trainer/ppo_utils/experience_maker.py`` (experience is made per
``--micro_rollout_batch_size`` samples).
"""

from __future__ import annotations

from rltui.frameworks._types import (
                                     ConfigFacts,
                                     Framework,
                                     Knob,
                                     LogMarker,
                                     OomFacts,
                                     PhaseFacts,
                                     PhaseRule,
                                     StepFormat,
                                     TaskRule,
                                     TitlePattern,
)

_ORLHF = ("openrlhf/",)

PHASE = PhaseFacts(
    drives=True,
    rules=(
        PhaseRule("engine-start", "create_vllm_engines", _ORLHF, "engine-start", "rollout",
                  "OpenRLHF starts vLLM"),
        PhaseRule("engine-start", "__init__", ("openrlhf/trainer/ray/vllm_engine",),
                  "engine-start", "rollout", "OpenRLHF starts vLLM", generic=True),
        PhaseRule("weight-sync", "broadcast_to_vllm _broadcast_to_vllm _broadcast_to_vllm_fsdp2 "
                  "_broadcast_param _handle_cuda_ipc update_weight update_weight_cuda_ipc", _ORLHF,
                  "weight-sync", "actor", "OpenRLHF broadcasts the actor's weights to vLLM"),
        PhaseRule("generation", "generate_samples _generate_vllm _generate_with_hf", _ORLHF,
                  "generation", "rollout", "OpenRLHF sample generation"),
        PhaseRule("log-prob", "make_experience make_experience_list make_experience_batch",
                  _ORLHF, "log-prob", "actor",
                  "OpenRLHF experience making (log-probs, values, rewards)"),
        PhaseRule("log-prob", "forward", ("openrlhf/trainer/ray/launcher.py",), "log-prob", "",
                  "OpenRLHF model actor forward", generic=True),
        PhaseRule("update", "training_step_critic", _ORLHF, "critic-update", "critic",
                  "critic update"),
        PhaseRule("update", "ppo_train training_step training_step_actor", _ORLHF, "update",
                  "actor", "PPO update"),
    ),
    calls=("make_experience_list", "make_experience_batch", "make_experience", "ppo_train",
           "broadcast_to_vllm"),
    # Ray task classes that name the role of a log-prob pass.
    task_roles=(("Reference", "ref"), ("Critic", "critic"), ("LLMRayActor", "rollout"),
                ("Reward", "")),
    task_rules=(
        TaskRule("Reference", ("forward",), "log-prob", "ref", "model actor forward"),
        TaskRule("Reward", ("forward",), "log-prob", "", "model actor forward"),
        TaskRule("Critic", ("fit", "forward", "append", "ppo_train"), "critic-update", "critic",
                 "critic"),
        TaskRule("LLMRayActor", ("__init__",), "engine-start", "rollout", "vLLM engine actor"),
        TaskRule("LLMRayActor", (), "generation", "rollout", "vLLM engine actor"),
    ),
    markers=(
        LogMarker("step-done", r"Global step \d+:", None, "", "OpenRLHF finished a step"),
        LogMarker("engine-start", r"Create \d+ vLLM engines", "engine-start", "rollout",
                  "OpenRLHF is starting vLLM"),
        LogMarker("weight-sync", r"broadcast_to_vllm|[Bb]roadcasting weights", "weight-sync",
                  "actor", "weight sync running"),
        LogMarker("generation", r"Starting experience making", "log-prob", "actor",
                  "OpenRLHF experience making (log-probs)"),
        LogMarker("update", r"Train epoch \[", "update", "actor", "OpenRLHF PPO training epoch",
                  own=True),
    ),
)

# -- OOM knobs: OpenRLHF's own flags (argparse, not a config file: rltui does not read their
# values, so a change is named with its direction and left out of the patch) ---------------------

VLLM_UTIL = "--vllm_gpu_memory_utilization"
MICRO_ROLLOUT = "--micro_rollout_batch_size"
MICRO_TRAIN = "--micro_train_batch_size"
CKPT = "--gradient_checkpointing"
ADAM_OFFLOAD = "--adam_offload"

SLOWER_ROLLOUT = "a smaller KV cache: fewer sequences decoded at once, slower rollout"
_VLLM_SHARE = Knob(
    VLLM_UTIL, "fraction_down",
    "each vLLM engine preallocates this share of its GPU for weights and KV cache; with "
    "--colocate_all_models the actor, reference and critic must fit beside it",
    SLOWER_ROLLOUT, effect="fraction")
_EXPERIENCE = Knob(
    MICRO_ROLLOUT, "micro_halve",
    "experience is made per micro batch of this many samples: the actor, reference, critic and "
    "reward forwards (and their logits) scale with it",
    "more, smaller forward passes: experience making gets slower; results are the same")
_UPDATE = (
    Knob(MICRO_TRAIN, "micro_halve",
         "activations scale with the micro batch; gradients are accumulated up to "
         "--train_batch_size, so the effective batch is unchanged",
         "more, smaller passes: the update gets slower"),
    Knob(CKPT, "true", "activations are recomputed in backward instead of kept",
         "about 30 % more compute in the update"),
    Knob(ADAM_OFFLOAD, "true", "the Adam states move to host memory (DeepSpeed's optimizer "
         "offload)", "the optimizer step runs on the CPU: slower update, more host memory"),
)
KNOBS = {
    "engine-start": (
        Knob(VLLM_UTIL, "fit_free",
             "vLLM asks for --vllm_gpu_memory_utilization x the GPU at start, and less than that "
             "is free", SLOWER_ROLLOUT, effect="fraction"),
    ),
    "generation": (_VLLM_SHARE, _EXPERIENCE),
    "log-prob": (_EXPERIENCE,),
    "actor-forward": _UPDATE,
    "actor-backward": _UPDATE,
    "critic-update": _UPDATE,  # the critic trains with the same flags
    "weight-sync": (_VLLM_SHARE,),
    "unknown": (_EXPERIENCE, _UPDATE[0], _VLLM_SHARE),
}

OOM = OomFacts(knobs=KNOBS)

FRAMEWORK = Framework(
    name="openrlhf",
    label="OpenRLHF",
    kind="rl",
    packages=("openrlhf",),
    path_marks=("/openrlhf/",),
    steps=(
        StepFormat(
            name="openrlhf", parser="openrlhf", markers=("Global step ",),
            example="INFO 08-13 19:25:45 ppo_trainer.py:547] \u2728 Global step 3: "
                    "{'policy_loss': ..., 'timing/step_total': 97.5, ...}",
            source="OpenRLHF/OpenRLHF openrlhf/trainer/ppo_trainer.py",
            step_time="timing/step_total"),
        # The progress bars: the episode bar counts global steps; a ``Train epoch`` bar is one
        # PPO epoch inside a step and is not a step (its postfix metrics are not kept).
        StepFormat(
            name="openrlhf", parser="openrlhf-bar", markers=("Episode [",),
            example="Episode [1/1]:  10%|\u2588         | 3/30 [02:11<19:41, 43.77s/it, "
                    "policy_loss=0.0123, reward=0.5]",
            source="OpenRLHF/OpenRLHF openrlhf/trainer/ppo_trainer.py (tqdm desc Episode [i/n])",
            step_time="the bar's s/it"),
    ),
    log_prefixes=("(PPORayActorGroup pid=N) ", "(ActorModelRayActor pid=N) ",
                  "(LLMRayActor pid=N) ", "(ReferenceModelRayActor pid=N) "),
    titles=(
        TitlePattern(r"ray::(?P<role>PolicyModelRayActor|ActorModelRayActor|"
                     r"ReferenceModelRayActor|CriticModelRayActor|RewardModelRayActor|"
                     r"LLMRayActor|PPORayActorGroup)(?:\.\w+\(\))?", "",
                     "openrlhf/trainer/ray/launcher.py, vllm_engine.py"),
    ),
    config=ConfigFacts(drivers=r"^openrlhf\.|(^|/)openrlhf/",
                       where="command-line flags of openrlhf.cli.train_ppo_ray (no config file)"),
    phase=PHASE,
    oom=OOM,
    sources=("OpenRLHF/OpenRLHF",),
)
