"""Loading a job's config from files and its command line (tmp copies of fixtures/configs)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

from rltui.diagnosis.oom.frameworks import check, effective
from rltui.diagnosis.oom.types import ConfigValue
from rltui.sources.jobconfig import MAX_CONFIG_BYTES, load_job_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "configs"
AR = "actor_rollout_ref"


def cmdline(framework: str) -> list[str]:
    text = (FIXTURES / framework / "cmdline.txt").read_text(encoding="utf-8")
    return shlex.split(text.replace("\\\n", " "))


@pytest.fixture
def verl_job(tmp_path: Path) -> Path:
    (tmp_path / "config").mkdir()
    shutil.copy(FIXTURES / "verl" / "ppo_trainer_min.yaml", tmp_path / "config")
    return tmp_path


@pytest.fixture
def areal_job(tmp_path: Path) -> Path:
    (tmp_path / "examples" / "math").mkdir(parents=True)
    shutil.copy(FIXTURES / "areal" / "gsm8k_grpo.yaml", tmp_path / "examples" / "math")
    return tmp_path


def test_verl_fixture_with_its_command_line(verl_job: Path):
    cfg = load_job_config(cmdline("verl"), cwd=str(verl_job))
    assert cfg.framework == "verl"
    assert cfg.problems == ()
    assert cfg.sources == (str(verl_job / "config" / "ppo_trainer_min.yaml"),
                           "command line (33 overrides)")
    assert len(cfg.overrides) == 33 and cfg.overrides[0] == "algorithm.adv_estimator=grpo"
    assert effective(cfg, "data.train_batch_size") == ConfigValue(
        "data.train_batch_size", 256, False)
    assert effective(cfg, f"{AR}.rollout.log_prob_micro_batch_size_per_gpu").value == 8
    assert effective(cfg, f"{AR}.actor.optim.lr").value == 1e-6
    assert effective(cfg, "trainer.logger").value == ["console", "wandb"]
    # from the file, not overridden
    assert effective(cfg, f"{AR}.rollout.max_num_batched_tokens") == ConfigValue(
        f"{AR}.rollout.max_num_batched_tokens", 8192, False)
    # the file's interpolation follows the override
    assert effective(cfg, f"{AR}.rollout.response_length").value == 2048
    # absent from file and command line: the documented default
    assert effective(cfg, "reward_model.enable") == ConfigValue("reward_model.enable", False, True)
    assert check("verl", cfg.values) == []


def test_verl_fixture_file_alone_fails_verls_checks(verl_job: Path):
    cfg = load_job_config(config_path=str(verl_job / "config" / "ppo_trainer_min.yaml"))
    assert cfg.framework == "verl" and cfg.overrides == ()
    problems = check("verl", cfg.values)
    assert any(p.startswith(f"neither {AR}.actor.ppo_micro_batch_size_per_gpu") for p in problems)


def test_areal_fixture_with_its_command_line(areal_job: Path):
    cfg = load_job_config(cmdline("areal"), cwd=str(areal_job))
    assert cfg.framework == "areal" and cfg.problems == ()
    assert cfg.sources[0] == str(areal_job / "examples" / "math" / "gsm8k_grpo.yaml")
    assert cfg.overrides[-1] == "+actor.fsdp.offload_params=false"
    assert effective(cfg, "rollout.max_concurrent_rollouts").value == 512
    assert effective(cfg, "gconfig.max_new_tokens").value == 4096
    assert effective(cfg, "sglang.mem_fraction_static") == ConfigValue(
        "sglang.mem_fraction_static", 0.8, False)
    assert effective(cfg, "sglang.model_path").value == "Qwen/Qwen2.5-7B-Instruct"
    assert effective(cfg, "vllm.gpu_memory_utilization") == ConfigValue(
        "vllm.gpu_memory_utilization", 0.9, True)
    assert check("areal", cfg.values) == []


def test_a_given_path_replaces_the_command_lines_file(areal_job: Path, tmp_path: Path):
    other = areal_job / "mine.yaml"
    other.write_text("gconfig:\n  max_new_tokens: 100\nrollout:\n  consumer_batch_size: 4\n")
    cfg = load_job_config(cmdline("areal"), config_path="mine.yaml", cwd=str(areal_job))
    assert cfg.sources[0] == str(other)
    assert effective(cfg, "gconfig.max_new_tokens").value == 4096  # the override still applies
    assert effective(cfg, "sglang.mem_fraction_static").default is True


def test_missing_verl_config_starts_from_the_documented_defaults(tmp_path: Path):
    cfg = load_job_config(cmdline("verl"), cwd=str(tmp_path))
    assert cfg.framework == "verl"
    assert len(cfg.problems) == 1
    assert "ppo_trainer_min not found" in cfg.problems[0]
    assert str(tmp_path / "config" / "ppo_trainer_min.yaml") in cfg.problems[0]
    assert "documented defaults" in cfg.problems[0]
    assert effective(cfg, "data.train_batch_size") == ConfigValue(
        "data.train_batch_size", 256, False)
    assert effective(cfg, f"{AR}.rollout.max_num_batched_tokens") == ConfigValue(
        f"{AR}.rollout.max_num_batched_tokens", 8192, True)


def test_verl_packaged_default_is_not_read(tmp_path: Path):
    cfg = load_job_config(["python3", "-m", "verl.trainer.main_ppo", "trainer.nnodes=2"],
                          cwd=str(tmp_path))
    assert cfg.values == {"trainer": {"nnodes": 2}}
    assert "no --config-path" in cfg.problems[0] and "documented defaults" in cfg.problems[0]


def test_config_path_relative_to_the_script(tmp_path: Path):
    (tmp_path / "proj" / "conf").mkdir(parents=True)
    (tmp_path / "proj" / "conf" / "run.yaml").write_text("actor_rollout_ref:\n  rollout:\n"
                                                          "    n: 4\n")
    cfg = load_job_config(["python3", "proj/train.py", "--config-path", "conf",
                           "--config-name", "run"], cwd=str(tmp_path))
    assert cfg.problems == ()
    assert cfg.framework == "verl"  # from the keys
    assert effective(cfg, f"{AR}.rollout.n").value == 4


def test_hydra_defaults_list_is_followed(verl_job: Path):
    conf = verl_job / "config"
    (conf / "rollout").mkdir()
    (conf / "rollout" / "small.yaml").write_text("gpu_memory_utilization: 0.3\n")
    (conf / "run.yaml").write_text(
        "defaults:\n  - ppo_trainer_min\n  - rollout@actor_rollout_ref.rollout: small\n"
        "  - _self_\n\ndata:\n  train_batch_size: 64\nhydra:\n  run:\n    dir: x\n")
    cfg = load_job_config(["python3", "-m", "verl.trainer.main_ppo", "--config-path", "config",
                           "--config-name", "run", "data.max_response_length=64"],
                          cwd=str(verl_job))
    assert cfg.problems == ()
    assert str(conf / "ppo_trainer_min.yaml") in cfg.sources
    assert "defaults" not in cfg.values and "hydra" not in cfg.values
    assert effective(cfg, "data.train_batch_size").value == 64  # _self_ after the base
    assert effective(cfg, "data.max_prompt_length").value == 512  # from the base file
    assert effective(cfg, "data.max_response_length").value == 64  # the override
    assert effective(cfg, f"{AR}.rollout.gpu_memory_utilization").value == 0.3
    assert effective(cfg, f"{AR}.rollout.max_num_seqs").value == 1024  # merged, not replaced


def test_defaults_naming_verls_packaged_config(tmp_path: Path):
    (tmp_path / "run.yaml").write_text("defaults:\n  - ppo_trainer\n  - missing_one\n  - _self_\n"
                                       "actor_rollout_ref:\n  rollout:\n    n: 8\n")
    cfg = load_job_config(config_path=str(tmp_path / "run.yaml"))
    assert cfg.framework == "verl"
    assert effective(cfg, f"{AR}.rollout.n").value == 8
    assert any("verl's packaged config" in p for p in cfg.problems)
    assert any("missing_one not found" in p for p in cfg.problems)


def test_a_defaults_cycle_ends(tmp_path: Path):
    (tmp_path / "a.yaml").write_text("defaults:\n  - b\n  - _self_\nx: 1\n")
    (tmp_path / "b.yaml").write_text("defaults:\n  - a\n  - _self_\ny: 2\n")
    cfg = load_job_config(config_path=str(tmp_path / "a.yaml"))
    assert cfg.values == {"y": 2, "x": 1}
    assert any("includes itself" in p for p in cfg.problems)


def test_missing_areal_file_is_a_problem(tmp_path: Path):
    cfg = load_job_config(cmdline("areal"), cwd=str(tmp_path))
    assert cfg.framework == "areal"
    assert cfg.problems[0] == f"{tmp_path / 'examples' / 'math' / 'gsm8k_grpo.yaml'}: not found"
    assert effective(cfg, "gconfig.max_new_tokens").value == 4096  # overrides still read


def test_bad_yaml_names_file_and_line_and_keeps_the_overrides(areal_job: Path):
    path = areal_job / "examples" / "math" / "gsm8k_grpo.yaml"
    path.write_text("rollout:\n  max_concurrent_rollouts: [1, 2\nactor: {}\n")
    cfg = load_job_config(cmdline("areal"), cwd=str(areal_job))
    assert len(cfg.problems) == 1
    assert cfg.problems[0].startswith(f"{path} line 3: not valid YAML")
    assert effective(cfg, "rollout.max_concurrent_rollouts").value == 512


def test_not_utf8(tmp_path: Path):
    (tmp_path / "c.yaml").write_bytes(b"a: 1\nb: \xff\xfe\n")
    cfg = load_job_config(config_path=str(tmp_path / "c.yaml"))
    assert cfg.problems[0] == f"{tmp_path / 'c.yaml'} line 2: not UTF-8 text"


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root reads files whatever their mode")
def test_unreadable_file(tmp_path: Path):
    path = tmp_path / "secret.yaml"
    path.write_text("a: 1\n")
    path.chmod(0)
    try:
        cfg = load_job_config(config_path=str(path))
    finally:
        path.chmod(0o600)
    assert cfg.values == {} and cfg.problems[0] == f"{path}: permission denied"


def test_a_folder_is_not_a_config(tmp_path: Path):
    cfg = load_job_config(config_path=str(tmp_path))
    assert cfg.problems[0] == f"{tmp_path}: a folder, not a config file"


def test_too_big_is_refused_unread(tmp_path: Path):
    path = tmp_path / "huge.yaml"
    with path.open("wb") as f:
        f.write(b"a: 1\n")
        f.seek(MAX_CONFIG_BYTES + 1)
        f.write(b"\n")
    cfg = load_job_config(config_path=str(path))
    assert cfg.values == {} and cfg.sources == ()
    assert "larger than 4 MiB" in cfg.problems[0]


def test_nothing_to_read():
    cfg = load_job_config()
    assert cfg.framework == "unknown" and cfg.values == {}
    assert "nothing to read" in cfg.problems[0]


def test_a_command_line_without_config_or_framework(tmp_path: Path):
    cfg = load_job_config(["python3", "train.py", "--lr", "0.1", "model.size=7"],
                          cwd=str(tmp_path))
    assert cfg.values == {"model": {"size": 7}}
    assert any("names no config file" in p for p in cfg.problems)
    assert any("framework not recognised" in p for p in cfg.problems)


def test_bad_overrides_are_problems_not_crashes(verl_job: Path):
    args = [*cmdline("verl"), "trainer.logger=[a,b", "x=1,2", "actor@a.b=c"]
    cfg = load_job_config(args, cwd=str(verl_job))
    assert len(cfg.problems) == 3
    assert len(cfg.overrides) == 33


def test_a_path_through_a_file_cannot_be_read(tmp_path: Path):
    (tmp_path / "plain").write_text("x")
    cfg = load_job_config(config_path=str(tmp_path / "plain" / "c.yaml"))
    assert cfg.values == {}
    assert cfg.problems[0].startswith(f"{tmp_path / 'plain' / 'c.yaml'}: ")
