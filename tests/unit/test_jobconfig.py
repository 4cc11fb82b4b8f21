"""The job's config from text: Hydra overrides, YAML, framework, locations; defaults and checks."""

from __future__ import annotations

import copy
import math
from types import MappingProxyType

import pytest

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.frameworks import check, effective
from rltui.diagnosis.oom.types import ConfigValue, JobConfig
from rltui.parsing.jobconfig import (
    apply_overrides,
    config_locations,
    defaults_list,
    detect_framework,
    parse_overrides,
    parse_value,
    parse_yaml_config,
)

AR = "actor_rollout_ref"
VERL = ["python3", "-m", "verl.trainer.main_ppo"]


def overrides(*args: str) -> list:
    found, problems = parse_overrides([*VERL, *args])
    assert problems == []
    return found


# -- parse_overrides -------------------------------------------------------------------------------

def test_the_four_operations():
    assert overrides("a.b=1", "+c.d=2", "++e=3", "~f", "~g.h=4") == [
        ("set", "a.b", 1), ("add", "c.d", 2), ("force", "e", 3), ("delete", "f", None),
        ("delete", "g.h", 4)]


@pytest.mark.parametrize(("raw", "value"), [
    ("256", 256), ("-1", -1), ("+7", 7), ("1_000", 1000),
    ("0.6", 0.6), ("1e-6", 1e-6), ("5e-7", 5e-7), ("1.70e-5", 1.7e-5), (".5", 0.5),
    ("-.5", -0.5), ("3.", 3.0),
    ("true", True), ("True", True), ("FALSE", False),
    ("null", None), ("NULL", None),
    ("vllm", "vllm"), ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    ("/data/gsm8k/train.parquet", "/data/gsm8k/train.parquet"),
    ("~/models/x", "~/models/x"), ("10s", "10s"), ("007", "007"),
    ("'my proj'", "my proj"), ('"a,b"', "a,b"), ("'it\\'s'", "it's"), ('"q\\"x"', 'q"x'),
    ("'true'", "true"), ("'1e-6'", "1e-6"),
    ("[console,wandb]", ["console", "wandb"]), ("['console','wandb']", ["console", "wandb"]),
    ('["console", "wandb"]', ["console", "wandb"]), ("[]", []), ("[1, [2, 3]]", [1, [2, 3]]),
    ("{a:1,b:[x,y]}", {"a": 1, "b": ["x", "y"]}), ("{}", {}),
    ("${data.max_prompt_length}", "${data.max_prompt_length}"),
    ("${oc.select:a.b,1}", "${oc.select:a.b,1}"),
    ("", ""), ("int(3.0)", 3), ("str(12)", "12"), ("float(2)", 2.0), ("bool(true)", True),
    ("a\\,b", "a,b"),
])
def test_values_follow_hydras_grammar(raw, value):
    got = parse_value(raw)
    assert got == value and type(got) is type(value)


def test_special_floats():
    assert math.isinf(parse_value("inf")) and math.isinf(parse_value("-INF"))
    assert math.isnan(parse_value("nan"))


def test_whitespace_around_a_value_is_dropped():
    assert overrides("a= 5 ") == [("set", "a", 5)]


def test_non_override_arguments_are_ignored():
    args = ["CUDA_VISIBLE_DEVICES=0,1", "python3", "-u", "-X", "dev", "-m",
            "verl.trainer.main_ppo", "--config-path", "cfg=odd", "--config-name=x",
            "-cn", "y=z", "--multirun", "positional", "-1", "trainer.nnodes=2"]
    assert parse_overrides(args) == ([("set", "trainer.nnodes", 2)], [])


def test_a_script_starts_the_program_and_torchrun_flags_are_skipped():
    args = ["torchrun", "--nproc_per_node", "8", "--master_addr=10.0.0.1",
            "examples/math/gsm8k_grpo.py", "--config", "x=y.yaml", "actor.path=/m"]
    assert parse_overrides(args) == ([("set", "actor.path", "/m")], [])


def test_joined_module_flag():
    assert parse_overrides(["python", "-mverl.trainer.main_ppo", "a=1"]) == (
        [("set", "a", 1)], [])


def test_bare_override_list_without_interpreter():
    assert parse_overrides(["a=1", "--flag", "b.c=x"]) == (
        [("set", "a", 1), ("set", "b.c", "x")], [])


def test_sweeps_group_choices_and_bad_keys_are_problems_not_values():
    found, problems = parse_overrides([
        *VERL, "a=1,2", "b=choice(1,2)", "actor@actor_rollout_ref.actor=megatron_actor",
        "hydra/launcher=basic", "a..b=1", "c=[1,2", "d='open", "ok=1"])
    assert found == [("set", "ok", 1)]
    assert len(problems) == 7
    assert "sweep" in problems[0] and "--multirun" in problems[0]
    assert "choice" in problems[1]
    assert "config group" in problems[2] and "config group" in problems[3]
    assert "not a config key" in problems[4]
    assert "unbalanced brackets" in problems[5]
    assert "unterminated quote" in problems[6]


@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{a:" * 3000 + "1" + "}" * 3000,
                                   "int(" * 3000 + "1" + ")" * 3000],
                         ids=["lists", "dicts", "casts"])
def test_a_value_nested_beyond_reason_is_a_problem_not_a_crash(value):
    """A hostile command line (any process's, read for the OOM advice and the triage): nesting
    deeper than Python's recursion allows is reported like any bad value."""
    found, problems = parse_overrides([*VERL, f"a.b={value}", "ok=1"])
    assert found == [("set", "ok", 1)]
    assert len(problems) == 1 and "nested" in problems[0]


def test_list_index_keys_are_keys():
    assert overrides("trainer.logger.0=console") == [("set", "trainer.logger.0", "console")]


# -- apply_overrides -------------------------------------------------------------------------------

def test_apply_sets_adds_forces_and_deletes_without_touching_the_input():
    values = {"data": {"train_batch_size": 1024, "files": ["a", "b"]}, "trainer": {"nnodes": 1},
              "gone": 1, "keep": {"x": 1}}
    before = copy.deepcopy(values)
    out = apply_overrides(values, [
        ("set", "data.train_batch_size", 256), ("add", "a.b.c", [1]),
        ("force", "trainer.nnodes", 2), ("delete", "gone", None), ("delete", "keep.x", 2),
        ("delete", "missing.key", None)])
    assert values == before
    assert out == {"data": {"train_batch_size": 256, "files": ["a", "b"]},
                   "trainer": {"nnodes": 2}, "a": {"b": {"c": [1]}}, "keep": {"x": 1}}
    out["data"]["files"].append("c")
    assert values["data"]["files"] == ["a", "b"]


def test_apply_replaces_a_scalar_parent_and_takes_read_only_mappings():
    values = MappingProxyType({"a": 1, "b": MappingProxyType({"c": 2})})
    out = apply_overrides(values, [("set", "a.x", 3), ("set", "b.d", 4)])
    assert out == {"a": {"x": 3}, "b": {"c": 2, "d": 4}}


def test_applied_values_are_copies():
    value = [1, 2]
    out = apply_overrides({}, [("set", "a", value)])
    value.append(3)
    assert out == {"a": [1, 2]}


# -- YAML ------------------------------------------------------------------------------------------

def test_yaml_mapping():
    assert parse_yaml_config("a:\n  b: 1\n", "x.yaml") == ({"a": {"b": 1}}, [])


@pytest.mark.parametrize(("text", "line"), [
    ("a: 1\nb: [1, 2\nc: 3\n", 3),
    ("a:\n  b: 1\n c: 2\n", 3),
    ("a: 1\n\tb: 2\n", 2),
])
def test_bad_yaml_names_file_and_line(text, line):
    values, problems = parse_yaml_config(text, "conf/run.yaml")
    assert values == {}
    assert len(problems) == 1 and problems[0].startswith(f"conf/run.yaml line {line}:")
    assert "not valid YAML" in problems[0]


def test_bad_characters_name_their_line():
    values, problems = parse_yaml_config("a: 1\nb: \x07\n", "x.yaml")
    assert values == {} and problems[0].startswith("x.yaml line 2:")


@pytest.mark.parametrize(("text", "word"), [("", "empty"), ("# only a comment\n", "empty"),
                                            ("- a\n- b\n", "list"), ("just text\n", "str")])
def test_yaml_that_is_not_a_mapping(text, word):
    values, problems = parse_yaml_config(text, "x.yaml")
    assert values == {} and word in problems[0]


def test_defaults_list_entries():
    entries, problems = defaults_list({"defaults": [
        "ppo_trainer", {"actor@actor_rollout_ref.actor": "dp_actor"}, {"override data": "x"},
        {"optional extra": None}, "_self_", 5]})
    assert entries == [(None, None, "ppo_trainer"), ("actor", "actor_rollout_ref.actor",
                                                     "dp_actor"),
                       ("data", None, "x"), (None, None, "_self_")]
    assert len(problems) == 1


# -- framework and locations -----------------------------------------------------------------------

@pytest.mark.parametrize(("cmdline", "values", "framework"), [
    (VERL, {}, "verl"),
    (["python3", "/opt/verl/verl/trainer/main_ppo.py"], {}, "verl"),
    (["python3", "train.py"], {"actor_rollout_ref": {}}, "verl"),
    (["python3", "-m", "areal.launcher.local", "x.py", "--config", "c.yaml"], {}, "areal"),
    (["torchrun", "x.py"], {"gconfig": {}}, "areal"),
    ([], {"rollout": {"max_head_offpolicyness": 2}}, "areal"),
    ([], {"allocation_mode": "sglang.d4+d4"}, "areal"),
    ([], {"actor": {}, "rollout": {}}, "areal"),
    (["python3", "-m", "openrlhf.cli.train_ppo_ray", "--micro_train_batch_size", "8"], {},
     "openrlhf"),
    (["python3", "train.py", "--lr", "1"], {"model": {}}, "unknown"),
    ([], {}, "unknown"),
    (VERL, {"gconfig": {}}, "verl"),  # the program decides before the keys
])
def test_detect_framework(cmdline, values, framework):
    assert detect_framework(cmdline, values) == framework


def test_overrides_do_not_decide_the_framework():
    assert detect_framework(["python3", "x.py", "data.path=/srv/areal/x"], {}) == "unknown"


def test_verl_locations_both_flag_forms():
    loc = config_locations([*VERL, "--config-path", "cfg", "--config-name", "run", "a=1"])
    assert (loc.framework, loc.config_dir, loc.config_name, loc.name_is_default) == (
        "verl", "cfg", "run", False)
    assert loc.overrides == ("a=1",)
    loc = config_locations([*VERL, "--config-path=/abs/cfg", "--config-name=run.yaml"])
    assert (loc.config_dir, loc.config_name) == ("/abs/cfg", "run.yaml")
    loc = config_locations([*VERL, "-cp", "c", "-cn", "n", "--config-dir", "extra"])
    assert (loc.config_dir, loc.config_name, loc.search_dirs) == ("c", "n", ("extra",))


def test_verl_default_config_name():
    loc = config_locations([*VERL, "trainer.nnodes=2"])
    assert (loc.config_dir, loc.config_name, loc.name_is_default) == (None, "ppo_trainer", True)
    assert loc.overrides == ("trainer.nnodes=2",)


def test_areal_locations():
    loc = config_locations(["python3", "-m", "areal.launcher.local", "examples/math/run.py",
                            "--config", "examples/math/run.yaml", "+a=1", "~b"])
    assert (loc.framework, loc.config_file, loc.config_name) == (
        "areal", "examples/math/run.yaml", None)
    assert loc.script == "examples/math/run.py"
    assert loc.overrides == ("+a=1", "~b")
    loc = config_locations(["python3", "train.py", "--config=run.yaml"])
    assert (loc.config_file, loc.script) == ("run.yaml", "train.py")


def test_no_config_on_the_command_line():
    loc = config_locations(["python3", "train.py", "--lr", "0.1"])
    assert (loc.config_file, loc.config_name, loc.overrides) == (None, None, ())


# -- effective -------------------------------------------------------------------------------------

def verl_config(values: dict) -> JobConfig:
    return JobConfig(framework="verl", values=values)


def test_effective_value_from_the_config():
    cfg = verl_config({AR: {"rollout": {"gpu_memory_utilization": 0.7}}})
    assert effective(cfg, f"{AR}.rollout.gpu_memory_utilization") == ConfigValue(
        f"{AR}.rollout.gpu_memory_utilization", 0.7, False)


@pytest.mark.parametrize(("key", "value"), [
    (f"{AR}.rollout.gpu_memory_utilization", 0.5),
    (f"{AR}.rollout.log_prob_micro_batch_size", None),
    (f"{AR}.rollout.log_prob_micro_batch_size_per_gpu", None),
    (f"{AR}.actor.ppo_mini_batch_size", 256),
    (f"{AR}.actor.ppo_micro_batch_size_per_gpu", None),
    (f"{AR}.model.enable_gradient_checkpointing", True),
    (f"{AR}.actor.strategy", "fsdp"),
    (f"{AR}.actor.fsdp_config.param_offload", False),
    (f"{AR}.actor.fsdp_config.optimizer_offload", False),
    (f"{AR}.actor.fsdp_config.offload_policy", False),
    (f"{AR}.actor.use_dynamic_bsz", False),
    (f"{AR}.actor.ppo_max_token_len_per_gpu", 16384),
    (f"{AR}.ref.log_prob_micro_batch_size_per_gpu", None),
    ("critic.ppo_micro_batch_size_per_gpu", None),
    ("data.train_batch_size", 1024),
    ("data.max_prompt_length", 512),
    ("data.max_response_length", 512),
    (f"{AR}.rollout.n", 1),
    ("trainer.n_gpus_per_node", 8),
    ("trainer.nnodes", 1),
])
def test_verl_documented_defaults_are_flagged(key, value):
    assert effective(verl_config({}), key) == ConfigValue(key, value, True)


@pytest.mark.parametrize(("key", "value"), [
    ("rollout.max_concurrent_rollouts", 1),  # None: consumer_batch_size (default 1)
    ("rollout.max_head_offpolicyness", 0),
    ("sglang.mem_fraction_static", 0.9),
    ("actor.mb_spec.max_tokens_per_mb", None),
    ("actor.gradient_checkpointing", False),
    ("gconfig.max_new_tokens", 16384),
    ("train_dataset.max_length", None),
    ("allocation_mode", ""),
])
def test_areal_documented_defaults_are_flagged(key, value):
    assert effective(JobConfig(framework="areal"), key) == ConfigValue(key, value, True)


def test_every_default_names_its_source():
    for framework, table in frameworks.DEFAULTS.items():
        for key, entry in table.items():
            assert entry.source.endswith((".yaml", ".py")), (framework, key)


def test_unknown_key_and_unknown_framework():
    assert effective(verl_config({}), "no.such.key") == ConfigValue("no.such.key", None, True)
    cfg = JobConfig(framework="unknown", values={"a": {"b": 1}})
    assert effective(cfg, "a.b") == ConfigValue("a.b", 1, False)
    assert effective(cfg, "data.train_batch_size") == ConfigValue(
        "data.train_batch_size", None, True)


def test_aliases_resolve_to_the_frameworks_key():
    cfg = verl_config({AR: {"model": {"enable_gradient_checkpointing": False}}})
    assert effective(cfg, f"{AR}.actor.gradient_checkpointing") == ConfigValue(
        f"{AR}.model.enable_gradient_checkpointing", False, False)
    areal = JobConfig(framework="areal", values={"rollout": {"max_concurrent_rollouts": 64}})
    assert effective(areal, "max_concurrent_rollouts") == ConfigValue(
        "rollout.max_concurrent_rollouts", 64, False)
    # written at the top level, as some guides show it: still read
    loose = JobConfig(framework="areal", values={"max_concurrent_rollouts": 32})
    assert effective(loose, "max_concurrent_rollouts").value == 32


def test_interpolations_resolve_through_config_and_defaults():
    cfg = verl_config({AR: {"actor": {"use_dynamic_bsz": True, "ppo_mini_batch_size": 64}},
                       "data": {"max_prompt_length": 2048},
                       "x": {"a": "${data.max_prompt_length}", "b": "p/${trainer.nnodes}/q",
                             "c": "${oc.select:no.such,7}", "d": "${.a}",
                             "e": "${oc.env:HOME}", "f": "${no.such}"}})
    assert effective(cfg, f"{AR}.rollout.log_prob_use_dynamic_bsz") == ConfigValue(
        f"{AR}.rollout.log_prob_use_dynamic_bsz", True, True)
    assert effective(cfg, "critic.ppo_mini_batch_size").value == 64
    assert effective(cfg, f"{AR}.rollout.prompt_length").value == 2048
    assert effective(cfg, "x.a").value == 2048
    assert effective(cfg, "x.b").value == "p/1/q"
    assert effective(cfg, "x.c").value == 7
    assert effective(cfg, "x.d").value == 2048
    assert effective(cfg, "x.e").value == "${oc.env:HOME}"
    assert effective(cfg, "x.f").value == "${no.such}"


def test_cyclic_interpolations_end():
    cfg = verl_config({"a": "${b}", "b": "${a}"})
    assert isinstance(effective(cfg, "a").value, str)


def test_areal_fallback_follows_the_config():
    cfg = JobConfig(framework="areal", values={"rollout": {"consumer_batch_size": 16}})
    assert effective(cfg, "rollout.max_concurrent_rollouts") == ConfigValue(
        "rollout.max_concurrent_rollouts", 16, True)


# -- check: verl -----------------------------------------------------------------------------------

def valid_verl() -> dict:
    """A GRPO run that verl accepts (8 GPUs, per-GPU micro batches set)."""
    return {
        "data": {"train_batch_size": 256, "max_prompt_length": 1024, "max_response_length": 2048},
        AR: {"actor": {"ppo_mini_batch_size": 64, "ppo_micro_batch_size_per_gpu": 8,
                       "use_kl_loss": True},
             "rollout": {"n": 5, "log_prob_micro_batch_size_per_gpu": 8,
                         "tensor_model_parallel_size": 2, "gpu_memory_utilization": 0.6},
             "ref": {"log_prob_micro_batch_size_per_gpu": 8}},
        "algorithm": {"adv_estimator": "grpo"},
        "trainer": {"n_gpus_per_node": 8, "nnodes": 1},
    }


def with_(values: dict, **changes) -> dict:
    ops = [("set", k.replace("__", "."), v) for k, v in changes.items()]
    return apply_overrides(values, ops)


def test_a_valid_config_passes():
    assert check("verl", valid_verl()) == []


def test_unknown_framework_has_no_checks():
    assert check("unknown", {}) == [] and check("openrlhf", {"x": 1}) == []


def one(problems: list[str]) -> str:
    assert len(problems) == 1, problems
    return problems[0]


def test_real_batch_divisible_by_gpus():
    p = one(check("verl", with_(valid_verl(), data__train_batch_size=250)))
    assert "data.train_batch_size (250)" in p and "rollout.n (5) = 1250" in p
    assert "= 8" in p


def test_megatron_minimal_batch_uses_data_parallel_size():
    values = with_(valid_verl(), actor_rollout_ref__actor__strategy="megatron",
                   actor_rollout_ref__actor__megatron__tensor_model_parallel_size=2,
                   data__train_batch_size=254, actor_rollout_ref__rollout__n=2)
    p = one(check("verl", values))
    assert "data-parallel size 4" in p and "(8) = 32" in p


def test_micro_batch_settings_exclusive():
    p = one(check("verl", with_(valid_verl(), actor_rollout_ref__actor__ppo_micro_batch_size=64)))
    assert "ppo_micro_batch_size (64)" in p and "both set" in p
    values = valid_verl()
    del values[AR]["actor"]["ppo_micro_batch_size_per_gpu"]
    p = one(check("verl", values))
    assert p.startswith(f"neither {AR}.actor.ppo_micro_batch_size_per_gpu")
    # dynamic batch sizes need neither
    assert check("verl", with_(values, actor_rollout_ref__actor__use_dynamic_bsz=True,
                               actor_rollout_ref__actor__ppo_max_token_len_per_gpu=4096)) == []


def test_train_batch_at_least_mini_batch():
    values = with_(valid_verl(), data__train_batch_size=32)
    problems = check("verl", values)
    assert any("data.train_batch_size (32) must be >= " f"{AR}.actor.ppo_mini_batch_size (64)"
               in p for p in problems)


def test_deprecated_global_micro_batch():
    values = valid_verl()
    del values[AR]["actor"]["ppo_micro_batch_size_per_gpu"]
    problems = check("verl", with_(values, actor_rollout_ref__actor__ppo_micro_batch_size=6))
    assert any("must be divisible by" in p and "ppo_micro_batch_size (6)" in p for p in problems)
    assert any("must be >= the GPU count (8)" in p for p in problems)


def test_per_gpu_mini_batch_divisible_by_micro_batch():
    values = with_(valid_verl(), actor_rollout_ref__actor__ppo_micro_batch_size_per_gpu=16)
    p = one(check("verl", values))
    assert "64" in p and "x actor_rollout_ref.rollout.n (5) / 8 data-parallel ranks = 40" in p
    assert "ppo_micro_batch_size_per_gpu (16)" in p


def test_per_gpu_mini_batch_not_zero():
    values = with_(valid_verl(), actor_rollout_ref__actor__ppo_mini_batch_size=1,
                   actor_rollout_ref__rollout__n=1, data__train_batch_size=8,
                   trainer__nnodes=2)
    problems = check("verl", values)
    assert any("= 0 per GPU; verl needs at least 1" in p for p in problems)


def test_rollout_log_prob_micro_batch():
    values = with_(valid_verl(), actor_rollout_ref__rollout__log_prob_micro_batch_size=8)
    p = one(check("verl", values))
    assert f"{AR}.rollout.log_prob_micro_batch_size (8)" in p and "both set" in p
    values = valid_verl()
    del values[AR]["rollout"]["log_prob_micro_batch_size_per_gpu"]
    assert one(check("verl", values)).startswith(
        f"neither {AR}.rollout.log_prob_micro_batch_size_per_gpu")


def test_ref_micro_batch_only_when_the_ref_runs():
    values = valid_verl()
    del values[AR]["ref"]["log_prob_micro_batch_size_per_gpu"]
    assert f"{AR}.ref" in one(check("verl", values))
    assert check("verl", with_(values, actor_rollout_ref__actor__use_kl_loss=False)) == []


def test_dynamic_batch_token_budget_holds_a_whole_sequence():
    values = with_(valid_verl(), actor_rollout_ref__actor__use_dynamic_bsz=True,
                   actor_rollout_ref__actor__ppo_max_token_len_per_gpu=2048)
    problems = check("verl", values)
    # actor, rollout and ref log-prob budgets all follow the actor's by default
    assert len(problems) == 3
    assert all("(2048) must be >= the longest sequence" in p and "= 3072" in p
               for p in problems)
    fixed = with_(values, actor_rollout_ref__actor__ulysses_sequence_parallel_size=2,
                  actor_rollout_ref__model__use_remove_padding=True)
    assert check("verl", fixed) == []


def test_critic_checks_when_the_run_has_one():
    values = with_(valid_verl(), algorithm__adv_estimator="gae")
    p = one(check("verl", values))
    assert p.startswith("neither critic.ppo_micro_batch_size_per_gpu")
    values = with_(values, critic__ppo_micro_batch_size_per_gpu=16)
    p = one(check("verl", values))
    assert p.startswith("critic.ppo_mini_batch_size (64)") and "(16)" in p
    assert check("verl", with_(values, critic__enable=False)) == []
    assert check("verl", with_(values, critic__ppo_micro_batch_size_per_gpu=4)) == []


def test_sequence_parallel_needs_remove_padding():
    values = with_(valid_verl(), actor_rollout_ref__actor__ulysses_sequence_parallel_size=2)
    p = one(check("verl", values))
    assert "use_remove_padding=true" in p


def test_rollout_tensor_parallel_tiles_the_gpus():
    p = one(check("verl", with_(valid_verl(),
                                actor_rollout_ref__rollout__tensor_model_parallel_size=3)))
    assert "tensor_model_parallel_size (3)" in p


def test_chunked_prefill_budget():
    values = with_(valid_verl(), actor_rollout_ref__rollout__max_num_batched_tokens=2048)
    p = one(check("verl", values))
    assert "max_num_batched_tokens (2048)" in p and "max_model_len (3072)" in p
    no_chunks = with_(values, actor_rollout_ref__rollout__enable_chunked_prefill=False)
    assert check("verl", no_chunks) == []
    assert check("verl", with_(values, actor_rollout_ref__rollout__name="sglang")) == []


@pytest.mark.parametrize("bad", [0, 1.5, -0.1])
def test_gpu_memory_utilization_is_a_fraction(bad):
    values = with_(valid_verl(), actor_rollout_ref__rollout__gpu_memory_utilization=bad)
    p = one(check("verl", values))
    assert "(0, 1]" in p


def test_non_numbers_skip_the_rule_instead_of_failing():
    values = with_(valid_verl(), data__train_batch_size="${oc.env:BATCH}")
    assert check("verl", values) == []


def test_check_uses_defaults_for_missing_keys():
    problems = check("verl", {})
    assert any("actor.ppo_micro_batch_size_per_gpu" in p for p in problems)
    assert any(p.startswith("neither critic.") for p in problems)  # gae by default: a critic


# -- check: AReaL ----------------------------------------------------------------------------------

def valid_areal() -> dict:
    return {"train_dataset": {"max_length": 1024}, "gconfig": {"max_new_tokens": 1024},
            "actor": {"mb_spec": {"max_tokens_per_mb": 10240}},
            "ref": {"mb_spec": {"max_tokens_per_mb": 10240}},
            "rollout": {"max_concurrent_rollouts": 256}, "sglang": {"mem_fraction_static": 0.8}}


def test_areal_valid_config_passes():
    assert check("areal", valid_areal()) == []


def test_areal_token_budget_holds_prompt_and_generation():
    values = with_(valid_areal(), actor__mb_spec__max_tokens_per_mb=1500)
    p = one(check("areal", values))
    assert p == ("actor.mb_spec.max_tokens_per_mb (1500) must be >= train_dataset.max_length "
                 "(1024) + gconfig.max_new_tokens (1024) = 2048")
    values = with_(valid_areal(), gconfig__max_new_tokens=16384)
    assert len(check("areal", values)) == 2  # actor and ref


def test_areal_budget_unchecked_without_a_prompt_limit():
    values = valid_areal()
    del values["train_dataset"]["max_length"]
    assert check("areal", with_(values, actor__mb_spec__max_tokens_per_mb=100)) == []


def test_areal_ranges():
    values = with_(valid_areal(), sglang__mem_fraction_static=1.2,
                   rollout__max_concurrent_rollouts=0)
    problems = check("areal", values)
    assert any("rollout.max_concurrent_rollouts (0) must be at least 1" == p for p in problems)
    assert any(p.startswith("sglang.mem_fraction_static (1.2)") for p in problems)
