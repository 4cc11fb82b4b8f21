"""A Slurm job's nodelist, from ``squeue`` (the one Slurm call rltui makes to find nodes).

``job_nodelist(job_id)`` runs ``squeue -h -j JOBID -o %N`` and gives back the nodelist as Slurm
writes it (``node[01-04,07]``); ``rltui.remote.hostlist.expand`` turns it into names. squeue,
not ``scontrol show hostnames``: squeue prints one line per job and works from any login
node, and the expansion is done in Python exactly as Slurm does it.

``parse_nodelist`` is pure, so the parsing is tested without Slurm; the call itself is tested
with a fake ``squeue`` on PATH.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence

from rltui.remote.transports import JOB_ID  # the same ids srun_argv takes

TIMEOUT_S = 30.0  # a slurmctld that does not answer must not hang rltui


class SlurmError(Exception):
    """The job's nodes could not be found; the message says why and what to do."""


def squeue_argv(job_id: str, squeue: str = "squeue") -> list[str]:
    """``squeue -h -j JOBID -o %N``: no header, the job's nodelist only."""
    if not JOB_ID.fullmatch(job_id):
        raise SlurmError(f"{job_id!r} is not a Slurm job id (1234, 1234_5 or 1234+0)")
    return [squeue, "-h", "-j", job_id, "-o", "%N"]


def parse_nodelist(job_id: str, stdout: str) -> str:
    """squeue's output to one hostlist. Several lines (a heterogeneous job's components, an
    array's tasks) are joined; "(null)" and blanks (a pending job has no nodes) are skipped."""
    lists = [line.strip() for line in stdout.splitlines()]
    lists = [x for x in lists if x and x != "(null)"]
    if not lists:
        raise SlurmError(f"Slurm job {job_id} has no nodes (pending, or it has ended; "
                         "squeue -j shows its state)")
    return ",".join(lists)


def job_nodelist(job_id: str, *, squeue: str = "squeue", timeout: float = TIMEOUT_S,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> str:
    """The nodelist of a running job, as Slurm writes it."""
    argv: Sequence[str] = squeue_argv(job_id, squeue)
    try:
        done = run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise SlurmError(f"{squeue} is not found: --slurm-job needs Slurm's client commands "
                         "on this machine (run rltui on a login node, or give --hosts)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{squeue} did not answer in {timeout:g} s (slurmctld unreachable?)"
                         ) from None
    except OSError as exc:
        raise SlurmError(f"{squeue} could not be run: {exc.strerror or exc}") from None
    if done.returncode != 0:
        said = (done.stderr or "").strip().splitlines()
        detail = said[-1] if said else f"exit status {done.returncode}"
        if "Invalid job id" in (done.stderr or ""):
            raise SlurmError(f"Slurm job {job_id} does not exist or has ended ({detail})")
        raise SlurmError(f"squeue -j {job_id} failed: {detail}")
    return parse_nodelist(job_id, done.stdout)
