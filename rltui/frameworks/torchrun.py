"""torchrun / torch.distributed.elastic (pytorch/pytorch): the launcher (pure data).

Sources (read, not copied): ``torch/distributed/run.py`` (``--tee`` / ``--redirects`` /
``--log-dir``), ``torch/distributed/elastic/multiprocessing/api.py`` (the ``[rankN]:`` and older
``[defaultN]:`` line prefixes), ``torch/distributed/elastic/multiprocessing/errors/__init__.py``
(``ChildFailedError``; parsed in ``rltui.parsing.distfail``).
"""

from __future__ import annotations

from rltui.frameworks._types import ConfigFacts, Framework

FRAMEWORK = Framework(
    name="torchrun",
    label="torchrun",
    kind="launcher",
    packages=("torch",),
    log_prefixes=("[rankN]: ", "[defaultN]: "),
    config=ConfigFacts(drivers=r"(^|/)torchrun$|^torch\.distributed\.(?:run|launch)$",
                       where="launcher flags (--nproc_per_node, --nnodes, --rdzv-*) before the "
                             "training script"),
    sources=("pytorch/pytorch",),
)
