"""Headless views: the --json document, the plain text report and the exit decision."""

from __future__ import annotations

import json

import pytest

from rltui import __version__, model
from rltui.model import (
    DepartedRank,
    Diagnosis,
    GpuProcess,
    GpuSample,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    Symptom,
)
from rltui.report import SCHEMA, should_fail, to_json, to_text

EXITED = Symptom(id="rank-exited", severity="critical",
                 title="rank 3 exited while 3 other process(es) remain", ranks=(3,),
                 evidence=("rank 3 (pid 103): exited, gone for 34 s",
                           "still running: ranks 0-2 (pids 100, 101, 102)"),
                 next_steps=("Read the end of rank 3's log", "Dump every rank"), since=1005.0)
IDLE = Symptom(id="gpu-idle-vs-busy", severity="warning", title="1 of the job's GPUs idle",
               ranks=(0, 1, 2), evidence=("GPU 0 (rank 0): 0% utilisation, idle",),
               next_steps=("Check the logs",), since=1000.0)
INFO = Symptom(id="some-info", severity="info", title="fyi")

SNAP = NodeSnapshot(
    timestamp=1040.0, host="node-1", job="--match train",
    gpus=(GpuSample(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-0", util=0.0,
                    mem_used=40 * 2**30, mem_total=80 * 2**30, temperature_c=60.0, power_w=100.0,
                    throttle_reasons=("idle",), processes=(GpuProcess(pid=100, used_memory=1),)),
          GpuSample(index=1, name="NVIDIA H100", uuid="GPU-1", util=None),
          GpuSample(index=2, name="NVIDIA H100", uuid="GPU-2", error="GPU is lost")),
    gpu_simulated=True,
    foreign_gpu_pids=(900,),
    procs=(ProcInfo(pid=102, rank=2, gpu_index=2, state="sleeping", cpu_percent=99.0,
                    role="trainer", debug_env=(("NCCL_DEBUG", "INFO"),)),
           ProcInfo(pid=50, rank=None, state="sleeping", role="launcher"),
           ProcInfo(pid=100, rank=0, gpu_index=0, state="running", partial=True),
           ProcInfo(pid=101, rank=1, gpu_index=1)),
    departed=(DepartedRank(pid=103, rank=3, last_seen=1004.0, gone_since=1005.0),
              DepartedRank(pid=0, rank=5, last_seen=0.0, gone_since=1040.0,
                           reason="missing from WORLD_SIZE")),
    sources=(SourceState("gpus", model.OK, 1040.0, 1040.0),
             SourceState("procs", model.DENIED, 1040.0, 1000.0, "ptrace", "run as root")),
)
DIAG = Diagnosis(timestamp=1040.0, verdict="critical", symptoms=(EXITED, IDLE),
                 notes=("procs: denied: ptrace",))


def test_to_json_has_the_public_keys():
    doc = to_json(SNAP, DIAG, "replay", "recording")
    for key in ("schema", "tool", "mode", "host", "job", "timestamp", "now_source", "verdict",
                "symptoms", "gpus", "gpu_simulated", "foreign_gpu_pids", "ranks", "departed",
                "sources", "notes"):
        assert key in doc, key
    assert doc["schema"] == SCHEMA == 1
    assert doc["tool"] == f"rltui {__version__}"
    assert (doc["mode"], doc["now_source"]) == ("replay", "recording")
    assert (doc["host"], doc["job"], doc["timestamp"]) == ("node-1", "--match train", 1040.0)
    assert doc["verdict"] == "critical"
    assert doc["gpu_simulated"] is True
    assert doc["foreign_gpu_pids"] == [900]
    assert doc["notes"] == ["procs: denied: ptrace"]


def test_to_json_defaults_to_the_clock():
    assert to_json(SNAP, DIAG, "live")["now_source"] == "clock"


def test_to_json_symptoms_in_order_with_every_field():
    symptoms = to_json(SNAP, DIAG, "live")["symptoms"]
    assert [s["id"] for s in symptoms] == ["rank-exited", "gpu-idle-vs-busy"]
    first = symptoms[0]
    for key in ("id", "severity", "title", "ranks", "evidence", "next_steps", "since"):
        assert key in first, key
    assert first["severity"] == "critical"
    assert first["ranks"] == [3]
    assert first["evidence"] == list(EXITED.evidence)
    assert first["next_steps"] == list(EXITED.next_steps)
    assert first["since"] == 1005.0


def test_to_json_gpus_include_mem_percent_and_nulls():
    gpus = to_json(SNAP, DIAG, "live")["gpus"]
    assert [g["index"] for g in gpus] == [0, 1, 2]
    assert gpus[0]["mem_percent"] == 50.0
    assert gpus[0]["throttle_reasons"] == ["idle"]
    assert gpus[0]["processes"] == [{"pid": 100, "used_memory": 1, "local": True}]
    assert gpus[1]["util"] is None and gpus[1]["mem_percent"] is None
    assert gpus[2]["error"] == "GPU is lost"


def test_to_json_ranks_sorted_by_rank_then_unranked():
    doc = to_json(SNAP, DIAG, "live")
    assert [(r["rank"], r["pid"]) for r in doc["ranks"]] == [(0, 100), (1, 101), (2, 102),
                                                             (None, 50)]
    assert doc["ranks"][2]["debug_env"] == [["NCCL_DEBUG", "INFO"]]
    assert [d["reason"] for d in doc["departed"]] == ["exited", "missing from WORLD_SIZE"]
    assert doc["sources"][1] == {"name": "procs", "status": "denied", "last_reading": 1040.0,
                                 "last_ok": 1000.0, "message": "ptrace", "remedy": "run as root"}


def test_to_json_is_json_serialisable():
    doc = to_json(SNAP, DIAG, "live")
    assert json.loads(json.dumps(doc)) == doc


def test_to_json_of_an_empty_snapshot():
    doc = to_json(NodeSnapshot(timestamp=0.0), Diagnosis(timestamp=0.0, verdict="healthy"), "live")
    assert doc["symptoms"] == doc["gpus"] == doc["ranks"] == doc["departed"] == []
    assert doc["verdict"] == "healthy"
    json.dumps(doc)


@pytest.mark.parametrize(("severities", "fail_on", "fails"), [
    ((), "warning", False),
    ((), "critical", False),
    (("info",), "warning", False),
    (("warning",), "warning", True),
    (("warning",), "critical", False),
    (("critical",), "warning", True),
    (("critical",), "critical", True),
    (("info", "warning"), "critical", False),
    (("info", "critical"), "critical", True),
])
def test_should_fail(severities, fail_on, fails):
    d = Diagnosis(timestamp=0.0, verdict="x",
                  symptoms=tuple(Symptom(f"s{i}", s, "t") for i, s in enumerate(severities)))
    assert should_fail(d, fail_on) is fails


def test_to_text_mentions_each_symptom_and_verdict():
    text = to_text(SNAP, DIAG)
    assert "verdict: CRITICAL" in text
    assert "node-1" in text and "--match train" in text
    for s in DIAG.symptoms:
        assert f"{s.id}: {s.title}" in text
        for e in s.evidence:
            assert f"    - {e}" in text
    assert "CRITICAL rank-exited" in text
    assert "[ranks 3]" in text and "[ranks 0-2]" in text
    assert "      1. Read the end of rank 3's log" in text
    assert "note: procs: denied: ptrace" in text
    assert text.endswith("\n")


def test_to_text_symptoms_in_the_diagnosis_order():
    text = to_text(SNAP, DIAG)
    assert text.index("rank-exited") < text.index("gpu-idle-vs-busy")


def test_to_text_lists_gpus_processes_and_departed():
    text = to_text(SNAP, DIAG)
    assert "GPUs (simulated): 3" in text
    assert "NVIDIA H100 80GB HBM3" in text
    assert "40.0G/80.0G" in text
    assert "2 NVIDIA H100: GPU is lost" in text
    gpu1 = next(line for line in text.splitlines() if line.startswith("    1 NVIDIA H100"))
    assert "N/A" in gpu1
    assert "Job processes: 4" in text
    assert "(partial)" in text
    ranks = [line for line in text.splitlines() if line.strip().startswith("rank ")]
    assert [line.split()[1] for line in ranks] == ["0", "1", "2", "-", "3", "5"]
    assert "exited" in ranks[4] and "missing from WORLD_SIZE" in ranks[5]


def test_to_text_healthy():
    snap = NodeSnapshot(timestamp=0.0)
    text = to_text(snap, Diagnosis(timestamp=0.0, verdict="healthy"))
    assert "verdict: HEALTHY" in text
    assert "No symptoms found." in text
    assert "GPUs: 0" in text and "Job processes: 0" in text
    assert "note:" not in text


def test_to_text_includes_info_symptoms():
    d = Diagnosis(timestamp=0.0, verdict="healthy", symptoms=(INFO,))
    assert "INFO     some-info: fyi" in to_text(NodeSnapshot(timestamp=0.0), d)
