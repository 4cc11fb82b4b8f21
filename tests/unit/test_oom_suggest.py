"""Suggestions and the patch (rltui.diagnosis.oom.suggest), on the verl and AReaL fixture configs
loaded as a job would be (config file + the command line's overrides)."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.estimate import ModelShape
from rltui.diagnosis.oom.needs import need_for
from rltui.diagnosis.oom.suggest import ALLOC_ENV, HALF, Context, _set, patch, suggest
from rltui.diagnosis.oom.types import JobConfig, OomNumbers, OomPhase
from rltui.model import replace
from rltui.sources.jobconfig import load_job_config

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
GIB = 1 << 30
OOM_80G = OomNumbers(gpu=3, requested=int(13.91 * GIB), capacity=int(79.11 * GIB),
                     free=int(8.85 * GIB), allocated=int(60.49 * GIB),
                     reserved_unallocated=int(1.2 * GIB))


def cmdline(framework: str) -> list[str]:
    text = (FIXTURES / "configs" / framework / "cmdline.txt").read_text(encoding="utf-8")
    return shlex.split(text.replace("\\\n", " "))


@pytest.fixture(scope="module")
def verl(tmp_path_factory) -> JobConfig:
    root = tmp_path_factory.mktemp("verl")
    (root / "config").mkdir()
    shutil.copy(FIXTURES / "configs" / "verl" / "ppo_trainer_min.yaml", root / "config")
    cfg = load_job_config(cmdline("verl"), cwd=str(root))
    assert cfg.framework == "verl" and not cfg.problems
    return cfg


@pytest.fixture(scope="module")
def areal(tmp_path_factory) -> JobConfig:
    root = tmp_path_factory.mktemp("areal")
    (root / "examples" / "math").mkdir(parents=True)
    shutil.copy(FIXTURES / "configs" / "areal" / "gsm8k_grpo.yaml", root / "examples" / "math")
    cfg = load_job_config(cmdline("areal"), cwd=str(root))
    assert cfg.framework == "areal"
    return cfg


def qwen7b() -> ModelShape:
    data = json.loads((FIXTURES / "models" / "qwen2-7b" / "config.json").read_text())
    return ModelShape.from_hf_config(data)


def ctx(config: JobConfig, phase: str, role: str = "", numbers: OomNumbers = OOM_80G,
        model: bool = True, job_pids=()) -> Context:
    ph = OomPhase(phase=phase, confidence="high", reason="test", role=role)
    need = need_for(qwen7b(), config, ph, numbers) if model else None
    return Context(numbers=numbers, phase=ph, config=config, need=need,
                   job_pids=frozenset(job_pids))


def test_verl_log_prob_oom_halves_the_log_prob_micro_batch_first(verl):
    found, notes = suggest(ctx(verl, "log-prob", "actor"))
    first = found[0]
    assert first.key == "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
    assert (first.current, first.proposed, first.current_is_default) == (8, 4, False)
    # logits of one micro batch: 8 x 3072 tokens x 152,064 vocabulary x (4 + 2) bytes; half saved
    assert first.effect_bytes == 4 * 3072 * 152064 * 6
    assert "logits" in first.why and first.tradeoff


def test_verl_backward_oom_proposes_the_micro_batch_and_keeps_the_batch_valid(verl):
    found, _ = suggest(ctx(verl, "actor-backward", "actor"))
    keys = [s.key for s in found]
    assert keys[0] == "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"
    assert found[0].proposed == 4 and found[0].effect_bytes > 0
    # gradient checkpointing is already on in this job: not proposed again
    assert "actor_rollout_ref.model.enable_gradient_checkpointing" not in keys
    assert "actor_rollout_ref.actor.fsdp_config.optimizer_offload" in keys


def test_generation_oom_lowers_the_rollout_share_with_its_effect_from_the_gpu_size(verl):
    found, _ = suggest(ctx(verl, "generation", "rollout"))
    util = next(s for s in found if s.key.endswith("gpu_memory_utilization"))
    assert (util.current, util.proposed) == (0.6, 0.4)
    assert util.effect_bytes == int(0.2 * OOM_80G.capacity)


def test_a_halved_micro_batch_verl_would_reject_becomes_the_next_valid_one(verl):
    # ppo_mini_batch_size 48 x n 5 / 8 GPUs = 30 sequences per GPU: a micro batch of 15 is
    # valid, its half (7) does not divide 30, so 6 is proposed
    values = _set(verl.values, "actor_rollout_ref.actor.ppo_mini_batch_size", 48)
    tight = replace(verl, values=_set(values,
                                      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", 15))
    assert frameworks.check("verl", tight.values) == []
    found, _ = suggest(ctx(tight, "actor-backward", "actor"))
    micro = next(s for s in found if s.key.endswith("actor.ppo_micro_batch_size_per_gpu"))
    assert (micro.current, micro.proposed) == (15, 6)


def test_areal_token_budget_is_halved_but_never_below_one_whole_sequence(areal):
    found, _ = suggest(ctx(areal, "actor-backward", "actor", model=False))
    tokens = next(s for s in found if s.key == "actor.mb_spec.max_tokens_per_mb")
    prompt = frameworks.effective(areal, "train_dataset.max_length").value
    new = frameworks.effective(areal, "gconfig.max_new_tokens").value
    assert tokens.proposed >= prompt + new
    assert tokens.proposed < tokens.current


def test_fragmentation_comes_first_when_it_alone_explains_the_failure(verl):
    numbers = replace(OOM_80G, requested=2 * GIB, reserved_unallocated=int(6.77 * GIB))
    found, _ = suggest(ctx(verl, "actor-backward", numbers=numbers))
    assert found[0].key == ALLOC_ENV and found[0].proposed == "expandable_segments:True"
    assert found[0].effect_bytes == int(6.77 * GIB)


def test_memory_held_outside_the_job_is_named_with_pid_and_size(verl):
    numbers = replace(OOM_80G, others=((4100, 70 * GIB), (9999, 5 * GIB)))
    _, notes = suggest(ctx(verl, "generation", numbers=numbers, job_pids=[4100]))
    assert any("process 9999 holds 5.00 GiB" in n for n in notes)
    assert not any("process 4100" in n for n in notes)


def test_an_unknown_framework_gets_generic_advice_and_says_so():
    found, notes = suggest(ctx(JobConfig(), "actor-backward", model=False))
    assert found and all("." not in s.key for s in found)
    assert any("framework not recognised" in n for n in notes)
    assert patch("unknown", found) == ""


def test_the_verl_patch_is_hydra_overrides_and_the_areal_patch_yaml(verl, areal):
    found, _ = suggest(ctx(verl, "log-prob", "actor"))
    text = patch("verl", found)
    assert "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4" in text.splitlines()
    found, _ = suggest(ctx(areal, "actor-backward", "actor", model=False))
    text = patch("areal", found)
    assert "actor:" in text.splitlines() and "  mb_spec:" in text.splitlines()


PHASES = ["engine-start", "generation", "log-prob", "actor-forward", "actor-backward",
          "critic-update", "weight-sync", "unknown"]


@settings(max_examples=60, deadline=None)
@given(phase=st.sampled_from(PHASES), micro=st.sampled_from([1, 2, 4, 5, 8, 10, 20, 40]),
       logprob=st.sampled_from([1, 2, 4, 8, 16]), util=st.sampled_from([0.3, 0.5, 0.6, 0.9]))
def test_every_suggestion_applied_to_its_verl_config_passes_verl_s_checks(
        verl, phase, micro, logprob, util):
    values = _set(verl.values, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro)
    values = _set(values, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", logprob)
    values = _set(values, "actor_rollout_ref.rollout.gpu_memory_utilization", util)
    cfg = replace(verl, values=values)
    before = set(frameworks.check("verl", values))
    found, _ = suggest(ctx(cfg, phase, model=False))
    for s in found:
        if s.key.startswith("env:") or s.proposed == HALF:  # a direction, not a value
            continue
        after = _set(values, s.key, s.proposed)
        for k, v in s.also:
            after = _set(after, k, v)
        assert set(frameworks.check("verl", after)) <= before, (s.key, s.proposed)


@settings(max_examples=40, deadline=None)
@given(phase=st.sampled_from(PHASES), tokens=st.integers(1000, 100_000))
def test_every_suggestion_applied_to_its_areal_config_passes_areal_s_checks(areal, phase, tokens):
    values = _set(areal.values, "actor.mb_spec.max_tokens_per_mb", tokens)
    cfg = replace(areal, values=values)
    before = set(frameworks.check("areal", values))
    found, _ = suggest(ctx(cfg, phase, model=False))
    for s in found:
        if s.key.startswith("env:") or s.proposed == HALF:
            continue
        assert set(frameworks.check("areal", _set(values, s.key, s.proposed))) <= before


def test_each_suggestion_shows_the_phase_estimate_before_and_after(verl):
    found, _ = suggest(ctx(verl, "actor-backward", "actor"))
    priced = [s for s in found if s.need_before is not None]
    assert priced and all(s.need_after <= s.need_before for s in priced)
    fsdp2 = next(s for s in found if s.key == "actor_rollout_ref.actor.strategy")
    assert fsdp2.proposed == "fsdp2"
    assert ("actor_rollout_ref.actor.fsdp_config.offload_policy", True) in fsdp2.also
    assert fsdp2.need_after < fsdp2.need_before


def test_a_host_oom_gets_host_advice_not_gpu_knobs(verl):
    numbers = OomNumbers(kind="ray-oom", capacity=int(62.8 * GIB), free=int(1.8 * GIB))
    found, notes = suggest(ctx(verl, "generation", numbers=numbers, model=False))
    assert not any(s.key.startswith("actor_rollout_ref.") for s in found)
    assert any("RAY_memory_usage_threshold" in s.key for s in found)
    assert any("host memory" in n for n in notes)


def test_a_reference_model_oom_turns_the_reference_knob_first(verl):
    found, _ = suggest(ctx(verl, "log-prob", "ref"))
    assert found[0].key == "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"


def test_a_megatron_actor_gets_no_fsdp_keys(verl):
    mega = replace(verl, values=_set(verl.values, "actor_rollout_ref.actor.strategy", "megatron"))
    found, _ = suggest(ctx(mega, "actor-backward", "actor", model=False))
    assert not any("fsdp" in s.key for s in found)


def test_under_dynamic_batching_the_token_budget_is_the_knob(verl):
    dyn = replace(verl, values=_set(verl.values, "actor_rollout_ref.actor.use_dynamic_bsz", True))
    found, _ = suggest(ctx(dyn, "actor-backward", "actor", model=False))
    keys = [s.key for s in found]
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in keys
    budget = next(s for s in found if s.key == "actor_rollout_ref.actor.ppo_max_token_len_per_gpu")
    assert budget.proposed >= 1024 + 2048  # never below one prompt + response


def test_the_failing_process_listed_alone_is_not_called_another_process(verl):
    numbers = replace(OOM_80G, others=((42310, OOM_80G.capacity - OOM_80G.free),))
    _, notes = suggest(ctx(verl, "log-prob", numbers=numbers, job_pids=[1]))
    assert not any("42310" in n for n in notes)


def test_without_the_job_s_values_the_knob_is_named_with_a_direction_and_left_out_of_the_patch():
    cfg = JobConfig(framework="verl")  # recognised from the traceback, config not found
    found, _ = suggest(ctx(cfg, "log-prob", "actor", model=False))
    first = found[0]
    assert first.key == "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"
    assert (first.current, first.proposed) == (None, HALF)
    assert "log_prob_micro_batch_size_per_gpu" not in patch("verl", found)
