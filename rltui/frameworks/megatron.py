"""Megatron-LM (NVIDIA/Megatron-LM): what rltui knows of it (pure data).

Source (read, not copied): ``megatron/training/training.py`` ``training_log`` (older
``megatron/training.py``): `` [<time>] iteration      N/   M | consumed samples: ... | elapsed time
per iteration (ms): ... | learning rate: ... | global batch size: ... | lm loss: ... | loss scale:
... | grad norm: ... | number of skipped iterations: ... | number of nan iterations: ... |``,
printed by the last rank (``print_rank_last``).
"""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework, StepFormat

FRAMEWORK = Framework(
    name="megatron",
    label="Megatron-LM",
    kind="trainer",
    packages=("megatron",),
    path_marks=("/megatron/",),
    steps=(
        StepFormat(
            name="megatron", parser="megatron", markers=("iteration ",),
            example=" [2024-05-01 12:00:00] iteration       10/   10000 | consumed samples: 1280 "
                    "| elapsed time per iteration (ms): 1520.3 | learning rate: 1.5E-05 | "
                    "global batch size:   128 | lm loss: 7.123456E+00 | loss scale: 1.0 | "
                    "grad norm: 1.234 | number of skipped iterations:   0 |",
            source="NVIDIA/Megatron-LM megatron/training/training.py (training_log)",
            step_time="elapsed time per iteration (ms)"),
    ),
    config=ConfigFacts(drivers=r"(^|/)pretrain_gpt\.py$|(^|/)pretrain_\w+\.py$",
                       where="command-line flags of pretrain_*.py (--tensor-model-parallel-size ...)"),
    sources=("NVIDIA/Megatron-LM",),
)
