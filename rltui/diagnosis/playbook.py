"""Next steps from the triage playbook, shared by several symptoms."""

from __future__ import annotations

from rltui.model import ProcInfo


def dump_all_ranks(procs: tuple[ProcInfo, ...]) -> str:
    pids = " ".join(str(p.pid) for p in procs[:16]) or "PID ..."
    more = " ..." if len(procs) > 16 else ""
    return (f"Dump every rank, not one: for p in {pids}{more}; do py-spy dump --pid $p; done "
            "and compare who waits for whom.")


CHECK_LOG_ADVANCING = "Check whether each rank's log still advances (a hang, not slowness)."
SET_DEBUG_ENV = ("Relaunch with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL and a shorter "
                 "NCCL timeout (e.g. NCCL_TIMEOUT=300) so a stuck collective fails fast.")
CUDA_BLOCKING = ("If the exited rank died of a CUDA error, rerun with CUDA_LAUNCH_BLOCKING=1 so "
                 "the error surfaces at the right line (debugging only: large slowdown).")
