"""diagnose() and the Monitor that feeds it: readings in, snapshot and diagnosis out."""

from __future__ import annotations

import pytest

from rltui import diagnosis as diagnosis_pkg
from rltui import model
from rltui.diagnosis import diagnose, verdict_of
from rltui.diagnosis.thresholds import Thresholds
from rltui.model import (
    GpuPoll,
    GpuSample,
    NodeSnapshot,
    ProcInfo,
    ProcPoll,
    Reading,
    SourceState,
    Symptom,
)
from rltui.monitor import Monitor


def sym(id_, severity, ranks=()):
    return Symptom(id=id_, severity=severity, title=id_, ranks=tuple(ranks))


# -- diagnose() ------------------------------------------------------------------------------

def test_symptoms_are_sorted_most_severe_first(monkeypatch):
    found = [sym("b-info", "info"), sym("a-warn", "warning"), sym("z-crit", "critical"),
             sym("a-crit", "critical", (2,)), sym("a-crit", "critical", (1,)),
             sym("odd", "unknown-severity")]
    monkeypatch.setattr(diagnosis_pkg, "RULES", [lambda s, h, t: found[:3],
                                                 lambda s, h, t: found[3:]])
    d = diagnose(NodeSnapshot(timestamp=1.0, procs=(ProcInfo(pid=1),)))
    assert [(s.id, s.ranks) for s in d.symptoms] == [
        ("a-crit", (1,)), ("a-crit", (2,)), ("z-crit", ()), ("a-warn", ()), ("b-info", ()),
        ("odd", ()),
    ]
    assert d.verdict == "critical"
    assert d.timestamp == 1.0


@pytest.mark.parametrize(("severities", "verdict"), [
    ((), "healthy"),
    (("info",), "healthy"),
    (("unknown",), "healthy"),
    (("info", "warning"), "warning"),
    (("warning", "warning"), "warning"),
    (("info", "critical", "warning"), "critical"),
    (("critical",), "critical"),
])
def test_verdict_is_the_worst_severity(severities, verdict, monkeypatch):
    symptoms = [sym(f"s{i}", sev) for i, sev in enumerate(severities)]
    assert verdict_of(symptoms) == verdict
    monkeypatch.setattr(diagnosis_pkg, "RULES", [lambda s, h, t: list(symptoms)])
    assert diagnose(NodeSnapshot(timestamp=0.0)).verdict == verdict


def test_rules_receive_the_thresholds_and_history(monkeypatch):
    seen = {}

    def rule(s, h, t):
        seen.update(snap=s, history=h, th=t)
        return []

    monkeypatch.setattr(diagnosis_pkg, "RULES", [rule])
    th = Thresholds(gpu_idle_pct=1.0)
    s = NodeSnapshot(timestamp=3.0)
    diagnose(s, [s], th)
    assert seen == {"snap": s, "history": [s], "th": th}
    diagnose(s)
    assert seen["th"] == Thresholds() and tuple(seen["history"]) == ()


def test_healthy_snapshot_has_no_notes():
    s = NodeSnapshot(timestamp=5.0, procs=(ProcInfo(pid=1, rank=0),),
                     sources=(SourceState("gpus", model.OK, 5.0, 5.0),
                              SourceState("procs", model.OK, 5.0, 5.0)))
    d = diagnose(s, [s])
    assert d.verdict == "healthy"
    assert d.symptoms == ()
    assert d.notes == ()


def test_note_for_each_failed_source():
    s = NodeSnapshot(timestamp=5.0, procs=(ProcInfo(pid=1),), sources=(
        SourceState("gpus", model.UNAVAILABLE, 5.0, None, "NVML library not found", "install"),
        SourceState("procs", model.OK, 5.0, 5.0),
        SourceState("stacks", model.DENIED, 5.0, None, ""),
    ))
    assert diagnose(s).notes == ("gpus: unavailable: NVML library not found",
                                 "stacks: denied")


def test_note_when_no_processes_were_found():
    scanned = (model.SourceState("procs", model.OK, 5.0, 5.0),)
    notes = diagnose(NodeSnapshot(timestamp=5.0, sources=scanned)).notes
    assert len(notes) == 1 and "No training processes found" in notes[0]


def test_no_process_note_when_processes_were_not_looked_at():
    """Logs read offline: no process scan ran, so "none found" would be false."""
    assert diagnose(NodeSnapshot(timestamp=5.0)).notes == ()


def test_no_process_note_when_only_departed_ranks_are_known():
    s = NodeSnapshot(timestamp=5.0, departed=(model.DepartedRank(1, 0, 1.0, 2.0),))
    assert not any("No training processes" in n for n in diagnose(s).notes)


def test_note_for_foreign_gpu_pids():
    s = NodeSnapshot(timestamp=5.0, procs=(ProcInfo(pid=1),), foreign_gpu_pids=(900, 901))
    (note,) = diagnose(s).notes
    assert note.startswith("2 GPU process(es) are not visible here")
    assert "PID namespace" in note


# -- Monitor ---------------------------------------------------------------------------------

N = 4


def procs_at(t, ranks=range(N)):
    procs = tuple(ProcInfo(pid=100 + r, rank=r, local_rank=r, world_size=N, local_world_size=N,
                           gpu_index=r, state="sleeping") for r in ranks)
    return Reading("procs", t, model.OK, ProcPoll(procs=procs, how="test"))


def gpus_at(t, utils):
    gpus = tuple(GpuSample(index=i, name="H100", uuid=f"u{i}", util=u) for i, u in enumerate(utils))
    return Reading("gpus", t, model.OK, GpuPoll(gpus=gpus))


def test_evaluate_snapshots_diagnoses_and_keeps_history():
    m = Monitor(host="node", job="j", history_len=3)
    assert m.snapshot is None and m.diagnosis is None
    m.ingest(procs_at(1.0))
    for t in (1.0, 2.0, 3.0, 4.0):
        snap, d = m.evaluate(t)
    assert (snap.timestamp, snap.host, snap.job) == (4.0, "node", "j")
    assert m.snapshot is snap and m.diagnosis is d
    assert [s.timestamp for s in m.history] == [2.0, 3.0, 4.0]
    assert d.verdict == "healthy"


def test_observe_records_history_without_diagnosing():
    m = Monitor()
    m.ingest(procs_at(1.0))
    snap = m.observe(1.0)
    assert m.snapshot is snap and len(m.history) == 1
    assert m.diagnosis is None
    _, d = m.evaluate(2.0)
    assert len(m.history) == 2 and m.diagnosis is d


def test_replay_snapshots_after_every_reading():
    m = Monitor()
    m.replay([procs_at(1.0), gpus_at(2.0, [50.0] * N), procs_at(3.0)])
    assert [s.timestamp for s in m.history] == [1.0, 2.0, 3.0]


def test_replay_of_nothing_is_none():
    assert Monitor().replay([]) is None


def test_replay_finds_a_sustained_split_then_an_exited_rank():
    readings = []
    for t in range(0, 41):
        readings += [procs_at(float(t)), gpus_at(t + 0.5, [0.0, 100.0, 100.0, 100.0])]
    m = Monitor()
    snap, d = m.replay(readings)
    assert d.verdict == "warning"
    assert [s.id for s in d.symptoms] == ["gpu-idle-vs-busy"]
    assert d.symptoms[0].ranks == (0,)
    assert snap.timestamp == 40.5

    # Rank 3 exits; within the grace period nothing new, after it rank-exited leads.
    later = [procs_at(41.0, ranks=(0, 1, 2)), gpus_at(41.5, [0.0, 100.0, 100.0, 0.0])]
    snap, d = m.replay(later)
    assert "rank-exited" not in [s.id for s in d.symptoms]
    snap, d = m.replay([procs_at(47.0, ranks=(0, 1, 2))])
    assert d.verdict == "critical"
    assert [s.id for s in d.symptoms][0] == "rank-exited"
    assert d.symptoms[0].ranks == (3,)
    assert any("pid 103" in e for e in d.symptoms[0].evidence)


def test_thresholds_reach_the_rules():
    readings = [procs_at(0.0), gpus_at(0.0, [0.0, 100.0, 100.0, 100.0])]
    assert Monitor().replay(readings)[1].verdict == "healthy"  # 30 s sustain not met
    th = Thresholds(gpu_idle_sustain_s=0.0)
    assert Monitor(thresholds=th).replay(readings)[1].verdict == "warning"


def test_missing_rank_of_a_single_node_job_is_critical_at_once():
    _, d = Monitor().replay([procs_at(0.0, ranks=(0, 1, 3))])
    assert d.verdict == "critical"
    assert d.symptoms[0].id == "rank-exited" and d.symptoms[0].ranks == (2,)
