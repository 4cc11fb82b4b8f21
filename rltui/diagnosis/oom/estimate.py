"""Per-GPU memory of an RL training job, estimated from the model's HF ``config.json`` (pure).

``ModelShape.from_hf_config`` reads the shape, ``parameters`` counts the weights exactly for the
decoder families it knows, and ``estimate`` turns shape plus dtype, parallel sizes, batch and
sequence settings into bytes per GPU by component. The formulas, with the reasons behind each
assumption, are in docs/oom-estimate.md; every ``MemoryEstimate`` also carries its assumptions as
sentences, so a number is never shown without what it rests on.

Sizes are bytes (int). A component nobody could know (the rollout engine without a memory fraction
or a GPU capacity) is left out and said so in ``assumptions``, never set to a made-up zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rltui.units import pytorch_bytes

COMPONENTS = ("params", "grads", "optimizer", "activations", "logits", "rollout_engine")

# Which components are resident when a phase runs (``OomPhase.phase`` names). Grads and optimizer
# states are counted in every phase: unless offloaded they stay allocated between steps, so this
# is the conservative side. The rollout engine's share is not counted while training because the
# frameworks release the KV cache after generation (free_cache_engine, engine sleep modes).
PHASE_COMPONENTS: Mapping[str, tuple[str, ...]] = {
    "engine-start": ("params", "grads", "optimizer", "rollout_engine"),
    "generation": ("params", "grads", "optimizer", "rollout_engine"),
    "weight-sync": ("params", "grads", "optimizer", "rollout_engine"),
    "log-prob": ("params", "grads", "optimizer", "logits"),
    "actor-forward": ("params", "grads", "optimizer", "activations"),
    "actor-backward": ("params", "grads", "optimizer", "activations"),
    # the critic is assumed to have the actor's shape; its value head is tiny, so counting the
    # actor's output logits overstates it a little
    "critic-update": ("params", "grads", "optimizer", "activations"),
}

# Optimizer states per parameter, each the size of a master parameter.
OPTIMIZER_STATES: Mapping[str, int] = {"adam": 2, "adamw": 2, "sgd_momentum": 1, "sgd": 0}

DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4, "float": 4, "fp32": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "half": 2, "fp16": 2,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8": 1,
}


class UnknownModel(ValueError):
    """The config.json is not a model this estimate knows, or lacks fields it needs.

    ``missing`` names the absent fields (empty when the architecture itself is the problem)."""

    def __init__(self, message: str, missing: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = tuple(missing)


def dtype_bytes(name: str | None) -> int | None:
    """``"bfloat16"`` -> 2; None for a name not known (or no name)."""
    if not isinstance(name, str):
        return None
    return DTYPE_BYTES.get(name.strip().lower().removeprefix("torch."))


# -- the model's shape -----------------------------------------------------------------------------

# Traits of each known decoder family that change the parameter count. Read off the modelling code
# in transformers: Qwen2 has biases on q, k, v (not o); Llama and Qwen3 put biases on all four
# projections only when attention_bias is set; Qwen3 normalises q and k per head; GPT-2 has biases
# everywhere, LayerNorm (weight and bias), a two-matrix MLP and learned positions.
_FAMILIES: Mapping[str, Mapping[str, Any]] = {
    "llama": {"bias_key": "attention_bias", "mlp_bias_key": "mlp_bias"},
    "mistral": {},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"bias_key": "attention_bias", "qk_norm": True},
    "gpt2": {"qkv_bias": True, "o_bias": True, "mlp_bias": True, "gated_mlp": False,
             "layer_norm": True, "learned_positions": True, "tied_default": True},
}
# Multimodal models whose language model is one of the families above.
_TYPE_ALIASES = {"qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2",
                 "qwen2_vl_text": "qwen2", "qwen2_5_vl_text": "qwen2"}
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "GPT2LMHeadModel": "gpt2",
    "Qwen2VLForConditionalGeneration": "qwen2", "Qwen2_5_VLForConditionalGeneration": "qwen2",
}
# Field -> the names configs use for it (GPT-2 style configs write n_layer, n_embd, n_head, ...).
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "num_hidden_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head"),
    "num_key_value_heads": ("num_key_value_heads",),
    "vocab_size": ("vocab_size",),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_dim"),
    "max_position_embeddings": ("max_position_embeddings", "n_positions", "n_ctx"),
    "head_dim": ("head_dim",),
}


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the estimate needs of a decoder-only transformer (names as in HF config.json)."""

    model_type: str  # the family: llama | mistral | qwen2 | qwen3 | gpt2
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool = False
    head_dim: int = 0  # 0: hidden_size // num_attention_heads
    max_position_embeddings: int | None = None
    torch_dtype: str | None = None
    architecture: str = ""
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    gated_mlp: bool = True  # SwiGLU gate/up/down; False: GPT-2's up/down
    layer_norm: bool = False  # LayerNorm with bias; False: RMSNorm (weight only)
    qk_norm: bool = False
    learned_positions: bool = False  # a position table of max_position_embeddings rows
    notes: tuple[str, ...] = ()  # what the shape leaves out (a vision tower, ...)

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)

    @classmethod
    def from_hf_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        """Read a config.json (already parsed). Raises ``UnknownModel`` naming what is wrong."""
        if not isinstance(cfg, Mapping):
            raise UnknownModel(f"config.json is not a JSON object (got {type(cfg).__name__})")
        notes: list[str] = []
        text = cfg.get("text_config")
        if isinstance(text, Mapping):
            # A multimodal config: the language model is in text_config; fields it lacks (a dtype,
            # tying) may sit at the top level.
            view: Mapping[str, Any] = {**{k: v for k, v in cfg.items() if k != "text_config"},
                                       **text}
        else:
            view = cfg
        family, mtype, archs = _family(view, cfg)
        if isinstance(text, Mapping) or "vision_config" in cfg or mtype in _TYPE_ALIASES:
            notes.append("multimodal model: only the language model is counted, not the vision "
                         "encoder")
        traits = _FAMILIES[family]

        missing: list[str] = []
        invalid: list[str] = []
        need = ["num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size"]
        if traits.get("gated_mlp", True):
            need.append("intermediate_size")  # GPT-2 defaults it to 4 x hidden
        if traits.get("learned_positions"):
            need.append("max_position_embeddings")  # the position table is that long
        values: dict[str, int | None] = {}
        for name in _ALIASES:
            raw, present = _lookup(view, name)
            if not present or raw is None:
                if name in need:
                    missing.append(name)
                values[name] = None
            elif isinstance(raw, bool) or not isinstance(raw, int) or raw <= 0:
                invalid.append(f"{name}={raw!r}")
                values[name] = None
            else:
                values[name] = raw
        if missing or invalid:
            parts = []
            if missing:
                parts.append("lacks " + ", ".join(_named(m) for m in missing))
            if invalid:
                parts.append("has " + ", ".join(invalid) + " (a positive integer is needed)")
            raise UnknownModel(f"config.json ({mtype or archs}) " + " and ".join(parts),
                               missing=tuple(missing))

        hidden, heads = values["hidden_size"], values["num_attention_heads"]
        assert hidden is not None and heads is not None  # checked above
        kv = values["num_key_value_heads"] or heads
        head_dim = values["head_dim"] or 0
        if not head_dim and hidden % heads:
            raise UnknownModel(f"config.json ({mtype}): hidden_size {hidden} is not a multiple "
                               f"of num_attention_heads {heads} and no head_dim is given")
        if heads % kv:
            raise UnknownModel(f"config.json ({mtype}): num_attention_heads {heads} is not a "
                               f"multiple of num_key_value_heads {kv}")
        intermediate = values["intermediate_size"] or 4 * hidden  # GPT-2: n_inner null = 4h
        tied = view.get("tie_word_embeddings", traits.get("tied_default", False))
        bias_key, mlp_bias_key = traits.get("bias_key"), traits.get("mlp_bias_key")
        attn_bias = bool(bias_key and view.get(bias_key))
        dtype = view.get("torch_dtype", view.get("dtype"))
        return cls(
            model_type=family,
            num_hidden_layers=values["num_hidden_layers"] or 0,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            vocab_size=values["vocab_size"] or 0,
            intermediate_size=intermediate,
            tie_word_embeddings=bool(tied),
            head_dim=head_dim,
            max_position_embeddings=values["max_position_embeddings"],
            torch_dtype=dtype if isinstance(dtype, str) else None,
            architecture=archs,
            qkv_bias=bool(traits.get("qkv_bias")) or attn_bias,
            o_bias=bool(traits.get("o_bias")) or attn_bias,
            mlp_bias=bool(traits.get("mlp_bias")) or bool(mlp_bias_key and view.get(mlp_bias_key)),
            gated_mlp=bool(traits.get("gated_mlp", True)),
            layer_norm=bool(traits.get("layer_norm")),
            qk_norm=bool(traits.get("qk_norm")),
            learned_positions=bool(traits.get("learned_positions")),
            notes=tuple(notes),
        )


def _lookup(view: Mapping[str, Any], name: str) -> tuple[Any, bool]:
    for key in _ALIASES[name]:
        if key in view:
            return view[key], True
    return None, False


def _named(name: str) -> str:
    others = _ALIASES[name][1:]
    return f"{name} (or {', '.join(others)})" if others else name


def _family(view: Mapping[str, Any], top: Mapping[str, Any]) -> tuple[str, str, str]:
    """(family, the config's model_type, its first architecture) or UnknownModel."""
    mtype = view.get("model_type")
    mtype = mtype if isinstance(mtype, str) else ""
    archs_raw = view.get("architectures") or top.get("architectures") or ()
    archs = ", ".join(a for a in archs_raw if isinstance(a, str)) \
        if isinstance(archs_raw, (list, tuple)) else ""
    family = mtype if mtype in _FAMILIES else _TYPE_ALIASES.get(mtype)
    if family is None and isinstance(archs_raw, (list, tuple)):
        # a renamed model_type (a fine-tune's own) still loads with the stock class
        family = next((_ARCHITECTURES[a] for a in archs_raw
                       if isinstance(a, str) and a in _ARCHITECTURES), None)
    if family is None:
        if not mtype and not archs:
            raise UnknownModel("config.json names no model_type or architectures; the estimate "
                               "cannot tell which model this is")
        known = ", ".join(_FAMILIES)
        moe = any(k in view for k in ("num_experts", "num_local_experts", "n_routed_experts"))
        raise UnknownModel(
            f"unknown architecture: model_type {mtype or '(none)'!r}"
            + (f" ({archs})" if archs else "")
            + ("; mixture-of-experts models are not modelled" if moe else "")
            + f"; the estimate knows {known} and Qwen2-VL's language model")
    return family, mtype, archs.split(", ")[0] if archs else ""


# -- parameters ------------------------------------------------------------------------------------

def parameters(shape: ModelShape) -> int:
    """Exact parameter count of a decoder of the known families (HF modelling code).

    embeddings V*h (+ lm_head V*h unless tied) (+ learned positions P*h); per layer: q (h x a*d),
    k and v (h x kv*d each, GQA), o (a*d x h), biases where the family has them, MLP 3*h*i gated
    (2*h*i plain), two norms (h each, 2h for LayerNorm), q/k norms (d each) for Qwen3; final norm.
    """
    h, v, L = shape.hidden_size, shape.vocab_size, shape.num_hidden_layers
    q_out = shape.num_attention_heads * shape.head_dim
    kv_out = shape.num_key_value_heads * shape.head_dim
    i = shape.intermediate_size
    norm = 2 * h if shape.layer_norm else h

    attn = h * q_out + 2 * h * kv_out + q_out * h
    if shape.qkv_bias:
        attn += q_out + 2 * kv_out
    if shape.o_bias:
        attn += h
    if shape.gated_mlp:
        mlp = 3 * h * i + (2 * i + h if shape.mlp_bias else 0)
    else:
        mlp = 2 * h * i + (i + h if shape.mlp_bias else 0)
    layer = attn + mlp + 2 * norm + (2 * shape.head_dim if shape.qk_norm else 0)

    embeddings = v * h * (1 if shape.tie_word_embeddings else 2)
    if shape.learned_positions:
        embeddings += (shape.max_position_embeddings or 0) * h
    return embeddings + L * layer + norm


# -- the estimate ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MemoryEstimate:
    """Bytes per GPU by component (names in ``COMPONENTS``, in that order; the rollout engine is
    absent when its share could not be known). ``total`` sums every component as if all were
    resident at once: a conservative bound; ``phase_total`` counts only what a phase holds."""

    components: tuple[tuple[str, int], ...]
    total: int
    kv_cache_tokens: int | None
    assumptions: tuple[str, ...]
    parameters: int = 0  # the model's parameter count
    settings: tuple[tuple[str, Any], ...] = ()  # the inputs, after defaults were resolved

    def component(self, name: str) -> int | None:
        return dict(self.components).get(name)

    def phase_total(self, phase: str) -> int:
        """Bytes resident when ``phase`` runs; ``total`` for a phase not in PHASE_COMPONENTS."""
        names = PHASE_COMPONENTS.get(phase)
        if names is None:
            return self.total
        return sum(n for name, n in self.components if name in names)

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": self.parameters,
            "components": dict(self.components),
            "total": self.total,
            "phases": {phase: self.phase_total(phase) for phase in PHASE_COMPONENTS},
            "kv_cache_tokens": self.kv_cache_tokens,
            "settings": dict(self.settings),
            "assumptions": list(self.assumptions),
        }


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def layer_activations(shape: ModelShape, *, micro_batch: int, seq_len: int, dtype_bytes: int = 2,
                      flash_attention: bool = True) -> int:
    """One layer's saved activations (Korthikanti et al. 2022, "Reducing Activation Recomputation
    in Large Transformer Models", eq. 1): s*b*h*(34 + 5*a*s/h) bytes at 2-byte activations,
    scaled by dtype_bytes/2. FlashAttention never stores the s x s scores, which removes the
    5*a*s/h term (the paper's own figure under selective recomputation)."""
    s, b, h = seq_len, micro_batch, shape.hidden_size
    at_two_bytes = 34 * s * b * h
    if not flash_attention:
        at_two_bytes += 5 * shape.num_attention_heads * s * s * b
    return _ceil_div(at_two_bytes * dtype_bytes, 2)


def estimate(shape: ModelShape, *, dtype_bytes: int = 2, world_size: int = 1, fsdp: bool = True,
             offload_params: bool = False, offload_optimizer: bool = False, micro_batch: int = 1,
             seq_len: int | None = None, gradient_checkpointing: bool = False,
             log_prob_micro_batch: int | None = None, rollout_mem_fraction: float | None = None,
             gpu_capacity: int | None = None, kv_dtype_bytes: int = 2, optimizer: str = "adam",
             flash_attention: bool = True, master_bytes: int = 4,
             rollout_tp: int = 1) -> MemoryEstimate:
    """Bytes per GPU for the training side and the colocated rollout engine.

    With P parameters, N = world_size (FSDP), s = seq_len, b = micro_batch, h, a, L, V, kv, d
    from the shape, B = dtype_bytes (compute dtype), M = master_bytes:

    - params       P*M / N           mixed precision: fp32 master weights (M = 4), sharded
    - grads        P*M / N           grads in the master dtype (FSDP keeps them with the shard)
    - optimizer    k*P*M / N         k states: adam/adamw 2 (exp_avg, exp_avg_sq), sgd 0
    - activations  L*A + b*s*V*(4+B)           A = layer_activations(), without checkpointing
                   (L-1)*B*s*b*h + A + b*s*V*(4+B)  with full checkpointing (the other layers'
                   inputs, one layer recomputed); b*s*V*(4+B) is the training micro batch's
                   logits (B) and their fp32 log-softmax (4)
    - logits       b'*s*V*(4+B)      the log-prob pass, b' = log_prob_micro_batch (default b)
    - rollout_engine  f*C             the engine's share: rollout_mem_fraction x gpu_capacity

    KV-cache tokens = (f*C - P*B/tp) // (2*L*ceil(kv/tp)*d*kv_dtype_bytes), 0 when the weights do
    not fit; the engine's own activations and CUDA graphs are not subtracted. Without FSDP every
    GPU holds everything (N = 1). Offloaded params take grads with them (FSDP CPU offload).
    seq_len None: the model's max_position_embeddings (an upper bound).
    """
    for name, value in (("dtype_bytes", dtype_bytes), ("world_size", world_size),
                        ("micro_batch", micro_batch), ("kv_dtype_bytes", kv_dtype_bytes),
                        ("master_bytes", master_bytes), ("rollout_tp", rollout_tp)):
        _positive(name, value)
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZER_STATES)}, "
                         f"got {optimizer!r}")
    notes: list[str] = []
    if seq_len is None:
        if shape.max_position_embeddings is None:
            raise ValueError("seq_len is needed: the model's config gives no "
                             "max_position_embeddings to fall back on")
        seq_len = shape.max_position_embeddings
        notes.append(f"sequence length not given: the model's max_position_embeddings "
                     f"({seq_len}) is used, an upper bound")
    _positive("seq_len", seq_len)
    if log_prob_micro_batch is None:
        log_prob_micro_batch = micro_batch
        notes.append(f"log-prob micro batch not given: the training micro batch ({micro_batch})")
    _positive("log_prob_micro_batch", log_prob_micro_batch)

    p = parameters(shape)
    shards = world_size if fsdp else 1
    states = OPTIMIZER_STATES[optimizer]
    params = 0 if offload_params else _ceil_div(p * master_bytes, shards)
    grads = 0 if offload_params else _ceil_div(p * master_bytes, shards)
    optim = 0 if offload_optimizer else _ceil_div(states * p * master_bytes, shards)

    s, b, h, L, V = seq_len, micro_batch, shape.hidden_size, shape.num_hidden_layers, \
        shape.vocab_size
    per_token_logits = V * (4 + dtype_bytes)
    layer = layer_activations(shape, micro_batch=b, seq_len=s, dtype_bytes=dtype_bytes,
                              flash_attention=flash_attention)
    if gradient_checkpointing:
        body = (L - 1) * dtype_bytes * s * b * h + layer
    else:
        body = L * layer
    activations = body + b * s * per_token_logits
    logits = log_prob_micro_batch * s * per_token_logits

    components = [("params", params), ("grads", grads), ("optimizer", optim),
                  ("activations", activations), ("logits", logits)]
    rollout_notes, kv_tokens = _rollout(shape, p, dtype_bytes, kv_dtype_bytes, rollout_tp,
                                        rollout_mem_fraction, gpu_capacity, components)

    master = {4: "fp32", 2: "bf16"}.get(master_bytes, f"{master_bytes}-byte")
    assumptions = [
        f"{p:,} parameters ({shape.model_type})",
        (f"mixed precision: {master} master weights and grads ({master_bytes} B each per "
         f"parameter), {optimizer} with {states} {master} state(s) per parameter; compute dtype "
         f"{dtype_bytes} B"),
        (f"FSDP full shard over {world_size} GPUs: params, grads and optimizer states / "
         f"{world_size}" if fsdp else "no sharding: every GPU holds all params, grads and "
         "optimizer states"),
    ]
    if offload_params:
        assumptions.append("params offloaded to CPU (FSDP CPU offload): params and grads are "
                           "not on the GPU; each layer is copied in for compute")
    if offload_optimizer:
        assumptions.append("optimizer states offloaded to CPU: not on the GPU")
    ckpt = (f"full gradient checkpointing: the inputs of the other {L - 1} layers "
            f"({dtype_bytes}*s*b*h each) plus one recomputed layer"
            if gradient_checkpointing else "no gradient checkpointing: every layer keeps its "
            "activations")
    attn = ("flash attention (no s x s scores kept)" if flash_attention
            else "eager attention (s x s scores kept: the 5*a*s/h term)")
    assumptions += [
        (f"activations: Korthikanti et al. 2022, s*b*h*(34 + 5*a*s/h) bytes per layer at "
         f"2-byte activations; {attn}; {ckpt}; plus the micro batch's logits "
         f"(b*s*V*{dtype_bytes}) and their fp32 log-softmax (b*s*V*4); micro batch {b}, "
         f"sequence {s}"),
        (f"log-prob logits: {log_prob_micro_batch} x {s} x {V} x ({dtype_bytes} B logits + "
         "4 B fp32 log-softmax)"),
        *notes,
        *rollout_notes,
        ("not counted: FSDP all-gather buffers (about one layer in the compute dtype), the "
         "reference model and the critic, the CUDA context, allocator fragmentation"),
        *shape.notes,
    ]
    settings = (("dtype_bytes", dtype_bytes), ("world_size", world_size), ("fsdp", fsdp),
                ("offload_params", offload_params), ("offload_optimizer", offload_optimizer),
                ("micro_batch", micro_batch), ("seq_len", seq_len),
                ("gradient_checkpointing", gradient_checkpointing),
                ("log_prob_micro_batch", log_prob_micro_batch),
                ("rollout_mem_fraction", rollout_mem_fraction), ("gpu_capacity", gpu_capacity),
                ("kv_dtype_bytes", kv_dtype_bytes), ("optimizer", optimizer),
                ("flash_attention", flash_attention), ("master_bytes", master_bytes),
                ("rollout_tp", rollout_tp))
    return MemoryEstimate(components=tuple(components), total=sum(n for _, n in components),
                          kv_cache_tokens=kv_tokens, assumptions=tuple(assumptions),
                          parameters=p, settings=settings)


def kv_bytes_per_token(shape: ModelShape, *, kv_dtype_bytes: int = 2, rollout_tp: int = 1) -> int:
    """K and V of every layer for one token on one GPU. Tensor parallelism splits the KV heads;
    with more GPUs than KV heads each GPU keeps a replica of one head (vLLM)."""
    heads = _ceil_div(shape.num_key_value_heads, rollout_tp)
    return 2 * shape.num_hidden_layers * heads * shape.head_dim * kv_dtype_bytes


def _rollout(shape: ModelShape, p: int, dtype_bytes: int, kv_dtype_bytes: int, tp: int,
             fraction: float | None, capacity: int | None,
             components: list[tuple[str, int]]) -> tuple[list[str], int | None]:
    """Append the engine's share to ``components``; return its assumptions and KV tokens."""
    if fraction is None or capacity is None:
        lacking = " and ".join(n for n, v in (("memory fraction", fraction),
                                             ("GPU capacity", capacity)) if v is None)
        return [f"rollout engine not counted: its {lacking} is not known"], None
    if isinstance(fraction, bool) or not 0 < fraction <= 1:
        raise ValueError(f"rollout_mem_fraction must be in (0, 1], got {fraction!r}")
    _positive("gpu_capacity", capacity)
    share = round(fraction * capacity)
    components.append(("rollout_engine", share))
    weights = _ceil_div(p * dtype_bytes, tp)
    per_token = kv_bytes_per_token(shape, kv_dtype_bytes=kv_dtype_bytes, rollout_tp=tp)
    tokens = max(0, share - weights) // per_token
    notes = [f"rollout engine: {fraction} x {pytorch_bytes(capacity)} = {pytorch_bytes(share)}; "
             f"its weights take {pytorch_bytes(weights)} ({dtype_bytes} B per parameter"
             + (f", tensor parallel {tp}" if tp > 1 else "") + f"), the KV cache the rest at "
             f"{per_token:,} B per token: {tokens:,} tokens (an upper bound: the engine's "
             "activations and CUDA graphs also come out of its share)"]
    if share < weights:
        notes.append("the rollout engine's share does not even hold its weights: it cannot "
                     "start at this memory fraction")
    return notes, tokens


__all__ = ["COMPONENTS", "DTYPE_BYTES", "OPTIMIZER_STATES", "PHASE_COMPONENTS", "MemoryEstimate",
           "ModelShape", "UnknownModel", "dtype_bytes", "estimate", "kv_bytes_per_token",
           "layer_activations", "parameters"]
