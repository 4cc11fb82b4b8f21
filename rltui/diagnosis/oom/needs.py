"""From a job's config to the memory estimate's settings, per framework and phase (pure).

The framework's keys -> estimate settings mapping is its ``OomFacts.estimate`` (in
``rltui.frameworks``). ``need_for`` returns the function the suggestions use to price a change: config values in, the
bytes the failing phase holds on one GPU out (``MemoryEstimate.phase_total``). ``estimate_for``
is the estimate of the config as it is, for the report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.estimate import ModelShape, estimate
from rltui.diagnosis.oom.types import JobConfig, OomNumbers, OomPhase
from rltui.frameworks import by_name
from rltui.model import replace


def settings_for(config: JobConfig, values: Mapping[str, Any], phase: OomPhase,
                 numbers: OomNumbers) -> dict[str, Any] | None:
    fw = by_name(config.framework)
    build = fw.oom.estimate if fw is not None and fw.oom is not None else None
    if build is None:
        return None  # the framework's keys for batch and sequence sizes are not known
    cfg = replace(config, values=values)

    def get(key: str) -> Any:
        return frameworks.effective(cfg, key).value

    out = {k: v for k, v in build(get, phase.phase, phase.role).items() if v is not None}
    fraction = out.get("rollout_mem_fraction")
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction <= 1:
        out.pop("rollout_mem_fraction", None)
    if numbers.capacity:
        out["gpu_capacity"] = numbers.capacity
    return out


def need_for(shape: ModelShape, config: JobConfig, phase: OomPhase, numbers: OomNumbers
             ) -> Callable[[Mapping[str, Any]], int | None]:
    def need(values: Mapping[str, Any]) -> int | None:
        kw = settings_for(config, values, phase, numbers)
        if kw is None:
            return None
        try:
            return estimate(shape, **kw).phase_total(phase.phase)
        except ValueError:
            return None
    return need


def estimate_for(shape: ModelShape, config: JobConfig, phase: OomPhase,
                 numbers: OomNumbers) -> dict[str, Any] | None:
    kw = settings_for(config, config.values, phase, numbers)
    if kw is None:
        return None  # no framework config: batch and sequence sizes unknown, no estimate
    try:
        return estimate(shape, **kw).to_json()
    except ValueError:
        return None
