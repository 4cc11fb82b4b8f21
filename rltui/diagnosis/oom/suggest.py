"""From an OOM (numbers, phase) and the job's config to ranked config changes and a patch (pure).

The knowledge is the framework's (``OomFacts.knobs`` in ``rltui.frameworks``: the playbook's OOM
tables and OOM guides): for each phase, the knobs that shrink the allocation that
failed, most direct first; this module turns a knob's named action into a proposed value. Every proposal is checked against the
framework's own constraints (``frameworks.check``) with its companion changes applied, so no
suggestion yields a config the framework rejects; one that cannot be made valid is dropped with a
note. Memory effects come from the model-shape estimate when the model is known, else from the
error's own numbers, else they are left unknown (``None``), never guessed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rltui import units
from rltui.diagnosis.oom import frameworks
from rltui.diagnosis.oom.types import JobConfig, OomNumbers, OomPhase, Suggestion
from rltui.frameworks import Knob, OomFacts, by_name
from rltui.model import replace

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
    need: Callable[[Mapping[str, Any]], int | None] | None = None
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


# -- proposals -------------------------------------------------------------------------------------

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


def _replace(cur: Any, ctx: Context, old: Any, new: Any) -> Any:
    return new if cur == old else None


def _true(cur: Any, ctx: Context) -> Any:
    return None if cur is True else True


def _halve(cur: Any, ctx: Context) -> Any:
    return _halved(cur)


def _oom(ctx: Context) -> OomFacts | None:
    fw = by_name(ctx.config.framework)
    return fw.oom if fw is not None else None


def _dynamic_on(ctx: Context) -> bool:
    facts = _oom(ctx)
    return bool(facts and facts.dynamic_key) and ctx.get(facts.dynamic_key)[0] is True


def _micro_halve(cur: Any, ctx: Context) -> Any:
    """Under dynamic batching micro batch sizes are ignored: the token budget rules."""
    return None if _dynamic_on(ctx) else _halved(cur)


def _min_tokens(ctx: Context) -> int | None:
    """The longest sequence the framework can be asked to pack: prompt + response budgets (at
    least one whole response when the prompt budget is unknown)."""
    facts = _oom(ctx)
    if facts is None or facts.seq_keys is None:
        return None
    prompt, _ = ctx.get(facts.seq_keys[0])
    new, _ = ctx.get(facts.seq_keys[1])
    if isinstance(prompt, int) and isinstance(new, int):
        return prompt + new
    return new if isinstance(new, int) else None


def _tokens_down(cur: Any, ctx: Context) -> Any:
    """Halve the token budget per micro batch, never below one whole sequence (packing places
    whole sequences). Where the budget only counts under dynamic batching, only then."""
    facts = _oom(ctx)
    if facts is not None and facts.dynamic_key and not _dynamic_on(ctx):
        return None
    new = _halved(cur)
    if new is None:
        return None
    floor = _min_tokens(ctx)
    if floor is not None:
        new = max(new, floor)
    return new if isinstance(cur, int) and new < cur else None


def _dynamic(cur: Any, ctx: Context, logprob_micro: str, micro: str, budget_key: str) -> Any:
    """Turn dynamic batching on only where its token budget is below what a micro batch holds
    now; else packing up to the budget would raise the peak."""
    if cur is True:
        return None
    size, _ = ctx.get(logprob_micro if ctx.phase.phase == "log-prob" else micro)
    budget, _ = ctx.get(budget_key)
    seq = _min_tokens(ctx)
    if not all(isinstance(v, int) for v in (size, budget, seq)):
        return None
    return True if size * seq > budget else None


def _fraction_up(cur: Any, ctx: Context, engine: str) -> Any:
    """Only the engine's own "increase --mem-fraction-static" asks for more; a torch OOM while
    it starts (CUDA graph capture) needs room outside that share, so it goes down."""
    if ctx.numbers.engine != engine:
        return _fraction_down(cur, ctx) if ctx.numbers.kind != "engine-oom" else None
    if not isinstance(cur, (int, float)) or isinstance(cur, bool):
        return None
    new = round(min(0.9, float(cur) + 0.1), 2)
    return new if new > cur else None


def _estimate_effect(cur: Any, new: Any, ctx: Context, key: str = "") -> int | None:
    if ctx.need is None:
        return None
    before = ctx.need(ctx.config.values)
    after = ctx.need(_set(ctx.config.values, key, new))
    if before is None or after is None:
        return None
    return max(0, before - after)


# A knob's action name (rltui.frameworks Knob.action) -> (current, ctx, *args) -> proposal.
ACTIONS: dict[str, Callable[..., Any]] = {
    "halve": _halve,
    "micro_halve": _micro_halve,
    "tokens_down": _tokens_down,
    "fraction_down": _fraction_down,
    "fraction_up": _fraction_up,
    "fit_free": _fit_free,
    "true": _true,
    "replace": _replace,
    "dynamic_on": _dynamic,
}
HALVING = ("halve", "micro_halve", "tokens_down")


@dataclass(frozen=True)
class Rule:
    """One knob made callable: how to propose a value for it and what it costs."""

    key: str
    propose: Callable[[Any, Context], Any]  # current -> proposed (None: nothing to propose)
    why: str
    tradeoff: str
    also: Callable[[Any, Context], Sequence[tuple[str, Any]]] = lambda proposed, ctx: ()
    effect: Callable[[Any, Any, Context], int | None] | None = None  # (current, proposed, ctx)
    halving: bool = False


def rule_of(knob: Knob) -> Rule:
    act = ACTIONS[knob.action]
    args = knob.args
    effect = None
    if knob.effect == "fraction":
        effect = _fraction_effect
    elif knob.effect == "estimate":
        effect = (lambda key: lambda cur, new, ctx: _estimate_effect(cur, new, ctx, key))(knob.key)
    also = knob.also
    return Rule(knob.key, lambda cur, ctx: act(cur, ctx, *args), knob.why, knob.tradeoff,
                also=lambda proposed, ctx: also, effect=effect,
                halving=knob.action in HALVING)


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
        why=(f"{units.gib(n.reserved_unallocated)} is reserved by PyTorch but unallocated: the "
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
    """Keys of one strategy mean nothing under another (FSDP keys mean nothing to a Megatron
    actor): the framework's ``exclusive`` says which."""
    facts = _oom(ctx)
    if facts is None or facts.exclusive is None:
        return True
    key, prefix, part = facts.exclusive
    strategy, _ = ctx.get(key)
    if str(strategy).startswith(prefix):
        return part not in rule.key and rule.key != key
    return True


def _for_role(rules: Sequence[Rule], ctx: Context) -> list[Rule]:
    """The reference model's knobs first when the reference model failed: the framework's
    renames (AReaL's ``actor.mb_spec`` -> ``ref.mb_spec``), then its ``.ref.`` keys first."""
    if ctx.phase.role != "ref":
        return list(rules)
    facts = _oom(ctx)
    renamed = []
    for r in rules:
        for old, new in (facts.ref_renames if facts else ()):
            if r.key.startswith(old):
                r = replace(r, key=new + r.key[len(old):])
                break
        renamed.append(r)
    return sorted(renamed, key=lambda r: ".ref." not in r.key)


def _rules(framework: str) -> dict[str, list[Rule]] | None:
    fw = by_name(framework)
    if fw is None or fw.oom is None or not fw.oom.knobs:
        return None
    return {phase: [rule_of(k) for k in knobs] for phase, knobs in fw.oom.knobs.items()}


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
            notes.append(f"process {pid} holds {units.gib(used)} on GPU {gpu} and is not part "
                         "of this job (an orphaned inference engine, another user): stop it "
                         "first")
        elif not ctx.job_pids and len(ctx.numbers.others) > 1:
            notes.append(f"process {pid} holds {units.gib(used)} on GPU {gpu}: if it is not "
                         "part of this job (an orphaned inference engine, another user), stop it "
                         "first")
    rules = _rules(ctx.config.framework)
    if rules is None:
        if ctx.config.framework == "unknown":
            notes.append("framework not recognised: generic PyTorch advice only (give the "
                         "config with --job-config to get exact keys)")
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
            if s is None and rule.halving and ctx.get(rule.key)[0] is None:
                # The job's value is not known (its config was not read, or it relies on a
                # value the framework derives): the direction still helps, without a number.
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
    change, ready to paste in the framework's style: Hydra overrides or a YAML fragment."""
    env = [s for s in suggestions if s.key.startswith("env:")]
    conf = [s for s in suggestions if not s.key.startswith("env:") and "." in s.key
            and s.proposed != HALF][:take]
    changes = [(s.key, s.proposed) for s in conf] + [kv for s in conf for kv in s.also]
    lines: list[str] = []
    for s in env:
        lines.append(f"export {s.key[4:]}={s.proposed}")
    fw = by_name(framework)
    style = fw.oom.patch_style if fw is not None and fw.oom is not None else ""
    if style and changes:
        lines.append(fw.oom.patch_header)
        if style == "hydra":
            lines.extend(f"{k}={_hydra_value(v)}" for k, v in changes)
        else:
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

