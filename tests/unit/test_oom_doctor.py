"""The config doctor: AReaL settings that make rollout wait."""

from rltui.diagnosis.oom.doctor import doctor
from rltui.diagnosis.oom.types import JobConfig


def areal(**rollout) -> JobConfig:
    return JobConfig(framework="areal", values={"rollout": rollout})


def test_zero_staleness_and_small_concurrency_are_both_flagged():
    found = doctor(areal(max_head_offpolicyness=0, max_concurrent_rollouts=2))
    assert len(found) == 2
    assert found[0].startswith("rollout.max_head_offpolicyness is 0:")
    assert found[1].startswith("rollout.max_concurrent_rollouts is 2:")


def test_defaults_are_flagged_as_defaults():
    found = doctor(areal())
    assert any("max_head_offpolicyness is 0 (the default)" in f for f in found)


def test_a_healthy_config_and_other_frameworks_say_nothing():
    assert doctor(areal(max_head_offpolicyness=4, max_concurrent_rollouts=256)) == []
    assert doctor(JobConfig(framework="verl")) == []
