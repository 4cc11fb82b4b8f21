"""The command line as a script sees it: exit codes, messages, JSON shape."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rltui.model import GpuPoll, GpuSample, ProcInfo, ProcPoll, Reading
from rltui.sources.record import Recorder


def rltui(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rltui", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def write_scenario(path, exit_rank=None, seconds=40):
    """Four ranks on four GPUs; optionally ``exit_rank`` leaves at t=5 and its GPU goes idle."""
    with Recorder(path, host="node-a", job="test job", intervals={"gpus": 1, "procs": 1}) as rec:
        for i in range(seconds):
            t = 1000.0 + i
            gone = exit_rank is not None and i >= 5
            procs = tuple(ProcInfo(pid=100 + r, rank=r, local_rank=r, world_size=4,
                                   gpu_index=r, state="sleeping")
                          for r in range(4) if not (gone and r == exit_rank))
            utils = [0.0 if gone and r in (exit_rank, 0) else 97.0 for r in range(4)]
            rec.write(Reading("procs", t, "ok", ProcPoll(procs)))
            rec.write(Reading("gpus", t + 0.1, "ok", GpuPoll(tuple(
                GpuSample(index=r, name="H100", uuid=f"GPU-{r}", util=u) for r, u in
                enumerate(utils)))))
    return path


def test_diagnose_replay_healthy_exits_0(tmp_path):
    out = rltui("diagnose", "--replay", str(write_scenario(tmp_path / "s")), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == 1 and doc["verdict"] == "healthy" and doc["symptoms"] == []
    assert len(doc["gpus"]) == 4 and [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]


def test_diagnose_replay_rank_exit_exits_1_with_symptoms(tmp_path):
    out = rltui("diagnose", "--replay", str(write_scenario(tmp_path / "s", exit_rank=3)),
                "--json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verdict"] == "critical"
    ids = [s["id"] for s in doc["symptoms"]]
    assert ids == ["rank-exited", "gpu-idle-vs-busy"]
    exited = doc["symptoms"][0]
    assert exited["ranks"] == [3] and exited["severity"] == "critical"
    assert set(exited) >= {"id", "severity", "title", "ranks", "evidence", "next_steps"}


def test_fail_on_warning_counts_warnings(tmp_path):
    path = write_scenario(tmp_path / "s", exit_rank=3)
    text = rltui("diagnose", "--replay", str(path))
    assert text.returncode == 1 and "rank-exited" in text.stdout
    assert rltui("diagnose", "--replay", str(path), "--fail-on", "warning").returncode == 1


@pytest.mark.parametrize("args, message", [
    (["diagnose", "--replay", "/nonexistent/rltui-scenario"], "not a scenario folder"),
    (["demo", "--scenario", "no-such-thing"], "unknown scenario"),
    (["diagnose", "--match", "(unclosed"], "not a valid regular expression"),
    (["diagnose", "--fail-on", "sometimes"], "invalid choice"),
    (["replay", "/nonexistent", "--speed", "0"], "--speed must be positive"),
])
def test_usage_errors_exit_2_with_a_message(args, message):
    out = rltui(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_unknown_schema_version_is_a_clear_error(tmp_path):
    path = write_scenario(tmp_path / "s")
    meta = json.loads((path / "scenario.json").read_text())
    meta["schema_version"] = 99
    (path / "scenario.json").write_text(json.dumps(meta))
    out = rltui("diagnose", "--replay", str(path))
    assert out.returncode == 2 and "schema_version 99" in out.stderr and "upgrade" in out.stderr


def test_bad_config_names_key_and_line(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("theme: dark\nthresholds:\n  gpu_idle_pct: lots\n")
    out = rltui("--config", str(cfg), "diagnose", "--replay", str(write_scenario(tmp_path / "s")))
    assert out.returncode == 2
    assert "line 3" in out.stderr and "thresholds.gpu_idle_pct" in out.stderr


def test_config_thresholds_change_the_diagnosis(tmp_path):
    """A sustain window longer than the recording keeps gpu-idle-vs-busy quiet."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text("thresholds:\n  gpu_idle_sustain_s: 600\n")
    path = write_scenario(tmp_path / "s", exit_rank=3)
    out = rltui("diagnose", "--replay", str(path), "--json", "--config", str(cfg))
    ids = [s["id"] for s in json.loads(out.stdout)["symptoms"]]
    assert ids == ["rank-exited"]


def test_corrupt_recording_keeps_good_lines_and_says_so(tmp_path):
    path = write_scenario(tmp_path / "s", exit_rank=3)
    with open(path / "readings.jsonl", "a") as fh:
        fh.write('{"source": "procs", "timest\n\x00\x01garbage\n')
    out = rltui("diagnose", "--replay", str(path), "--json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    assert any("skipped 2 bad line(s)" in n for n in doc["notes"])


STACKS = Path(__file__).resolve().parents[2] / "fixtures" / "stacks"


@pytest.mark.parametrize("folder, symptom, pattern, suspects", [
    ("stall", "hang-same-collective", "C", []),
    ("cleanup-deadlock", "hang-cleanup-deadlock", "A", [2]),
    ("collective-mismatch", "hang-collective-mismatch", "B", []),
])
def test_diagnose_saved_stacks_names_the_pattern(folder, symptom, pattern, suspects):
    out = rltui("diagnose", "--stacks", str(STACKS / folder), "--duration", "0",
                "--json")
    doc = json.loads(out.stdout)
    assert [s["id"] for s in doc["symptoms"]] == [symptom]
    assert doc["stacks"]["pattern"] == pattern
    assert doc["stacks"]["suspect_ranks"] == suspects
    # One sample only: a warning that asks for a second dump, not a confirmed critical.
    assert doc["symptoms"][0]["severity"] == "warning" and out.returncode == 0


def test_diagnose_stacks_reports_bad_files_and_a_missing_folder(tmp_path):
    out = rltui("diagnose", "--stacks", str(STACKS / "bad"), "--duration", "0",
                "--json")
    assert out.returncode == 0, out.stderr
    assert any(n.startswith("--stacks: ") for n in json.loads(out.stdout)["notes"])
    missing = rltui("diagnose", "--stacks", str(tmp_path / "nope"), "--duration", "0")
    assert missing.returncode == 2 and "no such folder or file" in missing.stderr


def test_a_pid_that_does_not_exist_is_no_job_not_healthy():
    """Nothing to watch says so on stderr, still prints the JSON, and exits 4."""
    out = rltui("diagnose", "--pid", "999999999", "--duration", "0", "--json")
    assert out.returncode == 4, out.stderr
    assert "no training job found" in out.stderr and "--pid 999999999" in out.stderr
    doc = json.loads(out.stdout)
    assert [s["id"] for s in doc["symptoms"]] == ["no-job-found"]
    assert doc["verdict"] == "warning"


def test_saved_files_are_read_alone_while_a_job_runs_here(tmp_path):
    """Offline means offline: a ranked process on this node is not mixed into saved files."""
    import os
    import subprocess
    import sys
    job = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                           env={**os.environ, "RANK": "0", "WORLD_SIZE": "1"})
    try:
        out = rltui("diagnose", "--stacks", str(STACKS / "stall"), "--duration", "0", "--json")
        doc = json.loads(out.stdout)
        assert doc["mode"] == "offline" and doc["ranks"] == []
        assert all(job.pid not in c["pids"] for c in doc["stacks"]["classes"])
        live = rltui("diagnose", "--stacks", str(STACKS / "stall"), "--live", "--duration", "0",
                     "--json")
        assert any(r["pid"] == job.pid for r in json.loads(live.stdout)["ranks"]), live.stderr
    finally:
        job.kill()
        job.wait()
