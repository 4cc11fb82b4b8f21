"""Which phase of the RL step ran out of memory (pure). Mostly tables: the frames' rules and the
log markers, each read from the frameworks' sources.

``read_phase(event, before, framework)`` reads, in this order:

1. the event's kind: an inference engine that could not get its memory (``engine-oom``) is the
   engine's start, whatever else the text says;
2. the traceback frames in the event's text, innermost first: the function names and files each
   framework of the registry lists (``rltui.frameworks``: RL frameworks, inference engines, HF
   ``generate``) and torch's autograd and optimizers, the source line printed under a frame
   (a driver's ``self.actor_rollout_wg.update_actor(batch)``), and Ray's task name
   (``ray::WorkerDict.actor_rollout_compute_ref_log_prob()``, ``name=...`` in the OOM killer's
   report). A frame that decides gives high confidence;
3. when no frame of the event decides, a traceback whose head was cut off may still sit in the
   lines just before the event: its frames decide with medium confidence;
4. else the log lines before the event, newest first: a marker a phase prints while it runs
   (each framework's ``LogMarker``: "Processed prompts", "update_actor", "compute_logp" ...)
   gives medium confidence. A marker that says a phase has just finished (a step line, "After
   rollout generation") stops the search: what ran after it is not known;
5. else ``unknown`` with low confidence.

The innermost deciding frame wins, except that an engine-start frame anywhere in the stack
makes it the engine's start (a vLLM profile run executes the model like generation does). An
actor update is a backward pass when torch's autograd (``backward``) or an optimizer step is
among its inner frames, or its own source line calls ``.backward(``; a forward pass when the
model's own forward is inside it. ``role`` says who was computing: actor, ref, critic or rollout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rltui.diagnosis.oom.types import OomPhase
from rltui.frameworks import FRAMEWORKS
from rltui.model import LogEvent

MAX_FRAMES = 400  # frames read from one event (its text is bounded anyway)
MAX_BEFORE = 400  # log lines before the event looked at, newest first
MAX_REASON = 300

# Phases a rule may name besides the final ones: "update" becomes actor-forward / actor-backward
# once the inner frames are read.
_UPDATE = "update"


@dataclass(frozen=True, slots=True)
class _Frame:
    file: str
    line: int | None
    func: str
    code: str = ""
    task: str = ""  # "Class.method" when the frame stands for a Ray task name

    def where(self) -> str:
        if self.task:
            return f"Ray task {self.task}"
        return f"{_short(self.file)}:{self.line}" if self.line is not None else _short(self.file)


@dataclass(frozen=True, slots=True)
class _Rule:
    funcs: frozenset[str]
    paths: tuple[str, ...]  # one of these in the file path; () = any path
    phase: str  # a PHASES value, or _UPDATE
    role: str
    what: str  # in words, for the reason
    framework: str = ""  # the framework the names belong to (a looser path check for it)
    generic: bool = False  # a common name ("forward", "__init__"): the path must match


def _rule(funcs: str, paths: tuple[str, ...], phase: str, role: str, what: str,
          framework: str = "", generic: bool = False) -> _Rule:
    return _Rule(frozenset(funcs.split()), paths, phase, role, what, framework, generic)


# The order rules and markers are tried in: stage by stage, and within a stage the frameworks in
# registry order. An engine's start comes first (a vLLM profile run executes the model like
# generation does); a finished-step marker before any running one (a step line may carry
# "timing_s/old_log_prob" and friends, which must not read as a running phase).
STAGES = ("engine-start", "weight-sync", "generation", "log-prob", "update")
MARKER_STAGES = ("step-done", "finished", "engine-start", "weight-sync", "generation",
                 "log-prob", "update")


def _build_rules() -> tuple[_Rule, ...]:
    out = []
    for stage in STAGES:
        for fw in FRAMEWORKS:
            for r in (fw.phase.rules if fw.phase else ()):
                if r.stage == stage:
                    out.append(_rule(r.funcs, r.paths, r.phase, r.role, r.what, fw.name,
                                     r.generic))
    return tuple(out)


# First matching rule per frame.
_RULES: tuple[_Rule, ...] = _build_rules()
# The frameworks that run the RL loop: their frames and Ray tasks name what the job was doing.
_DRIVERS = frozenset(fw.name for fw in FRAMEWORKS if fw.phase and fw.phase.drives)

# Calls in a frame's source line that decide like the callee's own frame would, e.g. a driver's
# `gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)`; the name -> the
# framework whose rule it is (the first framework in registry order that lists it).
_CALL_FRAMEWORK: dict[str, str] = {}
for _fw in FRAMEWORKS:
    for _name in (_fw.phase.calls if _fw.phase else ()):
        _CALL_FRAMEWORK.setdefault(_name, _fw.name)
_CALL = re.compile(r"\.(" + "|".join(sorted(map(re.escape, _CALL_FRAMEWORK), key=len,
                                            reverse=True)) + r")\(")

# Ray task classes that name the role of a log-prob pass; task method prefixes (worker groups).
_TASK_ROLE = tuple(pair for fw in FRAMEWORKS if fw.phase for pair in fw.phase.task_roles)
_TASK_PREFIXES = tuple(p for fw in FRAMEWORKS if fw.phase for p in fw.phase.task_prefixes)
_TASK_RULES = tuple((fw.name, t) for fw in FRAMEWORKS if fw.phase for t in fw.phase.task_rules)

_BACKWARD_FUNCS = frozenset({"backward", "_engine_run_backward", "run_backward"})
_BACKWARD_PATHS = ("torch/", "deepspeed/", "megatron/", "accelerate/", "apex/")
_BACKWARD_CODE = re.compile(r"\.backward\(|\bbackward\(\s*loss")
_OPTIM_CODE = re.compile(r"optimizer\.step\(|optimizer_step\(|_optimizer_step\(|optim\.step\(")
_FORWARD_CODE = re.compile(r"_forward_micro_batch\(|\bforward\(|self\.(?:actor|model|critic|module|"
                           r"actor_module|critic_module)\(|self\.engine\.forward\(")
_MODEL_PATHS = ("torch/nn/", "transformers/", "flash_attn", "torch/distributed/fsdp", "liger_kernel",
                "/models/", "torch/_dynamo", "peft/")
_REF_CODE = re.compile(r"\bref_policy\b|\bself\.ref\.|\bref\.compute_logp|\binitial_model\b|"
                       r"\bref_model\b|\bref_module|compute_ref_log_prob")

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_RAY_TASK = re.compile(r"(?:ray::|\bname=)[^\s,()]*?([A-Za-z_]\w*)\.(\w+)")
_CARETS = re.compile(r"^[\s^~]*$")
_PREFIXES = re.compile(r"^(?:\s*\((?:[\w.:-]+ )?pid=\d+[^)]*\) ?|\s*\[(?:rank|default)\d+\]: ?)+")
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


# Package folders a short path starts at: every framework's, and the libraries under them.
_PACKAGES = frozenset({p for fw in FRAMEWORKS for p in fw.packages} | {"torch", "flash_attn"})


def _short(path: str) -> str:
    """A file path from its package on: "<package>/workers/fsdp_workers.py"."""
    for mark in ("site-packages/", "dist-packages/"):
        at = path.rfind(mark)
        if at >= 0:
            return path[at + len(mark):]
    parts = path.replace("\\", "/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part in _PACKAGES:  # a checkout: /workspace/Repo/pkg/..., /pkg/pkg/...
            while i + 2 < len(parts) and parts[i + 1] == part:
                i += 1
            return "/".join(parts[i:])
    return "/".join(parts[-3:]) if len(parts) > 3 else path


def _clean(line: str) -> str:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    return line


# -- frames ------------------------------------------------------------------------------------------

def frames_of(text: str) -> list[_Frame]:
    """The traceback frames in ``text``, outermost first (the order Python prints them), with the
    source line under each and Ray task names as frames of their own."""
    out: list[_Frame] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) and len(out) < MAX_FRAMES:
        line = _clean(lines[i])
        m = _FRAME.search(line)
        if m:
            code = ""
            if i + 1 < len(lines):
                nxt = _PREFIXES.sub("", _clean(lines[i + 1])).strip()
                if nxt and not _FRAME.search(nxt) and not _CARETS.match(nxt) \
                        and "Traceback (most recent call last)" not in nxt:
                    code = nxt[:200]
                    i += 1
            out.append(_Frame(m.group(1), int(m.group(2)), m.group(3), code))
        elif ("ray::" in line or ("name=" in line and "memory used=" in line)) \
                and not line.lstrip()[:1].isdigit():  # not a row of Ray's memory table
            t = _RAY_TASK.search(line)
            if t:
                out.append(_Frame("", None, t.group(2), task=f"{t.group(1)}.{t.group(2)}"))
        i += 1
    return out


def _trailing_frames(before: Sequence[str]) -> list[_Frame]:
    """Frames of a traceback printed just before the event (its head cut, or not grouped)."""
    tail: list[str] = []
    for raw in reversed(before[-MAX_BEFORE:]):
        line = _PREFIXES.sub("", _clean(raw))
        stripped = line.strip()
        if not stripped:
            if tail:
                break
            continue
        if line[:1] in (" ", "\t") or stripped.startswith("Traceback (most recent call last)"):
            tail.append(line)
            continue
        break
    return frames_of("\n".join(reversed(tail)))


def _path_ok(rule: _Rule, path: str, framework: str) -> bool:
    if not rule.paths:
        return True
    norm = path.replace("\\", "/")
    if any(p in norm for p in rule.paths):
        return True
    # The job's own framework, run from a checkout whose path does not name it.
    return bool(rule.framework) and rule.framework == framework and not rule.generic


def _task_rule(frame: _Frame) -> _Rule | None:
    """The rule for a Ray task name: a worker group's "actor_rollout_compute_ref_log_prob" ends with the
    worker method's name; OpenRLHF's "ReferenceModelRayActor.forward" names the model."""
    cls, method = frame.task.split(".", 1)
    names = [method] + [method[len(p):] for p in _TASK_PREFIXES if method.startswith(p)]
    for rule in _RULES:
        if not rule.generic and rule.framework in _DRIVERS \
                and any(n in rule.funcs for n in names):
            return rule
    for framework, task in _TASK_RULES:
        if task.cls in cls and (not task.methods or method in task.methods):
            return _Rule(frozenset({method}), (), task.phase, task.role, task.what, framework)
    return None


def _match(frame: _Frame, framework: str) -> tuple[_Rule, str] | None:
    """(rule, how) for a frame that decides: by its function, its Ray task name, or the call in
    its source line."""
    if frame.task:
        rule = _task_rule(frame)
        return (rule, "task") if rule else None
    for rule in _RULES:
        if frame.func in rule.funcs and _path_ok(rule, frame.file, framework):
            return rule, "frame"
    if frame.code:
        m = _CALL.search(frame.code)
        if m:
            name = m.group(1)
            for rule in _RULES:
                if name in rule.funcs and rule.framework == _CALL_FRAMEWORK.get(name):
                    return rule, "call"
    return None


def _is_backward(frame: _Frame) -> bool:
    return frame.func in _BACKWARD_FUNCS and any(p in frame.file for p in _BACKWARD_PATHS)


def _is_optimizer(frame: _Frame) -> bool:
    return ((frame.func == "step" and ("torch/optim/" in frame.file or "deepspeed/" in frame.file))
            or frame.func in ("optimizer_step", "_optimizer_step")
            or bool(frame.code and _OPTIM_CODE.search(frame.code)))


def _is_model(frame: _Frame) -> bool:
    return (frame.func in ("forward", "_forward_micro_batch", "_call_impl", "_wrapped_call_impl")
            or any(p in frame.file for p in _MODEL_PATHS))


def _role(rule: _Rule, frames: Sequence[_Frame], at: int) -> str:
    """Who was computing: the rule's role, refined by the callers (a ref policy may call the
    actor class's compute_log_prob; AReaL's trainer calls ``self.ref.compute_logp``) and by Ray's
    task names (OpenRLHF's ReferenceModelRayActor)."""
    chosen = frames[at]
    if rule.phase == "log-prob":
        if any(f.func == "compute_ref_log_prob" or "ref_log_prob" in f.task
               or (f.code and _REF_CODE.search(f.code)) for f in frames[:at + 1]):
            return "ref"
        for f in frames:
            for mark, task_role in _TASK_ROLE:
                if f.task and mark in f.task.split(".", 1)[0]:
                    return task_role
    if rule.phase in (_UPDATE, "critic-update") and any(
            "critic" in x.lower() for x in (chosen.file, chosen.func, chosen.task)):
        return "critic"
    return rule.role


def _frame_text(frame: _Frame, how: str) -> str:
    if how == "task":
        return frame.where()
    text = f"{frame.func} at {frame.where()}"
    if how == "call" and frame.code:
        text = f"`{frame.code[:80]}` in {text}"
    return text


def _decide_frames(frames: Sequence[_Frame], framework: str) -> tuple[str, str, str, bool] | None:
    """(phase, role, reason, sure) from the frames, or None when no frame decides."""
    matches = [(i, *m) for i, f in enumerate(frames) if (m := _match(f, framework))]
    if matches:
        starts = [m for m in matches if m[1].phase == "engine-start"]
        at, rule, how = (starts or matches)[-1]
        frame = frames[at]
        reason = f"{rule.what}: {_frame_text(frame, how)}"
        # The nearest framework frame around it names what the job was doing.
        outer = next((m for m in reversed(matches) if m[0] < at and m[2] == "frame"
                      and m[1].framework in _DRIVERS
                      and frames[m[0]].func != frame.func), None)
        if outer is not None:
            reason += f", under {_frame_text(frames[outer[0]], outer[2])}"
        role = _role(rule, frames, at)
        if rule.phase == "critic-update" or (rule.phase == _UPDATE and role == "critic"):
            inner = frames[at + 1:]
            if any(_is_backward(f) for f in inner) or _BACKWARD_CODE.search(frame.code):
                reason += " (backward)"
            return "critic-update", role, reason, True
        if rule.phase != _UPDATE:
            return rule.phase, role, reason, True
        return _update(frames, at, role, reason)
    # No framework or engine frame: torch's own frames still tell backward and optimizer steps.
    back = next((f for f in reversed(frames) if _is_backward(f)), None)
    if back is not None:
        return "actor-backward", "", f"backward pass: {back.func} at {back.where()}", True
    opt = next((f for f in reversed(frames) if _is_optimizer(f)), None)
    if opt is not None:
        return "actor-backward", "", f"optimizer step: {opt.func} at {opt.where()}", True
    return None


def _update(frames: Sequence[_Frame], at: int, role: str, reason: str) -> tuple[str, str, str, bool]:
    """An update frame: backward, optimizer step or forward, from what runs inside it."""
    frame = frames[at]
    inner = frames[at + 1:]
    back = next((f for f in reversed(inner) if _is_backward(f)), None)
    if back is not None:
        return "actor-backward", role, f"{reason}, in backward: {back.func} at {back.where()}", True
    if frame.code and _BACKWARD_CODE.search(frame.code):
        return "actor-backward", role, f"{reason}, in backward: `{frame.code[:80]}`", True
    for f in reversed(inner):
        if f.code and _BACKWARD_CODE.search(f.code):
            return ("actor-backward", role,
                    f"{reason}, in backward: `{f.code[:80]}` at {f.where()}", True)
    opt = next((f for f in reversed([frame, *inner]) if _is_optimizer(f)), None)
    if opt is not None:
        return "actor-backward", role, f"{reason}, in the optimizer step: {opt.func} at {opt.where()}", True
    models = [f for f in inner if _is_model(f)]
    model = next((f for f in models if "/models/" in f.file), None) or next(
        (f for f in models if f.func in ("forward", "_forward_micro_batch")), None) or (
        models[0] if models else None)
    if model is not None:
        return "actor-forward", role, f"{reason}, in the forward pass: {model.func} at {model.where()}", True
    if frame.code and _FORWARD_CODE.search(frame.code):
        return "actor-forward", role, f"{reason}, in the forward pass: `{frame.code[:80]}`", True
    return ("actor-backward", role,
            (f"{reason}; forward or backward not known from the frames (the update's peak is "
             "usually its backward)"), False)


# -- log lines ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Marker:
    regex: re.Pattern[str]
    phase: str | None  # None: a phase just finished; what ran after it is not known
    role: str
    what: str
    frameworks: tuple[str, ...] = ()  # () = any; else only for these (a fuzzy marker)


# Markers no one framework owns, tried first within their stage.
_GENERIC_MARKERS = (
    ("finished", r"Weights updated to version", None, "", "the weight sync finished"),
    ("weight-sync", r"update_weights|[Uu]pdating weights", "weight-sync", "actor",
     "weight sync running"),
    ("generation", r"\bGenerating\b(?! \w+ split)", "generation", "rollout", "generation running"),
    ("log-prob", r"\bref logp\b", "log-prob", "ref", "reference log-prob running"),
    ("update", r"update_critic|critic update", "critic-update", "critic", "critic update running"),
)


def _build_markers() -> tuple[_Marker, ...]:
    out = []
    for stage in MARKER_STAGES:
        for where, pattern, phase, role, what in _GENERIC_MARKERS:
            if where == stage:
                out.append(_Marker(re.compile(pattern), phase, role, what))
        for fw in FRAMEWORKS:
            for m in (fw.phase.markers if fw.phase else ()):
                if m.stage == stage:
                    phase = _UPDATE if m.phase == "update" else m.phase
                    out.append(_Marker(re.compile(m.pattern), phase, m.role, m.what,
                                       (fw.name,) if m.own else ()))
    return tuple(out)


# Newest matching line wins; per line, the first marker in this order.
_MARKERS: tuple[_Marker, ...] = _build_markers()
_TABLE = ("│", "║")  # AReaL's stats tables (tabulate fancy_grid)


def _decide_lines(before: Sequence[str], framework: str) -> OomPhase | None:
    lines = list(before[-MAX_BEFORE:])
    for back, raw in enumerate(reversed(lines), 1):
        line = _clean(raw).strip()
        if not line:
            continue
        for marker in _MARKERS:
            if marker.frameworks and framework not in marker.frameworks:
                continue
            if marker.frameworks and any(c in line for c in _TABLE):
                continue
            if not marker.regex.search(line):
                continue
            quoted = line if len(line) <= 120 else line[:117] + "..."
            where = f'log line {back} before the OOM: "{quoted}"'
            if marker.phase is None:
                return OomPhase("unknown", "low", f"{marker.what} ({where}); what ran after it "
                                "is not in the log"[:MAX_REASON])
            phase, role = marker.phase, marker.role
            what = marker.what
            if phase == _UPDATE:
                phase = "actor-backward"
                what += " (forward or backward not known)"
                if "critic" in line.lower():
                    phase, role = "critic-update", "critic"
            return OomPhase(phase, "medium", f"{what}: {where}"[:MAX_REASON], role)
    return None


# -- the public function -----------------------------------------------------------------------------

def read_phase(event: LogEvent, before: Sequence[str], framework: str = "unknown") -> OomPhase:
    """The phase an OOM event happened in, how sure that is, and why.

    ``before``: the log lines printed before the event (oldest first; only the last few hundred
    are read). ``framework``: the job's framework when known (a registry name); frames
    are read whatever it says, but a framework's fuzzy log markers only count for it.
    """
    if event.kind == "engine-oom" and event.field("phase") == "serving":
        engine = str(event.field("engine") or "the inference engine")
        why = str(event.field("reason") or "its memory pool ran out while serving")
        return OomPhase("generation", "high", f"{engine} ran out of memory while serving "
                        f"requests: {why}"[:MAX_REASON], "rollout")
    if event.kind == "engine-oom":
        engine = str(event.field("engine") or "the inference engine")
        why = str(event.field("reason") or "out of memory at start")
        return OomPhase("engine-start", "high", f"{engine} could not start: {why}"[:MAX_REASON],
                        "rollout")
    frames = frames_of(event.text or "")
    decided = _decide_frames(frames, framework) if frames else None
    if decided is not None:
        phase, role, reason, sure = decided
        return OomPhase(phase, "high" if sure else "medium", reason[:MAX_REASON], role)
    cut = _trailing_frames(before)
    decided = _decide_frames(cut, framework) if cut else None
    if decided is not None:
        phase, role, reason, _ = decided
        return OomPhase(phase, "medium", f"{reason} (traceback lines just before the OOM, not "
                        "joined to it)"[:MAX_REASON], role)
    by_line = _decide_lines(before, framework)
    if by_line is not None:
        return by_line
    if frames:
        last = frames[-1]
        return OomPhase("unknown", "low", f"no frame or log line names a phase (innermost frame "
                        f"{last.func} at {last.where()})"[:MAX_REASON])
    return OomPhase("unknown", "low", "no traceback frames and no log line that names a phase")
