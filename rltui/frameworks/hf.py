"""HF Trainer and TRL (huggingface/transformers, huggingface/trl): what rltui knows (pure data).

Sources (read, not copied): ``src/transformers/trainer_callback.py`` (``ProgressCallback.on_log``
prints the logs dict through ``tqdm.write``), ``src/transformers/trainer.py`` (the end banner and
the ``train_runtime`` summary dict), ``src/transformers/generation/`` (generate frames).
"""

from __future__ import annotations

from rltui.frameworks._types import Framework, PhaseFacts, PhaseRule, StepFormat

PHASE = PhaseFacts(
    rules=(
        PhaseRule("generation", "generate _sample sample greedy_search _greedy_search "
                  "beam_search _beam_search _assisted_decoding", ("transformers/generation/",),
                  "generation", "rollout", "HF generate", generic=True),
    ),
)

FRAMEWORK = Framework(
    name="hf",
    label="HF Trainer / TRL",
    kind="trainer",
    packages=("transformers", "trl", "accelerate", "peft"),
    steps=(
        StepFormat(
            name="hf", parser="hf", markers=("{'",),
            example="{'loss': 1.2345, 'grad_norm': 0.87, 'learning_rate': 4.9e-05, "
                    "'epoch': 0.02}",
            source="huggingface/transformers src/transformers/trainer_callback.py"),
    ),
    phase=PHASE,
    sources=("huggingface/transformers", "huggingface/trl"),
)
