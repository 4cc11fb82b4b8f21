"""Every framework rltui knows, in one registry: one pure data module per framework.

``FRAMEWORKS`` is the ordered tuple of ``Framework`` records. Its order is the order in which
step formats are auto-detected, frames and log markers are tried within an OOM stage, and
process titles are matched, so a more specific framework comes before the one it stands on
(verl before Ray, Ray's generic ``ray::<Class>`` last among titles). Parsers
(``rltui.parsing``) and the OOM engine (``rltui.diagnosis.oom``) iterate it; none of them names
a framework. Adding a framework is one module here (its ``FRAMEWORK``), one line below, and its
fixtures; docs/frameworks.md lists what each covers and a test holds the two together.

This package imports only the standard library and ``rltui.model``.

``process_role(text)`` reads a process title or a Ray actor name (``sglang::scheduler_DP1_TP3``,
``VLLM::Worker_TP0``, ``ray::WorkerDict``, ``(TaskRunner pid=12)``) into a ``ProcessRole``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache

import msgspec

from rltui.frameworks import (
    areal,
    deepspeed,
    hf,
    llamafactory,
    megatron,
    openrlhf,
    ray,
    sglang,
    swift,
    torchrun,
    torchtitan,
    verl,
    vllm,
)
from rltui.frameworks._types import (
    CAPABILITIES,
    ConfigFacts,
    Default,
    Framework,
    Getter,
    Knob,
    LogMarker,
    OomFacts,
    PhaseFacts,
    PhaseRule,
    StallCheck,
    StepFormat,
    TaskRule,
    TitlePattern,
)

FRAMEWORKS: tuple[Framework, ...] = (
    areal.FRAMEWORK,
    openrlhf.FRAMEWORK,
    verl.FRAMEWORK,
    torchtitan.FRAMEWORK,
    megatron.FRAMEWORK,
    deepspeed.FRAMEWORK,
    hf.FRAMEWORK,
    llamafactory.FRAMEWORK,
    swift.FRAMEWORK,
    torchrun.FRAMEWORK,
    sglang.FRAMEWORK,
    vllm.FRAMEWORK,
    ray.FRAMEWORK,
)

_BY_NAME = {f.name: f for f in FRAMEWORKS}

__all__ = ["CAPABILITIES", "FRAMEWORKS", "ConfigFacts", "Default", "Framework", "Getter", "Knob",
           "LogMarker", "OomFacts", "PhaseFacts", "PhaseRule", "ProcessRole", "StallCheck",
           "StepFormat", "TaskRule", "TitlePattern", "by_name", "config_frameworks",
           "framework_in_cmdline", "framework_in_traceback", "step_formats", "format_names",
           "process_role"]


def by_name(name: str) -> Framework | None:
    """The framework called ``name`` ("verl", "areal", ...), or None."""
    return _BY_NAME.get(name)


def config_frameworks() -> tuple[Framework, ...]:
    """Frameworks whose job config rltui reads (the RL frameworks): ``JobConfig.framework``
    is one of these or "unknown". Launchers and plain trainers are left out on purpose: a
    ``torchrun ... -m verl.trainer.main_ppo`` job is verl's."""
    return tuple(f for f in FRAMEWORKS if f.kind == "rl" and f.config is not None)


@lru_cache(maxsize=1)
def _drivers() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(framework, entry-point regex) of every framework whose config rltui reads, in
    registry order; compiled on first use."""
    return tuple((f.name, re.compile(f.config.drivers)) for f in config_frameworks()
                 if f.config is not None and f.config.drivers)


def framework_in_cmdline(cmdline: Sequence[str]) -> str:
    """The RL framework whose entry point a command line runs (``python3 -m
    verl.trainer.main_ppo``, ``torchrun ... -m areal...``, ``ray job submit -- python3 -m
    openrlhf...``), or "unknown"."""
    for program in _programs(cmdline):
        for name, regex in _drivers():
            if regex.search(program):
                return name
    return "unknown"


def _programs(cmdline: Sequence[str]) -> Iterator[str]:
    """What a command line runs: each module after ``-m`` (``-mname``, deepspeed's
    ``--module``) and each ``.py`` script, wherever a launcher puts them. The rest names no
    program: a flag's value (``--save_path /ckpt/openrlhf/run``), a ``key=value`` override, the
    interpreter's own path (a venv inside a checkout)."""
    module_next = False
    for a in cmdline:
        if module_next:
            module_next = False
            yield a
        elif a in ("-m", "--module"):
            module_next = True
        elif a.startswith("-m") and not a.startswith("--"):
            yield a[2:]
        elif a.endswith(".py") and not a.startswith("-") and "=" not in a:
            yield a


def framework_in_traceback(text: str) -> str:
    """The RL framework whose package folder a traceback's file paths pass through
    (``/verl/``, ``/areal/``...), or "unknown"."""
    text = text.replace("\\", "/")
    for f in config_frameworks():
        if any(mark in text for mark in f.path_marks):
            return f.name
    return "unknown"


@lru_cache(maxsize=1)
def step_formats() -> tuple[StepFormat, ...]:
    """Every step format of every framework, in detection order. Several frameworks may print
    one format (HF's dict: HF Trainer, LLaMA-Factory, ms-swift); each lists the markers its
    own lines hold, and the reader looks for all of them."""
    return tuple(fmt for fw in FRAMEWORKS for fmt in fw.steps)


def format_names() -> tuple[str, ...]:
    """The log format names the step reader reports, in detection order (no duplicates)."""
    return tuple(dict.fromkeys(f.name for f in step_formats()))


# -- process titles ---------------------------------------------------------------------------

class ProcessRole(msgspec.Struct, frozen=True):
    """What a process title or Ray actor name says of the process.

    ``framework``: the registry name ("sglang", "vllm", "verl", "ray", ...); ``role``: the
    title's role word (``scheduler``, ``detokenizer``, ``Worker``, ``EngineCore``,
    ``WorkerDict``, ``driver``, ``idle``; verl's worker-group prefix such as ``actor_rollout``
    when a method runs). ``dp``, ``tp``, ``pp``: the parallel ranks the title carries;
    ``rank``: a rank-like index: the title's own number, else tp, else pp, else dp.
    """

    framework: str
    role: str
    rank: int | None = None
    dp: int | None = None
    tp: int | None = None
    pp: int | None = None


_MAX_TITLE = 512  # titles are short; a longer text is cut before matching (linear regexes)
_RAY_PREFIX = re.compile(r"\((?P<name>[A-Za-z_][\w.]*)(?:\([^()]*\))? pid=\w+[^()]*\)")


@lru_cache(maxsize=1)
def _title_table() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(framework, compiled pattern, default role), compiled once on first use."""
    return tuple((fw.name, re.compile(t.pattern), t.role)
                 for fw in FRAMEWORKS for t in fw.titles)


def _int(groups: dict[str, str | None], name: str) -> int | None:
    raw = groups.get(name)
    return int(raw) if raw and raw.isdigit() and len(raw) < 10 else None


def process_role(text: str) -> ProcessRole | None:
    """The framework and role a process title or Ray actor name stands for, or None.

    Accepts a process title (``sglang::scheduler_DP1_TP3``, ``VLLM::Worker_TP0``,
    ``ray::WorkerDict.actor_rollout_generate_sequences()``, ``ray::IDLE``), a Ray log prefix
    (``(TaskRunner pid=12, ip=10.0.0.1)``) or a bare Ray class name (``WorkerDict``). Never
    raises; the first matching title of the registry, in its order, wins.
    """
    if not isinstance(text, str):
        return None
    title = text.strip()[:_MAX_TITLE]
    if not title:
        return None
    m = _RAY_PREFIX.match(title)
    if m:
        title = "ray::" + m.group("name")
    candidates = [title]
    if "::" not in title and len(title) <= 128 \
            and re.fullmatch(r"[A-Z]\w*(?:\.\w+)?(?:\(\))?", title):
        candidates.append("ray::" + title)  # a bare actor class (Ray's state API, a prefix)
    for candidate in candidates:
        for name, regex, role in _title_table():
            hit = regex.fullmatch(candidate)
            if hit is None:
                continue
            groups = hit.groupdict()
            dp, tp, pp = _int(groups, "dp"), _int(groups, "tp"), _int(groups, "pp")
            rank = _int(groups, "rank")
            if rank is None:
                rank = next((v for v in (tp, pp, dp) if v is not None), None)
            return ProcessRole(name, groups.get("role") or role, rank, dp, tp, pp)
    return None
