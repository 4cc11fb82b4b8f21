"""Diagnosis of recorded demo jobs, replayed: the same verdicts every time."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIOS = Path(__file__).resolve().parents[2] / "fixtures" / "scenarios"


@pytest.mark.parametrize("name, verdict, symptoms", [
    ("demo-healthy", "healthy", []),
    ("demo-rank-exit", "critical", [("rank-exited", [3])]),
    ("demo-oom", "critical", [("cuda-oom", [3]), ("rank-exited", [3])]),
    ("demo-zero-step-completion", "critical", [("rank-exited", [1, 2, 3]),
                                               ("zero-step-completion", [0])]),
    ("demo-cleanup-deadlock", "critical", [("hang-cleanup-deadlock", [3])]),
])
def test_recorded_demo_diagnosis(name, verdict, symptoms):
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--replay",
                          str(SCENARIOS / name), "--json"], capture_output=True, text=True,
                         check=False, timeout=60)
    assert out.returncode == (1 if verdict == "critical" else 0), out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == verdict
    assert [(s["id"], s["ranks"]) for s in doc["symptoms"]] == symptoms
    assert doc["gpu_simulated"] is True and all(g["simulated"] for g in doc["gpus"])
    assert doc["now_source"] == "recording"
    assert [log["rank"] for log in doc["logs"]] == [0, 1, 2, 3]
    assert all(log["format"] in ("verl", "unknown") for log in doc["logs"])


def test_recorded_cleanup_deadlock_names_pattern_a_from_the_recorded_py_spy_rounds():
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--replay",
                          str(SCENARIOS / "demo-cleanup-deadlock"), "--json"],
                         capture_output=True, text=True, check=False, timeout=60)
    stacks = json.loads(out.stdout)["stacks"]
    assert stacks["pattern"] == "A" and stacks["samples"] >= 2
    assert [(c["ranks"], c["state"], c["op"]) for c in stacks["classes"]] == [
        ("0-2", "stuck", "recv_object_list"), ("3", "stuck", "destroy_process_group")]
    assert stacks["suspect_ranks"] == [3]


def test_recorded_rank_exit_cites_the_traceback_with_file_and_line():
    out = subprocess.run([sys.executable, "-m", "rltui", "diagnose", "--replay",
                          str(SCENARIOS / "demo-rank-exit"), "--json"], capture_output=True,
                         text=True, check=False, timeout=60)
    (exited,) = [s for s in json.loads(out.stdout)["symptoms"] if s["id"] == "rank-exited"]
    cited = [e for e in exited["evidence"] if "last error" in e]
    assert cited and "rank3.log:" in cited[0] and "RuntimeError" in cited[0]


def test_recordings_hold_no_secrets_or_local_paths():
    for path in SCENARIOS.glob("*/readings.jsonl"):
        text = path.read_text()
        assert "/tmp/" not in text and "/work/" not in text, path
        for row in map(json.loads, text.splitlines()):
            if row["source"] == "procs" and row["payload"]:
                for proc in row["payload"]["procs"]:
                    for name, _value in proc["debug_env"]:
                        assert "TOKEN" not in name and "KEY" not in name
