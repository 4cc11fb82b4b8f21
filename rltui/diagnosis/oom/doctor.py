"""Config doctor (pure): settings of the job's config that make rollout wait, read when the steps
stall. Which settings, and what they mean, is the framework's (``OomFacts.stalls`` in
``rltui.frameworks``; AReaL's asynchronous RL blocks rollout until the trainer catches up when no
staleness is allowed, and too few rollouts in flight starve the trainer: playbook section 2)."""

from __future__ import annotations

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.types import JobConfig
from rltui.frameworks import by_name


def doctor(config: JobConfig) -> list[str]:
    """Findings, one sentence each; empty when nothing in the config makes rollout wait."""
    fw = by_name(config.framework)
    if fw is None or fw.oom is None:
        return []
    out = []
    for stall in fw.oom.stalls:
        value = frameworks.effective(config, stall.key)
        found = stall.finding(value.value, value.default)
        if found:
            out.append(found)
    return out
