"""Every threshold behind a symptom or a colour, with its default. Documented in
docs/symptoms.md and docs/configuration.md; set under ``thresholds:`` in the config file."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Thresholds:
    # gpu-idle-vs-busy: some of the job's GPUs at or below idle while others at or above busy,
    # without a break for at least sustain seconds.
    gpu_idle_pct: float = 5.0
    gpu_busy_pct: float = 50.0
    gpu_idle_sustain_s: float = 30.0
    # rank-exited: a rank gone this long while others remain (absorbs a normal staggered exit).
    rank_exit_grace_s: float = 5.0
    # steps-stalled: no new step for longer than max(stall_factor x median recent step time,
    # stall_floor_s) while the job's processes are alive.
    stall_factor: float = 5.0
    stall_floor_s: float = 60.0
    # hang-*: successive py-spy rounds count as separate samples (stuck vs moving) only when at
    # least this far apart; a second glance one second later proves nothing about a long step.
    stack_sample_gap_s: float = 5.0
    # Colours only.
    gpu_mem_warn_pct: float = 90.0
    gpu_temp_warn_c: float = 85.0
    cpu_busy_pct: float = 80.0
    # A source whose last reading is older than this many of its intervals is shown as stale.
    stale_after_intervals: float = 3.0

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))
