"""The ``cuda-oom`` symptom's next steps in the job's own keys (pure).

The keys come from the framework's OOM table (``OomFacts.knobs`` in ``rltui.frameworks``), the
one the triage ranks (`m`, ``rltui oom``): the symptom names the first knobs of the phases it
cannot tell apart yet, the triage decides the phase and the values. The job's framework is read
from the command lines of its processes (live or gone), else from the package folders in the
OOM's traceback; a job rltui does not recognise (DeepSpeed, torchtitan, a plain torchrun
script...) gets the same advice in general terms, never another framework's keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rltui.frameworks import Knob, OomFacts, by_name, framework_in_cmdline, framework_in_traceback
from rltui.model import NodeSnapshot
from rltui.parsing.jobconfig import detect_framework, parse_overrides

# (what the line is about, the phases whose knobs it names, most direct first); one line per
# group of phases, at most PER_LINE knobs each, taken in turn from the group's phases.
GROUPS = (
    ("Log-prob or generation OOM", ("log-prob", "generation")),
    ("Update OOM, forward or backward", ("actor-backward",)),
)
PER_LINE = 3

TRIAGE = ("For the phase and the exact changes for this job's config, with their memory effect "
          "and a patch: press m in the app, or run `rltui oom` (docs/oom.md).")
UNKNOWN = ("rltui knows no OOM keys of this job's framework, so these steps are in general "
           "terms: for the phase and the keys of its config, press m in the app or run `rltui "
           "oom --job-config FILE` (docs/oom.md).")
GENERAL = (
    "Log-prob or generation OOM: halve the micro batch size of those forward passes; lower the "
    "inference engine's memory fraction by 0.2 (e.g. 0.9 -> 0.7).",
    "Update OOM, forward or backward: halve the micro batch size (raise gradient accumulation "
    "to keep the effective batch); turn on gradient checkpointing.",
)


def job_framework(snap: NodeSnapshot, tracebacks: Iterable[str] = ()) -> str:
    """The registry name of the job's RL framework, or "unknown": the first command line of the
    snapshot's processes (live, gone, the job's launcher) that runs a framework's entry point,
    else the first traceback passing through a framework's package."""
    cmdlines = dict.fromkeys([p.cmdline for p in snap.procs]
                             + [d.info.cmdline for d in snap.departed if d.info is not None]
                             + [job.launcher_cmdline for job in snap.jobs])
    for cmdline in cmdlines:  # ranks share one command line: each distinct one is read once
        name = framework_in_cmdline(cmdline)
        if name != "unknown":
            return name
    for cmdline in cmdlines:
        # a user's own script that composes a framework's config (``python3 train.py
        # actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 ...``): its overrides' keys
        # say whose config it is, as the config file's keys would (detect_framework)
        name = detect_framework((), _override_keys(cmdline))
        if name != "unknown":
            return name
    for text in tracebacks:
        name = framework_in_traceback(text)
        if name != "unknown":
            return name
    return "unknown"


def _override_keys(cmdline: Sequence[str]) -> dict:
    """The keys a command line's Hydra overrides set, two levels deep, values left out
    (``{"actor_rollout_ref": {"actor": None}}``): enough to tell whose config they are."""
    keys: dict = {}
    for op, key, _ in parse_overrides(cmdline)[0]:
        if op == "delete":
            continue
        top, _, rest = key.partition(".")
        inner = keys.setdefault(top, {})
        if rest and isinstance(inner, dict):
            inner.setdefault(rest.partition(".")[0], None)
    return keys


def next_steps(framework: str) -> tuple[str, ...]:
    """The triage pointer, then one line per group of phases naming the framework's keys (the
    general words for a group whose knobs say nothing without the job's values)."""
    fw = by_name(framework)
    facts = fw.oom if fw is not None else None
    if facts is None or not facts.knobs:
        return (UNKNOWN, *GENERAL)
    lines = [TRIAGE]
    for (about, phases), general in zip(GROUPS, GENERAL):
        changes = _changes(facts, phases)
        lines.append(f"{about} ({fw.label}): {'; '.join(changes)}." if changes else general)
    return tuple(lines)


def _changes(facts: OomFacts, phases: Iterable[str]) -> list[str]:
    """The group's knobs in turn from each phase (the first of each, then the second...),
    each key once, as a change in words."""
    columns = [facts.knobs.get(phase, ()) for phase in phases]
    out: dict[str, str] = {}
    for row in range(max((len(c) for c in columns), default=0)):
        for column in columns:
            if row < len(column) and column[row].key not in out:
                text = _change(column[row], facts)
                if text:
                    out[column[row].key] = text
    return list(out.values())[:PER_LINE]


def _change(knob: Knob, facts: OomFacts) -> str | None:
    """A knob's change in words, or None where it depends on values the symptom does not read
    (a token budget counted only under a switch, one strategy's keys, a strategy swap, dynamic
    batching, a fraction fitted to what the engine found free)."""
    key = knob.key
    if facts.exclusive is not None and facts.exclusive[2] in key:
        return None  # verl's FSDP keys mean nothing to a Megatron actor, and which it is is unread
    if knob.action in ("halve", "micro_halve"):
        return f"halve {key}"
    if knob.action == "tokens_down":
        if facts.dynamic_key:
            return None
        if facts.seq_keys:
            return f"halve {key} (not below {facts.seq_keys[0]} + {facts.seq_keys[1]})"
        return f"halve {key}"
    if knob.action == "fraction_down":
        return f"lower {key} by 0.2 (e.g. 0.9 -> 0.7)"
    if knob.action == "true":
        return f"add {key}" if key.startswith("--") else f"turn on {key}"
    return None
