"""Config doctor (pure): settings of the job's config that make rollout wait, read when the steps
stall. AReaL's asynchronous RL blocks rollout until the trainer catches up when
``rollout.max_head_offpolicyness`` is 0 (no staleness allowed), and a small
``rollout.max_concurrent_rollouts`` starves the trainer (playbook section 2)."""

from __future__ import annotations

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.types import JobConfig

SMALL_CONCURRENCY = 4


def doctor(config: JobConfig) -> list[str]:
    """Findings, one sentence each; empty when nothing in the config makes rollout wait."""
    if config.framework != "areal":
        return []
    out = []
    stale = frameworks.effective(config, "rollout.max_head_offpolicyness")
    if stale.value == 0:
        out.append("rollout.max_head_offpolicyness is 0"
                   + (" (the default)" if stale.default else "")
                   + ": every rollout waits for the latest weights, so generation stops at each "
                     "weight update and a slow update stalls the whole loop; allow some "
                     "staleness (2-4) unless the run must be strictly on-policy")
    conc = frameworks.effective(config, "rollout.max_concurrent_rollouts")
    if isinstance(conc.value, int) and not isinstance(conc.value, bool) \
            and conc.value <= SMALL_CONCURRENCY:
        out.append(f"rollout.max_concurrent_rollouts is {conc.value}"
                   + (" (the default: consumer_batch_size)" if conc.default else "")
                   + ": so few rollouts in flight keep the trainer waiting for data; raise it "
                     "towards the training batch size")
    return out
