"""The phase of an OOM: from the traceback frames, else the log lines before it.

Every file of fixtures/logs/oom/ (README there) must give the phase, confidence and role below,
and the reason must name what decided it (the frame's function and file:line, or the line).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltui.diagnosis.oom.numbers import numbers_from_event
from rltui.diagnosis.oom.phase import frames_of, read_phase
from rltui.diagnosis.oom.types import CONFIDENCES, PHASES, OomPhase
from rltui.model import LogEvent
from rltui.parsing.events import EventReader
from rltui.parsing.noise import strip_noise
from tests.importcheck import forbidden_loaded

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "fixtures" / "logs"
OOM_LOGS = LOGS / "oom"
OOM_KINDS = ("cuda-oom", "engine-oom", "ray-oom")


def load(path: Path, lines: list[str] | None = None) -> tuple[LogEvent, list[str]]:
    """The file's last OOM event and the cleaned lines before it (what the log source holds)."""
    raw = lines if lines is not None else path.read_text(encoding="utf-8").splitlines()
    cleaned = [strip_noise(line) for line in raw]
    reader = EventReader()
    events = []
    for i, c in enumerate(cleaned, 1):
        events += reader.feed(c.text, i, float(i), (c.rank, c.actor))
    events += reader.flush()
    ooms = [e for e in sorted(events, key=lambda e: e.line_no)
            if e.kind in OOM_KINDS or (e.kind == "child-failed" and e.field("possible_host_oom"))]
    assert ooms, f"no OOM event in {path.name}"
    event = ooms[-1]
    return event, [c.text for c in cleaned[:event.line_no - 1]]


# file -> (framework, phase, confidence, role, what the reason must name)
PHASE_TABLE = {
    "verl-generation-vllm.log": ("verl", "generation", "high", "rollout",
                                 ["execute_model", "vllm/worker/model_runner.py:1791", "generate_sequences"]),
    "verl-logprob-actor.log": ("verl", "log-prob", "high", "actor",
                               ["compute_log_prob", "verl/workers/actor/dp_actor.py:339"]),
    "verl-logprob-ref.log": ("verl", "log-prob", "high", "ref",
                             ["compute_log_prob", "verl/workers/actor/dp_actor.py:339",
                              "compute_ref_log_prob"]),
    "verl-actor-backward.log": ("verl", "actor-backward", "high", "actor",
                                ["update_policy", "verl/workers/actor/dp_actor.py:470",
                                 "_engine_run_backward", "torch/autograd/graph.py:823"]),
    "verl-critic-update.log": ("verl", "critic-update", "high", "critic",
                               ["update_critic", "verl/workers/critic/dp_critic.py:225"]),
    "verl-weight-sync.log": ("verl", "weight-sync", "high", "actor",
                             ["__enter__", "verl/workers/sharding_manager/fsdp_vllm.py:146"]),
    "verl-2828-entropy.log": ("verl", "log-prob", "high", "actor",
                              ["compute_log_prob", "verl/workers/actor/dp_actor.py:332"]),
    "verl-oom-cut.log": ("verl", "actor-forward", "high", "actor",
                         ["update_policy", "verl/workers/actor/dp_actor.py:431", "_forward_micro_batch"]),
    "areal-compute-logp-ref.log": ("areal", "log-prob", "high", "ref",
                                   ["forward", "areal/engine/fsdp_engine.py:1012", "compute_logp"]),
    "areal-ppo-update.log": ("areal", "actor-forward", "high", "actor",
                             ["train_batch", "areal/engine/fsdp_engine.py:938", "ppo_update",
                              "modeling_qwen3.py:542"]),
    "areal-sglang-engine-start.log": ("areal", "engine-start", "high", "rollout",
                                      ["capture_one_batch_size",
                                       "sglang/srt/model_executor/cuda_graph_runner.py:646"]),
    "openrlhf-make-experience.log": ("openrlhf", "log-prob", "high", "ref",
                                     ["forward", "openrlhf/trainer/ray/launcher.py:129", "make_experience"]),
    "ray-oom-killer.log": ("verl", "generation", "high", "rollout",
                           ["Ray task WorkerDict.actor_rollout_generate_sequences"]),
    "torchrun-sigkill.log": ("unknown", "generation", "medium", "rollout",
                             ["log line 5 before the OOM", "Processed prompts"]),
}


def test_every_oom_fixture_has_a_phase():
    assert {p.name for p in OOM_LOGS.glob("*.log")} == set(PHASE_TABLE)


@pytest.mark.parametrize("name", sorted(PHASE_TABLE))
def test_fixture_phase(name):
    framework, phase, confidence, role, names = PHASE_TABLE[name]
    event, before = load(OOM_LOGS / name)
    got = read_phase(event, before, framework)
    assert (got.phase, got.confidence, got.role) == (phase, confidence, role), got.reason
    for word in names:
        assert word in got.reason, (word, got.reason)
    assert len(got.reason) <= 300


@pytest.mark.parametrize("name", sorted(n for n, row in PHASE_TABLE.items() if row[2] == "high"))
def test_frames_decide_whatever_the_framework_argument_says(name):
    _, phase, confidence, role, _ = PHASE_TABLE[name]
    event, before = load(OOM_LOGS / name)
    for framework in ("unknown", "verl", "areal", "openrlhf"):
        got = read_phase(event, before, framework)
        assert (got.phase, got.confidence, got.role) == (phase, confidence, role), framework


@pytest.mark.parametrize("name, phase, role, names", [
    ("event-oom-verl-2828.log", "log-prob", "actor", ["compute_log_prob", "verl/workers/actor/dp_actor.py:332"]),
    ("event-oom-ray.log", "actor-backward", "actor", ["update_policy", "dp_actor.py:470", "loss.backward()"]),
])
def test_the_older_event_fixtures(name, phase, role, names):
    event, before = load(LOGS / name)
    got = read_phase(event, before, "verl")
    assert (got.phase, got.confidence, got.role) == (phase, "high", role)
    assert all(word in got.reason for word in names), got.reason


@pytest.mark.parametrize("name, engine", [("event-vllm-free-memory.log", "vllm"),
                                          ("event-vllm-cache-blocks.log", "vllm"),
                                          ("event-sglang-start.log", "sglang")])
def test_engine_start_errors_are_the_engine_start(name, engine):
    event, before = load(LOGS / name)
    assert event.kind == "engine-oom"
    got = read_phase(event, before)
    assert (got.phase, got.confidence, got.role) == ("engine-start", "high", "rollout")
    assert engine in got.reason and str(event.field("reason")) in got.reason


# -- a cut text ------------------------------------------------------------------------------------
def test_the_cut_oom_gives_partial_numbers_and_a_phase():
    event, before = load(OOM_LOGS / "verl-oom-cut.log")
    n = numbers_from_event(event)
    assert n.requested is not None and n.capacity is not None and n.free is None
    assert read_phase(event, before, "verl").phase == "actor-forward"


def test_every_cut_of_a_fixture_gives_a_result():
    """The file cut after any of its lines: whatever event is left gives a valid phase."""
    lines = (OOM_LOGS / "verl-actor-backward.log").read_text(encoding="utf-8").splitlines()
    for end in range(1, len(lines) + 1):
        cleaned = [strip_noise(line) for line in lines[:end]]
        reader = EventReader()
        events = []
        for i, c in enumerate(cleaned, 1):
            events += reader.feed(c.text, i, float(i), (c.rank, c.actor))
        events += reader.flush()
        for event in events:
            got = read_phase(event, [c.text for c in cleaned[:event.line_no - 1]], "verl")
            assert got.phase in PHASES and got.confidence in CONFIDENCES
            numbers_from_event(event)


def test_a_traceback_cut_before_its_exception_line_still_reads_its_frames():
    lines = (OOM_LOGS / "verl-actor-backward.log").read_text(encoding="utf-8").splitlines()[:29]
    cleaned = [strip_noise(line).text for line in lines]
    reader = EventReader()
    events = [e for i, t in enumerate(cleaned, 1) for e in reader.feed(t, i, 0.0)] + reader.flush()
    (event,) = events
    assert event.kind == "traceback" and event.field("truncated") is True
    got = read_phase(event, cleaned[:event.line_no - 1], "verl")
    assert (got.phase, got.confidence) == ("actor-backward", "high")


# -- frames without a framework -------------------------------------------------------------------
def _event(text: str, kind: str = "cuda-oom") -> LogEvent:
    return LogEvent(kind=kind, line_no=1, end_line=len(text.splitlines()), arrival=0.0,
                    summary="CUDA OOM", text=text)


OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
TORCH_BACKWARD = f"""Traceback (most recent call last):
  File "/home/me/train.py", line 88, in <module>
    loss.backward()
  File "/opt/conda/lib/python3.11/site-packages/torch/_tensor.py", line 626, in backward
    torch.autograd.backward(
  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/__init__.py", line 347, in backward
    _engine_run_backward(
  File "/opt/conda/lib/python3.11/site-packages/torch/autograd/graph.py", line 823, in _engine_run_backward
    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass
{OOM_LINE}"""
TORCH_FORWARD = f"""Traceback (most recent call last):
  File "/home/me/train.py", line 80, in <module>
    out = model(batch)
  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1762, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/me/model.py", line 12, in forward
    return self.head(x)
{OOM_LINE}"""


def test_an_unknown_framework_gets_backward_from_torch_frames():
    got = read_phase(_event(TORCH_BACKWARD), [], "unknown")
    assert (got.phase, got.confidence, got.role) == ("actor-backward", "high", "")
    assert "_engine_run_backward" in got.reason and "torch/autograd/graph.py:823" in got.reason


def test_an_optimizer_step_is_part_of_the_update():
    text = f"""Traceback (most recent call last):
  File "/home/me/train.py", line 91, in <module>
    optimizer.step()
  File "/opt/conda/lib/python3.11/site-packages/torch/optim/optimizer.py", line 493, in wrapper
    out = func(*args, **kwargs)
  File "/opt/conda/lib/python3.11/site-packages/torch/optim/adamw.py", line 209, in step
    has_complex = self._init_group(
{OOM_LINE}"""
    got = read_phase(_event(text), [])
    assert (got.phase, got.confidence) == ("actor-backward", "high") and "optimizer" in got.reason


def test_an_unknown_framework_with_nothing_to_go_on_is_unknown_and_low():
    got = read_phase(_event(TORCH_FORWARD), ["epoch 1 loss 2.31", ""], "unknown")
    assert (got.phase, got.confidence, got.role) == ("unknown", "low", "")
    assert "forward at" in got.reason and "model.py:12" in got.reason
    bare = read_phase(_event(OOM_LINE), [])
    assert (bare.phase, bare.confidence) == ("unknown", "low")


def test_an_engine_start_frame_wins_over_the_model_run_inside_it():
    text = f"""Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/verl/workers/fsdp_workers.py", line 560, in init_model
    self.rollout, self.rollout_sharding_manager = self._build_rollout(
  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/llm.py", line 243, in __init__
    self.llm_engine = LLMEngine.from_engine_args(
  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 229, in determine_num_available_blocks
    self.model_runner.profile_run()
  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line 1330, in profile_run
    self._dummy_run(max_num_batched_tokens, max_num_seqs)
  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line 1455, in _dummy_run
    self.execute_model(model_input, kv_caches, intermediate_tensors)
  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/model_runner.py", line 1791, in execute_model
    output: SamplerOutput = self.model.sample(
{OOM_LINE}"""
    got = read_phase(_event(text), [], "verl")
    assert (got.phase, got.confidence, got.role) == ("engine-start", "high", "rollout")
    assert "_dummy_run" in got.reason and "vllm/worker/model_runner.py:1455" in got.reason


def test_a_ray_task_name_alone_decides_and_an_update_without_inner_frames_is_not_sure():
    driver = """Traceback (most recent call last):
  File "/verl/verl/trainer/ppo/ray_trainer.py", line 1214, in fit
    actor_output = self.actor_rollout_wg.update_actor(batch)
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 930, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_update_actor() (pid=1, ip=10.0.0.1)
""" + OOM_LINE
    got = read_phase(_event(driver), [], "verl")
    assert (got.phase, got.confidence, got.role) == ("actor-backward", "medium", "actor")
    assert "forward or backward not known" in got.reason
    values = driver.replace("update_actor(batch)", "compute_values(batch)").replace(
        "actor_rollout_update_actor", "critic_compute_values")
    got = read_phase(_event(values), [], "verl")
    assert (got.phase, got.confidence, got.role) == ("critic-update", "high", "critic")
    assert "compute_values" in got.reason


def test_the_driver_s_call_decides_when_the_worker_frames_are_missing():
    text = """Traceback (most recent call last):
  File "/verl/verl/trainer/ppo/ray_trainer.py", line 1166, in fit
    ref_log_prob = self.ref_policy_wg.compute_ref_log_prob(batch)
  File "/usr/local/lib/python3.10/dist-packages/ray/_private/worker.py", line 930, in get_objects
    raise value
""" + OOM_LINE
    got = read_phase(_event(text), [], "verl")
    assert (got.phase, got.confidence, got.role) == ("log-prob", "high", "ref")
    assert "self.ref_policy_wg.compute_ref_log_prob(batch)" in got.reason
    assert "verl/trainer/ppo/ray_trainer.py:1166" in got.reason


def test_a_checkout_path_without_the_framework_name_counts_for_the_given_framework():
    text = f"""Traceback (most recent call last):
  File "/home/me/myfork/workers/actor/dp_actor.py", line 332, in compute_log_prob
    entropy, log_probs = self._forward_micro_batch(
{OOM_LINE}"""
    assert read_phase(_event(text), [], "verl").phase == "log-prob"
    assert read_phase(_event(text), [], "unknown").phase == "unknown"


def test_frames_of_reads_code_lines_prefixes_and_ray_tasks():
    text = ("(TaskRunner pid=1)   File \"/x/verl/a.py\", line 3, in f\n"
            "(TaskRunner pid=1)     g(1)\n"
            "(TaskRunner pid=1)     ^^^^\n"
            "ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_generate_sequences()\n"
            "5391\t38.42\tray::WorkerDict.actor_rollout_update_actor\n")
    frames = frames_of(text)
    assert [(fr.func, fr.code, fr.task) for fr in frames] == [
        ("f", "g(1)", ""), ("actor_rollout_generate_sequences", "", "WorkerDict.actor_rollout_generate_sequences")]


# -- the lines before ------------------------------------------------------------------------------
BARE = _event(OOM_LINE)
STEP = ("(TaskRunner pid=2213) step:6 - actor/entropy:0.58 - timing_s/gen:171.2 - "
        "timing_s/old_log_prob:12.9 - timing_s/ref:11.8 - timing_s/update_actor:58.3")


@pytest.mark.parametrize("before, framework, phase, confidence, role", [
    ([("(WorkerDict pid=3) INFO:verl.workers.fsdp_workers:After entering rollout sharding manager, "
       "memory allocated (GB): 12.40, memory reserved (GB): 13.02")], "verl", "generation", "medium",
     "rollout"),
    (["Processed prompts:  45%|████▌     | 230/512 [00:31<00:38,  7.33it/s]"], "unknown", "generation",
     "medium", "rollout"),
    ([STEP], "verl", "unknown", "low", ""),
    (["Before update policy, memory allocated (GB): 30.1", "", "   "], "verl", "actor-backward", "medium",
     "actor"),
    (["(AReaL) 20260521-18:37:16.123 FSDPPPOActor INFO: compute_logp on 512 sequences"], "areal",
     "log-prob", "medium", "actor"),
    (["(AReaL) 20260521-18:37:16.123 RLTrainer INFO: ref logp"], "areal", "log-prob", "medium", "ref"),
    (["(AReaL) 20260521-18:37:16.123 WorkflowExecutor INFO: Rollout 512/512 accepted"], "areal",
     "generation", "medium", "rollout"),
    (["(AReaL) 20260521-18:37:16.123 WorkflowExecutor INFO: Rollout 512/512 accepted"], "unknown",
     "unknown", "low", ""),
    (["│ rollout/reward │ 0.31 │"], "areal", "unknown", "low", ""),
    (["Generating train split: 100%|██████████| 7473/7473"], "unknown", "unknown", "low", ""),
    (["[2026-05-21 18:39:46 TP0] Capture cuda graph begin. This can take up to several minutes."],
     "areal", "engine-start", "medium", "rollout"),
    (["[2026-05-21 18:39:46 TP0] Capture cuda graph begin.",
      "[2026-05-21 18:39:58 TP0] Capture cuda graph end. Time elapsed: 12.07 s"], "areal", "unknown",
     "low", ""),
    (["INFO 05-21 18:35:02 [core.py:62] Initializing a V1 LLM engine (v0.9.2) with config: model=..."],
     "unknown", "engine-start", "medium", "rollout"),
    (["(ActorModelRayActor pid=7) Train epoch [1/1]:  40%|████      | 8/20"], "openrlhf", "actor-backward",
     "medium", "actor"),
    (["(CriticModelRayActor pid=8) Train epoch [1/1]:  40%|████      | 8/20"], "openrlhf", "critic-update",
     "medium", "critic"),
    (["INFO update_critic"], "verl", "critic-update", "medium", "critic"),
    (["\x1b[36m(TaskRunner pid=1)\x1b[0m Before state_dict() in sharding manager memory, memory allocated"],
     "verl", "weight-sync", "medium", "actor"),
    (["INFO 08-13 19:26:24 experience_maker.py:412] 🚀 Starting experience making with 1024 samples"],
     "openrlhf", "log-prob", "medium", "actor"),
    (["compute_log_prob", STEP], "verl", "unknown", "low", ""),
    (["INFO 05-21 18:40:58 [executor_base.py:208] It took 2.315 seconds to wake up tags ['weights']."],
     "verl", "weight-sync", "medium", "actor"),
    (["INFO 05-21 18:41:02 [executor_base.py:208] It took 0.402 seconds to wake up tags ['kv_cache']."],
     "verl", "generation", "medium", "rollout"),
    (["INFO 05-21 18:43:12 [executor_base.py:203] It took 0.385 seconds to fall asleep."], "verl",
     "unknown", "low", ""),
    ([], "verl", "unknown", "low", ""),
])
def test_lines_before(before, framework, phase, confidence, role):
    got = read_phase(BARE, before, framework)
    assert (got.phase, got.confidence, got.role) == (phase, confidence, role), got.reason
    if confidence == "medium":
        assert "log line" in got.reason and '"' in got.reason  # names the line, quoted


def test_a_step_line_says_the_step_finished():
    got = read_phase(BARE, [STEP], "verl")
    assert "verl finished a step" in got.reason and "log line 1 before the OOM" in got.reason


def test_frames_just_before_a_lone_oom_line_decide_with_medium_confidence():
    """The traceback's head was cut (log rotation) so the OOM line stands alone after its frames."""
    lines = (OOM_LOGS / "verl-actor-backward.log").read_text(encoding="utf-8").splitlines()
    cleaned = [strip_noise(line).text for line in lines]
    start = next(i for i, t in enumerate(cleaned) if "ray::WorkerDict" in t) + 1
    before, oom_line = cleaned[start:-1], cleaned[-1]
    got = read_phase(_event(oom_line), before, "verl")
    assert (got.phase, got.confidence, got.role) == ("actor-backward", "medium", "actor")
    assert "update_policy" in got.reason and "just before" in got.reason


# -- robustness and purity -------------------------------------------------------------------------
FIXTURE_LINES = [line for p in sorted(OOM_LOGS.glob("*.log"))
                 for line in p.read_text(encoding="utf-8").splitlines()]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.text(max_size=200), st.sampled_from(FIXTURE_LINES)), max_size=40),
       st.lists(st.one_of(st.text(max_size=120), st.sampled_from(FIXTURE_LINES)), max_size=40),
       st.sampled_from(["cuda-oom", "engine-oom", "ray-oom", "child-failed", "traceback"]),
       st.sampled_from(["verl", "areal", "openrlhf", "unknown", "something-else"]))
def test_read_phase_is_total(text_lines, before, kind, framework):
    got = read_phase(_event("\n".join(text_lines), kind), before, framework)
    assert isinstance(got, OomPhase)
    assert got.phase in PHASES and got.confidence in CONFIDENCES and len(got.reason) <= 300
    assert got.role in ("actor", "ref", "critic", "rollout", "")


@pytest.mark.parametrize("module", ["rltui.diagnosis.oom.phase", "rltui.diagnosis.oom.numbers"])
def test_oom_modules_are_pure(module):
    assert forbidden_loaded([module], ["textual", "rich", "pynvml", "psutil", "subprocess"], cwd=str(ROOT)) == []
