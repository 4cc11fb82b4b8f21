"""rank-exited: a rank of the job is gone while others remain."""

from __future__ import annotations

import pytest

from rltui.diagnosis import diagnose
from rltui.diagnosis.ranks import rank_exited
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import DepartedRank, NodeSnapshot, ProcInfo

TH = Thresholds()  # grace 5 s
GRACE = TH.rank_exit_grace_s


def alive(*ranks, start_pid=100):
    return tuple(ProcInfo(pid=start_pid + r, rank=r, state="sleeping") for r in ranks)


def exited(rank, gone_since, pid=None, reason="exited"):
    return DepartedRank(pid=pid if pid is not None else 100 + rank, rank=rank,
                        last_seen=gone_since - 0.5, gone_since=gone_since, reason=reason)


def missing(rank, now):
    return DepartedRank(pid=0, rank=rank, last_seen=0.0, gone_since=now,
                        reason="missing from WORLD_SIZE")


def check(now, procs, departed, th=TH):
    s = NodeSnapshot(timestamp=now, procs=procs, departed=tuple(departed))
    return rank_exited(s, [s], th)


@pytest.mark.parametrize(("gone_for", "fires"), [
    (0.0, False),
    (GRACE - 0.01, False),
    (GRACE, True),  # at the grace period exactly
    (GRACE + 30, True),
])
def test_fires_only_after_the_grace_period(gone_for, fires):
    result = check(1000.0, alive(0, 1, 2), [exited(3, 1000.0 - gone_for)])
    assert bool(result) is fires


def test_symptom_fields():
    (s,) = check(1034.0, alive(0, 1, 2), [exited(3, 1000.0, pid=103)])
    assert s.id == "rank-exited"
    assert s.severity == "critical"
    assert s.ranks == (3,)
    assert s.since == 1000.0
    assert s.title == "rank 3 exited while 3 other process(es) remain"
    assert "rank 3 (pid 103): exited, gone for 34 s" in s.evidence
    assert "still running: ranks 0-2 (pids 100, 101, 102)" in s.evidence
    assert any("rank 3's log" in step for step in s.next_steps)
    assert any("CUDA_LAUNCH_BLOCKING=1" in step for step in s.next_steps)
    assert any("py-spy dump" in step and "100 101 102" in step for step in s.next_steps)


def test_zombie_reason_is_in_the_evidence():
    (s,) = check(1010.0, alive(0), [exited(1, 1000.0, pid=555, reason="zombie")])
    assert "rank 1 (pid 555): zombie, gone for 10 s" in s.evidence


def test_not_when_the_whole_job_is_gone():
    assert check(2000.0, (), [exited(0, 1000.0), exited(1, 1000.0)]) == []


def test_not_when_only_zombies_remain():
    zombies = (ProcInfo(pid=100, rank=0, state="zombie"),)
    assert check(2000.0, zombies, [exited(0, 1000.0, reason="zombie"), exited(1, 1000.0)]) == []


def test_not_without_departed_ranks():
    assert check(2000.0, alive(0, 1), []) == []


def test_missing_from_world_fires_at_once():
    (s,) = check(50.0, alive(0, 1, 3), [missing(2, 50.0)])
    assert s.ranks == (2,)
    assert s.since == 50.0
    assert any("rank 2: not running although WORLD_SIZE says it should be" in e
               for e in s.evidence)
    assert "still running: ranks 0-1,3 (pids 100, 101, 103)" in s.evidence


def test_only_ranks_past_grace_are_reported():
    (s,) = check(100.0, alive(0), [exited(1, 90.0), exited(2, 99.0), exited(3, 80.0)])
    assert s.ranks == (1, 3)
    assert s.since == 80.0
    assert s.title.startswith("ranks 1,3 exited")
    assert not any(e.startswith("rank 2") for e in s.evidence)


def test_a_departed_process_without_a_rank():
    (s,) = check(100.0, alive(0), [DepartedRank(pid=777, rank=None, last_seen=50.0,
                                                 gone_since=50.0)])
    assert s.ranks == ()
    assert "a job process (pid 777): exited, gone for 50 s" in s.evidence
    assert s.title == "1 job process(es) exited while 1 other process(es) remain"


def test_many_survivors_are_elided_in_the_evidence():
    (s,) = check(100.0, alive(*range(12)), [exited(12, 0.0)])
    survivors = [e for e in s.evidence if e.startswith("still running")][0]
    assert "ranks 0-11" in survivors
    assert "pids 100, 101, 102, 103, 104, 105, 106, 107, ...)" in survivors


def test_custom_grace():
    th = Thresholds(rank_exit_grace_s=60.0)
    assert check(100.0, alive(0), [exited(1, 50.0)], th) == []
    assert check(110.0, alive(0), [exited(1, 50.0)], th) != []


def test_verdict_is_critical():
    s = NodeSnapshot(timestamp=100.0, procs=alive(0, 1), departed=(exited(2, 10.0),))
    d = diagnose(s, [s])
    assert d.verdict == "critical"
    assert [x.id for x in d.symptoms] == ["rank-exited"]
