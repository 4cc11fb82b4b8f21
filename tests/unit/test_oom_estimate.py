"""The OOM memory estimate against hand-computed numbers for real model shapes.

fixtures/models/qwen2-0.5b and qwen2-7b hold the config.json of Qwen/Qwen2-0.5B and Qwen/Qwen2-7B
as published on the Hugging Face hub; their parameter totals (494,032,768 and 7,615,616,512) are
the numbers the checkpoints report. Every expected byte count below is written out with its
arithmetic, so a changed formula shows up as a changed comment, not a silently moved number.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltui.diagnosis.oom.estimate import (
    COMPONENTS,
    PHASE_COMPONENTS,
    ModelShape,
    UnknownModel,
    dtype_bytes,
    estimate,
    kv_bytes_per_token,
    parameters,
)
from rltui.diagnosis.oom.types import PHASES
from tests.importcheck import forbidden_loaded

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
GIB = 1 << 30


def _config(name: str) -> dict:
    return json.loads((MODELS / name / "config.json").read_text())


@pytest.fixture(scope="module")
def small() -> ModelShape:
    return ModelShape.from_hf_config(_config("qwen2-0.5b"))


@pytest.fixture(scope="module")
def big() -> ModelShape:
    return ModelShape.from_hf_config(_config("qwen2-7b"))


# -- the shape ------------------------------------------------------------------------------------

def test_reads_the_qwen2_fixtures(small, big):
    assert (small.model_type, small.num_hidden_layers, small.hidden_size) == ("qwen2", 24, 896)
    assert (small.num_attention_heads, small.num_key_value_heads, small.head_dim) == (14, 2, 64)
    assert small.tie_word_embeddings is True and small.qkv_bias and not small.o_bias
    assert (small.vocab_size, small.intermediate_size) == (151936, 4864)
    assert small.torch_dtype == "bfloat16" and small.architecture == "Qwen2ForCausalLM"
    assert small.max_position_embeddings == 131072
    assert (big.num_key_value_heads, big.head_dim, big.tie_word_embeddings) == (4, 128, False)


def test_parameters_qwen2_0_5b_exact(small):
    # embeddings (tied, counted once): 151936 * 896                         = 136,134,656
    # per layer, head_dim 64, kv width 2*64 = 128:
    #   q 896*896 + 896 bias = 803,712; k, v 896*128 + 128 = 114,816 each; o 896*896 = 802,816
    #   attention 803,712 + 2*114,816 + 802,816                              =   1,836,160
    #   MLP 3 * 896 * 4864                                                   =  13,074,432
    #   2 RMSNorms 2 * 896                                                   =       1,792
    #   layer                                                                =  14,912,384
    # 24 layers 357,897,216 + final norm 896 + embeddings 136,134,656        = 494,032,768
    assert parameters(small) == 494_032_768


def test_parameters_qwen2_7b_exact(big):
    # embeddings and a separate lm_head (untied): 2 * 152064 * 3584          = 1,089,994,752
    # per layer, head_dim 128, kv width 4*128 = 512:
    #   q 3584*3584 + 3584 = 12,848,640; k, v 3584*512 + 512 = 1,835,520 each;
    #   o 3584*3584 = 12,845,056; attention                                  =    29,364,736
    #   MLP 3 * 3584 * 18944                                                 =   203,685,888
    #   2 RMSNorms 2 * 3584                                                  =         7,168
    #   layer                                                                =   233,057,792
    # 28 layers 6,525,618,176 + final norm 3584 + 1,089,994,752              = 7,615,616,512
    assert parameters(big) == 7_615_616_512


def test_parameters_other_families_known_totals():
    gpt2 = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 12,
            "n_embd": 768, "n_head": 12, "n_positions": 1024, "n_ctx": 1024, "n_inner": None,
            "vocab_size": 50257}
    # GPT-2 small, the published 124,439,808: wte 50257*768 + wpe 1024*768 + 12 layers of
    # (2 LayerNorms 2*1536, c_attn 768*2304+2304, c_proj 768*768+768, c_fc 768*3072+3072,
    # mlp c_proj 3072*768+768) = 12 * 7,087,872, + ln_f 1536
    assert parameters(ModelShape.from_hf_config(gpt2)) == 124_439_808
    llama2 = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
              "intermediate_size": 11008, "tie_word_embeddings": False}
    # Llama-2-7B, the published 6,738,415,616: 2*32000*4096 + 32 * (4*4096^2 + 3*4096*11008
    # + 2*4096) + 4096
    assert parameters(ModelShape.from_hf_config(llama2)) == 6_738_415_616
    qwen3 = {"model_type": "qwen3", "num_hidden_layers": 28, "hidden_size": 1024,
             "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
             "vocab_size": 151936, "intermediate_size": 3072, "tie_word_embeddings": True}
    # Qwen3-0.6B shape: head_dim 128 is given (16*128 = 2048 != 1024); per layer q 1024*2048,
    # k and v 1024*1024, o 2048*1024 (no biases) = 6,291,456; MLP 3*1024*3072 = 9,437,184;
    # norms 2*1024 + q/k norms 2*128 = 2,304; 28 * 15,730,944 + 1024 + 151936*1024
    assert parameters(ModelShape.from_hf_config(qwen3)) == 596_049_920


def test_multimodal_text_config_is_read_and_the_vision_tower_named(small):
    text = _config("qwen2-0.5b")
    cfg = {"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"],
           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152},
           "torch_dtype": "bfloat16", "text_config": {k: v for k, v in text.items()
                                                     if k != "torch_dtype"}}
    shape = ModelShape.from_hf_config(cfg)
    assert parameters(shape) == parameters(small)
    assert shape.torch_dtype == "bfloat16"  # from the top level
    assert any("vision encoder" in n for n in shape.notes)
    assert any("vision encoder" in a for a in estimate(shape, seq_len=8).assumptions)


def test_architecture_from_architectures_when_model_type_is_absent(small):
    cfg = {k: v for k, v in _config("qwen2-0.5b").items() if k != "model_type"}
    assert parameters(ModelShape.from_hf_config(cfg)) == parameters(small)
    # a fine-tune's own model_type still loads with the stock class
    renamed = dict(_config("qwen2-0.5b"), model_type="my_qwen")
    assert ModelShape.from_hf_config(renamed).model_type == "qwen2"


def test_unknown_architecture_raises_with_the_type_named():
    cfg = dict(_config("qwen2-7b"), model_type="mixtral", architectures=["MixtralForCausalLM"],
               num_local_experts=8)
    with pytest.raises(UnknownModel, match="unknown architecture: model_type 'mixtral'") as e:
        ModelShape.from_hf_config(cfg)
    assert "mixture-of-experts" in str(e.value) and "qwen2" in str(e.value)
    assert isinstance(e.value, ValueError) and e.value.missing == ()
    with pytest.raises(UnknownModel, match="no model_type or architectures"):
        ModelShape.from_hf_config({"hidden_size": 8})


def test_missing_fields_raise_with_every_name():
    cfg = {k: v for k, v in _config("qwen2-7b").items()
           if k not in ("hidden_size", "intermediate_size")}
    with pytest.raises(UnknownModel) as e:
        ModelShape.from_hf_config(cfg)
    assert e.value.missing == ("hidden_size", "intermediate_size")
    assert "hidden_size (or n_embd, d_model)" in str(e.value)
    assert "intermediate_size (or n_inner, ffn_dim)" in str(e.value)


@pytest.mark.parametrize(("change", "words"), [
    ({"num_hidden_layers": 0}, "num_hidden_layers=0"),
    ({"hidden_size": "3584"}, "hidden_size='3584'"),
    ({"vocab_size": True}, "vocab_size=True"),
    ({"num_key_value_heads": 5}, "not a multiple of num_key_value_heads 5"),
    ({"hidden_size": 3585}, "not a multiple of num_attention_heads"),
])
def test_bad_values_raise_with_the_field(change, words):
    with pytest.raises(UnknownModel, match=words.replace("(", r"\(")):
        ModelShape.from_hf_config(dict(_config("qwen2-7b"), **change))


def test_a_config_that_is_not_an_object():
    with pytest.raises(UnknownModel, match="not a JSON object"):
        ModelShape.from_hf_config([1, 2])  # type: ignore[arg-type]


def test_dtype_bytes():
    assert (dtype_bytes("bfloat16"), dtype_bytes("torch.float32"), dtype_bytes("int4")) \
        == (2, 4, None)


# -- the estimate ---------------------------------------------------------------------------------

def test_training_state_qwen2_7b_sharded_over_8(big):
    est = estimate(big, world_size=8, seq_len=1024)
    # fp32 master weights: 7,615,616,512 * 4 B / 8 GPUs = 3,807,808,256; fp32 grads the same;
    # Adam exp_avg + exp_avg_sq: 2 * 7,615,616,512 * 4 / 8 = 7,615,616,512
    assert est.component("params") == 3_807_808_256
    assert est.component("grads") == 3_807_808_256
    assert est.component("optimizer") == 7_615_616_512
    assert est.parameters == 7_615_616_512


def test_sharding_divides_by_world_size_and_no_fsdp_does_not(small):
    one = estimate(small, seq_len=1024)
    # 494,032,768 * 4 B = 1,976,131,072 on one GPU; optimizer 2 * that = 3,952,262,144
    assert (one.component("params"), one.component("optimizer")) == (1_976_131_072,
                                                                     3_952_262_144)
    for n in (2, 4, 8):
        sharded = estimate(small, seq_len=1024, world_size=n)
        for name in ("params", "grads", "optimizer"):
            assert sharded.component(name) * n == one.component(name)
        # activations and logits are per micro batch: sharding the weights does not touch them
        assert sharded.component("activations") == one.component("activations")
    ddp = estimate(small, seq_len=1024, world_size=8, fsdp=False)
    assert ddp.component("params") == one.component("params")


def test_offload_takes_state_off_the_gpu(small):
    est = estimate(small, seq_len=1024, offload_params=True, offload_optimizer=True)
    assert (est.component("params"), est.component("grads"), est.component("optimizer")) \
        == (0, 0, 0)
    assert any("offloaded" in a for a in est.assumptions)


def test_log_prob_logits_qwen2_0_5b(small):
    est = estimate(small, micro_batch=1, log_prob_micro_batch=4, seq_len=4096)
    # fp32 log-softmax: 4 * 4096 * 151936 * 4 B = 9,957,277,696
    # bf16 logits:      4 * 4096 * 151936 * 2 B = 4,978,638,848
    # together                                  = 14,935,916,544 (13.91 GiB)
    assert est.component("logits") == 14_935_916_544
    # not given: the log-prob micro batch is the training one
    assert estimate(small, micro_batch=4, seq_len=4096).component("logits") == 14_935_916_544


def test_activations_qwen2_0_5b(small):
    def act(**kw):
        return estimate(small, micro_batch=1, seq_len=1024, **kw).component("activations")
    # one layer, flash attention: 34 * s * b * h = 34 * 1024 * 1 * 896 = 31,195,136
    # output logits of the micro batch: 1 * 1024 * 151936 * (2 + 4)    =    933,494,784
    # no checkpointing: 24 * 31,195,136 + 933,494,784 = 748,683,264 + 933,494,784
    assert act() == 1_682_178_048
    # full checkpointing: the other 23 layers' inputs 23 * 2 * 1024 * 896 = 42,205,184,
    # plus one recomputed layer 31,195,136, plus the logits 933,494,784
    assert act(gradient_checkpointing=True) == 1_006_895_104
    # eager attention keeps the scores: + 5 * a * s^2 * b = 5 * 14 * 1024^2 = 73,400,320 per
    # layer; 24 * (31,195,136 + 73,400,320) + 933,494,784
    assert act(flash_attention=False) == 3_443_785_728


@pytest.mark.parametrize("mb", [1, 2, 8])
@pytest.mark.parametrize("flash", [True, False])
def test_checkpointing_reduces_activations(big, mb, flash):
    kw = {"micro_batch": mb, "seq_len": 2048, "flash_attention": flash}
    on = estimate(big, gradient_checkpointing=True, **kw).component("activations")
    off = estimate(big, gradient_checkpointing=False, **kw).component("activations")
    assert on < off


def test_kv_cache_tokens_qwen2_7b_at_half_of_80_gib(big):
    est = estimate(big, seq_len=4096, rollout_mem_fraction=0.5, gpu_capacity=80 * GIB)
    # share: 0.5 * 80 GiB = 42,949,672,960; bf16 weights 7,615,616,512 * 2 = 15,231,233,024
    # left for the cache 27,718,439,936; per token K and V: 2 * 28 layers * 4 kv heads * 128
    # * 2 B = 57,344; 27,718,439,936 // 57,344 = 483,371 tokens
    assert est.component("rollout_engine") == 42_949_672_960
    assert kv_bytes_per_token(big) == 57_344
    assert est.kv_cache_tokens == 483_371
    # tensor parallel 2: half the weights per GPU (7,615,616,512) and half the KV heads
    # (28,672 B per token): (42,949,672,960 - 7,615,616,512) // 28,672 = 1,232,354
    tp2 = estimate(big, seq_len=4096, rollout_mem_fraction=0.5, gpu_capacity=80 * GIB,
                   rollout_tp=2)
    assert tp2.kv_cache_tokens == 1_232_354


def test_rollout_share_too_small_for_the_weights(big):
    est = estimate(big, seq_len=4096, rollout_mem_fraction=0.1, gpu_capacity=80 * GIB)
    # 8 GiB < 14.19 GiB of bf16 weights
    assert est.kv_cache_tokens == 0
    assert any("cannot start" in a for a in est.assumptions)


def test_rollout_unknown_is_left_out_not_zero(small):
    est = estimate(small, seq_len=1024, rollout_mem_fraction=0.9)
    assert est.component("rollout_engine") is None and est.kv_cache_tokens is None
    assert any("GPU capacity is not known" in a for a in est.assumptions)
    assert [name for name, _ in est.components] == list(COMPONENTS[:-1])


def test_total_phases_and_json(small):
    est = estimate(small, micro_batch=2, seq_len=2048, rollout_mem_fraction=0.6,
                   gpu_capacity=80 * GIB)
    sizes = dict(est.components)
    assert list(sizes) == list(COMPONENTS)
    assert est.total == sum(sizes.values())
    assert est.phase_total("log-prob") == sizes["params"] + sizes["grads"] \
        + sizes["optimizer"] + sizes["logits"]
    assert est.phase_total("generation") == sizes["params"] + sizes["grads"] \
        + sizes["optimizer"] + sizes["rollout_engine"]
    assert est.phase_total("unknown") == est.total
    assert set(PHASE_COMPONENTS) <= set(PHASES)
    doc = json.loads(json.dumps(est.to_json()))
    assert doc["components"] == sizes and doc["total"] == est.total
    assert doc["settings"]["log_prob_micro_batch"] == 2 and doc["parameters"] == 494_032_768
    assert doc["phases"]["actor-backward"] == est.phase_total("actor-backward")


def test_seq_len_defaults_to_the_context_and_says_so(small):
    est = estimate(small)
    assert dict(est.settings)["seq_len"] == 131072
    assert any("max_position_embeddings (131072)" in a for a in est.assumptions)


@pytest.mark.parametrize("kw", [
    {"micro_batch": 0}, {"world_size": 0}, {"seq_len": -1}, {"optimizer": "lion"},
    {"rollout_mem_fraction": 1.5, "gpu_capacity": GIB},
    {"rollout_mem_fraction": 0.5, "gpu_capacity": 0},
])
def test_bad_settings_raise(small, kw):
    with pytest.raises(ValueError):
        estimate(small, **{"seq_len": 16, **kw})


@settings(max_examples=150, deadline=None)
@given(mb=st.integers(1, 64), mb_more=st.integers(0, 64), seq=st.integers(1, 32768),
       seq_more=st.integers(0, 32768), world=st.sampled_from([1, 2, 8, 64]),
       ckpt=st.booleans(), flash=st.booleans(), lp=st.one_of(st.none(), st.integers(1, 16)),
       model=st.sampled_from(["qwen2-0.5b", "qwen2-7b"]),
       fraction=st.one_of(st.none(), st.floats(0.05, 1.0)))
def test_components_non_negative_and_monotone(mb, mb_more, seq, seq_more, world, ckpt, flash,
                                              lp, model, fraction):
    shape = ModelShape.from_hf_config(_config(model))
    kw = {"world_size": world, "gradient_checkpointing": ckpt, "flash_attention": flash,
          "log_prob_micro_batch": lp, "rollout_mem_fraction": fraction,
          "gpu_capacity": 80 * GIB}
    base = estimate(shape, micro_batch=mb, seq_len=seq, **kw)
    for bigger in (estimate(shape, micro_batch=mb + mb_more, seq_len=seq, **kw),
                   estimate(shape, micro_batch=mb, seq_len=seq + seq_more, **kw)):
        for (name, n), (other, m) in zip(base.components, bigger.components):
            assert name == other and 0 <= n <= m, name
        assert base.total <= bigger.total
    assert base.kv_cache_tokens is None or base.kv_cache_tokens >= 0


def test_estimate_imports_no_torch_ui_or_io():
    assert forbidden_loaded(["rltui.diagnosis.oom.estimate"],
                            ["torch", "textual", "rich", "pynvml", "psutil", "subprocess"]) == []
