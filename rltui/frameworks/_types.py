"""The records a framework module fills in (pure data; standard library only).

Each framework module under ``rltui.frameworks`` builds one ``Framework`` from these. Code that
acts on the facts (parsers in ``rltui.parsing``, the OOM engine in ``rltui.diagnosis.oom``) reads
them through the registry and never names a framework itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

# A config reader handed to a framework's own functions: dotted key -> the value the job runs
# with (its config, else the framework's documented default), None when unknown.
Getter = Callable[[str], Any]


class StepFormat(msgspec.Struct, frozen=True):
    """One way a framework prints a training step.

    ``name`` is the log format rltui reports (``LogFileState.format``); several frameworks may
    share one (LLaMA-Factory and ms-swift print HF Trainer's dict). ``parser`` names the parser
    in ``rltui.parsing.frameworks.PARSERS``. ``markers``: substrings every line the parser needs
    contains, raw or cleaned; the history scan looks only at lines holding one.
    """

    name: str
    parser: str
    markers: tuple[str, ...]
    example: str
    source: str
    step_time: str = ""  # where the step time comes from, in words ("" = not printed)
    # Its step line is ``key:value`` items joined by `` - ``: one hard-wrapped by a terminal copy
    # (cut mid-item) is joined with its continuation lines before it is parsed.
    joins_wraps: bool = False


class TitlePattern(msgspec.Struct, frozen=True):
    """A process title or Ray actor name and the role it stands for.

    ``pattern`` is matched (``re.fullmatch``) against a title with surrounding space removed; its
    named groups ``role``, ``rank``, ``dp``, ``tp``, ``pp`` fill in what the title carries.
    ``role`` is used when the pattern has no role group (or it did not take part).
    """

    pattern: str
    role: str
    source: str


class Default(msgspec.Struct, frozen=True):
    value: Any  # may be an interpolation "${other.key}", resolved by the OOM engine
    source: str  # the file in the framework's repository that documents it
    fallback: str | None = None  # when the value is None the framework uses this key's value
    note: str = ""


class ConfigFacts(msgspec.Struct, frozen=True):
    """Where a framework's config lives and what it defaults to.

    ``drivers``: a regex searched in each command-line argument that is not a flag or an
    override: the framework's entry point. ``top_keys``: a config with any of these top-level
    keys is this framework's; ``nested_keys``: (section, keys) pairs that say the same;
    ``all_keys``: a config holding all of these top-level keys is this framework's (weakest).
    """

    drivers: str = ""
    top_keys: tuple[str, ...] = ()
    nested_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    all_keys: tuple[str, ...] = ()
    style: str = ""  # "hydra" (key=value overrides + a --config-name file) or "yaml" (--config)
    default_config_name: str | None = None  # Hydra's config name when none is given
    model_path_keys: tuple[str, ...] = ()
    defaults: Mapping[str, Default] = msgspec.field(default_factory=dict)
    aliases: Mapping[str, str] = msgspec.field(default_factory=dict)  # name in use -> the key read
    # The framework's own start-up checks: (getter) -> one sentence per failed rule.
    check: Callable[[Getter], list[str]] | None = None
    where: str = ""  # in words, for docs/frameworks.md


class PhaseRule(msgspec.Struct, frozen=True):
    """A traceback frame that names the phase of the RL step: the frame's function is one of
    ``funcs`` and its file holds one of ``paths`` (``()``: any path). ``phase`` is an OOM phase,
    or "update" (forward or backward, decided by the inner frames). ``stage`` orders the rules:
    the engine reads every framework's rules stage by stage (``STAGES``). ``generic``: a common
    name whose path must match even for the job's own framework."""

    stage: str
    funcs: str  # space-separated function names
    paths: tuple[str, ...]
    phase: str
    role: str
    what: str
    generic: bool = False


class LogMarker(msgspec.Struct, frozen=True):
    """A log line a phase prints while it runs (``phase``), or once it is done (``phase`` None).
    ``own``: a fuzzy marker that only counts when the job is known to be this framework."""

    stage: str
    pattern: str
    phase: str | None
    role: str
    what: str
    own: bool = False


class TaskRule(msgspec.Struct, frozen=True):
    """A Ray task whose class name holds ``cls`` and whose method is one of ``methods``
    (``()``: any): the phase and role it stands for."""

    cls: str
    methods: tuple[str, ...]
    phase: str
    role: str
    what: str


class PhaseFacts(msgspec.Struct, frozen=True):
    """What tells the phase of an OOM: frames, source-line calls, Ray tasks, log markers."""

    rules: tuple[PhaseRule, ...] = ()
    calls: tuple[str, ...] = ()  # methods whose call in a frame's source line decides
    markers: tuple[LogMarker, ...] = ()
    task_prefixes: tuple[str, ...] = ()  # Ray task method prefixes (worker groups)
    task_roles: tuple[tuple[str, str], ...] = ()  # (class name part, role) for log-prob tasks
    task_rules: tuple[TaskRule, ...] = ()  # Ray tasks no frame rule names
    drives: bool = False  # runs the RL loop: its frames and Ray tasks name what the job did


class Knob(msgspec.Struct, frozen=True):
    """One OOM suggestion: a config key, how to change it, why, and what it costs.

    ``action`` names a proposal in ``rltui.diagnosis.oom.suggest.ACTIONS`` ("halve",
    "micro_halve", "tokens_down", "fraction_down", "fraction_up", "fit_free", "true",
    "replace", "dynamic_on"); ``args`` are its parameters. ``effect``: "fraction" (the change
    times the GPU), "estimate" (the model-shape estimate), or "" (not known).
    ``also``: companion (key, value) changes made with it."""

    key: str
    action: str
    why: str
    tradeoff: str
    effect: str = ""
    args: tuple[Any, ...] = ()
    also: tuple[tuple[str, Any], ...] = ()


class StallCheck(msgspec.Struct, frozen=True):
    """A setting that makes the loop wait: ``test`` "equals" or "at-most" ``limit``. ``text`` may
    use {value} and {default} (``default_text`` when the value is the documented default)."""

    key: str
    test: str
    limit: Any
    text: str
    default_text: str = ""

    def finding(self, value: Any, is_default: bool) -> str | None:
        if self.test == "equals":
            hit = value == self.limit
        else:
            hit = isinstance(value, int) and not isinstance(value, bool) and value <= self.limit
        if not hit:
            return None
        return self.text.format(value=value, default=self.default_text if is_default else "")


class OomFacts(msgspec.Struct, frozen=True):
    """The framework's OOM playbook: knobs per phase, most direct first, and how to apply them.

    ``knobs`` maps an OOM phase (and "unknown") to its knobs. ``dynamic_key``: the switch under
    which micro batch sizes are ignored for a token budget. ``seq_keys``: (prompt, response)
    budget keys; their sum is the longest sequence. ``exclusive``: (strategy key, value prefix,
    key part): when the strategy starts with the prefix, knobs whose key holds the part (and the
    strategy knob itself) do not apply. ``ref_renames``: (prefix, replacement) applied to knob
    keys when the reference model failed. ``estimate``: (getter, phase, role) -> the memory
    estimate's settings."""

    knobs: Mapping[str, tuple[Knob, ...]] = msgspec.field(default_factory=dict)
    dynamic_key: str | None = None
    seq_keys: tuple[str, str] | None = None
    exclusive: tuple[str, str, str] | None = None
    ref_renames: tuple[tuple[str, str], ...] = ()
    patch_style: str = ""  # "hydra" (key=value lines) or "yaml" (a YAML fragment)
    patch_header: str = ""
    estimate: Callable[[Getter, str, str], dict[str, Any]] | None = None
    stalls: tuple[StallCheck, ...] = ()  # settings that make rollout wait (the config doctor)


class Framework(msgspec.Struct, frozen=True):
    """Everything rltui knows of one framework. Fields left empty mean "nothing known"."""

    name: str  # the id used in JSON and on the command line
    label: str  # for people
    kind: str  # "rl", "trainer", "engine", "launcher" or "runtime"
    packages: tuple[str, ...] = ()  # its Python packages (traceback paths, driver modules)
    path_marks: tuple[str, ...] = ()  # path parts in a traceback that mean "this framework ran"
    steps: tuple[StepFormat, ...] = ()
    log_prefixes: tuple[str, ...] = ()  # prefixes it adds to lines (stripped by parsing.noise)
    titles: tuple[TitlePattern, ...] = ()
    config: ConfigFacts | None = None
    phase: PhaseFacts | None = None
    oom: OomFacts | None = None
    sources: tuple[str, ...] = ()  # owner/repo paths the facts come from

    def capabilities(self) -> tuple[str, ...]:
        """What rltui can do with this framework, by name (docs/frameworks.md's columns)."""
        have = {
            "steps": bool(self.steps),
            "step-time": any(s.step_time for s in self.steps),
            "prefixes": bool(self.log_prefixes),
            "titles": bool(self.titles),
            "config": bool(self.config and (self.config.drivers or self.config.top_keys)),
            "defaults": bool(self.config and self.config.defaults),
            "constraints": bool(self.config and self.config.check),
            "oom-phase": bool(self.phase and (self.phase.rules or self.phase.markers)),
            "oom-knobs": bool(self.oom and self.oom.knobs),
            "estimate": bool(self.oom and self.oom.estimate),
        }
        return tuple(name for name in CAPABILITIES if have[name])


CAPABILITIES = ("steps", "step-time", "prefixes", "titles", "config", "defaults", "constraints",
                "oom-phase", "oom-knobs", "estimate")


# -- helpers the framework modules share (config values are whatever YAML gave) ---------------

def as_int(value: Any) -> int | None:
    """An int config value; bools and anything else are None (the rule cannot be decided)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def fraction_problem(get: Getter, key: str) -> list[str]:
    """A share of the GPU must lie in (0, 1]."""
    value = get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not 0 < value <= 1:
        return [f"{key} ({value}) must be a fraction of the GPU in (0, 1]"]
    return []
