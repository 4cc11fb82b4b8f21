"""The OOM triage reads the job's config from its driver's command line: the process whose
program is a framework's entry point, never one that merely names a framework in a flag's value
(one detection for the triage and the cuda-oom advice: rltui.frameworks.framework_in_cmdline)."""

from __future__ import annotations

from rltui.model import LogFileState, NodeSnapshot, ProcInfo
from rltui.sources.oominputs import job_cmdline

WORKER = ("python3", "train.py", "--save_path", "/ckpt/openrlhf/run1", "--micro_batch", "8")
DRIVER = ("python3", "-m", "verl.trainer.main_ppo", "actor_rollout_ref.rollout.n=4")


def test_a_flag_value_naming_a_framework_is_not_the_driver():
    log = LogFileState(path="/logs/rank1.log", rank=1)
    worker = ProcInfo(pid=100, rank=0, cmdline=WORKER)
    oom_rank = ProcInfo(pid=101, rank=1, cmdline=("python3", "train.py", "--rank1"))
    # no driver here: the OOM rank's own command line, not the worker that names openrlhf
    assert job_cmdline(NodeSnapshot(timestamp=0.0, procs=(worker, oom_rank)), log) \
        == oom_rank.cmdline
    driver = ProcInfo(pid=99, rank=None, cmdline=DRIVER)
    assert job_cmdline(NodeSnapshot(timestamp=0.0, procs=(worker, oom_rank, driver)), log) \
        == DRIVER
