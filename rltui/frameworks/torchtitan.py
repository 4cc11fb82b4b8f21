"""torchtitan (pytorch/torchtitan): what rltui knows of it (pure data).

Source (read, not copied): ``torchtitan/components/metrics.py`` (the step line; colours unless
``metrics.disable_color_printing``), ``torchtitan/tools/logging.py`` (the ``[titan]`` format).
Run under torchrun every rank may print the line (``[rank3]:[titan] ...``): one step, not eight.
"""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework, StepFormat

FRAMEWORK = Framework(
    name="torchtitan",
    label="torchtitan",
    kind="trainer",
    packages=("torchtitan",),
    path_marks=("/torchtitan/",),
    steps=(
        StepFormat(
            name="torchtitan", parser="torchtitan", markers=("step:",),
            example="[titan] 2026-03-01 12:00:00,000 - root - INFO - step:  5  loss:  7.1234  "
                    "grad_norm:  1.2345  memory: 38.12GiB(48.17%)  tps: 3,210  tflops: 150.12  "
                    "mfu: 15.18%",
            source="pytorch/torchtitan torchtitan/components/metrics.py"),
    ),
    log_prefixes=("[titan] <asctime> - root - INFO - ", "[rankN]: (under torchrun)"),
    config=ConfigFacts(drivers=r"(^|/)torchtitan/train\.py$|^torchtitan\.train$",
                       where="a TOML job file (--job.config_file) plus --section.key overrides"),
    sources=("pytorch/torchtitan",),
)
