"""Symptoms with one cause are one incident, the root cause first (rltui.diagnosis.incidents)."""

from __future__ import annotations

from rltui.diagnosis import incidents
from rltui.model import Symptom


def sym(id_: str, title: str, ranks=(), severity="critical", since=10.0, job="") -> Symptom:
    return Symptom(id=id_, severity=severity, title=title, ranks=tuple(ranks), since=since,
                   job=job)


CRASH = sym("rank-exited", "rank 3 crashed (RuntimeError at trainer.py:130) while 3 other "
                           "process(es) remain", [3])
HANG = sym("hang-cleanup-deadlock", "rank 3 exited; ranks 0-2 wait for it in all_reduce", [3])
STALL = sym("steps-stalled", "no new step for 4 min while the job's processes are alive",
            [0, 1, 2])
GPUS = sym("gpu-idle-vs-busy", "3 of the job's GPUs idle while 4 busy", [0, 1, 2], "warning")


def test_a_dead_rank_its_waiting_ranks_and_the_stalled_steps_are_one_incident():
    (one,) = incidents.group([HANG, STALL, CRASH, GPUS])
    assert one.root_cause == "rank-exited" and one.ranks == (3,)
    assert one.symptoms == ("rank-exited", "hang-cleanup-deadlock", "steps-stalled",
                            "gpu-idle-vs-busy")
    assert one.title == ("rank 3 crashed (RuntimeError at trainer.py:130); ranks 0-2 wait for "
                         "it in all_reduce")
    assert "consequence" in one.explanation


def test_a_hang_without_a_dead_rank_is_the_root_of_the_stall():
    hang = sym("hang-collective-mismatch", "Ranks wait in different collectives", [2])
    one, = incidents.group([STALL, hang])
    assert one.root_cause == "hang-collective-mismatch" and one.symptoms[1:] == ("steps-stalled",)


def test_unrelated_symptoms_stay_apart_and_the_worst_comes_first():
    oom = sym("cuda-oom", "CUDA out of memory on rank 1", [1], since=5.0)
    found = incidents.group([GPUS, oom])
    assert [i.root_cause for i in found] == ["cuda-oom"]  # the idle GPUs follow from the OOM
    alone = incidents.group([sym("no-job-found", "No training job found", severity="warning")])
    assert [(i.root_cause, i.symptoms) for i in alone] == [("no-job-found", ("no-job-found",))]


def test_every_symptom_is_in_exactly_one_incident():
    symptoms = [CRASH, HANG, STALL, GPUS, sym("nccl-timeout", "NCCL timeout", [0]),
                sym("cuda-oom", "CUDA OOM on rank 5", [5])]
    found = incidents.group(symptoms)
    ids = [x for i in found for x in i.symptoms]
    assert sorted(ids) == sorted(s.id for s in symptoms)
    # an OOM of another rank is not the exited rank's story
    assert any(i.root_cause == "cuda-oom" for i in found)
