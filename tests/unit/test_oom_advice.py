"""The cuda-oom symptom's next steps name the keys of the job's own framework (the OOM triage's
table in rltui.frameworks, never a second one), and general words where rltui knows no keys:
verl's keys for a verl job only, never for OpenRLHF, AReaL, DeepSpeed, torchtitan or a plain
torchrun script."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rltui import jobs
from rltui.diagnosis.logs import cuda_oom
from rltui.diagnosis.oom.advice import job_framework, next_steps
from rltui.diagnosis.thresholds import Thresholds
from rltui.frameworks import FRAMEWORKS, by_name, framework_in_cmdline
from rltui.frameworks import areal as areal_facts
from rltui.frameworks import openrlhf as openrlhf_facts
from rltui.frameworks import verl as verl_facts
from rltui.model import (
    OK,
    DepartedRank,
    LogEvent,
    LogFileState,
    NodeSnapshot,
    ProcInfo,
    SourceState,
    replace,
)
from rltui.parsing.events import EventReader
from rltui.parsing.noise import strip_noise

T0 = 1_800_000_000.0
GIB = 2**30
OOM_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "logs" / "oom"

VERL = ("python3", "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=grpo",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6")
VERL_UNDER_TORCHRUN = ("/usr/bin/python", "/usr/local/bin/torchrun", "--nproc-per-node", "8",
                       "-m", "verl.trainer.main_ppo", "trainer.nnodes=1")
AREAL = ("python3", "-m", "areal.launcher.local", "examples/gsm8k_grpo.py", "--config",
         "gsm8k_grpo.yaml")
OPENRLHF = ("python3", "-m", "openrlhf.cli.train_ppo_ray", "--micro_train_batch_size", "8",
            "--vllm_num_engines", "2")
UNKNOWN = {
    "plain torchrun": ("python", "/usr/bin/torchrun", "--nproc-per-node", "4", "train.py"),
    "deepspeed": ("python", "/usr/bin/deepspeed", "--num_gpus", "8", "train.py",
                  "--deepspeed", "ds_config.json"),
    "torchtitan": ("python", "-m", "torch.distributed.run", "--nproc-per-node", "8",
                   "-m", "torchtitan.train", "--job.config_file", "llama3_8b.toml"),
    "accelerate": ("python", "/usr/bin/accelerate", "launch", "sft.py"),
}


def oom(text: str = "torch.OutOfMemoryError: CUDA out of memory.") -> LogEvent:
    return LogEvent(kind="cuda-oom", line_no=2, end_line=2, arrival=T0, summary="CUDA OOM",
                    text=text, fields=(("requested", 2 * GIB), ("gpu", 3),
                                       ("capacity", 80 * GIB), ("free", GIB)))


def rank_log(event: LogEvent | None = None) -> LogFileState:
    return LogFileState(path="/logs/rank3.log", rank=3, events=(event or oom(),))


def proc(cmdline, rank=3, pid=103) -> ProcInfo:
    return ProcInfo(pid=pid, rank=rank, cmdline=tuple(cmdline), state="sleeping")


def snap(procs=None, departed=(), logs=None) -> NodeSnapshot:
    """``procs=None``: the processes were never looked at (logs read offline)."""
    sources = () if procs is None else (SourceState("procs", OK, T0, T0),)
    return NodeSnapshot(timestamp=T0 + 10, procs=tuple(procs or ()), departed=tuple(departed),
                        logs=tuple(logs if logs is not None else [rank_log()]), sources=sources)


def advice(s: NodeSnapshot) -> str:
    (symptom,) = cuda_oom(s, [], Thresholds())
    assert symptom.id == "cuda-oom"
    return "\n".join(symptom.next_steps)


def knob_keys(name: str) -> set[str]:
    fw = by_name(name)
    assert fw is not None and fw.oom is not None
    return {k.key for knobs in fw.oom.knobs.values() for k in knobs}


def other_frameworks_keys(name: str) -> set[str]:
    return {key for fw in FRAMEWORKS if fw.name != name and fw.oom is not None
            for key in knob_keys(fw.name)}


def assert_only_own_keys(text: str, name: str) -> None:
    foreign = sorted(k for k in other_frameworks_keys(name) if k in text)
    assert foreign == [], f"{name}: names another framework's keys {foreign}"


# -- each framework's own keys ---------------------------------------------------------------------

@pytest.mark.parametrize("cmdline", [VERL, VERL_UNDER_TORCHRUN], ids=["python -m", "torchrun"])
def test_a_verl_job_gets_verl_s_keys(cmdline):
    text = advice(snap([proc(cmdline)]))
    for key in (verl_facts.LOGPROB_MB, verl_facts.ROLLOUT_UTIL, verl_facts.PPO_MB,
                verl_facts.CKPT):
        assert key in text
    # the micro batch per GPU, not the mini batch (halving that changes the effective batch)
    assert "ppo_mini_batch_size" not in text
    # FSDP's keys mean nothing to a Megatron actor, and the symptom does not read the strategy
    assert "fsdp_config" not in text
    assert_only_own_keys(text, "verl")


def test_a_departed_verl_rank_s_command_line_still_names_the_framework():
    """Every rank gone (the OOM took the job down): the ranks as last seen say verl."""
    gone = DepartedRank(pid=103, rank=3, last_seen=T0, gone_since=T0 + 1,
                        info=proc(VERL_UNDER_TORCHRUN))
    text = advice(snap([], departed=[gone]))
    assert verl_facts.LOGPROB_MB in text and verl_facts.PPO_MB in text


def test_an_areal_job_gets_areal_s_keys():
    text = advice(snap([proc(AREAL)]))
    for key in (areal_facts.MAX_TOKENS, areal_facts.CKPT, areal_facts.MEM_FRACTION,
                areal_facts.CONCURRENT):
        assert key in text
    # the token budget never below one whole sequence: AReaL's own rule, named with its keys
    assert "not below train_dataset.max_length + gconfig.max_new_tokens" in text
    assert "actor_rollout_ref" not in text
    assert_only_own_keys(text, "areal")


def test_an_openrlhf_job_gets_its_flags():
    text = advice(snap([proc(OPENRLHF)]))
    for flag in (openrlhf_facts.MICRO_ROLLOUT, openrlhf_facts.VLLM_UTIL,
                 openrlhf_facts.MICRO_TRAIN, openrlhf_facts.CKPT, openrlhf_facts.ADAM_OFFLOAD):
        assert flag in text
    assert "actor_rollout_ref" not in text
    assert_only_own_keys(text, "openrlhf")


def test_without_a_command_line_the_traceback_names_the_framework():
    """Logs read offline (no process): the real OpenRLHF OOM fixture's traceback runs through
    openrlhf/ packages."""
    reader, events = EventReader(), []
    path = OOM_LOGS / "openrlhf-make-experience.log"
    for i, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        cleaned = strip_noise(raw)
        events += reader.feed(cleaned.text, i, T0 + i, (cleaned.rank, cleaned.actor))
    events += reader.flush()
    found = [e for e in events if e.kind == "cuda-oom"]
    assert found
    text = advice(snap(None, logs=[LogFileState(path=str(path), events=tuple(found))]))
    assert openrlhf_facts.MICRO_ROLLOUT in text and "actor_rollout_ref" not in text


# -- no framework rltui knows keys for ---------------------------------------------------------------

@pytest.mark.parametrize("cmdline", UNKNOWN.values(), ids=UNKNOWN.keys())
def test_a_job_of_no_known_framework_gets_general_words_and_the_triage(cmdline):
    text = advice(snap([proc(cmdline)]))
    for words in ("micro batch size", "the inference engine's memory fraction",
                  "gradient checkpointing", "press m in the app", "`rltui oom"):
        assert words in text
    keys = {key for fw in FRAMEWORKS if fw.oom is not None for key in knob_keys(fw.name)}
    assert sorted(k for k in keys if k in text) == []


def test_logs_read_offline_with_no_framework_in_the_traceback_get_general_words():
    text = advice(snap(None))
    assert "micro batch size" in text and "actor_rollout_ref" not in text


def test_an_override_path_naming_a_framework_is_not_its_program():
    """``data.path=/srv/verl/...`` is an override, not the program: no verl keys."""
    text = advice(snap([proc(("python", "train.py", "data.path=/srv/verl/gsm8k"))]))
    assert "actor_rollout_ref" not in text


def test_a_user_script_with_verl_s_overrides_is_a_verl_job():
    """A user's own entry point composing verl's config (``python3 train.py
    actor_rollout_ref...=8``, as verl's examples and rltui's own demo run): its overrides' keys
    say verl, as the config file's keys would for the triage."""
    cmdline = ("python3", "my_grpo.py", "--config-name=ppo_trainer",
               "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "trainer.n_gpus_per_node=8")
    text = advice(snap([proc(cmdline)]))
    assert verl_facts.LOGPROB_MB in text and verl_facts.PPO_MB in text
    assert job_framework(snap([proc(cmdline)])) == "verl"
    # an override of one key of no framework's config says nothing
    assert job_framework(snap([proc(("python", "train.py", "model.lr=1e-5"))])) == "unknown"


# -- command lines as they run: wrappers and launchers; and what is not the program -------------------

RAY = ("/usr/bin/python3", "/usr/local/bin/ray", "job", "submit", "--address",
       "http://127.0.0.1:8265", "--runtime-env-json", '{"working_dir": "/root/verl"}', "--")


@pytest.mark.parametrize(("cmdline", "name"), [
    ((*RAY, "python3", "-m", "verl.trainer.main_ppo", "data.train_batch_size=256"), "verl"),
    ((*RAY, "python3", "-m", "openrlhf.cli.train_ppo_ray", "--pretrain",
      "OpenRLHF/Llama-3-8b-sft-mixture"), "openrlhf"),
    (("python3", "/home/u/verl/verl/trainer/main_ppo.py", "trainer.nnodes=1"), "verl"),
    (("python3", "-u", "-mverl.trainer.main_ppo"), "verl"),
    (("torchrun", "--nnodes", "2", "--rdzv-endpoint", "10.0.0.1:29500", "-m",
      "verl.trainer.fsdp_sft_trainer"), "verl"),
    (("deepspeed", "--num_gpus", "8", "--module", "openrlhf.cli.train_sft", "--max_len", "2048"),
     "openrlhf"),
    (("python3", "-m", "areal.launcher.ray", "examples/math/gsm8k_grpo.py", "--config",
      "examples/math/gsm8k_grpo.yaml"), "areal"),
], ids=["ray job submit verl", "ray job submit openrlhf", "verl script", "-mverl", "torchrun -m",
        "deepspeed --module", "areal on ray"])
def test_real_command_lines_name_their_framework(cmdline, name):
    assert framework_in_cmdline(cmdline) == name


@pytest.mark.parametrize("cmdline", [
    ("python", "train.py", "--save_path", "/ckpt/openrlhf/run1"),
    ("torchrun", "--nproc-per-node", "8", "train.py", "--data", "/data/verl/trainer/gsm8k.jsonl"),
    ("python", "pretrain.py", "--run-name", "main_ppo"),
    ("/home/u/openrlhf/.venv/bin/python", "train.py"),
], ids=["a flag's path", "a flag's path under torchrun", "a flag's word", "the interpreter's path"])
def test_only_the_program_names_the_framework(cmdline):
    """A plain script whose flag values or interpreter path happen to hold a framework's folder
    or entry point's name is no job of that framework: no keys of it in the advice."""
    assert framework_in_cmdline(cmdline) == "unknown"
    text = advice(snap([proc(cmdline)]))
    keys = {key for fw in FRAMEWORKS if fw.oom is not None for key in knob_keys(fw.name)}
    assert sorted(k for k in keys if k in text) == []


def test_a_hostile_command_line_names_nothing():
    """Huge, with control characters, NUL and undecodable bytes (as psutil hands them over),
    an override nested thousands deep."""
    cmdline = ("python", "train.py", *(["--x", "a" * 10_000] * 500),
               "\x00\x1b[31mverl.trainer.\udcff", f"a.b={'[' * 5000}{']' * 5000}", "-m")
    assert framework_in_cmdline(cmdline) == "unknown"
    assert job_framework(snap([proc(cmdline)])) == "unknown"  # its overrides read too
    assert "micro batch size" in advice(snap([proc(cmdline)]))


def test_no_secret_of_a_command_line_reaches_the_symptom():
    """The advice names keys from the registry, never a value of the job's command line."""
    secrets = ("hf_SeCrEtToKeN0123456789abcdefghij", "wandb0123456789abcdef0123456789abcdef01")
    cmdline = (*OPENRLHF, "--hf_token", secrets[0], f"--wandb_key={secrets[1]}")
    (symptom,) = cuda_oom(snap([proc(cmdline)]), [], Thresholds())
    assert openrlhf_facts.MICRO_TRAIN in "\n".join(symptom.next_steps)
    assert not any(secret in repr(symptom) for secret in secrets)


# -- two jobs on one node: each job's view its own framework ------------------------------------------

def test_each_job_s_oom_names_its_own_framework_s_keys():
    """A verl job and an AReaL job on one node, the OOM in the AReaL job's log: the AReaL job's
    view (as the monitor diagnoses each job) names AReaL's keys, though the verl job's ranks
    come first on the node."""
    def rank(pid: int, r: int, port: int, cmdline) -> ProcInfo:
        return ProcInfo(pid=pid, rank=r, world_size=2, local_world_size=2, cmdline=cmdline,
                        state="sleeping", job_env=(("MASTER_ADDR", "127.0.0.1"),
                                                   ("MASTER_PORT", str(port))))

    procs = (rank(110, 0, 29500, VERL), rank(111, 1, 29500, VERL),
             rank(210, 0, 29501, AREAL), rank(211, 1, 29501, AREAL))
    areal_log = replace(rank_log(), pid=211, rank=1)
    node = replace(snap(procs, logs=[areal_log]), jobs=tuple(jobs.group(procs)))
    views = {job.id: view for job, view in jobs.partition(node) if job is not None}
    (areal_view,) = [v for v in views.values() if v.logs]
    assert job_framework(areal_view) == "areal"
    text = advice(areal_view)
    assert areal_facts.MAX_TOKENS in text and "actor_rollout_ref" not in text


# -- the keys come from the triage's table ------------------------------------------------------------

@pytest.mark.parametrize("name", [fw.name for fw in FRAMEWORKS if fw.oom and fw.oom.knobs])
def test_every_key_named_is_a_knob_of_that_framework_s_oom_table(name):
    """One source of truth: a key the symptom names is in the table the triage ranks (a key
    written into the advice by hand would fail here once it is not)."""
    own = knob_keys(name)
    lines = next_steps(name)[1:]  # after the pointer to the triage
    # dotted keys and flags (every key of the tables has an underscore; "e.g" and 0.9 do not)
    named = {t for line in lines for t in re.findall(r"--\w+|\b\w+(?:\.\w+)+", line)
             if "_" in t}
    assert named, lines
    # a token budget's floor names the framework's own sequence keys (OomFacts.seq_keys)
    facts = by_name(name).oom
    allowed = own | set(facts.seq_keys or ())
    assert named <= allowed, named - allowed
