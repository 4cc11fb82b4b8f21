"""Which phase of the RL step ran out of memory (pure). Mostly tables: the frames' rules and the
log markers, each read from the frameworks' sources.

``read_phase(event, before, framework)`` reads, in this order:

1. the event's kind: an inference engine that could not get its memory (``engine-oom``) is the
   engine's start, whatever else the text says;
2. the traceback frames in the event's text, innermost first: the function names and files of
   verl, AReaL, OpenRLHF, vLLM, SGLang, HF ``generate`` and torch's autograd and optimizers, the
   source line printed under a frame (``self.actor_rollout_wg.update_actor(batch)`` in the
   driver), and Ray's task name (``ray::WorkerDict.actor_rollout_compute_ref_log_prob()``,
   ``name=...`` in the OOM killer's report). A frame that decides gives high confidence;
3. when no frame of the event decides, a traceback whose head was cut off may still sit in the
   lines just before the event: its frames decide with medium confidence;
4. else the log lines before the event, newest first: a marker a phase prints while it runs
   ("Processed prompts", verl's "After entering rollout sharding manager", "update_actor",
   AReaL's "compute_logp" ...) gives medium confidence. A marker that says a phase has just
   finished (verl's step line, "After rollout generation") stops the search: what ran after it
   is not known;
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


_VLLM = ("vllm/",)
_SGLANG = ("sglang/srt/", "sglang/")
_VERL = ("verl/",)
_AREAL = ("areal/",)
_ORLHF = ("openrlhf/",)

# First matching rule per frame. Names read from the frameworks' sources: verl
# (workers/fsdp_workers.py, workers/actor/dp_actor.py, workers/critic/dp_critic.py,
# workers/rollout/*, workers/sharding_manager/*), AReaL (engine/ppo/actor.py, trainer/rl_trainer.py,
# engine/fsdp_engine.py), OpenRLHF (trainer/ray/ppo_actor.py, ppo_critic.py, launcher.py,
# trainer/ppo_utils/experience_maker.py), vLLM (entrypoints/llm.py, engine/, v1/engine/core.py,
# worker/), SGLang (srt/managers/scheduler.py, srt/model_executor/model_runner.py).
_RULES: tuple[_Rule, ...] = (
    # -- inference engine start ---------------------------------------------------------------------
    _rule("profile_run _dummy_run _dummy_sampler_run determine_num_available_blocks "
          "determine_available_memory _initialize_kv_caches initialize_cache initialize_kv_cache "
          "init_device load_model capture_model _init_executor init_worker from_engine_args "
          "initialize_from_config _init_cache_engine _allocate_kv_cache compile_or_warm_up_model "
          "_init_engine", _VLLM, "engine-start", "rollout", "vLLM engine start", "vllm", True),
    _rule("__init__", ("vllm/entrypoints/llm.py", "vllm/engine/", "vllm/v1/engine/", "vllm/worker/",
                       "vllm/v1/worker/", "vllm/executor/", "vllm/v1/executor/"),
          "engine-start", "rollout", "vLLM engine start", "vllm", True),
    _rule("init_memory_pool init_cuda_graphs load_model initialize profile_max_num_token capture "
          "capture_one_batch_size init_torch_distributed _launch_subprocesses launch_server "
          "launch_engine init_device_graphs", _SGLANG, "engine-start", "rollout",
          "SGLang engine start", "sglang", True),
    _rule("__init__", ("sglang/srt/entrypoints/engine.py", "sglang/srt/managers/scheduler.py",
                       "sglang/srt/managers/tp_worker", "sglang/srt/model_executor/"),
          "engine-start", "rollout", "SGLang engine start", "sglang", True),
    _rule("_build_rollout", _VERL, "engine-start", "rollout", "verl builds the rollout engine", "verl"),
    _rule("create_vllm_engines", _ORLHF, "engine-start", "rollout", "OpenRLHF starts vLLM",
          "openrlhf"),
    _rule("__init__", ("openrlhf/trainer/ray/vllm_engine",), "engine-start", "rollout",
          "OpenRLHF starts vLLM", "openrlhf", True),
    # -- weight sync -------------------------------------------------------------------------------
    _rule("__enter__", ("sharding_manager",), "weight-sync", "actor",
          "verl syncs the actor's weights into the rollout engine", "verl", True),
    _rule("sync_weights _sync_weights sync_rollout_weights rollout_mode update_weights",
          _VERL, "weight-sync", "actor", "verl syncs the actor's weights into the rollout engine",
          "verl"),
    _rule("update_weights _update_weights_from_distributed _update_weights_from_disk upload_weights "
          "_update_bucket_weights_from_distributed update_weights_from_tensor "
          "_update_weights_from_tensor", _AREAL, "weight-sync", "actor",
          "AReaL sends the actor's weights to the inference servers", "areal"),
    _rule("update_weights_from_distributed update_weights_from_tensor update_weights_from_disk",
          _SGLANG, "weight-sync", "rollout", "SGLang receives new weights", "sglang"),
    _rule("broadcast_to_vllm _broadcast_to_vllm _broadcast_to_vllm_fsdp2 _broadcast_param "
          "_handle_cuda_ipc update_weight update_weight_cuda_ipc", _ORLHF, "weight-sync", "actor",
          "OpenRLHF broadcasts the actor's weights to vLLM", "openrlhf"),
    # -- generation --------------------------------------------------------------------------------
    _rule("generate chat _run_engine execute_model step run_busy_loop _process_engine_step "
          "step_with_batch_queue", _VLLM, "generation", "rollout", "vLLM generation", "vllm", True),
    _rule("event_loop_normal event_loop_overlap event_loop_pp run_batch forward_batch_generation "
          "generate async_generate generate_request", _SGLANG, "generation", "rollout",
          "SGLang generation", "sglang", True),
    _rule("generate_sequences _batch_level_generate_sequences _req_level_generate_sequences "
          "_async_rollout_a_request", _VERL, "generation", "rollout", "verl rollout generation",
          "verl"),
    _rule("generate", ("verl/workers/rollout/",), "generation", "rollout", "verl rollout generation",
          "verl", True),
    _rule("generate _sample sample greedy_search _greedy_search beam_search _beam_search "
          "_assisted_decoding", ("transformers/generation/",), "generation", "rollout",
          "HF generate", "", True),
    _rule("generate_samples _generate_vllm _generate_with_hf", _ORLHF, "generation", "rollout",
          "OpenRLHF sample generation", "openrlhf"),
    _rule("rollout_batch prepare_batch arun_episode agenerate", _AREAL, "generation", "rollout",
          "AReaL rollout", "areal"),
    # -- log-prob / entropy / values ----------------------------------------------------------------
    _rule("compute_ref_log_prob", _VERL, "log-prob", "ref", "reference log-prob computation", "verl"),
    _rule("compute_log_prob", _VERL, "log-prob", "actor", "log-prob computation", "verl"),
    _rule("compute_values", _VERL + _AREAL, "critic-update", "critic",
          "critic value computation (compute_values)", "verl"),
    _rule("compute_rm_score", _VERL, "log-prob", "", "reward model forward", "verl"),
    _rule("compute_logp", _AREAL, "log-prob", "actor", "log-prob computation", "areal"),
    _rule("forward", ("areal/engine/fsdp_engine.py", "areal/engine/megatron_engine.py",
                      "areal/engine/base_hf_engine.py"), "log-prob", "actor",
          "AReaL engine forward (no gradient)", "areal", True),
    _rule("make_experience make_experience_list make_experience_batch", _ORLHF, "log-prob", "actor",
          "OpenRLHF experience making (log-probs, values, rewards)", "openrlhf"),
    _rule("forward", ("openrlhf/trainer/ray/launcher.py",), "log-prob", "",
          "OpenRLHF model actor forward", "openrlhf", True),
    # -- updates -----------------------------------------------------------------------------------
    _rule("update_critic", _VERL, "critic-update", "critic", "critic update", "verl"),
    _rule("update_policy update_actor", _VERL, _UPDATE, "actor", "actor update", "verl"),
    _rule("forward_backward_batch", _VERL, _UPDATE, "actor", "actor update (Megatron)", "verl"),
    _rule("_optimizer_step", _VERL, _UPDATE, "actor", "actor optimizer step", "verl"),
    _rule("ppo_update train_batch", _AREAL, _UPDATE, "actor", "PPO update", "areal"),
    _rule("training_step_critic", _ORLHF, "critic-update", "critic", "critic update", "openrlhf"),
    _rule("ppo_train training_step training_step_actor", _ORLHF, _UPDATE, "actor", "PPO update",
          "openrlhf"),
)

# Calls in a frame's source line that decide like the callee's own frame would, e.g. the verl
# driver's `gen_batch_output = self.actor_rollout_wg.generate_sequences(gen_batch)`.
_CALL = re.compile(r"\.(generate_sequences|compute_ref_log_prob|compute_log_prob|compute_values|"
                   r"update_actor|update_critic|compute_logp|ppo_update|make_experience_list|"
                   r"make_experience_batch|make_experience|ppo_train|broadcast_to_vllm|"
                   r"update_weights|sync_weights)\(")
_CALL_FRAMEWORK = {"generate_sequences": "verl", "compute_ref_log_prob": "verl",
                   "compute_log_prob": "verl", "compute_values": "verl", "update_actor": "verl",
                   "update_critic": "verl", "sync_weights": "verl", "compute_logp": "areal",
                   "ppo_update": "areal", "update_weights": "areal",
                   "make_experience_list": "openrlhf", "make_experience_batch": "openrlhf",
                   "make_experience": "openrlhf", "ppo_train": "openrlhf",
                   "broadcast_to_vllm": "openrlhf"}

# Ray task classes that name the role (OpenRLHF's model actors, verl's worker group prefixes).
_TASK_ROLE = (("Reference", "ref"), ("Critic", "critic"), ("LLMRayActor", "rollout"),
              ("Reward", ""))
_TASK_PREFIXES = ("actor_rollout_ref_", "actor_rollout_", "critic_", "ref_", "rollout_", "rm_",
                  "actor_")

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


_PACKAGES = frozenset({"verl", "areal", "openrlhf", "vllm", "sglang", "torch", "transformers", "ray",
                       "deepspeed", "megatron", "flash_attn", "trl", "accelerate", "peft"})


def _short(path: str) -> str:
    """A file path from its package on: "verl/workers/fsdp_workers.py"."""
    for mark in ("site-packages/", "dist-packages/"):
        at = path.rfind(mark)
        if at >= 0:
            return path[at + len(mark):]
    parts = path.replace("\\", "/").split("/")
    for i, part in enumerate(parts[:-1]):
        if part in _PACKAGES:  # a checkout: /workspace/AReaL/areal/..., /verl/verl/...
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
    """The rule for a Ray task name: verl's "actor_rollout_compute_ref_log_prob" ends with the
    worker method's name; OpenRLHF's "ReferenceModelRayActor.forward" names the model."""
    cls, method = frame.task.split(".", 1)
    names = [method] + [method[len(p):] for p in _TASK_PREFIXES if method.startswith(p)]
    for rule in _RULES:
        if not rule.generic and rule.framework in ("verl", "areal", "openrlhf") \
                and any(n in rule.funcs for n in names):
            return rule
    if method == "forward" and ("Reference" in cls or "Reward" in cls):
        return _Rule(frozenset({method}), (), "log-prob", "ref" if "Reference" in cls else "",
                     "model actor forward", "openrlhf")
    if "Critic" in cls and method in ("fit", "forward", "append", "ppo_train"):
        return _Rule(frozenset({method}), (), "critic-update", "critic", "critic", "openrlhf")
    if "LLMRayActor" in cls:
        phase = "engine-start" if method == "__init__" else "generation"
        return _Rule(frozenset({method}), (), phase, "rollout", "vLLM engine actor", "openrlhf")
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
    """Who was computing: the rule's role, refined by the callers (verl's ref policy calls the
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
                      and m[1].framework in ("verl", "areal", "openrlhf")
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


def _marker(pattern: str, phase: str | None, role: str, what: str,
            frameworks: tuple[str, ...] = ()) -> _Marker:
    return _Marker(re.compile(pattern), phase, role, what, frameworks)


# Newest matching line wins; per line, the first marker in this order. Step lines come first:
# verl's carries "timing_s/old_log_prob" and friends, which must not read as a running phase.
_MARKERS: tuple[_Marker, ...] = (
    _marker(r"\bstep:\d+ - ", None, "", "verl finished a step"),
    _marker(r"Train step \d+/\d+ done", None, "", "AReaL finished a step"),
    _marker(r"Global step \d+:", None, "", "OpenRLHF finished a step"),
    # finished markers
    _marker(r"Graph capturing finished|init engine \(profile, create kv cache, warmup model\) took|"
            r"Capture cuda graph end|The server is fired up and ready to roll|"
            r"After building sharding manager", None, "", "the inference engine finished starting"),
    _marker(r"After rollout generation", None, "", "verl finished generation"),
    _marker(r"After update policy", None, "", "verl finished the actor update"),
    _marker(r"After sync model weights in sharding manager|Weights updated to version", None, "",
            "the weight sync finished"),
    _marker(r"seconds to fall asleep", None, "", "vLLM went to sleep (its generation finished)"),
    # engine start
    _marker(r"Initializing an? (?:V1 )?LLM engine|Loading model weights took|Memory profiling takes|"
            r"# (?:GPU|CPU|cpu) blocks:|GPU KV cache size:|Maximum concurrency for|"
            r"Capturing (?:CUDA )?graph|Capturing cudagraphs", "engine-start", "rollout",
            "vLLM is starting"),
    _marker(r"Load weight (?:begin|end)|KV Cache is allocated|Memory pool end|"
            r"Capture cuda graph begin|Init torch distributed begin", "engine-start", "rollout",
            "SGLang is starting"),
    _marker(r"Before building (?:vllm|sglang) rollout|After building (?:vllm|sglang) rollout",
            "engine-start", "rollout", "verl is building the rollout engine"),
    _marker(r"Create \d+ vLLM engines", "engine-start", "rollout", "OpenRLHF is starting vLLM"),
    # weight sync (vLLM sleep mode wakes the weights first, then the KV cache for generation)
    _marker(r"seconds to wake up tags \[[^\]]*kv_cache", "generation", "rollout",
            "vLLM woke its KV cache up for generation"),
    _marker(r"seconds to wake up tags", "weight-sync", "actor", "vLLM woke its weights up for the sync"),
    _marker(r"(?:Before|After) state_dict\(\) in sharding manager|sync_weights|update_weights|"
            r"[Uu]pdating weights|broadcast_to_vllm|[Bb]roadcasting weights", "weight-sync", "actor",
            "weight sync running"),
    # generation
    _marker(r"Processed prompts:", "generation", "rollout", "vLLM generation progress"),
    _marker(r"After entering rollout sharding manager|generate_sequences", "generation", "rollout",
            "verl generation running"),
    _marker(r"\bGenerating\b(?! \w+ split)", "generation", "rollout", "generation running"),
    _marker(r"Starting experience making", "log-prob", "actor",
            "OpenRLHF experience making (log-probs)"),
    # log-prob
    _marker(r"compute_ref_log_prob|\bref_log_prob\b|\bref logp\b", "log-prob", "ref",
            "reference log-prob running"),
    _marker(r"compute_log_prob|\bold_log_prob\b|compute_logp|recompute logp", "log-prob", "actor",
            "log-prob computation running"),
    # updates
    _marker(r"update_critic|critic update", "critic-update", "critic", "critic update running"),
    _marker(r"Before update policy|update_policy|update_actor|\bppo_update\b|\bppo update\b|"
            r"\btrain_batch\b", _UPDATE, "actor", "actor update running"),
    _marker(r"Train epoch \[", _UPDATE, "actor", "OpenRLHF PPO training epoch", ("openrlhf",)),
    _marker(r"(?<![\w/])[Rr]ollout(?![\w/])", "generation", "rollout", "AReaL rollout", ("areal",)),
)
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
    are read). ``framework``: the job's framework when known (verl, areal, openrlhf); frames
    are read whatever it says, but a framework's fuzzy log markers only count for it.
    """
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
