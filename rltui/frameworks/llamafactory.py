"""LLaMA-Factory (hiyouga/LLaMA-Factory): trains through HF Trainer, so its console step line is
HF's logs dict (``{'loss': ..., 'grad_norm': ..., 'learning_rate': ..., 'epoch': ...}``); its
``LogCallback`` also writes ``trainer_log.jsonl`` (pure data)."""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework, StepFormat

FRAMEWORK = Framework(
    name="llamafactory",
    label="LLaMA-Factory",
    kind="trainer",
    packages=("llamafactory", "llmtuner"),
    path_marks=("/llamafactory/",),
    steps=(
        StepFormat(
            name="hf", parser="hf", markers=("{'",),
            example="{'loss': 0.6465, 'grad_norm': 1.23, 'learning_rate': 9.8e-05, "
                    "'epoch': 0.08, 'num_input_tokens_seen': 204800}",
            source="hiyouga/LLaMA-Factory src/llamafactory/train/callbacks.py (HF Trainer's dict)"),
    ),
    config=ConfigFacts(drivers=r"(^|/)llamafactory-cli$|^llamafactory\.|(^|/)llamafactory/",
                       where="llamafactory-cli train config.yaml (one YAML file)"),
    sources=("hiyouga/LLaMA-Factory",),
)
