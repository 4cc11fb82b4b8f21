"""`rltui oom` and the `oom` object of `diagnose --json`, on real-format OOM logs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OOM_LOGS = FIXTURES / "logs" / "oom"


def rltui(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rltui", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd)


def test_oom_json_names_phase_numbers_suggestions_and_patch(tmp_path):
    import yaml
    config = yaml.safe_load((FIXTURES / "configs" / "verl" / "ppo_trainer_min.yaml").read_text())
    config["actor_rollout_ref"]["rollout"]["log_prob_micro_batch_size_per_gpu"] = 8
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(config))
    out = rltui("oom", "--log", str(OOM_LOGS / "verl-logprob-actor.log"), "--model-config",
                str(FIXTURES / "models" / "qwen2-7b"), "--config", str(tmp_path / "job.yaml"),
                "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["phase"], doc["confidence"], doc["role"]) == ("log-prob", "high", "actor")
    assert doc["framework"] == "verl" and "compute_log_prob" in doc["reason"]
    numbers = doc["numbers"]
    assert numbers["requested"] > 0 and numbers["capacity"] > numbers["free"] > 0
    assert set(numbers) >= {"requested", "capacity", "free", "allocated",
                            "reserved_unallocated", "others"}
    assert doc["suggestions"], doc["notes"]
    for s in doc["suggestions"]:
        assert set(s) >= {"key", "current", "proposed", "why", "effect_bytes", "tradeoff"}
    assert "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4" in doc["patch"]
    assert doc["estimate"]["components"]["params"] > 0


def test_oom_with_the_job_s_areal_config_gives_a_yaml_patch_within_areal_s_rules(tmp_path):
    shutil.copy(FIXTURES / "configs" / "areal" / "gsm8k_grpo.yaml", tmp_path / "job.yaml")
    out = rltui("oom", "--log", str(OOM_LOGS / "areal-ppo-update.log"), "--config",
                str(tmp_path / "job.yaml"), "--json")
    doc = json.loads(out.stdout)
    assert doc["framework"] == "areal" and doc["phase"] == "actor-forward"
    tokens = next(s for s in doc["suggestions"] if s["key"] == "actor.mb_spec.max_tokens_per_mb")
    assert tokens["proposed"] < tokens["current"]
    assert "max_tokens_per_mb:" in doc["patch"]


def test_oom_text_and_exit_codes(tmp_path):
    out = rltui("oom", "--log", str(OOM_LOGS / "verl-actor-backward.log"))
    assert out.returncode == 0
    assert "phase actor-backward" in out.stdout and "Suggestions" in out.stdout
    plain = tmp_path / "plain.log"
    plain.write_text("step:1 - loss:0.5\n")
    none = rltui("oom", "--log", str(plain))
    assert none.returncode == 1 and "no OOM found" in none.stderr
    missing = rltui("oom", "--log", str(plain), "--config", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_a_bad_job_config_is_a_note_not_a_crash(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("actor: [unclosed\n")
    out = rltui("oom", "--log", str(OOM_LOGS / "verl-actor-backward.log"), "--config", str(bad),
                "--json")
    assert out.returncode == 0, out.stderr
    assert any("bad.yaml" in n for n in json.loads(out.stdout)["notes"])


def test_diagnose_json_carries_the_oom_object():
    out = rltui("diagnose", "--log", str(OOM_LOGS / "verl-logprob-ref.log"), "--json",
                "--duration", "0")
    doc = json.loads(out.stdout)
    assert "cuda-oom" in [s["id"] for s in doc["symptoms"]]
    assert doc["oom"]["phase"] == "log-prob" and doc["oom"]["role"] == "ref"


def test_the_demo_oom_is_a_verl_run_whose_triage_has_values_and_a_patch():
    """`rltui demo --scenario oom` is what a newcomer tries first: its ranks carry a verl
    command line (a config folder, a model config and overrides), so the triage names verl, the
    values in use and a patch, as it does for a real verl job."""
    out = rltui("diagnose", "--demo", "oom", "--ranks", "2", "--duration", "25", "--json")
    oom = json.loads(out.stdout)["oom"]
    assert oom["framework"] == "verl", oom
    (first, *_) = oom["suggestions"]
    assert first["key"] == "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
    assert (first["current"], first["proposed"]) == (8, 4)
    assert first["estimate_after"] < first["estimate_before"]
    assert "log_prob_micro_batch_size_per_gpu=4" in oom["patch"]
