"""ms-swift (modelscope/ms-swift): HF Trainer's logs dict (as JSON in later versions) with swift's
own keys, among them
``'global_step/max_steps': '5/100'`` (the step number HF's dict lacks), ``'memory(GiB)'`` and
``'train_speed(iter/s)'`` (pure data). Source: ``swift/trainers/mixin.py`` and
``swift/utils/`` (the log callback), read, not copied."""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework, StepFormat

FRAMEWORK = Framework(
    name="swift",
    label="ms-swift",
    kind="trainer",
    packages=("swift",),
    path_marks=("/swift/",),
    steps=(
        StepFormat(
            name="hf", parser="hf", markers=('{"', "{'"),
            example="{'loss': 1.05, 'grad_norm': 2.1, 'learning_rate': 1e-05, 'memory(GiB)': 20.1, "
                    "'train_speed(iter/s)': 0.12, 'epoch': 0.1, 'global_step/max_steps': '5/100', "
                    "...}",
            source="modelscope/ms-swift swift/trainers/ (HF Trainer's dict plus swift's keys)",
            step_time="1 / train_speed(iter/s)"),
    ),
    config=ConfigFacts(drivers=r"(^|/)swift$|^swift\.cli\.|(^|/)swift/cli/",
                       where="swift sft|rlhf|pt command-line flags (or --config)"),
    sources=("modelscope/ms-swift",),
)
