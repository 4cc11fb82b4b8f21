"""Pure rules that read who a process is from its command line and environment.

No psutil, no /proc: the process source feeds these with what it read, and tests feed them tables.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

# Shown per process: the settings the hang playbook asks about.
DEBUG_ENV = (
    "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "TORCH_DISTRIBUTED_DEBUG", "NCCL_TIMEOUT",
    "TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "CUDA_LAUNCH_BLOCKING",
    "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "CUDA_VISIBLE_DEVICES",
    # PyTorch's Flight Recorder: whether the rank records, and where its dump goes
    "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
)
# Read per process to tell jobs apart (rltui.jobs) and to find a dead rank's files afterwards:
# the rendezvous a rank joins, the run it belongs to, torchelastic's error file. None is secret.
JOB_ENV = (
    "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE",
    "TORCHELASTIC_RESTART_COUNT", "SLURM_JOB_ID", "SLURM_STEP_ID", "RAY_JOB_ID",
    "RAY_RAYLET_PID",
)
ENGINES = ("vllm", "sglang")
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")

def parse_int(value: str | None) -> int | None:
    """A rank-like integer from the environment; missing, malformed or negative -> None."""
    if value is None:
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return None
    return number if number >= 0 else None


def env_gpu(env: Mapping[str, str]) -> int | None:
    """The physical GPU a rank uses, as its environment implies (None when it cannot tell).

    Torch ranks select ``cuda:LOCAL_RANK`` among the visible devices, so it is the
    CUDA_VISIBLE_DEVICES entry at that position, or LOCAL_RANK itself when the variable is
    unset. A process that sees exactly one device uses that one, whatever its LOCAL_RANK
    (launchers that pin one GPU per process). UUID or MIG entries and an empty list give None.
    """
    local = parse_int(env.get("LOCAL_RANK"))
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return local
    entries = [e.strip() for e in visible.split(",") if e.strip()]
    if len(entries) == 1:
        chosen = entries[0]
    elif local is not None and local < len(entries):
        chosen = entries[local]
    else:
        return None
    return int(chosen) if chosen.isdigit() else None


def ray_bystander(title: str) -> bool:
    """A ``ray::`` title that is no job's process: an idle pooled worker (``ray::IDLE``) or one
    of Ray's own services (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``...), which run on
    every Ray node beside the job (the framework registry lists them)."""
    if not title.startswith("ray::"):
        return False
    from rltui.frameworks import process_role
    role = process_role(title)
    return role is not None and role.framework == "ray" and role.role in ("idle", "service")


def ray_class(title: str) -> str:
    """``ray::WorkerDict.actor_rollout_generate_sequences`` -> ``WorkerDict``."""
    m = re.match(r"ray::([^.\s(]+)", title)
    return m.group(1) if m else "ray"


def _program(cmdline: Sequence[str]) -> tuple[str, str]:
    """What a command line runs: ("module", name) for ``-m``, ("code", "") for ``-c``,
    ("path", path) for a script or any other program."""
    if "python" not in os.path.basename(cmdline[0]).lower():
        return "path", cmdline[0]
    args = iter(cmdline[1:])
    for arg in args:
        if arg == "-m":
            return "module", next(args, "")
        if arg == "-c" or arg.startswith("-c"):
            return "code", ""
        if arg in ("-X", "-W", "--check-hash-based-pycs"):
            next(args, None)  # options that take a value
        elif not arg.startswith("-"):
            return "path", arg
    return "path", cmdline[0]


def role_of(cmdline: Sequence[str], name: str = "") -> str:
    """Ray actor class, "vllm"/"sglang", "torchrun", else the script's or module's base name."""
    if not cmdline:
        return name
    first = cmdline[0]
    if first.startswith("ray::"):
        return ray_class(first)
    for engine in ENGINES:
        if first.lower().startswith(f"{engine}::"):  # VLLM::EngineCore, sglang::scheduler
            return engine
    kind, value = _program(cmdline)
    if kind == "code":
        return "python"
    if kind == "module":
        if value in LAUNCHER_MODULES:
            return "torchrun"
        top = value.split(".")[0]
        return top if top in ENGINES else value.rsplit(".", 1)[-1]
    base = os.path.basename(value)
    base = base[:-3] if base.endswith(".py") else base
    return base if base not in ("", "python") else name


def _pythonish(program: str) -> bool:
    # torch renames the main thread (and so the process) "pt_main_thread"
    base = os.path.basename(program).lower()
    return "python" in base or base == "pt_main_thread"


# Launchers a job's ranks are children of: module (python -m ...) or program name -> kind.
_LAUNCHER_MODULES = {
    "torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
    "deepspeed.launcher.launch": "deepspeed", "deepspeed.launcher.runner": "deepspeed",
    "accelerate.commands.launch": "accelerate", "accelerate.commands.accelerate_cli": "accelerate",
}
_LAUNCHER_PROGRAMS = {"torchrun": "torchrun", "deepspeed": "deepspeed"}


def launcher_of(cmdline: Sequence[str]) -> str:
    """The kind of launcher a command line runs ("torchrun", "deepspeed", "accelerate"), or ""
    for anything else. ``accelerate`` counts only as ``accelerate launch``."""
    if not cmdline or cmdline[0].startswith("ray::"):
        return ""
    kind, value = _program(cmdline)
    if kind == "module":
        found = _LAUNCHER_MODULES.get(value, "")
        if found == "accelerate" and value.endswith("_cli") and "launch" not in cmdline:
            return ""
        return found
    if kind != "path":
        return ""
    base = os.path.basename(value)
    if base == "accelerate":
        rest = list(cmdline[list(cmdline).index(value) + 1:])
        return "accelerate" if rest[:1] == ["launch"] else ""
    return _LAUNCHER_PROGRAMS.get(base, "")
