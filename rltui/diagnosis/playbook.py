"""Next steps from the triage playbook, shared by several symptoms."""

from __future__ import annotations

from rltui.model import ProcInfo


def dump_all_ranks(procs: tuple[ProcInfo, ...]) -> str:
    """The shell loop that dumps every rank; across nodes one per node over ssh (pids repeat
    from node to node, so a bare pid list would name the wrong processes)."""
    by_host: dict[str, list[int]] = {}
    for p in procs:
        by_host.setdefault(p.host, []).append(p.pid)
    if not set(by_host) - {""}:  # one node: its own pids
        pids = " ".join(str(p.pid) for p in procs[:16]) or "PID ..."
        more = " ..." if len(procs) > 16 else ""
        return (f"Dump every rank, not one: for p in {pids}{more}; do py-spy dump --pid $p; "
                "done and compare who waits for whom.")
    # "on HOST": the node is reached the way the user reaches it (ssh, srun, a Ray dashboard).
    loops = [f"on {host}: for p in {' '.join(map(str, pids[:16]))}; do py-spy dump --pid $p; "
             f"done" + (f" (and {len(pids) - 16} more pids)" if len(pids) > 16 else "")
             for host, pids in list(by_host.items())[:4]]
    more = f"; and {len(by_host) - 4} more nodes" if len(by_host) > 4 else ""
    return ("Dump every rank on every node, not one (in rltui: d asks every node at once): "
            + "; ".join(loops) + more + "; then compare who waits for whom across nodes.")


CHECK_LOG_ADVANCING = "Check whether each rank's log still advances (a hang, not slowness)."
SET_DEBUG_ENV = ("Relaunch with NCCL_DEBUG=INFO TORCH_DISTRIBUTED_DEBUG=DETAIL and a shorter "
                 "NCCL timeout (e.g. NCCL_TIMEOUT=300) so a stuck collective fails fast.")
CUDA_BLOCKING = ("If the exited rank died of a CUDA error, rerun with CUDA_LAUNCH_BLOCKING=1 so "
                 "the error surfaces at the right line (debugging only: large slowdown).")
