"""From an OOM (numbers, phase) and the job's config to ranked config changes and a patch (pure).

The knowledge is the playbook's OOM table (verl) and AReaL's OOM guide: for each phase, the knobs
that shrink the allocation that failed, most direct first. Every proposal is checked against the
framework's own constraints (``frameworks.check``) with its companion changes applied, so no
suggestion yields a config the framework rejects; one that cannot be made valid is dropped with a
note. Memory effects come from the model-shape estimate when the model is known, else from the
error's own numbers, else they are left unknown (``None``), never guessed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.types import JobConfig, OomNumbers, OomPhase, Suggestion

GIB = 1 << 30
SEARCH_LIMIT = 64  # smaller values tried for a batch size the framework rejects
FRAGMENTED_SHARE = 0.1  # reserved-but-unallocated above this share of the GPU is fragmentation
ALLOC_ENV = "env:PYTORCH_CUDA_ALLOC_CONF"
EXPANDABLE = "expandable_segments:True"

# -- effects ---------------------------------------------------------------------------------------
# An effect function gets the config values before and after a change and returns the bytes saved
# on the failing GPU, or None when nothing says how much.
Effect = Callable[[Mapping[str, Any], Mapping[str, Any]], "int | None"]


@dataclass(frozen=True)
class Context:
    """What a rule may read: the error, the phase, the config, and the estimate hook."""

    numbers: OomNumbers
    phase: OomPhase
    config: JobConfig
    # (values after a change) -> bytes the estimate says the failing phase needs, or None
    need: Callable[[Mapping[str, Any]], "int | None"] | None = None
    job_pids: frozenset[int] = frozenset()  # processes of the job (others on the GPU are not)

    def get(self, key: str) -> tuple[Any, bool]:
        v = frameworks.effective(self.config, key)
        return v.value, v.default

    @property
    def capacity(self) -> int | None:
        return self.numbers.capacity


def _set(values: Mapping[str, Any], key: str, value: Any) -> dict:
    out = copy.deepcopy(dict(values))
    node = out
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value
    return out


def _halved(value: Any, floor: int = 1) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= floor:
        return None
    return max(floor, value // 2)


# -- the rules -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rule:
    """One knob: how to propose a value for it and what it costs."""

    key: str
    propose: Callable[[Any, Context], Any]  # current -> proposed (None: nothing to propose)
    why: str
    tradeoff: str
    also: Callable[[Any, Context], Sequence[tuple[str, Any]]] = lambda proposed, ctx: ()
    effect: Callable[[Any, Any, Context], "int | None"] | None = None  # (current, proposed, ctx)


def _fraction_down(cur: Any, ctx: Context) -> Any:
    if not isinstance(cur, (int, float)) or isinstance(cur, bool):
        return None
    new = round(max(0.3, float(cur) - 0.2), 2)
    return new if new < cur else None


def _fraction_effect(cur: Any, new: Any, ctx: Context) -> int | None:
    number = (int, float)
    if ctx.capacity is None or not isinstance(cur, number) or not isinstance(new, number):
        return None
    return int((float(cur) - float(new)) * ctx.capacity)


def _fit_free(cur: Any, ctx: Context) -> Any:
    """An engine that wants more than is free at start: ask for a bit less than what is free.
    Only the engine's own message says what was free before it took its share; a torch OOM
    inside the engine's start (CUDA graph capture) reports what is left after, so it steps down
    like any other."""
    n = ctx.numbers
    if n.kind != "engine-oom" or n.free is None or not n.capacity:
        return _fraction_down(cur, ctx)
    fits = round(max(0.1, n.free / n.capacity - 0.05), 2)
    if isinstance(cur, (int, float)) and fits >= cur:
        return None
    return fits


def _fsdp2(cur: Any, ctx: Context) -> Any:
    return "fsdp2" if cur == "fsdp" else None


def _with_offload_policy(new: Any, ctx: Context) -> Sequence[tuple[str, Any]]:
    return ((VERL_OFFLOAD_POLICY, True),)


def _true(cur: Any, ctx: Context) -> Any:
    return None if cur is True else True


def _halve(cur: Any, ctx: Context) -> Any:
    return _halved(cur)


def _dynamic_on(ctx: Context) -> bool:
    return ctx.get(VERL_DYN)[0] is True


def _micro_halve(cur: Any, ctx: Context) -> Any:
    """verl ignores the micro batch sizes under dynamic batching: the token budget rules."""
    return None if _dynamic_on(ctx) else _halved(cur)


def _tokens_halve(cur: Any, ctx: Context) -> Any:
    """Under dynamic batching, the token budget per GPU is the knob; never below one sequence."""
    if not _dynamic_on(ctx):
        return None
    new = _halved(cur)
    prompt, _ = ctx.get("data.max_prompt_length")
    response, _ = ctx.get("data.max_response_length")
    if new is not None and isinstance(prompt, int) and isinstance(response, int):
        new = max(new, prompt + response)
    return new if isinstance(cur, int) and new is not None and new < cur else None


def _dynamic(cur: Any, ctx: Context) -> Any:
    """Turn dynamic batching on only where its token budget is below what a micro batch holds
    now; else packing up to the budget would raise the peak."""
    if cur is True:
        return None
    micro, _ = ctx.get(VERL_LOGPROB_MB if ctx.phase.phase == "log-prob" else VERL_PPO_MB)
    budget, _ = ctx.get(f"{VERL_AR}.actor.ppo_max_token_len_per_gpu")
    prompt, _ = ctx.get("data.max_prompt_length")
    response, _ = ctx.get("data.max_response_length")
    if not all(isinstance(v, int) for v in (micro, budget, prompt, response)):
        return None
    return True if micro * (prompt + response) > budget else None


def _estimate_effect(cur: Any, new: Any, ctx: Context, key: str = "") -> int | None:
    if ctx.need is None:
        return None
    before = ctx.need(ctx.config.values)
    after = ctx.need(_set(ctx.config.values, key, new))
    if before is None or after is None:
        return None
    return max(0, before - after)


def _est(key: str) -> Callable[[Any, Any, Context], int | None]:
    return lambda cur, new, ctx: _estimate_effect(cur, new, ctx, key)


VERL_AR = "actor_rollout_ref"
VERL_ROLLOUT_UTIL = f"{VERL_AR}.rollout.gpu_memory_utilization"
VERL_LOGPROB_MB = f"{VERL_AR}.rollout.log_prob_micro_batch_size_per_gpu"
VERL_REF_LOGPROB_MB = f"{VERL_AR}.ref.log_prob_micro_batch_size_per_gpu"
VERL_PPO_MB = f"{VERL_AR}.actor.ppo_micro_batch_size_per_gpu"
VERL_CKPT = f"{VERL_AR}.model.enable_gradient_checkpointing"
VERL_STRATEGY = f"{VERL_AR}.actor.strategy"
VERL_OFFLOAD_PARAM = f"{VERL_AR}.actor.fsdp_config.param_offload"
VERL_OFFLOAD_OPT = f"{VERL_AR}.actor.fsdp_config.optimizer_offload"
VERL_DYN = f"{VERL_AR}.actor.use_dynamic_bsz"
VERL_OFFLOAD_POLICY = f"{VERL_AR}.actor.fsdp_config.offload_policy"
VERL_CRITIC_MB = "critic.ppo_micro_batch_size_per_gpu"
VERL_CRITIC_CKPT = "critic.model.enable_gradient_checkpointing"

FSDP2 = Rule(VERL_STRATEGY, _fsdp2,
             "FSDP2 with offload_policy keeps parameters, gradients and optimizer states in host "
             "memory and streams them per layer: the actor's resident share on the GPU drops to "
             "about one layer", "host-device traffic every step: slower update; needs a verl "
             "version with FSDP2", also=_with_offload_policy, effect=None)
LOGITS_WHY = ("log-prob computation materialises micro batch x sequence x vocabulary logits in "
              "fp32; halving the micro batch halves that peak")
MICRO_TRADEOFF = ("more, smaller forward passes: the log-prob phase gets slower; results are the "
                  "same")

VERL_RULES: dict[str, list[Rule]] = {
    "engine-start": [
        Rule(VERL_ROLLOUT_UTIL, _fit_free,
             "the inference engine asks for gpu_memory_utilization x the GPU at start, and less "
             "than that is free",
             "a smaller KV cache: fewer sequences decoded at once, slower rollout",
             effect=_fraction_effect),
    ],
    "generation": [
        Rule(VERL_ROLLOUT_UTIL, _fraction_down,
             "the rollout engine preallocates gpu_memory_utilization x the GPU for weights and KV "
             "cache; the rest of the step (log-prob, the actor's own copy) must fit beside it",
             "a smaller KV cache: fewer sequences decoded at once, slower rollout",
             effect=_fraction_effect),
        Rule(VERL_LOGPROB_MB, _micro_halve, LOGITS_WHY, MICRO_TRADEOFF,
             effect=_est(VERL_LOGPROB_MB)),
        Rule(VERL_CKPT, _true,
             "activations are recomputed in backward instead of kept: the actor's peak drops",
             "about 30 % more compute in the actor update", effect=_est(VERL_CKPT)),
        Rule(VERL_OFFLOAD_PARAM, _true,
             "FSDP keeps the actor's parameter shard in host memory between phases, leaving the "
             "GPU to the rollout engine",
             "host-device copies at every phase change: slower steps, more host memory",
             effect=_est(VERL_OFFLOAD_PARAM)),
        FSDP2,
    ],
    "log-prob": [
        Rule(VERL_LOGPROB_MB, _micro_halve, LOGITS_WHY, MICRO_TRADEOFF,
             effect=_est(VERL_LOGPROB_MB)),
        Rule(VERL_REF_LOGPROB_MB, _micro_halve, LOGITS_WHY + " (reference model)",
             MICRO_TRADEOFF, effect=_est(VERL_REF_LOGPROB_MB)),
        Rule(f"{VERL_AR}.rollout.log_prob_max_token_len_per_gpu", _tokens_halve,
             "under dynamic batching the token budget per micro batch sets the logits' size",
             MICRO_TRADEOFF, effect=None),
        Rule(VERL_DYN, _dynamic,
             "dynamic batch sizes pack micro batches by token count (ppo_max_token_len_per_gpu) "
             "instead of by sequences: no micro batch exceeds the token limit",
             "micro batch boundaries change; throughput usually improves",
             effect=None),
    ],
    "actor-forward": [
        Rule(VERL_PPO_MB, _micro_halve,
             "activations scale with the micro batch; verl accumulates gradients over micro "
             "batches, so ppo_mini_batch_size (the effective batch) is unchanged",
             "more, smaller passes: the actor update gets slower", effect=_est(VERL_PPO_MB)),
        Rule(f"{VERL_AR}.actor.ppo_max_token_len_per_gpu", _tokens_halve,
             "under dynamic batching the token budget per micro batch sets the activations",
             "more, smaller passes: the actor update gets slower", effect=None),
        Rule(VERL_CKPT, _true,
             "activations are recomputed in backward instead of kept",
             "about 30 % more compute in the actor update", effect=_est(VERL_CKPT)),
        Rule(VERL_OFFLOAD_OPT, _true,
             "the Adam states (8 bytes per parameter, sharded) move to host memory",
             "optimizer step on CPU transfers: slower update, more host memory",
             effect=_est(VERL_OFFLOAD_OPT)),
        Rule(VERL_OFFLOAD_PARAM, _true,
             "the parameter shard lives in host memory outside the forward and backward",
             "host-device copies every step: slower", effect=_est(VERL_OFFLOAD_PARAM)),
        FSDP2,
    ],
    "critic-update": [
        Rule(VERL_CRITIC_MB, _micro_halve,
             "the critic's activations scale with its micro batch; gradients are accumulated, "
             "so its mini batch is unchanged", "slower critic update", effect=_est(VERL_CRITIC_MB)),
        Rule(VERL_CRITIC_CKPT, _true, "activations recomputed in the critic's backward",
             "about 30 % more compute in the critic update", effect=None),
    ],
    "weight-sync": [
        Rule(VERL_ROLLOUT_UTIL, _fraction_down,
             "syncing weights into the rollout engine needs room for a full gathered copy beside "
             "the engine's preallocated share",
             "a smaller KV cache: slower rollout", effect=_fraction_effect),
        Rule(VERL_OFFLOAD_PARAM, _true,
             "the actor's shard leaves the GPU between phases", "slower phase changes",
             effect=_est(VERL_OFFLOAD_PARAM)),
    ],
}
VERL_RULES["actor-backward"] = VERL_RULES["actor-forward"]
VERL_RULES["unknown"] = [VERL_RULES["log-prob"][0], VERL_RULES["actor-forward"][0],
                         VERL_RULES["actor-forward"][1], VERL_RULES["generation"][0]]

AREAL_CONCURRENT = "rollout.max_concurrent_rollouts"
AREAL_MEM_FRACTION = "sglang.mem_fraction_static"
AREAL_MAX_TOKENS = "actor.mb_spec.max_tokens_per_mb"
AREAL_CKPT = "actor.gradient_checkpointing"
AREAL_MAX_PROMPT = "train_dataset.max_length"
AREAL_MAX_NEW = "gconfig.max_new_tokens"


def _tokens_down(cur: Any, ctx: Context) -> Any:
    """Halve the token budget per micro batch, but never below one whole sequence (AReaL packs
    whole sequences: a budget below prompt + max_new_tokens cannot hold the longest one)."""
    floor = _min_tokens(ctx)
    new = _halved(cur)
    if new is None:
        return None
    if floor is not None:
        new = max(new, floor)
    return new if isinstance(cur, int) and new < cur else None


def _min_tokens(ctx: Context) -> int | None:
    """The longest sequence AReaL can be asked to pack: prompt budget + generation budget."""
    prompt, _ = ctx.get(AREAL_MAX_PROMPT)
    new, _ = ctx.get(AREAL_MAX_NEW)
    if isinstance(prompt, int) and isinstance(new, int):
        return prompt + new
    return new if isinstance(new, int) else None  # at least one whole response


def _fraction_up(cur: Any, ctx: Context) -> Any:
    """Only SGLang's own "increase --mem-fraction-static" asks for more; a torch OOM while
    SGLang starts (CUDA graph capture) needs room outside that share, so it goes down."""
    if ctx.numbers.engine != "sglang":
        return _fraction_down(cur, ctx) if ctx.numbers.kind != "engine-oom" else None
    if not isinstance(cur, (int, float)) or isinstance(cur, bool):
        return None
    new = round(min(0.9, float(cur) + 0.1), 2)
    return new if new > cur else None


AREAL_RULES: dict[str, list[Rule]] = {
    "engine-start": [
        Rule("vllm.gpu_memory_utilization", _fit_free,
             "vLLM asks for gpu_memory_utilization x the GPU at start, and less than that is free",
             "a smaller KV cache: slower rollout", effect=_fraction_effect),
        Rule(AREAL_MEM_FRACTION, _fraction_up,
             "SGLang could not fit the weights and a minimal KV cache in mem_fraction_static of "
             "the GPU (its own message asks to increase it)",
             "less memory left on that GPU for anything else (fine on dedicated rollout GPUs)",
             effect=None),
    ],
    "generation": [
        Rule(AREAL_CONCURRENT, _halve,
             "fewer rollouts in flight hold fewer KV-cache blocks and responses",
             "lower rollout throughput", effect=None),
        Rule(AREAL_MEM_FRACTION, _fraction_down,
             "the SGLang server's static share leaves the rest of the GPU to other work",
             "a smaller KV cache: slower rollout", effect=_fraction_effect),
    ],
    "log-prob": [
        Rule(AREAL_MAX_TOKENS, _tokens_down,
             "micro batches are packed up to max_tokens_per_mb tokens; the logits of a micro batch "
             "scale with it", MICRO_TRADEOFF, effect=_est(AREAL_MAX_TOKENS)),
    ],
    "actor-forward": [
        Rule(AREAL_MAX_TOKENS, _tokens_down,
             "activations scale with the tokens in a micro batch; gradients are accumulated, so "
             "the batch is unchanged", "more, smaller passes: slower update",
             effect=_est(AREAL_MAX_TOKENS)),
        Rule(AREAL_CKPT, _true, "activations recomputed in backward",
             "about 30 % more compute in the update", effect=_est(AREAL_CKPT)),
    ],
}
AREAL_RULES["actor-backward"] = AREAL_RULES["actor-forward"]
AREAL_RULES["critic-update"] = AREAL_RULES["actor-forward"]
AREAL_RULES["weight-sync"] = AREAL_RULES["generation"]
AREAL_RULES["unknown"] = AREAL_RULES["actor-forward"] + AREAL_RULES["generation"]

RULES = {"verl": VERL_RULES, "areal": AREAL_RULES}


# -- assembling ------------------------------------------------------------------------------------

def _fragmentation(ctx: Context) -> Suggestion | None:
    n = ctx.numbers
    if n.reserved_unallocated is None or not n.capacity:
        return None
    big = n.reserved_unallocated >= FRAGMENTED_SHARE * n.capacity or (
        n.requested is not None and n.reserved_unallocated >= n.requested)
    if not big:
        return None
    return Suggestion(
        key=ALLOC_ENV, current=None, proposed=EXPANDABLE, current_is_default=True,
        why=(f"{n.reserved_unallocated / GIB:.2f} GiB is reserved by PyTorch but unallocated: the "
             "free memory is fragmented into blocks too small for the request; expandable "
             "segments let the allocator grow blocks instead"),
        tradeoff="none known for training; set it in the environment of every rank",
        effect_bytes=n.reserved_unallocated)


def _rule_suggestion(rule: Rule, ctx: Context) -> tuple[Suggestion | None, str | None]:
    cur, default = ctx.get(rule.key)
    new = rule.propose(cur, ctx)
    if new is None or new == cur:
        return None, None
    known = set(frameworks.check(ctx.config.framework, ctx.config.values))

    def broken(value: Any) -> list[str]:
        after = _set(ctx.config.values, rule.key, value)
        for k, v in rule.also(value, ctx):
            after = _set(after, k, v)
        return [p for p in frameworks.check(ctx.config.framework, after) if p not in known]

    problems = broken(new)
    if problems and isinstance(new, int) and not isinstance(new, bool):
        # A halved batch the framework rejects (it must divide the per-GPU batch): the next
        # smaller value it accepts still shrinks the peak. Bounded: a batch is small.
        valid = next((v for v in range(new - 1, max(0, new - SEARCH_LIMIT), -1)
                      if not broken(v)), None)
        if valid is not None:
            new, problems = valid, []
    if problems:
        return None, f"{rule.key} -> {new!r} left out: {problems[0]}"
    also = tuple(rule.also(new, ctx))
    effect = rule.effect(cur, new, ctx) if rule.effect is not None else None
    before = after = None
    if ctx.need is not None:
        changed = _set(ctx.config.values, rule.key, new)
        for k, v in also:
            changed = _set(changed, k, v)
        before, after = ctx.need(ctx.config.values), ctx.need(changed)
    return Suggestion(key=rule.key, current=cur, proposed=new, why=rule.why,
                      tradeoff=rule.tradeoff, effect_bytes=effect, current_is_default=default,
                      also=also, need_before=before, need_after=after), None


HALVING = (_halve, _micro_halve, _tokens_down)
HALF = "half of the job's value"


def generic(ctx: Context) -> list[Suggestion]:
    """A framework rltui does not know: the PyTorch-level advice, in words (no key to patch)."""
    out = [Suggestion(key="micro batch size", current=None, proposed="half",
                      why="activations and logits scale with the micro batch",
                      tradeoff="slower steps; keep the effective batch with gradient "
                               "accumulation"),
           Suggestion(key="gradient checkpointing", current=None, proposed="on",
                      why="activations are recomputed in backward instead of kept",
                      tradeoff="about 30 % more compute")]
    return out


HOST_KINDS = ("ray-oom", "host-oom")


def host(ctx: Context) -> tuple[list[Suggestion], list[str]]:
    """The node ran out of host memory (Ray's OOM killer, or a SIGKILL with no traceback): GPU
    knobs do not help, and offloading to the host would make it worse."""
    n = ctx.numbers
    found = [
        Suggestion(key="env:RAY_memory_usage_threshold", current=None, proposed="0.98",
                   current_is_default=True,
                   why="Ray kills workers when the node's memory use passes this share (0.95 "
                       "by default); a little more headroom helps only when the node is close",
                   tradeoff="the kernel's OOM killer may strike instead, less gracefully"),
        Suggestion(key="ray object store", current=None, proposed="smaller, with spilling",
                   current_is_default=True,
                   why="the object store reserves host memory up front (about 30 % of it); "
                       "`ray start --object-store-memory=...` with object spilling to disk "
                       "leaves more to the workers",
                   tradeoff="objects that do not fit spill to disk: slower transfers"),
        Suggestion(key="host offload", current=None, proposed="off",
                   current_is_default=True,
                   why="parameter, optimizer or activation offload keeps those tensors in host "
                       "memory; on a node short of host memory turn it off (and trade GPU "
                       "memory for it)",
                   tradeoff="more GPU memory used"),
    ]
    notes = []
    if n.kind == "host-oom":
        notes.append("a rank was killed by SIGKILL with no Python error: possibly the kernel's "
                     "OOM killer; check `dmesg -T | grep -i -E 'killed process|out of memory'`")
    if n.capacity:
        notes.append("the numbers are host memory (the node's RAM), not a GPU's")
    return found, notes


def _fits_strategy(rule: Rule, ctx: Context) -> bool:
    """FSDP keys mean nothing to a Megatron actor (verl ignores them)."""
    strategy, _ = ctx.get(VERL_STRATEGY)
    if ctx.config.framework == "verl" and str(strategy).startswith("megatron"):
        return "fsdp" not in rule.key and rule.key != VERL_STRATEGY
    return True


def _for_role(rules: Sequence[Rule], ctx: Context) -> list[Rule]:
    """The reference model's knobs first when the reference model failed."""
    if ctx.phase.role != "ref":
        return list(rules)
    if ctx.config.framework == "areal":
        return [replace(r, key="ref" + r.key[len("actor"):]) if r.key.startswith("actor.mb_spec")
                else r for r in rules]
    return sorted(rules, key=lambda r: ".ref." not in r.key)


def suggest(ctx: Context) -> tuple[list[Suggestion], list[str]]:
    """Ranked suggestions and notes (why some were left out, what was not recognised)."""
    if ctx.numbers.kind in HOST_KINDS:
        return host(ctx)
    notes: list[str] = []
    found: list[Suggestion] = []
    frag = _fragmentation(ctx)
    gpu = ctx.numbers.gpu if ctx.numbers.gpu is not None else "?"
    n = ctx.numbers
    itself = (len(n.others) == 1 and n.capacity is not None and n.free is not None
              and abs(n.others[0][1] - (n.capacity - n.free)) <= 0.02 * n.capacity)
    for pid, used in ([] if itself else n.others):
        if ctx.job_pids and pid not in ctx.job_pids:
            notes.append(f"process {pid} holds {used / GIB:.2f} GiB on GPU {gpu} and is not part "
                         "of this job (an orphaned inference engine, another user): stop it "
                         "first")
        elif not ctx.job_pids and len(ctx.numbers.others) > 1:
            notes.append(f"process {pid} holds {used / GIB:.2f} GiB on GPU {gpu}: if it is not "
                         "part of this job (an orphaned inference engine, another user), stop it "
                         "first")
    rules = RULES.get(ctx.config.framework)
    if rules is None:
        if ctx.config.framework == "unknown":
            notes.append("framework not recognised: generic PyTorch advice only (give the "
                         "config with --config to get exact keys)")
        else:
            notes.append(f"{ctx.config.framework}: no config rules yet, generic PyTorch advice "
                         "only")
        found = generic(ctx)
    else:
        chosen = _for_role(rules.get(ctx.phase.phase, rules["unknown"]), ctx)
        for rule in chosen:
            if not _fits_strategy(rule, ctx):
                continue
            s, note = _rule_suggestion(rule, ctx)
            if note:
                notes.append(note)
            if s is None and rule.propose in HALVING and ctx.get(rule.key)[0] is None:
                # The job's value is not known (its config was not read, or it relies on a
                # value verl derives): the direction still helps, without a number.
                s = Suggestion(key=rule.key, current=None, proposed=HALF, why=rule.why,
                               tradeoff=rule.tradeoff, current_is_default=True)
            if s is not None and all(s.key != f.key for f in found):
                found.append(s)
    # Fragmentation first when it alone explains the failure (the request would fit in what is
    # reserved but unused); else after the direct knob.
    if frag is not None:
        asked = ctx.numbers.requested
        explains = (asked is not None and frag.effect_bytes is not None
                    and frag.effect_bytes >= asked)
        found.insert(0 if explains else min(1, len(found)), frag)
    return found, notes


# -- the patch -------------------------------------------------------------------------------------

def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def patch(framework: str, suggestions: Sequence[Suggestion], take: int = 2) -> str:
    """The first ``take`` config suggestions (with their companions) and any environment
    change, ready to paste: Hydra overrides for verl, a YAML fragment for AReaL."""
    env = [s for s in suggestions if s.key.startswith("env:")]
    conf = [s for s in suggestions if not s.key.startswith("env:") and "." in s.key
            and s.proposed != HALF][:take]
    changes = [(s.key, s.proposed) for s in conf] + [kv for s in conf for kv in s.also]
    lines: list[str] = []
    for s in env:
        lines.append(f"export {s.key[4:]}={s.proposed}")
    if framework == "verl" and changes:
        lines.append("# append to the python3 -m verl.trainer.main_ppo command line:")
        lines.extend(f"{k}={_hydra_value(v)}" for k, v in changes)
    elif framework == "areal" and changes:
        lines.append("# in the experiment YAML:")
        lines.extend(_yaml_lines(changes))
    return "\n".join(lines) + ("\n" if lines else "")


def _yaml_lines(changes: Sequence[tuple[str, Any]]) -> list[str]:
    tree: dict = {}
    for key, value in changes:
        tree = _set(tree, key, value)
    out: list[str] = []

    def walk(node: Mapping, depth: int) -> None:
        for k, v in node.items():
            if isinstance(v, Mapping):
                out.append("  " * depth + f"{k}:")
                walk(v, depth + 1)
            else:
                out.append("  " * depth + f"{k}: {_hydra_value(v)}")

    walk(tree, 0)
    return out

