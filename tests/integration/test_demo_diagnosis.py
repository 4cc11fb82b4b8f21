"""`rltui diagnose --demo`: a real demo job, real processes and logs, diagnosed headless."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def diagnose(tmp_path, scenario, duration, config=""):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config)
    out = subprocess.run([sys.executable, "-m", "rltui", "--config", str(cfg), "diagnose",
                          "--demo", scenario, "--duration", str(duration), "--json"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode in (0, 1), out.stderr
    return json.loads(out.stdout)


def test_stall_is_steps_stalled_with_the_hung_not_slow_evidence(tmp_path):
    """Every rank waits in the same all_reduce: steps stop, processes live, CPU and GPUs idle."""
    # A low limit (max(2 x median step, 3 s)) so that every rank is past it well before the
    # end, even when a loaded machine makes the ranks' step times uneven.
    doc = diagnose(tmp_path, "stall", 14,
                   "thresholds:\n  stall_floor_s: 3\n  stall_factor: 2\n")
    (stalled,) = [s for s in doc["symptoms"] if s["id"] == "steps-stalled"]
    assert stalled["severity"] == "critical" and stalled["ranks"] == [0, 1, 2, 3]
    evidence = "\n".join(stalled["evidence"])
    assert "idle on CPU" in evidence and "their GPUs are idle" in evidence
    assert "now = " in evidence
    assert all(log["steps_seen"] >= 1 and log["format"] == "verl" for log in doc["logs"])


def test_healthy_demo_is_not_stalled(tmp_path):
    doc = diagnose(tmp_path, "healthy", 6, "thresholds:\n  stall_floor_s: 3\n")
    assert doc["verdict"] == "healthy", doc["symptoms"]
    assert all(log["steps_seen"] >= 2 for log in doc["logs"])


def test_zero_step_completion_on_the_demo(tmp_path):
    doc = diagnose(tmp_path, "zero-step-completion", 8)
    ids = {s["id"]: s for s in doc["symptoms"]}
    assert "zero-step-completion" in ids
    zero = ids["zero-step-completion"]
    assert zero["ranks"] == [0]
    assert any("still alive" in e for e in zero["evidence"])
    assert any("AReaL training completes" in e for e in zero["evidence"]), zero["evidence"]


# Live py-spy rounds every 4 s, counted as samples from 3 s apart: a 13 s run takes rounds at
# 0, 4, 8, 12 and a closing one at 13 s; the snapshot keeps the last three, and at least two
# samples among them fall after the demo's ranks hung (about 3 s in).
STACKS_FAST = ("pyspy:\n  interval: 4\nthresholds:\n  stack_sample_gap_s: 3\n"
               "  stall_floor_s: 3\n  stall_factor: 2\n")


def test_stall_is_named_pattern_c_from_live_stacks(tmp_path):
    doc = diagnose(tmp_path, "stall", 13, STACKS_FAST)
    stacks = doc["stacks"]
    assert stacks["pattern"] == "C" and stacks["samples"] >= 2, stacks["explanation"]
    assert [c["state"] for c in stacks["classes"]] == ["stuck"]
    assert stacks["classes"][0]["ranks"] == "0-3" and stacks["classes"][0]["op"] == "all_reduce"
    (hang,) = [s for s in doc["symptoms"] if s["id"] == "hang-same-collective"]
    assert hang["severity"] == "critical"


def test_rank_exit_is_pattern_a_with_the_exited_rank_as_suspect(tmp_path):
    doc = diagnose(tmp_path, "rank-exit", 13, STACKS_FAST)
    stacks = doc["stacks"]
    assert stacks["pattern"] == "A", stacks["explanation"]
    exited = stacks["missing_ranks"]
    assert len(exited) == 1 and exited == stacks["suspect_ranks"]
    assert "hang-cleanup-deadlock" in [s["id"] for s in doc["symptoms"]]


def test_healthy_demo_stacks_are_not_a_hang(tmp_path):
    doc = diagnose(tmp_path, "healthy", 7, "pyspy:\n  interval: 2\nthresholds:\n"
                   "  stack_sample_gap_s: 1.5\n  stall_floor_s: 3\n")
    assert doc["stacks"]["samples"] >= 2
    assert doc["stacks"]["pattern"] is None
    assert not [s for s in doc["symptoms"] if s["id"].startswith("hang-")]
