"""DeepSpeed (deepspeedai/DeepSpeed): what rltui knows of it (pure data).

Source (read, not copied): ``deepspeed/runtime/engine.py`` (``_report_progress``: ``step={n},
skipped={k}, lr=[...], mom=[...]`` every ``steps_per_print`` steps through ``log_dist`` on rank 0),
``deepspeed/utils/timer.py`` (``ThroughputTimer``: ``epoch=0/micro_step=../global_step=..,
RunningAvgSamplesPerSec=..``), ``deepspeed/launcher/`` (the ``[Rank 0]`` and
``localhost: `` / ``host: `` pdsh prefixes).
"""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework, StepFormat

FRAMEWORK = Framework(
    name="deepspeed",
    label="DeepSpeed",
    kind="trainer",
    packages=("deepspeed",),
    path_marks=("/deepspeed/",),
    steps=(
        StepFormat(
            name="deepspeed", parser="deepspeed", markers=("step=",),
            example="[2024-05-01 12:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, "
                    "skipped=0, lr=[1.9e-05], mom=[(0.9, 0.95)]",
            source="deepspeedai/DeepSpeed deepspeed/runtime/engine.py (_report_progress)"),
    ),
    log_prefixes=("[Rank 0] (log_dist)", "localhost: / <host>: (pdsh launcher)"),
    config=ConfigFacts(drivers=r"(^|/)deepspeed$|^deepspeed\.launcher",
                       where="a JSON config (--deepspeed ds_config.json) beside the script's flags"),
    sources=("deepspeedai/DeepSpeed",),
)
